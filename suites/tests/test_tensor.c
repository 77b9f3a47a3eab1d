/* test_tensor.c — devices, tensor creation and copies, the error messages of bad calls (same
 * device, shapes, dtypes: an error and a message, never a crash), and safetensors save/load,
 * including that a failed save leaves the old file intact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/tensor_impl.h"

static bool has(const char *needle) { return strstr(tdm_last_error(), needle) != NULL; }

int main(int argc, char **argv) {
    const char *tmpdir = argc > 1 ? argv[1] : ".";
    // Devices.
    tdm_device d;
    CHECK(tdm_device_parse("cpu", &d) == TDM_OK && d.type == TDM_DEVICE_CPU);
    CHECK(tdm_device_parse("cuda:3", &d) == TDM_OK && d.type == TDM_DEVICE_CUDA && d.index == 3);
    CHECK(tdm_device_parse("cuda", &d) == TDM_OK && d.index == 0);
    CHECK(tdm_device_parse("gpu", &d) == TDM_ERR_ARG && has("unknown device 'gpu'"));
    CHECK(tdm_device_parse("cuda:-1", &d) == TDM_ERR_ARG);
    CHECK(tdm_device_parse("cuda:1x", &d) == TDM_ERR_ARG);
    char buf[32];
    CHECK(!strcmp(tdm_device_str((tdm_device){TDM_DEVICE_CUDA, 2}, buf, sizeof buf), "cuda:2"));

    // Creation, copies, dtype conversion.
    float host[6] = {1.5f, -2.25f, 3, 4, 5, 6.125f};
    int64_t shape[2] = {2, 3};
    tdm_tensor *a = tdm_tensor_from_host(2, shape, TDM_DTYPE_F32, TDM_CPU, host);
    CHECK(a && tdm_tensor_numel(a) == 6 && tdm_tensor_strides(a)[0] == 3);
    tdm_tensor *h = tdm_tensor_to(a, TDM_CPU, TDM_DTYPE_BF16);
    double back[6];
    CHECK(h && tdm_tensor_to_host_f64(h, back) == TDM_OK && back[1] == -2.25 && back[5] == 6.125);
    tdm_tensor *i64 = tdm_tensor_to(a, TDM_CPU, TDM_DTYPE_I64);
    CHECK(i64 && ((int64_t *)tdm_tensor_data(i64))[1] == -2);   // truncation toward zero
    int64_t flat[1] = {6}, bad[1] = {7};
    tdm_tensor *v = tdm_tensor_reshape(a, 1, flat);
    CHECK(v && tdm_tensor_data(v) == tdm_tensor_data(a));
    CHECK(!tdm_tensor_reshape(a, 1, bad) && has("invalid for input of shape (2, 3)"));
    int64_t neg[1] = {-1};
    CHECK(!tdm_tensor_empty(1, neg, TDM_DTYPE_F32, TDM_CPU) && tdm_last_status() == TDM_ERR_SHAPE);
    int64_t huge[2] = {1ll << 40, 1ll << 40};
    CHECK(!tdm_tensor_empty(2, huge, TDM_DTYPE_F32, TDM_CPU) && tdm_last_status() == TDM_ERR_OOM);
    // A zero-size tensor's other dims are capped too (their product overflowed the strides), and
    // so is a view of one.
    int64_t empty_huge[3] = {0, 1ll << 40, 1ll << 40}, empty_ok[2] = {0, 1ll << 20};
    CHECK(!tdm_tensor_empty(3, empty_huge, TDM_DTYPE_F32, TDM_CPU) && tdm_last_status() == TDM_ERR_OOM &&
          has("with its 0 dims counted as 1"));
    tdm_tensor *e0 = tdm_tensor_empty(2, empty_ok, TDM_DTYPE_F32, TDM_CPU);
    CHECK(e0 && tdm_tensor_numel(e0) == 0 && tdm_tensor_strides(e0)[0] == 1ll << 20);
    CHECK(e0 && !tdm_tensor_reshape(e0, 3, empty_huge) && has("too large"));
    tdm_tensor_free(e0);

    // The allocation cap: over 1 TiB, or over the machine's memory for host memory, refused
    // before any allocator is asked.
    CHECK(tdm_alloc_check("t", 1 << 20, 8, true) == TDM_OK);
    CHECK(tdm_alloc_check("t", (int64_t)(TDM_MAX_ALLOC_BYTES / 8) + 1, 8, false) == TDM_ERR_OOM &&
          has("t: 137438953473 x 8 bytes are over tandem's cap of 1024 GiB"));
    CHECK(tdm_alloc_check("t", INT64_MAX, 8, false) == TDM_ERR_OOM);   // no overflow
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    size_t mem = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    if (mem && mem < TDM_MAX_ALLOC_BYTES) {   // a machine with less than the cap
        int64_t over[1] = {(int64_t)(mem / 4) + 1024};
        CHECK(tdm_alloc_check("t", (int64_t)mem + 1, 1, false) == TDM_OK);   // device memory
        CHECK(!tdm_tensor_empty(1, over, TDM_DTYPE_F32, TDM_CPU) && has("more than this machine's memory"));
    }

    // An error with context added on its way up, tdm_error_set(s, "...: %s", tdm_last_error()),
    // keeps the original message whole (vsnprintf into the buffer it reads was undefined).
    tdm_error_set(TDM_ERR_ARG, "cross_entropy: target 10 out of bounds for 2 classes");
    tdm_error_set(tdm_last_status(), "step %d: %s", 0, tdm_last_error());
    CHECK_MSG(!strcmp(tdm_last_error(), "step 0: cross_entropy: target 10 out of bounds for 2 classes"),
              "got '%s'", tdm_last_error());

    // Bad calls: errors with messages, no crash.
    int64_t ws[2] = {4, 5};
    tdm_tensor *w = tdm_tensor_zeros(2, ws, TDM_DTYPE_F32, TDM_CPU);
    CHECK(!tdm_linear(a, w, NULL) && tdm_last_status() == TDM_ERR_SHAPE);
    printf("  linear shape error: %s\n", tdm_last_error());
    CHECK(!tdm_linear(NULL, w, NULL) && tdm_last_status() == TDM_ERR_ARG);
    CHECK(!tdm_add(a, h, 1.0) && tdm_last_status() == TDM_ERR_DTYPE);
    printf("  add dtype error: %s\n", tdm_last_error());
    CHECK(!tdm_relu(i64) && tdm_last_status() == TDM_ERR_DTYPE);
    CHECK(!tdm_softmax(a, 2) && has("dim 2 out of range"));
    // Same-device rule: a tensor header claiming cuda:0 is refused before any backend is called.
    struct tdm_tensor fake = *a;
    fake.device = (tdm_device){TDM_DEVICE_CUDA, 0};
    CHECK(!tdm_add(a, &fake, 1.0) && tdm_last_status() == TDM_ERR_DEVICE &&
          has("expected all tensors on the same device, got cpu and cuda:0"));
    printf("  device error: %s\n", tdm_last_error());

    // safetensors: round trip of every dtype, metadata, atomic replace.
    char path[512];
    snprintf(path, sizeof path, "%s/test_tensor_rt.safetensors", tmpdir);
    const char *names[] = {"a", "h", "i"};
    const tdm_tensor *ts[] = {a, h, i64};
    const char *meta[] = {"format", "test"};
    CHECK(tdm_safetensors_save(path, 3, names, ts, 1, meta) == TDM_OK);
    tdm_safetensors *st = tdm_safetensors_open(path);
    CHECK(st && tdm_safetensors_count(st) == 3 && !strcmp(tdm_safetensors_metadata(st, "format"), "test"));
    tdm_tensor *a2 = st ? tdm_safetensors_get(st, "a", TDM_CPU) : NULL;
    CHECK(a2 && !memcmp(tdm_tensor_data(a2), host, sizeof host) && tdm_tensor_shape(a2)[1] == 3);
    CHECK(st && !tdm_safetensors_get(st, "zz", TDM_CPU) && has("no tensor named 'zz'"));
    tdm_safetensors_close(st);
    char nodir[600];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.safetensors", tmpdir);
    CHECK(tdm_safetensors_save(nodir, 1, names, ts, 0, NULL) == TDM_ERR_IO);
    // A save that fails (unstorable tensor) leaves the previous file readable and unchanged.
    tdm_tensor bogus = *a;
    bogus.dtype = TDM_DTYPE_COUNT;
    const tdm_tensor *bad_ts[] = {a, &bogus};
    CHECK(tdm_safetensors_save(path, 2, names, bad_ts, 0, NULL) != TDM_OK);
    st = tdm_safetensors_open(path);
    CHECK(st && tdm_safetensors_count(st) == 3);
    tdm_safetensors_close(st);
    unlink(path);

    tdm_tensor_free(a2);
    tdm_tensor_free(v);
    tdm_tensor_free(w);
    tdm_tensor_free(i64);
    tdm_tensor_free(h);
    tdm_tensor_free(a);
    CHECK_DONE("test_tensor");
}
