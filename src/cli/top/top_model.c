/* The model of `gpulse top`; see top_model.h. The API's JSON is read
 * with jansson; everything kept is copied into fixed-size fields, so a
 * refresh's memory is bounded whatever the daemon sends. */
#include "cli/top/top_model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <wchar.h>

#include <jansson.h>

#include "common/clock.h"
#include "collect/fields.h"
#include "common/status.h"
#include "common/str.h"
#include "common/utf8.h"

static const struct {
	const char *name, *title;
} metric_names[TM_COUNT] = {
	[TM_UTIL] = {"util", "GPU utilization"},
	[TM_SM] = {"SM", "SM active (GPM)"},
	[TM_TENSOR] = {"tensor", "tensor pipes active (GPM)"},
	[TM_DRAM] = {"DRAM", "DRAM bandwidth (GPM)"},
	[TM_MEM] = {"mem", "memory used"},
	[TM_POWER] = {"power", "power against the limit"},
	[TM_TEMP] = {"temp", "temperature (of 100 C)"},
	[TM_CLOCK] = {"clock", "SM clock against its maximum"},
	[TM_PCIE] = {"PCIe", "PCIe, the busier direction against the link's peak"},
};

const char *top_metric_name(enum top_metric m)
{
	return m < TM_COUNT ? metric_names[m].name : "?";
}

const char *top_metric_title(enum top_metric m)
{
	return m < TM_COUNT ? metric_names[m].title : "?";
}

/* ---- JSON helpers ------------------------------------------------------- */

/* A string of the daemon's, copied into dst with control bytes as '?'
 * and invalid UTF-8 as '?', cut on a character boundary. */
static void copy_text(char *dst, size_t len, const char *src)
{
	utf8_clean(dst, len, src ? src : "");
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static void get_text(char *dst, size_t len, json_t *obj, const char *key)
{
	copy_text(dst, len, json_string_value(json_object_get(obj, key)));
}

static bool get_num(json_t *obj, const char *key, double *v)
{
	json_t *j = json_object_get(obj, key);
	if (!json_is_number(j))
		return false;
	double x = json_number_value(j);
	if (!isfinite(x))
		return false;
	*v = x;
	return true;
}

/* The "data" object of an API answer, or NULL with err set. *root owns it. */
static json_t *load_data(const char *body, size_t len, const char *what, json_t **root, char *err,
			 size_t errlen)
{
	json_error_t je;
	*root = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &je);
	if (!*root) {
		str_errf(err, errlen, "%s: not JSON (line %d: %s)", what, je.line, je.text);
		return NULL;
	}
	json_t *data = json_object_get(*root, "data");
	if (!json_is_object(data)) {
		str_errf(err, errlen, "%s: no \"data\" object", what);
		json_decref(*root);
		*root = NULL;
		return NULL;
	}
	return data;
}

/* ---- /api/v1/gpus ------------------------------------------------------- */

double top_pcie_peak_bps(unsigned gen, unsigned width)
{
	/* Per lane and direction, after line encoding (8b/10b to gen 2,
	 * 128b/130b from gen 3, PAM4 FLIT at gen 6). */
	static const double lane_bps[] = {0, 0.25e9, 0.5e9, 0.985e9, 1.969e9, 3.938e9, 7.563e9};
	if (gen == 0 || gen >= sizeof lane_bps / sizeof lane_bps[0] || width == 0 || width > 32)
		return 0;
	return lane_bps[gen] * width;
}

static void set_ratio(struct top_gpu *g, enum top_metric m, double v)
{
	if (!isfinite(v))
		return;
	g->ratio[m] = v < 0 ? 0 : v;
	g->have |= 1u << m;
}

