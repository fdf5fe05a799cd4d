/* Tests for the Prometheus exposition (src/export/prom.c): exact sample
 * lines for a bus of two GPUs (one lost), absent fields, family grouping
 * in both formats, label escaping, the NVML histogram, content
 * negotiation, UTF-8 cleaning and the output bound. When promtool is on
 * PATH the text output also goes through `promtool check metrics`. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/bus.h"
#include "common/clock.h"
#include "collect/collector.h"
#include "nvml/nvml_shim.h"
#include "export/prom.h"
#include "export/selfstats.h"
#include "common/status.h"

/* Labels of the two GPUs as they must appear, escaping included. */
#define L0 "gpu=\"0\",uuid=\"GPU-aaaa\",model=\"NVIDIA H200 \\\"SXM\\\" \\\\ 141GB\""
#define L1 "gpu=\"1\",uuid=\"GPU-bbbb\",model=\"NVIDIA H200\""

struct fixture {
	struct bus *bus;
	struct nvml_lib *nv;
	struct collector_stats cs;
	struct self_stats self;
	struct buf out;
};

/* Mark f read in this update, whatever tier the table gives it. */
static void set_field(struct gpu_update *u, enum field_id f, double v)
{
	u->mask |= FIELD_BIT(f);
	u->valid |= FIELD_BIT(f);
	u->v[f] = v;
}

static void fill_bus(struct bus *bus)
{
	struct gpu_identity id0 = {
		.index = 0, .uuid = "GPU-aaaa", .name = "NVIDIA H200 \"SXM\" \\ 141GB",
		.pci_bus_id = "00000000:19:00.0", .serial = "1650924060001",
		.driver_version = "580.65.06", .cuda_version = "13.0", .architecture = "hopper",
		.cc_major = 9, .cc_minor = 0, .mig_mode = 0, .max_sm_clock_hz = 1980e6,
		.max_mem_clock_hz = 3201e6, .pcie_max_gen = 5, .pcie_max_width = 16,
		.gpm_supported = true, .source = "nvml",
	};
	struct gpu_identity id1 = {
		.index = 1, .uuid = "GPU-bbbb", .name = "NVIDIA H200", .mig_mode = -1,
		.source = "nvml",
	};
	int s0, s1;
	assert_int_equal(bus_attach_gpu(bus, &id0, &s0), 0);
	assert_int_equal(bus_attach_gpu(bus, &id1, &s1), 0);
	assert_int_equal(s0, 0);
	assert_int_equal(s1, 1);

	struct gpu_update *u = calloc(1, sizeof *u);
	assert_non_null(u);
	int64_t now = clock_wall_ns();

	/* GPU 0, fast tier: some fields read, MEM_FREE and MEM_TOTAL tried
	 * and not read. Masks name fields, not tiers, so the test does not
	 * depend on which tier the table gives a field. */
	u->gpu = 0;
	u->tier = TIER_FAST;
	u->wall_ns = now;
	u->mask = FIELD_BIT(F_MEM_FREE) | FIELD_BIT(F_MEM_TOTAL);
	set_field(u, F_GPU_UTIL, 0.75);
	set_field(u, F_MEM_USED, 1073741824.0);
	set_field(u, F_POWER, 312.5);
	set_field(u, F_SM_CLOCK, 1980e6);
	bus_publish(bus, u);

	/* GPU 0, normal tier: throttle bits and processes. */
	memset(u, 0, sizeof *u);
	u->gpu = 0;
	u->tier = TIER_NORMAL;
	u->wall_ns = now;
	set_field(u, F_TEMP, 45);
	set_field(u, F_CLOCK_REASONS, 0x4 | 0x8);
	set_field(u, F_ENERGY, 123456.789);
	set_field(u, F_PROC_COUNT, 2);
	u->has_procs = true;
	u->nprocs = 2;
	u->procs_dropped = 3;
	u->procs[0] = (struct gpu_process){.pid = 1234, .comm = "python", .mem_valid = true,
					   .util_valid = true, .used_bytes = 2147483648ULL,
					   .sm_ratio = 0.5, .mem_ratio = 0.25};
	u->procs[1] = (struct gpu_process){.pid = 99, .comm = "a\"b", .mem_valid = true,
					   .used_bytes = 4096};
	bus_publish(bus, u);

	/* GPU 0, slow tier: a two-row family (ECC by type). */
	memset(u, 0, sizeof *u);
	u->gpu = 0;
	u->tier = TIER_SLOW;
	u->wall_ns = now;
	set_field(u, F_ECC_SBE_VOL, 7);
	set_field(u, F_ECC_DBE_VOL, 0);
	bus_publish(bus, u);

	bus_note_xid(bus, 0, 79, now);
	bus_note_xid(bus, 0, 79, now);
	bus_note_xid(bus, 0, 31, now);
	bus_note_ecc_event(bus, 0, false);

	/* GPU 1 had values, then was lost. */
	memset(u, 0, sizeof *u);
	u->gpu = 1;
	u->tier = TIER_FAST;
	u->wall_ns = now;
	set_field(u, F_POWER, 100);
	set_field(u, F_GPU_UTIL, 0.1);
	bus_publish(bus, u);
	bus_set_health(bus, 1, GPU_HEALTH_LOST, "GPU_IS_LOST");
	free(u);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof *fx);
	assert_non_null(fx);
	assert_int_equal(bus_create(&fx->bus), 0);
	fill_bus(fx->bus);

	fx->nv = calloc(1, sizeof *fx->nv);
	assert_non_null(fx->nv);
	struct nvml_fn_stats *st = &fx->nv->stats[NVML_FN_device_get_power_usage];
	atomic_store(&st->calls, 5);
	atomic_store(&st->latency_ns_sum, 30000);
	atomic_store(&st->bucket[0], 3); /* <= 5 us */
	atomic_store(&st->bucket[2], 2); /* <= 25 us */
	atomic_store(&st->errors[3], 1); /* NOT_SUPPORTED */
	atomic_store(&st->errors[NVML_ERROR_CLASSES - 1], 2);

	fx->cs = (struct collector_stats){.lanes_started = 2, .stalls = 1, .events = 4,
					  .rediscoveries = 1, .sweeps = {10, 2, 1},
					  .lanes_alive = 1};
	fx->self.start_wall_ns = 1700000000LL * NS_PER_SEC;
	fx->self.mode = MODE_NVML;
	snprintf(fx->self.mode_detail, sizeof fx->self.mode_detail, "libnvidia-ml.so.1 580.65");
	atomic_store(&fx->self.scrapes_total, 12);
	atomic_store(&fx->self.last_scrape_ns, 250000);
	atomic_store(&fx->self.http_requests_total, 40);
	atomic_store(&fx->self.http_rejected_total, 3);
	atomic_store(&fx->self.http_shed_total[0], 5);
	atomic_store(&fx->self.http_shed_total[3], 7);
	atomic_store(&fx->self.http_denied_total[4], 9);
	atomic_store(&fx->self.reloads_ok_total, 2);
	atomic_store(&fx->self.reloads_failed_total, 1);
	atomic_store(&fx->self.last_reload_ok, 1);
	buf_init(&fx->out, 1 << 22);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	bus_destroy(fx->bus);
	free(fx->nv);
	buf_free(&fx->out);
	free(fx);
	return 0;
}

