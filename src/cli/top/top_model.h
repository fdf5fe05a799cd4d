/* The model of `gpulse top`: what one refresh fetched from gpulsed
 * (GPUs, processes, alerts, the bottleneck), parsed from the API's JSON
 * into plain structs, the history rings the graphs draw, and the process
 * list's sort and filter. Nothing here knows about the terminal or HTTP,
 * so all of it is unit-tested without either (tests/unit/test_top_model.c);
 * the text helpers at the end (bars, graph cells, column fitting) are
 * pure functions of their arguments for the same reason. */
#ifndef GPULSE_TOP_MODEL_H
#define GPULSE_TOP_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TOP_GPU_MAX 64        /* as the daemon's GPU_MAX */
#define TOP_PROC_MAX 512      /* process rows kept; the rest are counted */
#define TOP_ALERT_MAX 64      /* alerts kept; the rest are counted */
#define TOP_HIST_LEN 1024     /* samples kept per GPU and metric */
#define TOP_TEXT 128
#define TOP_CMDLINE 256

/* The bars of a GPU header, in the order they are drawn, and the metrics
 * a history graph can show. Each is a ratio 0..1 of its scale. */
enum top_metric {
	TM_UTIL,     /* GPU utilization */
	TM_SM,       /* GPM SM active */
	TM_TENSOR,   /* GPM tensor pipes */
	TM_DRAM,     /* GPM DRAM bandwidth */
	TM_MEM,      /* memory used / total */
	TM_POWER,    /* power / limit */
	TM_TEMP,     /* temperature / TOP_TEMP_SCALE_C */
	TM_CLOCK,    /* SM clock / its maximum */
	TM_PCIE,     /* the busier PCIe direction / the link's peak */
	TM_COUNT,
};
#define TOP_TEMP_SCALE_C 100.0

/* Short name ("util", "SM", ...) and long name ("GPU utilization"). */
const char *top_metric_name(enum top_metric m);
const char *top_metric_title(enum top_metric m);

struct top_gpu {
	int index;
	char uuid[96];
	char model[96];
	char health[16];          /* "up", "stale", "lost" */
	char health_reason[96];
	bool replay;              /* source "replay" */
	double ratio[TM_COUNT];   /* the bars; valid where have & (1 << m) */
	unsigned have;
	/* The numbers printed beside the bars. */
	double mem_used_bytes, mem_total_bytes, power_w, power_limit_w, temp_c;
	double sm_clock_hz, sm_clock_max_hz, pcie_tx_bps, pcie_rx_bps, pcie_peak_bps;
	unsigned have_raw;        /* bit per TOP_RAW_* */
	char throttle[TOP_TEXT];  /* decoded reasons, comma-separated; "" none */
	/* The driver's count of processes (proc_count), which a replay or an
	 * unreadable process list has without the list itself. */
	bool have_proc_count;
	double proc_count;
	/* The live diagnosis's last window (/api/v1/diagnosis). */
	bool have_diag;
	char bottleneck[32];
	char findings[TOP_TEXT];
	char advice[192];
	double diag_end_s;
};
enum {
	TOP_RAW_MEM = 1u << 0, TOP_RAW_MEM_TOTAL = 1u << 1, TOP_RAW_POWER = 1u << 2,
	TOP_RAW_POWER_LIMIT = 1u << 3, TOP_RAW_TEMP = 1u << 4, TOP_RAW_SM_CLOCK = 1u << 5,
	TOP_RAW_SM_CLOCK_MAX = 1u << 6, TOP_RAW_PCIE = 1u << 7, TOP_RAW_PCIE_PEAK = 1u << 8,
};

/* One row of the process list: a process on one GPU. */
struct top_proc {
	uint32_t pid;
	int gpu;
	bool have_uid;
	uid_t uid;
	char user[32];            /* filled by the caller (top_procs_resolve_users) */
	char comm[64];
	char owner[96];           /* pod, job or container (owner.summary of /api/v1/gpus) */
	char cmdline[TOP_CMDLINE];
	bool have_mem;
	double used_bytes;
	bool have_sm;
	double sm_ratio;
	bool injected;            /* libgpulse-inject.so runs in it */
	bool have_kernel;
	char kernel[TOP_TEXT];
	double kernel_share;      /* of the process's kernel time on that GPU */
	bool have_kernel_total;
	double kernel_total_s;    /* that time (/api/v1/processes), the share's denominator */
	/* Its part of the GPU's SM, tensor and DRAM activity (the split,
	 * /api/v1/gpus tenants), how it was obtained and what bounds it. */
	unsigned have_act;        /* bit per TOP_ACT_* */
	double act[3];
	char source[12];          /* "kernels", "nvml", "sole", "" */
	char bound[48];           /* "compute_bound (tensor cores)", "" */
};

