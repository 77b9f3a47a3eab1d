# transfer.gp — tandem's `transfer` suite: GB/s (or time) against the copy size, a line per
# benchmark (h2d_pinned, d2h_pageable_async, ...), medians with min..max whiskers; x is log2 in
# bytes (ticks 1 KiB, 4 KiB, ... 1 GiB), y logarithmic. Called by `bench plot` with the variables
# of lines.gp, assigned in a file VARS:
#   gnuplot VARS transfer.gp    (VARS: infile='...'; outfile='...'; fmt='png'; n=3; t1='h2d_pinned';
#                               c1=1; d1=1; ...)
# Strings from the results (t<i>, title, ...) are only used as values, never evaluated as code.
# infile: blocks separated by two blank lines (gnuplot's `index`), one per series, columns
#   x  median  min  max
# fmt: 'png' (pngcairo when this gnuplot has it, else libgd's png) or 'svg'.
# Optional: title, subtitle (a second title line), xlabel, ylabel, t<i> title, c<i> colour index,
# d<i> dash type, p<i> point type of series i (1-based). logx and logy are accepted and ignored:
# both axes are logarithmic here (sizes span 2^10..2^30, rates several decades).

if (!exists("infile") || !exists("outfile") || !exists("n")) {
    print "transfer.gp: set infile, outfile and n first (bench plot does)"
    exit status 2
}
if (!exists("fmt")) fmt = 'png'
if (!exists("title")) title = 'transfer'
if (!exists("xlabel") || xlabel eq 'x') xlabel = 'bytes per copy'
if (!exists("ylabel")) ylabel = ''

if (fmt eq 'svg') {
    set terminal svg size 1100,650 noenhanced font 'sans,12' background rgb 'white'
} else {
    if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
        set terminal pngcairo size 1100,650 noenhanced font 'sans,10' background rgb 'white'
    } else {
        set terminal png size 1100,650 noenhanced background rgb 'white'
    }
}
set output outfile

if (exists("subtitle") && subtitle ne '') { set title title."\n".subtitle } else { set title title }
set xlabel xlabel
set ylabel ylabel
set grid xtics ytics mytics lt 1 lw 0.5 lc rgb '#e0e0e0'
set key outside right top vertical Left reverse noautotitle
set border 3
set xtics nomirror
set ytics nomirror
set logscale x 2
set xtics ("1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, "64 KiB" 65536, "256 KiB" 262144, \
           "1 MiB" 1048576, "4 MiB" 4194304, "16 MiB" 16777216, "64 MiB" 67108864, \
           "256 MiB" 268435456, "1 GiB" 1073741824)
set logscale y 10
set format y '%g'
# ticks at 1, 2, 5 x 10^k: a readable scale even when the rates span less than a decade
set ytics ()
do for [e=-6:6] { set ytics add (1.0*10**e, 2.0*10**e, 5.0*10**e) }
set autoscale xfix
set autoscale yfix
set offsets graph 0.02, graph 0.02, graph 0.05, graph 0.05
set bars small

sv(name, i, dflt) = exists(sprintf('%s%d', name, i)) ? value(sprintf('%s%d', name, i)) : dflt

plot for [i=1:n] infile index (i-1) using 1:2:3:4 with yerrorlines \
     lc sv('c', i, i) dt sv('d', i, 1) pt sv('p', i, 7) ps 0.7 lw 1.5 \
     title sv('t', i, sprintf('series %d', i))
