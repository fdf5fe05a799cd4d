/* What each NVML call costs on this machine, in wall time and in CPU time
 * of the calling thread, back to back and spaced 100 ms apart (spaced
 * calls are what a sampler really makes). Run on the GPU machine:
 *   build/bench_nvml_costs [iterations]
 * Prints one row per call: median wall µs and CPU µs, both ways; a call
 * whose entry point the library lacks is printed as missing. Then what
 * the batched reads answer beside the calls they replace (violation time
 * and NVLink counters, per field), the topology, and how many samples
 * the driver's own buffers (nvmlDeviceGetSamples) hold for the last
 * second: their sampling rate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "nvml/nvml_shim.h"

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double median_us(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_i64);
	return (double)v[n / 2] / 1000.0;
}

struct ctx {
	struct nvml_lib *nv;
	nvml_device_t dev;
	nvml_device_t peer;        /* GPU 1, or GPU 0 itself on a one-GPU host */
	unsigned nlinks;           /* NVLinks of GPU 0 (0 when NVML tells none) */
	nvml_gpm_sample_t s1, s2;
	unsigned long long seen_us[7]; /* per sampling type: newest sample read */
};

/* Returned by a call whose entry point the library lacks. */
#define MISSING (-1)

typedef int call_fn(struct ctx *c);

