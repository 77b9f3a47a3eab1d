# cpu-vs-gpu.gp — tandem: the figures of suite cpu-vs-gpu (docs/suites/cpu-vs-gpu.md). Called by
# `bench plot` for its line figures with lines.gp's variables plus kind, metric, runs and scripts.
# For lines from one run: the cpu series grey-blue and the cuda series green, one dash and point
# type per model, so each model's gap between its two lines is the GPU's speedup (log y when the
# figures span decades, as they usually do). Then lines.gp / bars.gp draw.

if (!exists("kind") || !exists("scripts")) {
    print "cpu-vs-gpu.gp: called by bench plot (which sets kind and scripts first)"
    exit status 2
}
has(s, w) = strstrt(s, w) > 0
shape(s) = has(s, 'mlp_1000_512_128_10') ? 2 : has(s, 'mlp_10000') ? 3 : has(s, 'cnn_bn') ? 4 : 1
# The styles go into lines.gp's arrays: the titles (names from the results) are only read, as
# values, never evaluated as code.
if (kind eq 'lines' && runs == 1) {
    array series_colour[n]
    array series_dash[n]
    array series_point[n]
    do for [i=1:n] {
        t = exists(sprintf('t%d', i)) ? value(sprintf('t%d', i)) : ''
        series_colour[i] = has(t, '_cuda') ? 2 : 1
        series_dash[i] = shape(t)
        series_point[i] = int(word('7 5 9 11', shape(t)))
    }
}
# (outside any { } block: gnuplot reads a file loaded inside one as a block of new-style code)
load scripts.'/'.(kind eq 'bars' ? 'bars.gp' : 'lines.gp')
