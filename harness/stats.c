/* stats.c — median, mean, standard deviation and the two-sided Mann-Whitney U test, following
 * scipy.stats.mannwhitneyu (scipy 1.10, method "auto", use_continuity=True) line for line:
 *   ranks of the pooled values (ties get their average rank), U1 = R1 - n1(n1+1)/2,
 *   U = max(U1, n1 n2 - U1), p = 2 P(U' >= U) under the null, clipped to 1;
 *   exact P when there are no ties and n1 <= 8 or n2 <= 8 (else the normal approximation:
 *   z = (U - n1 n2/2 - 1/2) / sqrt(n1 n2/12 ((n+1) - sum(t^3 - t)/(n(n-1)))), P = Q(z)).
 * Reference values for the tests come from scipy itself (suites/tests/test_stats.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(const double *x, int n) {
    if (n < 1) return NAN;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, x, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

double bench_mean(const double *x, int n) {
    if (n < 1) return NAN;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += x[i];
    return sum / n;
}

double bench_stddev(const double *x, int n) {
    if (n < 1) return NAN;
    if (n == 1) return 0;
    double m = bench_mean(x, n), ss = 0;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    return sqrt(ss / (n - 1));
}

bench_summary bench_summarize(const double *x, int n) {
    bench_summary s = {n, NAN, NAN, NAN, NAN, NAN, NAN};
    if (n < 1) return s;
    s.median = bench_median(x, n);
    s.mean = bench_mean(x, n);
    s.stddev = bench_stddev(x, n);
    s.cv = s.mean != 0 ? s.stddev / s.mean : NAN;
    s.min = s.max = x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < s.min) s.min = x[i];
        if (x[i] > s.max) s.max = x[i];
    }
    return s;
}

// ---- the U test ---------------------------------------------------------------------------

typedef struct {
    double v;
    int from_x;
} pooled_value;

static int cmp_pooled(const void *a, const void *b) {
    return cmp_double(&((const pooled_value *)a)->v, &((const pooled_value *)b)->v);
}

double bench_utest_min_p(int nx, int ny) {
    if (nx < 1 || ny < 1) return 1;
    double c = 1;   // C(nx + ny, k) with k the smaller size, built up exactly enough in doubles
    int k = nx < ny ? nx : ny, n = nx + ny;
    for (int i = 1; i <= k; i++) c = c * (n - k + i) / i;
    double p = 2 / c;
    return p < 1 ? p : 1;
}

// P(U' >= u) for U' the U statistic of m and n values under the null (every order of the pooled
// values equally likely). Counts the orders by U: walk the pooled values in increasing order;
// cnt[a][s] = number of prefixes holding a values of the first sample whose pairs so far add up
// to s. A value of the first sample placed after b values of the second adds b to U.
// Work: (m + n) * m * (m n); the caller keeps it small.
static double exact_sf(int m, int n, double u) {
    int umax = m * n;
    size_t w = (size_t)umax + 1;
    double *cnt = calloc((size_t)(m + 1) * w, sizeof *cnt);
    if (!cnt) return NAN;
    cnt[0] = 1;
    for (int i = 0; i < m + n; i++) {
        // a in decreasing order, so cnt[a] is read before this step's moves into it
        int amax = i < m ? i : m;
        for (int a = amax; a >= 0; a--) {
            int b = i - a;   // values of the second sample placed so far
            if (b > n) continue;
            double *row = cnt + (size_t)a * w;
            if (a < m) {
                double *next = cnt + (size_t)(a + 1) * w;
                for (int s = umax - b; s >= 0; s--)
                    if (row[s] != 0) next[s + b] += row[s];
            }
            // the second sample's value (a stays): cnt[a] already holds it, unless no value of
            // the second sample may follow (b == n), where those orders end here
            if (b == n)
                for (int s = 0; s <= umax; s++) row[s] = 0;
        }
    }
    double total = 0, tail = 0;
    double *last = cnt + (size_t)m * w;
    for (int s = 0; s <= umax; s++) {
        total += last[s];
        if (s >= u - 1e-9) tail += last[s];
    }
    free(cnt);
    return tail / total;
}

int bench_mann_whitney(const double *x, int nx, const double *y, int ny, bench_utest *out) {
    *out = (bench_utest){NAN, NAN, NAN, NAN, false, false};
    if (nx < 1 || ny < 1) return -1;
    int n = nx + ny;
    pooled_value *pv = malloc((size_t)n * sizeof *pv);
    if (!pv) return -1;
    for (int i = 0; i < n; i++) {
        pv[i].v = i < nx ? x[i] : y[i - nx];
        pv[i].from_x = i < nx;
        if (isnan(pv[i].v)) {
            free(pv);
            return -1;
        }
    }
    qsort(pv, (size_t)n, sizeof *pv, cmp_pooled);
    // average ranks over runs of equal values; R1 = the first sample's rank sum
    double r1 = 0, tie_term = 0;
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && pv[j + 1].v == pv[i].v) j++;
        double t = j - i + 1, rank = 0.5 * (i + j) + 1;
        for (int k = i; k <= j; k++)
            if (pv[k].from_x) r1 += rank;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    free(pv);
    out->ties = tie_term > 0;
    out->u1 = r1 - 0.5 * nx * (nx + 1.0);
    double u2 = (double)nx * ny - out->u1;
    out->u = out->u1 > u2 ? out->u1 : u2;

    int m = nx < ny ? nx : ny, big = nx < ny ? ny : nx;
    // scipy's rule (exact: no ties and a sample of at most 8), with a cap on the work of
    // exact_sf (8 against ~1500 repetitions) beyond which the approximation is excellent anyway
    bool exact = !out->ties && m <= 8 && (double)n * m * m * big <= 1e8;
    if (exact) {
        out->exact = true;
        out->p = 2 * exact_sf(m, big, out->u);   // U's null law is the same for (m,n), (n,m)
    } else {
        double mu = 0.5 * nx * ny;
        double s = sqrt((double)nx * ny / 12.0 * ((n + 1) - tie_term / ((double)n * (n - 1))));
        if (!(s > 0)) {
            out->p = 1;   // every value equal: no evidence of a difference
            out->z = 0;
        } else {
            out->z = (out->u - mu - 0.5) / s;
            out->p = erfc(out->z / sqrt(2.0));   // 2 Q(z) = erfc(z / sqrt 2)
        }
    }
    if (out->p > 1) out->p = 1;
    if (out->p < 0) out->p = 0;
    return 0;
}
