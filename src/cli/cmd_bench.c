/* gpulse bench: measure a GPU (src/bench/bench_engine.h) and say how it
 * compares with its datasheet, with its own past and with the fleet's
 * cards of the same model (docs/internals/bench.md). Runs here, or in
 * gpulsed (--via-daemon: POST /api/v1/bench, then its status until the
 * run ends); --history shows the stored trend per figure. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_compare.h"
#include "bench/bench_engine.h"
#include "bench/bench_result.h"
#include "common/buf.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/status.h"

#define MAX_COMPARE_FILES 256
#define MAX_FILE_BYTES (1u << 20)
#define VIA_DAEMON_TIMEOUT_S 900

static volatile sig_atomic_t bench_stop;

static void on_signal(int sig)
{
	(void)sig;
	bench_stop = 1;
}

static void bench_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse bench [--gpu N] [--quick|--full] [--json] [--allow-busy]\n"
		"                    [--cublaslt PATH] [--only LIST] [--compare FILE...]\n"
		"       gpulse bench --via-daemon [--gpu N] [--quick|--full] [--json]\n"
		"       gpulse bench --history [--gpu N] [--json]\n"
		"       gpulse bench --screen [--gpu N] [--quick|--full] [--json] (see --screen --help)\n"
		"\n"
		"Measures GPU N (NVML index, default 0): matrix multiply through cuBLASLt at\n"
		"bf16, fp16, fp8 (where the card has it), tf32, fp32 and fp64 on random\n"
		"8192^3 matrices; device memory copy and read bandwidth; pinned and pageable\n"
		"host<->device copies; kernel launch latency and rate. Each figure is the\n"
		"median of timed runs (launches and pageable copies, bound by the host's\n"
		"CPU: the edge of the fastest decile of 40 short repetitions, since a\n"
		"shared host only ever slows them) with min, median, max and spread, the\n"
		"clocks, power and temperature NVML saw meanwhile, the clock event\n"
		"reasons, and its fraction of the card's datasheet peak. It never changes clocks, power limits,\n"
		"persistence, compute mode or MIG. A GPU in use (another process, or busy)\n"
		"is refused unless --allow-busy, and then the run is not a baseline.\n"
		"\n"
		"  --gpu N          the GPU (NVML index; default 0)\n"
		"  --quick          about 15-60 s (the default)\n"
		"  --full           longer and steadier: 30 runs of 0.2 s per figure\n"
		"  -j, --json       the result as JSON (docs/internals/bench.md)\n"
		"  --allow-busy     run on a GPU in use; the result is marked not a baseline\n"
		"  --cublaslt PATH  cuBLASLt to load (env GPULSE_CUBLASLT; default\n"
		"                   libcublasLt.so.13, .12, .11)\n"
		"  --cuda-library PATH   the driver API (env GPULSE_CUDA_LIBRARY; libcuda.so.1)\n"
		"  --nvml-library PATH   NVML (env GPULSE_NVML_LIBRARY; libnvidia-ml.so.1)\n"
		"  --only LIST      some figures: matmul,dram_copy,dram_read,h2d,d2h,launch\n"
		"  --compare FILE...  other hosts' 'gpulse bench --json' results: each figure\n"
		"                   against the median of the same model's cards\n"
		"A local run is also judged against the card's own past when a gpulsed\n"
		"(--url) keeps its history; the table then shows both verdicts, and --json\n"
		"adds them as \"verdicts\".\n"
		"  --via-daemon     run it in gpulsed (a write action: --token-file with the\n"
		"                   write token), which compares it with the card's history\n"
		"                   and keeps it\n"
		"  --history        the stored runs of GPU N per figure, oldest first, with\n"
		"                   the baseline and its noise band (from gpulsed)\n"
		"  --url URL, --token-file FILE   as for every command\n"
		"\n"
		"Exit status: 0 measured (or shown); 1 not measured: no driver, GPU in use,\n"
		"MIG, not enough memory, interrupted, gpulsed unreachable; 2 usage.\n");
}

/* ---- formatting ---- */

