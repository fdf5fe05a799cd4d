/* gpulse kernels: the top CUDA kernels by GPU time, per process, from
 * gpulsed's /api/v1/kernels (what libgpulse-inject.so reported), with the
 * share of the GPU's traced kernel time each takes, launches, mean and
 * p99 duration; then, per process, one line on what its figures are built
 * from (estimates of continuous mode's census, or an exact trace and what
 * that trace costs the process). --json prints the daemon's document. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/status.h"

static void kernels_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse kernels [--pid N] [--gpu N] [--limit N] [--json]\n"
		"\n"
		"Top CUDA kernels by GPU time, from processes running libgpulse-inject.so\n"
		"(start them with 'gpulse run -- CMD', or set CUDA_INJECTION64_PATH).\n"
		"SHARE is the kernel's part of all traced kernel time on its GPU.\n"
		"Below the table, per process: whether its figures are estimates (the\n"
		"default, continuous mode) or an exact trace.\n"
		"\n"
		"  --pid N      only this process\n"
		"  --gpu N      only this GPU (CUDA device ordinal)\n"
		"  --limit N    at most N rows (default 20)\n"
		"  -j, --json   the daemon's JSON document\n"
		"  --url URL, --token-file FILE   as for every command\n");
}

/* "1.23 ms", "45.6 us", "2.00 s": three significant digits. */
static void fmt_duration(char *out, size_t len, double s)
{
	if (s >= 1)
		snprintf(out, len, "%.3g s", s);
	else if (s >= 1e-3)
		snprintf(out, len, "%.3g ms", s * 1e3);
	else if (s >= 1e-6)
		snprintf(out, len, "%.3g us", s * 1e6);
	else
		snprintf(out, len, "%.0f ns", s * 1e9);
}

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

/* The line on what pid's rows are built from, from the first of them. */
static void print_source(json_t *r)
{
	const char *comm = json_string_value(json_object_get(r, "comm"));
	const char *source = json_string_value(json_object_get(r, "source"));
	printf("%.0f %s: ", num(r, "pid"), comm ? comm : "?");
	if (source && strcmp(source, "census") == 0) {
		/* The library times one launch in 32 (SAMPLE_EVERY in inject.c). */
		printf("estimated from launch callbacks");
		if (json_is_number(json_object_get(r, "observed_ratio")))
			printf(" over %.0f%% of the time", 100 * num(r, "observed_ratio"));
		printf(", GPU time from event-timed samples (1 launch in 32)\n");
		return;
	}
	if (!source || strcmp(source, "trace") != 0) {
		printf("source unknown\n");
		return;
	}
	printf("exact (kernel activity trace)");
	double lasting = num(r, "lasting_cost_ratio");
	if (lasting > 0)
		printf("; this process's launches stay about %.0f%% dearer until it exits "
		       "(CUPTI 13.0)", 100 * lasting);
	printf("\n");
}

static unsigned long parse_uint(const char *s, const char *what, int *bad)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || *s == '-') {
		fprintf(stderr, "gpulse kernels: --%s \"%s\" is not a whole number\n", what, s);
		*bad = 1;
	}
	return v;
}

int cmd_kernels(int argc, char **argv)
{
	enum { OPT_URL = 256, OPT_TOKEN, OPT_PID, OPT_GPU, OPT_LIMIT };
	static const struct option longopts[] = {
		{"pid", required_argument, NULL, OPT_PID},
		{"gpu", required_argument, NULL, OPT_GPU},
		{"limit", required_argument, NULL, OPT_LIMIT},
		{"json", no_argument, NULL, 'j'},
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_opts co = {0};
	const char *pid = NULL, *gpu = NULL;
	unsigned long limit = 20;
	bool json = false;
	int bad = 0, ch;
	while ((ch = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (ch) {
		case OPT_PID: pid = optarg; parse_uint(optarg, "pid", &bad); break;
		case OPT_GPU: gpu = optarg; parse_uint(optarg, "gpu", &bad); break;
		case OPT_LIMIT: limit = parse_uint(optarg, "limit", &bad); break;
		case 'j': json = true; break;
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case 'h': kernels_usage(stdout); return CLI_OK;
		default: kernels_usage(stderr); return CLI_USAGE;
		}
	}
	if (bad || limit == 0 || limit > 10000) {
		if (!bad)
			fprintf(stderr, "gpulse kernels: --limit must be 1 to 10000\n");
		return CLI_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "gpulse kernels: unexpected argument \"%s\"\n", argv[optind]);
		return CLI_USAGE;
	}
	char path[256];
	snprintf(path, sizeof path, "/api/v1/kernels?limit=%lu%s%s%s%s", limit, pid ? "&pid=" : "",
		 pid ? pid : "", gpu ? "&gpu=" : "", gpu ? gpu : "");
	char err[1024];
	struct buf raw;
	buf_init(&raw, CLIENT_MAX_RESPONSE);
	json_t *root = NULL;
	int rc = client_get_json(&co, path, &root, json ? &raw : NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse kernels: %s\n", err);
		buf_free(&raw);
		return client_exit_code(rc);
	}
	int exit_code = CLI_OK;
	if (json) {
		if (client_print_json(stdout, raw.data, raw.len) != 0)
			exit_code = CLI_FAIL;
		goto out;
	}
	json_t *data = json_object_get(root, "data");
	json_t *prof = json_object_get(data, "profiling");
	json_t *rows = json_object_get(data, "kernels");
	if (prof && !json_is_true(json_object_get(prof, "serving"))) {
		const char *why = json_string_value(json_object_get(prof, "why_off"));
		fprintf(stderr, "gpulse kernels: gpulsed does not serve the profiling socket: %s\n",
			why ? why : "unknown reason");
		exit_code = CLI_FAIL;
		goto out;
	}
	if (!json_is_array(rows) || json_array_size(rows) == 0) {
		printf("No kernels traced%s. Start a CUDA program with 'gpulse run -- CMD'.\n",
		       pid ? " for that process" : "");
		goto out;
	}
	printf("%-8s %-15s %3s %6s %10s %10s %10s %10s  %s\n", "PID", "COMM", "GPU", "SHARE",
	       "GPU TIME", "LAUNCHES", "MEAN", "P99", "KERNEL");
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		char tot[32], mean[32], p99[32];
		fmt_duration(tot, sizeof tot, num(r, "seconds"));
		fmt_duration(mean, sizeof mean, num(r, "mean_seconds"));
		fmt_duration(p99, sizeof p99, num(r, "p99_seconds"));
		const char *comm = json_string_value(json_object_get(r, "comm"));
		const char *name = json_string_value(json_object_get(r, "kernel"));
		printf("%-8.0f %-15.15s %3.0f %5.1f%% %10s %10.0f %10s %10s  %s\n", num(r, "pid"),
		       comm ? comm : "?", num(r, "gpu"), 100 * num(r, "share"), tot,
		       num(r, "launches"), mean, p99, name ? name : "?");
	}
	double total = num(data, "total");
	if (total > (double)json_array_size(rows))
		printf("(%zu of %.0f kernels; --limit to see more)\n", json_array_size(rows), total);
	/* One line per process, in the order the table first shows it. */
	json_array_foreach(rows, i, r) {
		size_t j;
		json_t *before;
		bool seen = false;
		json_array_foreach(rows, j, before) {
			if (j >= i)
				break;
			if (num(before, "pid") == num(r, "pid"))
				seen = true;
		}
		if (!seen)
			print_source(r);
	}
out:
	json_decref(root);
	buf_free(&raw);
	return exit_code;
}