static void parse_gpu(struct top_gpu *g, json_t *j)
{
	double v = 0;
	memset(g, 0, sizeof *g);
	g->index = get_num(j, "gpu", &v) && v >= 0 && v < 1e6 ? (int)v : -1;
	get_text(g->uuid, sizeof g->uuid, j, "uuid");
	get_text(g->model, sizeof g->model, j, "model");
	get_text(g->health, sizeof g->health, j, "health");
	get_text(g->health_reason, sizeof g->health_reason, j, "health_reason");
	const char *src = json_string_value(json_object_get(j, "source"));
	g->replay = src && strcmp(src, "replay") == 0;

	json_t *f = json_object_get(j, "fields");
	if (get_num(f, field_key(F_GPU_UTIL), &v))
		set_ratio(g, TM_UTIL, v);
	if (get_num(f, field_key(F_GPM_SM), &v))
		set_ratio(g, TM_SM, v);
	if (get_num(f, field_key(F_GPM_TENSOR), &v))
		set_ratio(g, TM_TENSOR, v);
	if (get_num(f, field_key(F_GPM_DRAM), &v))
		set_ratio(g, TM_DRAM, v);
	if (get_num(f, field_key(F_MEM_USED), &g->mem_used_bytes))
		g->have_raw |= TOP_RAW_MEM;
	if (get_num(f, field_key(F_MEM_TOTAL), &g->mem_total_bytes) && g->mem_total_bytes > 0)
		g->have_raw |= TOP_RAW_MEM_TOTAL;
	if ((g->have_raw & (TOP_RAW_MEM | TOP_RAW_MEM_TOTAL)) == (TOP_RAW_MEM | TOP_RAW_MEM_TOTAL))
		set_ratio(g, TM_MEM, g->mem_used_bytes / g->mem_total_bytes);
	if (get_num(f, field_key(F_POWER), &g->power_w))
		g->have_raw |= TOP_RAW_POWER;
	if (get_num(f, field_key(F_POWER_LIMIT), &g->power_limit_w) && g->power_limit_w > 0)
		g->have_raw |= TOP_RAW_POWER_LIMIT;
	if ((g->have_raw & (TOP_RAW_POWER | TOP_RAW_POWER_LIMIT)) ==
	    (TOP_RAW_POWER | TOP_RAW_POWER_LIMIT))
		set_ratio(g, TM_POWER, g->power_w / g->power_limit_w);
	if (get_num(f, field_key(F_TEMP), &g->temp_c)) {
		g->have_raw |= TOP_RAW_TEMP;
		set_ratio(g, TM_TEMP, g->temp_c / TOP_TEMP_SCALE_C);
	}
	if (get_num(f, field_key(F_SM_CLOCK), &g->sm_clock_hz))
		g->have_raw |= TOP_RAW_SM_CLOCK;
	if (get_num(j, "max_sm_clock_hz", &g->sm_clock_max_hz) && g->sm_clock_max_hz > 0)
		g->have_raw |= TOP_RAW_SM_CLOCK_MAX;
	if ((g->have_raw & (TOP_RAW_SM_CLOCK | TOP_RAW_SM_CLOCK_MAX)) ==
	    (TOP_RAW_SM_CLOCK | TOP_RAW_SM_CLOCK_MAX))
		set_ratio(g, TM_CLOCK, g->sm_clock_hz / g->sm_clock_max_hz);
	bool h_tx = get_num(f, field_key(F_GPM_PCIE_TX), &g->pcie_tx_bps);
	bool h_rx = get_num(f, field_key(F_GPM_PCIE_RX), &g->pcie_rx_bps);
	if (h_tx || h_rx)
		g->have_raw |= TOP_RAW_PCIE;
	/* The link as it runs now; failing that, what it could run at. */
	double gen = 0, width = 0;
	if (!get_num(f, field_key(F_PCIE_GEN), &gen) || gen <= 0)
		get_num(j, "pcie_max_gen", &gen);
	if (!get_num(f, field_key(F_PCIE_WIDTH), &width) || width <= 0)
		get_num(j, "pcie_max_width", &width);
	if (gen > 0 && gen < 16 && width > 0 && width < 64)
		g->pcie_peak_bps = top_pcie_peak_bps((unsigned)gen, (unsigned)width);
	if (g->pcie_peak_bps > 0)
		g->have_raw |= TOP_RAW_PCIE_PEAK;
	if ((g->have_raw & TOP_RAW_PCIE) && g->pcie_peak_bps > 0) {
		double busier = fmax(h_tx ? g->pcie_tx_bps : 0, h_rx ? g->pcie_rx_bps : 0);
		set_ratio(g, TM_PCIE, busier / g->pcie_peak_bps);
	}

	g->have_proc_count = get_num(f, field_key(F_PROC_COUNT), &g->proc_count) &&
			     g->proc_count >= 0;

	json_t *tr = json_object_get(j, "throttle_reasons");
	size_t i;
	json_t *r;
	json_array_foreach(tr, i, r) {
		const char *l = json_string_value(r);
		if (!l || strcmp(l, "gpu_idle") == 0)
			continue; /* resting clocks are not a problem to show */
		size_t n = strlen(g->throttle);
		if (n + 2 >= sizeof g->throttle)
			break;
		snprintf(g->throttle + n, sizeof g->throttle - n, "%s%s", n ? "," : "", l);
	}
	copy_text(g->throttle, sizeof g->throttle, g->throttle);
}

static struct top_proc *add_proc(struct top_data *d, uint32_t pid, int gpu)
{
	if (d->nprocs >= TOP_PROC_MAX) {
		d->procs_dropped++;
		return NULL;
	}
	struct top_proc *p = &d->procs[d->nprocs++];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	p->gpu = gpu;
	return p;
}

static bool get_pid(json_t *j, uint32_t *pid)
{
	double v = 0;
	if (!get_num(j, "pid", &v) || v < 1 || v > 4294967295.0 || v != floor(v))
		return false;
	*pid = (uint32_t)v;
	return true;
}

/* The three parts of the GPU's activity of a tenants or workloads entry. */
static unsigned get_act(json_t *j, double act[TOP_ACT_COUNT])
{
	static const char *const keys[TOP_ACT_COUNT] = {"sm_active", "tensor_active",
							"dram_bandwidth"};
	unsigned have = 0;
	for (int m = 0; m < TOP_ACT_COUNT; m++)
		if (get_num(j, keys[m], &act[m]) && act[m] >= 0)
			have |= 1u << m;
	return have;
}

static void get_bound(char *out, size_t len, json_t *j)
{
	const char *b = json_string_value(json_object_get(j, "bound"));
	const char *x = json_string_value(json_object_get(j, "bound_detail"));
	char text[96];
	snprintf(text, sizeof text, "%s%s%s%s", b ? b : "", x && x[0] ? " (" : "", x && x[0] ? x : "",
		 x && x[0] ? ")" : "");
	copy_text(out, len, text);
}

/* Whether holder h (a pod by namespace and name, or a Slurm job) is the
 * owner whose labels are `owner` (a workload's; the namespace is held to
 * only where the owner carries one: attribution.labels may leave it out). */
static bool holder_names(json_t *h, json_t *owner)
{
	const char *job = json_string_value(json_object_get(h, "job"));
	const char *pod = json_string_value(json_object_get(h, "pod"));
	const char *ns = json_string_value(json_object_get(h, "namespace"));
	if (!json_is_object(owner))
		return false;
	const char *o_job = json_string_value(json_object_get(owner, "job"));
	const char *o_pod = json_string_value(json_object_get(owner, "pod"));
	const char *o_ns = json_string_value(json_object_get(owner, "namespace"));
	if (job && job[0])
		return o_job && strcmp(o_job, job) == 0;
	if (!pod || !pod[0] || !o_pod || strcmp(o_pod, pod) != 0)
		return false;
	return !o_ns || (ns && strcmp(o_ns, ns) == 0);
}