static int c_util(struct ctx *c) { struct nvml_utilization u; return c->nv->device_get_utilization_rates(c->dev, &u); }
static int c_mem(struct ctx *c) { struct nvml_memory_v2 m = {.version = NVML_ABI_MEMORY_V2_VERSION}; return c->nv->device_get_memory_info_v2(c->dev, &m); }
static int c_power(struct ctx *c) { unsigned v; return c->nv->device_get_power_usage(c->dev, &v); }
static int c_clock(struct ctx *c) { unsigned v; return c->nv->device_get_clock_info(c->dev, NVML_ABI_CLOCK_SM, &v); }
static int c_temp(struct ctx *c) { unsigned v; return c->nv->device_get_temperature(c->dev, 0, &v); }
static int c_pstate(struct ctx *c) { int v; return c->nv->device_get_performance_state(c->dev, &v); }
static int c_reasons(struct ctx *c) { unsigned long long v; return c->nv->device_get_current_clocks_event_reasons(c->dev, &v); }
static int c_energy(struct ctx *c) { unsigned long long v; return c->nv->device_get_total_energy_consumption(c->dev, &v); }
static int c_procs(struct ctx *c) { struct nvml_process_info p[64]; unsigned n = 64; return c->nv->device_get_compute_running_processes(c->dev, &n, p); }
static int c_putil(struct ctx *c) { struct nvml_process_utilization_sample s[128]; unsigned n = 128; int r = c->nv->device_get_process_utilization(c->dev, s, &n, 0); return r == NVML_ABI_ERROR_NOT_FOUND ? 0 : r; }
static int c_fv_energy(struct ctx *c) { struct nvml_field_value f[2]; memset(f, 0, sizeof f); f[0].field_id = NVML_ABI_FI_DEV_MEMORY_TEMP; f[1].field_id = NVML_ABI_FI_DEV_TOTAL_ENERGY_CONSUMPTION; return c->nv->device_get_field_values(c->dev, 2, f); }
static int c_fv_slow(struct ctx *c) { unsigned ids[] = {3, 4, 5, 6, 142, 143, 144, 145, 94}; struct nvml_field_value f[9]; memset(f, 0, sizeof f); for (int i = 0; i < 9; i++) f[i].field_id = ids[i]; return c->nv->device_get_field_values(c->dev, 9, f); }
static int c_fv_power(struct ctx *c) { struct nvml_field_value f[1]; memset(f, 0, sizeof f); f[0].field_id = NVML_ABI_FI_DEV_POWER_INSTANT; return c->nv->device_get_field_values(c->dev, 1, f); }
static int c_ecc(struct ctx *c) { unsigned long long v; return c->nv->device_get_total_ecc_errors(c->dev, 1, 0, &v); }
static int c_remap(struct ctx *c) { unsigned a, b, d, e; return c->nv->device_get_remapped_rows(c->dev, &a, &b, &d, &e); }
static int c_linkgen(struct ctx *c) { unsigned v; return c->nv->device_get_curr_pcie_link_generation(c->dev, &v); }
static int c_gpm_sample(struct ctx *c) { return c->nv->gpm_sample_get(c->dev, c->s1); }
static int gpm_get(struct ctx *c, const unsigned *ids, unsigned n)
{
	struct nvml_gpm_metrics_get mg;
	memset(&mg, 0, sizeof mg);
	mg.version = NVML_ABI_GPM_METRICS_GET_VERSION;
	mg.num_metrics = n;
	mg.sample1 = c->s2;
	mg.sample2 = c->s1;
	for (unsigned i = 0; i < n; i++)
		mg.metrics[i].metric_id = ids[i];
	return c->nv->gpm_metrics_get(&mg);
}
static const unsigned gpm_all[] = {1, 2, 3, 4, 5, 10, 11, 12, 13, 20, 21};
static int c_gpm_metrics(struct ctx *c) { return gpm_get(c, gpm_all, 11); }
static int c_gpm_sm(struct ctx *c) { static const unsigned i[] = {2}; return gpm_get(c, i, 1); }
static int c_gpm_dram(struct ctx *c) { static const unsigned i[] = {10}; return gpm_get(c, i, 1); }
static int c_gpm_tensor(struct ctx *c) { static const unsigned i[] = {5}; return gpm_get(c, i, 1); }
static int c_gpm_fp(struct ctx *c) { static const unsigned i[] = {11, 12, 13}; return gpm_get(c, i, 3); }
static int c_gpm_pcie(struct ctx *c) { static const unsigned i[] = {20, 21}; return gpm_get(c, i, 2); }
static int c_gpm_core4(struct ctx *c) { static const unsigned i[] = {2, 3, 5, 10}; return gpm_get(c, i, 4); }
static int c_gpm_graphics(struct ctx *c) { static const unsigned i[] = {1}; return gpm_get(c, i, 1); }
static int c_gpm_integer(struct ctx *c) { static const unsigned i[] = {4}; return gpm_get(c, i, 1); }
static int c_gpm_occ(struct ctx *c) { static const unsigned i[] = {3}; return gpm_get(c, i, 1); }
static int c_gpm_pipes(struct ctx *c) { static const unsigned i[] = {6, 7, 9}; return gpm_get(c, i, 3); }
static int c_gpm_nvlink(struct ctx *c) { static const unsigned i[] = {60, 61}; return gpm_get(c, i, 2); }
static int c_fv_fast(struct ctx *c) { struct nvml_field_value f[2]; memset(f, 0, sizeof f); f[0].field_id = NVML_ABI_FI_DEV_POWER_INSTANT; f[1].field_id = NVML_ABI_FI_DEV_MEMORY_TEMP; return c->nv->device_get_field_values(c->dev, 2, f); }
/* The DCGM set's counters (optional entry points: -1 when absent). */
#define OPT_CALL(fn, ...) (c->nv->fn ? c->nv->fn(__VA_ARGS__) : MISSING)
static int c_enc(struct ctx *c) { unsigned u, p; return OPT_CALL(device_get_encoder_utilization, c->dev, &u, &p); }
static int c_dec(struct ctx *c) { unsigned u, p; return OPT_CALL(device_get_decoder_utilization, c->dev, &u, &p); }
static int c_viol(struct ctx *c) { struct nvml_violation_time v; return OPT_CALL(device_get_violation_status, c->dev, NVML_ABI_PERF_POLICY_POWER, &v); }
static int c_nvl_state(struct ctx *c) { int a; return OPT_CALL(device_get_nvlink_state, c->dev, 0, &a); }
static int c_nvl_err(struct ctx *c) { unsigned long long v; return OPT_CALL(device_get_nvlink_error_counter, c->dev, 0, NVML_ABI_NVLINK_ERROR_DL_REPLAY, &v); }
static int c_retired(struct ctx *c) { unsigned n = 0; return OPT_CALL(device_get_retired_pages, c->dev, NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &n, NULL); }
static int c_retired_pending(struct ctx *c) { int v; return OPT_CALL(device_get_retired_pages_pending_status, c->dev, &v); }
static int c_affinity(struct ctx *c) { unsigned long set[16]; return OPT_CALL(device_get_cpu_affinity, c->dev, 16, set); }
/* The batches that replace per-policy and per-link calls, beside them. */
static const struct { int policy; unsigned field; const char *name; } policies[] = {
	{NVML_ABI_PERF_POLICY_POWER, NVML_ABI_FI_DEV_PERF_POLICY_POWER, "power"},
	{NVML_ABI_PERF_POLICY_THERMAL, NVML_ABI_FI_DEV_PERF_POLICY_THERMAL, "thermal"},
	{NVML_ABI_PERF_POLICY_SYNC_BOOST, NVML_ABI_FI_DEV_PERF_POLICY_SYNC_BOOST, "sync_boost"},
	{NVML_ABI_PERF_POLICY_BOARD_LIMIT, NVML_ABI_FI_DEV_PERF_POLICY_BOARD_LIMIT, "board_limit"},
	{NVML_ABI_PERF_POLICY_LOW_UTILIZATION, NVML_ABI_FI_DEV_PERF_POLICY_LOW_UTILIZATION, "low_util"},
	{NVML_ABI_PERF_POLICY_RELIABILITY, NVML_ABI_FI_DEV_PERF_POLICY_RELIABILITY, "reliability"},
	{NVML_ABI_PERF_POLICY_TOTAL_APP_CLOCKS, NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS, "app_clocks"},
	{NVML_ABI_PERF_POLICY_TOTAL_BASE_CLOCKS, NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS, "base_clocks"},
};
#define NPOL ((int)(sizeof policies / sizeof policies[0]))
static const struct { int counter; unsigned field; const char *name; } nvl_counters[] = {
	{NVML_ABI_NVLINK_ERROR_DL_REPLAY, NVML_ABI_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL, "replay"},
	{NVML_ABI_NVLINK_ERROR_DL_RECOVERY, NVML_ABI_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL, "recovery"},
	{NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT, NVML_ABI_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, "crc_flit"},
	{NVML_ABI_NVLINK_ERROR_DL_CRC_DATA, NVML_ABI_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL, "crc_data"},
};
#define NCNT ((int)(sizeof nvl_counters / sizeof nvl_counters[0]))

