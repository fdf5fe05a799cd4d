/* The profiling aggregate (src/profile/profile_agg.c): sums of interval
 * frames, the cardinality bounds (kernels per process and overall with
 * the heaviest kept, NVTX ranges, devices, processes) and their counters,
 * pid reuse, expiry, the histogram quantiles, and the exact exposition
 * and JSON it produces, including what each process's statistics are
 * built from (STATUS's source and lasting_cost_ppm). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile_agg.h"
#include "profile/profile_emit.h"
#include "common/status.h"
#include "wire/wire.h"

#define SEC 1000000000LL

static struct wire_hello hello_of(uint32_t pid, uint64_t start)
{
	struct wire_hello h = {.pid = pid, .ppid = 1, .uid = 1000, .cupti_version = 24,
			       .mode = WIRE_MODE_CONTINUOUS, .budget_ppm = 5000,
			       .start_wall_ns = start};
	snprintf(h.cmdline, sizeof h.cmdline, "/usr/bin/python3 train.py");
	snprintf(h.lib_version, sizeof h.lib_version, "0.1.0");
	return h;
}

/* A KERNELS frame of n kernels "NAMEi" with launches l[i], total_ns t[i]. */
static void kernels(struct profile_agg *a, uint32_t pid, uint32_t dev, const char *const *names,
		    const uint64_t *launches, const uint64_t *ns, uint32_t n)
{
	struct wire_kernel *k = calloc(n, sizeof *k);
	for (uint32_t i = 0; i < n; i++) {
		snprintf(k[i].name, sizeof k[i].name, "%s", names[i]);
		k[i].launches = launches[i];
		k[i].total_ns = ns[i];
		k[i].min_ns = ns[i] / (launches[i] ? launches[i] : 1);
		k[i].max_ns = k[i].min_ns;
		k[i].hist[10] = (uint32_t)launches[i];
	}
	struct wire_msg m = {.type = WIRE_KERNELS};
	m.u.kernels.scope.device = dev;
	m.u.kernels.scope.traced_ns = 1 * SEC;
	m.u.kernels.count = n;
	m.u.kernels.kernels = k;
	assert_int_equal(profile_agg_frame(a, pid, &m), 0);
	free(k);
}

/* `gpu="G",kernel_id="ID",kernel="NAME"` then `rest`: a per-kernel
 * series' labels, the id from the name as wire_name_hash gives it. */
static const char *kl(const char *gpu, const char *name, const char *rest)
{
	static char out[4][512];
	static unsigned next;
	char *o = out[next++ % 4];
	snprintf(o, sizeof out[0], "gpu=\"%s\",kernel_id=\"%016llx\",kernel=\"%s\"%s", gpu,
		 (unsigned long long)wire_name_hash(name), name, rest);
	return o;
}

static bool has2(const char *text, const char *a, const char *b)
{
	char both[1024];
	snprintf(both, sizeof both, "%s%s", a, b);
	return strstr(text, both) != NULL;
}

static char *render(struct profile_agg *a, bool om)
{
	static struct buf b;
	buf_free(&b);
	buf_init(&b, 1 << 22);
	struct profile_prom_emitter pe;
	profile_prom_emitter_init(&pe, &b, om);
	profile_agg_emit(a, &pe.e);
	return b.data ? b.data : (char *)"";
}