/* GPU gi's holders (who holds it, and whether allocated but idle by the
 * split): each verdict onto the nrows workload rows from `first` on whose
 * owner it names (owners[row - first]), or onto a row of its own, after
 * them, when none. */
static void parse_holders(struct top_data *d, int gi, json_t *g, json_t *const *owners, int first,
			  int nrows)
{
	size_t k;
	json_t *h;
	json_array_foreach(json_object_get(g, "holders"), k, h) {
		if (!json_is_object(h))
			continue;
		json_t *v = json_object_get(h, "idle");
		enum top_idle idle = json_is_true(v)    ? TOP_IDLE_IDLE
				     : json_is_false(v) ? TOP_IDLE_WORKING
							: TOP_IDLE_UNJUDGED;
		double low = NAN;
		if (!get_num(h, "idle_for_s", &low) || low < 0)
			low = NAN;
		bool allocated = json_is_true(json_object_get(h, "allocated"));
		bool named = false;
		for (int r = first; r < first + nrows; r++) {
			if (!holder_names(h, owners[r - first]))
				continue;
			named = true;
			d->workloads[r].idle = idle;
			d->workloads[r].idle_for_s = low;
			d->workloads[r].allocated = allocated;
		}
		if (named || d->nworkloads >= TOP_PROC_MAX)
			continue;
		struct top_workload *w = &d->workloads[d->nworkloads++];
		memset(w, 0, sizeof *w);
		w->gpu = gi;
		w->held_only = true;
		w->idle = idle;
		w->idle_for_s = low;
		w->allocated = allocated;
		char a[64], b[64], who[140];
		get_text(a, sizeof a, h, "job");
		if (a[0]) {
			get_text(b, sizeof b, h, "job_user");
			snprintf(who, sizeof who, "job %s%s%s", a, b[0] ? " " : "", b);
		} else {
			get_text(a, sizeof a, h, "namespace");
			get_text(b, sizeof b, h, "pod");
			snprintf(who, sizeof who, "%s/%s", a, b);
		}
		copy_text(w->owner, sizeof w->owner, who);
		double n = 0;
		if (get_num(h, "processes", &n) && n >= 0 && n < 1e6)
			w->processes = (unsigned)n;
		if (get_num(h, "sm_active", &w->act[TOP_ACT_SM]) && w->act[TOP_ACT_SM] >= 0)
			w->have_act = 1u << TOP_ACT_SM;
	}
}

/* GPU gi's tenants onto its process rows, and its workloads. */
static void parse_tenants(struct top_data *d, int gi, json_t *g)
{
	size_t k;
	json_t *tj;
	json_array_foreach(json_object_get(g, "tenants"), k, tj) {
		uint32_t pid;
		if (!get_pid(tj, &pid))
			continue;  /* the "other" row (pid 0) has no process row */
		for (int i = 0; i < d->nprocs; i++) {
			struct top_proc *p = &d->procs[i];
			if (p->pid != pid || p->gpu != gi)
				continue;
			p->have_act = get_act(tj, p->act);
			get_text(p->source, sizeof p->source, tj, "source");
			get_bound(p->bound, sizeof p->bound, tj);
		}
	}
	/* Each row's owner labels (NULL: the "other" group, no owner), to
	 * match the holders against below. */
	json_t *owners[TOP_PROC_MAX];
	int first = d->nworkloads;
	json_array_foreach(json_object_get(g, "workloads"), k, tj) {
		if (!json_is_object(tj) || d->nworkloads >= TOP_PROC_MAX)
			break;
		owners[d->nworkloads - first] =
			json_is_true(json_object_get(tj, "other")) ? NULL : json_object_get(tj, "owner");
		struct top_workload *w = &d->workloads[d->nworkloads++];
		memset(w, 0, sizeof *w);
		w->gpu = gi;
		w->idle_for_s = NAN;
		get_text(w->owner, sizeof w->owner, tj, "summary");
		double n = 0;
		if (get_num(tj, "processes", &n) && n >= 0 && n < 1e6)
			w->processes = (unsigned)n;
		w->have_busy = get_num(tj, "busy", &w->busy);
		w->have_act = get_act(tj, w->act);
		get_text(w->source, sizeof w->source, tj, "source");
		get_bound(w->bound, sizeof w->bound, tj);
	}
	parse_holders(d, gi, g, owners, first, d->nworkloads - first);
}

int top_parse_gpus(struct top_data *d, const char *body, size_t len, char *err, size_t errlen)
{
	json_t *root;
	memset(d, 0, offsetof(struct top_data, gpus));
	d->ngpus = d->nprocs = d->nalerts = d->nfiring = d->npending = d->alerts_dropped = 0;
	d->procs_dropped = 0;
	d->nworkloads = 0;
	d->profiling = false;
	d->replay_speed = NAN;
	json_t *data = load_data(body, len, "/api/v1/gpus", &root, err, errlen);
	if (!data)
		return GPULSE_EPARSE;
	json_t *gpus = json_object_get(data, "gpus");
	if (!json_is_array(gpus)) {
		str_errf(err, errlen, "/api/v1/gpus: no \"gpus\" array");
		json_decref(root);
		return GPULSE_EPARSE;
	}
	get_text(d->mode, sizeof d->mode, data, "mode");
	get_text(d->detail, sizeof d->detail, data, "detail");
	get_num(data, "replay_speed", &d->replay_speed);
	size_t i;
	json_t *g;
	json_array_foreach(gpus, i, g) {
		if (!json_is_object(g))
			continue;
		if (d->ngpus >= TOP_GPU_MAX)
			break;
		struct top_gpu *tg = &d->gpus[d->ngpus++];
		parse_gpu(tg, g);
		double dropped = 0;
		if (get_num(g, "processes_dropped", &dropped) && dropped > 0 && dropped < 1e9)
			d->procs_dropped += (uint32_t)dropped;
		size_t k;
		json_t *pj;
		json_array_foreach(json_object_get(g, "processes"), k, pj) {
			uint32_t pid;
			if (!get_pid(pj, &pid))
				continue;
			struct top_proc *p = add_proc(d, pid, tg->index);
			if (!p)
				continue;
			get_text(p->comm, sizeof p->comm, pj, "comm");
			get_text(p->owner, sizeof p->owner, json_object_get(pj, "owner"), "summary");
			double uid = -1;
			if (get_num(pj, "uid", &uid) && uid >= 0 && uid < 4294967295.0) {
				p->have_uid = true;
				p->uid = (uid_t)uid;
			}
			p->have_mem = get_num(pj, "used_bytes", &p->used_bytes) && p->used_bytes >= 0;
			p->have_sm = get_num(pj, "sm_ratio", &p->sm_ratio) && p->sm_ratio >= 0;
		}
		parse_tenants(d, tg->index, g);
	}
	json_decref(root);
	return 0;
}

