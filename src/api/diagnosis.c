/* /api/v1/diagnosis; see diagnosis.h. */
#include "api/diagnosis.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/duration.h"
#include "common/status.h"
#include "diagnose/diagnose_json.h"

/* The traced process with the most kernel time on GPU `gpu` over the
 * last two live windows, as an owner; false when none was traced. */
static bool traced_owner(struct api_diagnosis *d, const struct gpu_snapshot *s, struct buf *b,
			 bool first)
{
	struct profile_window_sum ps;
	double now = (double)clock_wall_ns() / 1e9, win = diag_live_window_s(d->diag);
	if (!d->trace_window ||
	    !d->trace_window(d->trace_ctx, s->id.index, now - 2 * win, now, &ps) || !ps.top_pid ||
	    !(ps.kernel_s > 0))
		return false;
	const char *comm = "";
	for (int i = 0; s->procs_valid && i < s->nprocs; i++)
		if (s->procs[i].pid == ps.top_pid)
			comm = s->procs[i].comm;
	if (!first)
		buf_putc(b, ',');
	buf_printf(b, "{\"gpu\":%d,\"pid\":%u,\"comm\":", s->id.index, ps.top_pid);
	buf_put_json_string(b, comm);
	buf_puts(b, ",\"basis\":\"traced_kernel_share\",\"value\":");
	buf_put_double(b, ps.top_kernel_s / ps.kernel_s);
	buf_printf(b, ",\"processes\":%u}", ps.processes);
	return true;
}

/* For each GPU, the process that owns its bottleneck: the largest memory
 * user under memory pressure (capacity first), else the process with the
 * most traced kernel time, else the largest SM user by NVML's
 * per-process utilization, else the largest memory user. */
static void render_owners(struct api_diagnosis *d, struct buf *b, int want_gpu)
{
	bool first = true;
	for (int g = 0; g < bus_gpu_count(d->bus); g++) {
		if (want_gpu >= 0 && g != want_gpu)
			continue;
		struct gpu_snapshot s;
		if (bus_read(d->bus, g, &s) != GPULSE_OK)
			continue;
		bool by_memory = s.diag_class >= 0 &&
				 (s.diag_findings & DIAG_FINDING_BIT(DIAG_FINDING_MEMORY_PRESSURE));
		if (!by_memory && traced_owner(d, &s, b, first)) {
			first = false;
			continue;
		}
		if (!s.procs_valid || s.nprocs == 0)
			continue;
		int best = -1;
		double best_v = -1;
		for (int pass = 0; pass < 2 && best < 0; pass++) {
			bool mem = by_memory || pass == 1;
			for (int i = 0; i < s.nprocs; i++) {
				const struct gpu_process *p = &s.procs[i];
				double v = mem ? (p->mem_valid ? (double)p->used_bytes : -1)
					       : (p->util_valid ? p->sm_ratio : -1);
				if (v > best_v) {
					best_v = v;
					best = i;
				}
			}
			if (best >= 0) {
				by_memory = mem;
				break;
			}
		}
		if (best < 0)
			continue;
		const struct gpu_process *p = &s.procs[best];
		if (!first)
			buf_putc(b, ',');
		first = false;
		buf_printf(b, "{\"gpu\":%d,\"pid\":%u,\"comm\":", s.id.index, p->pid);
		buf_put_json_string(b, p->comm);
		buf_printf(b, ",\"basis\":\"%s\",\"value\":", by_memory ? "gpu_memory_bytes"
									   : "sm_utilization_ratio");
		buf_put_double(b, best_v);
		buf_printf(b, ",\"processes\":%d}", s.nprocs);
	}
}

#define DIAG_API_MAX_WINDOWS 20000     /* windows of all GPUs in one answer */
#define DIAG_API_AUTO_WINDOWS 720      /* per GPU, when no window is asked for */
#define DIAG_API_TRANSITIONS 50        /* stored class changes per GPU */

/* A window for `since_s` of stored history: the shortest round length
 * that keeps it to DIAG_API_AUTO_WINDOWS windows. */
static double auto_window_s(double since_s, double live_s)
{
	static const double steps[] = {5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600,
				       7200, 21600, 43200, 86400};
	double want = fmax(live_s, since_s / DIAG_API_AUTO_WINDOWS);
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (steps[i] >= want)
			return steps[i];
	return ceil(want / 86400) * 86400;
}

/* /api/v1/diagnosis?gpu=N&since=10m&window=5s: the diagnosis of the last
 * `since`, in the document `gpulse diagnose --json` prints, inside the
 * API's envelope. Within the live history it classifies the held samples;
 * past it (with storage on) it reads the stored verdicts (history.h) and
 * adds each GPU's stored class changes with their whole evidence. */