static const char *render(struct fixture *fx, bool om)
{
	buf_reset(&fx->out);
	assert_int_equal(prom_render(&fx->out, fx->bus, fx->nv, &fx->cs, &fx->self, om), 0);
	assert_non_null(fx->out.data);
	return fx->out.data;
}

/* True when `line` is one whole line of `text`. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

#define assert_line(text, line)                                                    \
	do {                                                                       \
		if (!has_line((text), (line)))                                     \
			fail_msg("missing line: %s", (line));                      \
	} while (0)
#define assert_no_line(text, line)                                                 \
	do {                                                                       \
		if (has_line((text), (line)))                                      \
			fail_msg("unexpected line: %s", (line));                   \
	} while (0)
#define assert_absent(text, s)                                                     \
	do {                                                                       \
		if (strstr((text), (s)))                                           \
			fail_msg("unexpected text: %s", (s));                      \
	} while (0)

static void test_text_samples(void **state)
{
	const char *t = render(*state, false);
	assert_line(t, "# HELP gpulse_gpu_up 1 while the GPU answers; 0 when it is lost or a call "
		       "to it is stuck.");
	assert_line(t, "# TYPE gpulse_gpu_up gauge");
	assert_line(t, "gpulse_gpu_up{" L0 "} 1");
	assert_line(t, "gpulse_gpu_up{" L1 "} 0");
	assert_line(t, "gpulse_gpu_stale{" L0 "} 0");
	assert_line(t, "gpulse_gpu_stale{" L1 "} 0");
	/* The host's name, as gpulse_gpu_info carries it for DCGM's Hostname. */
	char host[256], line[1024];
	if (gethostname(host, sizeof host - 1) != 0)
		host[0] = '\0';
	host[sizeof host - 1] = '\0';
	snprintf(line, sizeof line,
		 "gpulse_gpu_info{" L0 ",pci_bus_id=\"00000000:19:00.0\","
		 "serial=\"1650924060001\",driver_version=\"580.65.06\",cuda_version=\"13.0\","
		 "architecture=\"hopper\",compute_capability=\"9.0\",mig_mode=\"disabled\","
		 "source=\"nvml\",hostname=\"%s\"} 1", host);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_gpu_info{" L1 ",pci_bus_id=\"\",serial=\"\",driver_version=\"\","
		       "cuda_version=\"\",architecture=\"\",compute_capability=\"\","
		       "mig_mode=\"unknown\",source=\"nvml\",hostname=\"%s\"} 1", host);
	assert_line(t, line);
	assert_line(t, "gpulse_gpu_max_sm_clock_hertz{" L0 "} 1980000000");
	assert_line(t, "gpulse_gpu_max_memory_clock_hertz{" L0 "} 3201000000");
	assert_line(t, "gpulse_gpu_pcie_link_max_generation{" L0 "} 5");
	assert_line(t, "gpulse_gpu_pcie_link_max_width{" L0 "} 16");
	/* Identity numbers that are unknown (0) are left out. */
	assert_absent(t, "gpulse_gpu_max_sm_clock_hertz{" L1);

	/* Field values. */
	assert_line(t, "# TYPE gpulse_gpu_utilization_ratio gauge");
	assert_line(t, "gpulse_gpu_utilization_ratio{" L0 "} 0.75");
	assert_line(t, "gpulse_gpu_memory_used_bytes{" L0 "} 1073741824");
	assert_line(t, "gpulse_gpu_power_watts{" L0 "} 312.5");
	assert_line(t, "gpulse_gpu_sm_clock_hertz{" L0 "} 1980000000");
	assert_line(t, "gpulse_gpu_temperature_celsius{" L0 "} 45");
	assert_line(t, "# TYPE gpulse_gpu_energy_joules_total counter");
	assert_line(t, "gpulse_gpu_energy_joules_total{" L0 "} 123456.789");
	assert_line(t, "gpulse_gpu_processes{" L0 "} 2");
	assert_line(t, "gpulse_gpu_ecc_errors_total{" L0 ",type=\"corrected\"} 7");
	assert_line(t, "gpulse_gpu_ecc_errors_total{" L0 ",type=\"uncorrected\"} 0");

	/* Throttle reasons decoded one by one. */
	assert_line(t, "gpulse_gpu_throttle_active{" L0 ",reason=\"gpu_idle\"} 0");
	assert_line(t, "gpulse_gpu_throttle_active{" L0 ",reason=\"sw_power_cap\"} 1");
	assert_line(t, "gpulse_gpu_throttle_active{" L0 ",reason=\"hw_slowdown\"} 1");
	assert_line(t, "gpulse_gpu_throttle_active{" L0 ",reason=\"display_clocks\"} 0");

	/* Events. */
	assert_line(t, "# TYPE gpulse_gpu_xid_errors_total counter");
	assert_line(t, "gpulse_gpu_xid_errors_total{" L0 ",xid=\"79\"} 2");
	assert_line(t, "gpulse_gpu_xid_errors_total{" L0 ",xid=\"31\"} 1");
	assert_absent(t, "xid=\"other\"");
	assert_line(t, "gpulse_gpu_ecc_events_total{" L0 ",type=\"single_bit\"} 1");
	assert_line(t, "gpulse_gpu_ecc_events_total{" L0 ",type=\"double_bit\"} 0");
	assert_line(t, "gpulse_gpu_lost_total{" L0 "} 0");
	assert_line(t, "gpulse_gpu_lost_total{" L1 "} 1");

	/* Processes: only what was read. */
	assert_line(t, "gpulse_process_gpu_memory_bytes{" L0 ",pid=\"1234\",comm=\"python\"} "
		       "2147483648");
	assert_line(t, "gpulse_process_gpu_memory_bytes{" L0 ",pid=\"99\",comm=\"a\\\"b\"} 4096");
	assert_line(t, "gpulse_process_sm_utilization_ratio{" L0 ",pid=\"1234\",comm=\"python\"} "
		       "0.5");
	assert_line(t, "gpulse_process_memory_utilization_ratio{" L0
		       ",pid=\"1234\",comm=\"python\"} 0.25");
	assert_absent(t, "gpulse_process_sm_utilization_ratio{" L0 ",pid=\"99\"");
	assert_line(t, "gpulse_gpu_processes_dropped{" L0 "} 3");
	assert_line(t, "gpulse_samples_total{" L0 ",tier=\"fast\"} 1");
	assert_line(t, "gpulse_samples_total{" L0 ",tier=\"slow\"} 1");
	assert_line(t, "gpulse_samples_total{" L1 ",tier=\"normal\"} 0");

	/* Daemon families. */
	assert_line(t, "gpulse_build_info{version=\"" GPULSE_VERSION "\"} 1");
	assert_line(t, "gpulse_mode_info{mode=\"nvml\",detail=\"libnvidia-ml.so.1 580.65\"} 1");
	assert_line(t, "gpulse_start_time_seconds 1700000000");
	assert_line(t, "gpulse_gpus 2");
	assert_line(t, "gpulse_gpus_stale 0");
	assert_line(t, "gpulse_collector_lanes 1");
	assert_line(t, "gpulse_collector_stalls_total 1");
	assert_line(t, "gpulse_collector_rediscoveries_total 1");
	assert_line(t, "gpulse_events_total 4");
	assert_line(t, "gpulse_scrapes_total 12");
	assert_line(t, "gpulse_scrape_duration_seconds 0.00025");
	assert_line(t, "gpulse_http_requests_total 40");
	assert_line(t, "gpulse_http_rejected_total 3");
	assert_line(t, "# TYPE gpulse_http_shed_connections_total counter");
	assert_line(t, "gpulse_http_shed_connections_total{reason=\"head_timeout\"} 5");
	assert_line(t, "gpulse_http_shed_connections_total{reason=\"evicted\"} 0");
	assert_line(t, "gpulse_http_shed_connections_total{reason=\"per_address\"} 0");
	assert_line(t, "gpulse_http_shed_connections_total{reason=\"busy\"} 7");
	assert_line(t, "# TYPE gpulse_http_denied_total counter");
	assert_line(t, "gpulse_http_denied_total{reason=\"unauthorized\"} 0");
	assert_line(t, "gpulse_http_denied_total{reason=\"client_certificate\"} 0");
	assert_line(t, "gpulse_http_denied_total{reason=\"login_limited\"} 9");
	assert_line(t, "gpulse_config_reloads_total{result=\"success\"} 2");
	assert_line(t, "gpulse_config_reloads_total{result=\"failure\"} 1");
	assert_line(t, "gpulse_config_last_reload_successful 1");
	assert_line(t, "process_start_time_seconds 1700000000");
	assert_line(t, "# TYPE process_cpu_seconds_total counter");
	assert_non_null(strstr(t, "\nprocess_resident_memory_bytes "));
	assert_absent(t, "# EOF");
}

