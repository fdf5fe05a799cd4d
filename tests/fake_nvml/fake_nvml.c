/* A fake libnvidia-ml.so.1 for machines without a GPU (DESIGN.md, "Testing
 * without a GPU"): it exports, under NVML's own names and ABI
 * (src/nvml/nvml_abi.h), every function of the shim's NVML_FUNCS table and
 * serves the rows of real recordings, with faults on demand.
 *
 * Environment, read by nvmlInit_v2:
 *   GPULSE_FAKE_NVML_RECORDING=path[,path...]  one GPU per file, or the
 *       GPUs of a file's `gpu` column (default: the bundled H200 file)
 *   GPULSE_FAKE_NVML_GPUS=N     replicate the GPUs read to N; copy k of a
 *       GPU starts k*37 rows later, so that the copies differ
 *   GPULSE_FAKE_NVML_SPEED=X    recorded seconds per real second (default
 *       1; 0 freezes every GPU at its first row, for exact tests)
 *   GPULSE_FAKE_NVML_PROCESSES="PID:MIB:SM[:GPU[:GI[:MEM]]]][,...]"
 *       every GPU (or only GPU index GPU) serves these processes (pid,
 *       used memory in MiB, SM utilization in percent) instead of the
 *       row's proc_count made-up ones, so a test can list processes it
 *       owns with distinct values; under GPULSE_FAKE_NVML_MIG=1 a process
 *       with GI runs in that MIG GPU instance (compute instance 0); GI
 *       "-" is none; MEM, a percentage, is its memory utilization in
 *       every period (default: the GPU's, scaled by SM over the GPU's)
 *   GPULSE_FAKE_NVML_PROC_PERIOD_MS=N  the period of the fake driver's
 *       per-process sampler (default 167, nvidia-smi's 1/6 s; 10-2000)
 *   GPULSE_FAKE_NVML_FAULTS="spec;spec;..."  with specs
 *       hang:FUNC[:gpu=N][:after=S][:for=S]  every matching call made after
 *           S seconds sleeps `for` seconds (forever without it) first
 *       lost:gpu=N:at=S[:until=S2]  calls on GPU N return GPU_IS_LOST
 *       notsup:FUNC[:gpu=N]         FUNC returns NOT_SUPPORTED
 *       notsup:gpm[:gpu=N]          GPM is reported unsupported
 *       notsup:field=ID[:gpu=N]     nvmlDeviceGetFieldValues answers field
 *           ID with a per-field NOT_SUPPORTED (the call itself succeeds)
 *       xid:[gpu=N:]at=S:code=C     one XID event after S seconds
 *     A card's error history (every GPU without gpu=N); counters start at 0:
 *       ecc:[gpu=N:]rate=R[:accel=A][:dbe_at=S]  corrected ECC errors since
 *           init are floor(R*t + A*t*t/2) (a rate that climbs when A > 0);
 *           one uncorrected error from S seconds on
 *       remap:[gpu=N:]at=S[:pending=0|1][:failed=0|1][:unc=K][:cor=K]
 *           remapped rows from S seconds on (before: none)
 *       pcie:[gpu=N:]at=S[:width=W][:replays=K]  from S seconds on the link
 *           runs at W lanes (of 16) and K replays have been counted
 *       nodriver                    nvmlInit_v2 returns DRIVER_NOT_LOADED
 *   GPULSE_FAKE_NVML_MIG=1      every GPU reports MIG mode enabled, with three
 *       instances (mig_layout below: 3g.71gb GI 1, 2g.35gb GI 2, 1g.18gb
 *       GI 5, CI 0 each) whose UUIDs are MIG-..., whose used memory is a
 *       fixed share of the GPU's recorded use (the shares add up to it),
 *       and whose GPM metrics (nvmlGpmMigSampleGet) are the GPU's recorded
 *       ones times a fixed activity (1, 0.5 and 0: the 1g instance idles)
 *     Times are seconds of real (monotonic) time since nvmlInit_v2.
 *   GPULSE_FAKE_NVML_DRIVER_VERSION=V  the driver version reported
 *       (default 580.159.04), so a test can upgrade the driver
 *   GPULSE_FAKE_NVML_NVLINKS=N  NVLinks per GPU (default 18, an H200 SXM's;
 *       0: NVLink is NOT_SUPPORTED, as on a PCIe card without a bridge)
 *   GPULSE_FAKE_NVML_TOPOLOGY="A-B:LEVEL[:nvlink=K][,...]"  the PCIe
 *       common ancestor of GPUs A and B (LEVEL internal, single, multiple,
 *       hostbridge, node or system; pairs not named are system) and K
 *       NVLinks straight between them (each GPU's next K free links, in
 *       the order the pairs are named). With a topology the links that
 *       reach no peer are inactive; without one every link is active and
 *       reaches an NVSwitch (FAKE_NVSWITCH_BUS), as on an HGX board.
 *
 * NVLink error counters: an active link counts counter+1 errors of each
 * kind (replay 1, recovery 2, CRC flit 3, CRC data 4), an inactive one
 * none, so a sum over the wrong links or a swapped kind shows; the
 * field values' *_TOTAL fields are those sums, and fields 74-81 the
 * violation times nvmlDeviceGetViolationStatus gives.
 *
 * Per-process utilization (nvmlDeviceGetProcessUtilization) is a driver
 * sample buffer, as NVML's is: a sample per process per period of the
 * per-process sampler (on the wall clock, at multiples of the period;
 * the last PROC_BUFFER_PERIODS periods are kept, history from before init
 * included), each the process's utilization over that period; periods in
 * which a process did nothing have no sample; lastSeenTimeStamp 0 returns
 * the whole buffer. The row's processes split the GPU's recorded
 * utilization and memory utilization, averaged over the period, in the
 * ratio n : n-1 : ... : 1 (one process alone has all of it);
 * GPULSE_FAKE_NVML_PROCESSES ones read their SM percentage in every period
 * and the GPU's memory utilization scaled by SM over the GPU's utilization.
 *
 * Fake time: a GPU's position in its recording is (now - init) * speed
 * seconds past its first row (plus its replica shift), wrapping at the
 * end; its current row is the last one at or before that position. A value
 * the row lacks makes the function that reads it return NOT_SUPPORTED.
 *
 * Thread safety: one mutex guards all state, and is never held while a
 * call sleeps (hangs, event waits), so one hung call stalls nothing else.
 * Calls per function are counted; tests read them with
 * fakeNvmlCallCount("nvmlDeviceGetPowerUsage"). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect/fields.h"
#include "nvml/nvml_abi.h"
#include "nvml/nvml_shim.h"
#include "record/recording.h"
#include "collect/sample.h"

#define FAKE_API __attribute__((visibility("default")))

#ifdef GPULSE_SOURCE_DATADIR
#define DEFAULT_RECORDING GPULSE_SOURCE_DATADIR "/recordings/h200-phases-10hz.csv"
#else
#define DEFAULT_RECORDING "h200-phases-10hz.csv"
#endif
#define REPLICA_ROW_SHIFT 37
#define FAKE_NVLINKS 18                 /* an H200 SXM's */
#define FAKE_NVSWITCH_BUS 0xF0          /* where links go without a topology */
#define FAKE_GPU_BUS(gpu) (0x18U + (unsigned)(gpu))
#define FAULT_MAX 32
#define HANG_STEP_NS (100 * 1000000LL)  /* a hang "forever" sleeps in these */
#define ENERGY_BASE_MJ 1000000000ULL    /* a counter since driver load is never 0 */
#define GPM_FIELDS                                                              \
	(FIELD_BIT(F_GPM_GRAPHICS) | FIELD_BIT(F_GPM_SM) | FIELD_BIT(F_GPM_OCCUPANCY) | \
	 FIELD_BIT(F_GPM_INTEGER) | FIELD_BIT(F_GPM_TENSOR) | FIELD_BIT(F_GPM_DFMA) | \
	 FIELD_BIT(F_GPM_HMMA) | FIELD_BIT(F_GPM_IMMA) | FIELD_BIT(F_GPM_DRAM) |        \
	 FIELD_BIT(F_GPM_FP64) | FIELD_BIT(F_GPM_FP32) | FIELD_BIT(F_GPM_FP16) |        \
	 FIELD_BIT(F_GPM_PCIE_TX) | FIELD_BIT(F_GPM_PCIE_RX) |                           \
	 FIELD_BIT(F_GPM_NVLINK_TX) | FIELD_BIT(F_GPM_NVLINK_RX))
#define SUPPORTED_EVENTS                                                           \
	(NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR | NVML_ABI_EVENT_TYPE_SINGLE_BIT_ECC_ERROR | \
	 NVML_ABI_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR)
#define FAKE_PROC_MAX 64                /* GPULSE_FAKE_NVML_PROCESSES entries */
#define PROC_BUFFER_PERIODS 600         /* per-process samples kept: 100 s at 1/6 s */
#define EVENT_SET_MAGIC 0xfa4e5e75U
#define GPM_SAMPLE_MAGIC 0xfa4e69d5U

/* Functions are counted and matched by fault specs under the shim's names,
 * so the two can never disagree; nvmlErrorString comes on top. */
enum { FN_ERROR_STRING = NVML_FN_COUNT, FN_TOTAL };
static const char *const fn_names[FN_TOTAL] = {
#define FAKE_FN_NAME(kind, member, sym, alt, params) [NVML_FN_##member] = sym,
	NVML_FUNCS(FAKE_FN_NAME)
#undef FAKE_FN_NAME
	[FN_ERROR_STRING] = "nvmlErrorString",
};
static atomic_uint_fast64_t fn_calls[FN_TOTAL];

/* A handle is the address of one of these; its index is its offset, so
 * handles never change and reading one needs no lock. */
struct nvml_device_st {
	char unused;
};
static struct nvml_device_st devices[GPU_MAX];

/* MIG: the instances every GPU has under GPULSE_FAKE_NVML_MIG=1, in the
 * slots of nvmlDeviceGetMigDeviceHandleByIndex (the rest are empty). */
#define FAKE_MIG_SLOTS 7
static const struct fake_mig {
	const char *profile;
	unsigned gi;
	double mem_share;    /* of the GPU's used memory; they add up to 1 */
	double activity;     /* the instance's GPM metrics: the GPU's times this */
	unsigned long long total_mib;
} mig_layout[] = {
	{"3g.71gb", 1, 0.625, 1.0, 71 * 1024},
	{"2g.35gb", 2, 0.25, 0.5, 35 * 1024},
	{"1g.18gb", 5, 0.125, 0.0, 18 * 1024},
};
#define FAKE_MIG_COUNT ((int)(sizeof mig_layout / sizeof mig_layout[0]))
static struct nvml_device_st mig_devices[GPU_MAX][FAKE_MIG_SLOTS];

static bool mig_enabled(void)
{
	const char *mig = getenv("GPULSE_FAKE_NVML_MIG");
	return mig && strcmp(mig, "1") == 0;
}

/* For a MIG handle, its parent GPU's handle and *k its slot; any other
 * handle is returned as it is, with *k = -1. */
static nvml_device_t mig_parent(nvml_device_t dev, int *k)
{
	uintptr_t p = (uintptr_t)dev, base = (uintptr_t)mig_devices;
	*k = -1;
	if (p < base || p >= base + sizeof mig_devices)
		return dev;
	size_t off = (p - base) / sizeof mig_devices[0][0];
	*k = (int)(off % FAKE_MIG_SLOTS);
	return &devices[off / FAKE_MIG_SLOTS];
}

static void mig_uuid_of(int gpu, int k, char *buf, size_t len)
{
	snprintf(buf, len, "MIG-fa4e%04x-0000-5000-8000-%012x", (unsigned)gpu, mig_layout[k].gi);
}

struct nvml_event_set_st {
	unsigned magic;
	unsigned generation;                /* init the delivered bits belong to */
	uint32_t delivered;                 /* bit per fault: XID already given */
	unsigned long long mask[GPU_MAX];   /* registered event types per GPU */
};

struct nvml_gpm_sample_st {
	unsigned magic;
	int gpu;          /* -1 until nvmlGpmSampleGet */
	int mig;          /* mig_layout slot of nvmlGpmMigSampleGet, or -1 */
	double pos_s;     /* the GPU's recording position when taken */
};

enum fault_kind {
	FAULT_HANG, FAULT_LOST, FAULT_NOTSUP, FAULT_NOTSUP_GPM, FAULT_NOTSUP_FIELD, FAULT_XID,
	FAULT_NODRIVER, FAULT_ECC, FAULT_REMAP, FAULT_PCIE
};

struct fault {
	enum fault_kind kind;
	int fn;           /* function for hang and notsup */
	int gpu;          /* -1: every GPU */
	double after_s;   /* hang: from then on */
	double for_s;     /* hang: length; < 0 forever */
	double at_s;      /* lost, xid */
	double until_s;   /* lost: INFINITY when it stays lost */
	unsigned code;    /* xid; the field id of notsup:field */
	double rate, accel, dbe_at;          /* ecc */
	unsigned pending, failed, unc, cor;  /* remap */
	unsigned width, replays;             /* pcie */
};

/* One recorded GPU: its rows in time order and what replay needs. */
struct source {
	const struct rec_row **rows;
	size_t n;
	double first_t;
	double period_s;  /* recording length plus one typical row interval */
	double *cum_j;    /* energy at the start of each row; [n] = one period */
	double *cum_util; /* the same integral of gpu_util (percent-seconds) */
	double *cum_mem;  /* and of mem_util */
	double *cum_held; /* per violation policy (FAKE_POLICIES blocks of n + 1):
			   * seconds held down at the start of each row */
	uint64_t columns;
};

struct fake_gpu {
	const struct source *src;
	double shift_s;   /* replica offset into the recording */
};