/* ---- /api/v1/processes, /api/v1/kernels --------------------------------------- */

static struct top_proc *find_proc(struct top_data *d, uint32_t pid, int gpu)
{
	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid == pid && (gpu < 0 || d->procs[i].gpu == gpu))
			return &d->procs[i];
	return NULL;
}

static void fill_injected(struct top_proc *p, json_t *pj)
{
	double v = 0;
	p->injected = true;
	/* The process's kernel time on this row's GPU. */
	size_t i;
	json_t *gj;
	json_array_foreach(json_object_get(pj, "gpus"), i, gj) {
		double gv = -1, secs = 0;
		if (get_num(gj, "gpu", &gv) && gv == p->gpu && get_num(gj, "kernel_seconds", &secs) &&
		    secs > 0) {
			p->have_kernel_total = true;
			p->kernel_total_s = secs;
		}
	}
	if (get_num(pj, "uid", &v) && v >= 0 && v < 4294967295.0) {
		p->have_uid = true;
		p->uid = (uid_t)v;
	}
	get_text(p->cmdline, sizeof p->cmdline, pj, "cmdline");
	if (!p->comm[0])
		get_text(p->comm, sizeof p->comm, pj, "comm");
}

int top_parse_processes(struct top_data *d, const char *body, size_t len, char *err,
			size_t errlen)
{
	json_t *root;
	json_t *data = load_data(body, len, "/api/v1/processes", &root, err, errlen);
	if (!data)
		return GPULSE_EPARSE;
	d->profiling = json_is_true(json_object_get(json_object_get(data, "profiling"), "serving"));
	size_t i;
	json_t *pj;
	json_array_foreach(json_object_get(data, "processes"), i, pj) {
		uint32_t pid;
		if (!get_pid(pj, &pid))
			continue;
		bool any = false;
		for (int k = 0; k < d->nprocs; k++)
			if (d->procs[k].pid == pid) {
				fill_injected(&d->procs[k], pj);
				any = true;
			}
		/* GPUs the library saw it use that NVML does not list (it has
		 * ended its context, or NVML cannot see inside the container). */
		size_t k;
		json_t *gj;
		json_array_foreach(json_object_get(pj, "gpus"), k, gj) {
			double gv = -1;
			if (!get_num(gj, "gpu", &gv) || gv < 0 || gv >= TOP_GPU_MAX)
				continue;
			if (find_proc(d, pid, (int)gv))
				continue;
			struct top_proc *p = add_proc(d, pid, (int)gv);
			if (p) {
				fill_injected(p, pj);
				any = true;
			}
		}
		if (!any && json_is_true(json_object_get(pj, "connected"))) {
			struct top_proc *p = add_proc(d, pid, -1);
			if (p)
				fill_injected(p, pj);
		}
	}
	json_decref(root);
	return 0;
}

int top_parse_kernels(struct top_data *d, const char *body, size_t len, char *err, size_t errlen)
{
	json_t *root;
	json_t *data = load_data(body, len, "/api/v1/kernels", &root, err, errlen);
	if (!data)
		return GPULSE_EPARSE;
	json_t *rows = json_object_get(data, "kernels");
	/* Each process's kernel time per GPU, the denominator of its top
	 * kernel's share (the rows are heaviest first, so the first row of a
	 * process on a GPU is its top kernel). */
	size_t i;
	json_t *kj;
	for (int pass = 0; pass < 2; pass++) {
		json_array_foreach(rows, i, kj) {
			uint32_t pid;
			double gv = -1, secs = 0;
			if (!get_pid(kj, &pid) || !get_num(kj, "gpu", &gv) || gv < 0 || gv >= TOP_GPU_MAX ||
			    !get_num(kj, "seconds", &secs) || secs < 0)
				continue;
			struct top_proc *p = find_proc(d, pid, (int)gv);
			if (!p)
				p = find_proc(d, pid, -1);
			if (!p)
				continue;
			if (pass == 0) {
				/* kernel_share holds the sum until the second pass. */
				if (!p->have_kernel) {
					p->kernel_share = 0;
					p->have_kernel = true;
				}
				p->kernel_share += secs;
				continue;
			}
			if (p->kernel[0] || !p->have_kernel)
				continue;
			if (json_is_true(json_object_get(kj, "other")))
				snprintf(p->kernel, sizeof p->kernel, "(other kernels)");
			else
				get_text(p->kernel, sizeof p->kernel, kj, "kernel");
			if (!p->kernel[0])
				snprintf(p->kernel, sizeof p->kernel, "?");
			double total = p->have_kernel_total ? p->kernel_total_s : p->kernel_share;
			p->kernel_share = total > 0 ? secs / total : 0;
			if (p->kernel_share > 1)
				p->kernel_share = 1; /* the two answers were taken apart in time */
		}
	}
	for (int k = 0; k < d->nprocs; k++)
		if (d->procs[k].have_kernel && !d->procs[k].kernel[0])
			d->procs[k].have_kernel = false; /* summed, but no row named it */
	json_decref(root);
	return 0;
}

