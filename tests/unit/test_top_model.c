/* The model of `gpulse top` (src/cli/top/top_model.c), without a
 * terminal: the API answers parsed into rows (missing values stay
 * missing, injected processes merged with NVML's, each process's top
 * kernel and its share, alerts firing first, each GPU's latest diagnosis
 * window), bad input refused with the endpoint named, the history ring
 * (wrap, gaps, GPUs matched by uuid), sorting and filtering, and the text
 * helpers at several widths (bars, graph cells, column fitting). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "cli/top/top_fetch.h"
#include "cli/top/top_model.h"

static const char gpus_doc[] =
	"{\"status\":\"success\",\"data\":{\"mode\":\"replay\",\"detail\":\"x.csv\","
	"\"replay_speed\":4,\"gpus\":["
	"{\"gpu\":0,\"uuid\":\"GPU-a\",\"model\":\"NVIDIA H200\",\"source\":\"replay\","
	"\"health\":\"up\",\"max_sm_clock_hz\":2e9,\"pcie_max_gen\":5,\"pcie_max_width\":16,"
	"\"fields\":{\"gpu_util\":0.5,\"gpm_sm\":0.25,\"gpm_tensor\":0.125,\"gpm_dram\":1.5,"
	"\"mem_used\":1073741824,\"mem_total\":4294967296,\"power\":350,\"power_limit\":700,"
	"\"temp\":60,\"sm_clock\":1e9,\"gpm_pcie_tx\":3.938e9,\"gpm_pcie_rx\":1e9},"
	"\"throttle_reasons\":[\"gpu_idle\",\"sw_power_cap\"],"
	"\"processes\":[{\"pid\":100,\"comm\":\"py\\u001bthon\",\"uid\":1000,\"used_bytes\":2048,\"sm_ratio\":0.5,"
	"\"mem_ratio\":0.1,\"owner\":{\"pod\":\"trainer-0\",\"summary\":\"ml/trainer-0/main\"}},"
	"{\"pid\":200,\"comm\":\"b\",\"used_bytes\":null,\"sm_ratio\":null,\"owner\":null},"
	"{\"pid\":-4,\"comm\":\"bad\"},{\"comm\":\"nopid\"}],\"processes_dropped\":3},"
	"{\"gpu\":1,\"uuid\":\"GPU-b\",\"model\":\"NVIDIA H200\",\"health\":\"lost\","
	"\"health_reason\":\"GPU_IS_LOST\",\"fields\":{},"
	"\"processes\":[{\"pid\":100,\"comm\":\"python\",\"used_bytes\":4096}]}"
	"]}}";

/* GPU 0 shared: the split's parts per process and per owner. */
static const char tenants_doc[] =
	"{\"status\":\"success\",\"data\":{\"mode\":\"nvml\",\"gpus\":["
	"{\"gpu\":0,\"uuid\":\"GPU-a\",\"fields\":{\"gpm_tensor\":0.3},"
	"\"processes\":[{\"pid\":10,\"comm\":\"train\"},{\"pid\":11,\"comm\":\"etl\"}],"
	"\"tenants\":[{\"pid\":10,\"source\":\"kernels\",\"sm_active\":0.4,\"tensor_active\":0.29,"
	"\"dram_bandwidth\":0.05,\"bound\":\"compute_bound\",\"bound_detail\":\"tensor cores\"},"
	"{\"pid\":11,\"source\":\"nvml\",\"sm_active\":0.5,\"tensor_active\":0.01,"
	"\"dram_bandwidth\":null,\"bound\":\"memory_bound\",\"bound_detail\":\"DRAM bandwidth\"},"
	"{\"pid\":0,\"comm\":\"other\",\"sm_active\":0.1}],"
	"\"workloads\":[{\"owner\":{\"pod\":\"trainer-0\",\"namespace\":\"ml\"},"
	"\"summary\":\"ml/trainer-0\",\"processes\":1,\"busy\":0.45,"
	"\"sm_active\":0.4,\"tensor_active\":0.29,\"dram_bandwidth\":0.05,\"source\":\"kernels\","
	"\"bound\":\"compute_bound\",\"bound_detail\":\"tensor cores\"},"
	"{\"owner\":{\"pod\":\"idle-0\",\"namespace\":\"ml\",\"container\":\"main\"},"
	"\"summary\":\"ml/idle-0/main\",\"processes\":1,\"busy\":0,\"sm_active\":0,"
	"\"bound\":\"idle\",\"bound_detail\":\"\"},"
	"{\"owner\":{\"pod\":\"idle-0\",\"namespace\":\"dev\"},\"summary\":\"dev/idle-0\","
	"\"processes\":1,\"busy\":0.2,\"bound\":\"mixed\"},"
	"{\"owner\":{\"job\":\"4242\"},\"summary\":\"job 4242\",\"processes\":1},"
	"{\"owner\":{\"pod\":\"idle-0\",\"namespace\":\"ml\"},\"other\":true,"
	"\"summary\":\"\",\"processes\":2,\"busy\":0.5,\"sm_active\":0.6,\"bound\":\"mixed\","
	"\"bound_detail\":\"\"}],"
	"\"holders\":[{\"pod\":\"trainer-0\",\"namespace\":\"ml\",\"job\":\"\",\"allocated\":true,"
	"\"processes\":1,\"sm_active\":0.4,\"idle_for_s\":0,\"idle\":false},"
	"{\"pod\":\"idle-0\",\"namespace\":\"ml\",\"job\":\"\",\"allocated\":true,"
	"\"processes\":1,\"sm_active\":0,\"idle_for_s\":612.5,\"idle\":true},"
	"{\"pod\":\"notebook-3\",\"namespace\":\"research\",\"job\":\"\",\"allocated\":true,"
	"\"processes\":0,\"sm_active\":0,\"idle_for_s\":30,\"idle\":true},"
	"{\"pod\":\"\",\"namespace\":\"\",\"job\":\"4242\",\"job_user\":\"alice\","
	"\"allocated\":false,\"processes\":1,\"sm_active\":null,\"idle_for_s\":null,\"idle\":null},"
	"{\"pod\":\"x\\u001by\",\"namespace\":\"ns\",\"allocated\":false,\"processes\":-3,"
	"\"idle_for_s\":-1,\"idle\":\"yes\"},7]}]}}";

