// gbench_shim.cc — the C API of gbench_shim.h over Google Benchmark 1.7.1: registration of C
// functions, the loop, manual time, counters, context, listing and running with a JSON output that
// is handed back after every benchmark (so `bench run` can keep its results directory current).
//
// How a run is observed: the file reporter is Google Benchmark's own JSONReporter, subclassed to
// keep a copy of everything it writes; the display reporter prints nothing. A benchmark has
// finished when its repetitions were reported (ReportRuns with the iteration runs, then maybe
// the aggregates); the shim hands the result over when the next benchmark's function is first
// called or the run ends, and learns that a benchmark starts from that same first call.
#include "gbench_shim.h"

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

// ---- registry -----------------------------------------------------------------------------

struct entry {
    std::string name, description, unit, error;
    std::vector<std::string> arg_names;
    std::vector<const char *> arg_names_c;
    int n_args = -1;  // -1 until argument names or a first tuple fix it
    int x_arg = -2;   // -2: default (the only argument, when there is one)
    bool manual_time = false, time_mode_set = false;
    tdm_gb_fn fn = nullptr;
    void *ctx = nullptr;
    std::vector<std::vector<int64_t>> tuples;   // tdm_gb_args, in order
    tdm_gb_work_fn work = nullptr;
    void *work_ctx = nullptr;
    benchmark::internal::Benchmark *b = nullptr;
    tdm_gb_info info{};
};

std::vector<std::unique_ptr<entry>> g_entries;
std::set<std::string> g_context_keys;
std::string g_last_json;
std::string g_label_mark;   // tdm_gb_set_label_mark

const char *const kClosing = "\n  ]\n}\n";   // what JSONReporter::Finalize writes

// ---- the run being observed ---------------------------------------------------------------

struct run_state {
    const tdm_gb_run_options *opt;
    std::vector<std::string> names;   // instances in run order
    int started = -1;                 // index of the instance whose function ran last
    int finished = 0;                 // instances whose iteration runs were reported
    bool skip_current = false;        // the current instance is not run (interrupted)
    bool pending = false;             // a finished instance not yet handed to on_result
    int pending_index = -1;
    std::string pending_error;
    bool pending_has_error = false;
    std::string json;                 // the JSON written so far
};

run_state *g_run = nullptr;

int stop_level() {
    return g_run && g_run->opt->stop_requested ? g_run->opt->stop_requested(g_run->opt->user) : 0;
}

void flush_pending() {
    run_state *r = g_run;
    if (!r || !r->pending) return;
    r->pending = false;
    if (!r->opt->on_result) return;
    std::string json = r->json + kClosing;
    tdm_gb_result res;
    res.index = r->pending_index;
    res.name = r->pending_index < (int)r->names.size() ? r->names[r->pending_index].c_str() : "";
    res.error = r->pending_has_error ? r->pending_error.c_str() : nullptr;
    res.json = json.c_str();
    r->opt->on_result(r->opt->user, &res);
}

// Reports nothing: `bench run` prints its own progress from the callbacks.
class null_reporter : public benchmark::BenchmarkReporter {
   public:
    bool ReportContext(const Context &) override { return true; }
    void ReportRuns(const std::vector<Run> &) override {}
};

// Google Benchmark's JSON reporter, keeping a copy of its output and noting finished benchmarks.
class capture_reporter : public benchmark::JSONReporter {
   public:
    bool ReportContext(const Context &c) override {
        bool ok = true;
        capture([&] { ok = JSONReporter::ReportContext(c); });
        return ok;
    }
    void ReportRuns(const std::vector<Run> &runs) override {
        capture([&] { JSONReporter::ReportRuns(runs); });
        run_state *r = g_run;
        if (!r || runs.empty() || runs[0].run_type != Run::RT_Iteration) return;
        r->pending = true;
        r->pending_index = r->finished++;
        r->pending_has_error = false;
        r->pending_error.clear();
        for (const Run &run : runs) {
            if (run.error_occurred) {
                r->pending_has_error = true;
                r->pending_error = run.error_message;
                break;
            }
        }
    }
    void Finalize() override {
        capture([&] { JSONReporter::Finalize(); }, false);
    }
    std::string text;