/* ---- /api/v1/alerts ---------------------------------------------------------- */

/* activeAt (RFC 3339) in Unix seconds; 0 when absent or malformed. */
static double parse_active_at(const char *s)
{
	int64_t ms = 0;
	return s && clock_parse_rfc3339(s, &ms) == 0 ? (double)ms / 1e3 : 0;
}

static int alert_rank(const struct top_alert *a)
{
	return strcmp(a->state, "firing") == 0 ? 0 : 1;
}

static int alert_cmp(const void *pa, const void *pb)
{
	const struct top_alert *a = pa, *b = pb;
	int r = alert_rank(a) - alert_rank(b);
	if (r)
		return r;
	if (a->active_at != b->active_at)
		return a->active_at < b->active_at ? -1 : 1; /* longest-standing first */
	r = strcmp(a->name, b->name);
	return r ? r : strcmp(a->gpu, b->gpu);
}

int top_parse_alerts(struct top_data *d, const char *body, size_t len, char *err, size_t errlen)
{
	json_t *root;
	json_t *data = load_data(body, len, "/api/v1/alerts", &root, err, errlen);
	if (!data)
		return GPULSE_EPARSE;
	d->nalerts = d->nfiring = d->npending = d->alerts_dropped = 0;
	size_t i;
	json_t *aj;
	json_array_foreach(json_object_get(data, "alerts"), i, aj) {
		const char *state = json_string_value(json_object_get(aj, "state"));
		if (!state || (strcmp(state, "firing") != 0 && strcmp(state, "pending") != 0))
			continue;
		if (state[0] == 'f')
			d->nfiring++;
		else
			d->npending++;
		if (d->nalerts >= TOP_ALERT_MAX) {
			d->alerts_dropped++;
			continue;
		}
		struct top_alert *a = &d->alerts[d->nalerts++];
		memset(a, 0, sizeof *a);
		json_t *labels = json_object_get(aj, "labels");
		json_t *ann = json_object_get(aj, "annotations");
		get_text(a->name, sizeof a->name, labels, "alertname");
		get_text(a->severity, sizeof a->severity, labels, "severity");
		get_text(a->gpu, sizeof a->gpu, labels, "gpu");
		copy_text(a->state, sizeof a->state, state);
		get_text(a->summary, sizeof a->summary, ann, "summary");
		if (!a->summary[0])
			get_text(a->summary, sizeof a->summary, ann, "description");
		a->active_at = parse_active_at(json_string_value(json_object_get(aj, "activeAt")));
	}
	qsort(d->alerts, (size_t)d->nalerts, sizeof d->alerts[0], alert_cmp);
	json_decref(root);
	return 0;
}

/* ---- /api/v1/diagnosis ---------------------------------------------------------- */

int top_parse_diagnosis(struct top_data *d, const char *body, size_t len, char *err,
			size_t errlen)
{
	json_t *root;
	json_t *data = load_data(body, len, "/api/v1/diagnosis", &root, err, errlen);
	if (!data)
		return GPULSE_EPARSE;
	for (int k = 0; k < d->ngpus; k++)
		d->gpus[k].have_diag = false;
	size_t i;
	json_t *wj;
	json_array_foreach(json_object_get(data, "windows"), i, wj) {
		double gv = -1, end = 0;
		const char *cls = json_string_value(json_object_get(wj, "bottleneck"));
		if (!cls || !get_num(wj, "gpu", &gv) || !get_num(wj, "end_s", &end))
			continue;
		for (int k = 0; k < d->ngpus; k++) {
			struct top_gpu *g = &d->gpus[k];
			if (g->index != (int)gv || gv != floor(gv) || (g->have_diag && g->diag_end_s >= end))
				continue;
			g->have_diag = true;
			g->diag_end_s = end;
			copy_text(g->bottleneck, sizeof g->bottleneck, cls);
			get_text(g->advice, sizeof g->advice, wj, "advice");
			g->findings[0] = '\0';
			size_t f;
			json_t *fj;
			json_array_foreach(json_object_get(wj, "findings"), f, fj) {
				const char *s = json_string_value(fj);
				size_t n = strlen(g->findings);
				if (!s || n + 2 >= sizeof g->findings)
					continue;
				snprintf(g->findings + n, sizeof g->findings - n, "%s%s", n ? "," : "", s);
			}
			copy_text(g->findings, sizeof g->findings, g->findings);
		}
	}
	json_decref(root);
	return 0;
}

/* ---- history ------------------------------------------------------------------ */

void top_history_init(struct top_history *h)
{
	h->ngpus = 0;
	h->head = h->count = 0;
}

int top_history_find(const struct top_history *h, const char *uuid)
{
	for (int i = 0; i < h->ngpus; i++)
		if (strcmp(h->uuid[i], uuid) == 0)
			return i;
	return -1;
}

/* A slot for a GPU first seen now: its past is all gaps. When every slot
 * is taken, the GPU gets none (the graph shows no history for it). */
static int history_slot(struct top_history *h, const char *uuid)
{
	int s = top_history_find(h, uuid);
	if (s >= 0 || h->ngpus >= TOP_GPU_MAX)
		return s;
	s = h->ngpus++;
	snprintf(h->uuid[s], sizeof h->uuid[s], "%s", uuid);
	for (int m = 0; m < TM_COUNT; m++)
		for (unsigned k = 0; k < TOP_HIST_LEN; k++)
			h->v[s][m][k] = NAN;
	return s;
}