static const char procs_doc[] =
	"{\"status\":\"success\",\"data\":{\"profiling\":{\"enabled\":true,\"serving\":true},"
	"\"processes\":[{\"pid\":100,\"uid\":1000,\"comm\":\"python\",\"cmdline\":\"python train.py\","
	"\"connected\":true,\"gpus\":[{\"gpu\":0,\"kernel_seconds\":6},{\"gpu\":2}]},"
	"{\"pid\":300,\"uid\":0,\"comm\":\"bench\",\"cmdline\":\"bench --x\",\"connected\":true,"
	"\"gpus\":[]}]}}";

static const char kernels_doc[] =
	"{\"status\":\"success\",\"data\":{\"kernels\":["
	"{\"pid\":100,\"gpu\":0,\"kernel\":\"gemm\",\"other\":false,\"seconds\":3},"
	"{\"pid\":100,\"gpu\":1,\"kernel\":\"conv\",\"other\":false,\"seconds\":2},"
	"{\"pid\":100,\"gpu\":0,\"kernel\":\"softmax\",\"other\":false,\"seconds\":1},"
	"{\"pid\":300,\"gpu\":0,\"kernel\":\"\",\"other\":true,\"seconds\":0.5},"
	"{\"pid\":999,\"gpu\":0,\"kernel\":\"ghost\",\"seconds\":9}],\"total\":5}}";

static const char alerts_doc[] =
	"{\"status\":\"success\",\"data\":{\"alerts\":["
	"{\"labels\":{\"alertname\":\"Pend\",\"gpu\":\"0\"},\"annotations\":{\"summary\":\"p\"},"
	"\"state\":\"pending\",\"activeAt\":\"2026-01-01T00:00:00Z\"},"
	"{\"labels\":{\"alertname\":\"Late\",\"severity\":\"critical\"},\"annotations\":{},"
	"\"state\":\"firing\",\"activeAt\":\"2026-01-01T00:10:00Z\"},"
	"{\"labels\":{\"alertname\":\"Early\"},\"annotations\":{\"description\":\"d\"},"
	"\"state\":\"firing\",\"activeAt\":\"2026-01-01T00:05:00+01:00\"},"
	"{\"labels\":{\"alertname\":\"Gone\"},\"state\":\"inactive\"}]}}";

static const char diag_doc[] =
	"{\"status\":\"success\",\"data\":{\"windows\":["
	"{\"gpu\":0,\"end_s\":100,\"bottleneck\":\"idle\",\"findings\":[],\"advice\":\"old\"},"
	"{\"gpu\":0,\"end_s\":105,\"bottleneck\":\"memory_bound\",\"findings\":[\"power_capped\","
	"\"memory_pressure\"],\"advice\":\"fuse kernels\"},"
	"{\"gpu\":0,\"end_s\":95,\"bottleneck\":\"compute_bound\",\"advice\":\"older\"},"
	"{\"gpu\":7,\"end_s\":105,\"bottleneck\":\"idle\"}]}}";

static struct top_data *load_all(void)
{
	struct top_data *d = calloc(1, sizeof *d);
	char err[256];
	assert_non_null(d);
	assert_int_equal(top_parse_gpus(d, gpus_doc, strlen(gpus_doc), err, sizeof err), 0);
	assert_int_equal(top_parse_processes(d, procs_doc, strlen(procs_doc), err, sizeof err), 0);
	assert_int_equal(top_parse_kernels(d, kernels_doc, strlen(kernels_doc), err, sizeof err), 0);
	assert_int_equal(top_parse_alerts(d, alerts_doc, strlen(alerts_doc), err, sizeof err), 0);
	assert_int_equal(top_parse_diagnosis(d, diag_doc, strlen(diag_doc), err, sizeof err), 0);
	return d;
}

static const struct top_proc *proc(const struct top_data *d, uint32_t pid, int gpu)
{
	for (int i = 0; i < d->nprocs; i++)
		if (d->procs[i].pid == pid && d->procs[i].gpu == gpu)
			return &d->procs[i];
	return NULL;
}

