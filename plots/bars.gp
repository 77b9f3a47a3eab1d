# bars.gp — tandem: one metric for benchmarks without a numeric x, as clustered bars (one bar per
# run in each cluster), medians with min..max whiskers. Called by `bench plot` as
#   gnuplot VARS bars.gp
# where VARS is a file of assignments: infile='...'; outfile='...'; fmt='svg'; nruns=2;
# t1='A100'; t2='H100'; b1='matmul n:64'; b2='add n:1024'; ...
# infile: one row per benchmark, columns
#   k  median_1 min_1 max_1  median_2 min_2 max_2 ...   (NaN where a run lacks it)
# where k (1, 2, ...) numbers the benchmark, whose label is b<k>: the labels (names from the
# results) are never in the data file, where gnuplot would parse their quotes and backslashes,
# and are only used as values, never evaluated as code.
# fmt: 'png' (pngcairo when this gnuplot has it, else libgd's png) or 'svg'.
# Optional: title, subtitle (a second title line), ylabel, logy (1 = log scale), t<r> the
# title of run r (1-based); spec (1 = `bench check`'s figures: after the runs' columns, three more
# per run, the GPU's expected value (its model's datasheet figure, named in its label b<k>) and
# its WARN and FAIL thresholds, drawn as marks across that run's bar).

if (!exists("infile") || !exists("outfile") || !exists("nruns")) {
    print "bars.gp: set infile, outfile and nruns first (bench plot does)"
    exit status 2
}
if (!exists("fmt")) fmt = 'png'
if (!exists("title")) title = ''
if (!exists("ylabel")) ylabel = ''

if (fmt eq 'svg') {
    set terminal svg size 960,600 noenhanced font 'sans,12' background rgb 'white'
} else {
    if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
        set terminal pngcairo size 960,600 noenhanced font 'sans,10' background rgb 'white'
    } else {
        set terminal png size 960,600 noenhanced background rgb 'white'
    }
}
set output outfile

if (exists("subtitle") && subtitle ne '') { set title title."\n".subtitle } else { set title title }
set ylabel ylabel
set style data histogram
set style histogram errorbars gap 1.5 lw 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set grid ytics lt 1 lw 0.5 lc rgb '#e0e0e0'
set border 3
set xtics nomirror rotate by -25 left
set ytics nomirror
if (exists("logy") && logy) { set logscale y 10; set yrange [*:*] } else { set yrange [0:*] }
set offsets 0, 0, graph 0.06, 0
set key outside right top vertical Left reverse noautotitle
set datafile missing 'NaN'

sv(name, i, dflt) = exists(sprintf('%s%d', name, i)) ? value(sprintf('%s%d', name, i)) : dflt

if (!exists("spec")) spec = 0
# a clustered histogram puts cluster k (0-based) at x = k, its bars 1 / (nruns + gap) wide
bw = 1.0 / (nruns + 1.5)
bx(r) = column(0) + (r - 0.5 - 0.5 * nruns) * bw - 0.45 * bw   # run r's bar: its left edge
mk(r, q) = column(3 * nruns + 3 * (r - 1) + 2 + q)              # run r's mark q: 0 spec, 1 warn, 2 fail

plot for [r=1:nruns] infile using (column(3*r-1)):(column(3*r)):(column(3*r+1)) \
     :xtic(sv('b', int(column(1)), '')) \
     lc r title sv('t', r, sprintf('run %d', r)), \
     for [r=1:(spec ? nruns : 0)] infile using (bx(r)):(mk(r, 0)):(0.9 * bw):(0) \
     with vectors nohead lw 3 lc rgb 'black' title (r == 1 ? 'the model''s datasheet figure' : ''), \
     for [r=1:(spec ? nruns : 0)] infile using (bx(r)):(mk(r, 1)):(0.9 * bw):(0) \
     with vectors nohead lw 2 lc rgb '#e08a00' title (r == 1 ? 'WARN below' : ''), \
     for [r=1:(spec ? nruns : 0)] infile using (bx(r)):(mk(r, 2)):(0.9 * bw):(0) \
     with vectors nohead lw 2 lc rgb '#d00000' title (r == 1 ? 'FAIL below' : '')
