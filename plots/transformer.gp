# transformer.gp — tandem: the figures of suite transformer (docs/suites/transformer.md). Called by
# `bench plot` for its line figures (the attention benchmarks over the context length T) with
# lines.gp's variables plus kind ('lines'), metric, runs (the number of results directories) and
# scripts (this directory). The training steps (one batch each) are bar charts: bars.gp's.
# For lines from one run: the colour says the attention mode and the pass (heuristic = fused where
# it applies: blues; conformance = unfused: reds/oranges; forward light, forward + backward dark),
# the dash the dtype (bf16 solid, f16 dashed), the point the head size (d64 circles, d128 squares,
# the cpu's d16 triangles). time and call_peak_bytes on log-log axes (time ~ T^2, the unfused
# call's memory ~ T^2, the fused one's ~ T), GFLOP/s on a log x axis. Then lines.gp / bars.gp draw.

if (!exists("kind") || !exists("scripts")) {
    print "transformer.gp: called by bench plot (which sets kind and scripts first)"
    exit status 2
}
has(s, w) = strstrt(s, w) > 0
colour(s) = has(s, '_conformance') ? (has(s, 'fwdbwd') ? '#b2182b' : '#f4a582') \
                                    : (has(s, 'fwdbwd') ? '#2166ac' : '#92c5de')
dash(s) = has(s, '_f16_') ? 2 : 1
point(s) = has(s, '_d128_') ? 5 : has(s, '_d16_') ? 9 : 7
# The styles go into lines.gp's arrays: the titles (names from the results) are only read, as
# values, never evaluated as code.
if (kind eq 'lines' && runs == 1) {
    array series_colour[n]
    array series_dash[n]
    array series_point[n]
    do for [i=1:n] {
        t = exists(sprintf('t%d', i)) ? value(sprintf('t%d', i)) : ''
        series_colour[i] = 0
        series_dash[i] = dash(t)
        series_point[i] = point(t)
    }
    # lines.gp draws with `lc series_colour[i]`: an index; the named colours are set per index
    do for [i=1:n] {
        t = exists(sprintf('t%d', i)) ? value(sprintf('t%d', i)) : ''
        set linetype (100 + i) lc rgb colour(t)
        series_colour[i] = 100 + i
    }
}
# T doubles from point to point: a log2 x axis with a tic at each T (lines.gp's logx would put
# base-10 tics, none between 512 and 8192 but 1000)
if (kind eq 'lines') { logx = 0; set logscale x 2; set format x '%g' }
if (kind eq 'lines' && (metric eq 'time' || metric eq 'call_peak_bytes')) { logy = 1 }
if (kind eq 'lines' && exists("subtitle") && runs == 1) {
    subtitle = subtitle.'; blue heuristic, red conformance, dark fwd+bwd'
}
# (outside any { } block: gnuplot reads a file loaded inside one as a block of new-style code)
load scripts.'/'.(kind eq 'bars' ? 'bars.gp' : 'lines.gp')