static void test_parse_tenants(void **state)
{
	(void)state;
	struct top_data *d = calloc(1, sizeof *d);
	char err[256];
	assert_non_null(d);
	assert_int_equal(top_parse_gpus(d, tenants_doc, strlen(tenants_doc), err, sizeof err), 0);
	const struct top_proc *a = proc(d, 10, 0), *b = proc(d, 11, 0);
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(a->have_act, 7);
	assert_true(fabs(a->act[TOP_ACT_TENSOR] - 0.29) < 1e-12);
	assert_string_equal(a->source, "kernels");
	assert_string_equal(a->bound, "compute_bound (tensor cores)");
	/* A null part is missing, never zero. */
	assert_int_equal(b->have_act, 1u << TOP_ACT_SM | 1u << TOP_ACT_TENSOR);
	assert_string_equal(b->source, "nvml");
	assert_int_equal(d->nworkloads, 7);
	const struct top_workload *w = d->workloads;
	assert_string_equal(w[0].owner, "ml/trainer-0");
	assert_int_equal(w[0].processes, 1);
	assert_string_equal(w[0].bound, "compute_bound (tensor cores)");
	assert_true(w[0].have_busy);
	/* The holders' verdicts onto the owners they name: trainer-0 works;
	 * idle-0 of ml (by its container's row too) is allocated but idle, and
	 * since when; idle-0 of dev is another pod; the job's is unjudged. */
	assert_int_equal(w[0].idle, TOP_IDLE_WORKING);
	assert_true(w[0].allocated && !w[0].held_only);
	assert_true(w[0].idle_for_s == 0);
	assert_int_equal(w[1].idle, TOP_IDLE_IDLE);
	assert_true(w[1].idle_for_s == 612.5);
	assert_int_equal(w[2].idle, TOP_IDLE_NONE);
	assert_true(isnan(w[2].idle_for_s));
	assert_int_equal(w[3].idle, TOP_IDLE_UNJUDGED);
	assert_false(w[3].allocated);
	/* The "other" group is nobody's, whatever its labels read. */
	assert_string_equal(w[4].bound, "mixed");
	assert_int_equal(w[4].have_act, 1u << TOP_ACT_SM);
	assert_int_equal(w[4].idle, TOP_IDLE_NONE);
	/* A pod holding the GPU with nothing there: a row of its own. */
	assert_true(w[5].held_only && w[5].allocated);
	assert_string_equal(w[5].owner, "research/notebook-3");
	assert_int_equal(w[5].processes, 0);
	assert_false(w[5].have_busy);
	assert_int_equal(w[5].have_act, 1u << TOP_ACT_SM);
	assert_int_equal(w[5].idle, TOP_IDLE_IDLE);
	assert_true(w[5].idle_for_s == 30);
	/* A holder of odd shape: cleaned, nothing made up. */
	assert_true(w[6].held_only && !w[6].allocated);
	assert_string_equal(w[6].owner, "ns/x?y");
	assert_int_equal(w[6].processes, 0);
	assert_int_equal(w[6].have_act, 0);
	assert_int_equal(w[6].idle, TOP_IDLE_UNJUDGED);
	assert_true(isnan(w[6].idle_for_s));
	/* A second answer starts afresh. */
	assert_int_equal(top_parse_gpus(d, gpus_doc, strlen(gpus_doc), err, sizeof err), 0);
	assert_int_equal(d->nworkloads, 0);
	free(d);
}

static void test_parse_gpus(void **state)
{
	(void)state;
	struct top_data *d = load_all();
	assert_string_equal(d->mode, "replay");
	assert_true(d->replay_speed == 4);
	assert_int_equal(d->ngpus, 2);
	const struct top_gpu *g = &d->gpus[0];
	assert_true(g->replay);
	assert_true(fabs(g->ratio[TM_UTIL] - 0.5) < 1e-12);
	assert_true(fabs(g->ratio[TM_SM] - 0.25) < 1e-12);
	assert_true(fabs(g->ratio[TM_MEM] - 0.25) < 1e-12);
	assert_true(fabs(g->ratio[TM_POWER] - 0.5) < 1e-12);
	assert_true(fabs(g->ratio[TM_TEMP] - 0.6) < 1e-12);
	assert_true(fabs(g->ratio[TM_CLOCK] - 0.5) < 1e-12);
	/* The busier direction against gen 5 x16's peak per direction. */
	assert_true(fabs(g->ratio[TM_PCIE] - 3.938e9 / top_pcie_peak_bps(5, 16)) < 1e-12);
	assert_true(fabs(g->ratio[TM_DRAM] - 1.5) < 1e-12); /* kept; the bar clamps */
	assert_int_equal(g->have, (1u << TM_COUNT) - 1);
	assert_string_equal(g->throttle, "sw_power_cap"); /* idle is not a hold-down */
	/* The lost GPU: no field read, so no bar has a value, none is zero. */
	const struct top_gpu *l = &d->gpus[1];
	assert_int_equal(l->have, 0);
	assert_int_equal(l->have_raw, 0);
	assert_string_equal(l->health, "lost");
	assert_string_equal(l->health_reason, "GPU_IS_LOST");
	/* Processes: bad pids dropped, control bytes made '?', nulls missing. */
	const struct top_proc *p = proc(d, 100, 0);
	assert_non_null(p);
	assert_string_equal(p->comm, "py?thon");
	assert_true(p->have_uid && p->uid == 1000); /* the owner /api/v1/gpus gives */
	assert_true(p->have_mem && p->used_bytes == 2048);
	assert_true(p->have_sm && p->sm_ratio == 0.5);
	assert_string_equal(p->owner, "ml/trainer-0/main");   /* attribution's summary */
	int idx[8];
	assert_int_equal(top_procs_view(d, "TRAINER", TOP_SORT_PID, false, idx, 8), 1);
	p = proc(d, 200, 0);
	assert_non_null(p);
	assert_string_equal(p->owner, "");
	assert_false(p->have_uid);
	assert_false(p->have_mem);
	assert_false(p->have_sm);
	assert_non_null(proc(d, 100, 1));
	assert_int_equal(d->procs_dropped, 3);
	free(d);
}

