/* `gpulse query EXPR`: send PromQL to gpulsed's Prometheus-compatible API
 * and print the answer for a person: a table of series and values for an
 * instant query; min, max, last and a sparkline per series for a range
 * (--range). --json prints the daemon's answer as it came, re-indented.
 * The rendering is query_render() so that tests can drive it without a
 * daemon. */
#include "cli/cmd_query.h"

#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "common/buf.h"
#include "common/duration.h"
#include "common/spark.h"
#include "cli/client.h"
#include "common/clock.h"
#include "common/status.h"

#define SPARK_WIDTH 40      /* at most this many characters per sparkline */
#define VALUE_MAX 64        /* a sample value as text */
#define RANGE_MAX_POINTS 11000 /* the API's limit per series */

/* ---- durations and times -------------------------------------------- */

int query_parse_duration(const char *s, double *seconds)
{
	if (!s || !*s)
		return GPULSE_EINVAL;
	char *end;
	/* Bare seconds, as Prometheus accepts for step= and as people type. */
	if (isdigit((unsigned char)s[0]) || s[0] == '.') {
		double v = strtod(s, &end);
		if (*end == '\0') {
			if (!(v > 0) || !isfinite(v))
				return GPULSE_EINVAL;
			*seconds = v;
			return 0;
		}
	}
	int64_t ns;
	if (duration_parse(s, strlen(s), &ns, NULL, 0) != 0 || ns <= 0)
		return GPULSE_EINVAL;
	*seconds = (double)ns / 1e9;
	return 0;
}

/* A time as the API takes it: Unix seconds ("1795965289.3") or RFC 3339
 * ("2026-11-29T17:40:00Z", "...00.5+01:00"). */
static int parse_time(const char *s, double *t)
{
	char *end;
	double v = strtod(s, &end);
	if (end != s && *end == '\0' && isfinite(v)) {
		*t = v;
		return 0;
	}
	int64_t ms;
	if (clock_parse_rfc3339(s, &ms) != 0)
		return GPULSE_EINVAL;
	*t = (double)ms / 1000;
	return 0;
}

/* ---- rendering -------------------------------------------------------- */

