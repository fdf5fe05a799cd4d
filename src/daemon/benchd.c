/* gpulsed's baseline benchmarks; see benchd.h and docs/internals/bench.md.
 *
 * One thread (the scheduler) owns everything that takes time: it watches
 * each GPU's utilization and processes once a second (from the bus),
 * spawns `gpulse bench --json` (or, when the screening is due,
 * `gpulse bench --screen --json`: screend.h), reads its output through
 * pipes, kills it when another process shows up on its GPU, and, when it
 * ends, compares the result with the history in the store, keeps it, and
 * publishes it. HTTP handlers only read and set state under the mutex;
 * /metrics renders the last result per GPU.
 *
 * Why one file: the scheduler thread and the state it owns are one concern
 * (its endpoints are in src/api/bench.c, the fleet's query in
 * bench_fleet.c, what a screening's result means in screend.c); a further
 * split would only publish the run's state to a second file. */
#include "daemon/benchd.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "api/bench.h"
#include "bench/bench_compare.h"
#include "bench/bench_result.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/log.h"
#include "collect/bus.h"
#include "collect/fields.h"
#include "common/periodic.h"
#include "profile/profile_emit.h"
#include "common/status.h"
#include "common/str.h"
#include "diagnose/health_live.h"
#include "daemon/bench_fleet.h"
#include "daemon/screend.h"

extern char **environ;

#define TICK_NS (1 * NS_PER_SEC)
#define NVML_RETRY_NS (60 * NS_PER_SEC)
#define KILL_GRACE_NS (10 * NS_PER_SEC)
#define MAX_OUTPUT (4u << 20)
#define MAX_STDERR (64u << 10)
#define HISTORY_RECORDS 64
#define MAX_PROCS 64

enum outcome { OUT_KEPT, OUT_NOT_BASELINE, OUT_ABORTED, OUT_REFUSED, OUT_FAILED, OUT_COUNT };
static const char *const outcome_names[OUT_COUNT] = {"kept", "not_baseline", "aborted", "refused",
						     "failed"};

struct gpu_state {
	int64_t idle_since_ns;        /* monotonic; 0: not idle now */
	int64_t next_due_ms;          /* wall; 0: due (never ran) */
	bool due_known;               /* next_due_ms read from the store */
	uint64_t runs[OUT_COUNT];
	struct bench_result *last;    /* the last completed run, or NULL */
	char *last_verdicts;          /* its verdicts (JSON array), or NULL */
	struct bench_verdict verdict[BENCH_MAX_FIGURES];
	bool has_verdict;
};

struct benchd {
	const struct gpulse_config *cfg;
	struct tsdb *_Atomic db;
	bool scheduled;               /* the schedule runs (enabled, NVML, period) */
	bool nvml_source;             /* a real GPU source: on-demand runs allowed */
	int64_t period_ms;
	struct periodic ticker;       /* scheduler_tick; kicked by a request */
	pthread_mutex_t mu;
	struct bus *bus;
	struct health_live *_Atomic health; /* told of regressions; NULL: none */
	struct screend *screen;       /* the screening's schedule and results */
	/* scheduler-thread only */
	struct gpu_snapshot *snap;    /* bus_read's scratch */
	unsigned ngpus;               /* written under mu: /metrics reads it */
	/* under mu */
	struct gpu_state gpu[BENCHD_MAX_GPUS];
	int request_gpu;              /* -1: none */
	char request_mode[8];
	long long next_id;
	/* the run (under mu; the pipes and pid are the thread's) */
	long long run_id;
	int run_gpu;
	int run_slot;                 /* its bus slot */
	char run_state[16];           /* idle, starting, running, done, aborted, refused, failed */
	char run_message[512];
	char run_mode[8];
	int64_t run_started_ms;
	bool run_scheduled;
	bool run_screen;              /* the run is a screening (screend.h) */
	pid_t pid;
	int out_fd, err_fd;
	struct buf out, err;
	int64_t run_deadline_ns;
	int64_t run_spawned_ns;
	unsigned child_pids[4];       /* NVML's pids of the child (see is_child) */
	int nchild;
	int64_t kill_at_ns;
	bool killing;
	char abort_why[256];
	struct api_bench api;         /* what the endpoints call (api/bench.h) */
};

/* ---- configuration ---------------------------------------------------- */

/* ---- helpers ---------------------------------------------------------- */

static int64_t now_ms(struct benchd *b)
{
	struct tsdb *db = atomic_load(&b->db);
	return db ? tsdb_now_ms(db) : clock_wall_ns() / NS_PER_MS;
}

static void set_state(struct benchd *b, const char *state, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_state(struct benchd *b, const char *state, const char *fmt, ...)
{
	pthread_mutex_lock(&b->mu);
	str_copy(b->run_state, sizeof b->run_state, state);
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(b->run_message, sizeof b->run_message, fmt, ap);
		va_end(ap);
	} else {
		b->run_message[0] = '\0';
	}
	pthread_mutex_unlock(&b->mu);
}

static const struct bench_compare_opts *compare_opts(const struct benchd *b,
						     struct bench_compare_opts *o)
{
	*o = (struct bench_compare_opts){
		.window = b->cfg->bench.baseline_runs,
		.min_points = b->cfg->bench.min_runs,
		.min_noise = b->cfg->bench.noise_floor,
		.max_noise = b->cfg->bench.noise_ceiling,
		.fleet_tolerance = b->cfg->bench.fleet_tolerance,
	};
	return o;
}

/* The command to run: bench.command, else `gpulse` beside this gpulsed,
 * else `gpulse` on PATH. */
static void command_path(const struct benchd *b, char *out, size_t len)
{
	if (b->cfg->bench.command[0]) {
		str_copy(out, len, b->cfg->bench.command);
		return;
	}
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			slash[1] = '\0';
			if (strlen(self) + sizeof "gpulse" <= len) {
				memcpy(out, self, strlen(self));
				memcpy(out + strlen(self), "gpulse", sizeof "gpulse");
				if (access(out, X_OK) == 0)
					return;
			}
		}
	}
	str_copy(out, len, "gpulse");
}

/* ---- idle and processes, from the bus ---------------------------------- */

/* What the collector last saw of bus slot `slot`: a process other than
 * `self` (its pid; 0: none), the utilization in percent (-1: unknown or
 * the GPU is not up), its NVML index and UUID. The bus is read, never
 * NVML: a hung NVML call stalls the collector's lane, not this thread. */