static struct {
	pthread_mutex_t lock;
	int init_count;
	unsigned generation;
	int64_t init_ns;
	double speed;
	struct recording *recs[GPU_MAX];
	int nrecs;
	struct source srcs[GPU_MAX];
	int nsrcs;
	struct fake_gpu gpus[GPU_MAX];
	int ngpus;
	struct fault faults[FAULT_MAX];
	int nfaults;
	struct fake_proc {
		unsigned pid;
		unsigned long long used_bytes;
		unsigned sm_pct;
		int gpu;                 /* -1: on every GPU */
		int gi;                  /* MIG GPU instance, -1 none */
		int mem_pct;             /* memory utilization, -1: from the GPU's */
	} procs[FAKE_PROC_MAX];
	int nprocs;                  /* -1: the rows' proc_count decides */
	unsigned long long proc_period_us;  /* the per-process sampler's period */
	unsigned nvlinks;            /* NVLinks per GPU; 0: not supported */
	bool have_topology;          /* GPULSE_FAKE_NVML_TOPOLOGY was given */
	unsigned char level[GPU_MAX][GPU_MAX];   /* NVML topology level of a pair */
	signed char link_peer[GPU_MAX][NVML_ABI_NVLINK_MAX_LINKS]; /* -1: none */
} st = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* What enter() found out about the call in progress. */
struct call {
	int gpu;                     /* -1 for calls without a device */
	const struct fake_gpu *g;
	const struct rec_row *row;   /* the GPU's current row */
	double pos_s;                /* the GPU's position in its recording */
	double elapsed_s;            /* real seconds since init */
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static unsigned long long wall_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL;
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double elapsed_s(void)
{
	return (double)(mono_ns() - st.init_ns) / 1e9;
}

static int device_index(nvml_device_t dev)
{
	uintptr_t p = (uintptr_t)dev, base = (uintptr_t)devices;
	if (p < base || p >= base + sizeof devices)
		return -1;
	return (int)((p - base) / sizeof devices[0]);
}

/* ---- Replay ---------------------------------------------------------- */

static size_t row_index_at(const struct source *s, double x)
{
	size_t lo = 0, hi = s->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->rows[mid]->t_s - s->first_t <= x)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Position within one period of the recording. */
static double wrap(const struct source *s, double pos_s)
{
	if (s->period_s <= 0)
		return 0;
	double x = fmod(pos_s, s->period_s);
	return x < 0 ? x + s->period_s : x;
}

static const struct rec_row *row_at(const struct source *s, double pos_s)
{
	if (s->period_s <= 0)
		return s->rows[s->n - 1];
	return s->rows[row_index_at(s, wrap(s, pos_s))];
}

static double row_power_w(const struct rec_row *r)
{
	return (r->valid & FIELD_BIT(F_POWER)) ? r->v[F_POWER] : 0;
}

/* The violation policies the fake reports, each with the recorded clock
 * event reasons that stand for it: a row whose reasons hold one of those
 * bits counts its interval as time the policy held the clocks down.
 * Board limit and reliability have no reason bit of their own, so they
 * stay 0, as on a healthy card. */
static const struct {
	int policy;
	uint64_t reasons;
} fake_policies[] = {
	{NVML_ABI_PERF_POLICY_POWER, 0x4 | 0x80},
	{NVML_ABI_PERF_POLICY_THERMAL, 0x20 | 0x40},
	{NVML_ABI_PERF_POLICY_SYNC_BOOST, 0x10},
	{NVML_ABI_PERF_POLICY_BOARD_LIMIT, 0},
	{NVML_ABI_PERF_POLICY_LOW_UTILIZATION, 0x1},
	{NVML_ABI_PERF_POLICY_RELIABILITY, 0},
	{NVML_ABI_PERF_POLICY_TOTAL_APP_CLOCKS, 0x4 | 0x8 | 0x10 | 0x20 | 0x40 | 0x80},
	{NVML_ABI_PERF_POLICY_TOTAL_BASE_CLOCKS, 0x8 | 0x40 | 0x80},
};
#define FAKE_POLICIES ((int)(sizeof fake_policies / sizeof fake_policies[0]))

static double row_held(const struct rec_row *r, int k)
{
	if (!(r->valid & FIELD_BIT(F_CLOCK_REASONS)) || r->v[F_CLOCK_REASONS] < 0)
		return 0;
	return ((uint64_t)r->v[F_CLOCK_REASONS] & fake_policies[k].reasons) ? 1 : 0;
}

/* Seconds policy k held the clocks down from the start of the recording
 * to position pos_s (as energy_j integrates power). */
static double held_s(const struct source *s, int k, double pos_s)
{
	const double *cum = s->cum_held + (size_t)k * (s->n + 1);
	if (s->period_s <= 0)
		return row_held(s->rows[s->n - 1], k) * pos_s;
	double loops = floor(pos_s / s->period_s);
	double x = pos_s - loops * s->period_s;
	size_t i = row_index_at(s, x);
	return loops * cum[s->n] + cum[i] + row_held(s->rows[i], k) * (x - (s->rows[i]->t_s - s->first_t));
}

/* Joules used from the start of the recording to position pos_s: the
 * recorded power held constant over each row's interval. */
static double energy_j(const struct source *s, double pos_s)
{
	if (s->period_s <= 0)
		return row_power_w(s->rows[s->n - 1]) * pos_s;
	double loops = floor(pos_s / s->period_s);
	double x = pos_s - loops * s->period_s;
	size_t i = row_index_at(s, x);
	return loops * s->cum_j[s->n] + s->cum_j[i] +
	       row_power_w(s->rows[i]) * (x - (s->rows[i]->t_s - s->first_t));
}

static double row_pct(const struct rec_row *r, enum field_id f)
{
	return (r->valid & FIELD_BIT(f)) ? r->v[f] * 100 : 0;
}

/* The integral of field f (gpu_util or mem_util, in percent) from the
 * start of the recording to pos_s, as energy_j integrates power. */
static double pct_integral(const struct source *s, const double *cum, enum field_id f, double pos_s)
{
	if (s->period_s <= 0)
		return row_pct(s->rows[s->n - 1], f) * pos_s;
	double loops = floor(pos_s / s->period_s);
	double x = pos_s - loops * s->period_s;
	size_t i = row_index_at(s, x);
	return loops * cum[s->n] + cum[i] + row_pct(s->rows[i], f) * (x - (s->rows[i]->t_s - s->first_t));
}

static int source_init(struct source *s, const struct recording *rec, int gpu, bool by_gpu)
{
	size_t n = 0;
	for (size_t i = 0; i < rec->nrows; i++)
		n += !by_gpu || rec->rows[i].gpu == gpu;
	if (n == 0)
		return -1;
	s->rows = malloc(n * sizeof *s->rows);
	s->cum_j = malloc((n + 1) * sizeof *s->cum_j);
	s->cum_util = malloc((n + 1) * sizeof *s->cum_util);
	s->cum_mem = malloc((n + 1) * sizeof *s->cum_mem);
	s->cum_held = malloc((size_t)FAKE_POLICIES * (n + 1) * sizeof *s->cum_held);
	if (!s->rows || !s->cum_j || !s->cum_util || !s->cum_mem || !s->cum_held)
		return -2;
	s->n = 0;
	for (size_t i = 0; i < rec->nrows; i++)
		if (!by_gpu || rec->rows[i].gpu == gpu)
			s->rows[s->n++] = &rec->rows[i];
	s->columns = rec->columns;
	s->first_t = s->rows[0]->t_s;
	double dur = s->rows[n - 1]->t_s - s->first_t;
	/* The last row gets one typical interval before the wrap, as every
	 * other row does. */
	s->period_s = n > 1 && dur > 0 ? dur + dur / (double)(n - 1) : 0;
	s->cum_j[0] = s->cum_util[0] = s->cum_mem[0] = 0;
	for (size_t i = 0; i < n; i++) {
		double end = i + 1 < n ? s->rows[i + 1]->t_s - s->first_t : s->period_s;
		double dt = end - (s->rows[i]->t_s - s->first_t);
		s->cum_j[i + 1] = s->cum_j[i] + row_power_w(s->rows[i]) * dt;
		s->cum_util[i + 1] = s->cum_util[i] + row_pct(s->rows[i], F_GPU_UTIL) * dt;
		s->cum_mem[i + 1] = s->cum_mem[i] + row_pct(s->rows[i], F_MEM_UTIL) * dt;
	}
	for (int k = 0; k < FAKE_POLICIES; k++) {
		double *cum = s->cum_held + (size_t)k * (n + 1);
		cum[0] = 0;
		for (size_t i = 0; i < n; i++) {
			double end = i + 1 < n ? s->rows[i + 1]->t_s - s->first_t : s->period_s;
			cum[i + 1] = cum[i] + row_held(s->rows[i], k) * (end - (s->rows[i]->t_s - s->first_t));
		}
	}
	return 0;
}

/* ---- Configuration ---------------------------------------------------- */

static void state_free(void)
{
	for (int i = 0; i < st.nsrcs; i++) {
		free(st.srcs[i].rows);
		free(st.srcs[i].cum_j);
		free(st.srcs[i].cum_util);
		free(st.srcs[i].cum_mem);
		free(st.srcs[i].cum_held);
	}
	for (int i = 0; i < st.nrecs; i++)
		recording_free(st.recs[i]);
	memset(st.srcs, 0, sizeof st.srcs);
	memset(st.recs, 0, sizeof st.recs);
	st.nsrcs = st.nrecs = st.ngpus = st.nfaults = 0;
	st.nprocs = -1;
}

static bool parse_double(const char *s, double *out)
{
	char *end;
	if (!*s || !((*s >= '0' && *s <= '9') || *s == '.'))
		return false;
	double v = strtod(s, &end);
	if (*end || !isfinite(v) || v < 0)
		return false;
	*out = v;
	return true;
}

static bool parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	if (!(*s >= '0' && *s <= '9'))
		return false;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (*end || errno || v > max)
		return false;
	*out = v;
	return true;
}

/* GPULSE_FAKE_NVML_PROCESSES: "PID:MIB:SM[:GPU[:GI[:MEM]]]" entries, comma-separated. */
static int parse_procs(const char *spec, char *err, size_t errlen)
{
	char copy[4096];
	if (strlen(spec) >= sizeof copy) {
		snprintf(err, errlen, "GPULSE_FAKE_NVML_PROCESSES is longer than %zu bytes",
			 sizeof copy - 1);
		return -1;
	}
	snprintf(copy, sizeof copy, "%s", spec);
	st.nprocs = 0;
	char *save = NULL;
	for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char *f[6] = {e, NULL, NULL, NULL, NULL, NULL};
		for (int k = 1; k < 6 && f[k - 1]; k++) {
			char *colon = strchr(f[k - 1], ':');
			if (colon) {
				*colon = '\0';
				f[k] = colon + 1;
			}
		}
		unsigned long pid, mib, sm, gpu = 0, gi = 0, mem = 0;
		bool no_gi = f[4] && strcmp(f[4], "-") == 0;
		if (!f[1] || !f[2] || !parse_uint(f[0], 0xffffffffUL, &pid) || pid == 0 ||
		    !parse_uint(f[1], 1UL << 30, &mib) || !parse_uint(f[2], 100, &sm) ||
		    (f[3] && !parse_uint(f[3], GPU_MAX - 1, &gpu)) ||
		    (f[4] && !no_gi && !parse_uint(f[4], 14, &gi)) ||
		    (f[5] && !parse_uint(f[5], 100, &mem))) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_PROCESSES: bad entry \"%.64s\" "
				 "(want PID:MIB:SM[:GPU[:GI[:MEM]]], SM and MEM percentages, GPU an "
				 "index, GI 0-14 or -)", e);
			return -1;
		}
		if (st.nprocs >= FAKE_PROC_MAX) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_PROCESSES: more than %d entries",
				 FAKE_PROC_MAX);
			return -1;
		}
		st.procs[st.nprocs++] = (struct fake_proc){
			.pid = (unsigned)pid, .used_bytes = (unsigned long long)mib << 20,
			.sm_pct = (unsigned)sm, .gpu = f[3] ? (int)gpu : -1,
			.gi = f[4] && !no_gi ? (int)gi : -1, .mem_pct = f[5] ? (int)mem : -1};
	}
	return 0;
}

static int fn_by_name(const char *name)
{
	for (int i = 0; i < FN_TOTAL; i++)
		if (strcmp(fn_names[i], name) == 0)
			return i;
	return -1;
}

