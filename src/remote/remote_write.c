/* Remote write: the ring, the batcher, the sender (remote_write.h). */
#include "remote/remote_write.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <zlib.h>

#include "common/label.h"
#include "common/clock.h"
#include "common/gofloat.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "common/redact.h"
#include "remote/rw_codec.h"
#include "remote/rw_summary.h"
#include "remote/segq.h"
#include "common/status.h"
#include "common/str.h"

#define NBUCKETS 14
static const double dur_buckets[NBUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
					      2.5, 5, 10, 25, 60, 120};  /* Prometheus's */

struct entry {
	uint32_t ref;
	int64_t t_ms;
	double v;
};

/* What a store series becomes after external labels and relabelling. */
struct cached {
	int state;                 /* 0 unknown, 1 sent, 2 dropped by relabelling */
	size_t n;
	struct label *labels; /* sorted; strings in `strings` */
	char *strings;
};

struct remote_write {
	char *name, *url, *queue_dir;
	char *url_shown;           /* url as logs and labels show it (redact.h) */
	char *hdr_strs[REMOTE_MAX_HEADERS];
	size_t nheaders;
	char *basic_user, *basic_password, *authz;
	char *ca_file, *cert_file, *key_file;
	char *post_url;            /* url, or with tls server_name its host replaced */
	struct curl_slist *connect_to;  /* server_name: where to connect really */
	char *host_hdr;            /* server_name: Host: as the URL says */
	bool insecure;
	struct label ext[REMOTE_MAX_EXTERNAL];
	size_t next;
	struct relabel *rl;
	size_t capacity, max_per_send;
	int64_t deadline_ms, min_backoff_ms, max_backoff_ms, timeout_ms;
	bool retry_429;
	struct rw_summary *sum;    /* mode: summary; batcher only */
	atomic_uint_fast64_t sum_in, sum_out, sum_raw;

	_Atomic(struct tsdb *) db;
	struct segq *q;

	/* The ring, under mu. */
	pthread_mutex_t mu;
	struct mono_cond cv_batch; /* the batcher waits for samples */
	struct mono_cond cv_send;  /* the sender waits for records or back-off */
	struct entry *ring;
	size_t head, count;
	bool stopping, running;
	uint64_t appended_records;  /* batcher's count, under mu: wakes the sender */

	pthread_t batcher, sender;

	/* The batcher's cache of series, indexed by ref - 1 (batcher only). */
	struct cached *cache;
	size_t ncache;

	atomic_uint_fast64_t samples_total, failed_total, retried_total, dropped_total, lost_ring,
		lost_queue, bytes_total, requests_total, requests_failed, highest_t_ms;
	atomic_uint_fast64_t hist[NBUCKETS + 1];
	_Atomic double hist_sum;
	atomic_uint_fast64_t hist_count;
	struct complaint send_complaint;  /* sender thread only */
};

static char *xdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void remote_write_set_store(struct remote_write *rw, struct tsdb *db)
{
	atomic_store(&rw->db, db);
}

/* tls_config.server_name, as Prometheus means it: connect to the URL's
 * host, but verify the certificate for (and send as SNI) server_name.
 * libcurl takes the name to verify from the URL, so the URL gets
 * server_name as its host, CURLOPT_CONNECT_TO sends the connection to
 * the real host, and the Host header keeps the URL's. */
