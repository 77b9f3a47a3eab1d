/* device.c — device names ("cpu", "cuda:N"), parsing, and availability through the backends. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"

tdm_status tdm_device_parse(const char *s, tdm_device *out) {
    if (!s) return tdm_error_set(TDM_ERR_ARG, "device: no device name given");
    if (!strcmp(s, "cpu")) {
        *out = TDM_CPU;
        return TDM_OK;
    }
    if (!strncmp(s, "cuda", 4)) {
        const char *p = s + 4;
        if (*p == '\0') {
            *out = (tdm_device){TDM_DEVICE_CUDA, 0};
            return TDM_OK;
        }
        if (*p == ':' && isdigit((unsigned char)p[1])) {
            char *end;
            long idx = strtol(p + 1, &end, 10);
            if (*end == '\0' && idx >= 0 && idx < 1024) {
                *out = (tdm_device){TDM_DEVICE_CUDA, (int)idx};
                return TDM_OK;
            }
        }
    }
    return tdm_error_set(TDM_ERR_ARG, "unknown device '%s' (expected cpu, cuda or cuda:N)", s);
}

const char *tdm_device_str(tdm_device d, char *buf, size_t n) {
    if (d.type == TDM_DEVICE_CPU) snprintf(buf, n, "cpu");
    else snprintf(buf, n, "cuda:%d", d.index);
    return buf;
}

bool tdm_device_equal(tdm_device a, tdm_device b) {
    if (a.type != b.type) return false;
    return a.type == TDM_DEVICE_CPU || a.index == b.index;
}

bool tdm_device_available(tdm_device d) {
    const struct tdm_backend_ops *be = tdm_backend_get(d.type);
    if (!be) return false;
    int n = be->device_count();
    if (d.index < n) return true;
    char name[32];
    if (n == 0 && tdm_last_status() != TDM_OK) return false;   // the backend said why
    tdm_error_set(TDM_ERR_DEVICE, "device %s is not present (%d %s device%s found)",
                  tdm_device_str(d, name, sizeof name), n, be->name, n == 1 ? "" : "s");
    return false;
}

tdm_status tdm_device_props_get(tdm_device d, tdm_device_props *out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "device props: out is NULL");
    if (!tdm_device_available(d)) return tdm_last_status();
    const struct tdm_backend_ops *be = tdm_backend_get(d.type);
    char name[32];
    if (!be->device_props)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "the %s backend does not describe %s", be->name,
                             tdm_device_str(d, name, sizeof name));
    return be->device_props(d.index, out);
}

tdm_status tdm_device_xid_events(tdm_device d, uint64_t *xids, int max, int *n) {
    if (!n || (max > 0 && !xids)) return tdm_error_set(TDM_ERR_ARG, "xid events: n or xids is NULL");
    *n = 0;
    if (!tdm_device_available(d)) return tdm_last_status();
    const struct tdm_backend_ops *be = tdm_backend_get(d.type);
    char name[32];
    if (!be->device_xid_events)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "the %s backend has no Xid events for %s",
                             be->name, tdm_device_str(d, name, sizeof name));
    return be->device_xid_events(d.index, xids, max, n);
}

tdm_status tdm_device_telemetry_read(tdm_device d, tdm_device_telemetry *out) {
    if (!out) return tdm_error_set(TDM_ERR_ARG, "device telemetry: out is NULL");
    if (!tdm_device_available(d)) return tdm_last_status();
    const struct tdm_backend_ops *be = tdm_backend_get(d.type);
    char name[32];
    if (!be->device_telemetry)
        return tdm_error_set(TDM_ERR_UNSUPPORTED, "the %s backend has no telemetry for %s",
                             be->name, tdm_device_str(d, name, sizeof name));
    return be->device_telemetry(d.index, out);
}

const char *tdm_violation_policy_name(int policy) {
    static const char *const names[TDM_VIOLATION_N] = {
        "power",           "thermal",     "sync_boost",       "board_limit",
        "low_utilization", "reliability", "total_app_clocks", "total_base_clocks"};
    return policy >= 0 && policy < TDM_VIOLATION_N ? names[policy] : NULL;
}
