/* run_peer.h — `bench run --peer torch`: after each of tandem's suites, the same suite through PyTorch
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

// One call of the peer: the suites, filter, device and timing options of tandem's run.
typedef struct {
    const char *suites;   // "ops,transfer": those tandem ran (the peer skips, with the reason,
                          // those it has no version of or that do not run on the device)
    const char *filter;   // NULL for all
    const char *device;   // "cpu", "cuda:0"
    bool quick;
    int repetitions;
    double min_time;
    double budget_s;   // > 0: the peer starts no row after this many seconds (its --budget),
                       // listing the rest as skipped for time; 0: no limit
    bool append;       // add to the peer run already in DIR/peer-torch (its --append): bench run
                       // calls the peer after each suite, so a run cut by its budget still has
                       // both sides of every row it has
} bench_peer_call;

// Runs the peer on tandem's run into DIR/peer-torch. Ctrl-C and SIGTERM are passed on to it.
// Returns 0 when it completed (rows skipped for time included), 1 when a peer benchmark failed,
// 2 when the python has no torch or the peer could not run, 128 + signal when interrupted.
// tandem's results in DIR are left as they are in every case. argv: bench run's, for the peer's
// context.
int bench_peer_run(const bench_peer_opts *o, const char *dir, const bench_peer_call *c, int argc,
                   char **argv);

#endif