static int fv(struct ctx *c, struct nvml_field_value *f, int n)
{
	return c->nv->device_get_field_values ? c->nv->device_get_field_values(c->dev, n, f) : MISSING;
}
static void fv_set(struct nvml_field_value *f, unsigned id, unsigned scope)
{
	memset(f, 0, sizeof *f);
	f->field_id = id;
	f->scope_id = scope;
}
static int c_viol8(struct ctx *c)
{
	int r = 0;
	for (int i = 0; i < NPOL && r != MISSING; i++) {
		struct nvml_violation_time v;
		r = OPT_CALL(device_get_violation_status, c->dev, policies[i].policy, &v);
	}
	return r;
}
static int c_fv_viol8(struct ctx *c)
{
	struct nvml_field_value f[NPOL];
	for (int i = 0; i < NPOL; i++)
		fv_set(&f[i], policies[i].field, 0);
	return fv(c, f, NPOL);
}
/* As the collector's fallback reads them: 4 counters on every link. */
static int c_nvl_err_all(struct ctx *c)
{
	int r = 0;
	for (unsigned l = 0; l < c->nlinks && r != MISSING; l++)
		for (int k = 0; k < NCNT && r != MISSING; k++) {
			unsigned long long v;
			r = OPT_CALL(device_get_nvlink_error_counter, c->dev, l, nvl_counters[k].counter, &v);
		}
	return r;
}
static int c_fv_nvl_totals(struct ctx *c)
{
	struct nvml_field_value f[NCNT];
	for (int k = 0; k < NCNT; k++)
		fv_set(&f[k], nvl_counters[k].field, 0);
	return fv(c, f, NCNT);
}
static int c_nvl_state_all(struct ctx *c)
{
	int r = 0;
	for (unsigned l = 0; l < c->nlinks && r != MISSING; l++) {
		int a;
		r = OPT_CALL(device_get_nvlink_state, c->dev, l, &a);
	}
	return r;
}
static int c_fv_nvl_states(struct ctx *c)
{
	struct nvml_field_value f[NVML_ABI_NVLINK_MAX_LINKS];
	unsigned n = c->nlinks ? c->nlinks : 1;
	for (unsigned l = 0; l < n; l++)
		fv_set(&f[l], NVML_ABI_FI_DEV_NVLINK_GET_STATE, l);
	return fv(c, f, (int)n);
}
static int c_fv_link_count(struct ctx *c)
{
	struct nvml_field_value f;
	fv_set(&f, NVML_ABI_FI_DEV_NVLINK_LINK_COUNT, 0);
	return fv(c, &f, 1);
}
/* The collector's slow-tier NVLink read: every link's state and the four
 * totals in one call. */