static void test_sums_and_exposition(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello h = hello_of(42, 100);
	assert_int_equal(profile_agg_hello(a, &h, "python3", 0), 0);
	const char *names[] = {"gemm", "relu \"x\"\\"};
	uint64_t l[] = {10, 5}, t[] = {1000000, 2000};
	kernels(a, 42, 0, names, l, t, 2);
	kernels(a, 42, 0, names, l, t, 2);
	struct wire_copy c[] = {{.kind = WIRE_COPY_D2D, .pinned = 0, .count = 3, .bytes = 300, .total_ns = 30}};
	struct wire_msg m = {.type = WIRE_COPIES};
	m.u.copies.count = 1;
	m.u.copies.copies = c;
	assert_int_equal(profile_agg_frame(a, 42, &m), 0);
	/* A frame from a process that said no HELLO is refused and counted. */
	assert_int_equal(profile_agg_frame(a, 43, &m), GPULSE_ENOENT);

	const char *text = render(a, false);
	assert_true(has2(text, "# TYPE gpulse_process_kernel_launches_total counter\n"
			       "gpulse_process_kernel_launches_total{pid=\"42\",comm=\"python3\",",
			 kl("0", "gemm", "} 20\n")));
	/* Label escaping of quotes and backslashes. */
	assert_non_null(strstr(text, "kernel=\"relu \\\"x\\\"\\\\\"} 10\n"));
	assert_true(has2(text, "gpulse_process_kernel_seconds_total{pid=\"42\",comm=\"python3\",",
			 kl("0", "gemm", "} 0.002\n")));
	assert_non_null(strstr(text, "gpulse_process_copy_bytes_total{pid=\"42\",comm=\"python3\","
				     "gpu=\"0\",kind=\"d2d\",pinned=\"false\"} 300\n"));
	assert_non_null(strstr(text, "gpulse_process_traced_seconds_total{pid=\"42\",comm=\"python3\","
				     "gpu=\"0\"} 2\n"));
	/* No STATUS yet: no status families, but connected and info. */
	assert_null(strstr(text, "gpulse_inject_overhead_ratio"));
	assert_non_null(strstr(text, "gpulse_inject_connected{pid=\"42\",comm=\"python3\"} 1\n"));
	/* Families with no samples write nothing (no UVM, streams, ranges). */
	assert_null(strstr(text, "uvm"));
	assert_null(strstr(text, "nvtx"));
	/* "other" only once something was folded. */
	assert_null(strstr(text, "kernel=\"other\""));
	/* OpenMetrics names counter families without _total. */
	text = render(a, true);
	assert_non_null(strstr(text, "# TYPE gpulse_process_kernel_launches counter\n"
				     "gpulse_process_kernel_launches_total{"));

	struct profile_agg_stats st;
	profile_agg_stats(a, &st);
	assert_int_equal(st.processes, 1);
	assert_int_equal(st.connected, 1);
	assert_int_equal(st.kernel_series, 2);
	assert_int_equal(st.frames_unknown_process_total, 1);
	profile_agg_free(a);
	profile_agg_free(NULL);
}

static void test_kernel_bounds(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {.kernels_per_process = 3, .max_kernel_series = 5};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello h = hello_of(1, 1);
	assert_int_equal(profile_agg_hello(a, &h, "a", 0), 0);
	const char *n1[] = {"k1", "k2", "k3", "k4"};
	uint64_t l[] = {1, 2, 3, 4}, t[] = {100, 50, 300, 10};
	kernels(a, 1, 0, n1, l, t, 4);
	/* k4 (10 ns) is lighter than the lightest named one (k2, 50 ns): it
	 * goes into "other". */
	const char *text = render(a, false);
	assert_non_null(strstr(text, "kernel=\"other\"} 4\n"));
	assert_null(strstr(text, "kernel=\"k4\""));
	/* A heavier newcomer replaces the lightest; the lightest is folded. */
	const char *n2[] = {"k5"};
	uint64_t l2[] = {7}, t2[] = {1000};
	kernels(a, 1, 0, n2, l2, t2, 1);
	text = render(a, false);
	assert_non_null(strstr(text, "kernel=\"k5\"} 7\n"));
	assert_null(strstr(text, "kernel=\"k2\""));
	assert_non_null(strstr(text, kl("0", "other", "} 6\n"))); /* 4 + k2's 2 */
	/* A known name keeps adding, even when full. */
	const char *n3[] = {"k1", "other"};
	uint64_t l3[] = {10, 100}, t3[] = {10, 10};
	kernels(a, 1, 0, n3, l3, t3, 2);
	text = render(a, false);
	assert_non_null(strstr(text, kl("0", "k1", "} 11\n")));
	assert_non_null(strstr(text, kl("0", "other", "} 106\n")));

	struct profile_agg_stats st;
	profile_agg_stats(a, &st);
	assert_int_equal(st.kernel_series, 3);
	assert_int_equal(st.kernels_folded_total, 2);

	/* The overall bound: 5 named kernels in all. Device 1 gets the 2
	 * left; the rest fold although its own table has room. */
	const char *n4[] = {"d1a", "d1b", "d1c"};
	uint64_t l4[] = {1, 1, 1}, t4[] = {5, 6, 1};
	kernels(a, 1, 1, n4, l4, t4, 3);
	profile_agg_stats(a, &st);
	assert_int_equal(st.kernel_series, 5);
	assert_int_equal(st.kernels_folded_total, 3);
	text = render(a, false);
	assert_non_null(strstr(text, kl("1", "other", "} 1\n")));
	profile_agg_free(a);
}