static int server_name_setup(struct remote_write *rw, const char *sn, char *err, size_t errlen)
{
	if (!sn || !sn[0]) {
		rw->post_url = xdup(rw->url);
		return rw->post_url ? 0 : GPULSE_ENOMEM;
	}
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *scheme = NULL;
	int rc = GPULSE_EINVAL;
	if (!u || curl_url_set(u, CURLUPART_URL, rw->url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		str_errf(err, errlen, "url \"%.200s\": cannot be parsed", rw->url_shown);
		goto out;
	}
	if (strcmp(scheme, "https") != 0) {
		str_errf(err, errlen, "tls_config.server_name needs an https:// url");
		goto out;
	}
	char ct[1200], hh[600];
	snprintf(ct, sizeof ct, "%s:%s:%s:%s", sn, port, host, port);
	snprintf(hh, sizeof hh, "Host: %s%s%s", host, strcmp(port, "443") ? ":" : "",
		 strcmp(port, "443") ? port : "");
	rc = GPULSE_ENOMEM;
	char *nu = NULL;
	if (curl_url_set(u, CURLUPART_HOST, sn, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_URL, &nu, 0) != CURLUE_OK) {
		str_errf(err, errlen, "tls_config.server_name \"%.100s\" is not a host name", sn);
		rc = GPULSE_EINVAL;
		goto out;
	}
	rw->post_url = xdup(nu);
	curl_free(nu);
	rw->connect_to = curl_slist_append(NULL, ct);
	rw->host_hdr = xdup(hh);
	if (rw->post_url && rw->connect_to && rw->host_hdr)
		rc = 0;
out:
	curl_free(host);
	curl_free(port);
	curl_free(scheme);
	curl_url_cleanup(u);
	return rc;
}

int remote_write_create(struct remote_write **out, const struct remote_write_opts *o, char *err,
			size_t errlen)
{
	*out = NULL;
	char shown[256];
	redact_url(shown, sizeof shown, o->url ? o->url : "");
	if (!o->url || (strncmp(o->url, "http://", 7) != 0 && strncmp(o->url, "https://", 8) != 0)) {
		str_errf(err, errlen, "url \"%s\" must start with http:// or https://", shown);
		return GPULSE_EINVAL;
	}
	if (!o->queue_dir || !o->queue_dir[0]) {
		str_errf(err, errlen, "%s: no queue folder", shown);
		return GPULSE_EINVAL;
	}
	struct remote_write *rw = calloc(1, sizeof *rw);
	if (!rw)
		return GPULSE_ENOMEM;
	pthread_mutex_init(&rw->mu, NULL);
	mono_cond_init(&rw->cv_batch);
	mono_cond_init(&rw->cv_send);
	int rc = GPULSE_ENOMEM;
	rw->url = xdup(o->url);
	rw->url_shown = redact_url_dup(o->url);
	if (!rw->url_shown)
		goto fail;
	if (o->name && o->name[0]) {
		rw->name = xdup(o->name);
	} else {
		/* Prometheus names an unnamed queue by a hash of its config with
		 * the secrets masked; a short, stable form of the URL is clearer
		 * in a label. The shown URL: a CRC of the password and the rest
		 * of the URL (in the url label) would let a reader search the
		 * password out. */
		char nm[64];
		snprintf(nm, sizeof nm, "%08lx",
			 (unsigned long)crc32(0L, (const Bytef *)rw->url_shown, (uInt)strlen(rw->url_shown)));
		rw->name = xdup(nm);
	}
	rw->queue_dir = xdup(o->queue_dir);
	for (size_t i = 0; i < o->nheaders && i < REMOTE_MAX_HEADERS; i++) {
		size_t n = strlen(o->headers[i][0]) + strlen(o->headers[i][1]) + 3;
		if (!(rw->hdr_strs[i] = malloc(n)))
			goto fail;
		snprintf(rw->hdr_strs[i], n, "%s: %s", o->headers[i][0], o->headers[i][1]);
		rw->nheaders = i + 1;
	}
	rw->basic_user = xdup(o->basic_user);
	rw->basic_password = xdup(o->basic_password ? o->basic_password : (o->basic_user ? "" : NULL));
	if (o->auth_credentials) {
		const char *type = o->auth_type && o->auth_type[0] ? o->auth_type : "Bearer";
		size_t n = strlen(type) + strlen(o->auth_credentials) + 24;
		if (!(rw->authz = malloc(n)))
			goto fail;
		snprintf(rw->authz, n, "Authorization: %s %s", type, o->auth_credentials);
	}
	rw->ca_file = xdup(o->ca_file);
	rw->cert_file = xdup(o->cert_file);
	rw->key_file = xdup(o->key_file);
	rw->insecure = o->insecure_skip_verify;
	if ((rc = server_name_setup(rw, o->server_name, err, errlen)))
		goto fail;
	rc = GPULSE_ENOMEM;
	for (size_t i = 0; i < o->nexternal && i < REMOTE_MAX_EXTERNAL; i++) {
		rw->ext[i].name = xdup(o->external[i].name);
		rw->ext[i].value = xdup(o->external[i].value);
		rw->next = i + 1;
		if (!rw->ext[i].name || !rw->ext[i].value)
			goto fail;
	}
	if (!rw->url || !rw->name || !rw->queue_dir)
		goto fail;
	if ((rc = relabel_compile(o->relabel, o->nrelabel, &rw->rl, err, errlen)))
		goto fail;
	rw->capacity = o->capacity ? o->capacity : 10000;
	rw->max_per_send = o->max_samples_per_send ? o->max_samples_per_send : 2000;
	rw->deadline_ms = o->batch_send_deadline_ms ? o->batch_send_deadline_ms : 5000;
	rw->min_backoff_ms = o->min_backoff_ms ? o->min_backoff_ms : 30;
	rw->max_backoff_ms = o->max_backoff_ms ? o->max_backoff_ms : 5000;
	rw->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	rw->retry_429 = o->retry_on_429;
	rc = GPULSE_ENOMEM;
	if (!(rw->ring = calloc(rw->capacity, sizeof *rw->ring)))
		goto fail;
	if (o->summary) {
		struct rw_summary_opts so = {.interval_ms = o->summary_interval_ms,
					     .quantile = o->summary_quantile,
					     .anomaly_threshold = o->summary_anomaly_threshold};
		if (rw_summary_create(&rw->sum, &so))
			goto fail;
	}
	if ((rc = segq_open(&rw->q, rw->queue_dir, o->queue_max_bytes ? o->queue_max_bytes : 256u << 20,
			    err, errlen)))
		goto fail;
	*out = rw;
	return 0;
fail:
	remote_write_destroy(rw);
	return rc;
}

void remote_write_on_append(void *ctx, uint32_t ref, int64_t t_ms, double v)
{
	struct remote_write *rw = ctx;
	pthread_mutex_lock(&rw->mu);
	if (rw->count == rw->capacity) {
		pthread_mutex_unlock(&rw->mu);
		atomic_fetch_add(&rw->lost_ring, 1);
		return;
	}
	rw->ring[(rw->head + rw->count) % rw->capacity] = (struct entry){ref, t_ms, v};
	rw->count++;
	if (rw->count >= rw->max_per_send)
		mono_cond_signal(&rw->cv_batch);
	pthread_mutex_unlock(&rw->mu);
	uint64_t t = (uint64_t)t_ms, h = atomic_load(&rw->highest_t_ms);
	while (t > h && !atomic_compare_exchange_weak(&rw->highest_t_ms, &h, t))
		;
}

/* ---- the batcher ---- */

/* Resolve a ref into its labels as sent (cached). NULL: not sent. */
static const struct cached *resolve(struct remote_write *rw, uint32_t ref)
{
	if (ref == 0)
		return NULL;
	if (ref > rw->ncache) {
		size_t n = rw->ncache ? rw->ncache : 1024;
		while (n < ref)
			n *= 2;
		struct cached *c = realloc(rw->cache, n * sizeof *c);
		if (!c)
			return NULL;
		memset(c + rw->ncache, 0, (n - rw->ncache) * sizeof *c);
		rw->cache = c;
		rw->ncache = n;
	}
	struct cached *c = &rw->cache[ref - 1];
	if (c->state)
		return c->state == 1 ? c : NULL;
	struct tsdb *db = atomic_load(&rw->db);
	const struct label *sl = NULL;
	size_t sn = 0;
	if (!db || tsdb_series_labels(db, ref, &sl, &sn) != 0)
		return NULL;
	struct label in[TSDB_MAX_LABELS + REMOTE_MAX_EXTERNAL];
	size_t n = 0;
	for (size_t i = 0; i < sn; i++)
		in[n++] = sl[i];
	for (size_t i = 0; i < rw->next; i++) {
		bool have = false;
		for (size_t j = 0; j < sn && !have; j++)
			have = strcmp(sl[j].name, rw->ext[i].name) == 0;
		if (!have)
			in[n++] = rw->ext[i];
	}
	struct relabel_set set = {0};
	bool keep = false;
	if (relabel_apply(rw->rl, in, n, &set, &keep) != 0 || !keep) {
		relabel_set_clear(&set);
		c->state = 2;
		return NULL;
	}
	size_t bytes = 0;
	for (size_t i = 0; i < set.n; i++)
		bytes += strlen(set.name[i]) + strlen(set.value[i]) + 2;
	c->labels = calloc(set.n, sizeof *c->labels);
	c->strings = malloc(bytes ? bytes : 1);
	if (!c->labels || !c->strings) {
		free(c->labels);
		free(c->strings);
		c->labels = NULL;
		c->strings = NULL;
		relabel_set_clear(&set);
		return NULL;   /* tried again next time */
	}
	char *p = c->strings;
	for (size_t i = 0; i < set.n; i++) {
		size_t ln = strlen(set.name[i]) + 1, lv = strlen(set.value[i]) + 1;
		memcpy(p, set.name[i], ln);
		c->labels[i].name = p;
		memcpy(p + ln, set.value[i], lv);
		c->labels[i].value = p + ln;
		p += ln + lv;
	}
	c->n = set.n;
	qsort(c->labels, c->n, sizeof *c->labels, label_cmp_name);
	relabel_set_clear(&set);
	c->state = 1;
	return c;
}

/* A sample to send, keyed by its series (same key, same labels). */
struct out {
	const void *key;
	const struct label *labels;
	size_t n;
	int64_t t_ms;
	double v;
};

struct outvec {
	struct out *v;
	size_t n, cap;
	bool failed;
};

static void out_push(void *ctx, const void *key, const struct label *labels, size_t n,
		     int64_t t_ms, double v)
{
	struct outvec *o = ctx;
	if (o->n == o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 4096;
		struct out *nv = realloc(o->v, cap * sizeof *nv);
		if (!nv) {
			o->failed = true;
			return;
		}
		o->v = nv;
		o->cap = cap;
	}
	o->v[o->n++] = (struct out){key, labels, n, t_ms, v};
}

static int out_cmp(const void *a, const void *b)
{
	const struct out *x = a, *y = b;
	if (x->key != y->key)
		return (uintptr_t)x->key < (uintptr_t)y->key ? -1 : 1;
	return x->t_ms < y->t_ms ? -1 : x->t_ms > y->t_ms;
}

/* Encode what `o` holds as requests of at most max_per_send samples and
 * append them to the queue; o is emptied. */
static void send_out(struct remote_write *rw, struct outvec *o, struct buf *body)
{
	if (o->failed) {
		atomic_fetch_add(&rw->lost_queue, 1);
		o->failed = false;
	}
	if (!o->n)
		return;
	qsort(o->v, o->n, sizeof *o->v, out_cmp);
	struct rw_series *ser = calloc(rw->max_per_send, sizeof *ser);
	struct rw_sample *sm = calloc(rw->max_per_send, sizeof *sm);
	if (!ser || !sm) {
		atomic_fetch_add(&rw->lost_queue, o->n);
		o->n = 0;
		free(ser);
		free(sm);
		return;
	}
	for (size_t i = 0; i < o->n;) {
		size_t ns = 0, nsm = 0;
		int64_t max_t = 0;
		while (i < o->n && nsm < rw->max_per_send) {
			ser[ns] = (struct rw_series){o->v[i].labels, o->v[i].n, &sm[nsm], 0};
			const void *key = o->v[i].key;
			while (i < o->n && o->v[i].key == key && nsm < rw->max_per_send) {
				sm[nsm++] = (struct rw_sample){o->v[i].t_ms, o->v[i].v};
				if (o->v[i].t_ms > max_t)
					max_t = o->v[i].t_ms;
				ser[ns].nsamples++;
				i++;
			}
			ns++;
		}
		buf_reset(body);
		char err[256];
		int rc = rw_encode(ser, ns, body);
		if (rc == 0)
			rc = segq_append(rw->q, body->data, body->len, (uint32_t)nsm, max_t, err, sizeof err);
		else
			snprintf(err, sizeof err, "cannot encode a request: %s", gpulse_strerror(rc));
		if (rc) {
			atomic_fetch_add(&rw->lost_queue, nsm);
			log_warn("remote_write %s: %s; %zu samples lost", rw->name, err, nsm);
			continue;
		}
		pthread_mutex_lock(&rw->mu);
		rw->appended_records++;
		mono_cond_signal(&rw->cv_send);
		pthread_mutex_unlock(&rw->mu);
	}
	o->n = 0;
	free(ser);
	free(sm);
}

/* The batch `e` (n entries from the ring): resolved, relabelled, and in
 * summary mode summarised, into o. */
static void take_batch(struct remote_write *rw, const struct entry *e, size_t n, struct outvec *o)
{
	size_t dropped = 0;
	struct tsdb *db = atomic_load(&rw->db);
	for (size_t i = 0; i < n; i++) {
		if (rw->sum && db) {
			const struct label *sl;
			size_t sn;
			if (tsdb_series_labels(db, e[i].ref, &sl, &sn) == 0)
				rw_summary_observe(rw->sum, sl, sn, e[i].t_ms, e[i].v);
		}
		const struct cached *c = resolve(rw, e[i].ref);
		if (!c) {
			dropped++;
			continue;
		}
		if (rw->sum)
			rw_summary_add(rw->sum, e[i].ref, c->labels, c->n, e[i].t_ms, e[i].v, out_push, o);
		else
			out_push(o, c, c->labels, c->n, e[i].t_ms, e[i].v);
	}
	atomic_fetch_add(&rw->dropped_total, dropped);
	if (rw->sum) {
		struct rw_summary_stats st;
		rw_summary_get_stats(rw->sum, &st);
		atomic_store(&rw->sum_in, st.samples_in_total);
		atomic_store(&rw->sum_out, st.summaries_total);
		atomic_store(&rw->sum_raw, st.raw_passthrough_total);
	}
}

/* Not common/periodic: a batch is sent when it is full or its deadline
 * passes, whichever is first, so the wait ends on samples arriving too. */
static void *batcher_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-rw-batch");
	struct remote_write *rw = arg;
	struct entry *batch = calloc(rw->max_per_send, sizeof *batch);
	struct outvec ov = {0};
	struct buf body;
	buf_init(&body, SEGQ_MAX_RECORD);
	if (!batch) {
		log_error("remote_write %s: out of memory; nothing is sent", rw->name);
		return NULL;
	}
	pthread_mutex_lock(&rw->mu);
	for (;;) {
		int64_t until = clock_mono_ns() + rw->deadline_ms * NS_PER_MS;
		while (!rw->stopping && rw->count < rw->max_per_send)
			if (mono_cond_wait_until(&rw->cv_batch, &rw->mu, until) == ETIMEDOUT)
				break;
		bool stop = rw->stopping;
		/* Drain everything there is, a request at a time. */
		while (rw->count) {
			size_t n = rw->count < rw->max_per_send ? rw->count : rw->max_per_send;
			for (size_t i = 0; i < n; i++)
				batch[i] = rw->ring[(rw->head + i) % rw->capacity];
			rw->head = (rw->head + n) % rw->capacity;
			rw->count -= n;
			pthread_mutex_unlock(&rw->mu);
			take_batch(rw, batch, n, &ov);
			if (ov.n >= rw->max_per_send)
				send_out(rw, &ov, &body);
			pthread_mutex_lock(&rw->mu);
			if (!stop && rw->count < rw->max_per_send)
				break;
		}
		pthread_mutex_unlock(&rw->mu);
		/* Intervals that ended a deadline ago: a series that went quiet
		 * still gets its summary. Partial intervals are not sent at a
		 * stop (docs/internals/remote.md). */
		if (rw->sum)
			rw_summary_sweep(rw->sum, clock_wall_ns() / 1000000 - rw->deadline_ms, out_push,
					 &ov);
		send_out(rw, &ov, &body);
		pthread_mutex_lock(&rw->mu);
		if (stop)
			break;
	}
	pthread_mutex_unlock(&rw->mu);
	free(ov.v);
	free(batch);
	buf_free(&body);
	return NULL;
}