/* Text from the daemon, safe for a terminal: control bytes become '?'. */
static void put_safe(struct buf *b, const char *s)
{
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		buf_putc(b, (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* `name{a="1", b="2"}`, the other labels sorted; "{}" for none. Returns
 * a malloc'd string (the caller frees it), or NULL on out-of-memory. */
static char *series_text(json_t *metric)
{
	struct buf b;
	buf_init(&b, 1u << 20);
	const char *name = json_string_value(json_object_get(metric, "__name__"));
	size_t n = json_object_size(metric);
	const char **keys = calloc(n ? n : 1, sizeof *keys);
	if (!keys)
		return NULL;
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach(metric, key, v) {
		if (strcmp(key, "__name__") != 0 && json_is_string(v))
			keys[k++] = key;
	}
	qsort(keys, k, sizeof *keys, cmp_str);
	if (name)
		put_safe(&b, name);
	if (k > 0 || !name) {
		buf_putc(&b, '{');
		for (size_t i = 0; i < k; i++) {
			if (i)
				buf_puts(&b, ", ");
			put_safe(&b, keys[i]);
			buf_puts(&b, "=\"");
			put_safe(&b, json_string_value(json_object_get(metric, keys[i])));
			buf_putc(&b, '"');
		}
		buf_putc(&b, '}');
	}
	free(keys);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* Columns on a terminal: UTF-8 continuation bytes take no column. */
static size_t width_of(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xC0) != 0x80;
	return w;
}

static void pad_left(FILE *out, const char *s, size_t width)
{
	fputs(s, out);
	for (size_t w = width_of(s); w < width; w++)
		fputc(' ', out);
}

static void pad_right(FILE *out, const char *s, size_t width)
{
	for (size_t w = width_of(s); w < width; w++)
		fputc(' ', out);
	fputs(s, out);
}

/* A sample's value, [t, "v"], as the daemon wrote it and as a number. */
static bool sample_of(json_t *pair, const char **text, double *v)
{
	if (!json_is_array(pair) || json_array_size(pair) != 2 ||
	    !json_is_number(json_array_get(pair, 0)))
		return false;
	const char *s = json_string_value(json_array_get(pair, 1));
	if (!s)
		return false;
	*text = s;
	*v = strtod(s, NULL); /* "NaN", "+Inf" parse too */
	return true;
}

/* One row of a matrix: min, max, last (the daemon's text) and the
 * sparkline. */
struct row {
	char *series;
	char min[VALUE_MAX], max[VALUE_MAX], last[VALUE_MAX];
	char spark[SPARK_WIDTH * 4 + 1];
};

static void copy_value(char *dst, const char *src)
{
	struct buf b;
	buf_init(&b, VALUE_MAX);
	put_safe(&b, src);
	buf_putc(&b, '\0');
	snprintf(dst, VALUE_MAX, "%s", b.data ? b.data : "-");
	buf_free(&b);
}

/* The points of `values` ([[t, "v"], ...]) as a sparkline (spark.h). */
static void draw_spark(json_t *values, double lo, double hi, bool utf8, char *out, size_t len)
{
	size_t n = json_array_size(values);
	double *v = malloc((n ? n : 1) * sizeof *v);
	if (!v) {
		out[0] = '\0';
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *t;
		if (!sample_of(json_array_get(values, i), &t, &v[i]))
			v[i] = NAN;
	}
	spark_draw(v, n, lo, hi, utf8, SPARK_WIDTH, out, len);
	free(v);
}

static int render_vector(json_t *result, FILE *out)
{
	size_t n = json_array_size(result);
	char **series = calloc(n ? n : 1, sizeof *series);
	char (*value)[VALUE_MAX] = calloc(n ? n : 1, sizeof *value);
	int rc = 0;
	if (!series || !value) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	size_t sw = strlen("SERIES"), vw = strlen("VALUE");
	for (size_t i = 0; i < n; i++) {
		json_t *r = json_array_get(result, i);
		const char *t;
		double v;
		if (!json_is_object(json_object_get(r, "metric")) ||
		    !sample_of(json_object_get(r, "value"), &t, &v)) {
			rc = GPULSE_EPARSE;
			goto out;
		}
		if (!(series[i] = series_text(json_object_get(r, "metric")))) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		copy_value(value[i], t);
		size_t w = width_of(series[i]);
		sw = w > sw ? w : sw;
		vw = strlen(value[i]) > vw ? strlen(value[i]) : vw;
	}
	if (n == 0) {
		fputs("no data\n", out);
		goto out;
	}
	pad_left(out, "SERIES", sw);
	fputs("  ", out);
	pad_right(out, "VALUE", vw);
	fputc('\n', out);
	for (size_t i = 0; i < n; i++) {
		pad_left(out, series[i], sw);
		fputs("  ", out);
		pad_right(out, value[i], vw);
		fputc('\n', out);
	}
out:
	for (size_t i = 0; series && i < n; i++)
		free(series[i]);
	free(series);
	free(value);
	return rc;
}

static int render_matrix(json_t *result, FILE *out, bool sparkline, bool utf8)
{
	size_t n = json_array_size(result);
	struct row *rows = calloc(n ? n : 1, sizeof *rows);
	int rc = 0;
	if (!rows)
		return GPULSE_ENOMEM;
	size_t sw = strlen("SERIES"), w_min = strlen("MIN"), w_max = strlen("MAX");
	size_t w_last = strlen("LAST");
	for (size_t i = 0; i < n; i++) {
		json_t *r = json_array_get(result, i);
		json_t *values = json_object_get(r, "values");
		if (!json_is_object(json_object_get(r, "metric")) || !json_is_array(values)) {
			rc = GPULSE_EPARSE;
			goto out;
		}
		struct row *row = &rows[i];
		if (!(row->series = series_text(json_object_get(r, "metric")))) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		double lo = INFINITY, hi = -INFINITY;
		const char *lo_t = NULL, *hi_t = NULL, *last_t = NULL;
		size_t j;
		json_t *pair;
		json_array_foreach(values, j, pair) {
			const char *t;
			double v;
			if (!sample_of(pair, &t, &v)) {
				rc = GPULSE_EPARSE;
				goto out;
			}
			last_t = t;
			if (!isfinite(v))
				continue;
			if (v < lo) {
				lo = v;
				lo_t = t;
			}
			if (v > hi) {
				hi = v;
				hi_t = t;
			}
		}
		copy_value(row->min, lo_t ? lo_t : "-");
		copy_value(row->max, hi_t ? hi_t : "-");
		copy_value(row->last, last_t ? last_t : "-");
		if (sparkline && lo_t)
			draw_spark(values, lo, hi, utf8, row->spark, sizeof row->spark);
		size_t w = width_of(row->series);
		sw = w > sw ? w : sw;
		w_min = strlen(row->min) > w_min ? strlen(row->min) : w_min;
		w_max = strlen(row->max) > w_max ? strlen(row->max) : w_max;
		w_last = strlen(row->last) > w_last ? strlen(row->last) : w_last;
	}
	if (n == 0) {
		fputs("no data\n", out);
		goto out;
	}
	pad_left(out, "SERIES", sw);
	fputs("  ", out);
	pad_right(out, "MIN", w_min);
	fputs("  ", out);
	pad_right(out, "MAX", w_max);
	fputs("  ", out);
	pad_right(out, "LAST", w_last);
	fputs(sparkline ? "  TREND\n" : "\n", out);
	for (size_t i = 0; i < n; i++) {
		pad_left(out, rows[i].series, sw);
		fputs("  ", out);
		pad_right(out, rows[i].min, w_min);
		fputs("  ", out);
		pad_right(out, rows[i].max, w_max);
		fputs("  ", out);
		pad_right(out, rows[i].last, w_last);
		if (sparkline)
			fprintf(out, "  %s", rows[i].spark);
		fputc('\n', out);
	}
out:
	for (size_t i = 0; i < n; i++)
		free(rows[i].series);
	free(rows);
	return rc;
}

int query_render(json_t *root, FILE *out, bool sparkline, bool utf8)
{
	json_t *data = json_object_get(root, "data");
	if (!json_is_object(data))
		data = root;
	const char *type = json_string_value(json_object_get(data, "resultType"));
	json_t *result = json_object_get(data, "result");
	if (!type)
		return GPULSE_EPARSE;
	if (strcmp(type, "scalar") == 0 || strcmp(type, "string") == 0) {
		const char *t;
		double v;
		if (strcmp(type, "scalar") == 0 && !sample_of(result, &t, &v))
			return GPULSE_EPARSE;
		if (strcmp(type, "string") == 0 &&
		    !(json_is_array(result) && json_array_size(result) == 2 &&
		      (t = json_string_value(json_array_get(result, 1)))))
			return GPULSE_EPARSE;
		struct buf b;
		buf_init(&b, 1u << 20);
		put_safe(&b, t);
		buf_putc(&b, '\0');
		fprintf(out, "%s\n", b.data ? b.data : "");
		buf_free(&b);
		return 0;
	}
	if (!json_is_array(result))
		return GPULSE_EPARSE;
	if (strcmp(type, "vector") == 0)
		return render_vector(result, out);
	if (strcmp(type, "matrix") == 0)
		return render_matrix(result, out, sparkline, utf8);
	return GPULSE_EPARSE;
}

/* ---- the command ------------------------------------------------------ */

static void query_usage(FILE *f)
{
	fputs("usage: gpulse query EXPR [--range D [--step S]] [--time T] [--json]\n"
	      "                         [--sparkline] [--url URL] [--token-file FILE]\n"
	      "\n"
	      "Evaluate PromQL EXPR against gpulsed's history (its --storage-path).\n"
	      "Without --range, an instant query: one row per series with its value.\n"
	      "With --range, a range query: one row per series with min, max, last and,\n"
	      "on a terminal or with --sparkline, a sparkline of the points.\n"
	      "\n"
	      "  --range D          a range query over the D before the end (30s, 5m, 1h30m)\n"
	      "  --step S           resolution of a range query (default D/60, at least 1s)\n"
	      "  --time T           evaluation time, or the end of the range: Unix seconds\n"
	      "                     or RFC 3339 (default: now)\n"
	      "  --json             print gpulsed's JSON answer\n"
	      "  --sparkline        draw sparklines even when stdout is not a terminal\n"
	      "  --url URL          gpulsed to ask (env GPULSE_URL)\n"
	      "  --token-file FILE  file holding the bearer token (env GPULSE_TOKEN_FILE)\n"
	      "\n"
	      "Exit status: 0 ok, 1 gpulsed refused the query or is unreachable, 2 usage.\n",
	      f);
}

/* Whether the locale's characters are UTF-8, by the variables that pick
 * it (LC_ALL over LC_CTYPE over LANG), without calling setlocale. */
static bool locale_is_utf8(void)
{
	static const char *const vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};
	for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
		const char *v = getenv(vars[i]);
		if (v && v[0])
			return strcasestr(v, "utf-8") || strcasestr(v, "utf8");
	}
	return false;
}

static void fmt_seconds(char *dst, size_t len, double s)
{
	snprintf(dst, len, "%.3f", s);
}

int cmd_query(int argc, char **argv)
{
	enum { OPT_URL = 256, OPT_TOKEN, OPT_RANGE, OPT_STEP, OPT_TIME, OPT_SPARK };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"range", required_argument, NULL, OPT_RANGE},
		{"step", required_argument, NULL, OPT_STEP},
		{"time", required_argument, NULL, OPT_TIME},
		{"sparkline", no_argument, NULL, OPT_SPARK},
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_opts co = {0};
	bool json = false, spark = false;
	const char *range_s = NULL, *step_s = NULL, *time_s = NULL;
	int ch;
	while ((ch = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': json = true; break;
		case OPT_RANGE: range_s = optarg; break;
		case OPT_STEP: step_s = optarg; break;
		case OPT_TIME: time_s = optarg; break;
		case OPT_SPARK: spark = true; break;
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case 'h': query_usage(stdout); return CLI_OK;
		default: query_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gpulse query: no expression given\n");
		query_usage(stderr);
		return CLI_USAGE;
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "gpulse query: unexpected argument \"%s\" (quote the expression)\n",
			argv[optind + 1]);
		return CLI_USAGE;
	}
	const char *expr = argv[optind];
	double range = 0, step = 0, at = 0;
	if (range_s && query_parse_duration(range_s, &range)) {
		fprintf(stderr, "gpulse query: bad --range \"%s\" (want e.g. 30s, 5m, 1h30m)\n", range_s);
		return CLI_USAGE;
	}
	if (step_s && query_parse_duration(step_s, &step)) {
		fprintf(stderr, "gpulse query: bad --step \"%s\" (want e.g. 1s, 15s, 1m)\n", step_s);
		return CLI_USAGE;
	}
	if (step_s && !range_s) {
		fprintf(stderr, "gpulse query: --step needs --range\n");
		return CLI_USAGE;
	}
	if (time_s && parse_time(time_s, &at)) {
		fprintf(stderr, "gpulse query: bad --time \"%s\" (Unix seconds or RFC 3339)\n", time_s);
		return CLI_USAGE;
	}

	int exit_code = CLI_FAIL;
	char path[CLIENT_URL_MAX + 256];
	char err[1024];
	struct buf body;
	json_t *root = NULL;
	buf_init(&body, CLIENT_MAX_RESPONSE);
	char *q = curl_easy_escape(NULL, expr, 0);
	if (!q) {
		fprintf(stderr, "gpulse: out of memory\n");
		goto out;
	}
	int n;
	if (range_s) {
		if (!time_s) {
			struct timeval tv;
			gettimeofday(&tv, NULL);
			at = (double)tv.tv_sec + tv.tv_usec / 1e6;
		}
		if (!step_s)
			step = fmax(1, round(range / 60));
		if (range / step + 1 > RANGE_MAX_POINTS) {
			fprintf(stderr, "gpulse query: --range %s at --step %gs is more than %d points; "
				"give a larger --step\n", range_s, step, RANGE_MAX_POINTS);
			exit_code = CLI_USAGE;
			goto out;
		}
		char start[32], end[32], st[32];
		fmt_seconds(start, sizeof start, at - range);
		fmt_seconds(end, sizeof end, at);
		snprintf(st, sizeof st, "%g", step);
		n = snprintf(path, sizeof path, "/api/v1/query_range?query=%s&start=%s&end=%s&step=%s",
			     q, start, end, st);
	} else if (time_s) {
		char t[32];
		fmt_seconds(t, sizeof t, at);
		n = snprintf(path, sizeof path, "/api/v1/query?query=%s&time=%s", q, t);
	} else {
		n = snprintf(path, sizeof path, "/api/v1/query?query=%s", q);
	}
	if (n < 0 || (size_t)n >= sizeof path) {
		fprintf(stderr, "gpulse query: the expression is too long (%zu bytes)\n", strlen(expr));
		exit_code = CLI_USAGE;
		goto out;
	}

	long http_status = 0;
	int rc = client_get(&co, path, &body, &http_status, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse: %s\n", err);
		exit_code = client_exit_code(rc);
		goto out;
	}
	json_error_t jerr;
	root = body.data ? json_loadb(body.data, body.len, 0, &jerr) : NULL;
	const char *api_status = json_string_value(json_object_get(root, "status"));
	if (api_status && strcmp(api_status, "success") != 0) {
		/* Prometheus's error envelope: say what the daemon said. */
		const char *type = json_string_value(json_object_get(root, "errorType"));
		const char *msg = json_string_value(json_object_get(root, "error"));
		fprintf(stderr, "gpulse: %s%s%s\n", type ? type : "", type ? ": " : "",
			msg ? msg : api_status);
		goto out;
	}
	if (http_status < 200 || http_status > 299 || !root) {
		fprintf(stderr, "gpulse: gpulsed at %s answered the query with HTTP %ld%s\n",
			client_base_url(&co), http_status,
			http_status == 401 ? " (give a token with --token-file or GPULSE_TOKEN_FILE)"
			: http_status == 404 ? " (is this a gpulsed, and as new as this gpulse?)"
			: !root ? " and something that is not JSON" : "");
		goto out;
	}
	if (json) {
		if (client_print_json(stdout, body.data, body.len) == 0)
			exit_code = CLI_OK;
		goto out;
	}
	bool sparkline = spark || isatty(STDOUT_FILENO);
	rc = query_render(root, stdout, sparkline, locale_is_utf8());
	if (rc) {
		fprintf(stderr, "gpulse: gpulsed at %s sent the query's answer in an unexpected "
			"shape (is it the same version as this gpulse?)\n", client_base_url(&co));
		goto out;
	}
	exit_code = CLI_OK;
out:
	curl_free(q);
	json_decref(root);
	buf_free(&body);
	return exit_code;
}