static unsigned gpu_activity(struct benchd *b, int slot, unsigned self, int *util_pct, int *index,
			     char *uuid, size_t uuid_len)
{
	struct gpu_snapshot *s = b->snap;
	*util_pct = -1;
	if (bus_read(b->bus, slot, s) != 0)
		return 0;
	if (index)
		*index = s->id.index;
	if (uuid)
		str_copy(uuid, uuid_len, s->id.uuid);
	if (s->health == GPU_HEALTH_UP && (s->valid & FIELD_BIT(F_GPU_UTIL)))
		*util_pct = (int)lround(s->v[F_GPU_UTIL] * 100);
	if (!s->procs_valid)
		return 0;
	for (int i = 0; i < s->nprocs && i < GPU_PROC_MAX; i++)
		if (s->procs[i].pid != self)
			return s->procs[i].pid ? s->procs[i].pid : 1;
	return s->procs_dropped ? 1 : 0;
}

/* Whether `pid`, on the GPU of a run, is the child. Its own pid is; in
 * a PID namespace (gpulsed in a container without the host's PIDs) NVML
 * gives the host's pid instead, which names no process here: such a pid
 * seen in the first seconds of the run, while the child creates its
 * context, is taken as the child's. A pid that names another process of
 * this namespace is never the child's. */
#define CHILD_LEARN_NS (15 * NS_PER_SEC)
static bool is_child(struct benchd *b, unsigned pid)
{
	if (pid == (unsigned)b->pid)
		return true;
	for (int i = 0; i < b->nchild; i++)
		if (b->child_pids[i] == pid)
			return true;
	char path[32];
	snprintf(path, sizeof path, "/proc/%u", pid);
	if (access(path, F_OK) == 0 || clock_mono_ns() - b->run_spawned_ns > CHILD_LEARN_NS ||
	    b->nchild >= (int)(sizeof b->child_pids / sizeof b->child_pids[0]))
		return false;
	b->child_pids[b->nchild++] = pid;
	log_info("bench: GPU %d: pid %u (not in this PID namespace) taken as the benchmark's own",
		 b->run_gpu, pid);
	return true;
}

/* A process on the run's GPU that is not the child (its pid), or 0. */
static unsigned run_intruder(struct benchd *b)
{
	struct gpu_snapshot *s = b->snap;
	if (bus_read(b->bus, b->run_slot, s) != 0 || !s->procs_valid)
		return 0;
	for (int i = 0; i < s->nprocs && i < GPU_PROC_MAX; i++)
		if (!is_child(b, s->procs[i].pid))
			return s->procs[i].pid ? s->procs[i].pid : 1;
	return 0;
}

/* ---- the store -------------------------------------------------------- */

static void record_key(char *out, size_t len, const char *uuid, int64_t t_ms)
{
	snprintf(out, len, "%s/%016lld", uuid, (long long)t_ms);
}

/* The stored results of `uuid`, oldest first, at most `max`. Each parsed
 * into res[] (the caller's array); returns how many. */
static size_t load_history(struct tsdb *db, const char *uuid, struct bench_result *res, size_t max)
{
	if (!db)
		return 0;
	char lo[160], hi[160];
	snprintf(lo, sizeof lo, "%s/", uuid);
	snprintf(hi, sizeof hi, "%s/~", uuid);
	struct tsdb_record *recs = NULL;
	size_t n = 0, kept = 0;
	if (tsdb_record_keys(db, BENCHD_RECORD_KIND, lo, hi, max, &recs, &n) != 0)
		return 0;
	/* Newest first from the store; damaged records are skipped, logged. */
	for (size_t i = n; i-- > 0;) {
		char err[256];
		if (bench_result_parse(recs[i].json, strlen(recs[i].json), &res[kept], err, sizeof err) == 0)
			kept++;
		else
			log_warn("bench: stored result %s is unreadable (%s); skipped", recs[i].key, err);
	}
	tsdb_records_free(recs, n);
	return kept;
}

/* ---- series: /metrics and the store from one walk ---------------------- */

/* The gauges of a run's result: written into the store by benchd itself at
 * each run (one point a run), and on /metrics from the last run. */
#define BENCH_RESULT_FAMILIES(X) \
	X("gpulse_bench_last_run_timestamp_seconds", \
	  "When the GPU's last benchmark run started (Unix seconds).") \
	X("gpulse_bench_last_run_baseline", \
	  "1 when the last run is fit to be a baseline (nothing else used the GPU, not interrupted).") \
	X("gpulse_bench_value", \
	  "The last run's value of each figure, in its unit label (flop_per_second, bytes_per_second, seconds, launches_per_second), made as its method label says: median (the median of its timed runs) or fast_p90 (host-bound figures: the edge of the fastest decile of its repetitions).") \
	X("gpulse_bench_peak_ratio", \
	  "The last run's value over the card's datasheet peak computed from its identity (SMs, clocks, bus width, PCIe link at its maximum).") \
	X("gpulse_bench_spread_ratio", \
	  "The last run's (max - min) / median over its timed runs.") \
	X("gpulse_bench_baseline_value", \
	  "The card's own rolling median of the figure's value over its earlier baseline runs on this driver and method.") \
	X("gpulse_bench_noise_ratio", \
	  "The noise band of the card's own baseline: 3 x 1.4826 x MAD / median, at least bench.noise_floor; above bench.noise_ceiling the figure is too noisy to catch a loss of that size and only a loss past the band is a regression.") \
	X("gpulse_bench_deficit_ratio", \
	  "How far the last run is below the reference (basis own: the card's rolling median; fleet: the same model's median): 1 - value / reference, for latency value / reference - 1.") \
	X("gpulse_bench_tolerance_ratio", \
	  "The deficit allowed before a regression: the noise band (basis own) or bench.fleet_tolerance or the band, whichever is larger (fleet).") \
	X("gpulse_bench_regression", \
	  "1 when the deficit exceeds the tolerance (GPUBenchRegression).")

#define FAMILY_NAME(name, help) name,
const char *const benchd_store_metrics[] = {BENCH_RESULT_FAMILIES(FAMILY_NAME) NULL};
#undef FAMILY_NAME