/* ---- the sender ---- */

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
	(void)p;
	struct buf *b = ud;
	buf_append(b, p, sz * n);  /* the error text, bounded by the buffer */
	return sz * n;
}

static int abort_on_stop(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a; (void)b; (void)c; (void)d;
	struct remote_write *rw = ud;
	pthread_mutex_lock(&rw->mu);
	bool s = rw->stopping;
	pthread_mutex_unlock(&rw->mu);
	return s ? 1 : 0;
}

static void observe(struct remote_write *rw, double s)
{
	size_t i = 0;
	while (i < NBUCKETS && s > dur_buckets[i])
		i++;
	atomic_fetch_add(&rw->hist[i], 1);
	double old = atomic_load(&rw->hist_sum);
	while (!atomic_compare_exchange_weak(&rw->hist_sum, &old, old + s))
		;
	atomic_fetch_add(&rw->hist_count, 1);
}

/* One POST. Returns the HTTP status, or 0 for a network error (text in cerr). */
static long post(struct remote_write *rw, CURL *c, const struct buf *body, char *cerr,
		 struct buf *resp)
{
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "Content-Encoding: snappy");
	h = curl_slist_append(h, "Content-Type: application/x-protobuf");
	h = curl_slist_append(h, "X-Prometheus-Remote-Write-Version: 0.1.0");
	h = curl_slist_append(h, "User-Agent: gpulsed/" GPULSE_VERSION);
	h = curl_slist_append(h, "Expect:");
	if (rw->authz)
		h = curl_slist_append(h, rw->authz);
	if (rw->host_hdr)
		h = curl_slist_append(h, rw->host_hdr);
	for (size_t i = 0; i < rw->nheaders; i++)
		h = curl_slist_append(h, rw->hdr_strs[i]);
	curl_easy_setopt(c, CURLOPT_URL, rw->post_url);
	if (rw->connect_to)
		curl_easy_setopt(c, CURLOPT_CONNECT_TO, rw->connect_to);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)rw->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)rw->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, rw);
	if (rw->basic_user) {
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, rw->basic_user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, rw->basic_password);
	}
	if (rw->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, rw->ca_file);
	if (rw->cert_file)
		curl_easy_setopt(c, CURLOPT_SSLCERT, rw->cert_file);
	if (rw->key_file)
		curl_easy_setopt(c, CURLOPT_SSLKEY, rw->key_file);
	if (rw->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	cerr[0] = '\0';
	buf_reset(resp);
	CURLcode cc = curl_easy_perform(c);
	long code = 0;
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	else if (!cerr[0])
		snprintf(cerr, CURL_ERROR_SIZE, "%s", curl_easy_strerror(cc));
	curl_slist_free_all(h);
	return code;
}