/* Parse one spec, cut in place at ':'. Writes a reason on failure. */
static int parse_fault(char *spec, struct fault *f, char *why, size_t whylen)
{
	char *fields[8];
	int n = 0;
	for (char *p = spec; p && n < 8;) {
		fields[n++] = p;
		p = strchr(p, ':');
		if (p)
			*p++ = '\0';
	}
	*f = (struct fault){.fn = -1, .gpu = -1, .for_s = -1, .at_s = -1, .until_s = INFINITY,
			    .dbe_at = INFINITY, .width = 16};
	const char *kind = fields[0];
	int first_key = 1;
	if (strcmp(kind, "nodriver") == 0) {
		f->kind = FAULT_NODRIVER;
	} else if (strcmp(kind, "hang") == 0 || strcmp(kind, "notsup") == 0) {
		f->kind = kind[0] == 'h' ? FAULT_HANG : FAULT_NOTSUP;
		if (n < 2 || (strchr(fields[1], '=') && strncmp(fields[1], "field=", 6) != 0)) {
			snprintf(why, whylen, "%s needs a function name", kind);
			return -1;
		}
		if (f->kind == FAULT_NOTSUP && strcmp(fields[1], "gpm") == 0) {
			f->kind = FAULT_NOTSUP_GPM;
		} else if (f->kind == FAULT_NOTSUP && strncmp(fields[1], "field=", 6) == 0) {
			unsigned long id;
			if (!parse_uint(fields[1] + 6, 1023, &id)) {
				snprintf(why, whylen, "bad field id \"%s\"", fields[1] + 6);
				return -1;
			}
			f->kind = FAULT_NOTSUP_FIELD;
			f->code = (unsigned)id;
		} else if ((f->fn = fn_by_name(fields[1])) < 0) {
			snprintf(why, whylen, "unknown NVML function \"%s\"", fields[1]);
			return -1;
		}
		first_key = 2;
	} else if (strcmp(kind, "lost") == 0) {
		f->kind = FAULT_LOST;
	} else if (strcmp(kind, "xid") == 0) {
		f->kind = FAULT_XID;
	} else if (strcmp(kind, "ecc") == 0) {
		f->kind = FAULT_ECC;
	} else if (strcmp(kind, "remap") == 0) {
		f->kind = FAULT_REMAP;
	} else if (strcmp(kind, "pcie") == 0) {
		f->kind = FAULT_PCIE;
	} else {
		snprintf(why, whylen, "unknown fault kind \"%s\"", kind);
		return -1;
	}
	bool have_code = false;
	for (int i = first_key; i < n; i++) {
		char *eq = strchr(fields[i], '=');
		if (!eq) {
			snprintf(why, whylen, "expected key=value, got \"%s\"", fields[i]);
			return -1;
		}
		*eq = '\0';
		const char *key = fields[i], *val = eq + 1;
		unsigned long u = 0;
		bool ok;
		if (strcmp(key, "gpu") == 0 && f->kind != FAULT_NODRIVER) {
			ok = parse_uint(val, GPU_MAX - 1, &u);
			f->gpu = (int)u;
		} else if (strcmp(key, "after") == 0 && f->kind == FAULT_HANG) {
			ok = parse_double(val, &f->after_s);
		} else if (strcmp(key, "for") == 0 && f->kind == FAULT_HANG) {
			ok = parse_double(val, &f->for_s);
		} else if (strcmp(key, "at") == 0 &&
			   (f->kind == FAULT_LOST || f->kind == FAULT_XID || f->kind == FAULT_REMAP ||
			    f->kind == FAULT_PCIE)) {
			ok = parse_double(val, &f->at_s);
		} else if (strcmp(key, "until") == 0 && f->kind == FAULT_LOST) {
			ok = parse_double(val, &f->until_s);
		} else if (strcmp(key, "code") == 0 && f->kind == FAULT_XID) {
			ok = parse_uint(val, 0xffffffffUL, &u);
			f->code = (unsigned)u;
			have_code = true;
		} else if (f->kind == FAULT_ECC && strcmp(key, "rate") == 0) {
			ok = parse_double(val, &f->rate);
		} else if (f->kind == FAULT_ECC && strcmp(key, "accel") == 0) {
			ok = parse_double(val, &f->accel);
		} else if (f->kind == FAULT_ECC && strcmp(key, "dbe_at") == 0) {
			ok = parse_double(val, &f->dbe_at);
		} else if (f->kind == FAULT_REMAP && (strcmp(key, "pending") == 0 ||
						      strcmp(key, "failed") == 0)) {
			ok = parse_uint(val, 1, &u);
			*(key[0] == 'p' ? &f->pending : &f->failed) = (unsigned)u;
		} else if (f->kind == FAULT_REMAP && (strcmp(key, "unc") == 0 || strcmp(key, "cor") == 0)) {
			ok = parse_uint(val, 100000, &u);
			*(key[0] == 'u' ? &f->unc : &f->cor) = (unsigned)u;
		} else if (f->kind == FAULT_PCIE && strcmp(key, "width") == 0) {
			ok = parse_uint(val, 16, &u) && u > 0;
			f->width = (unsigned)u;
		} else if (f->kind == FAULT_PCIE && strcmp(key, "replays") == 0) {
			ok = parse_uint(val, 0xffffffffUL, &u);
			f->replays = (unsigned)u;
		} else {
			snprintf(why, whylen, "unexpected key \"%s\" for %s", key, kind);
			return -1;
		}
		if (!ok) {
			snprintf(why, whylen, "bad value \"%s\" for %s", val, key);
			return -1;
		}
	}
	if (f->kind == FAULT_LOST && (f->gpu < 0 || f->at_s < 0)) {
		snprintf(why, whylen, "lost needs gpu=N and at=S");
		return -1;
	}
	if ((f->kind == FAULT_REMAP || f->kind == FAULT_PCIE) && f->at_s < 0)
		f->at_s = 0;
	if (f->kind == FAULT_XID) {
		if (f->at_s < 0 || !have_code) {
			snprintf(why, whylen, "xid needs at=S and code=C");
			return -1;
		}
		if (f->gpu < 0)
			f->gpu = 0;
	}
	return 0;
}

static int parse_faults(const char *env, char *err, size_t errlen)
{
	char *copy = strdup(env);
	char *save = NULL;
	int rc = 0;
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (char *spec = strtok_r(copy, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) {
		while (*spec == ' ' || *spec == '\t' || *spec == '\n')
			spec++;
		size_t l = strlen(spec);
		while (l && (spec[l - 1] == ' ' || spec[l - 1] == '\t' || spec[l - 1] == '\n'))
			spec[--l] = '\0';
		if (!l)
			continue;
		char shown[128], why[160];
		snprintf(shown, sizeof shown, "%s", spec);
		if (st.nfaults == FAULT_MAX) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_FAULTS: more than %d specs", FAULT_MAX);
			rc = -1;
			goto out;
		}
		if (parse_fault(spec, &st.faults[st.nfaults], why, sizeof why) != 0) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_FAULTS: bad spec \"%s\": %s", shown, why);
			rc = -1;
			goto out;
		}
		st.nfaults++;
	}
out:
	free(copy);
	return rc;
}

static int load_recordings(const char *env, char *err, size_t errlen)
{
	char *copy = strdup(env);
	char *save = NULL;
	int rc = -1;
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (char *path = strtok_r(copy, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
		char why[512];
		struct recording *rec;
		if (st.nrecs == GPU_MAX) {
			snprintf(err, errlen, "more than %d recordings", GPU_MAX);
			goto out;
		}
		if (recording_load(path, &rec, why, sizeof why) != 0) {
			snprintf(err, errlen, "cannot load recording: %s", why);
			goto out;
		}
		st.recs[st.nrecs++] = rec;
		if (rec->nrows == 0) {
			snprintf(err, errlen, "%s: recording has no rows", path);
			goto out;
		}
		int n = rec->has_gpu_column ? rec->ngpus : 1;
		for (int g = 0; g < n; g++) {
			if (st.nsrcs == GPU_MAX) {
				snprintf(err, errlen, "more than %d GPUs in the recordings", GPU_MAX);
				goto out;
			}
			int r = source_init(&st.srcs[st.nsrcs], rec, g, rec->has_gpu_column);
			st.nsrcs++;
			if (r != 0) {
				snprintf(err, errlen, r == -1 ? "%s: gpu %d has no rows" : "%s: out of memory",
					 path, g);
				goto out;
			}
		}
	}
	if (st.nsrcs == 0) {
		snprintf(err, errlen, "GPULSE_FAKE_NVML_RECORDING names no file");
		goto out;
	}
	rc = 0;
out:
	free(copy);
	return rc;
}

static const struct {
	const char *name;
	unsigned level;
} topo_levels[] = {
	{"internal", NVML_ABI_TOPOLOGY_INTERNAL}, {"single", NVML_ABI_TOPOLOGY_SINGLE},
	{"multiple", NVML_ABI_TOPOLOGY_MULTIPLE}, {"hostbridge", NVML_ABI_TOPOLOGY_HOSTBRIDGE},
	{"node", NVML_ABI_TOPOLOGY_NODE}, {"system", NVML_ABI_TOPOLOGY_SYSTEM},
};

/* GPULSE_FAKE_NVML_TOPOLOGY: "A-B:LEVEL[:nvlink=K]" entries, comma-separated
 * (the GPU count and NVLinks per GPU are known by then). */
static int parse_topology(const char *spec, char *err, size_t errlen)
{
	char copy[4096];
	if (strlen(spec) >= sizeof copy) {
		snprintf(err, errlen, "GPULSE_FAKE_NVML_TOPOLOGY is longer than %zu bytes", sizeof copy - 1);
		return -1;
	}
	snprintf(copy, sizeof copy, "%s", spec);
	st.have_topology = true;
	unsigned used[GPU_MAX] = {0};
	char *save = NULL;
	for (char *e = strtok_r(copy, ",", &save); e; e = strtok_r(NULL, ",", &save)) {
		char shown[96];
		snprintf(shown, sizeof shown, "%s", e);
		char *level = strchr(e, ':');
		char *dash = strchr(e, '-');
		char *links = level ? strchr(level + 1, ':') : NULL;
		if (level)
			*level++ = '\0';
		if (links)
			*links++ = '\0';
		if (dash && (!level || dash < level))
			*dash++ = '\0';
		else
			dash = NULL;
		unsigned long a, b, k = 0;
		int lv = -1;
		for (size_t i = 0; level && i < sizeof topo_levels / sizeof topo_levels[0]; i++)
			if (strcmp(level, topo_levels[i].name) == 0)
				lv = (int)topo_levels[i].level;
		if (!dash || !parse_uint(e, GPU_MAX - 1, &a) || !parse_uint(dash, GPU_MAX - 1, &b) ||
		    a == b || lv < 0 ||
		    (links && (strncmp(links, "nvlink=", 7) != 0 ||
			       !parse_uint(links + 7, NVML_ABI_NVLINK_MAX_LINKS, &k)))) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_TOPOLOGY: bad entry \"%s\" (want "
				 "A-B:LEVEL[:nvlink=K], A and B two GPUs, LEVEL internal, single, "
				 "multiple, hostbridge, node or system)", shown);
			return -1;
		}
		if ((int)a >= st.ngpus || (int)b >= st.ngpus) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_TOPOLOGY: \"%s\" names a GPU past the %d there are",
				 shown, st.ngpus);
			return -1;
		}
		if (used[a] + k > st.nvlinks || used[b] + k > st.nvlinks) {
			snprintf(err, errlen, "GPULSE_FAKE_NVML_TOPOLOGY: \"%s\" needs more than the %u NVLinks "
				 "a GPU has", shown, st.nvlinks);
			return -1;
		}
		st.level[a][b] = st.level[b][a] = (unsigned char)lv;
		for (unsigned long i = 0; i < k; i++) {
			st.link_peer[a][used[a]++] = (signed char)b;
			st.link_peer[b][used[b]++] = (signed char)a;
		}
	}
	return 0;
}

/* Read the environment and load everything. Called with the lock held. */
static nvml_return_t configure(void)
{
	char err[768];
	const char *env;

	state_free();
	env = getenv("GPULSE_FAKE_NVML_FAULTS");
	if (env && parse_faults(env, err, sizeof err) != 0)
		goto fail;
	for (int i = 0; i < st.nfaults; i++)
		if (st.faults[i].kind == FAULT_NODRIVER) {
			state_free();
			return NVML_ABI_ERROR_DRIVER_NOT_LOADED;
		}

	st.speed = 1;
	env = getenv("GPULSE_FAKE_NVML_PROCESSES");
	if (env && *env && parse_procs(env, err, sizeof err) != 0)
		goto fail;

	env = getenv("GPULSE_FAKE_NVML_SPEED");
	if (env && *env && !parse_double(env, &st.speed)) {
		snprintf(err, sizeof err, "GPULSE_FAKE_NVML_SPEED=\"%s\" is not a number >= 0", env);
		goto fail;
	}

	st.proc_period_us = 166667;
	env = getenv("GPULSE_FAKE_NVML_PROC_PERIOD_MS");
	if (env && *env) {
		unsigned long ms;
		if (!parse_uint(env, 2000, &ms) || ms < 10) {
			snprintf(err, sizeof err, "GPULSE_FAKE_NVML_PROC_PERIOD_MS=\"%s\" is not in 10..2000",
				 env);
			goto fail;
		}
		st.proc_period_us = ms * 1000ULL;
	}

	env = getenv("GPULSE_FAKE_NVML_RECORDING");
	if (load_recordings(env && *env ? env : DEFAULT_RECORDING, err, sizeof err) != 0)
		goto fail;

	st.ngpus = st.nsrcs;
	env = getenv("GPULSE_FAKE_NVML_GPUS");
	if (env && *env) {
		unsigned long n;
		if (!parse_uint(env, GPU_MAX, &n) || n == 0) {
			snprintf(err, sizeof err, "GPULSE_FAKE_NVML_GPUS=\"%s\" is not in 1..%d", env,
				 GPU_MAX);
			goto fail;
		}
		st.ngpus = (int)n;
	}
	for (int k = 0; k < st.ngpus; k++) {
		const struct source *s = &st.srcs[k % st.nsrcs];
		st.gpus[k].src = s;
		st.gpus[k].shift_s = 0;
		if (k >= st.nsrcs)
			st.gpus[k].shift_s =
				s->rows[((size_t)k * REPLICA_ROW_SHIFT) % s->n]->t_s - s->first_t;
	}
	st.nvlinks = FAKE_NVLINKS;
	env = getenv("GPULSE_FAKE_NVML_NVLINKS");
	if (env && *env) {
		unsigned long n;
		if (!parse_uint(env, NVML_ABI_NVLINK_MAX_LINKS, &n)) {
			snprintf(err, sizeof err, "GPULSE_FAKE_NVML_NVLINKS=\"%s\" is not in 0..%d", env,
				 NVML_ABI_NVLINK_MAX_LINKS);
			goto fail;
		}
		st.nvlinks = (unsigned)n;
	}
	st.have_topology = false;
	memset(st.level, NVML_ABI_TOPOLOGY_SYSTEM, sizeof st.level);
	memset(st.link_peer, -1, sizeof st.link_peer);
	env = getenv("GPULSE_FAKE_NVML_TOPOLOGY");
	if (env && *env && parse_topology(env, err, sizeof err) != 0)
		goto fail;
	for (int i = 0; i < st.nfaults; i++)
		if (st.faults[i].gpu >= st.ngpus) {
			snprintf(err, sizeof err, "GPULSE_FAKE_NVML_FAULTS names gpu %d, but there are %d",
				 st.faults[i].gpu, st.ngpus);
			goto fail;
		}
	return NVML_ABI_SUCCESS;
fail:
	fprintf(stderr, "fake NVML: %s\n", err);
	state_free();
	return NVML_ABI_ERROR_UNKNOWN;
}

/* ---- Faults ----------------------------------------------------------- */