static void history_advance(struct top_history *h)
{
	h->head = (h->head + 1) % TOP_HIST_LEN;
	if (h->count < TOP_HIST_LEN)
		h->count++;
}

void top_history_push(struct top_history *h, const struct top_data *d)
{
	unsigned at = h->head;
	for (int s = 0; s < h->ngpus; s++)
		for (int m = 0; m < TM_COUNT; m++)
			h->v[s][m][at] = NAN;
	for (int i = 0; i < d->ngpus; i++) {
		const struct top_gpu *g = &d->gpus[i];
		char key[96];
		if (g->uuid[0])
			snprintf(key, sizeof key, "%s", g->uuid);
		else
			snprintf(key, sizeof key, "#%d", g->index);
		int s = history_slot(h, key);
		if (s < 0)
			continue;
		for (int m = 0; m < TM_COUNT; m++)
			h->v[s][m][at] = (g->have & (1u << m)) ? (float)g->ratio[m] : NAN;
	}
	history_advance(h);
}

void top_history_push_gap(struct top_history *h)
{
	for (int s = 0; s < h->ngpus; s++)
		for (int m = 0; m < TM_COUNT; m++)
			h->v[s][m][h->head] = NAN;
	history_advance(h);
}

double top_history_get(const struct top_history *h, int slot, enum top_metric m, unsigned age)
{
	if (slot < 0 || slot >= h->ngpus || m >= TM_COUNT || age >= h->count)
		return NAN;
	unsigned i = (h->head + TOP_HIST_LEN - 1 - age) % TOP_HIST_LEN;
	return h->v[slot][m][i];
}

/* ---- backfill from the store --------------------------------------------------- */

/* The series behind each graph; PCIe is the busier of two. */
static const struct {
	enum field_id f;
	enum top_metric m;
} backfill_series[] = {
	{F_GPU_UTIL, TM_UTIL},     {F_GPM_SM, TM_SM},       {F_GPM_TENSOR, TM_TENSOR},
	{F_GPM_DRAM, TM_DRAM},     {F_MEM_USED, TM_MEM},    {F_POWER, TM_POWER},
	{F_TEMP, TM_TEMP},         {F_SM_CLOCK, TM_CLOCK},  {F_GPM_PCIE_TX, TM_PCIE},
	{F_GPM_PCIE_RX, TM_PCIE},
};
#define BACKFILL_SERIES ((int)(sizeof backfill_series / sizeof backfill_series[0]))

void top_backfill_query(char *out, size_t len)
{
	size_t o = (size_t)snprintf(out, len, "{__name__=~\"");
	for (int i = 0; i < BACKFILL_SERIES && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%s", i ? "|" : "",
				      field_table[backfill_series[i].f].metric);
	if (o < len)
		snprintf(out + o, len - o, "\"}");
}

/* The scale that turns a stored value of metric m into the bar's ratio,
 * from the GPU's current values; 0 when unknown. */
static double backfill_scale(const struct top_gpu *g, enum top_metric m)
{
	switch (m) {
	case TM_MEM: return (g->have_raw & TOP_RAW_MEM_TOTAL) ? g->mem_total_bytes : 0;
	case TM_POWER: return (g->have_raw & TOP_RAW_POWER_LIMIT) ? g->power_limit_w : 0;
	case TM_TEMP: return TOP_TEMP_SCALE_C;
	case TM_CLOCK: return (g->have_raw & TOP_RAW_SM_CLOCK_MAX) ? g->sm_clock_max_hz : 0;
	case TM_PCIE: return g->pcie_peak_bps;
	default: return 1;
	}
}

int top_parse_backfill(struct top_backfill *b, const struct top_data *d, const char *body,
		       size_t len, double start_s, double step_s, unsigned n, char *err,
		       size_t errlen)
{
	json_t *root;
	b->ngpus = 0;
	b->n = n > TOP_HIST_LEN ? TOP_HIST_LEN : n;
	if (!(step_s > 0)) {
		str_errf(err, errlen, "/api/v1/query_range: step must be positive");
		return GPULSE_EINVAL;
	}
	json_t *data = load_data(body, len, "/api/v1/query_range", &root, err, errlen);
	if (!data)
		return GPULSE_EPARSE;
	for (int i = 0; i < d->ngpus && b->ngpus < TOP_GPU_MAX; i++) {
		int s = b->ngpus++;
		snprintf(b->uuid[s], sizeof b->uuid[s], "%s", d->gpus[i].uuid);
		for (int m = 0; m < TM_COUNT; m++)
			for (unsigned k = 0; k < b->n; k++)
				b->v[s][m][k] = NAN;
	}
	size_t i;
	json_t *sj;
	json_array_foreach(json_object_get(data, "result"), i, sj) {
		json_t *labels = json_object_get(sj, "metric");
		const char *name = json_string_value(json_object_get(labels, "__name__"));
		const char *uuid = json_string_value(json_object_get(labels, "uuid"));
		if (!name || !uuid)
			continue;
		int series = -1, gi = -1;
		for (int k = 0; k < BACKFILL_SERIES; k++)
			if (strcmp(name, field_table[backfill_series[k].f].metric) == 0)
				series = k;
		for (int k = 0; k < d->ngpus && k < b->ngpus; k++)
			if (strcmp(d->gpus[k].uuid, uuid) == 0)
				gi = k;
		if (series < 0 || gi < 0)
			continue;
		enum top_metric m = backfill_series[series].m;
		double scale = backfill_scale(&d->gpus[gi], m);
		if (!(scale > 0))
			continue;
		size_t k;
		json_t *pt;
		json_array_foreach(json_object_get(sj, "values"), k, pt) {
			double t = json_number_value(json_array_get(pt, 0));
			const char *vs = json_string_value(json_array_get(pt, 1));
			if (!json_is_number(json_array_get(pt, 0)) || !vs)
				continue;
			char *end = NULL;
			double v = strtod(vs, &end);
			double at = floor((t - start_s) / step_s + 0.5);
			if (end == vs || *end || !isfinite(v) || !(at >= 0 && at < b->n))
				continue;
			float *slot = &b->v[gi][m][(unsigned)at];
			double r = v / scale;
			r = r < 0 ? 0 : r;
			/* PCIe: the busier direction. */
			if (isnan(*slot) || r > *slot)
				*slot = (float)r;
		}
	}
	json_decref(root);
	return 0;
}

