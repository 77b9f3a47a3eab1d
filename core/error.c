/* error.c — the thread-local last error behind tdm_last_error(), and status names. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/tensor_impl.h"

static _Thread_local char last_msg[1024];
static _Thread_local tdm_status last_status;

tdm_status tdm_error_set(tdm_status s, const char *fmt, ...) {
    // Formatted into a buffer of its own first: callers add context to the error they got,
    // tdm_error_set(s, "step %d: %s", i, tdm_last_error()), and vsnprintf into the buffer it
    // reads from is undefined (glibc garbles it: "step 0: step 0: tropy: ...").
    char msg[sizeof last_msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_msg, msg, sizeof msg);
    last_status = s;
    return s;
}

const char *tdm_last_error(void) { return last_msg; }
tdm_status tdm_last_status(void) { return last_status; }

void tdm_error_clear(void) {
    last_msg[0] = '\0';
    last_status = TDM_OK;
}

const char *tdm_status_name(tdm_status s) {
    switch (s) {
    case TDM_OK: return "ok";
    case TDM_ERR_ARG: return "invalid argument";
    case TDM_ERR_SHAPE: return "shape error";
    case TDM_ERR_DTYPE: return "dtype error";
    case TDM_ERR_DEVICE: return "device error";
    case TDM_ERR_OOM: return "out of memory";
    case TDM_ERR_IO: return "i/o error";
    case TDM_ERR_FORMAT: return "format error";
    case TDM_ERR_UNSUPPORTED: return "unsupported";
    case TDM_ERR_BACKEND: return "backend error";
    }
    return "unknown status";
}

tdm_status tdm_error_unsupported(const char *op, const struct tdm_backend_ops *be) {
    return tdm_error_set(TDM_ERR_UNSUPPORTED, "%s: not supported by the %s backend", op, be->name);
}