static bool fault_gpu_matches(const struct fault *f, int gpu)
{
	return f->gpu < 0 || f->gpu == gpu;
}

/* Seconds the call must sleep first: 0 none, < 0 forever. */
static double hang_for(int fn, int gpu, double now_s)
{
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (f->kind == FAULT_HANG && f->fn == fn && fault_gpu_matches(f, gpu) &&
		    now_s >= f->after_s)
			return f->for_s;
	}
	return 0;
}

static bool is_lost(int gpu, double now_s)
{
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (f->kind == FAULT_LOST && f->gpu == gpu && now_s >= f->at_s && now_s < f->until_s)
			return true;
	}
	return false;
}

static bool is_notsup(enum fault_kind kind, int fn, int gpu)
{
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (f->kind == kind && (kind == FAULT_NOTSUP_GPM || f->fn == fn) &&
		    fault_gpu_matches(f, gpu))
			return true;
	}
	return false;
}

static bool is_notsup_field(unsigned field_id, int gpu)
{
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (f->kind == FAULT_NOTSUP_FIELD && f->code == field_id && fault_gpu_matches(f, gpu))
			return true;
	}
	return false;
}

/* A card's error history (ecc, remap and pcie specs) at `t` seconds
 * since init: the value NVML would report. Called with the lock. */
enum wear { WEAR_SBE, WEAR_DBE, WEAR_REMAP_COR, WEAR_REMAP_UNC, WEAR_REMAP_PENDING,
	    WEAR_REMAP_FAILED, WEAR_PCIE_REPLAY, WEAR_PCIE_WIDTH };
static unsigned long long wear(int gpu, double t, enum wear w)
{
	unsigned long long v = w == WEAR_PCIE_WIDTH ? 16 : 0;
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (!fault_gpu_matches(f, gpu))
			continue;
		if (f->kind == FAULT_ECC && w == WEAR_SBE)
			v += (unsigned long long)floor(f->rate * t + f->accel * t * t / 2);
		else if (f->kind == FAULT_ECC && w == WEAR_DBE)
			v += t >= f->dbe_at;
		else if (f->kind == FAULT_REMAP && t >= f->at_s)
			v += w == WEAR_REMAP_COR ? f->cor : w == WEAR_REMAP_UNC ? f->unc
			   : w == WEAR_REMAP_PENDING ? f->pending : w == WEAR_REMAP_FAILED ? f->failed : 0;
		else if (f->kind == FAULT_PCIE && t >= f->at_s && w == WEAR_PCIE_REPLAY)
			v += f->replays;
		else if (f->kind == FAULT_PCIE && t >= f->at_s && w == WEAR_PCIE_WIDTH)
			v = f->width;
	}
	return v;
}

static bool gpm_supported(const struct call *c)
{
	return (c->g->src->columns & GPM_FIELDS) && !is_notsup(FAULT_NOTSUP_GPM, -1, c->gpu);
}

/* ---- Call prologue ---------------------------------------------------- */

/* Count the call, check the library is initialised and the device valid,
 * apply hang, lost and notsup faults, and find the GPU's current row. On
 * NVML_ABI_SUCCESS the lock is held and the caller ends with leave(). */
static nvml_return_t enter(int fn, nvml_device_t dev, bool with_dev, struct call *c)
{
	atomic_fetch_add(&fn_calls[fn], 1);
	memset(c, 0, sizeof *c);
	c->gpu = -1;
	if (with_dev && (c->gpu = device_index(dev)) < 0)
		return NVML_ABI_ERROR_INVALID_ARGUMENT;

	pthread_mutex_lock(&st.lock);
	for (int slept = 0;; slept = 1) {
		if (st.init_count == 0) {
			pthread_mutex_unlock(&st.lock);
			return NVML_ABI_ERROR_UNINITIALIZED;
		}
		if (c->gpu >= st.ngpus) {
			pthread_mutex_unlock(&st.lock);
			return NVML_ABI_ERROR_INVALID_ARGUMENT;
		}
		double hang = slept ? 0 : hang_for(fn, c->gpu, elapsed_s());
		if (hang == 0)
			break;
		/* Sleep without the lock, as a call stuck in the driver would;
		 * the state may change meanwhile, so it is checked again. */
		pthread_mutex_unlock(&st.lock);
		if (hang < 0)
			for (;;)
				sleep_ns(HANG_STEP_NS);
		sleep_ns((int64_t)(hang * 1e9));
		pthread_mutex_lock(&st.lock);
	}
	c->elapsed_s = elapsed_s();
	if (c->gpu >= 0) {
		if (is_lost(c->gpu, c->elapsed_s)) {
			pthread_mutex_unlock(&st.lock);
			return NVML_ABI_ERROR_GPU_IS_LOST;
		}
		c->g = &st.gpus[c->gpu];
		c->pos_s = c->elapsed_s * st.speed + c->g->shift_s;
		c->row = row_at(c->g->src, c->pos_s);
	}
	if (is_notsup(FAULT_NOTSUP, fn, c->gpu)) {
		pthread_mutex_unlock(&st.lock);
		return NVML_ABI_ERROR_NOT_SUPPORTED;
	}
	return NVML_ABI_SUCCESS;
}

static nvml_return_t leave(nvml_return_t r)
{
	pthread_mutex_unlock(&st.lock);
	return r;
}

static bool has(const struct call *c, enum field_id f)
{
	return (c->row->valid & FIELD_BIT(f)) != 0;
}

/* The row's value in NVML's integer units: base units times `mul`. */
static unsigned long long as_units(const struct call *c, enum field_id f, double mul)
{
	double v = c->row->v[f] * mul;
	return v <= 0 ? 0 : (unsigned long long)llround(v);
}

static nvml_return_t put_string(char *buf, unsigned int len, const char *s)
{
	if (!buf)
		return NVML_ABI_ERROR_INVALID_ARGUMENT;
	if (strlen(s) + 1 > len)
		return NVML_ABI_ERROR_INSUFFICIENT_SIZE;
	memcpy(buf, s, strlen(s) + 1);
	return NVML_ABI_SUCCESS;
}

/* ---- Library and system ----------------------------------------------- */

FAKE_API nvml_return_t nvmlInit_v2(void);
FAKE_API nvml_return_t nvmlInit_v2(void)
{
	nvml_return_t r = NVML_ABI_SUCCESS;
	atomic_fetch_add(&fn_calls[NVML_FN_init], 1);
	pthread_mutex_lock(&st.lock);
	if (st.init_count == 0) {
		r = configure();
		if (r == NVML_ABI_SUCCESS) {
			st.init_ns = mono_ns();
			st.generation++;
		}
	}
	if (r == NVML_ABI_SUCCESS)
		st.init_count++;
	pthread_mutex_unlock(&st.lock);
	return r;
}

FAKE_API nvml_return_t nvmlShutdown(void);
FAKE_API nvml_return_t nvmlShutdown(void)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_shutdown, NULL, false, &c);
	if (r)
		return r;
	if (--st.init_count == 0)
		state_free();
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API const char *nvmlErrorString(nvml_return_t r);
FAKE_API const char *nvmlErrorString(nvml_return_t r)
{
	/* NVML's own wording, which logs and tests may show. */
	static const char *const text[] = {
		"Success", "Uninitialized", "Invalid Argument", "Not Supported",
		"Insufficient Permissions", "Already Initialized", "Not Found",
		"Insufficient Size", "Insufficient External Power", "Driver Not Loaded",
		"Timeout", "Interrupt request issue", "NVML Shared Library Not Found",
		"Function Not Found", "Corrupted infoROM", "GPU is lost",
		"GPU requires restart", "The operating system has blocked the request.",
		"RM has detected an NVML/RM version mismatch.", "In use by another client",
		"Insufficient Memory", "No data", "vGPU operation not available because ECC is enabled",
		"Ran out of critical resources, other than memory", "Frequency not supported",
		"Argument version mismatch", "Deprecated", "Not Ready", "GPU not found",
		"Invalid state",
	};
	atomic_fetch_add(&fn_calls[FN_ERROR_STRING], 1);
	if (r >= 0 && (size_t)r < sizeof text / sizeof text[0])
		return text[r];
	return "Unknown Error";
}

FAKE_API int fakeNvmlCallCount(const char *funcName);
FAKE_API int fakeNvmlCallCount(const char *funcName)
{
	int fn = funcName ? fn_by_name(funcName) : -1;
	return fn < 0 ? -1 : (int)atomic_load(&fn_calls[fn]);
}

FAKE_API nvml_return_t nvmlDeviceGetCount_v2(unsigned int *count);
FAKE_API nvml_return_t nvmlDeviceGetCount_v2(unsigned int *count)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_count, NULL, false, &c);
	if (r)
		return r;
	if (!count)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	/* A lost GPU still counts, as on real hardware until it is removed. */
	*count = (unsigned)st.ngpus;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml_device_t *dev);
FAKE_API nvml_return_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml_device_t *dev)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_handle_by_index,
				index < GPU_MAX ? &devices[index] : NULL, true, &c);
	if (r)
		return r;
	if (!dev)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*dev = &devices[index];
	return leave(NVML_ABI_SUCCESS);
}

static void uuid_of(int gpu, char *buf, size_t len)
{
	snprintf(buf, len, "GPU-fa4e0000-0000-4000-8000-%012x", (unsigned)gpu);
}

FAKE_API nvml_return_t nvmlDeviceGetHandleByUUID(const char *uuid, nvml_device_t *dev);
FAKE_API nvml_return_t nvmlDeviceGetHandleByUUID(const char *uuid, nvml_device_t *dev)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_handle_by_uuid, NULL, false, &c);
	if (r)
		return r;
	if (!uuid || !dev)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	for (int i = 0; i < st.ngpus; i++) {
		char u[NVML_ABI_DEVICE_UUID_BUFFER_SIZE];
		uuid_of(i, u, sizeof u);
		if (strcmp(u, uuid) == 0) {
			if (is_lost(i, c.elapsed_s))
				return leave(NVML_ABI_ERROR_GPU_IS_LOST);
			*dev = &devices[i];
			return leave(NVML_ABI_SUCCESS);
		}
	}
	return leave(NVML_ABI_ERROR_NOT_FOUND);
}

FAKE_API nvml_return_t nvmlSystemGetDriverVersion(char *buf, unsigned int len);
FAKE_API nvml_return_t nvmlSystemGetDriverVersion(char *buf, unsigned int len)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_system_get_driver_version, NULL, false, &c);
	const char *v = getenv("GPULSE_FAKE_NVML_DRIVER_VERSION");
	return r ? r : leave(put_string(buf, len, v && *v ? v : "580.159.04"));
}

FAKE_API nvml_return_t nvmlSystemGetNVMLVersion(char *buf, unsigned int len);
FAKE_API nvml_return_t nvmlSystemGetNVMLVersion(char *buf, unsigned int len)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_system_get_nvml_version, NULL, false, &c);
	return r ? r : leave(put_string(buf, len, "13.580.159.04"));
}

FAKE_API nvml_return_t nvmlSystemGetCudaDriverVersion_v2(int *version);
FAKE_API nvml_return_t nvmlSystemGetCudaDriverVersion_v2(int *version)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_system_get_cuda_driver_version, NULL, false, &c);
	if (r)
		return r;
	if (!version)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*version = 13000;
	return leave(NVML_ABI_SUCCESS);
}

/* ---- Identity and static facts ----------------------------------------- */

FAKE_API nvml_return_t nvmlDeviceGetName(nvml_device_t dev, char *buf, unsigned int len);
FAKE_API nvml_return_t nvmlDeviceGetName(nvml_device_t dev, char *buf, unsigned int len)
{
	struct call c;
	int k;
	nvml_return_t r = enter(NVML_FN_device_get_name, mig_parent(dev, &k), true, &c);
	if (r)
		return r;
	if (k >= 0) {
		char n[96];
		snprintf(n, sizeof n, "NVIDIA H200 MIG %s", mig_layout[k].profile);
		return leave(put_string(buf, len, n));
	}
	return leave(put_string(buf, len, "NVIDIA H200"));
}

FAKE_API nvml_return_t nvmlDeviceGetUUID(nvml_device_t dev, char *buf, unsigned int len);
FAKE_API nvml_return_t nvmlDeviceGetUUID(nvml_device_t dev, char *buf, unsigned int len)
{
	struct call c;
	char u[NVML_ABI_DEVICE_UUID_BUFFER_SIZE];
	int k;
	nvml_return_t r = enter(NVML_FN_device_get_uuid, mig_parent(dev, &k), true, &c);
	if (r)
		return r;
	if (k >= 0)
		mig_uuid_of(c.gpu, k, u, sizeof u);
	else
		uuid_of(c.gpu, u, sizeof u);
	return leave(put_string(buf, len, u));
}

FAKE_API nvml_return_t nvmlDeviceGetSerial(nvml_device_t dev, char *buf, unsigned int len);
FAKE_API nvml_return_t nvmlDeviceGetSerial(nvml_device_t dev, char *buf, unsigned int len)
{
	struct call c;
	char s[NVML_ABI_DEVICE_SERIAL_BUFFER_SIZE];
	nvml_return_t r = enter(NVML_FN_device_get_serial, dev, true, &c);
	if (r)
		return r;
	snprintf(s, sizeof s, "FAKE%05d", c.gpu);
	return leave(put_string(buf, len, s));
}

/* /dev/nvidiaN: N is the GPU's index, as on a host without holes. */
FAKE_API nvml_return_t nvmlDeviceGetMinorNumber(nvml_device_t dev, unsigned int *minor);
FAKE_API nvml_return_t nvmlDeviceGetMinorNumber(nvml_device_t dev, unsigned int *minor)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_minor_number, dev, true, &c);
	if (r)
		return r;
	if (!minor)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*minor = (unsigned)c.gpu;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetPciInfo_v3(nvml_device_t dev, struct nvml_pci_info *pci);
