/* cmd_env.c — `bench env [--json]`: the machine a run is measured on — host, CPU, memory, OS,
 * compiler, tandem's build and commit, and every CUDA device with its driver and runtime, PCIe
 * link, clocks, ECC and persistence. bench_env_json() gives the same object to `bench run`,
 * which stores it in context.json (docs/RESULTS_FORMAT.md). Every field is read where Linux and
 * the backends keep it; what cannot be read is null in the JSON and absent from the text. A GPU
 * that is the emulated CUDA device (suites/emu) says so: "emulated" in its JSON, "cuda_emulated"
 * in the whole, and the text names it EMULATED on the CPU before anything else (emulated.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "bench.h"
#include "emulated.h"
#include "tandem/tandem.h"

#ifndef TDM_GIT_COMMIT
#define TDM_GIT_COMMIT "unknown"
#endif
#ifndef TDM_VERSION
#define TDM_VERSION "unknown"
#endif

const char *bench_git_commit(void) { return TDM_GIT_COMMIT; }

// ---- reading /proc and /etc ------------------------------------------------------------------

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = '\0';
    size_t k = strspn(s, " \t");
    if (k) memmove(s, s + k, n - k + 1);
}

// The first line of a file, trimmed; false when it cannot be read.
static bool read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    if (ok) trim(buf);
    return ok && buf[0];
}

// The value of "key<sep>value" lines (/proc/cpuinfo "key\t: v", os-release KEY=v); first match.
static bool read_field(const char *path, const char *key, char sep, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[1024];
    bool found = false;
    size_t kl = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, kl) != 0) continue;
        char *p = line + kl;
        while (*p == ' ' || *p == '\t') p++;
        if (*p != sep) continue;
        p++;
        trim(p);
        if (*p == '"') {   // os-release quotes its values
            p++;
            char *q = strrchr(p, '"');
            if (q) *q = '\0';
        }
        snprintf(buf, n, "%s", p);
        found = buf[0] != '\0';
    }
    fclose(f);
    return found;
}

// Arm cores name themselves by implementer and part number only (no "model name").
static void arm_cpu_name(char *buf, size_t n) {
    char impl[32], part[32];
    if (!read_field("/proc/cpuinfo", "CPU implementer", ':', impl, sizeof impl) ||
        !read_field("/proc/cpuinfo", "CPU part", ':', part, sizeof part)) {
        snprintf(buf, n, "unknown");
        return;
    }
    static const struct {
        const char *impl, *part, *name;
    } known[] = {{"0x41", "0xd0c", "Arm Neoverse-N1"}, {"0x41", "0xd40", "Arm Neoverse-V1"},
                 {"0x41", "0xd49", "Arm Neoverse-N2"}, {"0x41", "0xd4f", "Arm Neoverse-V2 (Grace)"},
                 {"0x41", "0xd8e", "Arm Neoverse-N3"}, {"0x41", "0xd84", "Arm Neoverse-V3"}};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(impl, known[i].impl) && !strcmp(part, known[i].part)) {
            snprintf(buf, n, "%s", known[i].name);
            return;
        }
    snprintf(buf, n, "CPU implementer %s part %s", impl, part);
}

// Physical cores and sockets: distinct (physical id, core id) pairs in /proc/cpuinfo; 0 when the
// file does not say (Arm, some VMs).
static void cpu_topology(int *cores, int *sockets) {
    *cores = *sockets = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    enum { MAX_IDS = 4096 };
    static long pairs[MAX_IDS][2];
    static long socks[MAX_IDS];
    int np = 0, ns = 0;
    long phys = -1, core = -1;
    char line[1024];
    for (;;) {
        bool eof = !fgets(line, sizeof line, f);
        if (eof || line[0] == '\n') {   // end of one processor's block
            if (phys >= 0 && core >= 0) {
                bool seen = false;
                for (int i = 0; i < np && !seen; i++)
                    seen = pairs[i][0] == phys && pairs[i][1] == core;
                if (!seen && np < MAX_IDS) {
                    pairs[np][0] = phys;
                    pairs[np++][1] = core;
                }
                seen = false;
                for (int i = 0; i < ns && !seen; i++) seen = socks[i] == phys;
                if (!seen && ns < MAX_IDS) socks[ns++] = phys;
            }
            phys = core = -1;
            if (eof) break;
            continue;
        }
        char *colon = strchr(line, ':');
        if (!colon) continue;
        if (!strncmp(line, "physical id", 11)) phys = strtol(colon + 1, NULL, 10);
        else if (!strncmp(line, "core id", 7)) core = strtol(colon + 1, NULL, 10);
    }
    fclose(f);
    *cores = np;
    *sockets = ns;
}

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar ..." -> "550.54.15":
// the loaded kernel driver, known even to a build without CUDA.
static bool nvidia_kernel_driver(char *buf, size_t n) {
    char line[512];
    if (!read_line("/proc/driver/nvidia/version", line, sizeof line)) return false;
    for (char *tok = strtok(line, " \t"); tok; tok = strtok(NULL, " \t")) {
        char *dot = strchr(tok, '.');
        if (tok[0] >= '0' && tok[0] <= '9' && dot && dot[1] >= '0' && dot[1] <= '9') {
            snprintf(buf, n, "%s", tok);
            return true;
        }
    }
    return false;
}

static void add_int_or_null(cJSON *o, const char *key, long long v) {
    if (v >= 0) cJSON_AddNumberToObject(o, key, (double)v);
    else cJSON_AddNullToObject(o, key);
}

static void add_str_or_null(cJSON *o, const char *key, const char *s) {
    if (s && s[0]) cJSON_AddStringToObject(o, key, s);
    else cJSON_AddNullToObject(o, key);
}

static void add_bool_or_null(cJSON *o, const char *key, int v) {
    if (v >= 0) cJSON_AddBoolToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

// 12040 -> "12.4"
static void cuda_version_str(int v, char *buf, size_t n) {
    if (v > 0) snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
    else buf[0] = '\0';
}

// NVML's clocks-event reasons (nvml.h: nvmlClocksThrottleReason*), "none" for 0.
static void throttle_str(long long r, char *buf, size_t n) {
    static const char *names[] = {"gpu idle",          "applications clocks", "sw power cap",
                                  "hw slowdown",       "sync boost",          "sw thermal",
                                  "hw thermal",        "hw power brake",      "display clocks"};
    buf[0] = '\0';
    if (r < 0) return;
    if (r == 0) {
        snprintf(buf, n, "none");
        return;
    }
    size_t len = 0;
    for (int b = 0; b < 64 && len < n; b++) {
        if (!((unsigned long long)r & (1ULL << b))) continue;
        if (b < (int)(sizeof names / sizeof *names))
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", names[b]);
        else len += (size_t)snprintf(buf + len, n - len, "%sbit %d", len ? ", " : "", b);
    }
}

static cJSON *gpu_json(int index, const tdm_device_props *p) {
    cJSON *g = cJSON_CreateObject();
    if (!g) return NULL;
    char s[256];
    cJSON_AddNumberToObject(g, "index", index);
    snprintf(s, sizeof s, "cuda:%d", index);
    cJSON_AddStringToObject(g, "device", s);
    add_str_or_null(g, "name", p->name);
    add_str_or_null(g, "pci_bus_id", p->pci_bus_id);
    add_int_or_null(g, "memory_bytes", p->total_memory);
    snprintf(s, sizeof s, "%d.%d", p->cc_major, p->cc_minor);
    cJSON_AddStringToObject(g, "compute_capability", s);
    add_int_or_null(g, "sm_count", p->sm_count);
    add_int_or_null(g, "l2_bytes", p->l2_bytes);
    add_int_or_null(g, "memory_bus_bits", p->memory_bus_bits);
    add_int_or_null(g, "clock_sm_mhz", p->clock_sm_mhz);
    add_int_or_null(g, "clock_sm_max_mhz", p->clock_sm_max_mhz);
    add_int_or_null(g, "clock_mem_mhz", p->clock_mem_mhz);
    add_int_or_null(g, "clock_mem_max_mhz", p->clock_mem_max_mhz);
    add_int_or_null(g, "pcie_gen", p->pcie_gen);
    add_int_or_null(g, "pcie_width", p->pcie_width);
    add_int_or_null(g, "pcie_gen_max", p->pcie_gen_max);
    add_int_or_null(g, "pcie_width_max", p->pcie_width_max);
    add_bool_or_null(g, "ecc", p->ecc);
    add_bool_or_null(g, "persistence", p->persistence);
    add_int_or_null(g, "power_limit_w", p->power_limit_w);
    add_int_or_null(g, "throttle_reasons", p->throttle_reasons);
    throttle_str(p->throttle_reasons, s, sizeof s);
    add_str_or_null(g, "throttle", s);
    add_str_or_null(g, "nvml", p->nvml);
    // health (NVML; null where not reported): what bench check judges, recorded with every run
    add_int_or_null(g, "temperature_c", p->temperature_c);
    add_int_or_null(g, "temperature_slowdown_c", p->temperature_slowdown_c);
    add_int_or_null(g, "remapped_rows_correctable", p->remapped_rows_correctable);
    add_int_or_null(g, "remapped_rows_uncorrectable", p->remapped_rows_uncorrectable);
    add_int_or_null(g, "remapped_rows_pending", p->remapped_rows_pending);
    add_int_or_null(g, "remapped_rows_failed", p->remapped_rows_failed);
    add_int_or_null(g, "retired_pages_sbe", p->retired_pages_sbe);
    add_int_or_null(g, "retired_pages_dbe", p->retired_pages_dbe);
    add_int_or_null(g, "retired_pages_pending", p->retired_pages_pending);
    add_int_or_null(g, "ecc_uncorrected_volatile", p->ecc_uncorrected_volatile);
    add_int_or_null(g, "ecc_uncorrected_aggregate", p->ecc_uncorrected_aggregate);
    // error counters since boot (bench check judges their deltas over its run)
    add_int_or_null(g, "ecc_corrected_volatile", p->ecc_corrected_volatile);
    add_int_or_null(g, "pcie_replay_count", p->pcie_replay_count);
    add_int_or_null(g, "nvlink_links_active", p->nvlink_links_active);
    add_int_or_null(g, "nvlink_crc_errors", p->nvlink_crc_errors);
    add_int_or_null(g, "nvlink_replay_errors", p->nvlink_replay_errors);
    add_int_or_null(g, "nvlink_recovery_errors", p->nvlink_recovery_errors);
    cJSON_AddBoolToObject(g, "emulated", p->emulated != 0);   // the emulated device: not a GPU
    return g;
}

cJSON *bench_env_json(void) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    char buf[512];

    if (gethostname(buf, sizeof buf) != 0) snprintf(buf, sizeof buf, "unknown");
    buf[sizeof buf - 1] = '\0';
    cJSON_AddStringToObject(o, "host", buf);

    if (!read_field("/proc/cpuinfo", "model name", ':', buf, sizeof buf))
        arm_cpu_name(buf, sizeof buf);
    cJSON_AddStringToObject(o, "cpu_model", buf);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    add_int_or_null(o, "cpu_logical", online > 0 ? online : -1);
    int cores, sockets;
    cpu_topology(&cores, &sockets);
    add_int_or_null(o, "cpu_cores", cores > 0 ? cores : -1);
    add_int_or_null(o, "cpu_sockets", sockets > 0 ? sockets : -1);
    add_str_or_null(o, "cpu_governor",
                    read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", buf,
                              sizeof buf) ? buf : NULL);
    long long khz = -1;
    if (read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", buf, sizeof buf))
        khz = atoll(buf);
    add_int_or_null(o, "cpu_max_mhz", khz > 0 ? khz / 1000 : -1);

    long long total = -1, avail = -1;
    if (read_field("/proc/meminfo", "MemTotal", ':', buf, sizeof buf)) total = atoll(buf) * 1024;
    if (read_field("/proc/meminfo", "MemAvailable", ':', buf, sizeof buf))
        avail = atoll(buf) * 1024;
    add_int_or_null(o, "memory_total_bytes", total);
    add_int_or_null(o, "memory_available_bytes", avail);

    if (!read_field("/etc/os-release", "PRETTY_NAME", '=', buf, sizeof buf))
        snprintf(buf, sizeof buf, "unknown");
    cJSON_AddStringToObject(o, "os", buf);
    struct utsname u;
    if (uname(&u) == 0) snprintf(buf, sizeof buf, "%s %s %s", u.sysname, u.release, u.machine);
    else snprintf(buf, sizeof buf, "unknown");
    cJSON_AddStringToObject(o, "kernel", buf);

#if defined(__clang__)
    cJSON_AddStringToObject(o, "compiler", "Clang " __clang_version__);
#elif defined(__GNUC__)
    cJSON_AddStringToObject(o, "compiler", "GCC " __VERSION__);
#else
    cJSON_AddStringToObject(o, "compiler", "unknown");
#endif
    cJSON_AddStringToObject(o, "tandem_version", TDM_VERSION);
    cJSON_AddStringToObject(o, "tandem_build", tdm_build_info());
    cJSON_AddStringToObject(o, "tandem_commit", bench_git_commit());

    // GPUs: cuda:0, cuda:1, ... until one is not there; the first refusal says why there are none
    cJSON *gpus = cJSON_CreateArray();
    char note[512] = "", driver[64] = "";
    bool have_driver = nvidia_kernel_driver(driver, sizeof driver);
    tdm_device_props first;
    memset(&first, 0, sizeof first);
    int n = 0;
    for (; n < 1024; n++) {
        tdm_device d = {TDM_DEVICE_CUDA, n};
        tdm_error_clear();
        if (!tdm_device_available(d)) {
            if (n == 0) {   // "no CUDA device found (reason)" or another reason
                const char *why = tdm_last_error(), *pre = "no CUDA device found (";
                size_t lp = strlen(pre), lw = strlen(why);
                if (!strncmp(why, pre, lp) && lw > lp && why[lw - 1] == ')')
                    snprintf(note, sizeof note, "none (no CUDA device found: %.*s)",
                             (int)(lw - lp - 1), why + lp);
                else snprintf(note, sizeof note, "none (no CUDA device found: %s)", why);
            }
            break;
        }
        tdm_device_props p;
        if (tdm_device_props_get(d, &p) != TDM_OK) {
            cJSON *g = cJSON_CreateObject();
            cJSON_AddNumberToObject(g, "index", n);
            cJSON_AddStringToObject(g, "error", tdm_last_error());
            cJSON_AddItemToArray(gpus, g);
            continue;
        }
        if (n == 0) first = p;
        cJSON_AddItemToArray(gpus, gpu_json(n, &p));
    }
    tdm_error_clear();
    bool props = n > 0 && !cJSON_GetObjectItem(cJSON_GetArrayItem(gpus, 0), "error");
    if (props && first.driver_version[0]) {
        snprintf(driver, sizeof driver, "%s", first.driver_version);
        have_driver = true;
    }
    add_str_or_null(o, "nvidia_driver", have_driver ? driver : NULL);
    cuda_version_str(props ? first.cuda_driver_version : -1, buf, sizeof buf);
    add_str_or_null(o, "cuda_driver", buf);
    cuda_version_str(props ? first.cuda_runtime_version : -1, buf, sizeof buf);
    add_str_or_null(o, "cuda_runtime", buf);
    add_str_or_null(o, "cublas", props ? first.cublas_version : NULL);
    add_str_or_null(o, "cudnn", props ? first.cudnn_version : NULL);
    add_str_or_null(o, "nccl", props ? first.nccl_version : NULL);
    cJSON_AddNumberToObject(o, "gpu_count", n);
    add_str_or_null(o, "gpu_note", note);
    cJSON_AddItemToObject(o, "gpus", gpus);
    cJSON_AddBoolToObject(o, "cuda_emulated", bench_env_emulated(o));
    return o;
}

// ---- text ----------------------------------------------------------------------------------

typedef struct {
    char key[48], val[512];
} env_line;

typedef struct {
    env_line *v;
    int n, cap;
} env_lines;

static char *line_add(env_lines *L, const char *key) {
    if (L->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 32;
        env_line *v = realloc(L->v, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        L->v = v;
        L->cap = cap;
    }
    env_line *l = &L->v[L->n++];
    snprintf(l->key, sizeof l->key, "%s", key);
    l->val[0] = '\0';
    return l->val;
}

#define LINE(L, key, ...)                                              \
    do {                                                               \
        char *val_ = line_add(L, key);                                 \
        if (val_) snprintf(val_, sizeof((env_line *)0)->val, __VA_ARGS__); \
    } while (0)

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

static double jnum(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(it) ? it->valuedouble : -1;
}

static int jbool(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(it) ? cJSON_IsTrue(it) : -1;
}

// Appends to the line being built (char v[], its length n), cut at v's end.
#define PART(...) (n += (size_t)snprintf(v + n, n < sizeof v ? sizeof v - n : 0, __VA_ARGS__), \
                   n = n < sizeof v ? n : sizeof v - 1)

/* One line of NVML's health readings, the parts it reported: "41 C (slows at 87 C), remapped rows
 * 0 correctable 0 uncorrectable, retired pages 0 sbe 0 dbe, uncorrected ECC 0 since boot 0 ever";
 * none when it reported none (the nvml line says why). */
