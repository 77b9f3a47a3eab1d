/* run_peer.c — `bench run --peer torch` (run_peer.h): finds the python and the peer script, then
 * runs the script as a child process in its own process group (so that Ctrl-C reaches it once,
 * passed on by bench), with tandem's run options, into DIR/peer-torch. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "run_peer.h"

#ifndef TDM_PEERS_DIR
#define TDM_PEERS_DIR "suites/peers"
#endif

#define bad(...) bench_bad("run", __VA_ARGS__)

int bench_peer_check(bench_peer_opts *o) {
    if (!o->peer) {
        if (o->python || o->script) return bad("--python and --peer-script go with --peer torch");
        return 0;
    }
    if (strcmp(o->peer, "torch") != 0)
        return bad("--peer %s: unknown peer (the one peer is torch: PyTorch)", o->peer);
    if (!o->python) o->python = getenv("TANDEM_PYTHON");
    if (!o->python || !*o->python) o->python = "/usr/bin/python3";
    if (!o->script) o->script = TDM_PEERS_DIR "/torch_peer.py";
    // A bare name ("python3") is looked up on PATH when it runs; a path must be executable now.
    if (strchr(o->python, '/') && access(o->python, X_OK) != 0)
        return bad("--python %s: cannot execute it: %s (give --python PATH or TANDEM_PYTHON a python "
                   "with torch)",
                   o->python, strerror(errno));
    if (access(o->script, R_OK) != 0)
        return bad("--peer-script %s: cannot read it: %s", o->script, strerror(errno));
    return 0;
}

static volatile sig_atomic_t g_child = 0, g_peer_signal = 0;

static void pass_on(int sig) {
    g_peer_signal = sig;
    if (g_child > 0) kill((pid_t)g_child, sig);
}

int bench_peer_run(const bench_peer_opts *o, const char *dir, const bench_peer_call *c, int argc,
                   char **argv) {
    char out[4200], reps[32], mt[64], budget[64];
    snprintf(out, sizeof out, "%s/%s", dir, BENCH_PEER_DIR);
    snprintf(reps, sizeof reps, "%d", c->repetitions);
    snprintf(mt, sizeof mt, "%.17g", c->min_time);
    snprintf(budget, sizeof budget, "%.3f", c->budget_s);
    const char *filter = c->filter;
    cJSON *cmd = cJSON_CreateArray();
    cJSON_AddItemToArray(cmd, cJSON_CreateString("bench"));
    for (int i = 0; i < argc; i++) cJSON_AddItemToArray(cmd, cJSON_CreateString(argv[i]));
    char *cmd_json = cJSON_PrintUnformatted(cmd);
    cJSON_Delete(cmd);
    if (!cmd_json) {
        fprintf(stderr, "bench run: out of memory\n");
        return 2;
    }
    const char *args[32];
    int n = 0;
    args[n++] = o->python;
    args[n++] = o->script;
    args[n++] = "--out";
    args[n++] = out;
    args[n++] = "--device";
    args[n++] = c->device;
    args[n++] = "--repetitions";
    args[n++] = reps;
    args[n++] = "--min-time";
    args[n++] = mt;
    args[n++] = "--suite";
    args[n++] = c->suites;
    args[n++] = "--skip-unknown-suites";
    args[n++] = "--tandem-commit";
    args[n++] = bench_git_commit();
    args[n++] = "--command";
    args[n++] = cmd_json;
    if (c->quick) args[n++] = "--quick";
    if (c->budget_s > 0) {
        args[n++] = "--budget";
        args[n++] = budget;
    }
    if (c->append) args[n++] = "--append";
    char *filter_arg = NULL;   // one word, "--filter=REGEX": argparse reads "--filter -X" as two options
    if (filter) {
        const size_t len = strlen("--filter=") + strlen(filter) + 1;
        if (!(filter_arg = malloc(len))) {
            fprintf(stderr, "bench run: out of memory\n");
            free(cmd_json);
            return 2;
        }
        snprintf(filter_arg, len, "--filter=%s", filter);
        args[n++] = filter_arg;
    }
    args[n] = NULL;

    printf("bench run: %s through PyTorch (%s %s) into %s", c->suites, o->python, o->script, out);
    if (c->budget_s > 0) printf(", within %.0f s", c->budget_s);
    printf("\n");
    fflush(stdout);
    fflush(stderr);
    struct sigaction sa = {0}, old_int, old_term;
    sa.sa_handler = pass_on;
    sigemptyset(&sa.sa_mask);
    g_peer_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);   // its own group: a terminal's Ctrl-C reaches it once, through bench
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(o->python, (char *const *)args);
        fprintf(stderr, "bench run: --python %s: cannot run it: %s\n", o->python, strerror(errno));
        _exit(127);
    }
    int status = 0, rc;
    if (pid < 0) {
        fprintf(stderr, "bench run: cannot start the PyTorch peer: %s\n", strerror(errno));
        rc = 2;
    } else {
        g_child = pid;
        setpgid(pid, pid);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) continue;
        g_child = 0;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code == 0) {
            rc = 0;
        } else if (code == 3 || code == 127) {
            fprintf(stderr,
                    "bench run: --peer torch: %s cannot run the PyTorch peer (%s, above); "
                    "tandem's results in %s are complete\n",
                    o->python, code == 3 ? "no torch" : "not found", dir);
            rc = 2;
        } else if (code == 1) {
            fprintf(stderr, "bench run: --peer torch: a PyTorch benchmark failed (%s/status.json)\n",
                    out);
            rc = 1;
        } else if (code > 128 || g_peer_signal) {
            rc = 128 + (g_peer_signal ? g_peer_signal : code - 128);
        } else {
            fprintf(stderr, "bench run: --peer torch: the peer exited with %d; tandem's results in "
                            "%s are complete\n", code, dir);
            rc = 2;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    free(filter_arg);
    free(cmd_json);
    return rc;
}