static void fmt_value(char *out, size_t len, const char *unit, double v)
{
	if (!isfinite(v))
		snprintf(out, len, "-");
	else if (strcmp(unit, "flop_per_second") == 0)
		snprintf(out, len, "%.1f TFLOP/s", v / 1e12);
	else if (strcmp(unit, "bytes_per_second") == 0)
		snprintf(out, len, v >= 1e12 ? "%.3f TB/s" : "%.1f GB/s", v >= 1e12 ? v / 1e12 : v / 1e9);
	else if (strcmp(unit, "seconds") == 0)
		snprintf(out, len, "%.2f us", v * 1e6);
	else if (strcmp(unit, "launches_per_second") == 0)
		snprintf(out, len, "%.0f k/s", v / 1e3);
	else
		snprintf(out, len, "%g", v);
}

static void fmt_reasons(char *out, size_t len, uint64_t bits)
{
	out[0] = '\0';
	size_t n = 0;
#define FMT_REASON(bit, name)                                                         \
	if ((bits & (bit)) && n < len)                                                \
		n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "", name);
	BENCH_REASONS(FMT_REASON)
#undef FMT_REASON
	if (!out[0])
		snprintf(out, len, "-");
}

static json_t *verdict_of(json_t *verdicts, const struct bench_figure *f)
{
	size_t i;
	json_t *v;
	json_array_foreach(verdicts, i, v) {
		const char *fig = json_string_value(json_object_get(v, "figure"));
		const char *var = json_string_value(json_object_get(v, "variant"));
		if (fig && var && strcmp(fig, f->name) == 0 && strcmp(var, f->variant) == 0)
			return v;
	}
	return NULL;
}

/* "-7.1% > 1.5% REGRESSION", "+0.3% (band 1.5%)", "baseline 2/3". */
static void fmt_verdict(char *out, size_t len, const json_t *part, bool own)
{
	json_t *pts = json_object_get(part, "points");
	json_t *def = json_object_get(part, "deficit_ratio");
	if (!def) {
		if (own && json_integer_value(pts) == 0)
			snprintf(out, len, "no history");
		else if (own)
			snprintf(out, len, "building (%lld runs)", (long long)json_integer_value(pts));
		else
			snprintf(out, len, "-");
		return;
	}
	double d = json_number_value(def);
	bool reg = json_is_true(json_object_get(part, "regression"));
	json_t *band = json_object_get(part, "noise_ratio");
	if (band)
		snprintf(out, len, "%+.1f%% (band %.1f%%%s)%s", -d * 100, json_number_value(band) * 100,
			 json_is_true(json_object_get(part, "too_noisy")) ? ", too noisy" : "",
			 reg ? " REGRESSION" : "");
	else
		snprintf(out, len, "%+.1f%% of %lld%s", -d * 100, (long long)json_integer_value(pts),
			 reg ? " REGRESSION" : "");
}