static void health_line(env_lines *L, const cJSON *g, const char *key) {
    char v[512] = "";
    size_t n = 0;
    const char *sep = "";
    if (jnum(g, "temperature_c") >= 0) {
        PART("%d C", (int)jnum(g, "temperature_c"));
        if (jnum(g, "temperature_slowdown_c") >= 0)
            PART(" (slows at %d C)", (int)jnum(g, "temperature_slowdown_c"));
        sep = ", ";
    }
    if (jnum(g, "remapped_rows_correctable") >= 0) {
        PART("%sremapped rows %d correctable %d uncorrectable%s%s", sep,
             (int)jnum(g, "remapped_rows_correctable"), (int)jnum(g, "remapped_rows_uncorrectable"),
             jnum(g, "remapped_rows_pending") > 0 ? ", one pending a reset" : "",
             jnum(g, "remapped_rows_failed") > 0 ? ", a remap FAILED" : "");
        sep = ", ";
    }
    if (jnum(g, "retired_pages_sbe") >= 0) {
        PART("%sretired pages %d sbe %d dbe%s", sep, (int)jnum(g, "retired_pages_sbe"),
             (int)jnum(g, "retired_pages_dbe"),
             jnum(g, "retired_pages_pending") > 0 ? ", pending a reset" : "");
        sep = ", ";
    }
    if (jnum(g, "ecc_uncorrected_volatile") >= 0)
        PART("%suncorrected ECC %.0f since boot %.0f ever", sep, jnum(g, "ecc_uncorrected_volatile"),
             jnum(g, "ecc_uncorrected_aggregate"));
    if (v[0]) LINE(L, key, "%s", v);
}