   private:
    // Runs f with the output going to a string, then copies it to the file and keeps it; the
    // snapshots (g_run->json) are the text before Finalize's closing.
    template <class F>
    void capture(F f, bool snapshot = true) {
        std::ostream &real = GetOutputStream();
        std::ostringstream s;
        SetOutputStream(&s);
        f();
        SetOutputStream(&real);
        real << s.str();
        text += s.str();
        if (g_run && snapshot) g_run->json = text;
    }
};

}  // namespace

// ---- the state handed to C ----------------------------------------------------------------

struct tdm_gb_state {
    benchmark::State *st;
    entry *e;
    bool in_loop = false, done = false, paused = false, time_set = false, labelled = false;
};

namespace {

// Ends the call with an error, its loop started first. Google Benchmark's statistics CHECK-fail
// (abort the process) when two repetitions of an instance succeeded and a later one reports
// another iteration count; a repetition that errors before its loop started reports 0, one that
// errors after reports the count every repetition runs (State::iterations() is max_iterations
// once started). Started first, a repetition can end in error at any point: a Ctrl-C or a row
// cut by the time budget stops at once, however many repetitions already succeeded.
void skip(tdm_gb_state *s, const char *msg) {
    if (s->st->error_occurred()) return;
    if (!s->in_loop && !s->done) {   // not started: start it (one iteration, no work)
        s->in_loop = s->st->KeepRunning();
        if (!s->in_loop) s->done = true;
    }
    if (s->paused) {   // SkipWithError stops a running timer only
        s->st->ResumeTiming();
        s->paused = false;
    }
    s->st->SkipWithError(msg);
}

void run_entry(entry *e, benchmark::State &st) {
    tdm_gb_state s{&st, e};
    run_state *r = g_run;
    if (r && r->started != r->finished) {   // the first call of the next instance
        flush_pending();
        r->started = r->finished;
        r->skip_current = stop_level() >= 1;
        if (!r->skip_current && r->opt->on_start) {
            const char *name =
                r->started < (int)r->names.size() ? r->names[r->started].c_str() : "";
            r->opt->on_start(r->opt->user, r->started, name);
        }
    }
    if ((r && r->skip_current) || stop_level() >= 2) {
        skip(&s, "interrupted");
        return;
    }
    e->fn(&s, e->ctx);
    if (!g_label_mark.empty() && !s.labelled) st.SetLabel(g_label_mark);
    // Google Benchmark CHECK-fails (aborts) on a function that returns before its loop ended.
    if (!st.error_occurred() && !s.done) {
        std::string msg = e->name + ": the benchmark function returned before its loop ended";
        skip(&s, msg.c_str());
    }
}

void apply_time_modes() {
    for (auto &e : g_entries) {
        if (e->time_mode_set) continue;
        e->time_mode_set = true;
        if (e->manual_time)
            e->b->UseManualTime();
        else
            e->b->UseRealTime();
    }
}

void copy_err(char *err, int errlen, const std::string &msg) {
    if (err && errlen > 0) snprintf(err, (size_t)errlen, "%s", msg.c_str());
}

// Initialize() with exactly these flags (it keeps earlier values of flags that are not given).
// argv[0] must outlive the call: Google Benchmark keeps it as the context's "executable".
void initialize(const std::vector<std::string> &flags) {
    static char exe[] = "bench";
    std::vector<std::string> args = flags;
    std::vector<char *> argv = {exe};
    for (auto &a : args) argv.push_back(&a[0]);
    argv.push_back(nullptr);
    int argc = (int)argv.size() - 1;
    benchmark::Initialize(&argc, argv.data());
}

std::string first_line(const std::string &s) {
    std::string t = s.substr(0, s.find('\n'));
    return t.empty() ? "no benchmark matches" : t;
}

}  // namespace

// ---- registration -------------------------------------------------------------------------

extern "C" tdm_gb_bench *tdm_gb_register(const char *name, tdm_gb_fn fn, void *ctx) {
    if (!name || !*name || !fn) return nullptr;
    try {
        auto e = std::make_unique<entry>();
        e->name = name;
        e->fn = fn;
        e->ctx = ctx;
        entry *ep = e.get();
        e->b =
            benchmark::RegisterBenchmark(name, [ep](benchmark::State &st) { run_entry(ep, st); });
        g_entries.push_back(std::move(e));
        return reinterpret_cast<tdm_gb_bench *>(ep);
    } catch (...) {
        return nullptr;
    }
}