static void print_result(const struct bench_result *r, json_t *verdicts)
{
	printf("GPU %d  %s  %s  driver %s  CUDA %d.%d  %s run, %.0f s%s\n", r->gpu.index,
	       r->gpu.name, r->gpu.uuid, r->driver[0] ? r->driver : "?",
	       r->cuda_driver_version / 1000, r->cuda_driver_version % 1000 / 10, r->mode,
	       r->duration_s, r->baseline ? "" : "  (NOT A BASELINE)");
	printf("%u SMs, max SM clock %u MHz, memory %u MHz x %u bit, PCIe gen %u x%u (max gen %u x%u)\n",
	       r->gpu.sm_count, r->gpu.max_sm_clock_mhz, r->gpu.max_mem_clock_mhz,
	       r->gpu.mem_bus_width_bits, r->gpu.pcie_gen, r->gpu.pcie_width, r->gpu.pcie_gen_max,
	       r->gpu.pcie_width_max);
	if (r->cublaslt[0])
		printf("cuBLASLt: %s\n", r->cublaslt);
	if (r->host_cpus[0])
		printf("host side on CPUs %s\n", r->host_cpus);
	printf("\n%-15s %-8s %14s %-22s %30s %7s %7s %6s %6s %5s  %-14s", "FIGURE", "VARIANT",
	       "VALUE", "ESTIMATOR", "MIN - MAX", "SPREAD", "OF PEAK", "SM MHZ", "WATTS", "TEMP",
	       "THROTTLE");
	if (verdicts)
		printf("  %-28s %-22s", "VS OWN BASELINE", "VS FLEET");
	printf("\n");
	for (int i = 0; i < r->nfig; i++) {
		const struct bench_figure *f = &r->fig[i];
		char med[32], lo[32], hi[32], mm[72], peak[16], sm[16], w[16], t[16], th[128];
		fmt_value(med, sizeof med, f->unit, f->value);
		fmt_value(lo, sizeof lo, f->unit, f->min);
		fmt_value(hi, sizeof hi, f->unit, f->max);
		snprintf(mm, sizeof mm, "%s - %s", lo, hi);
		if (f->has_peak)
			snprintf(peak, sizeof peak, "%.0f%%", f->peak_fraction * 100);
		else
			snprintf(peak, sizeof peak, "-");
		if (f->sm_clock_mhz.valid)
			snprintf(sm, sizeof sm, "%.0f", f->sm_clock_mhz.mean);
		else
			snprintf(sm, sizeof sm, "-");
		if (f->power_watts.valid)
			snprintf(w, sizeof w, "%.0f", f->power_watts.max);
		else
			snprintf(w, sizeof w, "-");
		if (f->temperature_celsius.valid)
			snprintf(t, sizeof t, "%.0fC", f->temperature_celsius.max);
		else
			snprintf(t, sizeof t, "-");
		fmt_reasons(th, sizeof th, f->throttle_reasons);
		printf("%-15s %-8s %14s %-22s %30s %6.1f%% %7s %6s %6s %5s  %-14s", f->name,
		       f->variant[0] ? f->variant : "-", med, f->estimator[0] ? f->estimator : "-", mm,
		       f->spread_ratio * 100, peak, sm, w, t, th);
		json_t *v = verdicts ? verdict_of(verdicts, f) : NULL;
		if (v) {
			char own[64], fleet[64];
			fmt_verdict(own, sizeof own, json_object_get(v, "own"), true);
			fmt_verdict(fleet, sizeof fleet, json_object_get(v, "fleet"), false);
			printf("  %-28s %-22s", own, fleet);
		}
		printf("\n");
	}
	for (int i = 0; i < r->nskip; i++)
		printf("skipped %s %s: %s\n", r->skip[i].name, r->skip[i].variant, r->skip[i].why);
	for (int i = 0; i < r->nnotes; i++)
		printf("note: %s\n", r->notes[i]);
	if (verdicts) {
		size_t i;
		json_t *v;
		json_array_foreach(verdicts, i, v) {
			if (json_is_true(json_object_get(v, "new_baseline")) &&
			    json_object_get(v, "previous_driver")) {
				const char *pd = json_string_value(json_object_get(v, "previous_driver"));
				printf("note: the driver changed (was %s): a new baseline starts with this run\n",
				       pd ? pd : "?");
				break;
			}
		}
		json_array_foreach(verdicts, i, v) {
			const char *pm = json_string_value(json_object_get(v, "previous_method"));
			if (json_is_true(json_object_get(v, "new_baseline")) && pm)
				printf("note: %s %s is now made by %s (was %s): its new baseline starts "
				       "with this run\n",
				       json_string_value(json_object_get(v, "figure")),
				       json_string_value(json_object_get(v, "variant")),
				       json_string_value(json_object_get(v, "method")), pm);
		}
	}
}

/* ---- --compare: the fleet's results from files ---- */

static int read_file(const char *path, struct buf *b, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (buf_append(b, chunk, n) != 0) {
			fclose(f);
			snprintf(err, errlen, "%s: larger than %u bytes", path, MAX_FILE_BYTES);
			return GPULSE_ELIMIT;
		}
	int bad = ferror(f);
	fclose(f);
	if (bad) {
		snprintf(err, errlen, "%s: read error", path);
		return GPULSE_EIO;
	}
	return 0;
}