/* One line of the error counters, the parts NVML reported: "since boot: PCIe replays 3, corrected
 * ECC 0, NVLink 2 links up: CRC 0, replay 0, recovery 0"; none when it reported none. */
static void counters_line(env_lines *L, const cJSON *g, const char *key) {
    char v[512] = "";
    size_t n = 0;
    const char *sep = "since boot: ";
    if (jnum(g, "pcie_replay_count") >= 0) {
        PART("%sPCIe replays %.0f", sep, jnum(g, "pcie_replay_count"));
        sep = ", ";
    }
    if (jnum(g, "ecc_corrected_volatile") >= 0) {
        PART("%scorrected ECC %.0f", sep, jnum(g, "ecc_corrected_volatile"));
        sep = ", ";
    }
    if (jnum(g, "nvlink_links_active") > 0)
        PART("%sNVLink %d link%s up: CRC %.0f, replay %.0f, recovery %.0f", sep,
             (int)jnum(g, "nvlink_links_active"), jnum(g, "nvlink_links_active") == 1 ? "" : "s",
             jnum(g, "nvlink_crc_errors"), jnum(g, "nvlink_replay_errors"),
             jnum(g, "nvlink_recovery_errors"));
    else if (jnum(g, "nvlink_links_active") == 0)
        PART("%sno NVLink up", sep);
#undef PART
    if (v[0]) LINE(L, key, "%s", v);
}