/* Sleep ms unless stopping (then return true). The sender's back-off, a
 * length picked after each failure: not a period (common/periodic). */
static bool wait_or_stop(struct remote_write *rw, int64_t ms)
{
	int64_t until = clock_mono_ns() + ms * NS_PER_MS;
	pthread_mutex_lock(&rw->mu);
	while (!rw->stopping)
		if (mono_cond_wait_until(&rw->cv_send, &rw->mu, until) == ETIMEDOUT)
			break;
	bool s = rw->stopping;
	pthread_mutex_unlock(&rw->mu);
	return s;
}

static void *sender_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-rw-send");
	struct remote_write *rw = arg;
	CURL *c = curl_easy_init();
	struct buf body, resp;
	buf_init(&body, SEGQ_MAX_RECORD + 1);
	buf_init(&resp, 1024);
	char cerr[CURL_ERROR_SIZE];
	if (!c) {
		log_error("remote_write %s: cannot start libcurl; nothing is sent", rw->name);
		return NULL;
	}
	int64_t backoff = rw->min_backoff_ms;
	for (;;) {
		pthread_mutex_lock(&rw->mu);
		bool stop = rw->stopping;
		uint64_t seen = rw->appended_records;
		pthread_mutex_unlock(&rw->mu);
		if (stop)
			break;
		struct segq_hdr h;
		struct segq_pos pos;
		int rc = segq_peek(rw->q, &body, &h, &pos);
		if (rc == GPULSE_ENOENT) {
			int64_t until = clock_mono_ns() + NS_PER_SEC;
			pthread_mutex_lock(&rw->mu);
			while (!rw->stopping && rw->appended_records == seen)
				if (mono_cond_wait_until(&rw->cv_send, &rw->mu, until) == ETIMEDOUT)
					break;
			pthread_mutex_unlock(&rw->mu);
			continue;
		}
		if (rc) {
			complain(&rw->send_complaint, "remote_write %s: reading the queue in %s: %s",
				 rw->name, rw->queue_dir, gpulse_strerror(rc));
			if (wait_or_stop(rw, 1000))
				break;
			continue;
		}
		int64_t t0 = clock_mono_ns();
		long code = post(rw, c, &body, cerr, &resp);
		atomic_fetch_add(&rw->requests_total, 1);
		if (code >= 200 && code < 300) {
			observe(rw, (double)(clock_mono_ns() - t0) / 1e9);
			atomic_fetch_add(&rw->samples_total, h.nsamples);
			atomic_fetch_add(&rw->bytes_total, body.len);
			segq_ack(rw->q, &pos, &h);
			backoff = rw->min_backoff_ms;
			complaint_clear(&rw->send_complaint, "remote_write %s: sending to %s again",
					rw->name, rw->url_shown);
			continue;
		}
		atomic_fetch_add(&rw->requests_failed, 1);
		bool recoverable = code == 0 || code >= 500 || (code == 429 && rw->retry_429);
		if (!recoverable) {
			/* As Prometheus: the receiver refused this data; resending it
			 * would be refused again. */
			atomic_fetch_add(&rw->failed_total, h.nsamples);
			segq_ack(rw->q, &pos, &h);
			log_warn("remote_write %s: %s answered %ld: %.200s; %u samples dropped", rw->name,
				 rw->url_shown, code, resp.data ? resp.data : "", h.nsamples);
			continue;
		}
		pthread_mutex_lock(&rw->mu);
		stop = rw->stopping;
		pthread_mutex_unlock(&rw->mu);
		if (stop)
			break;   /* abandoned: it stays queued for the next start */
		atomic_fetch_add(&rw->retried_total, h.nsamples);
		if (code)
			complain(&rw->send_complaint, "remote_write %s: %s answered %ld: %.200s; retrying",
				 rw->name, rw->url_shown, code, resp.data ? resp.data : "");
		else
			complain(&rw->send_complaint, "remote_write %s: %s: %s; retrying", rw->name,
				 rw->url_shown, cerr);
		if (wait_or_stop(rw, backoff))
			break;
		backoff = backoff * 2 > rw->max_backoff_ms ? rw->max_backoff_ms : backoff * 2;
	}
	curl_easy_cleanup(c);
	buf_free(&body);
	buf_free(&resp);
	return NULL;
}