/* The card's stored history from gpulsed (/api/v1/bench/results of its
 * UUID), or NULL when none answers: a local run is judged against its
 * own past too when a gpulsed keeps it. The caller json_decref()s. */
static json_t *own_history(const struct bench_result *r)
{
	char path[256], err[512];
	json_t *doc = NULL;
	struct client_opts o = {.timeout_ms = 2000};
	snprintf(path, sizeof path, "/api/v1/bench/results?gpu=%d&uuid=%s", r->gpu.index, r->gpu.uuid);
	if (client_get_json(&o, path, &doc, NULL, err, sizeof err) != 0)
		return NULL;
	json_t *figs = json_object_get(json_object_get(doc, "data"), "figures");
	if (!json_is_array(figs)) {
		json_decref(doc);
		return NULL;
	}
	json_incref(figs);
	json_decref(doc);
	return figs;
}

/* Verdicts of r's figures against the card's stored history (`hist`, as
 * own_history returns it; may be NULL) and the peers' results of the same
 * model (other cards only), as a JSON array; NULL when there is neither. */
static json_t *verdicts_for(const struct bench_result *r, json_t *hist,
			    const struct bench_result *peers, size_t npeers)
{
	if (!hist && !npeers)
		return NULL;
	struct buf b;
	buf_init(&b, 1u << 20);
	buf_putc(&b, '[');
	static struct bench_point pts[64];
	for (int i = 0; i < r->nfig; i++) {
		const struct bench_figure *f = &r->fig[i];
		double vals[MAX_COMPARE_FILES];
		size_t nv = 0;
		for (size_t p = 0; p < npeers; p++) {
			if (strcmp(peers[p].gpu.name, r->gpu.name) != 0 ||
			    strcmp(peers[p].gpu.uuid, r->gpu.uuid) == 0 || !peers[p].baseline)
				continue;
			const struct bench_figure *pf = bench_result_find(&peers[p], f->name, f->variant);
			if (pf && strcmp(pf->unit, f->unit) == 0 && bench_same_method(pf->method, f->method))
				vals[nv++] = pf->value;
		}
		size_t np = 0;
		size_t k;
		json_t *hf;
		json_array_foreach(hist, k, hf) {
			const char *fig = json_string_value(json_object_get(hf, "figure"));
			const char *var = json_string_value(json_object_get(hf, "variant"));
			const char *unit = json_string_value(json_object_get(hf, "unit"));
			if (!fig || !var || !unit || strcmp(fig, f->name) || strcmp(var, f->variant) ||
			    strcmp(unit, f->unit))
				continue;
			size_t j;
			json_t *pt;
			json_array_foreach(json_object_get(hf, "points"), j, pt) {
				if (np >= sizeof pts / sizeof pts[0])
					break;
				const char *drv = json_string_value(json_object_get(pt, "driver"));
				const char *meth = json_string_value(json_object_get(pt, "method"));
				pts[np] = (struct bench_point){
					.value = json_number_value(json_object_get(pt, "value")),
					.baseline = json_is_true(json_object_get(pt, "baseline"))};
				snprintf(pts[np].driver, sizeof pts[np].driver, "%s", drv ? drv : "");
				snprintf(pts[np].method, sizeof pts[np].method, "%s", meth ? meth : "");
				np++;
			}
		}
		struct bench_verdict v;
		bench_compare(pts, np, r->driver, f->method, f->value, f->higher_is_better, vals, nv,
			      NULL, &v);
		if (!r->baseline)
			v.own_regression = v.fleet_regression = false;
		if (i)
			buf_putc(&b, ',');
		bench_verdict_to_json(f, &v, &b);
	}
	buf_putc(&b, ']');
	json_t *j = b.failed ? NULL : json_loadb(b.data, b.len, 0, NULL);
	buf_free(&b);
	return j;
}