static int c_fv_nvl_batch(struct ctx *c)
{
	struct nvml_field_value f[NVML_ABI_NVLINK_MAX_LINKS + NCNT];
	int n = 0;
	for (int k = 0; k < NCNT; k++)
		fv_set(&f[n++], nvl_counters[k].field, 0);
	for (unsigned l = 0; l < c->nlinks; l++)
		fv_set(&f[n++], NVML_ABI_FI_DEV_NVLINK_GET_STATE, l);
	return fv(c, f, n);
}
static int c_fv_nvl_tput(struct ctx *c)
{
	struct nvml_field_value f[2];
	fv_set(&f[0], NVML_ABI_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, NVML_ABI_FI_SCOPE_ALL_LINKS);
	fv_set(&f[1], NVML_ABI_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, NVML_ABI_FI_SCOPE_ALL_LINKS);
	return fv(c, f, 2);
}
static int c_topo(struct ctx *c)
{
	int level;
	return OPT_CALL(device_get_topology_common_ancestor, c->dev, c->peer, &level);
}
static int c_remote_pci(struct ctx *c)
{
	struct nvml_pci_info p;
	memset(&p, 0, sizeof p);
	return OPT_CALL(device_get_nvlink_remote_pci_info, c->dev, 0, &p);
}
/* One sample buffer read as a 1 Hz reader would make it: the samples
 * since the newest one read before. */
static int samples_since(struct ctx *c, int type)
{
	static struct nvml_sample buf[4096];
	unsigned n = sizeof buf / sizeof buf[0];
	int vt;
	int r = OPT_CALL(device_get_samples, c->dev, type, c->seen_us[type], &vt, &n, buf);
	if (r == NVML_ABI_SUCCESS)
		for (unsigned i = 0; i < n; i++)
			if (buf[i].timestamp_us > c->seen_us[type])
				c->seen_us[type] = buf[i].timestamp_us;
	return r == NVML_ABI_ERROR_NOT_FOUND ? 0 : r;   /* nothing new: not a failure */
}
static int c_samples_power(struct ctx *c) { return samples_since(c, NVML_ABI_TOTAL_POWER_SAMPLES); }
static int c_samples_gpu(struct ctx *c) { return samples_since(c, NVML_ABI_GPU_UTILIZATION_SAMPLES); }
static int c_samples_mem(struct ctx *c) { return samples_since(c, NVML_ABI_MEMORY_UTILIZATION_SAMPLES); }
static int c_samples_sm_clk(struct ctx *c) { return samples_since(c, NVML_ABI_PROCESSOR_CLK_SAMPLES); }
static int c_samples_mem_clk(struct ctx *c) { return samples_since(c, NVML_ABI_MEMORY_CLK_SAMPLES); }
static int c_mem_v1(struct ctx *c) { struct nvml_memory_v1 m; return c->nv->device_get_memory_info(c->dev, &m); }
/* The fast tier as gpulsed makes it: five calls back to back. */
static int c_fast_burst(struct ctx *c)
{
	unsigned v;
	struct nvml_utilization u;
	struct nvml_memory_v1 m;
	c->nv->device_get_utilization_rates(c->dev, &u);
	c->nv->device_get_memory_info(c->dev, &m);
	c->nv->device_get_power_usage(c->dev, &v);
	c->nv->device_get_clock_info(c->dev, NVML_ABI_CLOCK_SM, &v);
	return c->nv->device_get_clock_info(c->dev, NVML_ABI_CLOCK_MEM, &v);
}

