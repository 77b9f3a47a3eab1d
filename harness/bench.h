/* bench.h — the commands of the `bench` program; each takes its own argv (argv[0] = the command)
 * and returns the process exit code: 0 success, 1 a failed check, 2 bad usage or input. */
#ifndef TANDEM_BENCH_H
#define TANDEM_BENCH_H

int bench_replay(int argc, char **argv);
int bench_train(int argc, char **argv);

#endif