int remote_write_start(struct remote_write *rw)
{
	if (rw->running)
		return GPULSE_ESTATE;
	rw->stopping = false;
	if (pthread_create(&rw->batcher, NULL, batcher_main, rw) != 0)
		return GPULSE_ENOMEM;
	if (pthread_create(&rw->sender, NULL, sender_main, rw) != 0) {
		pthread_mutex_lock(&rw->mu);
		rw->stopping = true;
		mono_cond_broadcast(&rw->cv_batch);
		pthread_mutex_unlock(&rw->mu);
		pthread_join(rw->batcher, NULL);
		return GPULSE_ENOMEM;
	}
	rw->running = true;
	return 0;
}

void remote_write_stop(struct remote_write *rw)
{
	if (!rw || !rw->running)
		return;
	pthread_mutex_lock(&rw->mu);
	rw->stopping = true;
	mono_cond_broadcast(&rw->cv_batch);
	mono_cond_broadcast(&rw->cv_send);
	pthread_mutex_unlock(&rw->mu);
	pthread_join(rw->batcher, NULL);  /* it writes the ring to disk first */
	pthread_join(rw->sender, NULL);
	rw->running = false;
	struct remote_write_stats st;
	remote_write_get_stats(rw, &st);
	log_info("remote_write %s: stopped; %llu samples delivered since start, %llu queued in %s",
		 rw->name, (unsigned long long)st.samples_total,
		 (unsigned long long)st.samples_pending, rw->queue_dir);
}