static void test_ranges_and_devices(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello h = hello_of(7, 1);
	assert_int_equal(profile_agg_hello(a, &h, NULL, 0), 0);
	/* comm from the command line when /proc gave none. */
	assert_non_null(strstr(render(a, false), "comm=\"python3\""));
	struct wire_range r[PROFILE_RANGES_PER_DEVICE + 2];
	memset(r, 0, sizeof r);
	for (int i = 0; i < PROFILE_RANGES_PER_DEVICE + 2; i++) {
		snprintf(r[i].name, sizeof r[i].name, "range%d", i);
		r[i].count = 1;
		r[i].total_ns = SEC;
	}
	struct wire_msg m = {.type = WIRE_RANGES};
	m.u.ranges.count = PROFILE_RANGES_PER_DEVICE + 2;
	m.u.ranges.ranges = r;
	assert_int_equal(profile_agg_frame(a, 7, &m), 0);
	const char *text = render(a, false);
	assert_non_null(strstr(text, "gpulse_process_nvtx_ranges_total{pid=\"7\",comm=\"python3\","
				     "gpu=\"0\",range=\"other\"} 2\n"));
	assert_non_null(strstr(text, "range=\"range31\"} 1\n"));
	assert_null(strstr(text, "range=\"range32\""));
	/* Devices past PROFILE_MAX_DEVICES are dropped and counted. */
	for (uint32_t d = 0; d < PROFILE_MAX_DEVICES + 3; d++) {
		struct wire_msg u = {.type = WIRE_UVM};
		u.u.uvm.scope.device = d;
		u.u.uvm.cpu_page_faults = 1;
		assert_int_equal(profile_agg_frame(a, 7, &u), 0);
	}
	struct profile_agg_stats st;
	profile_agg_stats(a, &st);
	assert_int_equal(st.ranges_folded_total, 2);
	assert_int_equal(st.devices_folded_total, 3);
	text = render(a, false);
	assert_non_null(strstr(text, "gpulse_process_uvm_cpu_page_faults_total{pid=\"7\",comm=\"python3\",gpu=\"15\"} 1\n"));
	assert_null(strstr(text, "gpu=\"16\""));
	profile_agg_free(a);
}

