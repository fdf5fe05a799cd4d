/* `gpulse status` rendering: a replay with two GPUs, one lost and short of
 * most fields, rendered without colour into memory. Missing values must
 * print "-" (never 0), the replay must be unmistakable, throttle reasons
 * must be words, processes must be listed, and daemon text must not reach
 * the terminal raw. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/cmd_status.h"
#include "common/status.h"

static const char doc[] =
	"{\"status\":\"success\",\"data\":{\"mode\":\"replay\","
	"\"detail\":\"data/recordings/h200-phases-10hz.csv\",\"replay_speed\":10,"
	"\"start_time\":1795965289.3,\"gpus\":["
	/* GPU 0: up, every field, power capped, one process, an XID */
	"{\"gpu\":0,\"uuid\":\"GPU-3f2a1b4c-aaaa-bbbb-cccc-123456789abc\",\"model\":\"NVIDIA H200\","
	"\"pci_bus_id\":\"00000000:19:00.0\",\"serial\":\"1652\",\"driver_version\":\"580.159.04\","
	"\"cuda_version\":\"13.0\",\"architecture\":\"hopper\",\"compute_capability\":\"9.0\","
	"\"mig_mode\":\"disabled\",\"source\":\"replay\",\"health\":\"up\",\"health_reason\":\"\","
	"\"max_sm_clock_hz\":1.98e9,\"max_mem_clock_hz\":3.201e9,\"pcie_max_gen\":5,"
	"\"pcie_max_width\":16,\"gpm_supported\":true,"
	"\"sample_time\":{\"fast\":1795965289.3,\"normal\":1795965289.3,\"slow\":1795965280.0},"
	"\"fields\":{\"gpu_util\":0.93,\"mem_util\":0.5,\"mem_used\":1.2e11,\"mem_free\":3e10,"
	"\"mem_total\":1.5e11,\"mem_reserved\":5e8,\"power\":690.1,\"sm_clock\":1.47e9,"
	"\"mem_clock\":3.201e9,\"temp\":60,\"mem_temp\":55,\"pstate\":0,\"clock_reasons\":4,"
	"\"energy\":123456.7,\"proc_count\":1,\"gpm_graphics\":0.97,\"gpm_sm\":0.95,"
	"\"gpm_occupancy\":0.41,\"gpm_integer\":0.02,\"gpm_tensor\":0.93,\"gpm_dfma\":0,"
	"\"gpm_hmma\":0.9,\"gpm_imma\":0,\"gpm_dram\":0.3,\"gpm_fp64\":0,\"gpm_fp32\":0.05,"
	"\"gpm_fp16\":0.01,\"gpm_pcie_tx\":1.2e9,\"gpm_pcie_rx\":8e8,\"gpm_nvlink_tx\":0,"
	"\"gpm_nvlink_rx\":0,\"power_limit\":700,\"ecc_mode\":1,\"ecc_sbe_vol\":0,"
	"\"ecc_dbe_vol\":0,\"ecc_sbe_agg\":0,\"ecc_dbe_agg\":0,\"remap_cor\":0,\"remap_unc\":0,"
	"\"remap_pending\":0,\"remap_failed\":0,\"pcie_replay\":0,\"pcie_gen\":5,\"pcie_width\":16},"
	"\"stale_fields\":[],\"throttle_reasons\":[\"sw_power_cap\"],"
	"\"processes\":[{\"pid\":4242,\"comm\":\"python3\",\"used_bytes\":1.0e10,\"sm_ratio\":0.9,"
	"\"mem_ratio\":0.3},{\"pid\":777,\"comm\":\"evil\\u001b[2Jx\",\"used_bytes\":2048}],"
	"\"processes_dropped\":2,\"xid\":[{\"code\":79,\"count\":1}],\"xid_other\":0,"
	"\"ecc_events\":{\"single_bit\":0,\"double_bit\":0}},"
	/* GPU 1: lost; almost nothing could be read */
	"{\"gpu\":1,\"uuid\":\"GPU-99999999-0000-1111-2222-333333333333\",\"model\":\"NVIDIA H200\","
	"\"source\":\"replay\",\"health\":\"lost\",\"health_reason\":\"GPU fell off the bus\","
	"\"gpm_supported\":true,\"fields\":{\"mem_total\":1.5e11,\"clock_reasons\":72},"
	"\"stale_fields\":[\"temp\"],\"processes\":[],\"xid\":[]}"
	"]}}";