enum { TOP_ACT_SM, TOP_ACT_TENSOR, TOP_ACT_DRAM, TOP_ACT_COUNT };

/* Whether a pod or job that holds the GPU is allocated but idle, as
 * gpulsed judged it from the activity split (/api/v1/gpus holders, the
 * verdict of gpulse_workload_allocated_idle; `gpulse status` shows the
 * same). */
enum top_idle {
	TOP_IDLE_NONE,            /* no holder names the owner (a user, a container) */
	TOP_IDLE_UNJUDGED,        /* held, but the GPU's SM activity was not split */
	TOP_IDLE_WORKING,         /* held, its part over the idle line (or not long enough) */
	TOP_IDLE_IDLE,            /* allocated but idle */
};

/* One owner's (pod, container, job, user) activity on one GPU: the
 * per-owner view (/api/v1/gpus workloads), and the pods and jobs that
 * hold the GPU without a process there (an allocation only: holders
 * with no workload row), which have no activity of their own. */
struct top_workload {
	int gpu;
	char owner[96];           /* the summary; "" no owner known */
	unsigned processes;
	bool have_busy;           /* false on a holder-only row */
	double busy;
	unsigned have_act;
	double act[TOP_ACT_COUNT];
	char source[12];
	char bound[48];
	bool held_only;           /* a holder without a workload row */
	bool allocated;           /* an allocation names its pod or job */
	enum top_idle idle;
	double idle_for_s;        /* how long its part has stayed under the idle
	                           * line; NaN unknown */
};

struct top_alert {
	char name[64];
	char state[12];           /* "firing", "pending" */
	char severity[16];
	char gpu[12];
	char summary[192];
	double active_at;         /* Unix seconds; 0 unknown */
};

/* Everything one refresh fetched. */
struct top_data {
	char mode[16];            /* "nvml", "replay", "none" */
	char detail[256];
	double replay_speed;
	int ngpus;
	struct top_gpu gpus[TOP_GPU_MAX];
	int nprocs;
	uint32_t procs_dropped;   /* rows beyond TOP_PROC_MAX, or the daemon's */
	struct top_proc procs[TOP_PROC_MAX];
	int nalerts;
	int alerts_dropped;
	int nfiring, npending;
	struct top_alert alerts[TOP_ALERT_MAX];
	bool profiling;           /* the injection socket serves */
	int nworkloads;
	struct top_workload workloads[TOP_PROC_MAX];
};

/* Each parser takes one API answer's whole body (`len` bytes, need not
 * end in NUL) and fills its part of `d`. 0, or GPULSE_EPARSE with one
 * sentence in err naming the endpoint and what was wrong. Input of any
 * shape is safe (tests/unit, fuzz/fuzz_top_json.c); strings are cut to
 * their fields and control bytes become '?'. */
/* /api/v1/gpus: resets d, then fills mode, detail and gpus, and the
 * processes NVML lists (not yet injected) with their parts of the GPU's
 * activity, and the per-owner workloads with their holders' verdicts
 * (a workload whose pod, or job, a holder names takes its verdict; a
 * holder no workload matches gets a row of its own after its GPU's
 * workloads). */
int top_parse_gpus(struct top_data *d, const char *body, size_t len, char *err, size_t errlen);
/* /api/v1/processes: marks injected rows, adds injected processes NVML
 * does not list (one row per GPU they use), fills uid and cmdline. */
int top_parse_processes(struct top_data *d, const char *body, size_t len, char *err,
			size_t errlen);
/* /api/v1/kernels (heaviest first; per_process=1 is enough): each
 * injected row's top kernel and its share of that process's kernel time
 * on that GPU (from /api/v1/processes, parsed first; failing that, the
 * sum of the rows given). */
int top_parse_kernels(struct top_data *d, const char *body, size_t len, char *err, size_t errlen);
/* /api/v1/alerts: firing first, then pending. */
int top_parse_alerts(struct top_data *d, const char *body, size_t len, char *err, size_t errlen);
/* /api/v1/diagnosis: each GPU's latest window (class, findings, advice). */
int top_parse_diagnosis(struct top_data *d, const char *body, size_t len, char *err,
			size_t errlen);

/* ---- history -------------------------------------------------------- */

/* A ring of TOP_HIST_LEN samples per GPU and metric; NAN where a value was
 * missing (the graph leaves a gap, never draws a zero). GPUs are matched
 * by uuid, so a GPU list that changes keeps each GPU's own history. */
struct top_history {
	int ngpus;
	char uuid[TOP_GPU_MAX][96];
	float v[TOP_GPU_MAX][TM_COUNT][TOP_HIST_LEN];
	unsigned head;            /* next slot written */
	unsigned count;           /* samples held, <= TOP_HIST_LEN */
};