FAKE_API nvml_return_t nvmlDeviceGetPciInfo_v3(nvml_device_t dev, struct nvml_pci_info *pci)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_pci_info, dev, true, &c);
	if (r)
		return r;
	if (!pci)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	memset(pci, 0, sizeof *pci);
	pci->domain = 0;
	pci->bus = FAKE_GPU_BUS(c.gpu);
	pci->device = 0;
	pci->pci_device_id = 0x233510DEU;     /* H200 SXM, NVIDIA's vendor id */
	pci->pci_subsystem_id = 0x18BE10DEU;
	snprintf(pci->bus_id_legacy, sizeof pci->bus_id_legacy, "0000:%02X:00.0", pci->bus);
	snprintf(pci->bus_id, sizeof pci->bus_id, "00000000:%02X:00.0", pci->bus);
	return leave(NVML_ABI_SUCCESS);
}

/* The functions that answer one constant number about the board. */
#define FAKE_CONSTANT(fnname, member, type, value)                           \
	FAKE_API nvml_return_t fnname(nvml_device_t dev, type *out);         \
	FAKE_API nvml_return_t fnname(nvml_device_t dev, type *out)          \
	{                                                                    \
		struct call c;                                               \
		nvml_return_t r = enter(NVML_FN_##member, dev, true, &c);    \
		if (r)                                                       \
			return r;                                            \
		if (!out)                                                    \
			return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);       \
		*out = (value);                                              \
		return leave(NVML_ABI_SUCCESS);                              \
	}

FAKE_CONSTANT(nvmlDeviceGetArchitecture, device_get_architecture, unsigned int,
	      NVML_ABI_DEVICE_ARCH_HOPPER)
FAKE_CONSTANT(nvmlDeviceGetEnforcedPowerLimit, device_get_enforced_power_limit, unsigned int,
	      700000U)
FAKE_CONSTANT(nvmlDeviceGetMaxPcieLinkGeneration, device_get_max_pcie_link_generation,
	      unsigned int, 5U)
FAKE_CONSTANT(nvmlDeviceGetMaxPcieLinkWidth, device_get_max_pcie_link_width, unsigned int, 16U)
FAKE_CONSTANT(nvmlDeviceGetCurrPcieLinkGeneration, device_get_curr_pcie_link_generation,
	      unsigned int, 5U)
FAKE_CONSTANT(nvmlDeviceGetMemoryBusWidth, device_get_memory_bus_width, unsigned int, 6144U)
FAKE_CONSTANT(nvmlDeviceGetNumGpuCores, device_get_num_gpu_cores, unsigned int, 16896U)
/* The link's width and replays: 16 lanes and none unless a pcie spec
 * says otherwise. */
FAKE_API nvml_return_t nvmlDeviceGetCurrPcieLinkWidth(nvml_device_t dev, unsigned int *v);
FAKE_API nvml_return_t nvmlDeviceGetCurrPcieLinkWidth(nvml_device_t dev, unsigned int *v)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_curr_pcie_link_width, dev, true, &c);
	if (r)
		return r;
	if (!v)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*v = (unsigned)wear(c.gpu, c.elapsed_s, WEAR_PCIE_WIDTH);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetPcieReplayCounter(nvml_device_t dev, unsigned int *v);
FAKE_API nvml_return_t nvmlDeviceGetPcieReplayCounter(nvml_device_t dev, unsigned int *v)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_pcie_replay_counter, dev, true, &c);
	if (r)
		return r;
	if (!v)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*v = (unsigned)wear(c.gpu, c.elapsed_s, WEAR_PCIE_REPLAY);
	return leave(NVML_ABI_SUCCESS);
}
FAKE_CONSTANT(nvmlDeviceGetSupportedEventTypes, device_get_supported_event_types,
	      unsigned long long, SUPPORTED_EVENTS)

FAKE_API nvml_return_t nvmlDeviceGetCudaComputeCapability(nvml_device_t dev, int *major, int *minor);
FAKE_API nvml_return_t nvmlDeviceGetCudaComputeCapability(nvml_device_t dev, int *major, int *minor)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_cuda_compute_capability, dev, true, &c);
	if (r)
		return r;
	if (!major || !minor)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*major = 9;
	*minor = 0;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetMigMode(nvml_device_t dev, unsigned int *current,
					    unsigned int *pending);
FAKE_API nvml_return_t nvmlDeviceGetMigMode(nvml_device_t dev, unsigned int *current,
					    unsigned int *pending)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_mig_mode, dev, true, &c);
	if (r)
		return r;
	if (!current || !pending)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*current = *pending = mig_enabled() ? NVML_ABI_FEATURE_ENABLED : NVML_ABI_FEATURE_DISABLED;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetMaxMigDeviceCount(nvml_device_t dev, unsigned int *count);
FAKE_API nvml_return_t nvmlDeviceGetMaxMigDeviceCount(nvml_device_t dev, unsigned int *count)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_max_mig_device_count, dev, true, &c);
	if (r)
		return r;
	if (!count)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*count = mig_enabled() ? FAKE_MIG_SLOTS : 0;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetMigDeviceHandleByIndex(nvml_device_t dev, unsigned int index,
							   nvml_device_t *out);
FAKE_API nvml_return_t nvmlDeviceGetMigDeviceHandleByIndex(nvml_device_t dev, unsigned int index,
							   nvml_device_t *out)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_mig_device_handle_by_index, dev, true, &c);
	if (r)
		return r;
	if (!out || index >= FAKE_MIG_SLOTS)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!mig_enabled() || (int)index >= FAKE_MIG_COUNT)
		return leave(NVML_ABI_ERROR_NOT_FOUND);
	*out = &mig_devices[c.gpu][index];
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetGpuInstanceId(nvml_device_t dev, unsigned int *id);
FAKE_API nvml_return_t nvmlDeviceGetGpuInstanceId(nvml_device_t dev, unsigned int *id)
{
	struct call c;
	int k;
	nvml_return_t r = enter(NVML_FN_device_get_gpu_instance_id, mig_parent(dev, &k), true, &c);
	if (r)
		return r;
	if (!id || k < 0)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);   /* not a MIG handle */
	*id = mig_layout[k].gi;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetComputeInstanceId(nvml_device_t dev, unsigned int *id);
FAKE_API nvml_return_t nvmlDeviceGetComputeInstanceId(nvml_device_t dev, unsigned int *id)
{
	struct call c;
	int k;
	nvml_return_t r =
		enter(NVML_FN_device_get_compute_instance_id, mig_parent(dev, &k), true, &c);
	if (r)
		return r;
	if (!id || k < 0)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*id = 0;
	return leave(NVML_ABI_SUCCESS);
}

/* The CPUs nearest the GPU: GPULSE_FAKE_NVML_CPU_AFFINITY ("0", "0-3,6"),
 * else the first 64 (a one-node host). */
FAKE_API nvml_return_t nvmlDeviceGetCpuAffinity(nvml_device_t dev, unsigned int words,
						unsigned long *set);
FAKE_API nvml_return_t nvmlDeviceGetCpuAffinity(nvml_device_t dev, unsigned int words,
						unsigned long *set)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_cpu_affinity, dev, true, &c);
	if (r)
		return r;
	if (!set || words == 0)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	const unsigned bits = 8 * sizeof(unsigned long);
	memset(set, 0, words * sizeof *set);
	const char *spec = getenv("GPULSE_FAKE_NVML_CPU_AFFINITY");
	if (!spec || !*spec)
		spec = "0-63";
	for (const char *p = spec; *p;) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;
		if (end == p)
			return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
		if (*end == '-')
			hi = strtoul(end + 1, &end, 10);
		for (unsigned long cpu = lo; cpu <= hi && cpu < (unsigned long)words * bits; cpu++)
			set[cpu / bits] |= 1UL << (cpu % bits);
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	}
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetMaxClockInfo(nvml_device_t dev, int type, unsigned int *mhz);
FAKE_API nvml_return_t nvmlDeviceGetMaxClockInfo(nvml_device_t dev, int type, unsigned int *mhz)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_max_clock_info, dev, true, &c);
	if (r)
		return r;
	if (!mhz)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	switch (type) {
	case NVML_ABI_CLOCK_GRAPHICS:
	case NVML_ABI_CLOCK_SM: *mhz = 1980; break;
	case NVML_ABI_CLOCK_MEM: *mhz = 3201; break;
	case NVML_ABI_CLOCK_VIDEO: *mhz = 1755; break;
	default: return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	}
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetEccMode(nvml_device_t dev, int *current, int *pending);
FAKE_API nvml_return_t nvmlDeviceGetEccMode(nvml_device_t dev, int *current, int *pending)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_ecc_mode, dev, true, &c);
	if (r)
		return r;
	if (!current || !pending)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*current = *pending = NVML_ABI_FEATURE_ENABLED;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetTotalEccErrors(nvml_device_t dev, int error_type,
						   int counter_type, unsigned long long *count);
FAKE_API nvml_return_t nvmlDeviceGetTotalEccErrors(nvml_device_t dev, int error_type,
						   int counter_type, unsigned long long *count)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_total_ecc_errors, dev, true, &c);
	if (r)
		return r;
	if (!count || (error_type != NVML_ABI_MEMORY_ERROR_TYPE_CORRECTED &&
		       error_type != NVML_ABI_MEMORY_ERROR_TYPE_UNCORRECTED) ||
	    (counter_type != NVML_ABI_VOLATILE_ECC && counter_type != NVML_ABI_AGGREGATE_ECC))
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	/* Volatile and aggregate alike: the fake's driver was loaded at init. */
	*count = wear(c.gpu, c.elapsed_s,
		      error_type == NVML_ABI_MEMORY_ERROR_TYPE_CORRECTED ? WEAR_SBE : WEAR_DBE);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetRemappedRows(nvml_device_t dev, unsigned int *corr,
						 unsigned int *unc, unsigned int *pending,
						 unsigned int *failure);
FAKE_API nvml_return_t nvmlDeviceGetRemappedRows(nvml_device_t dev, unsigned int *corr,
						 unsigned int *unc, unsigned int *pending,
						 unsigned int *failure)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_remapped_rows, dev, true, &c);
	if (r)
		return r;
	if (!corr || !unc || !pending || !failure)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*corr = (unsigned)wear(c.gpu, c.elapsed_s, WEAR_REMAP_COR);
	*unc = (unsigned)wear(c.gpu, c.elapsed_s, WEAR_REMAP_UNC);
	*pending = (unsigned)wear(c.gpu, c.elapsed_s, WEAR_REMAP_PENDING);
	*failure = (unsigned)wear(c.gpu, c.elapsed_s, WEAR_REMAP_FAILED);
	return leave(NVML_ABI_SUCCESS);
}

/* Video engines: an H200 runs no video work in the recordings, so both
 * are idle (0 %) over NVML's 167 ms sampling period, as on the card. */
FAKE_API nvml_return_t nvmlDeviceGetEncoderUtilization(nvml_device_t dev, unsigned int *util,
						       unsigned int *period_us);
FAKE_API nvml_return_t nvmlDeviceGetEncoderUtilization(nvml_device_t dev, unsigned int *util,
						       unsigned int *period_us)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_encoder_utilization, dev, true, &c);
	if (r)
		return r;
	if (!util || !period_us)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*util = 0;
	*period_us = 167000;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetDecoderUtilization(nvml_device_t dev, unsigned int *util,
						       unsigned int *period_us);
FAKE_API nvml_return_t nvmlDeviceGetDecoderUtilization(nvml_device_t dev, unsigned int *util,
						       unsigned int *period_us)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_decoder_utilization, dev, true, &c);
	if (r)
		return r;
	if (!util || !period_us)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*util = 0;
	*period_us = 167000;
	return leave(NVML_ABI_SUCCESS);
}

/* Violation time since init, from the recorded clock event reasons
 * (fake_policies); NOT_SUPPORTED when the recording lacks them. */
FAKE_API nvml_return_t nvmlDeviceGetViolationStatus(nvml_device_t dev, int policy,
						    struct nvml_violation_time *vt);
FAKE_API nvml_return_t nvmlDeviceGetViolationStatus(nvml_device_t dev, int policy,
						    struct nvml_violation_time *vt)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_violation_status, dev, true, &c);
	if (r)
		return r;
	int k = 0;
	while (k < FAKE_POLICIES && fake_policies[k].policy != policy)
		k++;
	if (!vt || k == FAKE_POLICIES)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	const struct source *s = c.g->src;
	if (!(s->columns & FIELD_BIT(F_CLOCK_REASONS)))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	double held = held_s(s, k, c.pos_s) - held_s(s, k, c.g->shift_s);
	vt->reference_time = wall_us();
	vt->violation_time = held > 0 ? (unsigned long long)llround(held * 1e9) : 0;
	return leave(NVML_ABI_SUCCESS);
}

/* NVLink (st.nvlinks links, GPULSE_FAKE_NVML_NVLINKS): a link is active
 * unless a topology leaves it reaching no peer. Called with the lock. */
static bool link_active(int gpu, unsigned link)
{
	return link < st.nvlinks && (!st.have_topology || st.link_peer[gpu][link] >= 0);
}

/* Errors an active link has counted, by kind: counter + 1. */
static unsigned long long link_errors(int gpu, unsigned link, int counter)
{
	return link_active(gpu, link) ? (unsigned long long)counter + 1 : 0;
}

FAKE_API nvml_return_t nvmlDeviceGetNvLinkState(nvml_device_t dev, unsigned int link, int *active);
FAKE_API nvml_return_t nvmlDeviceGetNvLinkState(nvml_device_t dev, unsigned int link, int *active)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_nvlink_state, dev, true, &c);
	if (r)
		return r;
	if (st.nvlinks == 0)
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	if (!active || link >= st.nvlinks)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*active = link_active(c.gpu, link) ? NVML_ABI_FEATURE_ENABLED : NVML_ABI_FEATURE_DISABLED;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetNvLinkErrorCounter(nvml_device_t dev, unsigned int link,
						       int counter, unsigned long long *value);