static void test_parse_injected_and_kernels(void **state)
{
	(void)state;
	struct top_data *d = load_all();
	assert_true(d->profiling);
	/* pid 100 is on GPUs 0 and 1 (NVML) and 2 (the library only). */
	const struct top_proc *p0 = proc(d, 100, 0), *p1 = proc(d, 100, 1), *p2 = proc(d, 100, 2);
	assert_non_null(p0);
	assert_non_null(p1);
	assert_non_null(p2);
	assert_true(p0->injected && p1->injected && p2->injected);
	assert_true(p0->have_uid && p0->uid == 1000);
	assert_string_equal(p0->cmdline, "python train.py");
	/* Top kernel per GPU: gemm is 3 of pid 100's 6 s of kernel time on
	 * GPU 0 (/api/v1/processes); on GPU 1 that time is not given, so the
	 * rows' sum stands in: conv is all of it. */
	assert_true(p0->have_kernel);
	assert_string_equal(p0->kernel, "gemm");
	assert_true(fabs(p0->kernel_share - 0.5) < 1e-12);
	assert_true(p1->have_kernel);
	assert_string_equal(p1->kernel, "conv");
	assert_true(fabs(p1->kernel_share - 1.0) < 1e-12);
	assert_false(p2->have_kernel);
	/* A connected process on no GPU yet gets one row; its folded
	 * kernels are named as such. */
	const struct top_proc *b = proc(d, 300, -1);
	assert_non_null(b);
	assert_string_equal(b->comm, "bench");
	assert_string_equal(b->kernel, "(other kernels)");
	/* pid 999 is not listed anywhere: no row is made for a kernel. */
	for (int i = 0; i < d->nprocs; i++)
		assert_int_not_equal(d->procs[i].pid, 999);
	assert_false(proc(d, 200, 0)->injected);
	free(d);
}

static void test_parse_alerts_and_diagnosis(void **state)
{
	(void)state;
	struct top_data *d = load_all();
	assert_int_equal(d->nfiring, 2);
	assert_int_equal(d->npending, 1);
	assert_int_equal(d->nalerts, 3);
	/* Firing first, the longest-standing first: 00:05+01:00 is 23:05Z. */
	assert_string_equal(d->alerts[0].name, "Early");
	assert_string_equal(d->alerts[0].summary, "d");
	assert_string_equal(d->alerts[1].name, "Late");
	assert_string_equal(d->alerts[1].severity, "critical");
	assert_string_equal(d->alerts[2].name, "Pend");
	assert_string_equal(d->alerts[2].gpu, "0");
	assert_true(d->alerts[0].active_at < d->alerts[1].active_at);
	/* The latest window of GPU 0, whatever the order. */
	const struct top_gpu *g = &d->gpus[0];
	assert_true(g->have_diag);
	assert_string_equal(g->bottleneck, "memory_bound");
	assert_string_equal(g->findings, "power_capped,memory_pressure");
	assert_string_equal(g->advice, "fuse kernels");
	assert_false(d->gpus[1].have_diag);
	free(d);
}

static void test_parse_errors(void **state)
{
	(void)state;
	struct top_data *d = calloc(1, sizeof *d);
	char err[256];
	static const char *const bad[] = {"", "not json", "[]", "{\"data\":[]}",
					  "{\"status\":\"success\",\"data\":{}}",
					  "{\"data\":{\"gpus\":{}}}"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		assert_int_equal(top_parse_gpus(d, bad[i], strlen(bad[i]), err, sizeof err),
				 GPULSE_EPARSE);
		assert_non_null(strstr(err, "/api/v1/gpus"));
	}
	assert_int_equal(top_parse_alerts(d, "{", 1, err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "/api/v1/alerts"));
	assert_int_equal(top_parse_kernels(d, "7", 1, err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "/api/v1/kernels"));
	/* Wrong types inside a valid envelope are skipped, not fatal. */
	const char odd[] = "{\"data\":{\"gpus\":[1,\"x\",{\"gpu\":\"0\",\"fields\":[]}]}}";
	assert_int_equal(top_parse_gpus(d, odd, strlen(odd), err, sizeof err), 0);
	assert_int_equal(d->ngpus, 1);
	assert_int_equal(d->gpus[0].index, -1);
	assert_int_equal(d->gpus[0].have, 0);
	free(d);
}