static void text_gpu(env_lines *L, const cJSON *g) {
    int i = (int)jnum(g, "index");
    char k[48];
#define GKEY(what) (snprintf(k, sizeof k, "gpu %d%s%s", i, what[0] ? " " : "", what), k)
    if (jstr(g, "error")) {
        LINE(L, GKEY(""), "%s", jstr(g, "error"));
        return;
    }
    if (jbool(g, "emulated") == 1)
        LINE(L, GKEY(""), BENCH_EMU_DEVICE " (%s)", jstr(g, "name") ? jstr(g, "name") : "?");
    else
        LINE(L, GKEY(""), "%s, %s", jstr(g, "name") ? jstr(g, "name") : "?",
             jstr(g, "pci_bus_id") ? jstr(g, "pci_bus_id") : "?");
    LINE(L, GKEY("memory"), "%.1f GiB, %d-bit bus, L2 %.1f MiB",
         jnum(g, "memory_bytes") / (1 << 30), (int)jnum(g, "memory_bus_bits"),
         jnum(g, "l2_bytes") / (1 << 20));
    LINE(L, GKEY("compute"), "compute capability %s, %d SMs", jstr(g, "compute_capability"),
         (int)jnum(g, "sm_count"));
    if (jnum(g, "pcie_gen") >= 0)
        LINE(L, GKEY("pcie"), "gen %d x%d now (max gen %d x%d)", (int)jnum(g, "pcie_gen"),
             (int)jnum(g, "pcie_width"), (int)jnum(g, "pcie_gen_max"),
             (int)jnum(g, "pcie_width_max"));
    char sm[64] = "", mem[64] = "";
    if (jnum(g, "clock_sm_mhz") >= 0)
        snprintf(sm, sizeof sm, "%d MHz ", (int)jnum(g, "clock_sm_mhz"));
    if (jnum(g, "clock_mem_mhz") >= 0)
        snprintf(mem, sizeof mem, "%d MHz ", (int)jnum(g, "clock_mem_mhz"));
    LINE(L, GKEY("clocks"), "SM %s(max %d MHz), memory %s(max %d MHz)", sm,
         (int)jnum(g, "clock_sm_max_mhz"), mem, (int)jnum(g, "clock_mem_max_mhz"));
    if (jbool(g, "ecc") >= 0) LINE(L, GKEY("ecc"), "%s", jbool(g, "ecc") ? "on" : "off");
    if (jbool(g, "persistence") >= 0)
        LINE(L, GKEY("persistence"), "%s", jbool(g, "persistence") ? "on" : "off");
    if (jnum(g, "power_limit_w") >= 0)
        LINE(L, GKEY("power limit"), "%d W", (int)jnum(g, "power_limit_w"));
    if (jstr(g, "throttle")) LINE(L, GKEY("throttle"), "%s", jstr(g, "throttle"));
    health_line(L, g, GKEY("health"));
    counters_line(L, g, GKEY("counters"));
    if (jstr(g, "nvml"))
        LINE(L, GKEY("nvml"), "%s (so: clocks now, persistence, power, throttling, health unknown)",
             jstr(g, "nvml"));
#undef GKEY
}

