/* Prometheus's status, metadata and health endpoints; see api_status.h.
 * The shapes follow Prometheus 2.42's web/api/v1 and web/web.go; what
 * gpulsed cannot mean the same by a field (Go's runtime, the build) it
 * fills with its own facts, as docs/internals/prometheus-api.md lists. */
#include "api/status.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/status.h"
#include "store/tsdb.h"

/* The Prometheus release whose HTTP API gpulsed answers as: what
 * buildinfo's "version" says, so that clients that pick features by
 * version (Grafana) take gpulsed for the Prometheus it behaves as. */
#define API_PROMETHEUS_VERSION "2.42.0"
#define API_TOP 10 /* entries in each of status/tsdb's lists, as Prometheus */

void api_status_init(struct api_status *st, struct api *api)
{
	memset(st, 0, sizeof *st);
	st->api = api;
	pthread_mutex_init(&st->mu, NULL);
	snprintf(st->retention, sizeof st->retention, "48h");
}

void api_status_set_config(struct api_status *st, const char *yaml, size_t len)
{
	char *copy = malloc(len + 1);
	if (!copy)
		return; /* keep the previous one */
	memcpy(copy, yaml, len);
	copy[len] = '\0';
	pthread_mutex_lock(&st->mu);
	free(st->config_yaml);
	st->config_yaml = copy;
	pthread_mutex_unlock(&st->mu);
}

void api_status_add_flag(struct api_status *st, const char *name, const char *value)
{
	if (st->nflags == API_MAX_FLAGS)
		return;
	struct api_flag *f = &st->flags[st->nflags++];
	f->name = name;
	snprintf(f->value, sizeof f->value, "%s", value ? value : "");
}

void api_status_destroy(struct api_status *st)
{
	if (!st)
		return;
	free(st->config_yaml);
	st->config_yaml = NULL;
	pthread_mutex_destroy(&st->mu);
}

static void success(struct http_response *resp)
{
	resp->content_type = "application/json";
	buf_puts(&resp->body, "{\"status\":\"success\",\"data\":");
}

static int done(struct http_response *resp)
{
	return buf_puts(&resp->body, "}\n");
}

static void put_kv(struct buf *b, bool *first, const char *k, const char *v)
{
	if (!*first)
		buf_putc(b, ',');
	*first = false;
	buf_put_json_string(b, k);
	buf_putc(b, ':');
	buf_put_json_string(b, v);
}

/* ---- buildinfo, config, flags, runtimeinfo ------------------------------- */

static int handle_buildinfo(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	success(resp);
	struct buf *b = &resp->body;
	bool first = true;
	buf_putc(b, '{');
	put_kv(b, &first, "version", API_PROMETHEUS_VERSION);
	put_kv(b, &first, "revision", "gpulsed " GPULSE_VERSION);
	put_kv(b, &first, "branch", "");
	put_kv(b, &first, "buildUser", "");
	put_kv(b, &first, "buildDate", __DATE__);
	put_kv(b, &first, "goVersion", "");
	buf_putc(b, '}');
	return done(resp);
}

static int handle_config(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_status *st = ctx;
	(void)req;
	success(resp);
	buf_puts(&resp->body, "{\"yaml\":");
	pthread_mutex_lock(&st->mu);
	buf_put_json_string(&resp->body, st->config_yaml ? st->config_yaml : "");
	pthread_mutex_unlock(&st->mu);
	buf_putc(&resp->body, '}');
	return done(resp);
}

static int handle_flags(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_status *st = ctx;
	(void)req;
	success(resp);
	bool first = true;
	buf_putc(&resp->body, '{');
	for (size_t i = 0; i < st->nflags; i++)
		put_kv(&resp->body, &first, st->flags[i].name, st->flags[i].value);
	buf_putc(&resp->body, '}');
	return done(resp);
}

/* Threads of this process, from /proc/self/status (Go's goroutineCount
 * has no better counterpart). 0 when unreadable. */