static int load_peers(char **files, int nfiles, struct bench_result **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (nfiles > MAX_COMPARE_FILES) {
		fprintf(stderr, "gpulse bench: --compare takes at most %d files\n", MAX_COMPARE_FILES);
		return CLI_USAGE;
	}
	struct bench_result *p = calloc((size_t)nfiles ? (size_t)nfiles : 1, sizeof *p);
	if (!p) {
		fprintf(stderr, "gpulse bench: out of memory\n");
		return CLI_FAIL;
	}
	for (int i = 0; i < nfiles; i++) {
		struct buf b;
		char err[320];
		buf_init(&b, MAX_FILE_BYTES);
		int rc = read_file(files[i], &b, err, sizeof err);
		if (!rc && bench_result_parse(b.data ? b.data : "", b.len, &p[*n], err, sizeof err) != 0) {
			char e2[400];
			snprintf(e2, sizeof e2, "%s: not a gpulse bench result: %s", files[i], err);
			memcpy(err, e2, sizeof err - 1);
			err[sizeof err - 1] = '\0';
			rc = GPULSE_EPARSE;
		}
		buf_free(&b);
		if (rc) {
			fprintf(stderr, "gpulse bench: --compare %s\n", err);
			free(p);
			return CLI_FAIL;
		}
		(*n)++;
	}
	*out = p;
	return CLI_OK;
}

/* ---- gpulsed ---- */

static int via_daemon(int gpu, bool full, bool json)
{
	char path[128], err[1024];
	json_t *doc = NULL;
	struct client_opts post = {.post = true};
	snprintf(path, sizeof path, "/api/v1/bench?gpu=%d&mode=%s", gpu, full ? "full" : "quick");
	int rc = client_get_json(&post, path, &doc, NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse bench: %s\n", err);
		return client_exit_code(rc);
	}
	json_t *data = json_object_get(doc, "data");
	long long id = json_integer_value(json_object_get(data, "id"));
	json_decref(doc);
	if (!json)
		fprintf(stderr, "gpulse bench: gpulsed started run %lld on GPU %d; waiting for it\n", id, gpu);
	snprintf(path, sizeof path, "/api/v1/bench/status?gpu=%d", gpu);
	time_t deadline = time(NULL) + VIA_DAEMON_TIMEOUT_S;
	struct client_opts get = {0};
	for (;;) {
		if (bench_stop) {
			fprintf(stderr, "gpulse bench: stopped waiting; the run goes on in gpulsed\n");
			return CLI_FAIL;
		}
		struct buf raw;
		buf_init(&raw, CLIENT_MAX_RESPONSE);
		rc = client_get_json(&get, path, &doc, &raw, err, sizeof err);
		if (rc) {
			buf_free(&raw);
			fprintf(stderr, "gpulse bench: %s\n", err);
			return client_exit_code(rc);
		}
		data = json_object_get(doc, "data");
		const char *state = json_string_value(json_object_get(data, "state"));
		long long now_id = json_integer_value(json_object_get(data, "id"));
		if (state && now_id == id && strcmp(state, "running") != 0 &&
		    strcmp(state, "starting") != 0) {
			const char *msg = json_string_value(json_object_get(data, "message"));
			json_t *res = json_object_get(data, "result");
			int out = strcmp(state, "done") == 0 ? CLI_OK : CLI_FAIL;
			if (json) {
				char *text = json_dumps(data, JSON_COMPACT);
				if (text) {
					client_print_json(stdout, text, strlen(text));
					free(text);
				}
			} else if (res) {
				char *text = json_dumps(res, JSON_COMPACT);
				struct bench_result r;
				if (text && bench_result_parse(text, strlen(text), &r, err, sizeof err) == 0)
					print_result(&r, json_object_get(data, "verdicts"));
				free(text);
			}
			if (msg && *msg)
				fprintf(out == CLI_OK ? stdout : stderr, "%s%s\n",
					out == CLI_OK ? "" : "gpulse bench: ", msg);
			json_decref(doc);
			buf_free(&raw);
			return out;
		}
		json_decref(doc);
		buf_free(&raw);
		if (time(NULL) > deadline) {
			fprintf(stderr, "gpulse bench: run %lld did not end within %d s\n", id,
				VIA_DAEMON_TIMEOUT_S);
			return CLI_FAIL;
		}
		struct timespec ts = {0, 500 * 1000000L};
		nanosleep(&ts, NULL);
	}
}

