# scaling.gp — tandem: the figures of suite scaling (docs/suites/scaling.md). Called by
# `bench plot` for its line figures with lines.gp's variables plus kind, metric, runs and scripts.
# For lines from one run: predictions (predicted_* series) dashed with open points, measurements
# solid; weak scaling blue, strong scaling orange, predictions by link; efficiency and comm_share
# on [0:1.2] with the ideal efficiency (1) marked. Then lines.gp / bars.gp draw.

if (!exists("kind") || !exists("scripts")) {
    print "scaling.gp: called by bench plot (which sets kind and scripts first)"
    exit status 2
}
has(s, w) = strstrt(s, w) > 0
predicted(s) = has(s, 'predicted_')
colour(s) = has(s, 'nvlink') ? 3 : has(s, 'pcie') ? 4 : has(s, 'strong') ? 2 : 1
title_of(i) = exists(sprintf('t%d', i)) ? value(sprintf('t%d', i)) : sprintf('series %d', i)
any_predicted = 0
if (kind eq 'lines') {
    do for [i=1:n] { any_predicted = any_predicted || predicted(title_of(i)) }
}
# The styles and titles go into lines.gp's arrays: a title (a name from the results) is only read
# and joined to ' (PREDICTION)' as a value, never evaluated as code.
if (kind eq 'lines' && runs == 1) {
    array series_title[n]
    array series_colour[n]
    array series_dash[n]
    array series_point[n]
    do for [i=1:n] {
        t = title_of(i)
        series_title[i] = predicted(t) ? t.' (PREDICTION)' : t
        series_colour[i] = colour(t)
        series_dash[i] = predicted(t) ? 2 : 1
        series_point[i] = predicted(t) ? 6 : 7
    }
}
if (metric eq 'efficiency' || metric eq 'comm_share') { set yrange [0:1.2] }
if (exists("xlabel") && xlabel eq 'ranks') { set xtics 1 }
if (metric eq 'efficiency') {
    set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lc rgb '#888888' dt 3
    set label 1 'ideal' at graph 0.01, first 1.03 tc rgb '#888888'
}
if (any_predicted && exists("subtitle")) {
    subtitle = subtitle.'; dashed lines are predictions (ring model), not measurements'
}
# (outside any { } block: gnuplot reads a file loaded inside one as a block of new-style code)
load scripts.'/'.(kind eq 'bars' ? 'bars.gp' : 'lines.gp')