static int c_burst_nomem(struct ctx *c)
{
	unsigned v;
	struct nvml_utilization u;
	c->nv->device_get_utilization_rates(c->dev, &u);
	c->nv->device_get_power_usage(c->dev, &v);
	c->nv->device_get_clock_info(c->dev, NVML_ABI_CLOCK_SM, &v);
	return c->nv->device_get_clock_info(c->dev, NVML_ABI_CLOCK_MEM, &v);
}
static int c_burst_memlast(struct ctx *c)
{
	struct nvml_memory_v2 m = {.version = NVML_ABI_MEMORY_V2_VERSION};
	c_burst_nomem(c);
	return c->nv->device_get_memory_info_v2(c->dev, &m);
}
/* The normal tier right after a fast burst, as gpulsed's lane makes it. */
static int c_fast_then_normal(struct ctx *c)
{
	unsigned v;
	int ps;
	unsigned long long bits;
	struct nvml_process_info p[64];
	unsigned n = 64;
	c_burst_memlast(c);
	c->nv->device_get_temperature(c->dev, 0, &v);
	c->nv->device_get_performance_state(c->dev, &ps);
	c->nv->device_get_current_clocks_event_reasons(c->dev, &bits);
	c->nv->device_get_compute_running_processes(c->dev, &n, p);
	c->nv->gpm_sample_get(c->dev, c->s1);
	return c_gpm_core4(c);
}

struct call { const char *name; call_fn *fn; };

static double fv_number(const struct nvml_field_value *f)
{
	switch (f->value_type) {
	case NVML_ABI_VALUE_TYPE_DOUBLE: return f->value.d;
	case NVML_ABI_VALUE_TYPE_UNSIGNED_INT: return f->value.ui;
	case NVML_ABI_VALUE_TYPE_UNSIGNED_LONG: return (double)f->value.ul;
	case NVML_ABI_VALUE_TYPE_SIGNED_LONG_LONG: return (double)f->value.sll;
	case NVML_ABI_VALUE_TYPE_SIGNED_INT: return f->value.si;
	case NVML_ABI_VALUE_TYPE_UNSIGNED_SHORT: return f->value.us;
	default: return (double)f->value.ull;
	}
}

/* What the batches answer beside the calls they replace, so that a run
 * shows whether the two agree (units included) before the collector
 * relies on it. */