static void test_absent_fields_and_lost_gpu(void **state)
{
	const char *t = render(*state, false);
	/* No GPU has these: not even a header. */
	assert_absent(t, "gpulse_gpu_memory_free_bytes");
	assert_absent(t, "gpulse_gpu_memory_temperature_celsius");
	assert_absent(t, "gpulse_gpu_sm_active_ratio");
	/* The lost GPU had values; none may show. */
	assert_absent(t, "gpulse_gpu_power_watts{" L1);
	assert_absent(t, "gpulse_gpu_utilization_ratio{" L1);
	assert_absent(t, "gpulse_gpu_throttle_active{" L1);
	assert_absent(t, "gpulse_process_gpu_memory_bytes{" L1);
	assert_absent(t, "gpulse_gpu_xid_errors_total{" L1);
	/* A field never read is not a zero. */
	assert_absent(t, "gpulse_gpu_memory_total_bytes");
}

static void test_stale_gpu(void **state)
{
	struct fixture *fx = *state;
	bus_set_health(fx->bus, 0, GPU_HEALTH_STALE, "nvmlDeviceGetPowerUsage stuck");
	const char *t = render(fx, false);
	assert_line(t, "gpulse_gpu_up{" L0 "} 0");
	assert_line(t, "gpulse_gpu_stale{" L0 "} 1");
	assert_line(t, "gpulse_gpus_stale 1");
	bus_set_health(fx->bus, 0, GPU_HEALTH_UP, "");
}

