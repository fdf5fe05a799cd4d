/* `gpulse report capacity`: the capacity report (src/report/) from the
 * running gpulsed's query API, a store file read directly (--db), or a
 * central Prometheus holding many hosts' gpulse series (--prometheus).
 * The HTTP source lives here because the report module knows nothing of
 * HTTP: it hands a range query to this file's query_range, which asks
 * /api/v1/query_range through the CLI's client and parses the answer with
 * report_parse_matrix. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/client.h"
#include "common/clock.h"
#include "cli/cmd_query.h"
#include "cli/commands.h"
#include "report/report.h"
#include "common/status.h"

#define HTTP_QUERY_TIMEOUT_MS 120000L   /* one range request */
#define HTTP_MAX_SERIES 20000
#define HTTP_MAX_POINTS 20000000

static void report_usage(FILE *f)
{
	fputs("usage: gpulse report capacity [--since 30d] [--until TIME] [--gpu N] [--target 0.70-0.80]\n"
	      "                              [--step 60s] [--format text|json|html] [-o FILE]\n"
	      "                              [--url URL | --db FILE | --prometheus URL] [--raw-retention 48h]\n"
	      "\n"
	      "How much GPU was used, wasted and needed: per GPU, per model and per process,\n"
	      "p50/p95/p99 of SM and tensor activity (utilization on GPUs without GPM), GPU-hours\n"
	      "idle and allocated-but-idle, memory high-water marks, crossings of the 85% busy\n"
	      "line, stored bottleneck classes, the host against the target band, and\n"
	      "recommendations with the numbers behind them.\n"
	      "\n"
	      "  --since DURATION   how far back from --until (default 30d)\n"
	      "  --until TIME       end of the range: Unix seconds or RFC 3339 (default now)\n"
	      "  --gpu N            only GPU N\n"
	      "  --target LO-HI     the band of mean busy to hold (default 0.70-0.80; 70-80 also works)\n"
	      "  --step DURATION    slot width (default 60s, the store's rollup step; at least 1s)\n"
	      "  --format F         text (default), json (every figure) or html (one offline page)\n"
	      "  -o FILE            write there instead of stdout\n"
	      "  --url URL          gpulsed to ask (env GPULSE_URL; default " CLIENT_DEFAULT_URL ")\n"
	      "  --db FILE          read a store file directly, read-only (a running gpulsed keeps writing it)\n"
	      "  --prometheus URL   a Prometheus holding many hosts' gpulse series: grouped by instance and model\n"
	      "  --raw-retention D  how long the store keeps raw samples (storage.retention, default 48h):\n"
	      "                     the range before it is read from the 1-minute rollups\n"
	      "  --token-file FILE  bearer token for gpulsed or Prometheus\n"
	      "Definitions of every figure: docs/internals/report.md.\n",
	      f);
}

struct http_src {
	struct client_opts co;
};