/* The empty process table says what gpulse status says: a replay's
 * recorded count without a list is "1 running", never "no processes". */
static void test_procs_empty_text(void **state)
{
	(void)state;
	struct top_data *d = calloc(1, sizeof *d);
	char err[256], text[128];
	const char replay[] = "{\"data\":{\"gpus\":[{\"gpu\":0,\"source\":\"replay\","
			      "\"fields\":{\"proc_count\":1},\"processes\":[]}]}}";
	assert_int_equal(top_parse_gpus(d, replay, strlen(replay), err, sizeof err), 0);
	assert_true(d->gpus[0].have_proc_count);
	top_procs_empty_text(d, "", text, sizeof text);
	assert_string_equal(text, "1 running on the GPUs (the recording has no process details)");
	top_procs_empty_text(d, "python", text, sizeof text);
	assert_string_equal(text, "no process matches the filter");
	const char live[] = "{\"data\":{\"gpus\":[{\"gpu\":0,\"fields\":{\"proc_count\":2}},"
			    "{\"gpu\":1,\"fields\":{\"proc_count\":1}}]}}";
	assert_int_equal(top_parse_gpus(d, live, strlen(live), err, sizeof err), 0);
	top_procs_empty_text(d, NULL, text, sizeof text);
	assert_string_equal(text, "3 running on the GPUs (details not read)");
	const char none[] = "{\"data\":{\"gpus\":[{\"gpu\":0,\"fields\":{\"proc_count\":0}}]}}";
	assert_int_equal(top_parse_gpus(d, none, strlen(none), err, sizeof err), 0);
	top_procs_empty_text(d, NULL, text, sizeof text);
	assert_string_equal(text, "no processes on the GPUs");
	free(d);
}

static void test_parse_bounds(void **state)
{
	(void)state;
	/* More processes than TOP_PROC_MAX: kept up to the bound, counted. */
	size_t cap = 64 + (TOP_PROC_MAX + 10) * 40;
	char *doc = malloc(cap);
	assert_non_null(doc);
	size_t o = (size_t)snprintf(doc, cap, "{\"data\":{\"gpus\":[{\"gpu\":0,\"processes\":[");
	for (int i = 0; i < TOP_PROC_MAX + 10; i++)
		o += (size_t)snprintf(doc + o, cap - o, "%s{\"pid\":%d}", i ? "," : "", i + 1);
	o += (size_t)snprintf(doc + o, cap - o, "]}]}}");
	struct top_data *d = calloc(1, sizeof *d);
	char err[256];
	assert_int_equal(top_parse_gpus(d, doc, o, err, sizeof err), 0);
	assert_int_equal(d->nprocs, TOP_PROC_MAX);
	assert_int_equal(d->procs_dropped, 10);
	free(doc);
	free(d);
}

static void test_history(void **state)
{
	(void)state;
	struct top_history *h = calloc(1, sizeof *h);
	struct top_data *d = calloc(1, sizeof *d);
	assert_non_null(h);
	assert_non_null(d);
	top_history_init(h);
	d->ngpus = 1;
	snprintf(d->gpus[0].uuid, sizeof d->gpus[0].uuid, "GPU-a");
	for (int i = 0; i < TOP_HIST_LEN + 5; i++) {
		d->gpus[0].have = 1u << TM_UTIL;
		d->gpus[0].ratio[TM_UTIL] = (i % 100) / 100.0;
		top_history_push(h, d);
	}
	int s = top_history_find(h, "GPU-a");
	assert_int_equal(s, 0);
	assert_int_equal(h->count, TOP_HIST_LEN);
	int last = TOP_HIST_LEN + 4;
	assert_true(fabs(top_history_get(h, s, TM_UTIL, 0) - (last % 100) / 100.0) < 1e-6);
	assert_true(fabs(top_history_get(h, s, TM_UTIL, 7) - ((last - 7) % 100) / 100.0) < 1e-6);
	assert_true(isnan(top_history_get(h, s, TM_UTIL, TOP_HIST_LEN))); /* older than kept */
	assert_true(isnan(top_history_get(h, s, TM_SM, 0)));              /* never read */
	/* A gap, then a second GPU appears first in the list: each keeps its own. */
	top_history_push_gap(h);
	assert_true(isnan(top_history_get(h, s, TM_UTIL, 0)));
	assert_true(fabs(top_history_get(h, s, TM_UTIL, 1) - (last % 100) / 100.0) < 1e-6);
	d->ngpus = 2;
	d->gpus[1] = d->gpus[0];
	snprintf(d->gpus[0].uuid, sizeof d->gpus[0].uuid, "GPU-b");
	d->gpus[0].ratio[TM_UTIL] = 0.9;
	d->gpus[1].ratio[TM_UTIL] = 0.1;
	top_history_push(h, d);
	int sb = top_history_find(h, "GPU-b");
	assert_int_equal(sb, 1);
	assert_true(fabs(top_history_get(h, sb, TM_UTIL, 0) - 0.9) < 1e-6);
	assert_true(isnan(top_history_get(h, sb, TM_UTIL, 1))); /* no past of its own */
	assert_true(fabs(top_history_get(h, s, TM_UTIL, 0) - 0.1) < 1e-6);
	assert_true(isnan(top_history_get(h, 5, TM_UTIL, 0)));
	free(h);
	free(d);
}