static char *render(const char *json, bool color, int *rc_out)
{
	json_error_t jerr;
	json_t *root = json_loads(json, 0, &jerr);
	if (!root)
		fail_msg("test JSON does not parse: %s at %d", jerr.text, jerr.position);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	*rc_out = status_render(root, f, color);
	fclose(f);
	json_decref(root);
	return text;
}

/* The line of `text` that contains `needle`, copied into `line`. */
static const char *line_with(const char *text, const char *needle, char *line, size_t len)
{
	const char *p = strstr(text, needle);
	if (!p)
		fail_msg("no \"%s\" in:\n%s", needle, text);
	const char *start = p, *end = strchr(p, '\n');
	while (start > text && start[-1] != '\n')
		start--;
	if (!end)
		end = p + strlen(p);
	snprintf(line, len, "%.*s", (int)(end - start), start);
	return line;
}

/* The text from `needle` (the GPU's title) to the next GPU or the end. */
static char *gpu_block(const char *text, const char *needle)
{
	const char *p = strstr(text, needle);
	if (!p)
		fail_msg("no \"%s\" in:\n%s", needle, text);
	const char *end = strstr(p + 1, "\nGPU ");
	size_t n = end ? (size_t)(end - p) : strlen(p);
	char *s = malloc(n + 1);
	assert_non_null(s);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

static void assert_contains(const char *text, const char *needle)
{
	if (!strstr(text, needle))
		fail_msg("missing \"%s\" in:\n%s", needle, text);
}

static void test_render_plain(void **state)
{
	(void)state;
	int rc;
	char *out = render(doc, false, &rc);
	char line[512];
	assert_int_equal(rc, 0);
	/* No escape sequences at all without colour. */
	assert_null(strchr(out, '\033'));

	/* The replay is unmistakable: a banner first, and the mode. */
	assert_true(strncmp(out, "*** REPLAY of data/recordings/h200-phases-10hz.csv at speed 10x", 63) == 0);
	assert_contains(out, "mode REPLAY");
	assert_contains(out, "2 GPUs");
	assert_contains(out, "driver 580.159.04");
	assert_contains(out, "CUDA 13.0");

	char *g0 = gpu_block(out, "GPU 0  NVIDIA H200");
	line_with(g0, "GPU 0", line, sizeof line);
	assert_contains(line, "GPU-3f2a1b4c ");
	assert_contains(line, "00000000:19:00.0");
	assert_contains(line, "up");
	assert_contains(line, "[replay]");
	assert_contains(line_with(g0, "util", line, sizeof line), "93%");
	assert_contains(line, "[###################.]");
	assert_contains(line_with(g0, "memory  ", line, sizeof line), "111.8 GiB / 139.7 GiB (80%)");
	assert_contains(line_with(g0, "power", line, sizeof line), "690 / 700 W (99%)");
	assert_contains(line, "energy 123.5 kJ");
	assert_contains(line_with(g0, "temp", line, sizeof line), "60 C");
	assert_contains(line, "HBM 55 C");
	assert_contains(line, "P0");
	assert_contains(line_with(g0, "clocks ", line, sizeof line), "SM 1470 / 1980 MHz");
	assert_contains(line, "memory 3201 / 3201 MHz");
	assert_contains(line, "PCIe gen 5 x16");
	assert_contains(line_with(g0, "GPM", line, sizeof line), "SM active 95%");
	assert_contains(line, "tensor 93%");
	assert_contains(line, "DRAM bandwidth 30%");
	assert_contains(g0, "PCIe tx 1.20 GB/s  rx 0.80 GB/s");
	/* Throttle reasons in words. */
	assert_contains(g0, "clocks held down by: software power cap\n");
	/* An XID makes the error summary speak up. */
	assert_contains(g0, "XID 79 x1");
	/* Processes: a table, missing per-process values as "-". */
	assert_contains(line_with(g0, "4242", line, sizeof line), "python3");
	assert_contains(line, "9.3 GiB");
	assert_contains(line, "90%");
	assert_contains(line, "30%");
	line_with(g0, "  777 ", line, sizeof line);
	assert_contains(line, "2 KiB");
	assert_contains(line, "   -     -");
	/* A process name cannot drive the terminal. */
	assert_contains(line, "evil?[2Jx");
	assert_contains(g0, "+2 more not shown");
	free(g0);

	char *g1 = gpu_block(out, "GPU 1  NVIDIA H200");
	assert_contains(line_with(g1, "GPU 1", line, sizeof line), "LOST (GPU fell off the bus)");
	assert_contains(line_with(g1, "stale", line, sizeof line), "temp");
	/* Unread values are "-", never 0; an unknown ratio draws no bar. */
	line_with(g1, "util", line, sizeof line);
	assert_contains(line, "[                    ]  -");
	assert_null(strstr(line, "0%"));
	assert_contains(line_with(g1, "memory  ", line, sizeof line), "- / 139.7 GiB");
	assert_contains(line_with(g1, "power", line, sizeof line), "- / - W");
	assert_contains(line, "energy -");
	assert_contains(line_with(g1, "HBM", line, sizeof line), "temp      -   HBM -   P-state -");
	assert_contains(line_with(g1, "clocks ", line, sizeof line), "SM - / - MHz");
	assert_contains(line_with(g1, "GPM", line, sizeof line), "SM active -");
	assert_contains(g1, "PCIe tx -  rx -");
	/* No decoded list: the raw mask is decoded instead (0x8 | 0x40). */
	assert_contains(g1, "clocks held down by: hardware slowdown (thermal or power brake), "
			    "hardware thermal slowdown\n");
	assert_contains(g1, "processes none");
	assert_contains(g1, "errors    - (ECC counters not read; no XID events)");
	assert_null(strstr(g1, " 0 C"));
	assert_null(strstr(g1, " 0 W"));
	assert_null(strstr(g1, "0 MHz"));
	free(g1);
	free(out);
}

static void test_render_color(void **state)
{
	(void)state;
	int rc;
	char *out = render(doc, true, &rc);
	assert_int_equal(rc, 0);
	/* The banner is bold black on yellow. */
	assert_non_null(strstr(out, "\033[1;30;43m  REPLAY  \033[0m"));
	assert_non_null(strstr(out, "\033[1;31mLOST"));
	/* The hostile process name still cannot inject its own sequence. */
	assert_null(strstr(out, "\033[2J"));
	free(out);
}

static void test_render_modes(void **state)
{
	(void)state;
	int rc;
	char *out = render("{\"status\":\"success\",\"data\":{\"mode\":\"none\","
			   "\"detail\":\"NVIDIA driver not loaded\",\"gpus\":[]}}",
			   false, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "mode none"));
	assert_non_null(strstr(out, "NVIDIA driver not loaded"));
	assert_non_null(strstr(out, "no GPUs to show"));
	assert_null(strstr(out, "REPLAY"));
	free(out);

	out = render("{\"data\":{\"mode\":\"nvml\",\"gpus\":[{\"gpu\":0,\"health\":\"stale\","
		     "\"health_reason\":\"nvmlDeviceGetPowerUsage stuck for 2.1 s\","
		     "\"gpm_supported\":false,\"fields\":{\"clock_reasons\":0,\"proc_count\":3}}]}}",
		     false, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "mode nvml"));
	assert_null(strstr(out, "REPLAY"));
	assert_non_null(strstr(out, "STALE (nvmlDeviceGetPowerUsage stuck for 2.1 s)"));
	assert_non_null(strstr(out, "GPM       not supported on this GPU"));
	assert_non_null(strstr(out, "clocks not held down"));
	assert_non_null(strstr(out, "3 running (details not read)"));
	assert_non_null(strstr(out, "driver -"));
	free(out);

	/* Not the documented shape: refused, not guessed at. */
	out = render("{\"status\":\"success\",\"data\":{\"gpus\":{}}}", false, &rc);
	assert_int_equal(rc, GPULSE_EPARSE);
	free(out);
	out = render("[1,2]", false, &rc);
	assert_int_equal(rc, GPULSE_EPARSE);
	free(out);
}

static void test_print_json_unchanged(void **state)
{
	(void)state;
	static const char in[] = "{\"a\":[1.10,2e3,{}],\"b\":{\"c\":\"x, {y}: \\\"z\\\"\",\"d\":[]},"
				 "\"e\":1795965289.3}";
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_int_equal(client_print_json(f, in, strlen(in)), 0);
	fclose(f);
	assert_string_equal(text,
			    "{\n"
			    "  \"a\": [\n"
			    "    1.10,\n"
			    "    2e3,\n"
			    "    {}\n"
			    "  ],\n"
			    "  \"b\": {\n"
			    "    \"c\": \"x, {y}: \\\"z\\\"\",\n"
			    "    \"d\": []\n"
			    "  },\n"
			    "  \"e\": 1795965289.3\n"
			    "}\n");
	/* Same data once parsed again. */
	json_t *a = json_loads(in, 0, NULL), *b = json_loads(text, 0, NULL);
	assert_true(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_render_plain),
		cmocka_unit_test(test_render_color),
		cmocka_unit_test(test_render_modes),
		cmocka_unit_test(test_print_json_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