static void emit_gpu(struct profile_emitter *e, const struct gpu_state *g, int family)
{
	const struct bench_result *r = g->last;
	char idx[16];
	snprintf(idx, sizeof idx, "%d", r->gpu.index);
	static const char *const gl[] = {"gpu", "uuid", "model"};
	const char *gv[] = {idx, r->gpu.uuid, r->gpu.name};
	if (family == 0) {
		e->sample(e, gl, gv, 3, (double)r->t_ms / 1e3);
		return;
	}
	if (family == 1) {
		e->sample(e, gl, gv, 3, r->baseline ? 1 : 0);
		return;
	}
	static const char *const fl[] = {"gpu", "uuid", "model", "figure", "variant", "unit", "basis"};
	/* The value says how it was made, so that a central Prometheus's
	 * fleet comparison takes only peers of the same method. */
	static const char *const vl[] = {"gpu", "uuid", "model", "figure", "variant", "unit", "method"};
	for (int i = 0; i < r->nfig; i++) {
		const struct bench_figure *f = &r->fig[i];
		const struct bench_verdict *v = &g->verdict[i];
		const char *fv[] = {idx, r->gpu.uuid, r->gpu.name, f->name,
				    f->variant[0] ? f->variant : "none", f->unit, "own"};
		switch (family) {
		case 2:
			fv[6] = f->method;
			e->sample(e, vl, fv, 7, f->value);
			fv[6] = "own";
			break;
		case 3:
			if (f->has_peak)
				e->sample(e, fl, fv, 6, f->peak_fraction);
			break;
		case 4: e->sample(e, fl, fv, 6, f->spread_ratio); break;
		case 5:
			if (g->has_verdict && v->have_own)
				e->sample(e, fl, fv, 6, v->own_median);
			break;
		case 6:
			if (g->has_verdict && v->have_own)
				e->sample(e, fl, fv, 6, v->noise_ratio);
			break;
		case 7:
		case 8:
		case 9:
			if (!g->has_verdict)
				break;
			if (v->have_own) {
				fv[6] = "own";
				e->sample(e, fl, fv, 7, family == 7 ? v->own_deficit
							: family == 8 ? v->noise_ratio
								      : v->own_regression ? 1 : 0);
			}
			if (v->have_fleet) {
				fv[6] = "fleet";
				e->sample(e, fl, fv, 7, family == 7 ? v->fleet_deficit
							: family == 8 ? v->fleet_tolerance
								      : v->fleet_regression ? 1 : 0);
			}
			break;
		}
	}
}

/* The gauges of `one` (a run just finished, not yet published: the
 * store's copy, written without the mutex so that /metrics never waits on
 * SQLite), or, with one NULL, of every GPU's last run and the counters,
 * under the mutex. */
static void emit_all(struct benchd *b, struct profile_emitter *e, const struct gpu_state *one)
{
	bool with_counters = !one;
	static const struct {
		const char *name, *help;
	} fam[] = {
#define FAMILY(name, help) {name, help},
		BENCH_RESULT_FAMILIES(FAMILY)
#undef FAMILY
	};
	if (one) {
		for (int f = 0; f < (int)(sizeof fam / sizeof fam[0]); f++) {
			profile_family(e, fam[f].name, PROFILE_GAUGE, fam[f].help);
			emit_gpu(e, one, f);
		}
		return;
	}
	pthread_mutex_lock(&b->mu);
	for (int f = 0; f < (int)(sizeof fam / sizeof fam[0]); f++) {
		profile_family(e, fam[f].name, PROFILE_GAUGE, fam[f].help);
		for (unsigned g = 0; g < BENCHD_MAX_GPUS; g++)
			if (b->gpu[g].last)
				emit_gpu(e, &b->gpu[g], f);
	}
	if (with_counters) {
		profile_family(e, "gpulse_bench_runs_total", PROFILE_COUNTER,
			       "Benchmark runs by outcome: kept (a baseline), not_baseline, aborted (a "
			       "process appeared; nothing kept), refused (the GPU was in use or no "
			       "driver), failed.");
		static const char *const l[] = {"gpu", "outcome"};
		for (unsigned g = 0; g < BENCHD_MAX_GPUS; g++) {
			char idx[16];
			snprintf(idx, sizeof idx, "%u", g);
			for (int o = 0; o < OUT_COUNT; o++)
				if (b->gpu[g].runs[o] || (g < b->ngpus && b->ngpus))
					e->sample(e, l, (const char *const[]){idx, outcome_names[o]}, 2,
						  (double)b->gpu[g].runs[o]);
		}
		profile_family(e, "gpulse_bench_running", PROFILE_GAUGE,
			       "1 while a benchmark runs (on the GPU of its gpu label).");
		if (b->pid > 0 && !b->run_screen) {
			char idx[16];
			snprintf(idx, sizeof idx, "%d", b->run_gpu);
			static const char *const gl[] = {"gpu"};
			e->sample(e, gl, (const char *const[]){idx}, 1, 1);
		}
	}
	pthread_mutex_unlock(&b->mu);
}

void benchd_metrics(void *ctx, struct metric_sink *s)
{
	struct benchd *b = ctx;
	if (!b)
		return;
	struct profile_sink_emitter pe;
	profile_sink_emitter_init(&pe, s);
	emit_all(b, &pe.e, NULL);
	pthread_mutex_lock(&b->mu);
	unsigned ngpus = b->ngpus;
	pthread_mutex_unlock(&b->mu);
	screend_emit(b->screen, &pe.e, ngpus);
}

/* ---- the child ---------------------------------------------------------- */