/* The sample's family under the format's rules, or false. */
static bool sample_in_family(const char *sample, size_t n, const char *fam, const char *type,
			     bool om)
{
	size_t fn = strlen(fam);
	if (n == fn && memcmp(sample, fam, n) == 0)
		return !om || (strcmp(type, "counter") != 0 && strcmp(type, "info") != 0);
	if (n <= fn || memcmp(sample, fam, fn) != 0)
		return false;
	const char *suffix = sample + fn;
	size_t sn = n - fn;
#define IS(s) (sn == sizeof(s) - 1 && memcmp(suffix, s, sn) == 0)
	if (strcmp(type, "histogram") == 0)
		return IS("_bucket") || IS("_sum") || IS("_count");
	if (om && strcmp(type, "counter") == 0)
		return IS("_total");
	if (om && strcmp(type, "info") == 0)
		return IS("_info");
#undef IS
	return false;
}

static bool is_name_char(char c, bool first)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (!first && c >= '0' && c <= '9') || (first && c == ':');
}

/* A sample line is name{label="value",...} value: the labels are well
 * formed, with only the three escapes the format has. Returns the value's start. */
static const char *check_sample_syntax(const char *line, size_t len)
{
	const char *p = line, *end = line + len;
	assert_true(is_name_char(*p, true));
	while (p < end && (is_name_char(*p, false) || *p == ':'))
		p++;
	if (p < end && *p == '{') {
		p++;
		while (p < end && *p != '}') {
			if (!is_name_char(*p, true) || *p == ':')
				fail_msg("bad label name in: %.*s", (int)len, line);
			while (p < end && is_name_char(*p, false))
				p++;
			if (p + 1 >= end || p[0] != '=' || p[1] != '"')
				fail_msg("bad label in: %.*s", (int)len, line);
			p += 2;
			while (p < end && *p != '"') {
				if (*p == '\\') {
					p++;
					if (p >= end || (*p != '\\' && *p != '"' && *p != 'n'))
						fail_msg("bad escape in: %.*s", (int)len, line);
				}
				p++;
			}
			if (p >= end)
				fail_msg("unterminated label value in: %.*s", (int)len, line);
			p++;
			if (p < end && *p == ',')
				p++;
		}
		if (p >= end)
			fail_msg("unterminated labels in: %.*s", (int)len, line);
		p++;
	}
	if (p >= end || *p != ' ')
		fail_msg("no value in: %.*s", (int)len, line);
	return p + 1;
}