void remote_write_destroy(struct remote_write *rw)
{
	if (!rw)
		return;
	remote_write_stop(rw);
	segq_close(rw->q);
	relabel_free(rw->rl);
	rw_summary_destroy(rw->sum);
	for (size_t i = 0; i < rw->ncache; i++) {
		free(rw->cache[i].labels);
		free(rw->cache[i].strings);
	}
	free(rw->cache);
	free(rw->ring);
	for (size_t i = 0; i < rw->nheaders; i++)
		free(rw->hdr_strs[i]);
	for (size_t i = 0; i < rw->next; i++) {
		free((char *)(uintptr_t)rw->ext[i].name);
		free((char *)(uintptr_t)rw->ext[i].value);
	}
	free(rw->name);
	free(rw->url);
	free(rw->url_shown);
	free(rw->queue_dir);
	free(rw->basic_user);
	free(rw->basic_password);
	free(rw->authz);
	free(rw->ca_file);
	free(rw->cert_file);
	free(rw->key_file);
	free(rw->post_url);
	free(rw->host_hdr);
	curl_slist_free_all(rw->connect_to);
	mono_cond_destroy(&rw->cv_batch);
	mono_cond_destroy(&rw->cv_send);
	pthread_mutex_destroy(&rw->mu);
	free(rw);
}

