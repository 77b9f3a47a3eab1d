/* run_peer.h — `bench run --peer torch`: after tandem's suites, the same suites through PyTorch
 * (suites/peers/torch_peer.py) into DIR/peer-torch, a results directory of the same format
 * (docs/PEERS.md, docs/RESULTS_FORMAT.md). */
#ifndef TANDEM_RUN_PEER_H
#define TANDEM_RUN_PEER_H

#include <stdbool.h>

#define BENCH_PEER_DIR "peer-torch"   // the peer's results, inside tandem's results directory

typedef struct {
    const char *peer;     // "torch" (the only peer), NULL for none
    const char *python;   // --python, else $TANDEM_PYTHON, else /usr/bin/python3
    const char *script;   // --peer-script, else TDM_PEERS_DIR/torch_peer.py
} bench_peer_opts;

// Checks the options before anything runs: a known peer, a python that can be executed, a
// readable script. Returns 0, or 2 with a message "bench run: ..." on stderr.
int bench_peer_check(bench_peer_opts *o);

// Runs the peer on tandem's run: DIR/peer-torch with the same suites, filter, device, quick,
// repetitions and min-time. Ctrl-C and SIGTERM are passed on to it. Returns 0 when it completed,
// 1 when a peer benchmark failed, 2 when the python has no torch or the peer could not run,
// 128 + signal when interrupted. tandem's results in DIR are left as they are in every case.
// suites: "ops,transfer" (those tandem was asked for; the peer skips, with the reason, those it
// has no version of or that do not run on the device). argv: bench run's, for the peer's context.
int bench_peer_run(const bench_peer_opts *o, const char *dir, const char *suites,
                   const char *filter, const char *device, bool quick, int repetitions,
                   double min_time, int argc, char **argv);

#endif