static int history(int gpu, bool json)
{
	char path[96], err[1024];
	json_t *doc = NULL;
	struct buf raw;
	buf_init(&raw, CLIENT_MAX_RESPONSE);
	struct client_opts o = {0};
	snprintf(path, sizeof path, "/api/v1/bench/results?gpu=%d", gpu);
	int rc = client_get_json(&o, path, &doc, &raw, err, sizeof err);
	if (rc) {
		buf_free(&raw);
		fprintf(stderr, "gpulse bench: %s\n", err);
		return client_exit_code(rc);
	}
	if (json) {
		rc = client_print_json(stdout, raw.data, raw.len);
		buf_free(&raw);
		json_decref(doc);
		return rc ? CLI_FAIL : CLI_OK;
	}
	buf_free(&raw);
	json_t *data = json_object_get(doc, "data");
	json_t *figs = json_object_get(data, "figures");
	const char *uuid = json_string_value(json_object_get(data, "uuid"));
	printf("GPU %d %s: %zu stored runs\n", gpu, uuid ? uuid : "",
	       json_array_size(json_object_get(data, "runs")));
	size_t i;
	json_t *f;
	json_array_foreach(figs, i, f) {
		const char *name = json_string_value(json_object_get(f, "figure"));
		const char *var = json_string_value(json_object_get(f, "variant"));
		const char *unit = json_string_value(json_object_get(f, "unit"));
		json_t *pts = json_object_get(f, "points");
		char base[32] = "-";
		json_t *bm = json_object_get(f, "baseline");
		if (json_is_number(bm))
			fmt_value(base, sizeof base, unit ? unit : "", json_number_value(bm));
		json_t *band = json_object_get(f, "noise_ratio");
		printf("\n%s %s  baseline %s", name ? name : "?", var && *var ? var : "", base);
		if (json_is_number(band))
			printf(" (noise band %.1f%%)", json_number_value(band) * 100);
		printf("\n");
		size_t j;
		json_t *p;
		json_array_foreach(pts, j, p) {
			char when[32] = "?", val[32];
			const char *t = json_string_value(json_object_get(p, "time"));
			if (t)
				snprintf(when, sizeof when, "%.19s", t);
			double v = json_number_value(json_object_get(p, "value"));
			fmt_value(val, sizeof val, unit ? unit : "", v);
			const char *drv = json_string_value(json_object_get(p, "driver"));
			const char *meth = json_string_value(json_object_get(p, "method"));
			bool bl = json_is_true(json_object_get(p, "baseline"));
			double dv = json_is_number(bm) && json_number_value(bm) > 0
					    ? (v / json_number_value(bm) - 1) * 100 : NAN;
			printf("  %s  %14s  %+6.1f%%  driver %s  %s%s\n", when, val,
			       isfinite(dv) ? dv : 0.0, drv ? drv : "?", meth ? meth : BENCH_METHOD_LEGACY,
			       bl ? "" : "  (not a baseline)");
		}
	}
	json_decref(doc);
	return CLI_OK;
}

int bench_gpu_arg(const char *arg, int *gpu)
{
	char *end;
	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || *end || end == arg || v < 0 || v > 1023) {
		fprintf(stderr, "gpulse bench: --gpu: \"%s\" is not a GPU index (0-1023)\n", arg);
		return -1;
	}
	*gpu = (int)v;
	return 0;
}

