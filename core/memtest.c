/* memtest.c — tdm_device_memtest (tandem/memtest.h): checks the parameters and hands the test to
 * the device's backend (its optional memtest slot); a backend without one has no device memory
 * to test. */
#include <math.h>
#include <string.h>

#include "core/backend.h"
#include "core/tensor_impl.h"
#include "tandem/memtest.h"

const char *tdm_memtest_pattern_name(int pattern) {
    static const char *const names[TDM_MEMTEST_N_PATTERNS] = {
        "walking_ones", "walking_zeros", "address", "moving_inversions", "random"};
    return pattern >= 0 && pattern < TDM_MEMTEST_N_PATTERNS ? names[pattern] : NULL;
}

tdm_status tdm_device_memtest(tdm_device dev, const tdm_memtest_params *p, tdm_memtest_result *out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "device_memtest: out is NULL");
    memset(out, 0, sizeof *out);
    tdm_memtest_params q = {0};
    if (p) q = *p;
    if (!(q.fraction >= 0 && q.fraction <= 1))   // NaN too
        return tdm_error_set(TDM_ERR_ARG, "device_memtest: fraction %g is not in (0, 1]", q.fraction);
    if (q.fraction == 0) q.fraction = TDM_MEMTEST_DEFAULT_FRACTION;
    if (q.patterns & ~TDM_MEMTEST_ALL)
        return tdm_error_set(TDM_ERR_ARG, "device_memtest: patterns 0x%x: only bits 0..%d name one",
                             q.patterns, TDM_MEMTEST_N_PATTERNS - 1);
    if (q.patterns == 0) q.patterns = TDM_MEMTEST_ALL;
    if (q.passes < 0 || q.passes > 1000)
        return tdm_error_set(TDM_ERR_ARG, "device_memtest: passes %d is not in 1..1000", q.passes);
    if (q.passes == 0) q.passes = 1;
    if (!tdm_device_available(dev)) return tdm_last_status();
    const struct tdm_backend_ops *be = tdm_backend_get(dev.type);
    if (!be) return tdm_last_status();
    char name[32];
    if (!be->memtest)
        return tdm_error_set(TDM_ERR_UNSUPPORTED,
                             "device_memtest: %s: not supported by the %s backend (the memory "
                             "test is of a GPU's device memory: give a CUDA device)",
                             tdm_device_str(dev, name, sizeof name), be->name);
    out->patterns = q.patterns;
    out->passes = q.passes;
    return be->memtest(dev.index, &q, out);
}
