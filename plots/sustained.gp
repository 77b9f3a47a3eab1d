# sustained.gp — tandem: `bench check`'s sustained load (levels 3 and 4, docs/CHECK.md "Sustained
# and pulsed load"): one quantity over the load's time — SM clock, memory clock, power,
# temperature or throughput (metric sm_clock, memory_clock, power, temperature, throughput) — a
# line per GPU (the benchmark is the device), x the seconds since the load began (calibrate, then
# targeted stress, then targeted power), each phase marked where it begins. Called by `bench plot` / `bench report` for the line
# figures of suite sustained with lines.gp's variables plus kind, metric, runs and scripts; the
# titles from the results are only read as values, never evaluated as code. Then lines.gp draws.

if (!exists("kind") || !exists("scripts")) {
    print "sustained.gp: called by bench plot (which sets kind and scripts first)"
    exit status 2
}
what = metric eq 'sm_clock' ? 'SM clock' : metric eq 'memory_clock' ? 'memory clock' : \
       metric eq 'power' ? 'board power' : metric eq 'temperature' ? 'GPU temperature' : \
       metric eq 'throughput' ? 'bf16 GEMM throughput per window' : metric
if (!exists("load")) load = 'sustained load (calibrate, targeted stress, targeted power)'
if (kind eq 'lines') {
    title = what.' during the '.load.', a line per GPU'
    xlabel = 'seconds since the load began'
    logx = 0   # time runs on a linear axis (bench plot asks for log x when x spans decades)
    logy = 0
}
# the phases (bench plot's nphase, phx<k> where phase k begins, phn<k> its name): a dashed line
# and the name at the top (every other one a line lower: a short phase's name would overlap the
# next), so a reader sees which phase a dip is in
if (exists("nphase")) {
    do for [k=1:nphase] {
        x0 = value(sprintf('phx%d', k))
        name = value(sprintf('phn%d', k))
        set arrow k from x0, graph 0 to x0, graph 1 nohead dt 2 lw 1.5 lc rgb '#606060' back
        set label k name at x0, graph (0.97 - 0.05 * ((k - 1) % 2)) left offset character 0.5, 0 tc rgb '#404040' front
    }
}
# (outside any { } block: gnuplot reads a file loaded inside one as a block of new-style code)
load scripts.'/'.(kind eq 'bars' ? 'bars.gp' : 'lines.gp')