void top_history_seed(struct top_history *h, const struct top_backfill *b)
{
	for (int i = 0; i < b->ngpus; i++)
		history_slot(h, b->uuid[i]);
	unsigned own = h->count;
	unsigned total = b->n + own > TOP_HIST_LEN ? TOP_HIST_LEN : b->n + own;
	float series[2 * TOP_HIST_LEN];
	for (int s = 0; s < h->ngpus; s++) {
		int bi = -1;
		for (int i = 0; i < b->ngpus; i++)
			if (strcmp(b->uuid[i], h->uuid[s]) == 0)
				bi = i;
		for (int m = 0; m < TM_COUNT; m++) {
			/* Oldest first: the store's samples, then the ring's own. */
			unsigned k = 0;
			for (unsigned j = 0; j < b->n; j++)
				series[k++] = bi >= 0 ? b->v[bi][m][j] : NAN;
			for (unsigned j = own; j-- > 0;)
				series[k++] = (float)top_history_get(h, s, (enum top_metric)m, j);
			for (unsigned j = 0; j < total; j++)
				h->v[s][m][j] = series[k - total + j];
			for (unsigned j = total; j < TOP_HIST_LEN; j++)
				h->v[s][m][j] = NAN;
		}
	}
	h->count = total;
	h->head = total % TOP_HIST_LEN;
}

/* ---- the process list ----------------------------------------------------------- */

static const char *const sort_names[TOP_SORT_COUNT] = {
	[TOP_SORT_MEM] = "MEM", [TOP_SORT_SM] = "SM%", [TOP_SORT_PID] = "PID",
	[TOP_SORT_USER] = "USER", [TOP_SORT_GPU] = "GPU", [TOP_SORT_COMMAND] = "COMMAND",
	[TOP_SORT_KERNEL] = "KERNEL",
};

const char *top_sort_name(enum top_sort s)
{
	return s < TOP_SORT_COUNT ? sort_names[s] : "?";
}

static bool contains_ci(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return true;
	return n == 0;
}

static bool matches(const struct top_proc *p, const char *f)
{
	char pid[16];
	snprintf(pid, sizeof pid, "%u", p->pid);
	return contains_ci(pid, f) || contains_ci(p->user, f) || contains_ci(p->comm, f) ||
	       contains_ci(p->cmdline, f) || contains_ci(p->kernel, f) || contains_ci(p->owner, f);
}

struct sort_ctx {
	const struct top_data *d;
	enum top_sort key;
	bool reverse;
};

/* qsort has no context argument in C11; the view is built on one thread. */
static _Thread_local struct sort_ctx sort_ctx;

static int num_cmp(bool ha, double a, bool hb, double b, bool reverse)
{
	if (ha != hb)
		return ha ? -1 : 1; /* missing last, either way */
	if (!ha || a == b)
		return 0;
	int r = a > b ? -1 : 1;
	return reverse ? -r : r;
}

static int text_cmp(const char *a, const char *b, bool reverse)
{
	if (!a[0] != !b[0])
		return a[0] ? -1 : 1;
	int r = strcasecmp(a, b);
	return reverse ? -r : r;
}

static int proc_cmp(const void *pa, const void *pb)
{
	const struct top_proc *a = &sort_ctx.d->procs[*(const int *)pa];
	const struct top_proc *b = &sort_ctx.d->procs[*(const int *)pb];
	bool rev = sort_ctx.reverse;
	int r = 0;
	switch (sort_ctx.key) {
	case TOP_SORT_MEM: r = num_cmp(a->have_mem, a->used_bytes, b->have_mem, b->used_bytes, rev); break;
	case TOP_SORT_SM: r = num_cmp(a->have_sm, a->sm_ratio, b->have_sm, b->sm_ratio, rev); break;
	case TOP_SORT_KERNEL:
		r = num_cmp(a->have_kernel, a->kernel_share, b->have_kernel, b->kernel_share, rev);
		break;
	case TOP_SORT_PID:
		r = a->pid == b->pid ? 0 : (a->pid < b->pid) != rev ? -1 : 1;
		break;
	case TOP_SORT_GPU:
		r = a->gpu == b->gpu ? 0 : (a->gpu < b->gpu) != rev ? -1 : 1;
		break;
	case TOP_SORT_USER: r = text_cmp(a->user, b->user, rev); break;
	case TOP_SORT_COMMAND:
		r = text_cmp(a->cmdline[0] ? a->cmdline : a->comm, b->cmdline[0] ? b->cmdline : b->comm,
			     rev);
		break;
	default: break;
	}
	if (r)
		return r;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	return a->gpu < b->gpu ? -1 : a->gpu > b->gpu;
}

int top_procs_view(const struct top_data *d, const char *filter, enum top_sort key, bool reverse,
		   int *idx, int cap)
{
	int n = 0;
	for (int i = 0; i < d->nprocs && n < cap; i++)
		if (!filter || !filter[0] || matches(&d->procs[i], filter))
			idx[n++] = i;
	sort_ctx = (struct sort_ctx){d, key, reverse};
	qsort(idx, (size_t)n, sizeof *idx, proc_cmp);
	return n;
}