static void test_processes(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {.max_processes = 2, .expire_ns = 10 * SEC};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello h1 = hello_of(1, 1), h2 = hello_of(2, 1), h3 = hello_of(3, 1);
	assert_int_equal(profile_agg_hello(a, &h1, "one", 0), 0);
	assert_int_equal(profile_agg_hello(a, &h2, "two", 0), 0);
	/* Full of connected processes: refused and counted. */
	assert_int_equal(profile_agg_hello(a, &h3, "three", 0), GPULSE_ELIMIT);
	struct profile_agg_stats st;
	profile_agg_stats(a, &st);
	assert_int_equal(st.processes_refused_total, 1);
	/* A disconnected one makes room. */
	profile_agg_disconnect(a, 1, 5 * SEC);
	assert_int_equal(profile_agg_hello(a, &h3, "three", 6 * SEC), 0);
	assert_false(profile_agg_has(a, 1, NULL, 0));
	char comm[PROFILE_COMM_MAX];
	assert_true(profile_agg_has(a, 3, comm, sizeof comm));
	assert_string_equal(comm, "three");

	/* A reconnecting process keeps its statistics; a new process with
	 * the same pid (another start time) starts from zero. */
	const char *n[] = {"k"};
	uint64_t l[] = {5}, t[] = {5};
	kernels(a, 2, 0, n, l, t, 1);
	profile_agg_disconnect(a, 2, 7 * SEC);
	assert_int_equal(profile_agg_hello(a, &h2, "two", 8 * SEC), 0);
	assert_true(has2(render(a, false), "pid=\"2\",comm=\"two\",", kl("0", "k", "} 5\n")));
	struct wire_hello h2b = hello_of(2, 999);
	assert_int_equal(profile_agg_hello(a, &h2b, "two", 9 * SEC), 0);
	assert_null(strstr(render(a, false), "kernel=\"k\""));
	profile_agg_stats(a, &st);
	assert_int_equal(st.kernel_series, 0);

	/* Expiry: only after expire_ns disconnected. */
	profile_agg_disconnect(a, 3, 10 * SEC);
	profile_agg_expire(a, 19 * SEC);
	assert_true(profile_agg_has(a, 3, NULL, 0));
	profile_agg_expire(a, 20 * SEC);
	assert_false(profile_agg_has(a, 3, NULL, 0));
	assert_true(profile_agg_has(a, 2, NULL, 0));
	profile_agg_stats(a, &st);
	assert_int_equal(st.processes_expired_total, 2);
	assert_int_equal(st.processes, 1);
	profile_agg_free(a);
}

static void test_quantiles(void **state)
{
	(void)state;
	uint64_t h[WIRE_HIST_BUCKETS] = {0};
	assert_true(profile_hist_quantile(h, 0.5, 0, 0) == 0);
	/* 100 in [1024, 2048): the median is interpolated to 1536. */
	h[10] = 100;
	assert_true(fabs(profile_hist_quantile(h, 0.5, 1024, 2047) - 1536) < 1e-9);
	/* Clamped to the observed extremes. */
	assert_true(profile_hist_quantile(h, 0.99, 1500, 1600) == 1600);
	assert_true(profile_hist_quantile(h, 0.01, 1500, 1600) == 1500);
	/* Two buckets: p50 in the first, p99 in the second. */
	h[20] = 100;
	double p50 = profile_hist_quantile(h, 0.5, 0, 1 << 21);
	double p99 = profile_hist_quantile(h, 0.99, 0, 1 << 21);
	assert_true(p50 >= 1024 && p50 <= 2048);
	assert_true(p99 >= (1 << 20) && p99 <= (1 << 21));
	/* Bucket 0 holds 0 ns. */
	memset(h, 0, sizeof h);
	h[0] = 10;
	assert_true(profile_hist_quantile(h, 0.5, 0, 0) == 0);
	/* The last bucket is open: it ends at max. */
	memset(h, 0, sizeof h);
	h[WIRE_HIST_BUCKETS - 1] = 2;
	double top = profile_hist_quantile(h, 1.0, 0, 1ull << 40);
	assert_true(top == (double)(1ull << 40));
}