static long thread_count(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	char line[256];
	long n = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

static int handle_runtimeinfo(void *ctx, const struct http_request *req,
			      struct http_response *resp)
{
	struct api_status *st = ctx;
	(void)req;
	struct buf *b = &resp->body;
	success(resp);
	char cwd[1024];
	if (!getcwd(cwd, sizeof cwd))
		snprintf(cwd, sizeof cwd, "<error retrieving current working directory: %s>",
			 strerror(errno));
	int64_t last = st->reload_wall_ns ? atomic_load(st->reload_wall_ns) : 0;
	bool ok = !st->reload_ok || atomic_load(st->reload_ok) != 0 || last == 0;
	uint64_t corrupt = 0;
	struct tsdb *db = atomic_load_explicit(&st->api->db, memory_order_acquire);
	if (db) {
		struct tsdb_stats ts;
		tsdb_get_stats(db, &ts);
		corrupt = ts.corrupt_chunks_total;
	}
	buf_puts(b, "{\"startTime\":\"");
	buf_put_rfc3339(b, st->start_wall_ns / 1000000, false);
	buf_printf(b, "\",\"CWD\":");
	buf_put_json_string(b, cwd);
	buf_printf(b, ",\"reloadConfigSuccess\":%s,\"lastConfigTime\":\"", ok ? "true" : "false");
	buf_put_rfc3339(b, (last ? last : st->start_wall_ns) / 1000000, false);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	buf_printf(b, "\",\"corruptionCount\":%llu,\"goroutineCount\":%ld,\"GOMAXPROCS\":%ld,"
		   "\"GOGC\":\"\",\"GODEBUG\":\"\",\"storageRetention\":",
		   (unsigned long long)corrupt, thread_count(), cpus > 0 ? cpus : 1);
	buf_put_json_string(b, st->retention);
	buf_putc(b, '}');
	return done(resp);
}

/* ---- status/tsdb -------------------------------------------------------- */

struct count {
	const char *name;
	uint64_t value;
};

static int cmp_cstr(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Descending by value, then by name, as a stable top-N. */
static int cmp_count(const void *x, const void *y)
{
	const struct count *a = x, *b = y;
	if (a->value != b->value)
		return a->value < b->value ? 1 : -1;
	return strcmp(a->name, b->name);
}

static void put_top(struct buf *b, const char *key, struct count *c, size_t n)
{
	if (n > 1)
		qsort(c, n, sizeof *c, cmp_count);
	buf_printf(b, ",\"%s\":[", key);
	for (size_t i = 0; i < n && i < API_TOP; i++) {
		if (i)
			buf_putc(b, ',');
		buf_puts(b, "{\"name\":");
		buf_put_json_string(b, c[i].name);
		buf_printf(b, ",\"value\":%llu}", (unsigned long long)c[i].value);
	}
	buf_putc(b, ']');
}

struct strv {
	char **v;
	size_t n, cap;
};

static int strv_add(struct strv *s, const char *a, const char *sep, const char *c)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		char **g = realloc(s->v, cap * sizeof *g);
		if (!g)
			return GPULSE_ENOMEM;
		s->v = g;
		s->cap = cap;
	}
	size_t la = strlen(a), ls = sep ? strlen(sep) : 0, lc = c ? strlen(c) : 0;
	char *p = malloc(la + ls + lc + 1);
	if (!p)
		return GPULSE_ENOMEM;
	memcpy(p, a, la);
	if (ls)
		memcpy(p + la, sep, ls);
	if (lc)
		memcpy(p + la + ls, c, lc);
	p[la + ls + lc] = '\0';
	s->v[s->n++] = p;
	return 0;
}

static void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
}

/* Run-length counts of a sorted array (names point into it). */
static struct count *runs(struct strv *s, size_t *out_n)
{
	struct count *c = calloc(s->n ? s->n : 1, sizeof *c);
	size_t n = 0;
	if (!c)
		return NULL;
	for (size_t i = 0; i < s->n; i++) {
		if (n && strcmp(c[n - 1].name, s->v[i]) == 0)
			c[n - 1].value++;
		else
			c[n++] = (struct count){s->v[i], 1};
	}
	*out_n = n;
	return c;
}