static void print_values(struct ctx *c)
{
	struct nvml_lib *nv = c->nv;
	printf("\nvalues: call vs field (ret value [type])\n");
	struct nvml_field_value f[NVML_ABI_NVLINK_MAX_LINKS + NCNT];
	for (int i = 0; i < NPOL; i++)
		fv_set(&f[i], policies[i].field, 0);
	int rf = fv(c, f, NPOL);
	for (int i = 0; i < NPOL; i++) {
		struct nvml_violation_time v = {0};
		int r = OPT_CALL(device_get_violation_status, c->dev, policies[i].policy, &v);
		printf("violation %-12s call %d %llu ns | field %d: %d %.0f [%u]\n", policies[i].name, r,
		       v.violation_time, rf, rf ? rf : f[i].nvml_return, fv_number(&f[i]), f[i].value_type);
	}
	fv_set(&f[0], NVML_ABI_FI_DEV_NVLINK_LINK_COUNT, 0);
	rf = fv(c, f, 1);
	printf("nvlink link count field %d: %d %.0f [%u]\n", rf, rf ? rf : f[0].nvml_return,
	       fv_number(&f[0]), f[0].value_type);
	for (unsigned l = 0; l < c->nlinks; l++)
		fv_set(&f[l], NVML_ABI_FI_DEV_NVLINK_GET_STATE, l);
	rf = c->nlinks ? fv(c, f, (int)c->nlinks) : 0;
	unsigned active_call = 0, active_field = 0;
	for (unsigned l = 0; l < c->nlinks; l++) {
		int a = -1;
		int r = OPT_CALL(device_get_nvlink_state, c->dev, l, &a);
		struct nvml_pci_info p;
		memset(&p, 0, sizeof p);
		int rp = OPT_CALL(device_get_nvlink_remote_pci_info, c->dev, l, &p);
		active_call += r == 0 && a == NVML_ABI_FEATURE_ENABLED;
		active_field += rf == 0 && f[l].nvml_return == 0 && fv_number(&f[l]) == NVML_ABI_NVLINK_STATE_ACTIVE;
		printf("nvlink %2u state call %d %d | field %d: %d %.0f [%u] | remote pci %d %s\n", l, r, a,
		       rf, rf ? rf : f[l].nvml_return, fv_number(&f[l]), f[l].value_type, rp,
		       rp == 0 ? p.bus_id : "-");
	}
	printf("nvlink active: %u by call, %u by field, of %u\n", active_call, active_field, c->nlinks);
	for (int k = 0; k < NCNT; k++)
		fv_set(&f[k], nvl_counters[k].field, 0);
	rf = fv(c, f, NCNT);
	for (int k = 0; k < NCNT; k++) {
		unsigned long long sum_all = 0, sum_active = 0;
		int r = MISSING;
		for (unsigned l = 0; l < c->nlinks; l++) {
			unsigned long long v = 0;
			int a = 0;
			r = OPT_CALL(device_get_nvlink_error_counter, c->dev, l, nvl_counters[k].counter, &v);
			if (r != 0)
				continue;
			sum_all += v;
			if (OPT_CALL(device_get_nvlink_state, c->dev, l, &a) == 0 && a == NVML_ABI_FEATURE_ENABLED)
				sum_active += v;
		}
		printf("nvlink %-9s calls %d sum %llu (active links %llu) | total field %d: %d %.0f [%u]\n",
		       nvl_counters[k].name, r, sum_all, sum_active, rf, rf ? rf : f[k].nvml_return,
		       fv_number(&f[k]), f[k].value_type);
	}
	int level = -1;
	int rt = OPT_CALL(device_get_topology_common_ancestor, c->dev, c->peer, &level);
	if (rt == MISSING)
		printf("topology common ancestor: missing (no nvmlDeviceGetTopologyCommonAncestor)\n");
	else
		printf("topology common ancestor of GPU 0 and %s: ret %d level %d\n",
		       c->peer == c->dev ? "itself (one GPU on this host)" : "GPU 1", rt, level);

	/* The driver's sample buffers: what a 1 s window holds, i.e. the
	 * rate the driver samples at. All samples are read (lastSeen 0) and
	 * counted back from the newest, so no clock is assumed. */
	static const struct { int type; const char *name; } st[] = {
		{NVML_ABI_TOTAL_POWER_SAMPLES, "power"},
		{NVML_ABI_GPU_UTILIZATION_SAMPLES, "gpu_util"},
		{NVML_ABI_MEMORY_UTILIZATION_SAMPLES, "mem_util"},
		{NVML_ABI_PROCESSOR_CLK_SAMPLES, "sm_clock"},
		{NVML_ABI_MEMORY_CLK_SAMPLES, "mem_clock"},
	};
	printf("\nsamples (nvmlDeviceGetSamples): buffer, in the newest 1 s, median spacing\n");
	for (size_t k = 0; k < sizeof st / sizeof st[0]; k++) {
		if (!nv->device_get_samples) {
			printf("samples %-9s missing (no nvmlDeviceGetSamples)\n", st[k].name);
			continue;
		}
		static struct nvml_sample buf[4096];
		unsigned n = sizeof buf / sizeof buf[0];
		int vt = -1;
		int r = nv->device_get_samples(c->dev, st[k].type, 0, &vt, &n, buf);
		if (r != 0) {
			printf("samples %-9s ret %d (%s)\n", st[k].name, r, nvml_return_name(r));
			continue;
		}
		unsigned long long newest = 0;
		for (unsigned i = 0; i < n; i++)
			if (buf[i].timestamp_us > newest)
				newest = buf[i].timestamp_us;
		unsigned in_1s = 0;
		int64_t gaps[4096];
		int ng = 0;
		for (unsigned i = 0; i < n; i++) {
			in_1s += buf[i].timestamp_us + 1000000ULL > newest;
			if (i > 0 && buf[i].timestamp_us > buf[i - 1].timestamp_us)
				gaps[ng++] = (int64_t)(buf[i].timestamp_us - buf[i - 1].timestamp_us) * 1000;
		}
		printf("samples %-9s %u in buffer, %u in the newest 1 s, median spacing %.1f ms, "
		       "value type %d, newest at %llu us\n", st[k].name, n, in_1s,
		       ng ? median_us(gaps, ng) / 1000.0 : 0.0, vt, newest);
	}
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 20;
	char err[256];
	struct ctx c;
	memset(&c, 0, sizeof c);
	if (nvml_lib_open(&c.nv, NULL, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (c.nv->device_get_handle_by_index(0, &c.dev)) {
		fprintf(stderr, "no GPU 0\n");
		return 1;
	}
	c.peer = c.dev;
	unsigned count = 0;
	if (c.nv->device_get_count(&count) == 0 && count > 1 &&
	    c.nv->device_get_handle_by_index(1, &c.peer) != 0)
		c.peer = c.dev;
	printf("GPUs %u; topology measured %s\n", count,
	       c.peer == c.dev ? "of GPU 0 with itself (one GPU on this host)" : "between GPU 0 and 1");
	/* How many links there are to walk: NVML's link count, else every
	 * link whose state answers. */
	struct nvml_field_value lc;
	fv_set(&lc, NVML_ABI_FI_DEV_NVLINK_LINK_COUNT, 0);
	if (fv(&c, &lc, 1) == 0 && lc.nvml_return == 0) {
		c.nlinks = (unsigned)fv_number(&lc);
	} else if (c.nv->device_get_nvlink_state) {
		int a;
		while (c.nlinks < NVML_ABI_NVLINK_MAX_LINKS &&
		       c.nv->device_get_nvlink_state(c.dev, c.nlinks, &a) == 0)
			c.nlinks++;
	}
	if (c.nlinks > NVML_ABI_NVLINK_MAX_LINKS)
		c.nlinks = NVML_ABI_NVLINK_MAX_LINKS;
	printf("NVLinks of GPU 0: %u\n", c.nlinks);
	c.nv->gpm_sample_alloc(&c.s1);
	c.nv->gpm_sample_alloc(&c.s2);
	c.nv->gpm_sample_get(c.dev, c.s2);
	clock_sleep_until(clock_mono_ns() + 100 * NS_PER_MS);
	c.nv->gpm_sample_get(c.dev, c.s1);
	static const struct call calls[] = {
		{"utilization", c_util}, {"memory_v2", c_mem}, {"power", c_power},
		{"clock(sm)", c_clock}, {"temperature", c_temp}, {"pstate", c_pstate},
		{"clock_reasons", c_reasons}, {"energy", c_energy}, {"processes", c_procs},
		{"process_util", c_putil}, {"fieldvalues(memtemp,energy)", c_fv_energy},
		{"fieldvalues(power)", c_fv_power}, {"fieldvalues(slow x9)", c_fv_slow},
		{"ecc_total", c_ecc}, {"remapped_rows", c_remap}, {"pcie_link_gen", c_linkgen},
		{"gpm_sample_get", c_gpm_sample}, {"gpm_metrics_get(11)", c_gpm_metrics},
		{"gpm_metrics_get(sm)", c_gpm_sm}, {"gpm_metrics_get(dram)", c_gpm_dram},
		{"gpm_metrics_get(tensor)", c_gpm_tensor}, {"gpm_metrics_get(fp64,32,16)", c_gpm_fp},
		{"gpm_metrics_get(pcie tx,rx)", c_gpm_pcie}, {"gpm_metrics_get(sm,occ,tensor,dram)", c_gpm_core4},
		{"gpm_metrics_get(graphics)", c_gpm_graphics}, {"gpm_metrics_get(integer)", c_gpm_integer},
		{"gpm_metrics_get(occupancy)", c_gpm_occ}, {"gpm_metrics_get(dfma,hmma,imma)", c_gpm_pipes},
		{"gpm_metrics_get(nvlink tx,rx)", c_gpm_nvlink}, {"fieldvalues(power,memtemp)", c_fv_fast},
		{"memory_v1", c_mem_v1}, {"fast burst (5 calls)", c_fast_burst},
		{"fast burst, no memory (4)", c_burst_nomem}, {"fast burst, memory last", c_burst_memlast},
		{"fast + normal tier burst", c_fast_then_normal},
		{"encoder_utilization", c_enc}, {"decoder_utilization", c_dec},
		{"violation_status(power)", c_viol}, {"nvlink_state(0)", c_nvl_state},
		{"nvlink_error_counter(0,replay)", c_nvl_err}, {"retired_pages(dbe)", c_retired},
		{"retired_pages_pending", c_retired_pending}, {"cpu_affinity", c_affinity},
		{"violation_status x8", c_viol8}, {"fieldvalues(violation x8)", c_fv_viol8},
		{"nvlink_error_counter x4/link", c_nvl_err_all}, {"fieldvalues(nvlink err totals x4)", c_fv_nvl_totals},
		{"nvlink_state x links", c_nvl_state_all}, {"fieldvalues(nvlink state x links)", c_fv_nvl_states},
		{"fieldvalues(nvlink link count)", c_fv_link_count},
		{"fieldvalues(nvlink states+totals)", c_fv_nvl_batch},
		{"fieldvalues(nvlink tput tx,rx)", c_fv_nvl_tput},
		{"topology_common_ancestor", c_topo}, {"nvlink_remote_pci_info(0)", c_remote_pci},
		{"samples(power, since last)", c_samples_power}, {"samples(gpu util)", c_samples_gpu},
		{"samples(mem util)", c_samples_mem}, {"samples(sm clock)", c_samples_sm_clk},
		{"samples(mem clock)", c_samples_mem_clk},
	};
	printf("%-30s %6s %12s %12s %12s %12s\n", "call", "ret", "b2b_wall_us", "b2b_cpu_us",
	       "spaced_wall", "spaced_cpu");
	int64_t *w = calloc((size_t)iters, sizeof *w), *cp = calloc((size_t)iters, sizeof *cp);
	for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
		int ret = calls[k].fn(&c);
		if (ret == MISSING) {
			printf("%-30s missing (the library lacks the entry point)\n", calls[k].name);
			continue;
		}
		double r[4];
		for (int mode = 0; mode < 2; mode++) {
			for (int i = 0; i < iters; i++) {
				if (mode == 1)
					clock_sleep_until(clock_mono_ns() + 100 * NS_PER_MS);
				int64_t t0 = clock_mono_ns(), c0 = thread_cpu_ns();
				calls[k].fn(&c);
				w[i] = clock_mono_ns() - t0;
				cp[i] = thread_cpu_ns() - c0;
			}
			r[mode * 2] = median_us(w, iters);
			r[mode * 2 + 1] = median_us(cp, iters);
		}
		printf("%-30s %6d %12.1f %12.1f %12.1f %12.1f\n", calls[k].name, ret, r[0], r[1], r[2], r[3]);
		fflush(stdout);
	}
	free(w);
	free(cp);
	print_values(&c);
	nvml_lib_close(c.nv);
	return 0;
}