static void test_json(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello h1 = hello_of(10, 1), h2 = hello_of(20, 1);
	snprintf(h2.cmdline, sizeof h2.cmdline, "bad \xff utf8 \"q\"");
	assert_int_equal(profile_agg_hello(a, &h1, "p10", 0), 0);
	assert_int_equal(profile_agg_hello(a, &h2, "p\xc3\xa9", 0), 0);
	const char *n[] = {"small", "big"};
	uint64_t l[] = {1, 3}, t[] = {100, 300};
	kernels(a, 10, 0, n, l, t, 2);
	const char *n2[] = {"mid"};
	uint64_t l2[] = {2}, t2[] = {600};
	kernels(a, 20, 0, n2, l2, t2, 1);
	struct wire_msg m = {.type = WIRE_STATUS};
	m.u.status = (struct wire_status){.mode = WIRE_MODE_FULL, .active = 1, .stepped_aside = 1,
					  .overhead_est_ppm = 2500, .launch_rate_hz = 12.5};
	snprintf(m.u.status.reason, sizeof m.u.status.reason, "CUPTI taken by \"nsys\"");
	assert_int_equal(profile_agg_frame(a, 10, &m), 0);

	struct buf b;
	buf_init(&b, 1 << 20);
	buf_putc(&b, '{');
	assert_int_equal(profile_agg_kernels_json(a, &b, -1, -1, 100), 0);
	buf_putc(&b, '}');
	json_error_t je;
	json_t *doc = json_loads(b.data, 0, &je);
	if (!doc)
		fail_msg("%s: %s", je.text, b.data);
	json_t *k = json_object_get(doc, "kernels");
	assert_int_equal(json_array_size(k), 3);
	/* Heaviest first; share of all kernel time on GPU 0 (1000 ns). */
	assert_string_equal(json_string_value(json_object_get(json_array_get(k, 0), "kernel")), "mid");
	assert_true(json_real_value(json_object_get(json_array_get(k, 0), "share")) == 0.6);
	assert_string_equal(json_string_value(json_object_get(json_array_get(k, 1), "kernel")), "big");
	assert_true(json_real_value(json_object_get(json_array_get(k, 1), "share")) == 0.3);
	assert_int_equal(json_integer_value(json_object_get(doc, "total")), 3);
	json_decref(doc);

	/* Filters and the limit. */
	buf_reset(&b);
	buf_putc(&b, '{');
	assert_int_equal(profile_agg_kernels_json(a, &b, 10, 0, 1), 0);
	buf_putc(&b, '}');
	doc = json_loads(b.data, 0, &je);
	assert_non_null(doc);
	k = json_object_get(doc, "kernels");
	assert_int_equal(json_array_size(k), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(k, 0), "kernel")), "big");
	assert_int_equal(json_integer_value(json_object_get(doc, "total")), 2);
	json_decref(doc);

	/* per_process: each process's heaviest kernel on each GPU, heaviest
	 * first ("small" of pid 10 is cut); total counts what the cut left. */
	buf_reset(&b);
	buf_putc(&b, '{');
	assert_int_equal(profile_agg_kernels_top_json(a, &b, -1, -1, 100, 1), 0);
	buf_putc(&b, '}');
	doc = json_loads(b.data, 0, &je);
	assert_non_null(doc);
	k = json_object_get(doc, "kernels");
	assert_int_equal(json_array_size(k), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(k, 0), "kernel")), "mid");
	assert_string_equal(json_string_value(json_object_get(json_array_get(k, 1), "kernel")), "big");
	assert_int_equal(json_integer_value(json_object_get(doc, "total")), 2);
	json_decref(doc);
	buf_reset(&b);
	buf_putc(&b, '{');
	assert_int_equal(profile_agg_kernels_top_json(a, &b, 10, -1, 100, 2), 0);
	buf_putc(&b, '}');
	doc = json_loads(b.data, 0, &je);
	assert_non_null(doc);
	assert_int_equal(json_array_size(json_object_get(doc, "kernels")), 2); /* both of pid 10 */
	json_decref(doc);

	buf_reset(&b);
	buf_putc(&b, '{');
	assert_int_equal(profile_agg_processes_json(a, &b), 0);
	buf_putc(&b, '}');
	doc = json_loads(b.data, 0, &je);
	if (!doc)
		fail_msg("%s: %s", je.text, b.data);
	json_t *p = json_object_get(doc, "processes");
	assert_int_equal(json_array_size(p), 2);
	json_t *p10 = json_array_get(p, 0), *p20 = json_array_get(p, 1);
	assert_string_equal(json_string_value(json_object_get(p10, "mode")), "full");
	assert_true(json_is_true(json_object_get(p10, "stepped_aside")));
	assert_string_equal(json_string_value(json_object_get(p10, "reason")), "CUPTI taken by \"nsys\"");
	assert_true(json_real_value(json_object_get(p10, "overhead_ratio")) == 0.0025);
	/* Invalid UTF-8 is cleaned, so the document stays valid JSON. */
	assert_string_equal(json_string_value(json_object_get(p20, "cmdline")), "bad ? utf8 \"q\"");
	assert_string_equal(json_string_value(json_object_get(p20, "comm")), "p\xc3\xa9");
	assert_false(json_is_true(json_object_get(p20, "status_known")));
	json_decref(doc);

	/* And the stepped-aside reason on /metrics. */
	assert_non_null(strstr(render(a, false), "gpulse_inject_stepped_aside{pid=\"10\",comm=\"p10\","
						  "reason=\"CUPTI taken by \\\"nsys\\\"\"} 1\n"));
	buf_free(&b);
	profile_agg_free(a);
}