static int spawn_run(struct benchd *b, int gpu, const char *mode, bool screen, char *err,
		     size_t errlen)
{
	char cmd[CONFIG_PATH_LEN], gpu_s[16];
	command_path(b, cmd, sizeof cmd);
	snprintf(gpu_s, sizeof gpu_s, "%d", gpu);
	char mode_opt[16];
	snprintf(mode_opt, sizeof mode_opt, "--%s", mode);
	const char *argv[16];
	int n = 0;
	argv[n++] = cmd;
	argv[n++] = "bench";
	if (screen)
		argv[n++] = "--screen";
	argv[n++] = "--gpu";
	argv[n++] = gpu_s;
	argv[n++] = mode_opt;
	argv[n++] = "--json";
	if (b->cfg->bench.cublaslt[0] && !screen) {
		argv[n++] = "--cublaslt";
		argv[n++] = b->cfg->bench.cublaslt;
	}
	if (b->cfg->nvml_library[0]) {
		argv[n++] = "--nvml-library";
		argv[n++] = b->cfg->nvml_library;
	}
	argv[n] = NULL;
	int out[2] = {-1, -1}, er[2] = {-1, -1};
	if (pipe2(out, O_CLOEXEC) != 0 || pipe2(er, O_CLOEXEC) != 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, er[1], STDERR_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawnattr_t at;
	posix_spawnattr_init(&at);
	sigset_t none;
	sigemptyset(&none);
	posix_spawnattr_setsigmask(&at, &none);
	sigset_t dfl;
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGINT);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGPIPE);
	posix_spawnattr_setsigdefault(&at, &dfl);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	pid_t pid;
	int rc = posix_spawnp(&pid, cmd, &fa, &at, (char *const *)(uintptr_t)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(out[1]);
	close(er[1]);
	out[1] = er[1] = -1;
	if (rc != 0) {
		snprintf(err, errlen, "cannot run %.300s: %s (set bench.command)", cmd, strerror(rc));
		goto fail;
	}
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(er[0], F_SETFL, O_NONBLOCK);
	pthread_mutex_lock(&b->mu);
	b->pid = pid;
	pthread_mutex_unlock(&b->mu);
	b->out_fd = out[0];
	b->err_fd = er[0];
	buf_reset(&b->out);
	buf_reset(&b->err);
	b->killing = false;
	b->abort_why[0] = '\0';
	b->run_spawned_ns = clock_mono_ns();
	b->run_deadline_ns = b->run_spawned_ns + b->cfg->bench.run_timeout_ns;
	b->nchild = 0;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (er[i] >= 0)
			close(er[i]);
	}
	return GPULSE_EIO;
}

static void drain(int *fd, struct buf *b)
{
	if (*fd < 0)
		return;
	char chunk[16384];
	for (;;) {
		ssize_t n = read(*fd, chunk, sizeof chunk);
		if (n > 0) {
			if (b->len + (size_t)n <= b->max)
				buf_append(b, chunk, (size_t)n);
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			close(*fd);
			*fd = -1;
		}
		return;
	}
}

static void kill_run(struct benchd *b, const char *why)
{
	if (b->killing || b->pid <= 0)
		return;
	str_copy(b->abort_why, sizeof b->abort_why, why);
	kill(b->pid, SIGTERM);
	b->killing = true;
	b->kill_at_ns = clock_mono_ns() + KILL_GRACE_NS;
}