static void test_sort_filter(void **state)
{
	(void)state;
	struct top_data *d = calloc(1, sizeof *d);
	assert_non_null(d);
	struct {
		uint32_t pid;
		const char *user, *comm;
		double mem;
		bool have_mem;
		double sm;
	} rows[] = {
		{30, "bob", "trainer", 300, true, 0.1},
		{10, "alice", "infer", 100, true, 0.9},
		{20, "carol", "Trainer2", 0, false, 0.5},
		{40, "alice", "notebook", 200, true, 0.2},
	};
	for (int i = 0; i < 4; i++) {
		struct top_proc *p = &d->procs[d->nprocs++];
		p->pid = rows[i].pid;
		p->gpu = 0;
		snprintf(p->user, sizeof p->user, "%s", rows[i].user);
		snprintf(p->comm, sizeof p->comm, "%s", rows[i].comm);
		p->have_mem = rows[i].have_mem;
		p->used_bytes = rows[i].mem;
		p->have_sm = true;
		p->sm_ratio = rows[i].sm;
	}
	int idx[8];
	int n = top_procs_view(d, NULL, TOP_SORT_MEM, false, idx, 8);
	assert_int_equal(n, 4);
	/* Largest first, the missing one last. */
	assert_int_equal(d->procs[idx[0]].pid, 30);
	assert_int_equal(d->procs[idx[1]].pid, 40);
	assert_int_equal(d->procs[idx[2]].pid, 10);
	assert_int_equal(d->procs[idx[3]].pid, 20);
	/* Reversed: smallest first, the missing one still last. */
	n = top_procs_view(d, "", TOP_SORT_MEM, true, idx, 8);
	assert_int_equal(d->procs[idx[0]].pid, 10);
	assert_int_equal(d->procs[idx[3]].pid, 20);
	n = top_procs_view(d, NULL, TOP_SORT_SM, false, idx, 8);
	assert_int_equal(d->procs[idx[0]].pid, 10);
	assert_int_equal(d->procs[idx[3]].pid, 30);
	n = top_procs_view(d, NULL, TOP_SORT_PID, false, idx, 8);
	for (int i = 0; i < 4; i++)
		assert_int_equal(d->procs[idx[i]].pid, (uint32_t)(10 * (i + 1)));
	n = top_procs_view(d, NULL, TOP_SORT_USER, false, idx, 8);
	assert_int_equal(d->procs[idx[0]].pid, 10); /* alice, ties by pid */
	assert_int_equal(d->procs[idx[1]].pid, 40);
	assert_int_equal(d->procs[idx[3]].pid, 20); /* carol */
	/* Filter: case-insensitive over command, user and pid. */
	n = top_procs_view(d, "TRAINER", TOP_SORT_PID, false, idx, 8);
	assert_int_equal(n, 2);
	assert_int_equal(d->procs[idx[0]].pid, 20);
	assert_int_equal(d->procs[idx[1]].pid, 30);
	n = top_procs_view(d, "alice", TOP_SORT_PID, false, idx, 8);
	assert_int_equal(n, 2);
	n = top_procs_view(d, "40", TOP_SORT_PID, false, idx, 8);
	assert_int_equal(n, 1);
	assert_int_equal(d->procs[idx[0]].pid, 40);
	n = top_procs_view(d, "nothing-matches", TOP_SORT_PID, false, idx, 8);
	assert_int_equal(n, 0);
	/* The cap bounds the view. */
	n = top_procs_view(d, NULL, TOP_SORT_PID, false, idx, 2);
	assert_int_equal(n, 2);
	free(d);
}

/* Terminal columns of UTF-8 text (each character here is one column). */
static int columns(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xC0) != 0x80;
	return n;
}

static void test_bar(void **state)
{
	(void)state;
	char out[512];
	for (int w = 0; w <= 40; w += 5) {
		for (int k = 0; k <= 8; k++) {
			double r = k / 8.0;
			int full = top_bar(out, sizeof out, w, r, true, false);
			assert_int_equal(columns(out), w);
			assert_int_equal(full, (int)floor(r * w * 8 + 0.5) / 8);
			full = top_bar(out, sizeof out, w, r, true, true);
			assert_int_equal((int)strlen(out), w);
			for (const char *p = out; *p; p++)
				assert_true(*p == '|' || *p == ' ');
		}
	}
	/* Half of 10 cells: five full blocks, then spaces. */
	top_bar(out, sizeof out, 10, 0.5, true, false);
	assert_string_equal(out, "\u2588\u2588\u2588\u2588\u2588     ");
	/* 0.55 of 10: five full and a half-cell block. */
	top_bar(out, sizeof out, 10, 0.55, true, false);
	assert_string_equal(out, "\u2588\u2588\u2588\u2588\u2588\u258c    ");
	top_bar(out, sizeof out, 4, 0.5, true, true);
	assert_string_equal(out, "||  ");
	/* Out of range clamps; missing is blank, never a zero-looking bar. */
	top_bar(out, sizeof out, 4, 7, true, true);
	assert_string_equal(out, "||||");
	top_bar(out, sizeof out, 4, -1, true, true);
	assert_string_equal(out, "    ");
	assert_int_equal(top_bar(out, sizeof out, 4, 0.9, false, true), 0);
	assert_string_equal(out, "    ");
	top_bar(out, sizeof out, 4, NAN, true, false);
	assert_string_equal(out, "    ");
	/* A small buffer cuts on a character, and ends in NUL. */
	top_bar(out, 8, 10, 1, true, false);
	assert_int_equal(strlen(out), 6);
}

