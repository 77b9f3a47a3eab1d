# pulsed.gp — tandem: `bench check`'s pulsed load (level 4, docs/CHECK.md "Sustained and pulsed
# load"): as sustained.gp (which it loads), for the on/off cycles: the power transients show as
# steps of power and clock, a line per GPU.

if (!exists("kind") || !exists("scripts")) {
    print "pulsed.gp: called by bench plot (which sets kind and scripts first)"
    exit status 2
}
load = 'pulsed load (1 s on, 1 s off)'
load scripts.'/sustained.gp'