static int handle_tsdb(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_status *st = ctx;
	(void)req;
	struct tsdb *db = atomic_load_explicit(&st->api->db, memory_order_acquire);
	if (!db)
		return http_api_error(resp, 503, "unavailable", "storage is disabled or unavailable");
	struct tsdb_matcher all = {TSDB_MATCH_RE, "__name__", ".+"};
	struct tsdb_select_opts so = {.mint = -(1LL << 52), .maxt = 1LL << 52,
				      .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[256];
	int rc = tsdb_select(db, &all, 1, &so, &it, err, sizeof err);
	if (rc)
		return http_api_error(resp, 500, "internal", err);
	struct strv names = {0}, pairs = {0};
	uint64_t nseries = 0;
	int more;
	while (!rc && (more = tsdb_iter_next_series(it)) == 1) {
		if (++nseries > API_MAX_SERIES_RESULT) {
			rc = -1;
			break;
		}
		size_t nl;
		const struct label *l = tsdb_iter_labels(it, &nl);
		for (size_t i = 0; i < nl && !rc; i++) {
			if (strcmp(l[i].name, "__name__") == 0)
				rc = strv_add(&names, l[i].value, NULL, NULL);
			if (!rc)
				rc = strv_add(&pairs, l[i].name, "=", l[i].value);
		}
	}
	tsdb_iter_free(it);
	if (rc) {
		strv_free(&names);
		strv_free(&pairs);
		if (rc < 0) {
			char msg[96];
			snprintf(msg, sizeof msg, "more than %d series", API_MAX_SERIES_RESULT);
			return http_api_error(resp, 422, "execution", msg);
		}
		return rc;
	}
	if (names.n > 1)
		qsort(names.v, names.n, sizeof *names.v, cmp_cstr);
	if (pairs.n > 1)
		qsort(pairs.v, pairs.n, sizeof *pairs.v, cmp_cstr);
	size_t nn = 0, np = 0;
	struct count *by_name = runs(&names, &nn), *by_pair = runs(&pairs, &np);
	/* Per label name, over distinct pairs: values, and their bytes. */
	struct count *values = calloc(np ? np : 1, sizeof *values);
	struct count *bytes = calloc(np ? np : 1, sizeof *bytes);
	char **label_of = calloc(np ? np : 1, sizeof *label_of);
	size_t nlab = 0;
	if (!by_name || !by_pair || !values || !bytes || !label_of) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		const char *eq = strchr(by_pair[i].name, '=');
		size_t ln = (size_t)(eq - by_pair[i].name);
		if (!nlab || strlen(label_of[nlab - 1]) != ln ||
		    strncmp(label_of[nlab - 1], by_pair[i].name, ln) != 0) {
			label_of[nlab] = strndup(by_pair[i].name, ln);
			if (!label_of[nlab]) {
				rc = GPULSE_ENOMEM;
				goto out;
			}
			values[nlab] = (struct count){label_of[nlab], 0};
			bytes[nlab] = (struct count){label_of[nlab], 0};
			nlab++;
		}
		values[nlab - 1].value++;
		bytes[nlab - 1].value += strlen(eq + 1);
	}
	success(resp);
	struct buf *b = &resp->body;
	buf_printf(b, "{\"headStats\":{\"numSeries\":%llu,\"numLabelPairs\":%zu}",
		   (unsigned long long)nseries, np);
	put_top(b, "seriesCountByMetricName", by_name, nn);
	put_top(b, "labelValueCountByLabelName", values, nlab);
	put_top(b, "memoryInBytesByLabelName", bytes, nlab);
	put_top(b, "seriesCountByLabelValuePair", by_pair, np);
	buf_putc(b, '}');
	rc = done(resp);
out:
	if (label_of)
		for (size_t i = 0; i < nlab; i++)
			free(label_of[i]);
	free(label_of);
	free(values);
	free(bytes);
	free(by_name);
	free(by_pair);
	strv_free(&names);
	strv_free(&pairs);
	return rc;
}

/* ---- /api/v1/metadata ------------------------------------------------------- */

struct family {
	char name[256];
	char type[32];
	char *help;                  /* points into the text, unescaped in place */
};