static void test_graph_cell(void **state)
{
	(void)state;
	/* A full column is full blocks; half of 4 rows fills the bottom 2. */
	for (int r = 0; r < 4; r++)
		assert_string_equal(top_graph_cell(1, r, 4, true), "#");
	assert_string_equal(top_graph_cell(0.5, 0, 4, true), " ");
	assert_string_equal(top_graph_cell(0.5, 1, 4, true), " ");
	assert_string_equal(top_graph_cell(0.5, 2, 4, true), "#");
	assert_string_equal(top_graph_cell(0.5, 3, 4, true), "#");
	/* 0.5 of 1 row: the lower half block. */
	assert_string_equal(top_graph_cell(0.5, 0, 1, false), "\u2584");
	/* Any value above zero shows; zero and NAN do not. */
	assert_string_equal(top_graph_cell(0.001, 3, 4, false), "\u2581");
	assert_string_equal(top_graph_cell(0.001, 3, 4, true), ".");
	assert_string_equal(top_graph_cell(0, 3, 4, false), " ");
	assert_string_equal(top_graph_cell(NAN, 3, 4, false), " ");
	assert_string_equal(top_graph_cell(1, 7, 4, false), " "); /* outside the graph */
}

static void test_fit(void **state)
{
	(void)state;
	char out[256];
	top_fit(out, sizeof out, "abc", 6, false, true);
	assert_string_equal(out, "abc   ");
	top_fit(out, sizeof out, "abc", 6, true, true);
	assert_string_equal(out, "   abc");
	top_fit(out, sizeof out, "abcdefgh", 5, false, true);
	assert_string_equal(out, "abcd~");
	top_fit(out, sizeof out, "abc", 0, false, true);
	assert_string_equal(out, "");
	top_fit(out, sizeof out, "a\x1b[31mb", 8, false, true);
	assert_string_equal(out, "a?[31mb ");
	/* ASCII: one '?' per character beyond ASCII, invalid bytes too. */
	top_fit(out, sizeof out, "h\xc3\xa9llo\xff", 8, false, true);
	assert_string_equal(out, "h?llo?  ");
	/* UTF-8: measured in columns, a wide character is two, bad bytes '?'. */
	top_fit(out, sizeof out, "h\xc3\xa9llo", 6, false, false);
	assert_string_equal(out, "h\xc3\xa9llo ");
	top_fit(out, sizeof out, "\xe5\xad\x97\xe5\xad\x97x", 4, false, false);
	assert_string_equal(out, "\xe5\xad\x97~ ");
	top_fit(out, sizeof out, "a\xff", 3, false, false);
	assert_string_equal(out, "a? ");
	top_fit(out, sizeof out, NULL, 2, false, false);
	assert_string_equal(out, "  ");
}

static void test_fmt_and_url(void **state)
{
	(void)state;
	char out[32];
	top_fmt_bytes(out, sizeof out, 512);
	assert_string_equal(out, "512B");
	top_fmt_bytes(out, sizeof out, 1536);
	assert_string_equal(out, "1.5K");
	top_fmt_bytes(out, sizeof out, 9525.0 * 1048576);
	assert_string_equal(out, "9.3G");
	top_fmt_bytes(out, sizeof out, 143771.0 * 1048576);
	assert_string_equal(out, "140G");
	top_fmt_bytes(out, sizeof out, -5);
	assert_string_equal(out, "0B");
	assert_true(top_pcie_peak_bps(5, 16) > top_pcie_peak_bps(4, 16));
	assert_true(top_pcie_peak_bps(0, 16) == 0);
	assert_true(top_pcie_peak_bps(5, 0) == 0);
	assert_true(top_pcie_peak_bps(99, 16) == 0);
	assert_true(top_url_is_local("http://127.0.0.1:9401"));
	assert_true(top_url_is_local("https://localhost/"));
	assert_true(top_url_is_local("http://[::1]:9401"));
	assert_true(top_url_is_local("http://user:pw@127.0.0.2:1"));
	assert_false(top_url_is_local("http://gpu-node-7:9401"));
	assert_false(top_url_is_local("http://localhost.example.com:9401"));
	assert_false(top_url_is_local("http://10.0.0.1/127.0.0.1"));
	assert_false(top_url_is_local(NULL));
}