/* The JSON member `key` of o as a number; fails when it is missing. */
static double jnum(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_number(v))
		fail_msg("%s is not a number", key);
	return json_number_value(v);
}

/* The entry of arr whose "pid" is pid (the first), or NULL. */
static json_t *of_pid(json_t *arr, json_int_t pid)
{
	size_t i;
	json_t *e;
	json_array_foreach(arr, i, e)
		if (json_integer_value(json_object_get(e, "pid")) == pid)
			return e;
	return NULL;
}

/* /api/v1/kernels's (kernels_doc) or /api/v1/processes's members, parsed. */
static json_t *render_json(struct profile_agg *a, bool kernels_doc)
{
	struct buf b;
	buf_init(&b, 1 << 20);
	buf_putc(&b, '{');
	if (kernels_doc)
		assert_int_equal(profile_agg_kernels_json(a, &b, -1, -1, 100), 0);
	else
		assert_int_equal(profile_agg_processes_json(a, &b), 0);
	buf_putc(&b, '}');
	json_error_t je;
	json_t *doc = json_loads(b.data, 0, &je);
	if (!doc)
		fail_msg("%s: %s", je.text, b.data);
	buf_free(&b);
	return doc;
}

/* STATUS's source and lasting_cost_ppm, kept per process: on /metrics as
 * gpulse_inject_info's source label and gpulse_inject_lasting_cost_ratio,
 * in both JSON documents as source, observed_ratio (duty_ppm) and
 * lasting_cost_ratio. Before a process's first STATUS its source follows
 * its HELLO's mode and the two ratios are absent. */
