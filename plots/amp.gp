# amp.gp — tandem: the figures of suite amp (docs/suites/amp.md). Called by `bench plot` for its
# line figures with lines.gp's variables plus kind ('lines'), metric, runs (the number of
# results directories) and scripts (this directory). For lines from one run: one colour per
# precision (f32, tf32, fp16, bf16: the same in every figure), one dash and point type per model
# or op; a zero line on loss_vs_f32, [0:1] on peak_share. Then lines.gp / bars.gp draw.

if (!exists("kind") || !exists("scripts")) {
    print "amp.gp: called by bench plot (which sets kind and scripts first)"
    exit status 2
}
has(s, w) = strstrt(s, w) > 0
prec_colour(s) = has(s, '_tf32') ? 2 : has(s, '_fp16') ? 3 : has(s, '_bf16') ? 4 : 1
shape(s) = has(s, 'mlp_1000_512_128_10') ? 2 : has(s, 'mlp_10000') ? 3 : has(s, 'cnn_bn') ? 4 : \
           has(s, 'conv_') ? 2 : 1
# The styles go into lines.gp's arrays: the titles (names from the results) are only read, as
# values, never evaluated as code.
if (kind eq 'lines' && runs == 1) {
    array series_colour[n]
    array series_dash[n]
    array series_point[n]
    do for [i=1:n] {
        t = exists(sprintf('t%d', i)) ? value(sprintf('t%d', i)) : ''
        series_colour[i] = prec_colour(t)
        series_dash[i] = shape(t)
        series_point[i] = int(word('7 5 9 11', shape(t)))
    }
}
if (metric eq 'loss_vs_f32') {
    set arrow 1 from graph 0, first 0 to graph 1, first 0 nohead lc rgb '#888888' dt 2
}
if (metric eq 'peak_share') { set yrange [0:1] }
# (outside any { } block: gnuplot reads a file loaded inside one as a block of new-style code)
load scripts.'/'.(kind eq 'bars' ? 'bars.gp' : 'lines.gp')