static void test_backfill(void **state)
{
	(void)state;
	struct top_data *d = load_all();
	struct top_backfill *b = calloc(1, sizeof *b);
	struct top_history *h = calloc(1, sizeof *h);
	char q[1024], err[256];
	assert_non_null(b);
	assert_non_null(h);
	top_backfill_query(q, sizeof q);
	assert_non_null(strstr(q, "{__name__=~\"gpulse_gpu_utilization_ratio|"));
	assert_non_null(strstr(q, "gpulse_gpu_power_watts"));
	assert_non_null(strstr(q, "gpulse_gpu_pcie_rx_bytes_per_second\"}"));
	/* Steps at 1000, 1001, 1002; GPU-a's power limit is 700 W and its
	 * memory 4 GiB; a point off the grid or past the end is dropped, and
	 * PCIe takes the busier direction. */
	const char doc[] =
		"{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":["
		"{\"metric\":{\"__name__\":\"gpulse_gpu_power_watts\",\"uuid\":\"GPU-a\"},"
		"\"values\":[[1000,\"350\"],[1002,\"700\"],[1009,\"1\"],[1001,\"x\"]]},"
		"{\"metric\":{\"__name__\":\"gpulse_gpu_memory_used_bytes\",\"uuid\":\"GPU-a\"},"
		"\"values\":[[1001,\"1073741824\"]]},"
		"{\"metric\":{\"__name__\":\"gpulse_gpu_pcie_tx_bytes_per_second\",\"uuid\":\"GPU-a\"},"
		"\"values\":[[1000,\"1e9\"],[1001,\"3e9\"]]},"
		"{\"metric\":{\"__name__\":\"gpulse_gpu_pcie_rx_bytes_per_second\",\"uuid\":\"GPU-a\"},"
		"\"values\":[[1000,\"2e9\"],[1001,\"1e9\"]]},"
		"{\"metric\":{\"__name__\":\"gpulse_gpu_utilization_ratio\",\"uuid\":\"GPU-zzz\"},"
		"\"values\":[[1000,\"1\"]]},"
		"{\"metric\":{\"__name__\":\"gpulse_gpu_power_watts\",\"uuid\":\"GPU-b\"},"
		"\"values\":[[1000,\"100\"]]}]}}";
	assert_int_equal(top_parse_backfill(b, d, doc, strlen(doc), 1000, 1, 3, err, sizeof err), 0);
	assert_int_equal(b->n, 3);
	assert_int_equal(b->ngpus, 2);
	assert_true(fabs(b->v[0][TM_POWER][0] - 0.5) < 1e-6);
	assert_true(isnan(b->v[0][TM_POWER][1]));
	assert_true(fabs(b->v[0][TM_POWER][2] - 1.0) < 1e-6);
	assert_true(fabs(b->v[0][TM_MEM][1] - 0.25) < 1e-6);
	double peak = top_pcie_peak_bps(5, 16);
	assert_true(fabs(b->v[0][TM_PCIE][0] - 2e9 / peak) < 1e-6);
	assert_true(fabs(b->v[0][TM_PCIE][1] - 3e9 / peak) < 1e-6);
	assert_true(isnan(b->v[0][TM_UTIL][0])); /* GPU-zzz is not ours */
	assert_true(isnan(b->v[1][TM_POWER][0])); /* GPU-b has no power limit: no scale */
	assert_int_equal(top_parse_backfill(b, d, "{}", 2, 1000, 1, 3, err, sizeof err), GPULSE_EPARSE);
	assert_non_null(strstr(err, "/api/v1/query_range"));
	assert_int_equal(top_parse_backfill(b, d, doc, strlen(doc), 1000, 1, 3, err, sizeof err), 0);

	/* Seeding: the store's three samples go before the ring's own one. */
	top_history_init(h);
	top_history_push(h, d);
	top_history_seed(h, b);
	int s = top_history_find(h, "GPU-a");
	assert_true(s >= 0);
	assert_int_equal(h->count, 4);
	assert_true(fabs(top_history_get(h, s, TM_POWER, 0) - 0.5) < 1e-6); /* live: 350 of 700 */
	assert_true(fabs(top_history_get(h, s, TM_POWER, 1) - 1.0) < 1e-6);
	assert_true(isnan(top_history_get(h, s, TM_POWER, 2)));
	assert_true(fabs(top_history_get(h, s, TM_POWER, 3) - 0.5) < 1e-6);
	assert_true(isnan(top_history_get(h, s, TM_POWER, 4)));
	/* And the ring goes on from there. */
	top_history_push_gap(h);
	assert_int_equal(h->count, 5);
	assert_true(fabs(top_history_get(h, s, TM_POWER, 1) - 0.5) < 1e-6);
	free(b);
	free(h);
	free(d);
}

int main(void)
{
	/* wcwidth needs a UTF-8 locale; C.UTF-8 is always there on Debian. */
	if (!setlocale(LC_CTYPE, "C.UTF-8"))
		setlocale(LC_CTYPE, "en_US.UTF-8");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_gpus),
		cmocka_unit_test(test_parse_tenants),
		cmocka_unit_test(test_parse_injected_and_kernels),
		cmocka_unit_test(test_parse_alerts_and_diagnosis),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_parse_bounds),
		cmocka_unit_test(test_procs_empty_text),
		cmocka_unit_test(test_history),
		cmocka_unit_test(test_backfill),
		cmocka_unit_test(test_sort_filter),
		cmocka_unit_test(test_bar),
		cmocka_unit_test(test_graph_cell),
		cmocka_unit_test(test_fit),
		cmocka_unit_test(test_fmt_and_url),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