static int http_query_range(void *ctx, const char *expr, int64_t start_ms, int64_t end_ms,
			    int64_t step_ms, bool rollups, struct report_matrix *out, char *err,
			    size_t errlen)
{
	(void)rollups; /* gpulsed decides from the range; Prometheus has none */
	struct http_src *h = ctx;
	char *q = curl_easy_escape(NULL, expr, 0);
	if (!q) {
		snprintf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	char path[1024];
	snprintf(path, sizeof path, "/api/v1/query_range?query=%s&start=%.3f&end=%.3f&step=%.3f", q,
		 (double)start_ms / 1000, (double)end_ms / 1000, (double)step_ms / 1000);
	curl_free(q);
	struct buf body;
	buf_init(&body, CLIENT_MAX_RESPONSE);
	long status = 0;
	int rc = client_get(&h->co, path, &body, &status, err, errlen);
	if (rc == 0) {
		rc = report_parse_matrix(body.data ? body.data : "", body.len, HTTP_MAX_SERIES,
					 HTTP_MAX_POINTS, out, err, errlen);
		if (rc == GPULSE_EPARSE && (status < 200 || status > 299)) {
			snprintf(err, errlen, "%s answered HTTP %ld to a range query",
				 client_base_url(&h->co), status);
			rc = GPULSE_EIO;
		}
	}
	buf_free(&body);
	return rc;
}

static const struct report_source_ops gpulsed_ops = {.kind = "gpulsed",
						     .query_range = http_query_range};
static const struct report_source_ops prom_ops = {.kind = "prometheus",
						  .query_range = http_query_range};

static int parse_until(const char *s, int64_t *t_ms)
{
	char *end;
	double v = strtod(s, &end);
	if (end != s && *end == '\0' && isfinite(v) && v > 0) {
		*t_ms = (int64_t)llround(v * 1000);
		return 0;
	}
	return clock_parse_rfc3339(s, t_ms) == 0 ? 0 : GPULSE_EINVAL;
}

/* A usage error: one line on stderr, exit status 2. */
#define usage_error(...) \
	(fprintf(stderr, "gpulse report: " __VA_ARGS__), fputc('\n', stderr), CLI_USAGE)

int cmd_report(int argc, char **argv)
{
	enum { OPT_SINCE = 256, OPT_UNTIL, OPT_GPU, OPT_TARGET, OPT_STEP, OPT_FORMAT, OPT_URL,
	       OPT_DB, OPT_PROM, OPT_RAWRET, OPT_TOKEN };
	static const struct option longopts[] = {
		{"since", required_argument, NULL, OPT_SINCE},
		{"until", required_argument, NULL, OPT_UNTIL},
		{"gpu", required_argument, NULL, OPT_GPU},
		{"target", required_argument, NULL, OPT_TARGET},
		{"step", required_argument, NULL, OPT_STEP},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"url", required_argument, NULL, OPT_URL},
		{"db", required_argument, NULL, OPT_DB},
		{"prometheus", required_argument, NULL, OPT_PROM},
		{"raw-retention", required_argument, NULL, OPT_RAWRET},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct report_opts o = {.gpu = -1};
	const char *since = "30d", *until = NULL, *format = "text", *outfile = NULL;
	const char *url = NULL, *db = NULL, *prom = NULL, *token = NULL;
	double raw_ret_s = 48 * 3600.0;
	int ch;
	while ((ch = getopt_long(argc, argv, "ho:", longopts, NULL)) != -1) {
		switch (ch) {
		case OPT_SINCE: since = optarg; break;
		case OPT_UNTIL: until = optarg; break;
		case OPT_GPU: {
			char *end;
			errno = 0;
			long g = strtol(optarg, &end, 10);
			if (end == optarg || *end || g < 0 || g > 1023 || errno)
				return usage_error("--gpu: \"%s\" is not a GPU index", optarg);
			o.gpu = (int)g;
			break;
		}
		case OPT_TARGET:
			if (report_parse_band(optarg, &o.band_lo, &o.band_hi) != 0)
				return usage_error("--target: \"%s\" is not a band LO-HI within 0-1 (or 0-100), LO < HI", optarg);
			break;
		case OPT_STEP: {
			double s;
			if (query_parse_duration(optarg, &s) != 0 || s < 1)
				return usage_error("--step: \"%s\" is not a duration of at least 1s", optarg);
			o.step_ms = (int64_t)llround(s * 1000);
			break;
		}
		case OPT_FORMAT: format = optarg; break;
		case 'o': outfile = optarg; break;
		case OPT_URL: url = optarg; break;
		case OPT_DB: db = optarg; break;
		case OPT_PROM: prom = optarg; break;
		case OPT_RAWRET:
			if (query_parse_duration(optarg, &raw_ret_s) != 0)
				return usage_error("--raw-retention: \"%s\" is not a duration", optarg);
			break;
		case OPT_TOKEN: token = optarg; break;
		case 'h': report_usage(stdout); return CLI_OK;
		default: report_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gpulse report: which report? (capacity)\n");
		report_usage(stderr);
		return CLI_USAGE;
	}
	if (strcmp(argv[optind], "capacity") != 0)
		return usage_error("unknown report \"%s\" (there is: capacity)", argv[optind]);
	if (optind + 1 < argc)
		return usage_error("unexpected argument \"%s\"", argv[optind + 1]);
	if (strcmp(format, "text") && strcmp(format, "json") && strcmp(format, "html"))
		return usage_error("--format: \"%s\" is not text, json or html", format);
	if ((url != NULL) + (db != NULL) + (prom != NULL) > 1)
		return usage_error("%s", "--url, --db and --prometheus are three sources: give one");
	double since_s;
	if (query_parse_duration(since, &since_s) != 0)
		return usage_error("--since: \"%s\" is not a duration", since);

	struct report_source src = {0};
	struct report_db *rdb = NULL;
	struct http_src hs = {.co = {.token_file = token, .timeout_ms = HTTP_QUERY_TIMEOUT_MS}};
	char err[512] = "";
	int64_t now;
	if (db) {
		int rc = report_db_open(&rdb, db, (int64_t)(raw_ret_s * 1000), err, sizeof err);
		if (rc) {
			fprintf(stderr, "gpulse report: %s\n", err);
			return CLI_FAIL;
		}
		report_db_source(rdb, &src);
		now = report_db_now_ms(rdb);
	} else {
		hs.co.url = prom ? prom : url;
		hs.co.server = prom ? "Prometheus" : NULL;
		if (hs.co.url && strncmp(hs.co.url, "http://", 7) && strncmp(hs.co.url, "https://", 8))
			return usage_error("\"%s\" is not an http:// or https:// URL", hs.co.url);
		src.ops = prom ? &prom_ops : &gpulsed_ops;
		src.ctx = &hs;
		src.where = client_base_url(&hs.co);
		src.raw_retention_ms = prom ? 0 : (int64_t)(raw_ret_s * 1000);
		src.fleet = prom != NULL;
		now = clock_wall_ms(NULL);
	}
	o.now_ms = now;
	o.end_ms = now;
	if (until && parse_until(until, &o.end_ms) != 0) {
		report_db_close(rdb);
		return usage_error("--until: \"%s\" is not Unix seconds or an RFC 3339 time", until);
	}
	o.start_ms = o.end_ms - (int64_t)llround(since_s * 1000);

	struct report *r = NULL;
	int rc = report_build(&src, &o, &r, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse report: %s\n", err);
		report_db_close(rdb);
		return rc == GPULSE_EINVAL ? CLI_USAGE : CLI_FAIL;
	}
	FILE *out = stdout;
	if (outfile && !(out = fopen(outfile, "w"))) {
		fprintf(stderr, "gpulse report: %s: %s\n", outfile, strerror(errno));
		report_free(r);
		report_db_close(rdb);
		return CLI_FAIL;
	}
	const char *lang = getenv("LC_ALL");
	if (!lang || !*lang)
		lang = getenv("LC_CTYPE");
	if (!lang || !*lang)
		lang = getenv("LANG");
	bool utf8 = lang && (strstr(lang, "UTF-8") || strstr(lang, "utf8") || strstr(lang, "UTF8"));
	if (strcmp(format, "json") == 0)
		rc = report_write_json(r, out);
	else if (strcmp(format, "html") == 0)
		rc = report_write_html(r, out);
	else
		rc = report_write_text(r, out, utf8);
	if (out != stdout && fclose(out) != 0)
		rc = GPULSE_EIO;
	if (rc)
		fprintf(stderr, "gpulse report: writing %s failed\n", outfile ? outfile : "the report");
	report_free(r);
	report_db_close(rdb);
	return rc ? CLI_FAIL : CLI_OK;
}