int cmd_bench(int argc, char **argv)
{
	enum { OPT_ALLOW_BUSY = 256, OPT_CUBLASLT, OPT_CUDA, OPT_NVML, OPT_ONLY, OPT_COMPARE,
	       OPT_VIA, OPT_HISTORY, OPT_QUICK, OPT_FULL, OPT_GPU };
	static const struct option longopts[] = {
		{"gpu", required_argument, NULL, OPT_GPU},
		{"quick", no_argument, NULL, OPT_QUICK},
		{"full", no_argument, NULL, OPT_FULL},
		{"json", no_argument, NULL, 'j'},
		{"allow-busy", no_argument, NULL, OPT_ALLOW_BUSY},
		{"cublaslt", required_argument, NULL, OPT_CUBLASLT},
		{"cuda-library", required_argument, NULL, OPT_CUDA},
		{"nvml-library", required_argument, NULL, OPT_NVML},
		{"only", required_argument, NULL, OPT_ONLY},
		{"compare", no_argument, NULL, OPT_COMPARE},
		{"via-daemon", no_argument, NULL, OPT_VIA},
		{"history", no_argument, NULL, OPT_HISTORY},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--screen") == 0)
			return cmd_bench_screen(argc, argv);
	struct bench_opts o = {.stop = &bench_stop};
	bool json = false, compare = false, via = false, hist = false, quick = false;
	int c;
	while ((c = getopt_long(argc, argv, "+jh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_GPU:
			if (bench_gpu_arg(optarg, &o.gpu) != 0)
				return CLI_USAGE;
			break;
		case OPT_QUICK: quick = true; break;
		case OPT_FULL: o.full = true; break;
		case 'j': json = true; break;
		case OPT_ALLOW_BUSY: o.allow_busy = true; break;
		case OPT_CUBLASLT: o.cublaslt_path = optarg; break;
		case OPT_CUDA: o.cuda_path = optarg; break;
		case OPT_NVML: o.nvml_path = optarg; break;
		case OPT_ONLY: o.only = optarg; break;
		case OPT_COMPARE: compare = true; break;
		case OPT_VIA: via = true; break;
		case OPT_HISTORY: hist = true; break;
		case 'h': bench_usage(stdout); return CLI_OK;
		default: bench_usage(stderr); return CLI_USAGE;
		}
	}
	if (quick && o.full) {
		fprintf(stderr, "gpulse bench: --quick and --full exclude each other\n");
		return CLI_USAGE;
	}
	if ((via && hist) || ((via || hist) && compare)) {
		fprintf(stderr, "gpulse bench: --via-daemon, --history and --compare exclude each other\n");
		return CLI_USAGE;
	}
	if (compare && optind >= argc) {
		fprintf(stderr, "gpulse bench: --compare needs FILE... (other hosts' --json results)\n");
		return CLI_USAGE;
	}
	if (!compare && optind < argc) {
		fprintf(stderr, "gpulse bench: unexpected argument \"%s\"\n", argv[optind]);
		return CLI_USAGE;
	}
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	if (via)
		return via_daemon(o.gpu, o.full, json);
	if (hist)
		return history(o.gpu, json);

	struct bench_result *peers = NULL;
	size_t npeers = 0;
	if (compare) {
		int rc = load_peers(argv + optind, argc - optind, &peers, &npeers);
		if (rc)
			return rc;
	}
	struct bench_result *r = calloc(1, sizeof *r);
	if (!r) {
		free(peers);
		fprintf(stderr, "gpulse bench: out of memory\n");
		return CLI_FAIL;
	}
	char err[1024];
	int rc = bench_run(&o, r, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse bench: %s\n", err);
		free(r);
		free(peers);
		return CLI_FAIL;
	}
	json_t *own = own_history(r);
	json_t *verdicts = verdicts_for(r, own, peers, npeers);
	json_decref(own);
	int out = CLI_OK;
	if (json) {
		struct buf b;
		buf_init(&b, 4u << 20);
		bench_result_to_json(r, &b);
		if (verdicts && b.len > 0 && !b.failed) {
			char *vt = json_dumps(verdicts, JSON_COMPACT);
			b.len--; /* reopen the object */
			buf_puts(&b, ",\"verdicts\":");
			buf_puts(&b, vt ? vt : "[]");
			buf_putc(&b, '}');
			free(vt);
		}
		if (b.failed || client_print_json(stdout, b.data, b.len) != 0)
			out = CLI_FAIL;
		buf_free(&b);
	} else {
		print_result(r, verdicts);
	}
	if (r->interrupted) {
		fprintf(stderr, "gpulse bench: interrupted: the figures are partial and not a baseline\n");
		out = CLI_FAIL;
	}
	json_decref(verdicts);
	free(r);
	free(peers);
	return out;
}