static void test_source_and_lasting_cost(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello hc = hello_of(30, 1), hf = hello_of(31, 1);
	hf.mode = WIRE_MODE_FULL;
	assert_int_equal(profile_agg_hello(a, &hc, "census_app", 0), 0);
	assert_int_equal(profile_agg_hello(a, &hf, "full_app", 0), 0);
	const char *n[] = {"k"};
	uint64_t l[] = {4}, t[] = {400};
	kernels(a, 30, 0, n, l, t, 1);
	kernels(a, 31, 0, n, l, t, 1);

	/* No STATUS yet. */
	const char *text = render(a, false);
	assert_non_null(strstr(text, "gpulse_inject_info{pid=\"30\",comm=\"census_app\",uid=\"1000\","
				     "mode=\"continuous\",source=\"census\",lib_version=\"0.1.0\","
				     "cupti_version=\"24\"} 1\n"));
	assert_non_null(strstr(text, "gpulse_inject_info{pid=\"31\",comm=\"full_app\",uid=\"1000\","
				     "mode=\"full\",source=\"trace\","));
	assert_null(strstr(text, "gpulse_inject_lasting_cost_ratio"));
	json_t *doc = render_json(a, false);
	json_t *p30 = of_pid(json_object_get(doc, "processes"), 30);
	assert_non_null(p30);
	assert_string_equal(json_string_value(json_object_get(p30, "source")), "census");
	assert_null(json_object_get(p30, "observed_ratio"));
	assert_null(json_object_get(p30, "lasting_cost_ratio"));
	json_decref(doc);
	doc = render_json(a, true);
	json_t *k31 = of_pid(json_object_get(doc, "kernels"), 31);
	assert_non_null(k31);
	assert_string_equal(json_string_value(json_object_get(k31, "source")), "trace");
	assert_null(json_object_get(k31, "lasting_cost_ratio"));
	json_decref(doc);

	/* Census at 12.5% observed, nothing lasting; full mode after exact
	 * tracing ran: 15% for the rest of the process. */
	struct wire_msg m = {.type = WIRE_STATUS};
	m.u.status = (struct wire_status){.mode = WIRE_MODE_CONTINUOUS, .duty_ppm = 125000,
					  .source = WIRE_SOURCE_CENSUS, .lasting_cost_ppm = 0};
	assert_int_equal(profile_agg_frame(a, 30, &m), 0);
	m.u.status = (struct wire_status){.mode = WIRE_MODE_FULL, .duty_ppm = 1000000,
					  .source = WIRE_SOURCE_TRACE, .lasting_cost_ppm = 150000};
	assert_int_equal(profile_agg_frame(a, 31, &m), 0);
	text = render(a, false);
	assert_non_null(strstr(text, "# TYPE gpulse_inject_lasting_cost_ratio gauge\n"
				     "gpulse_inject_lasting_cost_ratio{pid=\"30\",comm=\"census_app\"} 0\n"
				     "gpulse_inject_lasting_cost_ratio{pid=\"31\",comm=\"full_app\"} 0.15\n"));
	assert_non_null(strstr(text, "mode=\"continuous\",source=\"census\","));
	doc = render_json(a, false);
	p30 = of_pid(json_object_get(doc, "processes"), 30);
	json_t *p31 = of_pid(json_object_get(doc, "processes"), 31);
	assert_string_equal(json_string_value(json_object_get(p30, "source")), "census");
	assert_true(jnum(p30, "observed_ratio") == 0.125);
	assert_true(jnum(p30, "lasting_cost_ratio") == 0);
	assert_string_equal(json_string_value(json_object_get(p31, "source")), "trace");
	assert_true(jnum(p31, "observed_ratio") == 1);
	assert_true(jnum(p31, "lasting_cost_ratio") == 0.15);
	json_decref(doc);
	doc = render_json(a, true);
	json_t *k30 = of_pid(json_object_get(doc, "kernels"), 30);
	k31 = of_pid(json_object_get(doc, "kernels"), 31);
	assert_string_equal(json_string_value(json_object_get(k30, "source")), "census");
	assert_true(jnum(k30, "observed_ratio") == 0.125);
	assert_true(jnum(k30, "lasting_cost_ratio") == 0);
	assert_string_equal(json_string_value(json_object_get(k31, "source")), "trace");
	assert_true(jnum(k31, "lasting_cost_ratio") == 0.15);
	json_decref(doc);

	/* A capture in the census process: its STATUS says trace, and from
	 * then on lasting; the last STATUS is what is kept. */
	m.u.status = (struct wire_status){.mode = WIRE_MODE_CONTINUOUS, .duty_ppm = 125000,
					  .source = WIRE_SOURCE_TRACE, .lasting_cost_ppm = 150000};
	assert_int_equal(profile_agg_frame(a, 30, &m), 0);
	text = render(a, false);
	assert_non_null(strstr(text, "gpulse_inject_lasting_cost_ratio{pid=\"30\",comm=\"census_app\"} "
				     "0.15\n"));
	assert_non_null(strstr(text, "comm=\"census_app\",uid=\"1000\",mode=\"continuous\","
				     "source=\"trace\","));
	assert_null(strstr(text, "source=\"census\""));
	profile_agg_free(a);
}

/* Names that share their first 300 bytes are two kernels, each with its
 * own kernel_id; a 2000-byte name keeps its whole text in the JSON and
 * a label fitted to the store's 1024 bytes with the name's hash. */