/* Unescape a HELP text (\\ and \n) in place, up to the end of its line. */
static void unescape_help(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (*r == '\\' && r[1] == 'n') {
			*w++ = '\n';
			r++;
		} else if (*r == '\\' && r[1] == '\\') {
			*w++ = '\\';
			r++;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static struct family *family_of(struct family *f, size_t *n, size_t cap, const char *name,
				size_t len)
{
	for (size_t i = *n; i-- > 0;)
		if (strlen(f[i].name) == len && strncmp(f[i].name, name, len) == 0)
			return &f[i];
	if (*n == cap || len >= sizeof f->name)
		return NULL;
	struct family *x = &f[(*n)++];
	memcpy(x->name, name, len);
	x->name[len] = '\0';
	snprintf(x->type, sizeof x->type, "unknown");
	x->help = NULL;
	return x;
}

#define API_MAX_FAMILIES 4096

static int handle_metadata(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_status *st = ctx;
	const char *nul = http_request_nul_arg(req);
	if (nul) {
		char msg[300];
		snprintf(msg, sizeof msg, "invalid parameter \"%.200s\": the value holds a NUL byte (%%00)", nul);
		return http_api_error(resp, 400, "bad_data", msg);
	}
	long limit = -1;
	const char *ls = http_request_arg(req, "limit");
	if (ls && *ls) {
		char *end;
		errno = 0;
		limit = strtol(ls, &end, 10);
		if (*end || errno)
			return http_api_error(resp, 400, "bad_data", "limit must be a number");
	}
	const char *metric = http_request_arg(req, "metric");
	if (metric && !*metric)
		metric = NULL;
	struct buf text;
	buf_init(&text, 64u << 20);
	int rc = st->metrics_text ? st->metrics_text(st->metrics_ctx, &text) : GPULSE_ENOENT;
	if (rc) {
		buf_free(&text);
		return http_api_error(resp, 500, "internal", "cannot render /metrics");
	}
	struct family *f = calloc(API_MAX_FAMILIES, sizeof *f);
	if (!f) {
		buf_free(&text);
		return GPULSE_ENOMEM;
	}
	size_t nf = 0;
	char *save = NULL;
	for (char *line = text.data ? strtok_r(text.data, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		bool help = strncmp(line, "# HELP ", 7) == 0, type = strncmp(line, "# TYPE ", 7) == 0;
		if (!help && !type)
			continue;
		char *name = line + 7, *sp = strchr(name, ' ');
		size_t len = sp ? (size_t)(sp - name) : strlen(name);
		struct family *x = family_of(f, &nf, API_MAX_FAMILIES, name, len);
		if (!x)
			continue;
		char *rest = sp ? sp + 1 : name + len;
		if (help) {
			unescape_help(rest);
			x->help = rest;
		} else {
			snprintf(x->type, sizeof x->type, "%s", rest);
		}
	}
	success(resp);
	struct buf *b = &resp->body;
	buf_putc(b, '{');
	long shown = 0;
	for (size_t i = 0; i < nf; i++) {
		if (metric && strcmp(metric, f[i].name) != 0)
			continue;
		if (limit >= 0 && shown >= limit)
			break;
		if (shown++)
			buf_putc(b, ',');
		buf_put_json_string(b, f[i].name);
		buf_puts(b, ":[{\"type\":");
		buf_put_json_string(b, f[i].type);
		buf_puts(b, ",\"help\":");
		buf_put_json_string(b, f[i].help ? f[i].help : "");
		buf_puts(b, ",\"unit\":\"\"}]");
	}
	buf_putc(b, '}');
	free(f);
	buf_free(&text);
	return done(resp);
}

/* ---- /-/healthy, /-/ready ---------------------------------------------------- */

static int handle_healthy(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return buf_puts(&resp->body, "gpulsed is Healthy.\n");
}

/* Ready once serving: gpulsed answers /metrics and the live GPUs from
 * its first second, and a store that is still shut (full disk) is said
 * by the query endpoints' 503, not by taking the whole daemon out of a
 * load balancer. */
static int handle_ready(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return buf_puts(&resp->body, "gpulsed is Ready.\n");
}

static int handle_busy(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return http_api_error(resp, 503, "unavailable", "too many queries at once; try again later");
}

int api_status_register(struct http_server *s, struct api_status *st)
{
	static const struct {
		const char *path;
		http_handler_fn *fn;
	} routes[] = {
		{"/api/v1/status/buildinfo", handle_buildinfo},
		{"/api/v1/status/config", handle_config},
		{"/api/v1/status/flags", handle_flags},
		{"/api/v1/status/runtimeinfo", handle_runtimeinfo},
		{"/api/v1/status/tsdb", handle_tsdb},
		{"/api/v1/metadata", handle_metadata},
	};
	int rc = 0;
	for (size_t i = 0; !rc && i < sizeof routes / sizeof *routes; i++)
		rc = http_route_deferred(s, routes[i].path, routes[i].fn, handle_busy, st,
					 st->api->pool);
	if (!rc)
		rc = http_route_reserved(s, "/-/healthy", handle_healthy, st);
	if (!rc)
		rc = http_route_reserved(s, "/-/ready", handle_ready, st);
	return rc;
}
