# lines.gp — tandem: one metric vs x, a line per series (a benchmark, or a benchmark in one run),
# medians with min..max whiskers. Called by `bench plot` as
#   gnuplot VARS lines.gp
# where VARS is a file of assignments: infile='...'; outfile='...'; fmt='png'; n=3; t1='matmul';
# c1=1; d1=1; ... Every string from the results (titles, names) arrives as a single-quoted string
# constant and is only ever used as a value: never passed to eval, load, system or a backquote.
# infile: blocks separated by two blank lines (gnuplot's `index`), one per series, columns
#   x  median  min  max
# fmt: 'png' (pngcairo when this gnuplot has it, else libgd's png) or 'svg'.
# Optional: title, subtitle (a second title line), xlabel, ylabel, logx, logy (1 = log scale),
# t<i> title, c<i> colour index, d<i> dash type, p<i> point type of series i (1-based). A suite's
# script (amp.gp, scaling.gp, ...) may fill the arrays series_title, series_colour, series_dash and
# series_point (size n) before it loads this one: an array it sets replaces t<i>, c<i>, d<i>, p<i>.

if (!exists("infile") || !exists("outfile") || !exists("n")) {
    print "lines.gp: set infile, outfile and n first (bench plot does)"
    exit status 2
}
if (!exists("fmt")) fmt = 'png'
if (!exists("title")) title = ''
if (!exists("xlabel")) xlabel = 'x'
if (!exists("ylabel")) ylabel = ''
if (!exists("logx")) logx = 0
if (!exists("logy")) logy = 0

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
set xlabel xlabel
set ylabel ylabel
set grid xtics ytics lt 1 lw 0.5 lc rgb '#e0e0e0'
set key outside right top vertical Left reverse noautotitle
set border 3
set xtics nomirror
set ytics nomirror
if (logx) { set logscale x 10; set format x '%g' }
if (logy) { set logscale y 10; set format y '%g'; set autoscale yfix }
set autoscale xfix
set offsets graph 0.04, graph 0.04, graph 0.05, graph 0.05
set bars small

sv(name, i, dflt) = exists(sprintf('%s%d', name, i)) ? value(sprintf('%s%d', name, i)) : dflt
ns = n > 0 ? n : 1   # (an array has one element or more)
if (!exists("series_title")) {
    array series_title[ns]
    do for [i=1:ns] { series_title[i] = sv('t', i, sprintf('series %d', i)) }
}
if (!exists("series_colour")) {
    array series_colour[ns]
    do for [i=1:ns] { series_colour[i] = sv('c', i, i) }
}
if (!exists("series_dash")) {
    array series_dash[ns]
    do for [i=1:ns] { series_dash[i] = sv('d', i, 1) }
}
if (!exists("series_point")) {
    array series_point[ns]
    do for [i=1:ns] { series_point[i] = sv('p', i, 7) }
}

plot for [i=1:n] infile index (i-1) using 1:2:3:4 with yerrorlines \
     lc series_colour[i] dt series_dash[i] pt series_point[i] ps 0.8 lw 1.5 \
     title series_title[i]