/* Every family has one HELP then one TYPE, appears once, and all its
 * samples follow before the next family. */
static void check_grouping(const char *text, bool om, int min_families)
{
	char seen[256][128];
	int nseen = 0;
	char fam[128] = "", type[32] = "";
	int samples_in_fam = -1;
	bool eof = false;
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		assert_non_null(nl);
		size_t len = (size_t)(nl - line);
		assert_false(eof);
		if (len >= 7 && memcmp(line, "# HELP ", 7) == 0) {
			if (samples_in_fam == 0)
				fail_msg("family %s has no samples", fam);
			const char *name = line + 7, *sp = memchr(name, ' ', len - 7);
			assert_non_null(sp);
			snprintf(fam, sizeof fam, "%.*s", (int)(sp - name), name);
			for (int i = 0; i < nseen; i++)
				if (strcmp(seen[i], fam) == 0)
					fail_msg("family %s appears twice", fam);
			assert_true(nseen < 256);
			snprintf(seen[nseen++], sizeof seen[0], "%s", fam);
			/* TYPE must follow at once, for the same name. */
			const char *tl = nl + 1;
			char expect[160];
			snprintf(expect, sizeof expect, "# TYPE %s ", fam);
			if (strncmp(tl, expect, strlen(expect)) != 0)
				fail_msg("HELP %s is not followed by its TYPE", fam);
			const char *tn = tl + strlen(expect), *tend = strchr(tn, '\n');
			snprintf(type, sizeof type, "%.*s", (int)(tend - tn), tn);
			samples_in_fam = 0;
			line = tend + 1;
			continue;
		}
		if (len == 5 && memcmp(line, "# EOF", 5) == 0) {
			assert_true(om);
			eof = true;
			line = nl + 1;
			continue;
		}
		assert_false(line[0] == '#');
		size_t name_len = strcspn(line, "{ ");
		if (!sample_in_family(line, name_len, fam, type, om))
			fail_msg("sample %.*s outside its family (current: %s %s)", (int)len, line,
				 fam, type);
		samples_in_fam++;
		/* The labels are well formed and the value parses. */
		const char *v = check_sample_syntax(line, len);
		char *end;
		strtod(v, &end);
		if (end != nl)
			fail_msg("bad value in: %.*s", (int)len, line);
		line = nl + 1;
	}
	assert_true(samples_in_fam != 0);
	assert_int_equal(eof, om);
	assert_true(nseen >= min_families);
}