/* The last line of the child's stderr, without "gpulse bench: ". */
static void last_line(const struct buf *e, char *out, size_t len)
{
	out[0] = '\0';
	if (!e->len)
		return;
	size_t end = e->len;
	while (end > 0 && (e->data[end - 1] == '\n' || e->data[end - 1] == '\r'))
		end--;
	size_t start = end;
	while (start > 0 && e->data[start - 1] != '\n')
		start--;
	const char *p = e->data + start;
	size_t n = end - start;
	const char *pre = "gpulse bench: ";
	if (n >= strlen(pre) && strncmp(p, pre, strlen(pre)) == 0)
		p += strlen(pre), n -= strlen(pre);
	if (n >= len)
		n = len - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* Tell the health score (health_live.h) whether this run regressed: the
 * figure furthest below its reference, and how many did; a run that
 * regressed nowhere clears an earlier regression. */
static void note_health(struct benchd *b, const struct bench_result *r,
			const struct bench_verdict *verdict)
{
	struct health_live *hl = atomic_load(&b->health);
	if (!hl || !r->baseline)
		return;
	int worst = -1, n = 0;
	double worst_deficit = 0;
	const char *basis = "own";
	for (int i = 0; i < r->nfig; i++) {
		const struct bench_verdict *v = &verdict[i];
		if (!v->own_regression && !v->fleet_regression)
			continue;
		n++;
		double d = v->own_regression ? v->own_deficit : v->fleet_deficit;
		if (worst < 0 || d > worst_deficit) {
			worst = i;
			worst_deficit = d;
			basis = v->own_regression ? "own" : "fleet";
		}
	}
	char text[GPU_HEALTH_EVIDENCE_LEN] = "";
	if (worst >= 0) {
		const struct bench_figure *f = &r->fig[worst];
		snprintf(text, sizeof text, "bench %s%s%s %.1f%% below its %s baseline (%d figure%s)",
			 f->name, f->variant[0] ? " " : "", f->variant, worst_deficit * 100, basis, n,
			 n == 1 ? "" : "s");
	}
	health_live_note(hl, r->gpu.uuid, HEALTH_MEASURE_BENCH, worst >= 0, text);
}

void benchd_set_health(struct benchd *b, struct health_live *hl)
{
	if (b) {
		atomic_store(&b->health, hl);
		screend_set_health(b->screen, hl);
	}
}


/* Compare a finished run with the history and the fleet, keep it, and
 * publish it. Scheduler thread. */
static void keep_result(struct benchd *b, struct bench_result *r, int gpu)
{
	struct tsdb *db = atomic_load(&b->db);
	struct bench_result *hist = calloc(HISTORY_RECORDS, sizeof *hist);
	size_t nh = hist ? load_history(db, r->gpu.uuid, hist, HISTORY_RECORDS) : 0;
	json_t *fleet = r->baseline ? bench_fleet_query(b->cfg->bench.fleet_prometheus_url, r) : NULL;
	struct bench_compare_opts co;
	compare_opts(b, &co);
	struct bench_verdict verdict[BENCH_MAX_FIGURES];
	struct buf vj;
	buf_init(&vj, 1u << 20);
	buf_putc(&vj, '[');
	struct bench_point *pts = calloc(HISTORY_RECORDS, sizeof *pts);
	for (int i = 0; i < r->nfig; i++) {
		const struct bench_figure *f = &r->fig[i];
		size_t np = 0;
		for (size_t h = 0; pts && h < nh; h++) {
			const struct bench_figure *hf = bench_result_find(&hist[h], f->name, f->variant);
			if (!hf || strcmp(hf->unit, f->unit) != 0)
				continue;
			pts[np] = (struct bench_point){.t_ms = hist[h].t_ms, .value = hf->value,
						       .baseline = hist[h].baseline};
			str_copy(pts[np].driver, sizeof pts[np].driver, hist[h].driver);
			str_copy(pts[np].method, sizeof pts[np].method, hf->method);
			np++;
		}
		double peers[BENCH_FLEET_MAX];
		size_t npeers = 0;
		char key[96];
		snprintf(key, sizeof key, "%s/%s/%s", f->name, f->variant[0] ? f->variant : "none",
			 f->method);
		json_t *arr = json_object_get(fleet, key);
		size_t k;
		json_t *v;
		json_array_foreach(arr, k, v) {
			if (npeers < BENCH_FLEET_MAX)
				peers[npeers++] = json_number_value(v);
		}
		bench_compare(pts, np, r->driver, f->method, f->value, f->higher_is_better, peers,
			      npeers, &co, &verdict[i]);
		if (!r->baseline) /* judged, but not a regression: it measured more than the card */
			verdict[i].own_regression = verdict[i].fleet_regression = false;
		if (i)
			buf_putc(&vj, ',');
		bench_verdict_to_json(f, &verdict[i], &vj);
	}
	buf_putc(&vj, ']');
	free(pts);
	free(hist);
	json_decref(fleet);

	int64_t t = now_ms(b);
	if (db) {
		struct gpu_state *one = calloc(1, sizeof *one);
		if (one) {
			one->last = r;
			memcpy(one->verdict, verdict, sizeof verdict);
			one->has_verdict = true;
			struct profile_store_emitter se;
			profile_store_emitter_init(&se, db, t);
			emit_all(b, &se.e, one);
			free(one);
		}
	}
	if (db && !vj.failed) {
		struct buf rec;
		buf_init(&rec, 8u << 20);
		buf_puts(&rec, "{\"result\":");
		bench_result_to_json(r, &rec);
		buf_puts(&rec, ",\"verdicts\":");
		buf_append(&rec, vj.data, vj.len);
		buf_putc(&rec, '}');
		char key[160];
		record_key(key, sizeof key, r->gpu.uuid, r->t_ms);
		if (rec.failed || tsdb_record_put(db, BENCHD_RECORD_KIND, key, r->t_ms, rec.data) != 0)
			log_warn("bench: cannot keep the result of GPU %d in the store", gpu);
		buf_free(&rec);
		size_t pruned = 0;
		tsdb_record_prune(db, BENCHD_RECORD_KIND, t - b->cfg->bench.retention_ns / NS_PER_MS, &pruned);
	}
	pthread_mutex_lock(&b->mu);
	struct gpu_state *g = &b->gpu[gpu];
	free(g->last);
	free(g->last_verdicts);
	g->last = r;
	g->last_verdicts = vj.failed ? NULL : buf_steal(&vj);
	memcpy(g->verdict, verdict, sizeof verdict);
	g->has_verdict = true;
	g->runs[r->baseline ? OUT_KEPT : OUT_NOT_BASELINE]++;
	g->next_due_ms = t + b->period_ms;
	pthread_mutex_unlock(&b->mu);
	buf_free(&vj);
	int regressions = 0;
	for (int i = 0; i < r->nfig; i++)
		regressions += verdict[i].own_regression || verdict[i].fleet_regression;
	log_info("bench: GPU %d (%s) measured in %.0f s: %d figures%s, %d below their baseline",
		 gpu, r->gpu.uuid, r->duration_s, r->nfig, r->baseline ? "" : " (not a baseline)",
		 regressions);
	note_health(b, r, verdict);
}

/* The child has exited with `status`. Scheduler thread. */
static void finish_run(struct benchd *b, int status)
{
	drain(&b->out_fd, &b->out);
	drain(&b->err_fd, &b->err);
	if (b->out_fd >= 0)
		close(b->out_fd);
	if (b->err_fd >= 0)
		close(b->err_fd);
	b->out_fd = b->err_fd = -1;
	int gpu = b->run_gpu;
	int64_t retry = now_ms(b) + b->cfg->bench.retry_interval_ns / NS_PER_MS;
	char msg[512];
	last_line(&b->err, msg, sizeof msg);
	pthread_mutex_lock(&b->mu);
	b->pid = 0;
	pthread_mutex_unlock(&b->mu);
	if (b->run_screen) {
		char state[16], smsg[512];
		screend_finish(b->screen, atomic_load(&b->db), gpu, status, &b->out, msg, b->abort_why,
			       now_ms(b), state, sizeof state, smsg, sizeof smsg);
		set_state(b, state, "%s", smsg);
		return;
	}
	if (b->abort_why[0]) {
		set_state(b, "aborted", "%s: run aborted, nothing kept%s", b->abort_why,
			  b->run_scheduled ? "; tried again when the GPU is idle" : "");
		log_info("bench: GPU %d: %s: run aborted, nothing kept", gpu, b->abort_why);
		pthread_mutex_lock(&b->mu);
		b->gpu[gpu].runs[OUT_ABORTED]++;
		b->gpu[gpu].next_due_ms = retry;
		pthread_mutex_unlock(&b->mu);
		return;
	}
	bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	struct bench_result *r = ok ? calloc(1, sizeof *r) : NULL;
	char perr[256] = "";
	if (r && (b->out.len == 0 ||
		  bench_result_parse(b->out.data, b->out.len, r, perr, sizeof perr) != 0)) {
		ok = false;
		free(r);
		r = NULL;
	}
	if (!ok || !r || r->interrupted) {
		bool refused = strstr(msg, "in use") || strstr(msg, "MIG") || strstr(msg, "no NVIDIA driver") ||
			       strstr(msg, "not enough free memory");
		if (!msg[0])
			snprintf(msg, sizeof msg, "%s", perr[0] ? perr
				 : WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "no result");
		set_state(b, refused ? "refused" : "failed", "%s", msg);
		log_warn("bench: GPU %d: %s", gpu, msg);
		pthread_mutex_lock(&b->mu);
		b->gpu[gpu].runs[refused ? OUT_REFUSED : OUT_FAILED]++;
		b->gpu[gpu].next_due_ms = retry;
		pthread_mutex_unlock(&b->mu);
		free(r);
		return;
	}
	keep_result(b, r, gpu);
	set_state(b, "done", r->baseline ? NULL : "kept, but not as a baseline: %s",
		  r->nnotes ? r->notes[0] : "");
}

/* Start run `id` (0: a new one, for the schedule; a request has been
 * given its id when it was accepted). */
static void start_run(struct benchd *b, int gpu, const char *mode, bool screen, bool scheduled,
		      long long id)
{
	char err[512];
	pthread_mutex_lock(&b->mu);
	b->run_id = id ? id : ++b->next_id;
	b->run_gpu = gpu;
	b->run_scheduled = scheduled;
	b->run_screen = screen;
	b->run_started_ms = now_ms(b);
	str_copy(b->run_mode, sizeof b->run_mode, mode);
	pthread_mutex_unlock(&b->mu);
	set_state(b, "starting", NULL);
	if (spawn_run(b, gpu, mode, screen, err, sizeof err) != 0) {
		set_state(b, "failed", "%s", err);
		log_warn("bench: %s", err);
		if (screen) {
			struct buf none = {0};
			char state[16], smsg[16];
			screend_finish(b->screen, atomic_load(&b->db), gpu, 0, &none, err, "", now_ms(b),
				       state, sizeof state, smsg, sizeof smsg);
			return;
		}
		pthread_mutex_lock(&b->mu);
		b->gpu[gpu].runs[OUT_FAILED]++;
		b->gpu[gpu].next_due_ms = now_ms(b) + b->cfg->bench.retry_interval_ns / NS_PER_MS;
		pthread_mutex_unlock(&b->mu);
		return;
	}
	set_state(b, "running", NULL);
	if (screen)
		screend_started(b->screen, gpu);
	log_info("%s: GPU %d: %s %s %lld started (%s)", screen ? "screen" : "bench", gpu, mode,
		 screen ? "screening" : "run", b->run_id, scheduled ? "idle window" : "requested");
}

/* While a run goes on: its output, its GPU, its deadline. */
static void watch_run(struct benchd *b)
{
	drain(&b->out_fd, &b->out);
	drain(&b->err_fd, &b->err);
	int status;
	pid_t w = waitpid(b->pid, &status, WNOHANG);
	if (w == b->pid) {
		finish_run(b, status);
		return;
	}
	int64_t t = clock_mono_ns();
	if (b->killing) {
		if (t >= b->kill_at_ns)
			kill(b->pid, SIGKILL);
		return;
	}
	if (t > b->run_deadline_ns) {
		kill_run(b, "the run outlasted bench.run_timeout");
		return;
	}
	{
		unsigned other = run_intruder(b);
		if (other) {
			char why[128];
			snprintf(why, sizeof why, "process %u appeared on GPU %d", other, b->run_gpu);
			kill_run(b, why);
		}
	}
}

/* Due GPUs that have been idle long enough, one at a time (runs share
 * the host's PCIe and CPU, so two at once would measure each other). */
static void schedule(struct benchd *b)
{
	int64_t t = clock_mono_ns(), wall = now_ms(b);
	struct tsdb *db = atomic_load(&b->db);
	int n = bus_gpu_count(b->bus);
	unsigned ngpus = n < 0 ? 0 : n > BENCHD_MAX_GPUS ? BENCHD_MAX_GPUS : (unsigned)n;
	pthread_mutex_lock(&b->mu);
	b->ngpus = ngpus;
	pthread_mutex_unlock(&b->mu);
	for (unsigned slot = 0; slot < ngpus; slot++) {
		int util, g = -1;
		char uuid[96] = "";
		unsigned other = gpu_activity(b, (int)slot, 0, &util, &g, uuid, sizeof uuid);
		if (g < 0 || g >= BENCHD_MAX_GPUS)
			continue;
		bool idle = !other && util >= 0 && (unsigned)util <= b->cfg->bench.idle_utilization_percent;
		pthread_mutex_lock(&b->mu);
		struct gpu_state *gs = &b->gpu[g];
		if (!idle)
			gs->idle_since_ns = 0;
		else if (!gs->idle_since_ns)
			gs->idle_since_ns = t;
		bool need_due = !gs->due_known && db && uuid[0];
		pthread_mutex_unlock(&b->mu);
		if (need_due) {
			/* The last stored run decides when the next is due. */
			char lo[160], hi[160];
			snprintf(lo, sizeof lo, "%s/", uuid);
			snprintf(hi, sizeof hi, "%s/~", uuid);
			struct tsdb_record *rec = NULL;
			size_t nr = 0;
			int64_t due = 0;
			if (tsdb_record_keys(db, BENCHD_RECORD_KIND, lo, hi, 1, &rec, &nr) == 0 && nr)
				due = rec[0].t_ms + b->period_ms;
			tsdb_records_free(rec, nr);
			pthread_mutex_lock(&b->mu);
			if (!gs->next_due_ms)
				gs->next_due_ms = due;
			gs->due_known = true;
			pthread_mutex_unlock(&b->mu);
		}
		pthread_mutex_lock(&b->mu);
		bool quiet = gs->idle_since_ns && t - gs->idle_since_ns >= b->cfg->bench.idle_for_ns;
		bool go = b->scheduled && quiet && wall >= gs->next_due_ms;
		pthread_mutex_unlock(&b->mu);
		/* The screening's due time is read even while the GPU is busy,
		 * so a mismatch stored before a restart is reported at once. */
		bool screen = !go && screend_due(b->screen, db, g, uuid, wall) && quiet;
		if (go || screen) {
			b->run_slot = (int)slot;
			start_run(b, g, screen ? b->cfg->screen.variant : b->cfg->bench.mode, screen, true, 0);
			return;
		}
	}
}

/* The bus slot of NVML index `gpu` (-1: none). */
static int slot_of(struct benchd *b, int gpu)
{
	int n = bus_gpu_count(b->bus);
	for (int slot = 0; slot < n; slot++)
		if (bus_read(b->bus, slot, b->snap) == 0 && b->snap->id.index == gpu)
			return slot;
	return -1;
}

/* The scheduler, every TICK_NS (a quarter of it while a run goes on) and
 * at once on a request: watch the run, start the requested one, or
 * start what the schedule says is due. */
static void scheduler_tick(void *arg)
{
	struct benchd *b = arg;
	pthread_mutex_lock(&b->mu);
	int req = b->request_gpu;
	long long req_id = b->run_id;
	char mode[8];
	str_copy(mode, sizeof mode, b->request_mode);
	b->request_gpu = -1;
	bool running = b->pid > 0;
	pthread_mutex_unlock(&b->mu);
	if (running) {
		watch_run(b);
	} else if (req >= 0) {
		b->run_slot = slot_of(b, req);
		start_run(b, req, mode, false, false, req_id);
	} else if (b->scheduled || screend_scheduled(b->screen)) {
		schedule(b);
	}
	pthread_mutex_lock(&b->mu);
	running = b->pid > 0;
	pthread_mutex_unlock(&b->mu);
	periodic_set_period(&b->ticker, running ? TICK_NS / 4 : TICK_NS);
}

/* After the scheduler's last tick: a run still going is ended (TERM,
 * then KILL after KILL_GRACE_NS). */
static void end_run_left(struct benchd *b)
{
	if (b->pid > 0) {
		kill(b->pid, SIGTERM);
		int64_t end = clock_mono_ns() + KILL_GRACE_NS;
		int status;
		while (waitpid(b->pid, &status, WNOHANG) == 0 && clock_mono_ns() < end)
			clock_sleep_until(clock_mono_ns() + 20 * NS_PER_MS);
		if (waitpid(b->pid, &status, WNOHANG) == 0) {
			kill(b->pid, SIGKILL);
			waitpid(b->pid, &status, 0);
		}
		b->pid = 0;
	}
}

/* ---- what the endpoints ask (api/bench.h) ------------------------------- */

/* api_bench.start: ask the scheduler for a run now. */
static int request_run(void *ctx, int gpu, const char *mode, long long *id_out, char *msg,
		       size_t msglen)
{
	struct benchd *b = ctx;
	pthread_mutex_lock(&b->mu);
	if (b->pid > 0 || b->request_gpu >= 0 || strcmp(b->run_state, "starting") == 0) {
		snprintf(msg, msglen, "a %s is running on GPU %d (run %lld); one runs at a time",
			 b->run_screen ? "screening" : "benchmark", b->run_gpu, b->run_id);
		pthread_mutex_unlock(&b->mu);
		return GPULSE_EBUSY;
	}
	b->request_gpu = gpu;
	str_copy(b->request_mode, sizeof b->request_mode, mode);
	long long id = b->next_id + 1;
	/* The run's id and state are visible at once, so a status poll
	 * right after this answer sees it starting. */
	b->run_id = id;
	b->next_id = id;
	b->run_gpu = gpu;
	str_copy(b->run_state, sizeof b->run_state, "starting");
	b->run_message[0] = '\0';
	pthread_mutex_unlock(&b->mu);
	periodic_kick(&b->ticker);
	*id_out = id;
	return 0;
}

/* api_bench.status: the latest run's document. */
static int status_json(void *ctx, int gpu, struct buf *o)
{
	struct benchd *b = ctx;
	pthread_mutex_lock(&b->mu);
	bool this_run = gpu < 0 || gpu == b->run_gpu;
	int g = gpu >= 0 ? gpu : b->run_gpu;
	buf_puts(o, "{\"status\":\"success\",\"data\":{");
	buf_printf(o, "\"gpu\":%d,\"scheduled\":%s", g, b->scheduled ? "true" : "false");
	if (this_run && b->run_id) {
		buf_printf(o, ",\"id\":%lld,\"kind\":\"%s\",\"state\":", b->run_id,
			   b->run_screen ? "screen" : "bench");
		buf_put_json_string(o, b->run_state);
		buf_puts(o, ",\"mode\":");
		buf_put_json_string(o, b->run_mode);
		buf_puts(o, ",\"message\":");
		buf_put_json_string(o, b->run_message);
	} else {
		buf_puts(o, ",\"state\":\"idle\"");
	}
	if (g >= 0 && g < BENCHD_MAX_GPUS) {
		struct gpu_state *gs = &b->gpu[g];
		if (gs->next_due_ms && b->scheduled) {
			buf_puts(o, ",\"next_due\":\"");
			buf_put_rfc3339(o, gs->next_due_ms, false);
			buf_putc(o, '"');
		}
		if (gs->last && (!this_run || b->run_screen || strcmp(b->run_state, "done") == 0 ||
				 strcmp(b->run_state, "running") == 0 || strcmp(b->run_state, "aborted") == 0)) {
			buf_puts(o, ",\"result\":");
			bench_result_to_json(gs->last, o);
			if (gs->last_verdicts) {
				buf_puts(o, ",\"verdicts\":");
				buf_puts(o, gs->last_verdicts);
			}
		}
	}
	pthread_mutex_unlock(&b->mu);
	screend_status_json(b->screen, g, o);
	return buf_puts(o, "}}\n");
}

/* api_bench.results: the stored runs' document. */
static int results_json(void *ctx, int gpu, const char *uuid_arg, struct buf *o, char *msg,
			size_t msglen)
{
	struct benchd *b = ctx;
	struct tsdb *db = atomic_load(&b->db);
	char uuid[80] = "";
	pthread_mutex_lock(&b->mu);
	if (b->gpu[gpu].last)
		str_copy(uuid, sizeof uuid, b->gpu[gpu].last->gpu.uuid);
	pthread_mutex_unlock(&b->mu);
	if (uuid_arg)
		str_copy(uuid, sizeof uuid, uuid_arg);
	if (!uuid[0] && db) {
		/* No run since start: the GPU's UUID from its stored results. */
		struct tsdb_record *recs = NULL;
		size_t n = 0;
		if (tsdb_record_list(db, BENCHD_RECORD_KIND, 0, INT64_MAX, 10000, &recs, &n) == 0)
			for (size_t i = n; i-- > 0 && !uuid[0];) {
				json_t *j = json_loads(recs[i].json, 0, NULL);
				json_t *gj = json_object_get(json_object_get(j, "result"), "gpu");
				if (json_integer_value(json_object_get(gj, "index")) == gpu)
					str_copy(uuid, sizeof uuid,
						 json_string_value(json_object_get(gj, "uuid")) ?: "");
				json_decref(j);
			}
		tsdb_records_free(recs, n);
	}
	if (!db) {
		snprintf(msg, msglen, "storage is off: benchmark history needs storage.path");
		return GPULSE_EINVAL;
	}
	struct bench_result *hist = calloc(HISTORY_RECORDS, sizeof *hist);
	if (!hist) {
		snprintf(msg, msglen, "out of memory");
		return GPULSE_ENOMEM;
	}
	size_t nh = uuid[0] ? load_history(db, uuid, hist, HISTORY_RECORDS) : 0;
	buf_puts(o, "{\"status\":\"success\",\"data\":{\"uuid\":");
	buf_put_json_string(o, uuid);
	buf_puts(o, ",\"runs\":[");
	for (size_t i = 0; i < nh; i++) {
		buf_puts(o, i ? ",{\"time\":\"" : "{\"time\":\"");
		buf_put_rfc3339(o, hist[i].t_ms, false);
		buf_printf(o, "\",\"mode\":\"%s\",\"baseline\":%s,\"driver\":", hist[i].mode,
			   hist[i].baseline ? "true" : "false");
		buf_put_json_string(o, hist[i].driver);
		buf_puts(o, "}");
	}
	buf_puts(o, "],\"figures\":[");
	/* One entry per figure of the newest run, its points oldest first. */
	struct bench_compare_opts co;
	compare_opts(b, &co);
	const struct bench_result *newest = nh ? &hist[nh - 1] : NULL;
	struct bench_point *pts = calloc(HISTORY_RECORDS, sizeof *pts);
	for (int f = 0; newest && pts && f < newest->nfig; f++) {
		const struct bench_figure *nf = &newest->fig[f];
		buf_puts(o, f ? ",{\"figure\":" : "{\"figure\":");
		buf_put_json_string(o, nf->name);
		buf_puts(o, ",\"variant\":");
		buf_put_json_string(o, nf->variant);
		buf_puts(o, ",\"unit\":");
		buf_put_json_string(o, nf->unit);
		buf_puts(o, ",\"points\":[");
		size_t np = 0;
		for (size_t i = 0; i < nh; i++) {
			const struct bench_figure *hf = bench_result_find(&hist[i], nf->name, nf->variant);
			if (!hf)
				continue;
			buf_puts(o, np ? ",{\"time\":\"" : "{\"time\":\"");
			buf_put_rfc3339(o, hist[i].t_ms, false);
			buf_puts(o, "\",\"value\":");
			buf_put_double(o, hf->value);
			buf_puts(o, ",\"method\":");
			buf_put_json_string(o, hf->method);
			buf_puts(o, ",\"median\":");
			buf_put_double(o, hf->median);
			buf_printf(o, ",\"spread_ratio\":");
			buf_put_double(o, hf->spread_ratio);
			buf_printf(o, ",\"baseline\":%s,\"driver\":", hist[i].baseline ? "true" : "false");
			buf_put_json_string(o, hist[i].driver);
			buf_putc(o, '}');
			if (i + 1 < nh) { /* the baseline excludes the newest run itself */
				pts[np] = (struct bench_point){.t_ms = hist[i].t_ms, .value = hf->value,
							       .baseline = hist[i].baseline};
				str_copy(pts[np].driver, sizeof pts[np].driver, hist[i].driver);
				str_copy(pts[np].method, sizeof pts[np].method, hf->method);
			}
			np++;
		}
		buf_putc(o, ']');
		struct bench_verdict v;
		size_t nprior = np && bench_result_find(newest, nf->name, nf->variant) ? np - 1 : np;
		bench_compare(pts, nprior, newest->driver, nf->method, nf->value, nf->higher_is_better,
			      NULL, 0, &co, &v);
		if (v.have_own) {
			buf_puts(o, ",\"baseline\":");
			buf_put_double(o, v.own_median);
			buf_puts(o, ",\"noise_ratio\":");
			buf_put_double(o, v.noise_ratio);
			buf_puts(o, ",\"deficit_ratio\":");
			buf_put_double(o, v.own_deficit);
			buf_printf(o, ",\"regression\":%s", v.own_regression ? "true" : "false");
		}
		buf_printf(o, ",\"baseline_points\":%zu}", v.own_points);
	}
	free(pts);
	free(hist);
	return buf_puts(o, "]}}\n");
}

int benchd_register(struct benchd *b, struct http_server *s)
{
	if (!b)
		return api_bench_register(s, NULL);
	b->api = (struct api_bench){
		.can_run = b->nvml_source, .default_mode = b->cfg->bench.mode,
		.max_gpus = BENCHD_MAX_GPUS, .start = request_run, .status = status_json,
		.results = results_json, .ctx = b,
	};
	return api_bench_register(s, &b->api);
}

/* ---- life ----------------------------------------------------------------- */

int benchd_start(struct benchd **out, const struct gpulse_config *c, struct tsdb *db,
		 struct bus *bus, bool nvml)
{
	struct benchd *b = calloc(1, sizeof *b);
	*out = b;
	if (!b)
		return GPULSE_ENOMEM;
	b->snap = malloc(sizeof *b->snap);
	b->screen = screend_create(c);
	if (!b->snap || !b->screen) {
		free(b->snap);
		screend_destroy(b->screen);
		free(b);
		*out = NULL;
		return GPULSE_ENOMEM;
	}
	b->bus = bus;
	b->cfg = c;
	atomic_store(&b->db, db);
	b->nvml_source = nvml;
	b->period_ms = benchd_schedule_ns(c->bench.schedule) / NS_PER_MS;
	b->scheduled = c->bench.enabled && nvml && b->period_ms > 0;
	b->request_gpu = -1;
	b->out_fd = b->err_fd = -1;
	str_copy(b->run_state, sizeof b->run_state, "idle");
	buf_init(&b->out, MAX_OUTPUT);
	buf_init(&b->err, MAX_STDERR);
	pthread_mutex_init(&b->mu, NULL);
	periodic_init(&b->ticker, "gpulse-benchd", false, scheduler_tick, b);
	if (!nvml)
		return 0;
	if (periodic_start(&b->ticker, TICK_NS) != 0) {
		log_warn("bench: cannot start the scheduler thread; benchmarks are off");
		b->nvml_source = b->scheduled = false;
		return 0;
	}
	if (b->scheduled) {
		char idle[32];
		duration_format(c->bench.idle_for_ns, idle, sizeof idle);
		log_info("bench: %s %s benchmarks of each GPU idle for %s with no process (bench.schedule)",
			 c->bench.schedule, c->bench.mode, idle);
	}
	if (screend_scheduled(b->screen)) {
		char idle[32], every[32];
		duration_format(c->bench.idle_for_ns, idle, sizeof idle);
		duration_format(c->screen.interval_ns, every, sizeof every);
		log_info("screen: a %s silent-corruption screening of each GPU idle for %s every %s "
			 "(screen.interval)", c->screen.variant, idle, every);
	}
	return 0;
}

void benchd_set_store(struct benchd *b, struct tsdb *db)
{
	if (b)
		atomic_store(&b->db, db);
}

void benchd_stop(struct benchd *b)
{
	if (!b)
		return;
	periodic_destroy(&b->ticker);
	end_run_left(b);
	screend_destroy(b->screen);
	free(b->snap);
	for (unsigned g = 0; g < BENCHD_MAX_GPUS; g++) {
		free(b->gpu[g].last);
		free(b->gpu[g].last_verdicts);
	}
	if (b->out_fd >= 0)
		close(b->out_fd);
	if (b->err_fd >= 0)
		close(b->err_fd);
	buf_free(&b->out);
	buf_free(&b->err);
	pthread_mutex_destroy(&b->mu);
	free(b);
}
