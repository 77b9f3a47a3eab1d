/* stats.h — the statistics the harness reports and compares runs with: median, mean, standard
 * deviation, coefficient of variation, and the Mann-Whitney U test over repetitions, two-sided,
 * computed as scipy.stats.mannwhitneyu does with its defaults (which Google Benchmark's compare.py
 * calls): the exact null distribution when there are no ties and one sample has at most 8
 * values, otherwise the normal approximation with tie and continuity corrections. */
#ifndef TANDEM_BENCH_STATS_H
#define TANDEM_BENCH_STATS_H

#include <stdbool.h>

// Summary of n values; every field is NaN (n 0) when there are none. stddev is the sample
// standard deviation (divides by n - 1, as Google Benchmark's aggregates; 0 for n = 1);
// cv = stddev / mean (NaN when the mean is 0).
typedef struct {
    int n;
    double median, mean, stddev, cv, min, max;
} bench_summary;

double bench_median(const double *x, int n);   // x is left as it was; NaN for n < 1
double bench_mean(const double *x, int n);
double bench_stddev(const double *x, int n);
bench_summary bench_summarize(const double *x, int n);

typedef struct {
    double u1;      // scipy's statistic: pairs (x_i, y_j) with x_i > y_j, ties counting 1/2
    double u;       // max(U1, U2): the statistic the two-sided p-value is taken at
    double p;       // two-sided p-value, in [0, 1]
    double z;       // the standardized statistic (normal approximation only; NaN when exact)
    bool exact;     // exact null distribution (true) or normal approximation (false)
    bool ties;      // some values occur in both or either sample more than once
} bench_utest;

// The U test of x (nx values) against y (ny values). Returns 0, or -1 when a sample is empty
// or holds a NaN (out is then left with p = NaN).
int bench_mann_whitney(const double *x, int nx, const double *y, int ny, bench_utest *out);

// The smallest two-sided p-value the exact test can give for these sample sizes (no ties):
// 2 / C(nx + ny, nx). With 3 repetitions on each side it is 0.1: nothing can be significant at
// alpha 0.05, which `bench compare` tells its user.
double bench_utest_min_p(int nx, int ny);

#endif
