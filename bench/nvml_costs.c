/* What each NVML call costs on this machine, in wall time and in CPU time
 * of the calling thread, back to back and spaced 100 ms apart (spaced
 * calls are what a sampler really makes). Run on the GPU machine:
 *   build/bench_nvml_costs [iterations]
 * Prints one row per call: median wall µs and CPU µs, both ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "nvml_shim.h"

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
	nvml_gpm_sample_t s1, s2;
};

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
#define OPT_CALL(fn, ...) (c->nv->fn ? c->nv->fn(__VA_ARGS__) : -1)
static int c_enc(struct ctx *c) { unsigned u, p; return OPT_CALL(device_get_encoder_utilization, c->dev, &u, &p); }
static int c_dec(struct ctx *c) { unsigned u, p; return OPT_CALL(device_get_decoder_utilization, c->dev, &u, &p); }
static int c_viol(struct ctx *c) { struct nvml_violation_time v; return OPT_CALL(device_get_violation_status, c->dev, NVML_ABI_PERF_POLICY_POWER, &v); }
static int c_nvl_state(struct ctx *c) { int a; return OPT_CALL(device_get_nvlink_state, c->dev, 0, &a); }
static int c_nvl_err(struct ctx *c) { unsigned long long v; return OPT_CALL(device_get_nvlink_error_counter, c->dev, 0, NVML_ABI_NVLINK_ERROR_DL_REPLAY, &v); }
static int c_retired(struct ctx *c) { unsigned n = 0; return OPT_CALL(device_get_retired_pages, c->dev, NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &n, NULL); }
static int c_retired_pending(struct ctx *c) { int v; return OPT_CALL(device_get_retired_pages_pending_status, c->dev, &v); }
static int c_affinity(struct ctx *c) { unsigned long set[16]; return OPT_CALL(device_get_cpu_affinity, c->dev, 16, set); }
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
	};
	printf("%-30s %6s %12s %12s %12s %12s\n", "call", "ret", "b2b_wall_us", "b2b_cpu_us",
	       "spaced_wall", "spaced_cpu");
	int64_t *w = calloc((size_t)iters, sizeof *w), *cp = calloc((size_t)iters, sizeof *cp);
	for (size_t k = 0; k < sizeof calls / sizeof calls[0]; k++) {
		int ret = calls[k].fn(&c);
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
	nvml_lib_close(c.nv);
	return 0;
}