static int print_text(const cJSON *e) {
    env_lines L = {0};
    if (jbool(e, "cuda_emulated") == 1)
        printf("EMULATED CUDA device: the cuda devices below are %s; timings on them measure "
               "the emulator\n", BENCH_EMU_DEVICE);
    LINE(&L, "host", "%s", jstr(e, "host"));
    LINE(&L, "cpu", "%s", jstr(e, "cpu_model"));
    char cores[128] = "";
    int logical = (int)jnum(e, "cpu_logical"), phys = (int)jnum(e, "cpu_cores"),
        socks = (int)jnum(e, "cpu_sockets");
    int len = snprintf(cores, sizeof cores, "%d logical", logical);
    if (phys > 0) len += snprintf(cores + len, sizeof cores - (size_t)len, ", %d physical", phys);
    if (socks > 0)
        snprintf(cores + len, sizeof cores - (size_t)len, " in %d socket%s", socks,
                 socks == 1 ? "" : "s");
    LINE(&L, "cpu cores", "%s", cores);
    if (jstr(e, "cpu_governor") || jnum(e, "cpu_max_mhz") > 0)
        LINE(&L, "cpu frequency", "governor %s, max %d MHz",
             jstr(e, "cpu_governor") ? jstr(e, "cpu_governor") : "unknown",
             (int)jnum(e, "cpu_max_mhz"));
    if (jnum(e, "memory_total_bytes") > 0)
        LINE(&L, "memory", "%.1f GiB (%.1f GiB available)",
             jnum(e, "memory_total_bytes") / (1 << 30),
             jnum(e, "memory_available_bytes") / (1 << 30));
    LINE(&L, "os", "%s", jstr(e, "os"));
    LINE(&L, "kernel", "%s", jstr(e, "kernel"));
    LINE(&L, "compiler", "%s", jstr(e, "compiler"));
    LINE(&L, "tandem", "%s, commit %s", jstr(e, "tandem_version"), jstr(e, "tandem_commit"));
    LINE(&L, "build", "%s", jstr(e, "tandem_build"));
    if (jstr(e, "nvidia_driver")) LINE(&L, "nvidia driver", "%s", jstr(e, "nvidia_driver"));
    if (jstr(e, "cuda_driver"))
        LINE(&L, "cuda", "driver API %s, runtime %s", jstr(e, "cuda_driver"),
             jstr(e, "cuda_runtime") ? jstr(e, "cuda_runtime") : "unknown");
    if (jstr(e, "cublas"))
        LINE(&L, "libraries", "cuBLAS %s, cuDNN %s, NCCL %s", jstr(e, "cublas"),
             jstr(e, "cudnn"), jstr(e, "nccl"));
    const cJSON *gpus = cJSON_GetObjectItemCaseSensitive(e, "gpus");
    if (jstr(e, "gpu_note")) LINE(&L, "GPUs", "%s", jstr(e, "gpu_note"));
    else if (jbool(e, "cuda_emulated") == 1)
        LINE(&L, "GPUs", "0 (the %d CUDA device%s below %s " BENCH_EMU_DEVICE ")",
             cJSON_GetArraySize(gpus), cJSON_GetArraySize(gpus) == 1 ? "" : "s",
             cJSON_GetArraySize(gpus) == 1 ? "is" : "are");
    else LINE(&L, "GPUs", "%d", cJSON_GetArraySize(gpus));
    const cJSON *g;
    cJSON_ArrayForEach(g, gpus) text_gpu(&L, g);

    size_t w = 0;
    for (int i = 0; i < L.n; i++)
        if (strlen(L.v[i].key) > w) w = strlen(L.v[i].key);
    for (int i = 0; i < L.n; i++)
        printf("%s:%*s %s\n", L.v[i].key, (int)(w - strlen(L.v[i].key)), "", L.v[i].val);
    free(L.v);
    return 0;
}