void top_procs_empty_text(const struct top_data *d, const char *filter, char *out, size_t outlen)
{
	if (filter && filter[0]) {
		snprintf(out, outlen, "no process matches the filter");
		return;
	}
	double count = 0;
	bool replay = false;
	for (int i = 0; i < d->ngpus; i++) {
		if (d->gpus[i].have_proc_count)
			count += d->gpus[i].proc_count;
		replay |= d->gpus[i].replay;
	}
	if (count > 0 && d->nprocs == 0)
		snprintf(out, outlen, "%.0f running on the GPUs (%s)", count,
			 replay ? "the recording has no process details" : "details not read");
	else
		snprintf(out, outlen, "no processes on the GPUs");
}

/* ---- text ------------------------------------------------------------------------ */

static const char *const eighths[9] = {"", "\u258f", "\u258e", "\u258d", "\u258c",
				       "\u258b", "\u258a", "\u2589", "\u2588"};

int top_bar(char *out, size_t outlen, int cells, double ratio, bool have, bool ascii)
{
	size_t o = 0;
	int full = 0;
	if (outlen == 0)
		return 0;
	out[0] = '\0';
	if (cells < 0)
		cells = 0;
	if (!have || !isfinite(ratio))
		ratio = 0;
	ratio = ratio < 0 ? 0 : ratio > 1 ? 1 : ratio;
	int units = have ? (int)floor(ratio * cells * 8 + 0.5) : 0;
	full = units / 8;
	int part = units % 8;
	for (int c = 0; c < cells; c++) {
		const char *s = " ";
		if (c < full)
			s = ascii ? "|" : eighths[8];
		else if (c == full && part)
			s = ascii ? (part >= 4 ? "|" : " ") : eighths[part];
		size_t n = strlen(s);
		if (o + n + 1 > outlen)
			break;
		memcpy(out + o, s, n);
		o += n;
	}
	out[o] = '\0';
	return full;
}

const char *top_graph_cell(double ratio, int row, int height, bool ascii)
{
	static const char *const blocks[9] = {" ", "\u2581", "\u2582", "\u2583", "\u2584",
					      "\u2585", "\u2586", "\u2587", "\u2588"};
	if (!isfinite(ratio) || height <= 0 || row < 0 || row >= height)
		return " ";
	ratio = ratio < 0 ? 0 : ratio > 1 ? 1 : ratio;
	/* Eighths of a cell filled from the bottom; a non-zero value shows
	 * at least one eighth, so "a little" never looks like nothing. */
	int units = (int)floor(ratio * height * 8 + 0.5);
	if (units == 0 && ratio > 0)
		units = 1;
	int from_bottom = height - 1 - row;
	int here = units - from_bottom * 8;
	if (here <= 0)
		return " ";
	if (here >= 8)
		return ascii ? "#" : blocks[8];
	return ascii ? "." : blocks[here];
}

void top_fit(char *out, size_t outlen, const char *src, int cols, bool right, bool ascii)
{
	char body[1024];
	size_t o = 0;
	int used = 0;
	bool cut = false;
	const unsigned char *p = (const unsigned char *)(src ? src : "");
	if (outlen == 0)
		return;
	if (cols < 0)
		cols = 0;
	while (*p) {
		size_t n = 1;
		int w = 1;
		char one[8];
		if (*p < 0x20 || *p == 0x7f) {
			one[0] = '?';
		} else if (*p < 0x80) {
			one[0] = (char)*p;
		} else if (ascii) {
			one[0] = '?';
			/* one '?' per character, not per byte */
			size_t l = utf8_seq_len(p);
			n = l ? l : 1;
		} else {
			size_t l = utf8_seq_len(p);
			wchar_t wc = 0;
			mbstate_t ms;
			memset(&ms, 0, sizeof ms);
			if (l == 0 || mbrtowc(&wc, (const char *)p, l, &ms) != l || (w = wcwidth(wc)) < 0) {
				one[0] = '?';
				w = 1;
				n = l ? l : 1;
			} else {
				memcpy(one, p, l);
				n = l;
			}
		}
		size_t olen = (*p >= 0x80 && !ascii && one[0] != '?') ? n : 1;
		if (used + w > cols || o + olen + 2 > sizeof body) {
			cut = true;
			break;
		}
		memcpy(body + o, one, olen);
		o += olen;
		used += w;
		p += n;
	}
	if (cut && cols > 0) {
		/* Take characters back until the "~" fits in the last column. */
		while (used > cols - 1 && o > 0) {
			size_t back = 1;
			while (back < o && ((unsigned char)body[o - back] & 0xC0) == 0x80)
				back++;
			wchar_t wc = 0;
			mbstate_t ms;
			memset(&ms, 0, sizeof ms);
			int w = 1;
			if ((unsigned char)body[o - back] >= 0x80 &&
			    mbrtowc(&wc, body + o - back, back, &ms) == back)
				w = wcwidth(wc) > 0 ? wcwidth(wc) : 1;
			o -= back;
			used -= w;
		}
		body[o++] = '~';
		used++;
	}
	body[o] = '\0';
	int pad = cols - used;
	snprintf(out, outlen, "%*s%s%*s", right ? pad : 0, "", body, right ? 0 : pad, "");
}

void top_fmt_bytes(char *out, size_t outlen, double bytes)
{
	static const char units[] = "BKMGTP";
	int u = 0;
	if (!isfinite(bytes) || bytes < 0)
		bytes = 0;
	while (bytes >= 1000 && u < 5) {
		bytes /= 1024;
		u++;
	}
	if (u > 0 && bytes < 9.95)
		snprintf(out, outlen, "%.1f%c", bytes, units[u]);
	else
		snprintf(out, outlen, "%.0f%c", bytes, units[u]);
}