FAKE_API nvml_return_t nvmlDeviceGetNvLinkErrorCounter(nvml_device_t dev, unsigned int link,
						       int counter, unsigned long long *value)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_nvlink_error_counter, dev, true, &c);
	if (r)
		return r;
	if (st.nvlinks == 0)
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	if (!value || link >= st.nvlinks || counter < NVML_ABI_NVLINK_ERROR_DL_REPLAY ||
	    counter > NVML_ABI_NVLINK_ERROR_DL_CRC_DATA)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*value = link_errors(c.gpu, link, counter);
	return leave(NVML_ABI_SUCCESS);
}

static void pci_of_bus(unsigned bus, struct nvml_pci_info *pci)
{
	memset(pci, 0, sizeof *pci);
	pci->bus = bus;
	snprintf(pci->bus_id_legacy, sizeof pci->bus_id_legacy, "0000:%02X:00.0", bus);
	snprintf(pci->bus_id, sizeof pci->bus_id, "00000000:%02X:00.0", bus);
}

/* What an active link reaches: the peer GPU of the topology, else an
 * NVSwitch. An inactive link reaches nothing (NOT_FOUND). */
FAKE_API nvml_return_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml_device_t dev, unsigned int link,
							   struct nvml_pci_info *pci);
FAKE_API nvml_return_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvml_device_t dev, unsigned int link,
							   struct nvml_pci_info *pci)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_nvlink_remote_pci_info, dev, true, &c);
	if (r)
		return r;
	if (st.nvlinks == 0)
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	if (!pci || link >= st.nvlinks)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!link_active(c.gpu, link))
		return leave(NVML_ABI_ERROR_NOT_FOUND);
	int peer = st.have_topology ? st.link_peer[c.gpu][link] : -1;
	pci_of_bus(peer >= 0 ? FAKE_GPU_BUS(peer) : FAKE_NVSWITCH_BUS, pci);
	if (peer >= 0) {
		pci->pci_device_id = 0x233510DEU;
		pci->pci_subsystem_id = 0x18BE10DEU;
	}
	return leave(NVML_ABI_SUCCESS);
}

/* The PCIe common ancestor of two GPUs, from GPULSE_FAKE_NVML_TOPOLOGY. A
 * GPU with itself is refused (the collector never asks). */
FAKE_API nvml_return_t nvmlDeviceGetTopologyCommonAncestor(nvml_device_t a, nvml_device_t b,
							   int *level);
FAKE_API nvml_return_t nvmlDeviceGetTopologyCommonAncestor(nvml_device_t a, nvml_device_t b,
							   int *level)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_topology_common_ancestor, a, true, &c);
	if (r)
		return r;
	int gb = device_index(b);
	if (!level || gb < 0 || gb >= st.ngpus || gb == c.gpu)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (is_lost(gb, c.elapsed_s))
		return leave(NVML_ABI_ERROR_GPU_IS_LOST);
	*level = st.level[c.gpu][gb];
	return leave(NVML_ABI_SUCCESS);
}

/* The driver's sample buffers are not played: NOT_SUPPORTED, as for a
 * sampling type a card lacks. */
FAKE_API nvml_return_t nvmlDeviceGetSamples(nvml_device_t dev, int type, unsigned long long since,
					    int *value_type, unsigned int *count,
					    struct nvml_sample *samples);
FAKE_API nvml_return_t nvmlDeviceGetSamples(nvml_device_t dev, int type, unsigned long long since,
					    int *value_type, unsigned int *count,
					    struct nvml_sample *samples)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_samples, dev, true, &c);
	if (r)
		return r;
	(void)type, (void)since, (void)samples;
	if (!value_type || !count)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
}

/* Page retirement: none retired, none pending. (A real H200 remaps rows
 * instead and answers NOT_SUPPORTED: `notsup:nvmlDeviceGetRetiredPages`
 * plays that.) Only the size query is served, as gpulse makes it. */
FAKE_API nvml_return_t nvmlDeviceGetRetiredPages(nvml_device_t dev, int cause, unsigned int *count,
						 unsigned long long *addresses);
FAKE_API nvml_return_t nvmlDeviceGetRetiredPages(nvml_device_t dev, int cause, unsigned int *count,
						 unsigned long long *addresses)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_retired_pages, dev, true, &c);
	if (r)
		return r;
	(void)addresses;
	if (!count || (cause != NVML_ABI_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS &&
		       cause != NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*count = 0;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetRetiredPagesPendingStatus(nvml_device_t dev, int *pending);
FAKE_API nvml_return_t nvmlDeviceGetRetiredPagesPendingStatus(nvml_device_t dev, int *pending)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_retired_pages_pending_status, dev, true, &c);
	if (r)
		return r;
	if (!pending)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	*pending = NVML_ABI_FEATURE_DISABLED;
	return leave(NVML_ABI_SUCCESS);
}

/* ---- Recorded values --------------------------------------------------- */

FAKE_API nvml_return_t nvmlDeviceGetUtilizationRates(nvml_device_t dev, struct nvml_utilization *u);
FAKE_API nvml_return_t nvmlDeviceGetUtilizationRates(nvml_device_t dev, struct nvml_utilization *u)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_utilization_rates, dev, true, &c);
	if (r)
		return r;
	if (!u)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!has(&c, F_GPU_UTIL) || !has(&c, F_MEM_UTIL))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	u->gpu = (unsigned)as_units(&c, F_GPU_UTIL, 100);
	u->memory = (unsigned)as_units(&c, F_MEM_UTIL, 100);
	return leave(NVML_ABI_SUCCESS);
}

/* Recordings carry used and total; the driver's reserve is not recorded,
 * so it reads as 0 and free is the rest. */
static bool memory_of(const struct call *c, unsigned long long *total, unsigned long long *used)
{
	if (!has(c, F_MEM_USED) || !has(c, F_MEM_TOTAL))
		return false;
	*total = as_units(c, F_MEM_TOTAL, 1);
	*used = as_units(c, F_MEM_USED, 1);
	if (*used > *total)
		*used = *total;
	return true;
}

FAKE_API nvml_return_t nvmlDeviceGetMemoryInfo_v2(nvml_device_t dev, struct nvml_memory_v2 *m);
FAKE_API nvml_return_t nvmlDeviceGetMemoryInfo_v2(nvml_device_t dev, struct nvml_memory_v2 *m)
{
	struct call c;
	unsigned long long total, used;
	int k;
	nvml_return_t r = enter(NVML_FN_device_get_memory_info_v2, mig_parent(dev, &k), true, &c);
	if (r)
		return r;
	if (!m)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (m->version != NVML_ABI_MEMORY_V2_VERSION)
		return leave(NVML_ABI_ERROR_ARGUMENT_VERSION_MISMATCH);
	if (!memory_of(&c, &total, &used))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	if (k >= 0) {
		used = (unsigned long long)((double)used * mig_layout[k].mem_share);
		total = mig_layout[k].total_mib << 20;
		if (used > total)
			used = total;
	}
	m->total = total;
	m->reserved = 0;
	m->used = used;
	m->free = total - used;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetMemoryInfo(nvml_device_t dev, struct nvml_memory_v1 *m);
FAKE_API nvml_return_t nvmlDeviceGetMemoryInfo(nvml_device_t dev, struct nvml_memory_v1 *m)
{
	struct call c;
	unsigned long long total, used;
	int k;
	nvml_return_t r = enter(NVML_FN_device_get_memory_info, mig_parent(dev, &k), true, &c);
	if (r)
		return r;
	if (!m)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!memory_of(&c, &total, &used))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	if (k >= 0) {
		used = (unsigned long long)((double)used * mig_layout[k].mem_share);
		total = mig_layout[k].total_mib << 20;
		if (used > total)
			used = total;
	}
	m->total = total;
	m->used = used;
	m->free = total - used;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetPowerUsage(nvml_device_t dev, unsigned int *mw);
FAKE_API nvml_return_t nvmlDeviceGetPowerUsage(nvml_device_t dev, unsigned int *mw)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_power_usage, dev, true, &c);
	if (r)
		return r;
	if (!mw)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!has(&c, F_POWER))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	*mw = (unsigned)as_units(&c, F_POWER, 1000);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetClockInfo(nvml_device_t dev, int type, unsigned int *mhz);
FAKE_API nvml_return_t nvmlDeviceGetClockInfo(nvml_device_t dev, int type, unsigned int *mhz)
{
	struct call c;
	enum field_id f;
	nvml_return_t r = enter(NVML_FN_device_get_clock_info, dev, true, &c);
	if (r)
		return r;
	if (!mhz)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	switch (type) {
	/* On Hopper the graphics and SM clocks are one domain. */
	case NVML_ABI_CLOCK_GRAPHICS:
	case NVML_ABI_CLOCK_SM: f = F_SM_CLOCK; break;
	case NVML_ABI_CLOCK_MEM: f = F_MEM_CLOCK; break;
	case NVML_ABI_CLOCK_VIDEO: return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	default: return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	}
	if (!has(&c, f))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	*mhz = (unsigned)as_units(&c, f, 1e-6);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetTemperature(nvml_device_t dev, int sensor, unsigned int *c_out);
FAKE_API nvml_return_t nvmlDeviceGetTemperature(nvml_device_t dev, int sensor, unsigned int *c_out)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_temperature, dev, true, &c);
	if (r)
		return r;
	if (!c_out || sensor != NVML_ABI_TEMPERATURE_GPU)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!has(&c, F_TEMP))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	*c_out = (unsigned)as_units(&c, F_TEMP, 1);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetPerformanceState(nvml_device_t dev, int *pstate);
FAKE_API nvml_return_t nvmlDeviceGetPerformanceState(nvml_device_t dev, int *pstate)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_performance_state, dev, true, &c);
	if (r)
		return r;
	if (!pstate)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!has(&c, F_PSTATE))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	*pstate = (int)as_units(&c, F_PSTATE, 1);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetCurrentClocksEventReasons(nvml_device_t dev,
							      unsigned long long *reasons);
FAKE_API nvml_return_t nvmlDeviceGetCurrentClocksEventReasons(nvml_device_t dev,
							      unsigned long long *reasons)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_current_clocks_event_reasons, dev, true, &c);
	if (r)
		return r;
	if (!reasons)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!has(&c, F_CLOCK_REASONS))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	*reasons = as_units(&c, F_CLOCK_REASONS, 1);
	return leave(NVML_ABI_SUCCESS);
}

/* Energy since "driver load": the recorded power integrated over the
 * GPU's fake time since init. */
static bool energy_mj(const struct call *c, unsigned long long *mj)
{
	const struct source *s = c->g->src;
	if (!(s->columns & FIELD_BIT(F_POWER)))
		return false;
	double j = energy_j(s, c->pos_s) - energy_j(s, c->g->shift_s);
	*mj = ENERGY_BASE_MJ + (j > 0 ? (unsigned long long)llround(j * 1000) : 0);
	return true;
}

FAKE_API nvml_return_t nvmlDeviceGetTotalEnergyConsumption(nvml_device_t dev,
							   unsigned long long *mj);
FAKE_API nvml_return_t nvmlDeviceGetTotalEnergyConsumption(nvml_device_t dev,
							   unsigned long long *mj)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_total_energy_consumption, dev, true, &c);
	if (r)
		return r;
	if (!mj)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	return leave(energy_mj(&c, mj) ? NVML_ABI_SUCCESS : NVML_ABI_ERROR_NOT_SUPPORTED);
}

/* The indices of GPULSE_FAKE_NVML_PROCESSES entries that GPU gpu serves. */
static unsigned procs_of(int gpu, int *mine)
{
	unsigned n = 0;
	for (int i = 0; i < st.nprocs; i++)
		if (st.procs[i].gpu < 0 || st.procs[i].gpu == gpu)
			mine[n++] = i;
	return n;
}

/* The row's processes: the caller itself first, so that /proc/PID/comm
 * resolves to something real, then made-up pids. */
static unsigned proc_count(const struct call *c)
{
	unsigned long long n = as_units(c, F_PROC_COUNT, 1);
	return n > 4096 ? 4096 : (unsigned)n;
}

static unsigned proc_pid(unsigned i)
{
	return i == 0 ? (unsigned)getpid() : 4000000U + i;
}

FAKE_API nvml_return_t nvmlDeviceGetComputeRunningProcesses_v3(nvml_device_t dev,
							       unsigned int *count,
							       struct nvml_process_info *infos);
FAKE_API nvml_return_t nvmlDeviceGetComputeRunningProcesses_v3(nvml_device_t dev,
							       unsigned int *count,
							       struct nvml_process_info *infos)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_compute_running_processes, dev, true, &c);
	if (r)
		return r;
	if (!count)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (st.nprocs >= 0) {
		int mine[FAKE_PROC_MAX];
		unsigned n = procs_of(c.gpu, mine);
		if (n > 0 && (!infos || *count < n)) {
			*count = n;
			return leave(NVML_ABI_ERROR_INSUFFICIENT_SIZE);
		}
		for (unsigned i = 0; i < n; i++)
			infos[i] = (struct nvml_process_info){
				.pid = st.procs[mine[i]].pid,
				.used_gpu_memory = st.procs[mine[i]].used_bytes,
				.gpu_instance_id = 0xFFFFFFFFU, .compute_instance_id = 0xFFFFFFFFU};
		for (unsigned i = 0; i < n; i++) {
			if (st.procs[mine[i]].gi >= 0 && mig_enabled()) {
				infos[i].gpu_instance_id = (unsigned)st.procs[mine[i]].gi;
				infos[i].compute_instance_id = 0;
			}
		}
		*count = n;
		return leave(NVML_ABI_SUCCESS);
	}
	if (!has(&c, F_PROC_COUNT))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	unsigned n = proc_count(&c);
	if (n > 0 && (!infos || *count < n)) {
		*count = n;
		return leave(NVML_ABI_ERROR_INSUFFICIENT_SIZE);
	}
	unsigned long long each = NVML_ABI_VALUE_NOT_AVAILABLE_ULL;
	if (n > 0 && has(&c, F_MEM_USED))
		each = as_units(&c, F_MEM_USED, 1) / n;
	for (unsigned i = 0; i < n; i++) {
		infos[i].pid = proc_pid(i);
		infos[i].used_gpu_memory = each;
		infos[i].gpu_instance_id = 0xFFFFFFFFU;    /* what NVML says without MIG */
		infos[i].compute_instance_id = 0xFFFFFFFFU;
	}
	*count = n;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceGetProcessUtilization(nvml_device_t dev,
						       struct nvml_process_utilization_sample *samples,
						       unsigned int *count,
						       unsigned long long last_seen_us);