void remote_write_get_stats(struct remote_write *rw, struct remote_write_stats *out)
{
	memset(out, 0, sizeof *out);
	struct segq_stats q;
	segq_get_stats(rw->q, &q);
	pthread_mutex_lock(&rw->mu);
	uint64_t ring = rw->count;
	pthread_mutex_unlock(&rw->mu);
	out->samples_total = atomic_load(&rw->samples_total);
	out->samples_failed_total = atomic_load(&rw->failed_total);
	out->samples_retried_total = atomic_load(&rw->retried_total);
	out->samples_dropped_total = atomic_load(&rw->dropped_total);
	out->samples_lost_ring_total = atomic_load(&rw->lost_ring);
	out->samples_lost_queue_total = atomic_load(&rw->lost_queue) + q.dropped_samples_total +
					q.corrupt_samples_total;
	out->samples_pending = q.pending_samples + ring;
	out->bytes_total = atomic_load(&rw->bytes_total);
	out->requests_total = atomic_load(&rw->requests_total);
	out->requests_failed_total = atomic_load(&rw->requests_failed);
	out->corrupt_records_total = q.corrupt_records_total;
	out->highest_t_ms = (int64_t)atomic_load(&rw->highest_t_ms);
	out->highest_sent_t_ms = q.newest_acked_t_ms;
	out->summary_in_total = atomic_load(&rw->sum_in);
	out->summary_out_total = atomic_load(&rw->sum_out);
	out->summary_raw_total = atomic_load(&rw->sum_raw);
}

/* ---- /metrics ---- */

/* The families of remote_write_metrics, in /metrics order, each per
 * writer (remote_name, url). */