static void test_grouping_text(void **state)
{
	check_grouping(render(*state, false), false, 40);
}

static void test_openmetrics(void **state)
{
	const char *t = render(*state, true);
	check_grouping(t, true, 40);
	size_t n = strlen(t);
	assert_true(n > 6);
	assert_string_equal(t + n - 6, "# EOF\n");
	/* Counter families drop _total on HELP and TYPE, samples keep it. */
	assert_line(t, "# TYPE gpulse_gpu_ecc_errors counter");
	assert_absent(t, "# TYPE gpulse_gpu_ecc_errors_total");
	assert_absent(t, "# HELP gpulse_gpu_ecc_errors_total");
	assert_line(t, "gpulse_gpu_ecc_errors_total{" L0 ",type=\"corrected\"} 7");
	assert_line(t, "# TYPE gpulse_gpu_xid_errors counter");
	assert_line(t, "# TYPE gpulse_nvml_calls counter");
	assert_line(t, "# TYPE process_cpu_seconds counter");
	assert_line(t, "# TYPE gpulse_gpu_energy_joules counter");
	assert_line(t, "gpulse_gpu_energy_joules_total{" L0 "} 123456.789");
	/* Info families use the info type. */
	assert_line(t, "# TYPE gpulse_build info");
	assert_line(t, "gpulse_build_info{version=\"" GPULSE_VERSION "\"} 1");
	assert_line(t, "# TYPE gpulse_gpu info");
	/* Gauges are as in the text format. */
	assert_line(t, "# TYPE gpulse_gpu_up gauge");
	assert_line(t, "gpulse_gpu_up{" L1 "} 0");
	/* Integer le values get ".0". */
	assert_line(t, "gpulse_nvml_call_duration_seconds_bucket{call=\"nvmlDeviceGetPowerUsage\","
		       "le=\"1.0\"} 5");
	assert_absent(t, "_total_total");
}