static void test_long_kernel_names(void **state)
{
	(void)state;
	struct profile_agg *a;
	struct profile_limits lim = {0};
	assert_int_equal(profile_agg_new(&a, &lim), 0);
	struct wire_hello h = hello_of(7, 1);
	assert_int_equal(profile_agg_hello(a, &h, "app", 0), 0);
	static char n1[400], n2[400], n3[2001];
	memset(n1, 'x', 300);
	memcpy(n2, n1, 300);
	snprintf(n1 + 300, sizeof n1 - 300, "<1>");
	snprintf(n2 + 300, sizeof n2 - 300, "<2>");
	memset(n3, 'y', 2000);
	const char *n[] = {n1, n2, n3};
	uint64_t l[] = {1, 2, 3}, t[] = {10, 20, 30};
	kernels(a, 7, 0, n, l, t, 3);
	const char *text = render(a, false);
	char want[600];
	snprintf(want, sizeof want, "kernel_id=\"%016llx\",kernel=\"%s\"} 1\n",
		 (unsigned long long)wire_name_hash(n1), n1);
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof want, "kernel_id=\"%016llx\",kernel=\"%s\"} 2\n",
		 (unsigned long long)wire_name_hash(n2), n2);
	assert_non_null(strstr(text, want));
	static char label[1025];
	wire_name_fit(label, 1024, n3);
	assert_true(strlen(label) <= 1024 && strlen(label) > 1000);
	snprintf(want, sizeof want, "kernel_id=\"%016llx\",kernel=\"", (unsigned long long)wire_name_hash(n3));
	const char *at = strstr(text, want);
	assert_non_null(at);
	assert_int_equal(strncmp(at + strlen(want), label, strlen(label)), 0);
	assert_int_equal(at[strlen(want) + strlen(label)], '"');
	struct buf b;
	buf_init(&b, 1 << 20);
	buf_putc(&b, '{');
	assert_int_equal(profile_agg_kernels_json(a, &b, -1, -1, 10), 0);
	buf_putc(&b, '}');
	json_t *j = json_loadb(b.data, b.len, 0, NULL);
	assert_non_null(j);
	json_t *k = json_object_get(j, "kernels");
	size_t i, found = 0;
	json_t *r;
	json_array_foreach(k, i, r) {
		const char *name = json_string_value(json_object_get(r, "kernel"));
		if (strcmp(name, n3) == 0)
			found++;
		char id[17];
		snprintf(id, sizeof id, "%016llx", (unsigned long long)wire_name_hash(name));
		assert_string_equal(json_string_value(json_object_get(r, "kernel_id")), id);
	}
	assert_int_equal(found, 1);
	assert_int_equal(json_array_size(k), 3);
	json_decref(j);
	buf_free(&b);
	profile_agg_free(a);
}

static void test_names(void **state)
{
	(void)state;
	for (unsigned m = 0; m <= WIRE_MODE_OFF; m++)
		assert_int_equal(profile_mode_parse(profile_mode_name(m)), (int)m);
	assert_int_equal(profile_mode_parse("fast"), -1);
	assert_string_equal(profile_mode_name(9), "unknown");
	assert_string_equal(profile_copy_kind_name(WIRE_COPY_PEER), "peer");
	assert_string_equal(profile_copy_kind_name(WIRE_COPY_KIND_COUNT), "unknown");
	assert_string_equal(profile_source_name(WIRE_SOURCE_TRACE), "trace");
	assert_string_equal(profile_source_name(WIRE_SOURCE_CENSUS), "census");
	assert_string_equal(profile_source_name(WIRE_SOURCE_CENSUS + 1), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sums_and_exposition),
		cmocka_unit_test(test_kernel_bounds),
		cmocka_unit_test(test_ranges_and_devices),
		cmocka_unit_test(test_processes),
		cmocka_unit_test(test_quantiles),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_source_and_lasting_cost),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_long_kernel_names),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	return rc;
}