extern "C" void tdm_gb_set_info(tdm_gb_bench *b, const char *description, const char *unit) {
    entry *e = reinterpret_cast<entry *>(b);
    if (!e) return;
    e->description = description ? description : "";
    e->unit = unit ? unit : "";
}

extern "C" void tdm_gb_arg_names(tdm_gb_bench *b, int n, const char *const *names) {
    entry *e = reinterpret_cast<entry *>(b);
    if (!e) return;
    if (n < 1 || n > TDM_GB_MAX_ARGS || !e->arg_names.empty() ||
        (e->n_args >= 0 && e->n_args != n)) {
        e->error =
            e->name + ": argument names given twice, not matching the arguments, or more than 8";
        return;
    }
    e->n_args = n;
    std::vector<std::string> v;
    for (int i = 0; i < n; i++) v.push_back(names[i] ? names[i] : "");
    e->arg_names = v;
    e->b->ArgNames(v);
}

extern "C" void tdm_gb_args(tdm_gb_bench *b, int n, const int64_t *values) {
    entry *e = reinterpret_cast<entry *>(b);
    if (!e) return;
    if (n < 1 || n > TDM_GB_MAX_ARGS || (e->n_args >= 0 && n != e->n_args)) {
        e->error = e->name + ": an argument tuple of the wrong length";
        return;
    }
    e->n_args = n;
    e->tuples.emplace_back(values, values + n);
    e->b->Args(e->tuples.back());
}

extern "C" void tdm_gb_set_work(tdm_gb_bench *b, tdm_gb_work_fn fn, void *ctx) {
    entry *e = reinterpret_cast<entry *>(b);
    if (!e) return;
    e->work = fn;
    e->work_ctx = ctx;
}

extern "C" void tdm_gb_set_x_arg(tdm_gb_bench *b, int index) {
    entry *e = reinterpret_cast<entry *>(b);
    if (e) e->x_arg = index < 0 ? -1 : index;
}

extern "C" void tdm_gb_use_manual_time(tdm_gb_bench *b) {
    entry *e = reinterpret_cast<entry *>(b);
    if (e && !e->time_mode_set) e->manual_time = true;
}

extern "C" void tdm_gb_clear(void) {
    benchmark::ClearRegisteredBenchmarks();
    g_entries.clear();
}

extern "C" int tdm_gb_count(void) { return (int)g_entries.size(); }

extern "C" const tdm_gb_info *tdm_gb_get(int i) {
    if (i < 0 || i >= (int)g_entries.size()) return nullptr;
    entry *e = g_entries[(size_t)i].get();
    e->arg_names_c.clear();
    for (auto &a : e->arg_names) e->arg_names_c.push_back(a.c_str());
    int nargs = e->n_args > 0 ? e->n_args : 0;
    e->info.name = e->name.c_str();
    e->info.description = e->description.c_str();
    e->info.unit = e->unit.c_str();
    e->info.n_args = nargs;
    e->info.x_arg = e->x_arg == -2 ? (nargs == 1 ? 0 : -1) : std::min(e->x_arg, nargs - 1);
    e->info.arg_names = e->arg_names_c.data();
    e->info.manual_time = e->manual_time;
    e->info.n_tuples = (int)e->tuples.size();
    return &e->info;
}

extern "C" const int64_t *tdm_gb_tuple(int i, int t) {
    if (i < 0 || i >= (int)g_entries.size()) return nullptr;
    entry *e = g_entries[(size_t)i].get();
    if (t < 0 || t >= (int)e->tuples.size()) return nullptr;
    return e->tuples[(size_t)t].data();
}

extern "C" bool tdm_gb_work(int i, int t, char *buf, int len) {
    if (buf && len > 0) buf[0] = 0;
    const int64_t *args = tdm_gb_tuple(i, t);
    entry *e = i >= 0 && i < (int)g_entries.size() ? g_entries[(size_t)i].get() : nullptr;
    if (!e || !e->work || !buf || len <= 0) return false;
    static const int64_t none[1] = {0};
    e->work(args ? args : none, args ? e->n_args : 0, e->work_ctx, buf, len);
    return true;
}

// ---- inside a benchmark function ----------------------------------------------------------