#define RW_LABELS ((const char *const[]){"remote_name", "url", NULL})
#define RW_CTR(id, name, help) [id] = {name, METRIC_KIND_COUNTER, help, RW_LABELS},
#define RW_GAUGE(id, name, help) [id] = {name, METRIC_KIND_GAUGE, help, RW_LABELS},
enum {
	RW_SAMPLES, RW_FAILED, RW_RETRIED, RW_DROPPED, RW_BYTES, RW_PENDING, RW_HIGHEST,
	RW_HIGHEST_SENT, RW_SHARDS, RW_LOST, RW_CORRUPT, RW_AGGREGATED, RW_PASSTHROUGH,
	RW_REQUESTS_FAILED, RW_DURATION, RW_NFAM
};
static const struct metric_family rw_fam[RW_NFAM] = {
	RW_CTR(RW_SAMPLES, "prometheus_remote_storage_samples_total",
	       "Samples sent to the remote storage.")
	RW_CTR(RW_FAILED, "prometheus_remote_storage_samples_failed_total",
	       "Samples the remote storage refused (non-recoverable errors).")
	RW_CTR(RW_RETRIED, "prometheus_remote_storage_samples_retried_total",
	       "Samples whose send failed recoverably and was retried.")
	RW_CTR(RW_DROPPED, "prometheus_remote_storage_samples_dropped_total",
	       "Samples dropped by write_relabel_configs.")
	RW_CTR(RW_BYTES, "prometheus_remote_storage_bytes_total",
	       "Request bytes sent (after compression).")
	RW_GAUGE(RW_PENDING, "prometheus_remote_storage_samples_pending",
		 "Samples in the ring and the queue on disk, not yet sent.")
	RW_GAUGE(RW_HIGHEST, "prometheus_remote_storage_highest_timestamp_in_seconds",
		 "Newest sample time handed to the queue, in Unix seconds.")
	RW_GAUGE(RW_HIGHEST_SENT, "prometheus_remote_storage_queue_highest_sent_timestamp_seconds",
		 "Newest sample time the remote storage acknowledged, in Unix seconds.")
	RW_GAUGE(RW_SHARDS, "prometheus_remote_storage_shards",
		 "Sending shards (gpulse sends in order from one queue: one).")
	RW_CTR(RW_LOST, "gpulse_remote_write_samples_lost_total",
	       "Samples lost before reaching the disk queue or dropped from it (ring full, "
	       "queue_max_bytes, damaged records, write errors).")
	RW_CTR(RW_CORRUPT, "gpulse_remote_write_corrupt_records_total",
	       "Torn or damaged queue records cut off or skipped.")
	RW_CTR(RW_AGGREGATED, "gpulse_remote_write_aggregated_samples_total",
	       "mode: summary: summary samples made (and counters' last samples).")
	RW_CTR(RW_PASSTHROUGH, "gpulse_remote_write_passthrough_samples_total",
	       "mode: summary: raw samples sent because their GPU was anomalous or alerting.")
	RW_CTR(RW_REQUESTS_FAILED, "gpulse_remote_write_requests_failed_total",
	       "Requests that failed (any reason).")
	[RW_DURATION] = {"prometheus_remote_storage_sent_batch_duration_seconds",
			 METRIC_KIND_HISTOGRAM, "Duration of successful sends to the remote storage.",
			 RW_LABELS},
};
#undef RW_CTR
#undef RW_GAUGE
#undef RW_LABELS

void remote_write_metrics(struct remote_write *const *rws, size_t n, struct metric_sink *s)
{
	if (!n)
		return;
	struct remote_write_stats *st = calloc(n, sizeof *st);
	if (!st)
		return;
	for (size_t i = 0; i < n; i++)
		remote_write_get_stats(rws[i], &st[i]);
#define PER(id, expr)                                                                   \
	do {                                                                            \
		for (size_t i = 0; i < n; i++)                                          \
			metric_f64(s, &rw_fam[id],                                      \
				   (const char *const[]){rws[i]->name, rws[i]->url_shown}, \
				   (double)(expr));                                     \
	} while (0)
	PER(RW_SAMPLES, st[i].samples_total);
	PER(RW_FAILED, st[i].samples_failed_total);
	PER(RW_RETRIED, st[i].samples_retried_total);
	PER(RW_DROPPED, st[i].samples_dropped_total);
	PER(RW_BYTES, st[i].bytes_total);
	PER(RW_PENDING, st[i].samples_pending);
	PER(RW_HIGHEST, (double)st[i].highest_t_ms / 1000.0);
	PER(RW_HIGHEST_SENT, (double)st[i].highest_sent_t_ms / 1000.0);
	PER(RW_SHARDS, 1);
	PER(RW_LOST, st[i].samples_lost_ring_total + st[i].samples_lost_queue_total);
	PER(RW_CORRUPT, st[i].corrupt_records_total);
	PER(RW_AGGREGATED, st[i].summary_out_total);
	PER(RW_PASSTHROUGH, st[i].summary_raw_total);
	PER(RW_REQUESTS_FAILED, st[i].requests_failed_total);
#undef PER
	/* le as Go writes it, in both formats (as before the sink). */
	char le[NBUCKETS][GOFLOAT_CG_MAX];
	for (size_t b = 0; b < NBUCKETS; b++)
		le[b][gofloat_format_cg(le[b], dur_buckets[b])] = '\0';
	const struct metric_family *h = &rw_fam[RW_DURATION];
	for (size_t i = 0; i < n; i++) {
		uint64_t cum = 0;
		for (size_t b = 0; b <= NBUCKETS; b++) {
			cum += atomic_load(&rws[i]->hist[b]);
			s->ops->u64(s, h, "_bucket",
				    (const char *const[]){rws[i]->name, rws[i]->url_shown,
							  b < NBUCKETS ? le[b] : "+Inf"},
				    cum);
		}
		s->ops->f64(s, h, "_sum", (const char *const[]){rws[i]->name, rws[i]->url_shown},
			    atomic_load(&rws[i]->hist_sum));
		s->ops->u64(s, h, "_count", (const char *const[]){rws[i]->name, rws[i]->url_shown},
			    atomic_load(&rws[i]->hist_count));
	}
	free(st);
}