void top_history_init(struct top_history *h);
/* Append one sample of every GPU of d. */
void top_history_push(struct top_history *h, const struct top_data *d);
/* Append a gap (gpulsed unreachable): every series gets NAN. */
void top_history_push_gap(struct top_history *h);
/* The slot of the GPU with this uuid, or -1. */
int top_history_find(const struct top_history *h, const char *uuid);
/* The sample `age` steps back (0: the newest) of slot's metric; NAN when
 * older than the ring holds. */
double top_history_get(const struct top_history *h, int slot, enum top_metric m, unsigned age);

/* The past of each GPU's series from gpulsed's store, so the graphs start
 * full rather than empty: one /api/v1/query_range of the raw series
 * (top_backfill_query), turned into the same ratios as the bars with
 * each GPU's scales of now (memory total, power limit, maximum clock,
 * link peak). Samples oldest first, one per step. */
struct top_backfill {
	int ngpus;
	char uuid[TOP_GPU_MAX][96];
	unsigned n;
	float v[TOP_GPU_MAX][TM_COUNT][TOP_HIST_LEN];
};

/* The PromQL selector of every series a graph draws, into out. */
void top_backfill_query(char *out, size_t len);
/* Parse the query_range answer for `n` (<= TOP_HIST_LEN) steps of step_s
 * from start_s into b; GPUs are those of d (matched by uuid), whose
 * current scales turn values into ratios. 0, or GPULSE_EPARSE with err. */
int top_parse_backfill(struct top_backfill *b, const struct top_data *d, const char *body,
		       size_t len, double start_s, double step_s, unsigned n, char *err,
		       size_t errlen);
/* Put b's samples before the history's own, keeping the newest
 * TOP_HIST_LEN; a GPU b lacks gets gaps there. */
void top_history_seed(struct top_history *h, const struct top_backfill *b);

/* ---- the process list -------------------------------------------------- */

enum top_sort {
	TOP_SORT_MEM,      /* GPU memory, largest first (the default) */
	TOP_SORT_SM,       /* SM share */
	TOP_SORT_PID,
	TOP_SORT_USER,
	TOP_SORT_GPU,
	TOP_SORT_COMMAND,
	TOP_SORT_KERNEL,   /* top kernel's share */
	TOP_SORT_COUNT,
};
const char *top_sort_name(enum top_sort s);  /* "MEM", "SM%", ... */

/* Indices into d->procs of the rows whose pid, user, command line or
 * kernel contains `filter` (case-insensitive; NULL or "" all), sorted by
 * `key` (descending for numbers, ascending for text; `reverse` flips),
 * ties by pid then gpu. Missing values sort last either way. Returns how
 * many went into idx (at most cap). */
int top_procs_view(const struct top_data *d, const char *filter, enum top_sort key, bool reverse,
		   int *idx, int cap);

/* The line the process table shows when no row is listed: that the
 * filter matches nothing; that the driver counts processes whose details
 * it did not give (a replay has the count, never the list: the same
 * words `gpulse status` uses); or that nothing runs. */
void top_procs_empty_text(const struct top_data *d, const char *filter, char *out, size_t outlen);

/* ---- text ---------------------------------------------------------------- */

/* `cells` terminal columns of a bar at ratio (clamped to 0..1), written
 * into out as UTF-8 (eighth blocks for the partial cell) or, with ascii,
 * '|' cells; the unfilled part is spaces. A missing value (have false)
 * is all spaces, so it never looks like zero. Returns the number of
 * filled cells (rounded down); out always ends in NUL. */
int top_bar(char *out, size_t outlen, int cells, double ratio, bool have, bool ascii);

/* The character cell at `row` (0: top) of a graph column `height` rows tall
 * showing ratio (NAN: empty). UTF-8 eighth blocks, or ascii '#' (full),
 * '.' (partly) and ' '. Returns a static string. */
const char *top_graph_cell(double ratio, int row, int height, bool ascii);

/* `src` fitted into exactly `cols` terminal columns: cut (with "~" as
 * the last column when cut) or padded with spaces on the right (`right`:
 * on the left). In ascii mode every byte >= 0x80 becomes '?'; otherwise
 * UTF-8 is measured with wcwidth and invalid bytes become '?'. Control
 * bytes always become '?'. out must hold 4 * cols + 1 bytes. */
void top_fit(char *out, size_t outlen, const char *src, int cols, bool right, bool ascii);

/* "1.5G", "512M", "80K", "12B": four columns at most. */
void top_fmt_bytes(char *out, size_t outlen, double bytes);

/* The PCIe peak per direction in bytes/s of a link, 0 when unknown. */
double top_pcie_peak_bps(unsigned gen, unsigned width);

#endif