extern "C" bool tdm_gb_keep_running(tdm_gb_state *s) {
    if (s->done) return false;
    if (stop_level() >= 2) skip(s, "interrupted");
    if (s->e->manual_time && s->in_loop && !s->time_set)
        skip(s, (s->e->name + ": manual-time iteration without tdm_gb_set_iteration_time").c_str());
    if (s->paused) {   // KeepRunning() pauses the timer when the loop ends: it must be running
        s->st->ResumeTiming();
        s->paused = false;
    }
    s->time_set = false;
    bool more = s->st->KeepRunning();
    s->in_loop = more;
    if (!more) s->done = true;
    return more;
}

extern "C" int64_t tdm_gb_arg(const tdm_gb_state *s, int i) {
    if (i < 0 || i >= s->e->n_args) return 0;
    return s->st->range((size_t)i);
}

extern "C" int64_t tdm_gb_iterations(const tdm_gb_state *s) { return (int64_t)s->st->iterations(); }

extern "C" void tdm_gb_set_iteration_time(tdm_gb_state *s, double seconds) {
    if (!s->in_loop || s->st->error_occurred()) return;
    s->st->SetIterationTime(seconds > 0 ? seconds : 0);
    s->time_set = true;
}

extern "C" void tdm_gb_pause_timing(tdm_gb_state *s) {
    if (!s->in_loop || s->paused || s->st->error_occurred()) return;
    s->st->PauseTiming();
    s->paused = true;
}

extern "C" void tdm_gb_resume_timing(tdm_gb_state *s) {
    if (!s->paused || s->st->error_occurred()) return;
    s->st->ResumeTiming();
    s->paused = false;
}

// ---- cache flushing ------------------------------------------------------------------------

static bool flush_enabled = false;
static std::vector<unsigned char> flush_buffer;

extern "C" void tdm_gb_set_flush(bool enabled) { flush_enabled = enabled; }
extern "C" bool tdm_gb_flush_enabled(void) { return flush_enabled; }

// Twice the last-level cache (sysfs), 64 MiB when it cannot be read.
static size_t llc_bytes(void) {
    size_t best = 0;
    for (int i = 0; i < 8; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            size_t b = v * (unit == 'K' ? 1024ul : unit == 'M' ? 1048576ul : 1ul);
            if (b > best) best = b;
        }
        fclose(f);
    }
    return best ? 2 * best : (size_t)64 << 20;
}

extern "C" void tdm_gb_flush_caches(tdm_gb_state *s) {
    if (!flush_enabled || !s->in_loop) return;
    tdm_gb_pause_timing(s);
    if (flush_buffer.empty()) flush_buffer.resize(llc_bytes());
    unsigned sum = 0;
    for (size_t i = 0; i < flush_buffer.size(); i += 64) {
        flush_buffer[i] = (unsigned char)(flush_buffer[i] + 1);
        sum += flush_buffer[i];
    }
    benchmark::DoNotOptimize(sum);
    tdm_gb_resume_timing(s);
}

extern "C" void tdm_gb_counter(tdm_gb_state *s, const char *name, double value,
                               tdm_gb_counter_kind kind) {
    if (!name) return;
    benchmark::Counter::Flags f = kind == TDM_GB_RATE ? benchmark::Counter::kIsRate
                                  : kind == TDM_GB_PER_ITERATION_RATE
                                      ? benchmark::Counter::kIsIterationInvariantRate
                                      : benchmark::Counter::kDefaults;
    s->st->counters[name] = benchmark::Counter(value, f);
}

extern "C" void tdm_gb_set_label(tdm_gb_state *s, const char *label) {
    std::string l = label ? label : "";
    s->st->SetLabel(g_label_mark.empty() ? l : l.empty() ? g_label_mark : g_label_mark + "; " + l);
    s->labelled = true;
}

extern "C" void tdm_gb_set_label_mark(const char *mark) { g_label_mark = mark ? mark : ""; }

extern "C" void tdm_gb_skip_with_error(tdm_gb_state *s, const char *msg) {
    skip(s, msg && *msg ? msg : "failed");
}

extern "C" bool tdm_gb_error_occurred(const tdm_gb_state *s) { return s->st->error_occurred(); }

extern "C" void tdm_gb_do_not_optimize(const void *p) { benchmark::DoNotOptimize(p); }

extern "C" void tdm_gb_clobber_memory(void) { benchmark::ClobberMemory(); }

// ---- running ------------------------------------------------------------------------------

extern "C" void tdm_gb_add_context(const char *key, const char *value) {
    if (!key || !*key || !g_context_keys.insert(key).second) return;
    benchmark::AddCustomContext(key, value ? value : "");
}