static void env_usage(FILE *f) {
    fprintf(f,
            "usage: bench env [--json]\n"
            "  Prints the machine's context, as `bench run` records it in context.json: host, CPU\n"
            "  (model, cores, frequency governor), memory, OS and kernel, compiler, tandem's\n"
            "  version, build and git commit, the NVIDIA driver, CUDA driver and runtime, cuBLAS/\n"
            "  cuDNN/NCCL, and per GPU its name, memory, compute capability, SMs, L2, PCIe link\n"
            "  (now and max), clocks (now and max), ECC, persistence, power limit and throttling\n"
            "  (the last ones through NVML, when the driver's libnvidia-ml is there). A device\n"
            "  that is the emulated CUDA device (a -DTDM_CUDA_EMU=ON build) is named EMULATED\n"
            "  on the CPU: not a GPU (\"emulated\": true; \"cuda_emulated\" in the whole).\n"
            "  --json prints one JSON object (unknown fields null) instead of key: value lines.\n"
            "  Exit: 0, or 2 on a bad argument.\n");
}

int bench_env(int argc, char **argv) {
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'h': env_usage(stdout); return 0;
        default: env_usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bench env: unexpected argument '%s'\n", argv[optind]);
        env_usage(stderr);
        return 2;
    }
    cJSON *e = bench_env_json();
    if (!e) {
        fprintf(stderr, "bench env: out of memory\n");
        return 1;
    }
    int rc = 0;
    if (json) {
        char *s = cJSON_Print(e);
        if (s) printf("%s\n", s);
        else rc = 1;
        free(s);
    } else {
        rc = print_text(e);
    }
    cJSON_Delete(e);
    return rc;
}