/* The GPU's mean utilization and memory utilization (percent) over the
 * per-process sampler's period that ends at wall time t_us; c is a call
 * made at wall time now_us. Frozen time (speed 0) reads the current row. */
static void period_pct(const struct call *c, unsigned long long now_us, unsigned long long t_us,
		       double *util, double *mem)
{
	const struct source *s = c->g->src;
	double p_s = (double)st.proc_period_us / 1e6;
	double end = c->pos_s - ((double)now_us - (double)t_us) / 1e6 * st.speed;
	if (st.speed == 0) {
		*util = row_pct(c->row, F_GPU_UTIL);
		*mem = row_pct(c->row, F_MEM_UTIL);
		return;
	}
	double span = p_s * st.speed;
	*util = (pct_integral(s, s->cum_util, F_GPU_UTIL, end) -
		 pct_integral(s, s->cum_util, F_GPU_UTIL, end - span)) / span;
	*mem = (pct_integral(s, s->cum_mem, F_MEM_UTIL, end) -
		pct_integral(s, s->cum_mem, F_MEM_UTIL, end - span)) / span;
}

/* Process i's sample of one period: its SM and memory percentages. */
static void proc_sample(unsigned i, unsigned n, const int *mine, double util, double mem,
			unsigned *sm_pct, unsigned *mem_pct)
{
	double sm, mm;
	if (st.nprocs >= 0) {
		sm = st.procs[mine[i]].sm_pct;
		mm = st.procs[mine[i]].mem_pct >= 0 ? st.procs[mine[i]].mem_pct
		     : util > 0 ? mem * sm / util : 0;
	} else {
		/* Shares n : n-1 : ... : 1 of the GPU's activity. */
		double w = (double)(n - i) / ((double)n * (n + 1) / 2);
		sm = util * w;
		mm = mem * w;
	}
	*sm_pct = (unsigned)lround(sm > 100 ? 100 : sm);
	*mem_pct = (unsigned)lround(mm > 100 ? 100 : mm);
}

FAKE_API nvml_return_t nvmlDeviceGetProcessUtilization(nvml_device_t dev,
						       struct nvml_process_utilization_sample *samples,
						       unsigned int *count,
						       unsigned long long last_seen_us)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_process_utilization, dev, true, &c);
	if (r)
		return r;
	if (!count)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	unsigned long long now = wall_us();
	int mine[FAKE_PROC_MAX];
	unsigned n;
	if (st.nprocs >= 0) {
		n = procs_of(c.gpu, mine);
	} else {
		if (!has(&c, F_PROC_COUNT) || !has(&c, F_GPU_UTIL))
			return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
		n = proc_count(&c);
	}
	/* The sampler's periods end at multiples of its period on the wall
	 * clock: those after last_seen_us, at most the buffer's depth. */
	unsigned long long p = st.proc_period_us;
	unsigned long long k_hi = now / p;
	unsigned long long k_lo = k_hi >= PROC_BUFFER_PERIODS ? k_hi - PROC_BUFFER_PERIODS + 1 : 0;
	if (last_seen_us / p + 1 > k_lo)
		k_lo = last_seen_us / p + 1;
	unsigned total = 0, cap = samples ? *count : 0;
	bool short_buf = false;
	for (unsigned long long k = k_lo; k <= k_hi && n > 0; k++) {
		double util, mem;
		period_pct(&c, now, k * p, &util, &mem);
		for (unsigned i = 0; i < n; i++) {
			unsigned sm_pct, mem_pct;
			proc_sample(i, n, mine, util, mem, &sm_pct, &mem_pct);
			if (sm_pct == 0 && mem_pct == 0)
				continue;   /* an idle period leaves no sample */
			if (total < cap)
				samples[total] = (struct nvml_process_utilization_sample){
					.pid = st.nprocs >= 0 ? st.procs[mine[i]].pid : proc_pid(i),
					.timestamp_us = k * p, .sm_util = sm_pct, .mem_util = mem_pct};
			else
				short_buf = true;
			total++;
		}
	}
	if (total == 0)
		return leave(NVML_ABI_ERROR_NOT_FOUND);
	*count = total;
	return leave(short_buf ? NVML_ABI_ERROR_INSUFFICIENT_SIZE : NVML_ABI_SUCCESS);
}

/* The violation-time field of policy k (fields 74-81, in policy order). */
static int field_policy(unsigned field_id)
{
	static const unsigned ids[FAKE_POLICIES] = {
		NVML_ABI_FI_DEV_PERF_POLICY_POWER, NVML_ABI_FI_DEV_PERF_POLICY_THERMAL,
		NVML_ABI_FI_DEV_PERF_POLICY_SYNC_BOOST, NVML_ABI_FI_DEV_PERF_POLICY_BOARD_LIMIT,
		NVML_ABI_FI_DEV_PERF_POLICY_LOW_UTILIZATION, NVML_ABI_FI_DEV_PERF_POLICY_RELIABILITY,
		NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS, NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS,
	};
	for (int k = 0; k < FAKE_POLICIES; k++)
		if (ids[k] == field_id)
			return k;
	return -1;
}

/* The NVLink error kind an *_ERROR_COUNT_TOTAL field sums, or -1. */
static int field_nvlink_counter(unsigned field_id)
{
	switch (field_id) {
	case NVML_ABI_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: return NVML_ABI_NVLINK_ERROR_DL_REPLAY;
	case NVML_ABI_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: return NVML_ABI_NVLINK_ERROR_DL_RECOVERY;
	case NVML_ABI_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: return NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT;
	case NVML_ABI_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: return NVML_ABI_NVLINK_ERROR_DL_CRC_DATA;
	default: return -1;
	}
}

static void field_value(const struct call *c, struct nvml_field_value *fv)
{
	unsigned long long mj;
	fv->timestamp_us = (long long)wall_us();
	fv->latency_us = 0;
	fv->nvml_return = NVML_ABI_SUCCESS;
	if (is_notsup_field(fv->field_id, c->gpu)) {
		fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		return;
	}
	int k = field_policy(fv->field_id);
	if (k >= 0) {
		const struct source *s = c->g->src;
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_LONG_LONG;
		if (!(s->columns & FIELD_BIT(F_CLOCK_REASONS))) {
			fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
			return;
		}
		double held = held_s(s, k, c->pos_s) - held_s(s, k, c->g->shift_s);
		fv->value.ull = held > 0 ? (unsigned long long)llround(held * 1e9) : 0;
		return;
	}
	int counter = field_nvlink_counter(fv->field_id);
	if (counter >= 0) {
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_LONG_LONG;
		fv->value.ull = 0;
		if (st.nvlinks == 0)
			fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		for (unsigned l = 0; l < st.nvlinks; l++)
			fv->value.ull += link_errors(c->gpu, l, counter);
		return;
	}
	switch (fv->field_id) {
	case NVML_ABI_FI_DEV_NVLINK_LINK_COUNT:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_INT;
		fv->value.ui = st.nvlinks;
		if (st.nvlinks == 0)
			fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		break;
	case NVML_ABI_FI_DEV_NVLINK_GET_STATE:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_INT;
		if (st.nvlinks == 0)
			fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		else if (fv->scope_id >= st.nvlinks)
			fv->nvml_return = NVML_ABI_ERROR_INVALID_ARGUMENT;
		else
			fv->value.ui = link_active(c->gpu, fv->scope_id) ? NVML_ABI_NVLINK_STATE_ACTIVE
									  : NVML_ABI_NVLINK_STATE_INACTIVE;
		break;
	case NVML_ABI_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_LONG_LONG;
		if (energy_mj(c, &mj))
			fv->value.ull = mj;
		else
			fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		break;
	case NVML_ABI_FI_DEV_POWER_INSTANT:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_INT;
		if (has(c, F_POWER))
			fv->value.ui = (unsigned)as_units(c, F_POWER, 1000);
		else
			fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		break;
	case NVML_ABI_FI_DEV_ECC_CURRENT:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_INT;
		fv->value.ui = NVML_ABI_FEATURE_ENABLED;
		break;
	case NVML_ABI_FI_DEV_PCIE_REPLAY_COUNTER:
	case NVML_ABI_FI_DEV_ECC_SBE_VOL_TOTAL:
	case NVML_ABI_FI_DEV_ECC_DBE_VOL_TOTAL:
	case NVML_ABI_FI_DEV_ECC_SBE_AGG_TOTAL:
	case NVML_ABI_FI_DEV_ECC_DBE_AGG_TOTAL:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_LONG_LONG;
		fv->value.ull = wear(c->gpu, c->elapsed_s,
				     fv->field_id == NVML_ABI_FI_DEV_PCIE_REPLAY_COUNTER ? WEAR_PCIE_REPLAY
				     : fv->field_id == NVML_ABI_FI_DEV_ECC_SBE_VOL_TOTAL ||
					       fv->field_id == NVML_ABI_FI_DEV_ECC_SBE_AGG_TOTAL
					     ? WEAR_SBE
					     : WEAR_DBE);
		break;
	case NVML_ABI_FI_DEV_REMAPPED_COR:
	case NVML_ABI_FI_DEV_REMAPPED_UNC:
	case NVML_ABI_FI_DEV_REMAPPED_PENDING:
	case NVML_ABI_FI_DEV_REMAPPED_FAILURE:
		fv->value_type = NVML_ABI_VALUE_TYPE_UNSIGNED_INT;
		fv->value.ui = (unsigned)wear(c->gpu, c->elapsed_s,
					      fv->field_id == NVML_ABI_FI_DEV_REMAPPED_COR ? WEAR_REMAP_COR
					      : fv->field_id == NVML_ABI_FI_DEV_REMAPPED_UNC ? WEAR_REMAP_UNC
					      : fv->field_id == NVML_ABI_FI_DEV_REMAPPED_PENDING
						      ? WEAR_REMAP_PENDING
						      : WEAR_REMAP_FAILED);
		break;
	default:
		/* Memory temperature among them: recordings do not carry it. */
		fv->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
		break;
	}
}

FAKE_API nvml_return_t nvmlDeviceGetFieldValues(nvml_device_t dev, int count,
						struct nvml_field_value *values);
FAKE_API nvml_return_t nvmlDeviceGetFieldValues(nvml_device_t dev, int count,
						struct nvml_field_value *values)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_get_field_values, dev, true, &c);
	if (r)
		return r;
	if (count < 0 || (count > 0 && !values))
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	for (int i = 0; i < count; i++)
		field_value(&c, &values[i]);
	return leave(NVML_ABI_SUCCESS);
}

/* ---- GPM --------------------------------------------------------------- */

/* GPM metric ids and the field (in the recording's unit) each reads. The
 * names are writable arrays only because NVML's struct holds char *. */
static struct gpm_metric {
	unsigned id;
	enum field_id field;
	char short_name[24];
	char unit[8];
} gpm_metrics[] = {
	{NVML_ABI_GPM_METRIC_GRAPHICS_UTIL, F_GPM_GRAPHICS, "GRAPHICS_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_SM_UTIL, F_GPM_SM, "SM_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_SM_OCCUPANCY, F_GPM_OCCUPANCY, "SM_OCCUPANCY", "%"},
	{NVML_ABI_GPM_METRIC_INTEGER_UTIL, F_GPM_INTEGER, "INTEGER_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_ANY_TENSOR_UTIL, F_GPM_TENSOR, "ANY_TENSOR_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_DFMA_TENSOR_UTIL, F_GPM_DFMA, "DFMA_TENSOR_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_HMMA_TENSOR_UTIL, F_GPM_HMMA, "HMMA_TENSOR_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_IMMA_TENSOR_UTIL, F_GPM_IMMA, "IMMA_TENSOR_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_DRAM_BW_UTIL, F_GPM_DRAM, "DRAM_BW_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_FP64_UTIL, F_GPM_FP64, "FP64_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_FP32_UTIL, F_GPM_FP32, "FP32_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_FP16_UTIL, F_GPM_FP16, "FP16_UTIL", "%"},
	{NVML_ABI_GPM_METRIC_PCIE_TX_PER_SEC, F_GPM_PCIE_TX, "PCIE_TX_PER_SEC", "MiB/s"},
	{NVML_ABI_GPM_METRIC_PCIE_RX_PER_SEC, F_GPM_PCIE_RX, "PCIE_RX_PER_SEC", "MiB/s"},
	{NVML_ABI_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, F_GPM_NVLINK_RX, "NVLINK_TOTAL_RX_PER_SEC", "MiB/s"},
	{NVML_ABI_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, F_GPM_NVLINK_TX, "NVLINK_TOTAL_TX_PER_SEC", "MiB/s"},
};

FAKE_API nvml_return_t nvmlGpmQueryDeviceSupport(nvml_device_t dev, struct nvml_gpm_support *s);
FAKE_API nvml_return_t nvmlGpmQueryDeviceSupport(nvml_device_t dev, struct nvml_gpm_support *s)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_gpm_query_device_support, dev, true, &c);
	if (r)
		return r;
	if (!s)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (s->version != NVML_ABI_GPM_SUPPORT_VERSION)
		return leave(NVML_ABI_ERROR_ARGUMENT_VERSION_MISMATCH);
	s->is_supported_device = gpm_supported(&c) ? 1 : 0;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlGpmSampleAlloc(nvml_gpm_sample_t *out);
FAKE_API nvml_return_t nvmlGpmSampleAlloc(nvml_gpm_sample_t *out)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_gpm_sample_alloc, NULL, false, &c);
	if (r)
		return r;
	if (!out)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	struct nvml_gpm_sample_st *s = calloc(1, sizeof *s);
	if (!s)
		return leave(NVML_ABI_ERROR_MEMORY);
	s->magic = GPM_SAMPLE_MAGIC;
	s->gpu = -1;
	s->mig = -1;
	*out = s;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlGpmSampleFree(nvml_gpm_sample_t s);