extern "C" int tdm_gb_list(const char *filter, char ***names, char *err, int errlen) {
    *names = nullptr;
    for (auto &e : g_entries) {
        if (!e->error.empty()) {
            copy_err(err, errlen, e->error);
            return -1;
        }
    }
    apply_time_modes();
    initialize({"--benchmark_list_tests=true",
                std::string("--benchmark_filter=") + (filter && *filter ? filter : "."),
                "--benchmark_out="});
    null_reporter rep;
    std::ostringstream out, errs;
    rep.SetOutputStream(&out);
    rep.SetErrorStream(&errs);
    size_t n = benchmark::RunSpecifiedBenchmarks(&rep);
    initialize({"--benchmark_list_tests=false"});
    if (n == 0 && errs.str().find("Failed to match") == std::string::npos && !errs.str().empty()) {
        copy_err(err, errlen, first_line(errs.str()));
        return -1;
    }
    std::vector<std::string> v;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) v.push_back(line);
    char **arr = (char **)calloc(v.size() + 1, sizeof *arr);
    if (!arr) {
        copy_err(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < v.size(); i++) {
        if (!(arr[i] = strdup(v[i].c_str()))) {
            tdm_gb_names_free(arr, (int)i);
            copy_err(err, errlen, "out of memory");
            return -1;
        }
    }
    *names = arr;
    return (int)v.size();
}

extern "C" void tdm_gb_names_free(char **names, int n) {
    if (!names) return;
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

extern "C" int tdm_gb_run(const tdm_gb_run_options *o, char *err, int errlen) {
    char **names = nullptr;
    int n = tdm_gb_list(o->filter, &names, err, errlen);
    if (n < 0) return -1;
    run_state r;
    r.opt = o;
    for (int i = 0; i < n; i++) r.names.push_back(names[i]);
    tdm_gb_names_free(names, n);
    if (n == 0) {
        copy_err(err, errlen, "no benchmark matches");
        return -1;
    }
    // Google Benchmark exits the process when it cannot open its output file: check first. And
    // its stream follows links and waits on FIFOs: the file must be a regular one already, or new.
    int fd = open(o->json_out, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                  0666);
    struct stat sb;
    if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
        close(fd);
        fd = -1;
        errno = EINVAL;
    }
    if (fd < 0) {
        copy_err(err, errlen, std::string(o->json_out) + ": " +
                                  (errno == EINVAL || errno == ELOOP || errno == ENXIO
                                       ? "not a regular file"
                                       : strerror(errno)));
        return -1;
    }
    close(fd);
    char num[3][64];
    snprintf(num[0], sizeof num[0], "%d", o->repetitions > 0 ? o->repetitions : 1);
    snprintf(num[1], sizeof num[1], "%.17g", o->min_time > 0 ? o->min_time : 0.5);
    snprintf(num[2], sizeof num[2], "%.17g", o->min_warmup_time > 0 ? o->min_warmup_time : 0.0);
    initialize({"--benchmark_list_tests=false",
                std::string("--benchmark_filter=") + (o->filter && *o->filter ? o->filter : "."),
                std::string("--benchmark_repetitions=") + num[0],
                std::string("--benchmark_min_time=") + num[1],
                std::string("--benchmark_min_warmup_time=") + num[2],
                std::string("--benchmark_out=") + o->json_out, "--benchmark_out_format=json",
                "--benchmark_report_aggregates_only=false",
                "--benchmark_display_aggregates_only=false",
                "--benchmark_enable_random_interleaving=false", "--benchmark_time_unit=ns"});
    null_reporter display;
    std::ostringstream out, errs;
    display.SetOutputStream(&out);
    display.SetErrorStream(&errs);
    capture_reporter file;
    g_run = &r;
    size_t ran = benchmark::RunSpecifiedBenchmarks(&display, &file);
    flush_pending();
    g_run = nullptr;
    g_last_json = file.text;
    initialize({"--benchmark_out="});
    if (ran == 0) {
        copy_err(err, errlen, first_line(errs.str()));
        return -1;
    }
    return (int)ran;
}

extern "C" const char *tdm_gb_last_json(void) { return g_last_json.c_str(); }

extern "C" void tdm_gb_shutdown(void) {
    tdm_gb_clear();
    g_context_keys.clear();
    g_label_mark.clear();
    g_last_json.clear();
    g_last_json.shrink_to_fit();
    benchmark::Shutdown();
}