static int handle_diagnosis(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_diagnosis *d = ctx;
	const char *gpu_arg = http_request_arg(req, "gpu");
	const char *since_arg = http_request_arg(req, "since");
	const char *window_arg = http_request_arg(req, "window");
	char msg[192];
	int want_gpu = -1;
	if (gpu_arg) {
		char *end;
		long g = strtol(gpu_arg, &end, 10);
		if (*gpu_arg == '\0' || *end || g < 0 || g >= GPU_MAX)
		{
			snprintf(msg, sizeof msg, "gpu: \"%.40s\" is not a GPU index", gpu_arg);
			return http_api_error(resp, 400, "bad_data", msg);
		}
		want_gpu = (int)g;
	}
	double history_s = diag_live_history_s(d->diag);
	int64_t since_ns = (int64_t)(history_s * 1e9), window_ns = 0;
	if (since_arg && (duration_parse_arg(since_arg, &since_ns) != 0 || since_ns <= 0)) {
		snprintf(msg, sizeof msg, "since: \"%.40s\" is not a duration (e.g. 10m, 30s)", since_arg);
		return http_api_error(resp, 400, "bad_data", msg);
	}
	if (window_arg && (duration_parse_arg(window_arg, &window_ns) != 0 ||
			   window_ns < NS_PER_SEC)) {
		snprintf(msg, sizeof msg, "window: \"%.40s\" is not a duration of 1s or more", window_arg);
		return http_api_error(resp, 400, "bad_data", msg);
	}
	double now_s = (double)clock_wall_ns() / 1e9;
	double since_len_s = (double)since_ns / 1e9;
	double since_s = now_s - since_len_s;
	struct diag_history *hist = atomic_load_explicit(d->hist, memory_order_acquire);
	bool from_store = hist && since_len_s > history_s;
	double window_s = window_ns ? (double)window_ns / 1e9
			  : from_store ? auto_window_s(since_len_s, diag_live_window_s(d->diag))
				       : diag_live_window_s(d->diag);
	int ngpus = want_gpu >= 0 ? 1 : bus_gpu_count(d->bus);
	size_t per_gpu = DIAG_API_MAX_WINDOWS / (size_t)(ngpus > 0 ? ngpus : 1);
	if (from_store && since_len_s / window_s > (double)per_gpu) {
		snprintf(msg, sizeof msg, "window: %.0f windows of %gs in since=%gs for %d GPU(s) is "
			 "over the limit of %d; ask for a window of at least %.0fs",
			 since_len_s / window_s, window_s, since_len_s, ngpus, DIAG_API_MAX_WINDOWS,
			 ceil(since_len_s / (double)per_gpu));
		return http_api_error(resp, 400, "bad_data", msg);
	}

	struct buf *b = &resp->body;
	resp->content_type = "application/json";
	buf_printf(b, "{\"status\":\"success\",\"data\":{\"source\":\"%s\",\"window_s\":",
		   from_store ? "store" : "memory");
	buf_put_double(b, window_s);
	buf_puts(b, ",\"history_s\":");
	buf_put_double(b, history_s);
	buf_puts(b, ",\"windows\":[");
	struct buf sums, pks, trans, tens;
	buf_init(&tens, d->max_body_bytes);
	buf_init(&sums, d->max_body_bytes);
	buf_init(&pks, d->max_body_bytes);
	buf_init(&trans, d->max_body_bytes);
	bool first = true, first_sum = true;
	int rc = 0;
	for (int g = 0; g < bus_gpu_count(d->bus) && !rc; g++) {
		if (want_gpu >= 0 && g != want_gpu)
			continue;
		struct diag_window *w = NULL;
		size_t n = 0;
		struct gpu_peaks pk;
		if (from_store) {
			struct gpu_snapshot snap;
			if (diag_live_peaks(d->diag, g, &pk) != GPULSE_OK ||
			    bus_read(d->bus, g, &snap) != GPULSE_OK ||
			    diag_history_read(hist, snap.id.index, since_s, now_s, window_s, per_gpu,
					      &pk, &w, &n) != GPULSE_OK || n == 0) {
				free(w);
				continue;
			}
			if (trans.len)
				buf_putc(&trans, ',');
			buf_printf(&trans, "{\"gpu\":%d,\"windows\":", snap.id.index);
			rc = diag_history_records_json(hist, snap.id.uuid, since_s, now_s,
						       DIAG_API_TRANSITIONS, &trans);
			buf_putc(&trans, '}');
		} else if (diag_live_windows(d->diag, g, since_s, window_s, &w, &n, &pk) != GPULSE_OK) {
			continue;
		}
		for (size_t k = 0; k < n && !rc; k++) {
			if (!first)
				buf_putc(b, ',');
			first = false;
			rc = diag_json_window(b, &w[k]);
			/* Who held the GPU in the window: one entry per window, in
			 * the windows' order. */
			if (tens.len)
				buf_putc(&tens, ',');
			if (d->window_tenants)
				d->window_tenants(d->tenants_ctx, &tens, w[k].gpu, w[k].start_s,
						  w[k].end_s, (int)w[k].bottleneck);
		}
		struct diag_summary sum;
		diagnose_summarize(w, n, &sum);
		free(w);
		if (!first_sum) {
			buf_putc(&sums, ',');
			buf_putc(&pks, ',');
		}
		first_sum = false;
		diag_json_summary(&sums, &sum);
		diag_json_peaks(&pks, g, &pk);
	}
	buf_puts(b, "],\"tenants\":[");
	buf_append(b, tens.data ? tens.data : "", tens.len);
	buf_puts(b, "],\"owners\":[");
	render_owners(d, b, want_gpu);
	buf_puts(b, "],\"summary\":[");
	buf_append(b, sums.data ? sums.data : "", sums.len);
	buf_puts(b, "],\"peaks\":[");
	buf_append(b, pks.data ? pks.data : "", pks.len);
	buf_puts(b, "],\"transitions\":[");
	buf_append(b, trans.data ? trans.data : "", trans.len);
	buf_puts(b, "]}}\n");
	bool failed = sums.failed || pks.failed || trans.failed || tens.failed;
	buf_free(&tens);
	buf_free(&sums);
	buf_free(&pks);
	buf_free(&trans);
	return rc ? rc : (b->failed || failed ? GPULSE_ELIMIT : 0);
}

int api_diagnosis_register(struct http_server *s, struct api_diagnosis *d)
{
	return http_route(s, "/api/v1/diagnosis", handle_diagnosis, d);
}