FAKE_API nvml_return_t nvmlGpmSampleFree(nvml_gpm_sample_t s)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_gpm_sample_free, NULL, false, &c);
	if (r)
		return r;
	if (!s || s->magic != GPM_SAMPLE_MAGIC)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	s->magic = 0;
	free(s);
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlGpmSampleGet(nvml_device_t dev, nvml_gpm_sample_t s);
FAKE_API nvml_return_t nvmlGpmSampleGet(nvml_device_t dev, nvml_gpm_sample_t s)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_gpm_sample_get, dev, true, &c);
	if (r)
		return r;
	if (!s || s->magic != GPM_SAMPLE_MAGIC)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!gpm_supported(&c))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	s->gpu = c.gpu;
	s->mig = -1;
	s->pos_s = c.pos_s;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlGpmMigSampleGet(nvml_device_t dev, unsigned int gi,
					   nvml_gpm_sample_t s);
FAKE_API nvml_return_t nvmlGpmMigSampleGet(nvml_device_t dev, unsigned int gi,
					   nvml_gpm_sample_t s)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_gpm_mig_sample_get, dev, true, &c);
	if (r)
		return r;
	if (!s || s->magic != GPM_SAMPLE_MAGIC)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!gpm_supported(&c) || !mig_enabled())
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	int k = -1;
	for (int i = 0; i < FAKE_MIG_COUNT; i++)
		if (mig_layout[i].gi == gi)
			k = i;
	if (k < 0)
		return leave(NVML_ABI_ERROR_NOT_FOUND);
	s->gpu = c.gpu;
	s->mig = k;
	s->pos_s = c.pos_s;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlGpmMetricsGet(struct nvml_gpm_metrics_get *mg);
FAKE_API nvml_return_t nvmlGpmMetricsGet(struct nvml_gpm_metrics_get *mg)
{
	struct call c;
	const struct nvml_gpm_sample_st *s1 = mg ? mg->sample1 : NULL;
	const struct nvml_gpm_sample_st *s2 = mg ? mg->sample2 : NULL;
	bool ok = s1 && s2 && s1->magic == GPM_SAMPLE_MAGIC && s2->magic == GPM_SAMPLE_MAGIC &&
		  s1->gpu >= 0 && s1->gpu == s2->gpu && s1->mig == s2->mig;
	/* The device is the one both samples were taken on. */
	nvml_return_t r = enter(NVML_FN_gpm_metrics_get, ok ? &devices[s2->gpu] : NULL, true, &c);
	if (r)
		return r;
	if (mg->version != NVML_ABI_GPM_METRICS_GET_VERSION)
		return leave(NVML_ABI_ERROR_ARGUMENT_VERSION_MISMATCH);
	if (mg->num_metrics > NVML_ABI_GPM_METRICS_MAX)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (!gpm_supported(&c))
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	/* GPM metrics describe the interval between the samples; a recording
	 * row already holds that interval's value, so sample 2's row is it. */
	const struct rec_row *row = row_at(c.g->src, s2->pos_s);
	for (unsigned i = 0; i < mg->num_metrics; i++) {
		struct nvml_gpm_metric *m = &mg->metrics[i];
		struct gpm_metric *info = NULL;
		for (size_t k = 0; k < sizeof gpm_metrics / sizeof gpm_metrics[0]; k++)
			if (gpm_metrics[k].id == m->metric_id)
				info = &gpm_metrics[k];
		m->value = 0;
		m->metric_info.short_name = info ? info->short_name : NULL;
		m->metric_info.long_name = info ? info->short_name : NULL;
		m->metric_info.unit = info ? info->unit : NULL;
		/* Ids without a recording column (or unknown) have no value. */
		if (!info || !(row->valid & FIELD_BIT(info->field))) {
			m->nvml_return = NVML_ABI_ERROR_NOT_SUPPORTED;
			continue;
		}
		m->value = field_from_base(info->field, row->v[info->field]);
		if (s2->mig >= 0)
			m->value *= mig_layout[s2->mig].activity;
		m->nvml_return = NVML_ABI_SUCCESS;
	}
	return leave(NVML_ABI_SUCCESS);
}

/* ---- Events ------------------------------------------------------------ */

static bool event_set_valid(const struct nvml_event_set_st *set)
{
	return set && set->magic == EVENT_SET_MAGIC;
}

FAKE_API nvml_return_t nvmlEventSetCreate(nvml_event_set_t *out);
FAKE_API nvml_return_t nvmlEventSetCreate(nvml_event_set_t *out)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_event_set_create, NULL, false, &c);
	if (r)
		return r;
	if (!out)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	struct nvml_event_set_st *set = calloc(1, sizeof *set);
	if (!set)
		return leave(NVML_ABI_ERROR_MEMORY);
	set->magic = EVENT_SET_MAGIC;
	set->generation = st.generation;
	*out = set;
	return leave(NVML_ABI_SUCCESS);
}

FAKE_API nvml_return_t nvmlDeviceRegisterEvents(nvml_device_t dev, unsigned long long types,
						nvml_event_set_t set);
FAKE_API nvml_return_t nvmlDeviceRegisterEvents(nvml_device_t dev, unsigned long long types,
						nvml_event_set_t set)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_device_register_events, dev, true, &c);
	if (r)
		return r;
	if (!event_set_valid(set))
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	if (types & ~SUPPORTED_EVENTS)
		return leave(NVML_ABI_ERROR_NOT_SUPPORTED);
	set->mask[c.gpu] |= types;
	return leave(NVML_ABI_SUCCESS);
}

/* An XID that is due and not yet given to this set. Lock held. */
static bool xid_due(struct nvml_event_set_st *set, struct nvml_event_data *data)
{
	if (set->generation != st.generation) {
		set->generation = st.generation;
		set->delivered = 0;
	}
	double now = elapsed_s();
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (f->kind != FAULT_XID || (set->delivered & (1U << i)) || now < f->at_s ||
		    !(set->mask[f->gpu] & NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR))
			continue;
		set->delivered |= 1U << i;
		data->device = &devices[f->gpu];
		data->event_type = NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR;
		data->event_data = f->code;
		data->gpu_instance_id = 0xFFFFFFFFU;
		data->compute_instance_id = 0xFFFFFFFFU;
		return true;
	}
	return false;
}

/* Nanoseconds until the next XID this set has not been given, or -1. */
static int64_t next_xid_ns(const struct nvml_event_set_st *set)
{
	double now = elapsed_s(), best = -1;
	for (int i = 0; i < st.nfaults; i++) {
		const struct fault *f = &st.faults[i];
		if (f->kind != FAULT_XID || (set->delivered & (1U << i)))
			continue;
		double in = f->at_s - now;
		if (best < 0 || in < best)
			best = in < 0 ? 0 : in;
	}
	return best < 0 ? -1 : (int64_t)(best * 1e9) + 1;
}

FAKE_API nvml_return_t nvmlEventSetWait_v2(nvml_event_set_t set, struct nvml_event_data *data,
					   unsigned int timeout_ms);
FAKE_API nvml_return_t nvmlEventSetWait_v2(nvml_event_set_t set, struct nvml_event_data *data,
					   unsigned int timeout_ms)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_event_set_wait, NULL, false, &c);
	if (r)
		return r;
	if (!event_set_valid(set) || !data)
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000LL;
	for (;;) {
		if (xid_due(set, data))
			return leave(NVML_ABI_SUCCESS);
		int64_t left = deadline - mono_ns();
		if (left <= 0)
			return leave(NVML_ABI_ERROR_TIMEOUT);
		/* Sleep without the lock, so other threads' calls go on, until
		 * the next scheduled XID or the timeout: a real driver blocks
		 * here, and a fake that polled would bill its wake-ups to
		 * gpulsed in benchmarks. */
		int64_t xid = next_xid_ns(set);
		if (xid >= 0 && xid < left)
			left = xid;
		pthread_mutex_unlock(&st.lock);
		sleep_ns(left);
		pthread_mutex_lock(&st.lock);
		if (st.init_count == 0)
			return leave(NVML_ABI_ERROR_UNINITIALIZED);
	}
}

FAKE_API nvml_return_t nvmlEventSetFree(nvml_event_set_t set);
FAKE_API nvml_return_t nvmlEventSetFree(nvml_event_set_t set)
{
	struct call c;
	nvml_return_t r = enter(NVML_FN_event_set_free, NULL, false, &c);
	if (r)
		return r;
	if (!event_set_valid(set))
		return leave(NVML_ABI_ERROR_INVALID_ARGUMENT);
	set->magic = 0;
	free(set);
	return leave(NVML_ABI_SUCCESS);
}

/* The shim's table types, filled with this file's functions: a signature
 * that drifted from the shim's declaration fails the build here. */
static const struct nvml_lib abi_check __attribute__((unused)) = {
	.init = nvmlInit_v2,
	.shutdown = nvmlShutdown,
	.device_get_count = nvmlDeviceGetCount_v2,
	.device_get_handle_by_index = nvmlDeviceGetHandleByIndex_v2,
	.system_get_driver_version = nvmlSystemGetDriverVersion,
	.system_get_nvml_version = nvmlSystemGetNVMLVersion,
	.system_get_cuda_driver_version = nvmlSystemGetCudaDriverVersion_v2,
	.device_get_handle_by_uuid = nvmlDeviceGetHandleByUUID,
	.device_get_name = nvmlDeviceGetName,
	.device_get_uuid = nvmlDeviceGetUUID,
	.device_get_serial = nvmlDeviceGetSerial,
	.device_get_pci_info = nvmlDeviceGetPciInfo_v3,
	.device_get_architecture = nvmlDeviceGetArchitecture,
	.device_get_cuda_compute_capability = nvmlDeviceGetCudaComputeCapability,
	.device_get_mig_mode = nvmlDeviceGetMigMode,
	.device_get_cpu_affinity = nvmlDeviceGetCpuAffinity,
	.device_get_enforced_power_limit = nvmlDeviceGetEnforcedPowerLimit,
	.device_get_max_clock_info = nvmlDeviceGetMaxClockInfo,
	.device_get_max_pcie_link_generation = nvmlDeviceGetMaxPcieLinkGeneration,
	.device_get_max_pcie_link_width = nvmlDeviceGetMaxPcieLinkWidth,
	.device_get_memory_bus_width = nvmlDeviceGetMemoryBusWidth,
	.device_get_num_gpu_cores = nvmlDeviceGetNumGpuCores,
	.device_get_utilization_rates = nvmlDeviceGetUtilizationRates,
	.device_get_memory_info_v2 = nvmlDeviceGetMemoryInfo_v2,
	.device_get_memory_info = nvmlDeviceGetMemoryInfo,
	.device_get_power_usage = nvmlDeviceGetPowerUsage,
	.device_get_clock_info = nvmlDeviceGetClockInfo,
	.device_get_temperature = nvmlDeviceGetTemperature,
	.device_get_performance_state = nvmlDeviceGetPerformanceState,
	.device_get_current_clocks_event_reasons = nvmlDeviceGetCurrentClocksEventReasons,
	.device_get_total_energy_consumption = nvmlDeviceGetTotalEnergyConsumption,
	.device_get_compute_running_processes = nvmlDeviceGetComputeRunningProcesses_v3,
	.device_get_process_utilization = nvmlDeviceGetProcessUtilization,
	.device_get_ecc_mode = nvmlDeviceGetEccMode,
	.device_get_total_ecc_errors = nvmlDeviceGetTotalEccErrors,
	.device_get_remapped_rows = nvmlDeviceGetRemappedRows,
	.device_get_pcie_replay_counter = nvmlDeviceGetPcieReplayCounter,
	.device_get_curr_pcie_link_generation = nvmlDeviceGetCurrPcieLinkGeneration,
	.device_get_curr_pcie_link_width = nvmlDeviceGetCurrPcieLinkWidth,
	.device_get_field_values = nvmlDeviceGetFieldValues,
	.device_get_encoder_utilization = nvmlDeviceGetEncoderUtilization,
	.device_get_decoder_utilization = nvmlDeviceGetDecoderUtilization,
	.device_get_violation_status = nvmlDeviceGetViolationStatus,
	.device_get_nvlink_state = nvmlDeviceGetNvLinkState,
	.device_get_nvlink_error_counter = nvmlDeviceGetNvLinkErrorCounter,
	.device_get_retired_pages = nvmlDeviceGetRetiredPages,
	.device_get_retired_pages_pending_status = nvmlDeviceGetRetiredPagesPendingStatus,
	.gpm_query_device_support = nvmlGpmQueryDeviceSupport,
	.gpm_sample_alloc = nvmlGpmSampleAlloc,
	.gpm_sample_free = nvmlGpmSampleFree,
	.gpm_sample_get = nvmlGpmSampleGet,
	.gpm_metrics_get = nvmlGpmMetricsGet,
	.event_set_create = nvmlEventSetCreate,
	.device_get_supported_event_types = nvmlDeviceGetSupportedEventTypes,
	.device_register_events = nvmlDeviceRegisterEvents,
	.event_set_wait = nvmlEventSetWait_v2,
	.event_set_free = nvmlEventSetFree,
	.device_get_max_mig_device_count = nvmlDeviceGetMaxMigDeviceCount,
	.device_get_mig_device_handle_by_index = nvmlDeviceGetMigDeviceHandleByIndex,
	.device_get_gpu_instance_id = nvmlDeviceGetGpuInstanceId,
	.device_get_compute_instance_id = nvmlDeviceGetComputeInstanceId,
	.gpm_mig_sample_get = nvmlGpmMigSampleGet,
	.device_get_minor_number = nvmlDeviceGetMinorNumber,
	.device_get_topology_common_ancestor = nvmlDeviceGetTopologyCommonAncestor,
	.device_get_nvlink_remote_pci_info = nvmlDeviceGetNvLinkRemotePciInfo_v2,
	.device_get_samples = nvmlDeviceGetSamples,
	.error_string = nvmlErrorString,
};