static void test_nvml_families(void **state)
{
	const char *t = render(*state, false);
	const char *c = "call=\"nvmlDeviceGetPowerUsage\"";
	char line[256];
	assert_line(t, "# TYPE gpulse_nvml_calls_total counter");
	snprintf(line, sizeof line, "gpulse_nvml_calls_total{%s} 5", c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_errors_total{%s,error=\"NOT_SUPPORTED\"} 1", c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_errors_total{%s,error=\"OTHER\"} 2", c);
	assert_line(t, line);
	assert_line(t, "# TYPE gpulse_nvml_call_duration_seconds histogram");
	/* Cumulative buckets from the non-cumulative counts 3, 0, 2. */
	snprintf(line, sizeof line, "gpulse_nvml_call_duration_seconds_bucket{%s,le=\"1e-05\"} 3",
		 c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_call_duration_seconds_bucket{%s,le=\"5e-05\"} 3",
		 c);
	assert_line(t, line);
	snprintf(line, sizeof line,
		 "gpulse_nvml_call_duration_seconds_bucket{%s,le=\"0.00025\"} 5", c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_call_duration_seconds_bucket{%s,le=\"1\"} 5", c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_call_duration_seconds_bucket{%s,le=\"+Inf\"} 5",
		 c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_call_duration_seconds_sum{%s} 3e-05", c);
	assert_line(t, line);
	snprintf(line, sizeof line, "gpulse_nvml_call_duration_seconds_count{%s} 5", c);
	assert_line(t, line);
	/* Functions never called are left out. */
	assert_absent(t, "call=\"nvmlDeviceGetTemperature\"");
}

static void test_optional_inputs(void **state)
{
	(void)state;
	struct bus *bus;
	assert_int_equal(bus_create(&bus), 0);
	struct buf out;
	buf_init(&out, 1 << 20);
	assert_int_equal(prom_render(&out, bus, NULL, NULL, NULL, false), 0);
	check_grouping(out.data, false, 4);
	assert_line(out.data, "gpulse_gpus 0");
	assert_absent(out.data, "gpulse_gpu_up");
	assert_absent(out.data, "gpulse_nvml");
	assert_absent(out.data, "gpulse_collector");
	assert_absent(out.data, "gpulse_mode_info");
	assert_line(out.data, "gpulse_build_info{version=\"" GPULSE_VERSION "\"} 1");
	buf_reset(&out);
	assert_int_equal(prom_render(&out, bus, NULL, NULL, NULL, true), 0);
	check_grouping(out.data, true, 4);
	buf_free(&out);
	bus_destroy(bus);
}

static void test_output_bound(void **state)
{
	struct fixture *fx = *state;
	struct buf small;
	buf_init(&small, 1000);
	assert_int_equal(prom_render(&small, fx->bus, fx->nv, &fx->cs, &fx->self, false),
			 GPULSE_ELIMIT);
	assert_true(small.len <= 1000);
	buf_free(&small);
}

static void test_promtool(void **state)
{
	if (system("command -v promtool >/dev/null 2>&1") != 0)
		skip();
	const char *t = render(*state, false);
	char path[] = "/tmp/gpulse-prom-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
	close(fd);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "promtool check metrics < %s", path);
	int rc = system(cmd);
	unlink(path);
	assert_int_equal(rc, 0);
}

static void test_wants_openmetrics(void **state)
{
	(void)state;
	static const struct {
		const char *accept;
		bool om;
	} cases[] = {
		{NULL, false},
		{"", false},
		{"*/*", false},
		{"text/plain", false},
		{"application/openmetrics-text", true},
		{"application/openmetrics-text; version=1.0.0; charset=utf-8", true},
		/* What Prometheus 2.x sends. */
		{"application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
		 "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1", true},
		/* What Prometheus sends when told to scrape the text format. */
		{"text/plain;version=0.0.4;q=1,*/*;q=0.1", false},
		{"application/openmetrics-text;q=0", false},
		{"application/openmetrics-text;q=0.5,text/plain", false},
		{"text/plain;q=0.5,application/openmetrics-text", true},
		{"application/openmetrics-text;version=2.0.0", false},
		{"APPLICATION/OpenMetrics-Text ; Q=0.9 , text/plain;q=0.8", true},
		{"application/openmetrics-text, text/plain", true},
		{"text/plain, application/openmetrics-text", false},
		{"application/*", true},
		{"application/*;q=0.3,text/*;q=0.2", true},
		{"text/*,application/openmetrics-text", true},
		{"application/openmetrics-text;q=abc", false},
		{"application/openmetrics-text;q=1.5", false},
		{"application/openmetrics-text;foo=\"a,b;q=0\";q=0.9,text/plain;q=0.1", true},
		{"application/openmetrics-text;foo=\"unterminated", true},
		{";;;,,,===", false},
		{"application", false},
		{"/openmetrics-text", false},
		{"application/openmetrics-text junk", false},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		if (prom_wants_openmetrics(cases[i].accept) != cases[i].om)
			fail_msg("Accept \"%s\": expected %s", cases[i].accept ? cases[i].accept : "(null)",
				 cases[i].om ? "openmetrics" : "text");
}

static void check_same_as_buf(double v)
{
	char fast[PROM_DOUBLE_MAX];
	struct buf ref;
	buf_init(&ref, 64);
	assert_int_equal(buf_put_double(&ref, v), 0);
	size_t n = prom_format_double(fast, v);
	if (n != ref.len || strcmp(fast, ref.data) != 0)
		fail_msg("%.17g: \"%s\" but buf_put_double writes \"%s\"", v, fast, ref.data);
	buf_free(&ref);
}

/* The hand-written formatter writes exactly what buf_put_double writes. */
static void test_format_double(void **state)
{
	(void)state;
	static const double fixed[] = {
		0, -0.0, 1, -1, 0.5, 0.1, 0.2, 0.3, 1e-4, 1.5e-4, 9.99e-5, 0.000123456789012345,
		1e-5, 2.5e-5, 1e15, -1e15, 999999999999999.9, 99999999999999.98, 1e14 + 0.5,
		123456.789, 312.5, 0.5700000000000001, 57 * 0.01, 1e300, -1e-300, 5e-324,
		1.7976931348623157e308, 4294967296.5, 0.1 + 0.2, 1.0 / 3, 2.0 / 3, 100.0 / 7,
		NAN, INFINITY, -INFINITY,
	};
	for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
		check_same_as_buf(fixed[i]);
	/* Recording columns times their scales, as collectors store them. */
	static const double scales[] = {0.01, 1e-3, 1e6, 1048576.0, 1, 0.1};
	for (int k = -2000; k <= 20000; k++)
		for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
			check_same_as_buf(k * scales[s]);
			check_same_as_buf(k / 100.0 + s);
		}
	/* Random bit patterns and random magnitudes. */
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	for (int i = 0; i < 200000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		double v;
		memcpy(&v, &x, sizeof v);
		check_same_as_buf(v);
		check_same_as_buf((double)(x % 100000000) / pow(10, (double)(x % 13)));
		/* Decimals of 1 to 16 significant digits, read by strtod, with
		 * 0 to 22 zeros after the point: the short-decimal path's domain
		 * and its edges. */
		char text[64];
		int digits = 1 + (int)(x % 16), zeros = (int)((x >> 8) % 23);
		int o = snprintf(text, sizeof text, "%s0.%0*d", (x >> 20) & 1 ? "-" : "", zeros, 0);
		if (zeros == 0)
			o--; /* "0." then the digits */
		uint64_t y = x;
		for (int k = 0; k < digits; k++, y /= 10)
			text[o++] = (char)('1' + y % 9);
		text[o] = '\0';
		check_same_as_buf(strtod(text, NULL));
	}
}

static void test_content_types(void **state)
{
	(void)state;
	assert_string_equal(prom_content_type_text, "text/plain; version=0.0.4; charset=utf-8");
	assert_string_equal(prom_content_type_openmetrics,
			    "application/openmetrics-text; version=1.0.0; charset=utf-8");
}

/* A label value of the registry's families (here a rule group) escaped
 * wherever its quote, backslash or newline falls: the text writer checks
 * values eight bytes at a time, so every position of a 1- to 24-byte
 * value is tried against the escape written out by hand. */
static char rule_group_name[64];

static size_t one_rule_group(void *ctx, struct rule_group_self_stats *out, size_t max)
{
	(void)ctx;
	(void)max;
	snprintf(out[0].name, sizeof out[0].name, "%s", rule_group_name);
	out[0].evaluations_total = 3;
	return 1;
}

static void test_label_escapes_every_position(void **state)
{
	struct fixture *fx = *state;
	fx->self.rule_stats = one_rule_group;
	static const char specials[] = {'"', '\\', '\n'};
	static const char *const escaped[] = {"\\\"", "\\\\", "\\n"};
	for (size_t len = 1; len <= 24; len++)
		for (size_t pos = 0; pos <= len; pos++)
			for (size_t k = 0; k < 3; k++) {
				/* pos == len: no special byte at all */
				char want[256] = "gpulse_rule_evaluations_total{rule_group=\"";
				size_t w = strlen(want);
				for (size_t i = 0; i < len; i++) {
					char c = i == pos ? specials[k] : (char)('a' + i % 26);
					rule_group_name[i] = c;
					if (i == pos) {
						memcpy(want + w, escaped[k], 2);
						w += 2;
					} else {
						want[w++] = c;
					}
				}
				rule_group_name[len] = '\0';
				snprintf(want + w, sizeof want - w, "\"} 3");
				const char *text = render(fx, false);
				assert_line(text, want);
			}
	fx->self.rule_stats = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_text_samples, setup, teardown),
		cmocka_unit_test_setup_teardown(test_label_escapes_every_position, setup, teardown),
		cmocka_unit_test_setup_teardown(test_absent_fields_and_lost_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stale_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grouping_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_openmetrics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nvml_families, setup, teardown),
		cmocka_unit_test(test_optional_inputs),
		cmocka_unit_test_setup_teardown(test_output_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_promtool, setup, teardown),
		cmocka_unit_test(test_wants_openmetrics),
		cmocka_unit_test(test_format_double),
		cmocka_unit_test(test_content_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
