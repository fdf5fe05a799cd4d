/* Alert delivery; see notify.h and docs/internals/alerting.md.
 *
 * Threads: the rule engine calls notify_sink (ring lock only, O(notices));
 * one dispatcher turns notices into batches; one sender per receiver
 * sends its FIFO in order. Locks: `ring_lock` guards the ring, `lock`
 * guards every receiver's FIFO, the queue totals and the counters. Disk
 * and network I/O never run under `lock`.
 *
 * Why one file: the sink, the dispatcher, the senders and the on-disk
 * queue share the private struct notify and its two locks, whose rules
 * (above) are easier kept when written once; the pure parts already stand
 * apart (group.c, item.c, matcher.c). */
#include "alert/notify.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "alert/batchfile.h"
#include "common/buf.h"
#include "common/clock.h"
#include "alert/group.h"
#include "common/hash.h"
#include "alert/item.h"
#include "common/log.h"
#include "alert/matcher.h"
#include "common/mono_cond.h"
#include "common/redact.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

#ifndef GPULSE_VERSION
#define GPULSE_VERSION "unknown"
#endif

#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_BACKOFF_MS 500
#define DEFAULT_BACKOFF_MAX_MS 60000
#define RESPONSE_MAX 4096          /* bytes of a response body kept for the log */
#define EXEC_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

extern char **environ;

const double notify_latency_bounds[NOTIFY_LATENCY_BUCKETS] = {
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600,
};

const char *notify_kind_name(enum notify_kind k)
{
	switch (k) {
	case NOTIFY_ALERTMANAGER: return "alertmanager";
	case NOTIFY_WEBHOOK: return "webhook";
	case NOTIFY_EXEC: return "exec";
	}
	return "unknown";
}

/* One pending batch. */
struct entry {
	struct entry *next;
	uint64_t seq;
	int64_t created_ms;        /* wall */
	int64_t first_mono_ns;     /* earliest notice's arrival; 0 after a restart */
	unsigned nalerts;
	char *body;
	size_t len;
	/* Alertmanager batches: the dispatch that made it (0: loaded from
	 * disk), and the earliest endsAt of its firing alerts (INT64_MIN:
	 * unknown, check at every attempt). See refresh_stale. */
	uint64_t gen;
	int64_t stale_ms;
	bool on_disk;
	bool in_flight;
};

enum send_result { SEND_OK, SEND_RETRY, SEND_REFUSED };

struct receiver {
	struct notify *n;
	enum notify_kind kind;
	char *id;                  /* "KIND TARGET": identity across reloads */
	char *shown;               /* id as logs show it, the URL redacted (redact.h) */
	char *target;
	char *url;                 /* what is posted to (HTTP kinds) */
	char **argv;               /* exec: NULL-terminated */
	int64_t timeout_ms;
	char *auth_header;         /* "Authorization: Bearer ..." or NULL */
	char dir[4096];            /* "" without a disk queue */
	pthread_t thread;
	bool started;
	struct mono_cond cond;
	struct entry *head, *tail;
	uint64_t count, bytes;
	uint64_t next_seq;
	bool failing;
	int64_t backoff_ms;
	int64_t retry_at_ns;       /* monotonic */
	CURL *curl;                /* the sender thread's */
	struct complaint complaint;
	struct notify_receiver_stats st;
};

/* The configuration, owned. */
struct ncfg {
	struct receiver **receivers;
	size_t nreceivers;
	struct label *ext;
	size_t next;
	char *external_url;
	char *queue_dir;
	uint64_t max_bytes;
	uint64_t max_files;
	char **group_by;
	size_t ngroup_by;
	bool group_by_all;
	int64_t wait_ms, interval_ms, repeat_ms;
	struct alert_inhibit_rule *inhibit;
	size_t ninhibit;
	bool inhibit_am;
	int64_t backoff_ms, backoff_max_ms;
	size_t batch;
	struct clock_wall wall;
};

/* The latest notice delivery has seen of one alert (by its label set),
 * so a queued batch can tell whether the engine has said anything newer
 * about it. */
struct seen_alert {
	uint64_t key;              /* label_key of its labels */
	uint64_t gen;              /* the dispatch that saw it last */
};

struct notify {
	/* The ring between the sink and the dispatcher. */
	pthread_mutex_t ring_lock;
	struct mono_cond ring_cond;
	struct alert_item **ring;
	size_t ring_cap, ring_head, ring_len;
	uint64_t ring_dropped;

	pthread_mutex_t lock;
	struct ncfg cfg;
	atomic_bool stopping;
	pthread_t dispatcher;
	bool dispatcher_started;
	bool dispatcher_busy;       /* holds notices taken off the ring */
	struct alert_groups *groups;
	uint64_t total_bytes, total_batches;
	atomic_uint_fast64_t disk_errors; /* bumped with or without `lock` */
	uint64_t am_inhibited;
	struct alert_groups_stats gst;
	/* Under `lock`: sorted by key; written by the dispatcher, read by
	 * the Alertmanager senders. */
	struct seen_alert *seen;
	size_t nseen, seen_cap;
	uint64_t gen;              /* dispatches so far; batches from disk are 0 */
};

#define SEEN_MAX 100000        /* alerts remembered; the oldest half goes beyond */

/* ---- configuration --------------------------------------------------- */

static void free_entry(struct entry *e)
{
	if (!e)
		return;
	free(e->body);
	free(e);
}

static void receiver_free(struct receiver *r)
{
	if (!r)
		return;
	for (struct entry *e = r->head, *nx; e; e = nx) {
		nx = e->next;
		free_entry(e);
	}
	free(r->id);
	free(r->shown);
	free(r->target);
	free(r->url);
	for (size_t i = 0; r->argv && r->argv[i]; i++)
		free(r->argv[i]);
	free(r->argv);
	free(r->auth_header);
	mono_cond_destroy(&r->cond);
	free(r);
}

static void ncfg_free(struct ncfg *c)
{
	for (size_t i = 0; i < c->nreceivers; i++)
		receiver_free(c->receivers[i]);
	free(c->receivers);
	for (size_t i = 0; i < c->next; i++) {
		free((void *)(uintptr_t)c->ext[i].name);
		free((void *)(uintptr_t)c->ext[i].value);
	}
	free(c->ext);
	free(c->external_url);
	free(c->queue_dir);
	for (size_t i = 0; i < c->ngroup_by; i++)
		free(c->group_by[i]);
	free(c->group_by);
	for (size_t i = 0; i < c->ninhibit; i++)
		alert_inhibit_rule_free(&c->inhibit[i]);
	free(c->inhibit);
	memset(c, 0, sizeof *c);
}

static bool is_http_url(const char *s)
{
	return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

static int build_receiver(const struct notify_receiver_config *rc, const char *queue_dir,
			  struct receiver **out, char *err, size_t errlen)
{
	const char *kind = notify_kind_name(rc->kind);
	if (!rc->target || !*rc->target) {
		str_errf(err, errlen, "%s receiver without a target", kind);
		return GPULSE_EINVAL;
	}
	if (rc->kind != NOTIFY_EXEC && !is_http_url(rc->target)) {
		char shown[256];
		redact_url(shown, sizeof shown, rc->target);
		str_errf(err, errlen, "%s URL \"%s\" must start with http:// or https://", kind, shown);
		return GPULSE_EINVAL;
	}
	if (rc->kind == NOTIFY_EXEC && rc->target[0] != '/') {
		str_errf(err, errlen, "exec path \"%.200s\" must be absolute (it runs without a shell)",
			 rc->target);
		return GPULSE_EINVAL;
	}
	struct receiver *r = xcalloc(1, sizeof *r);
	mono_cond_init(&r->cond);
	r->kind = rc->kind;
	r->target = xstrdup(rc->target);
	size_t idl = strlen(kind) + strlen(rc->target) + 2;
	r->id = xmalloc(idl);
	snprintf(r->id, idl, "%s %s", kind, rc->target);
	size_t sl = strlen(kind) + 1 + redact_url(NULL, 0, rc->target) + 1;
	r->shown = xmalloc(sl);
	int kl = snprintf(r->shown, sl, "%s ", kind);
	redact_url(r->shown + kl, sl - (size_t)kl, rc->target);
	if (rc->kind == NOTIFY_ALERTMANAGER) {
		size_t tl = strlen(rc->target);
		while (tl && rc->target[tl - 1] == '/')
			tl--;
		const char *suffix = "/api/v2/alerts";
		bool has = tl >= strlen(suffix) && memcmp(rc->target + tl - strlen(suffix), suffix,
							  strlen(suffix)) == 0;
		size_t ul = tl + strlen(suffix) + 1;
		r->url = xmalloc(ul);
		snprintf(r->url, ul, "%.*s%s", (int)tl, rc->target, has ? "" : suffix);
	} else if (rc->kind == NOTIFY_WEBHOOK) {
		r->url = xstrdup(rc->target);
	} else {
		r->argv = xcalloc(rc->nargs + 2, sizeof *r->argv);
		r->argv[0] = xstrdup(rc->target);
		for (size_t i = 0; i < rc->nargs; i++)
			r->argv[i + 1] = xstrdup(rc->args[i]);
	}
	r->timeout_ms = rc->timeout_ms > 0 ? rc->timeout_ms : DEFAULT_TIMEOUT_MS;
	if (rc->bearer_token && *rc->bearer_token) {
		size_t al = strlen(rc->bearer_token) + 32;
		r->auth_header = xmalloc(al);
		snprintf(r->auth_header, al, "Authorization: Bearer %s", rc->bearer_token);
	}
	if (queue_dir && *queue_dir) {
		int w = snprintf(r->dir, sizeof r->dir, "%s/%s-%016" PRIx64, queue_dir, kind,
				 fnv1a64_str(r->id));
		if (w < 0 || (size_t)w >= sizeof r->dir) {
			str_errf(err, errlen, "queue path is too long");
			receiver_free(r);
			return GPULSE_EINVAL;
		}
	}
	r->st.kind = r->kind;
	str_copy(r->st.target, sizeof r->st.target, r->shown + kl);
	*out = r;
	return 0;
}

static int build_cfg(const struct notify_config *c, struct ncfg *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof *o);
	if (c->nreceivers > NOTIFY_MAX_RECEIVERS) {
		str_errf(err, errlen, "more than %d receivers", NOTIFY_MAX_RECEIVERS);
		return GPULSE_EINVAL;
	}
	o->receivers = xcalloc(c->nreceivers ? c->nreceivers : 1, sizeof *o->receivers);
	for (size_t i = 0; i < c->nreceivers; i++) {
		int rc = build_receiver(&c->receivers[i], c->queue_dir, &o->receivers[o->nreceivers],
					err, errlen);
		if (rc) {
			ncfg_free(o);
			return rc;
		}
		for (size_t j = 0; j < o->nreceivers; j++)
			if (strcmp(o->receivers[j]->id, o->receivers[o->nreceivers]->id) == 0) {
				str_errf(err, errlen, "receiver \"%.300s\" is given twice",
					 o->receivers[j]->shown);
				receiver_free(o->receivers[o->nreceivers]);
				ncfg_free(o);
				return GPULSE_EINVAL;
			}
		o->nreceivers++;
	}
	o->ext = c->nexternal_labels ? xcalloc(c->nexternal_labels, sizeof *o->ext) : NULL;
	for (size_t i = 0; i < c->nexternal_labels; i++) {
		o->ext[i].name = xstrdup(c->external_labels[i].name);
		o->ext[i].value = xstrdup(c->external_labels[i].value);
	}
	o->next = c->nexternal_labels;
	o->external_url = c->external_url && *c->external_url ? xstrdup(c->external_url) : NULL;
	o->queue_dir = c->queue_dir && *c->queue_dir ? xstrdup(c->queue_dir) : NULL;
	o->max_bytes = c->queue_max_bytes ? c->queue_max_bytes : NOTIFY_DEFAULT_MAX_BYTES;
	o->max_files = c->queue_max_files ? c->queue_max_files : NOTIFY_DEFAULT_MAX_FILES;
	o->group_by = c->ngroup_by ? xcalloc(c->ngroup_by, sizeof *o->group_by) : NULL;
	for (size_t i = 0; i < c->ngroup_by; i++)
		o->group_by[i] = xstrdup(c->group_by[i]);
	o->ngroup_by = c->ngroup_by;
	o->group_by_all = c->group_by_all;
	o->wait_ms = c->group_wait_ms;
	o->interval_ms = c->group_interval_ms > 0 ? c->group_interval_ms : 300000;
	o->repeat_ms = c->repeat_interval_ms > 0 ? c->repeat_interval_ms : 4 * 3600000LL;
	o->inhibit = c->ninhibit ? xcalloc(c->ninhibit, sizeof *o->inhibit) : NULL;
	for (size_t i = 0; i < c->ninhibit; i++) {
		const struct notify_inhibit_config *ic = &c->inhibit[i];
		char why[600];
		if (alert_inhibit_rule_init(&o->inhibit[i], ic->source, ic->nsource, ic->target,
					    ic->ntarget, ic->equal, ic->nequal, why, sizeof why)) {
			str_errf(err, errlen, "inhibit_rules[%zu]: %s", i, why);
			ncfg_free(o);
			return GPULSE_EINVAL;
		}
		o->ninhibit++;
	}
	o->inhibit_am = c->inhibit_alertmanager;
	o->backoff_ms = c->backoff_initial_ms > 0 ? c->backoff_initial_ms : DEFAULT_BACKOFF_MS;
	o->backoff_max_ms = c->backoff_max_ms > 0 ? c->backoff_max_ms : DEFAULT_BACKOFF_MAX_MS;
	if (o->backoff_max_ms < o->backoff_ms)
		o->backoff_max_ms = o->backoff_ms;
	o->batch = c->batch_alerts ? c->batch_alerts : NOTIFY_DEFAULT_BATCH;
	o->wall = c->wall;
	return 0;
}

static void groups_config(const struct ncfg *c, struct alert_groups_config *gc)
{
	memset(gc, 0, sizeof *gc);
	gc->group_by = (const char *const *)c->group_by;
	gc->ngroup_by = c->ngroup_by;
	gc->group_by_all = c->group_by_all;
	gc->group_wait_ms = c->wait_ms;
	gc->group_interval_ms = c->interval_ms;
	gc->repeat_interval_ms = c->repeat_ms;
	gc->inhibit = c->inhibit;
	gc->ninhibit = c->ninhibit;
}

/* ---- the queue --------------------------------------------------------- */

static int64_t wall_ms(const struct notify *n)
{
	return clock_wall_ms(&n->cfg.wall);
}

/* Unlink a batch's file; called without the lock or with it (unlink is
 * one syscall). */
static void forget_file(struct notify *n, struct receiver *r, const struct entry *e)
{
	if (e->on_disk && r->dir[0] && alert_batch_remove(r->dir, e->seq) != 0) {
		atomic_fetch_add(&n->disk_errors, 1);
		log_warn("alerting: cannot remove %s/%016" PRIx64 ".batch: %s", r->dir, e->seq,
			 strerror(errno));
	}
}

/* Unlink `e` (not in flight) from r's FIFO. Under the lock. */
static void unlink_entry(struct notify *n, struct receiver *r, struct entry *e)
{
	struct entry **pp = &r->head, *prev = NULL;
	while (*pp && *pp != e) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = e->next;
	if (r->tail == e)
		r->tail = prev;
	r->count--;
	r->bytes -= e->len;
	n->total_batches--;
	n->total_bytes -= e->len;
}

/* Drop the oldest batch that is not being sent, of any receiver. Under
 * the lock. False when none can go. */
static bool evict_oldest(struct notify *n)
{
	struct receiver *best_r = NULL;
	struct entry *best = NULL;
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		struct receiver *r = n->cfg.receivers[i];
		for (struct entry *e = r->head; e; e = e->next) {
			if (e->in_flight)
				continue;
			if (!best || e->created_ms < best->created_ms) {
				best = e;
				best_r = r;
			}
			break; /* each FIFO's oldest is its first not in flight */
		}
	}
	if (!best)
		return false;
	unlink_entry(n, best_r, best);
	best_r->st.dropped_total += best->nalerts;
	forget_file(n, best_r, best);
	complain(&best_r->complaint, "alerting: queue full (%" PRIu64 " batches, %" PRIu64
		 " bytes): dropped the oldest batch for %s", n->cfg.max_files, n->cfg.max_bytes,
		 best_r->shown);
	free_entry(best);
	return true;
}

/* Write e to r's directory. Without the lock. */
static int persist(struct notify *n, struct receiver *r, struct entry *e)
{
	char err[512];
	struct alert_batch_hdr h = {.created_ms = e->created_ms, .nalerts = e->nalerts};
	if (alert_batch_write(r->dir, e->seq, &h, e->body, e->len, err, sizeof err) != 0) {
		atomic_fetch_add(&n->disk_errors, 1);
		log_warn("alerting: %s", err);
		return GPULSE_EIO;
	}
	e->on_disk = true;
	return 0;
}

/* Queue a copy of body for r (the dispatcher's call). */
static void enqueue(struct notify *n, struct receiver *r, const char *body, size_t len,
		    unsigned nalerts, int64_t first_mono_ns, uint64_t gen, int64_t stale_ms)
{
	struct entry *e = xcalloc(1, sizeof *e);
	e->gen = gen;
	e->stale_ms = stale_ms;
	e->body = xmalloc(len + 1);
	memcpy(e->body, body, len);
	e->body[len] = '\0';
	e->len = len;
	e->nalerts = nalerts;
	e->created_ms = wall_ms(n);
	e->first_mono_ns = first_mono_ns;
	pthread_mutex_lock(&n->lock);
	e->seq = r->next_seq++;
	bool backlog = r->failing || r->head != NULL;
	pthread_mutex_unlock(&n->lock);
	/* Write-ahead while the receiver has a backlog: the batch is on disk
	 * before it is queued behind batches that are. */
	if (backlog && r->dir[0])
		persist(n, r, e);
	pthread_mutex_lock(&n->lock);
	while ((n->total_batches + 1 > n->cfg.max_files || n->total_bytes + len > n->cfg.max_bytes) &&
	       evict_oldest(n))
		;
	if (n->total_batches + 1 > n->cfg.max_files || n->total_bytes + len > n->cfg.max_bytes) {
		r->st.dropped_total += nalerts;
		/* Under the lock: the complaint is shared with r's sender. */
		complain(&r->complaint, "alerting: a batch of %zu bytes does not fit the queue bound; "
			 "dropped for %s", len, r->shown);
		pthread_mutex_unlock(&n->lock);
		forget_file(n, r, e);
		free_entry(e);
		return;
	}
	if (r->tail)
		r->tail->next = e;
	else
		r->head = e;
	r->tail = e;
	r->count++;
	r->bytes += len;
	n->total_batches++;
	n->total_bytes += len;
	mono_cond_signal(&r->cond);
	pthread_mutex_unlock(&n->lock);
}

static int entry_seq_cmp(const void *a, const void *b)
{
	const struct entry *x = *(struct entry *const *)a, *y = *(struct entry *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Create r's directory and load the batches it holds, oldest first. */
static int load_dir(struct notify *n, struct receiver *r, char *err, size_t errlen)
{
	if (mkdir(r->dir, 0700) != 0 && errno != EEXIST) {
		str_errf(err, errlen, "cannot create %s: %s", r->dir, strerror(errno));
		return GPULSE_EIO;
	}
	char idpath[4200];
	snprintf(idpath, sizeof idpath, "%s/receiver", r->dir);
	if (access(idpath, F_OK) != 0) {
		FILE *f = fopen(idpath, "we");
		if (f) {
			fprintf(f, "%s\n", r->id);
			fclose(f);
		}
	}
	DIR *d = opendir(r->dir);
	if (!d) {
		str_errf(err, errlen, "cannot read %s: %s", r->dir, strerror(errno));
		return GPULSE_EIO;
	}
	struct entry **list = NULL;
	size_t nl = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, ".tmp-", 5) == 0) {
			unlinkat(dirfd(d), de->d_name, 0); /* a write cut by a crash */
			continue;
		}
		int64_t seq = alert_batch_name_seq(de->d_name);
		if (seq < 0)
			continue;
		struct alert_batch_hdr h;
		char *data, why[600];
		size_t off, blen;
		int rc = alert_batch_read(r->dir, de->d_name, &h, &data, &off, &blen, why, sizeof why);
		if (rc) {
			atomic_fetch_add(&n->disk_errors, 1);
			log_warn("alerting: %s; moved aside as .bad", why);
			char bad[300];
			snprintf(bad, sizeof bad, "%s.bad", de->d_name);
			renameat(dirfd(d), de->d_name, dirfd(d), bad);
			continue;
		}
		struct entry *e = xcalloc(1, sizeof *e);
		e->seq = (uint64_t)seq;
		e->created_ms = h.created_ms;
		e->nalerts = h.nalerts;
		e->len = blen;
		e->body = xmalloc(blen + 1);
		memcpy(e->body, data + off, blen);
		e->body[blen] = '\0';
		e->on_disk = true;
		e->stale_ms = INT64_MIN; /* what it holds is known once it is read again */
		free(data);
		if (nl == cap) {
			cap = cap ? cap * 2 : 16;
			list = xrealloc(list, cap * sizeof *list);
		}
		list[nl++] = e;
	}
	closedir(d);
	if (nl)
		qsort(list, nl, sizeof *list, entry_seq_cmp);
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < nl; i++) {
		struct entry *e = list[i];
		if (e->seq >= r->next_seq)
			r->next_seq = e->seq + 1;
		while ((n->total_batches + 1 > n->cfg.max_files ||
			n->total_bytes + e->len > n->cfg.max_bytes) && evict_oldest(n))
			;
		if (r->tail)
			r->tail->next = e;
		else
			r->head = e;
		r->tail = e;
		r->count++;
		r->bytes += e->len;
		n->total_batches++;
		n->total_bytes += e->len;
	}
	pthread_mutex_unlock(&n->lock);
	if (nl)
		log_info("alerting: %zu queued batch(es) for %s from %s", nl, r->shown, r->dir);
	free(list);
	return 0;
}

/* ---- stale alerts in queued batches ------------------------------------- */

/* One hash of a label set (labels sorted by name), the same for an item
 * and for the postableAlert written from it, so a batch read back from
 * disk finds its alerts. */
static uint64_t label_key_item(const struct alert_item *it)
{
	uint64_t h = FNV1A64_OFFSET;
	for (size_t i = 0; i < it->nlabels; i++)
		h = fnv1a64_add_field(fnv1a64_add_field(h, it->labels[i].name), it->labels[i].value);
	return h;
}

static int cstr_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The key of a postableAlert's "labels"; false when it has none. */
static bool label_key_json(json_t *labels, uint64_t *out)
{
	size_t nl = json_is_object(labels) ? json_object_size(labels) : 0;
	if (!nl)
		return false;
	const char **names = xcalloc(nl, sizeof *names);
	size_t k = 0;
	const char *name;
	json_t *v;
	json_object_foreach(labels, name, v)
		names[k++] = name;
	qsort(names, k, sizeof *names, cstr_cmp);
	uint64_t h = FNV1A64_OFFSET;
	for (size_t i = 0; i < k; i++) {
		const char *val = json_string_value(json_object_get(labels, names[i]));
		h = fnv1a64_add_field(fnv1a64_add_field(h, names[i]), val ? val : "");
	}
	free(names);
	*out = h;
	return true;
}

static int seen_cmp(const void *a, const void *b)
{
	const struct seen_alert *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

static int seen_gen_cmp(const void *a, const void *b)
{
	const struct seen_alert *x = a, *y = b;
	return x->gen > y->gen ? -1 : x->gen < y->gen; /* newest first */
}

static struct seen_alert *seen_find(struct notify *n, uint64_t key)
{
	struct seen_alert k = {.key = key};
	return n->nseen ? bsearch(&k, n->seen, n->nseen, sizeof *n->seen, seen_cmp) : NULL;
}

/* Record that dispatch n->gen carries a notice of `key`. Under the lock. */
static void seen_note(struct notify *n, uint64_t key)
{
	struct seen_alert *s = seen_find(n, key);
	if (s) {
		s->gen = n->gen;
		return;
	}
	if (n->nseen >= SEEN_MAX) {
		/* Forget the half heard of longest ago: an alert the engine
		 * has not mentioned for that long is in no batch still queued
		 * behind a stale one. */
		qsort(n->seen, n->nseen, sizeof *n->seen, seen_gen_cmp);
		n->nseen /= 2;
		qsort(n->seen, n->nseen, sizeof *n->seen, seen_cmp);
	}
	if (n->nseen == n->seen_cap) {
		n->seen_cap = n->seen_cap ? n->seen_cap * 2 : 256;
		n->seen = xrealloc(n->seen, n->seen_cap * sizeof *n->seen);
	}
	size_t at = 0;
	while (at < n->nseen && n->seen[at].key < key)
		at++; /* linear: one insertion per new alert, not per notice */
	memmove(&n->seen[at + 1], &n->seen[at], (n->nseen - at) * sizeof *n->seen);
	n->seen[at] = (struct seen_alert){.key = key, .gen = n->gen};
	n->nseen++;
}

enum refresh { REFRESH_AS_IS, REFRESH_REWRITTEN, REFRESH_EMPTY };

/* An Alertmanager batch about to be sent at wall time now_ms: firing
 * alerts whose endsAt has passed would make Alertmanager resolve them
 * (issue 14, item 6). In a batch, an alert is resolved when its endsAt
 * is not after the batch was made (the engine stamps a resolution with
 * its time, a firing alert with now + 4 resend delays); those are sent
 * as they are. A stale firing alert is
 *  - left out when a later dispatch carried a notice of the same alert:
 *    that notice's batch, behind this one in the FIFO, says what the
 *    engine thinks now (firing with a fresh endsAt, or resolved), so the
 *    receiver sees no false resolution and the resolution once;
 *  - re-stamped endsAt = now + (its endsAt - the batch's creation) when
 *    the batch comes from before a restart and this process has heard
 *    nothing of the alert yet: the engine restores firing alerts from the
 *    store and will resend or resolve it within one resend delay;
 *  - sent as it is when it is the engine's latest word (no resend for
 *    four resend delays: the engine no longer holds it firing, and
 *    Alertmanager's own timeout is the right outcome).
 * REFRESH_REWRITTEN hands a new body in *out (free with free()). */
static enum refresh refresh_stale(struct notify *n, const struct entry *e, int64_t now_ms,
				  char **out, size_t *out_len, unsigned *out_nalerts)
{
	if (e->stale_ms > now_ms)
		return REFRESH_AS_IS;
	json_error_t je;
	json_t *arr = json_loadb(e->body, e->len, 0, &je);
	if (!json_is_array(arr)) {
		json_decref(arr);
		return REFRESH_AS_IS; /* not ours to judge: the receiver will say */
	}
	bool changed = false;
	for (size_t i = 0; i < json_array_size(arr);) {
		json_t *a = json_array_get(arr, i);
		int64_t ends;
		const char *es = json_string_value(json_object_get(a, "endsAt"));
		uint64_t key;
		if (!es || clock_parse_rfc3339(es, &ends) != 0 || ends <= e->created_ms ||
		    ends > now_ms || !label_key_json(json_object_get(a, "labels"), &key)) {
			i++; /* resolved, still fresh, or not one we can place */
			continue;
		}
		pthread_mutex_lock(&n->lock);
		struct seen_alert *s = seen_find(n, key);
		bool newer = s && s->gen > e->gen;
		pthread_mutex_unlock(&n->lock);
		if (newer) {
			json_array_remove(arr, i);
			changed = true;
			continue;
		}
		if (e->gen == 0 && !s) {
			struct buf t;
			buf_init(&t, 64);
			alert_put_time(&t, now_ms + (ends - e->created_ms));
			if (!t.failed && t.len > 2)
				json_object_set_new(a, "endsAt", json_stringn(t.data + 1, t.len - 2));
			buf_free(&t);
			changed = true;
		}
		i++;
	}
	enum refresh res = REFRESH_AS_IS;
	if (changed && json_array_size(arr) == 0) {
		res = REFRESH_EMPTY;
	} else if (changed) {
		char *d = json_dumps(arr, JSON_COMPACT);
		if (d) {
			size_t l = strlen(d);
			*out = xmalloc(l + 2);
			memcpy(*out, d, l);
			(*out)[l] = '\n';
			(*out)[l + 1] = '\0';
			*out_len = l + 1;
			*out_nalerts = (unsigned)json_array_size(arr);
			free(d);
			res = REFRESH_REWRITTEN;
		}
	}
	json_decref(arr);
	return res;
}

/* ---- sending ------------------------------------------------------------- */

static size_t discard_body(char *p, size_t size, size_t nmemb, void *ctx)
{
	struct buf *b = ctx;
	size_t n = size * nmemb;
	if (b->len < RESPONSE_MAX)
		buf_append(b, p, n < RESPONSE_MAX - b->len ? n : RESPONSE_MAX - b->len);
	return n;
}

static int abort_on_stop(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	return atomic_load(&((struct notify *)ctx)->stopping) ? 1 : 0;
}

static enum send_result send_http(struct receiver *r, const struct entry *e, char *why,
				  size_t whylen)
{
	if (!r->curl && !(r->curl = curl_easy_init())) {
		snprintf(why, whylen, "cannot create a curl handle");
		return SEND_RETRY;
	}
	CURL *c = r->curl;
	struct buf resp;
	buf_init(&resp, RESPONSE_MAX + 1);
	char cerr[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	h = curl_slist_append(h, "User-Agent: gpulse/" GPULSE_VERSION);
	h = curl_slist_append(h, "Expect:");
	if (r->auth_header)
		h = curl_slist_append(h, r->auth_header);
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, r->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, e->body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)e->len);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)r->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)r->timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, abort_on_stop);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, r->n);
	CURLcode cc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(h);
	enum send_result res;
	if (cc != CURLE_OK) {
		snprintf(why, whylen, "%s", cerr[0] ? cerr : curl_easy_strerror(cc));
		res = SEND_RETRY;
	} else if (code >= 200 && code < 300) {
		res = SEND_OK;
	} else {
		/* Alertmanager's own webhook rule: 4xx other than 408 and 429
		 * will not get better by sending the same body again. */
		res = code >= 400 && code < 500 && code != 408 && code != 429 ? SEND_REFUSED : SEND_RETRY;
		size_t l = strcspn(resp.data ? resp.data : "", "\r\n");
		snprintf(why, whylen, "HTTP %ld%s%.*s", code, l ? ": " : "", (int)(l > 200 ? 200 : l),
			 resp.data ? resp.data : "");
	}
	buf_free(&resp);
	return res;
}

/* Run the hook with the body on stdin; exit 0 is delivered, exit 65
 * (EX_DATAERR) refused, anything else (and a timeout) retried. */
static enum send_result send_exec(struct receiver *r, const struct entry *e, char *why,
				  size_t whylen)
{
	int in[2];
	if (pipe2(in, O_CLOEXEC) != 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		return SEND_RETRY;
	}
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawnattr_init(&at);
	sigset_t none, def;
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGPIPE);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGHUP);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
					      POSIX_SPAWN_SETPGROUP);
	char *envp[] = {(char *)"PATH=" EXEC_PATH, (char *)"LANG=C.UTF-8", NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, r->argv[0], &fa, &at, r->argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(in[0]);
	if (rc != 0) {
		close(in[1]);
		snprintf(why, whylen, "cannot run %s: %s", r->argv[0], strerror(rc));
		return SEND_RETRY;
	}
	int64_t deadline = clock_mono_ns() + r->timeout_ms * NS_PER_MS;
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	size_t off = 0;
	bool timed_out = false;
	while (off < e->len) {
		int64_t left = deadline - clock_mono_ns();
		if (left <= 0 || atomic_load(&r->n->stopping)) {
			timed_out = true;
			break;
		}
		struct pollfd p = {.fd = in[1], .events = POLLOUT};
		int pr = poll(&p, 1, (int)(left / NS_PER_MS > 100 ? 100 : left / NS_PER_MS + 1));
		if (pr < 0 && errno != EINTR)
			break;
		if (pr <= 0)
			continue;
		ssize_t w = write(in[1], e->body + off, e->len - off);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			break; /* the hook closed stdin: its exit status decides */
		off += (size_t)w;
	}
	close(in[1]);
	int status = 0;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			snprintf(why, whylen, "waitpid: %s", strerror(errno));
			return SEND_RETRY;
		}
		if (timed_out || clock_mono_ns() >= deadline || atomic_load(&r->n->stopping)) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			timed_out = true;
			break;
		}
		clock_sleep_until(clock_mono_ns() + 2 * NS_PER_MS);
	}
	if (timed_out) {
		snprintf(why, whylen, "%s did not finish within %" PRId64 " ms; killed", r->argv[0],
			 r->timeout_ms);
		return SEND_RETRY;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return SEND_OK;
	if (WIFEXITED(status))
		snprintf(why, whylen, "%s exited with status %d", r->argv[0], WEXITSTATUS(status));
	else
		snprintf(why, whylen, "%s was killed by signal %d", r->argv[0],
			 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 65 ? SEND_REFUSED : SEND_RETRY;
}

static void observe_latency(struct receiver *r, const struct entry *e)
{
	double s;
	if (e->first_mono_ns > 0)
		s = (double)(clock_mono_ns() - e->first_mono_ns) / 1e9;
	else
		s = (double)(wall_ms(r->n) - e->created_ms) / 1e3;
	if (s < 0)
		s = 0;
	for (int k = 0; k < NOTIFY_LATENCY_BUCKETS; k++)
		if (s <= notify_latency_bounds[k]) {
			r->st.latency_bucket[k]++;
			break;
		}
	r->st.latency_count++;
	r->st.latency_sum_s += s;
}

/* Not common/periodic: a receiver's sender waits for its queue, or for the
 * retry time of its head entry (back-off), never a fixed period. */
static void *sender_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-notify");
	struct receiver *r = arg;
	struct notify *n = r->n;
	pthread_mutex_lock(&n->lock);
	while (!atomic_load(&n->stopping)) {
		if (!r->head) {
			mono_cond_wait(&r->cond, &n->lock);
			continue;
		}
		if (clock_mono_ns() < r->retry_at_ns) {
			mono_cond_wait_until(&r->cond, &n->lock, r->retry_at_ns);
			continue;
		}
		struct entry *e = r->head;
		e->in_flight = true;
		pthread_mutex_unlock(&n->lock);

		/* The queued body stays as it was made: each attempt judges
		 * staleness afresh against the time of that attempt. */
		struct entry attempt = *e;
		char *fresh = NULL;
		enum refresh rf = REFRESH_AS_IS;
		if (r->kind == NOTIFY_ALERTMANAGER)
			rf = refresh_stale(n, e, wall_ms(n), &fresh, &attempt.len, &attempt.nalerts);
		if (rf == REFRESH_REWRITTEN)
			attempt.body = fresh;
		char why[512] = "";
		enum send_result res = SEND_OK;
		if (rf != REFRESH_EMPTY)
			res = r->kind == NOTIFY_EXEC ? send_exec(r, &attempt, why, sizeof why)
						     : send_http(r, &attempt, why, sizeof why);
		free(fresh);
		if (res == SEND_RETRY && !e->on_disk && r->dir[0] && !atomic_load(&n->stopping))
			persist(n, r, e);

		pthread_mutex_lock(&n->lock);
		e->in_flight = false;
		if (res == SEND_RETRY && atomic_load(&n->stopping))
			break; /* cut short by shutdown: stays queued */
		if (res == SEND_RETRY) {
			r->st.errors_total += e->nalerts;
			r->failing = true;
			r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : n->cfg.backoff_ms;
			if (r->backoff_ms > n->cfg.backoff_max_ms)
				r->backoff_ms = n->cfg.backoff_max_ms;
			/* Up to 10% jitter, so receivers back from an outage
			 * are not hit by every sender at once. */
			int64_t jitter = (int64_t)(e->seq * 2654435761u % 100) * r->backoff_ms / 1000;
			r->retry_at_ns = clock_mono_ns() + (r->backoff_ms + jitter) * NS_PER_MS;
			complain(&r->complaint, "alerting: %s: %s; retrying in %" PRId64 " ms "
				 "(%" PRIu64 " batch(es) queued)", r->shown, why, r->backoff_ms, r->count);
			continue;
		}
		unlink_entry(n, r, e);
		if (res == SEND_OK) {
			/* Alerts left out as superseded are sent by a later batch. */
			r->st.sent_total += rf == REFRESH_EMPTY ? 0 : attempt.nalerts;
			observe_latency(r, e);
			if (r->failing)
				complaint_clear(&r->complaint, "alerting: %s: delivering again", r->shown);
			r->failing = false;
			r->backoff_ms = 0;
		} else {
			r->st.errors_total += e->nalerts;
			r->st.dropped_total += e->nalerts;
			log_error("alerting: %s refused a batch of %u alert(s), dropped: %s", r->shown,
				  e->nalerts, why);
		}
		pthread_mutex_unlock(&n->lock);
		forget_file(n, r, e);
		free_entry(e);
		pthread_mutex_lock(&n->lock);
	}
	pthread_mutex_unlock(&n->lock);
	if (r->curl)
		curl_easy_cleanup(r->curl);
	r->curl = NULL;
	return NULL;
}

/* ---- the dispatcher -------------------------------------------------------- */

static void put_common(struct buf *b, const char *key, const struct alert_group_notification *gn,
		       bool annotations)
{
	buf_printf(b, ",\"%s\":{", key);
	bool first = true;
	const struct alert_item *a0 = gn->nalerts ? gn->alerts[0] : NULL;
	size_t n0 = !a0 ? 0 : annotations ? a0->nannotations : a0->nlabels;
	for (size_t i = 0; i < n0; i++) {
		const struct label *l = annotations ? &a0->annotations[i] : &a0->labels[i];
		bool common = true;
		for (size_t k = 1; k < gn->nalerts && common; k++) {
			const struct alert_item *a = gn->alerts[k];
			const struct label *set = annotations ? a->annotations : a->labels;
			size_t ns = annotations ? a->nannotations : a->nlabels;
			bool found = false;
			for (size_t j = 0; j < ns; j++)
				if (strcmp(set[j].name, l->name) == 0) {
					found = strcmp(set[j].value, l->value) == 0;
					break;
				}
			common = found;
		}
		if (!common)
			continue;
		if (!first)
			buf_putc(b, ',');
		first = false;
		buf_put_json_string(b, l->name);
		buf_putc(b, ':');
		buf_put_json_string(b, l->value);
	}
	buf_putc(b, '}');
}

static void on_group(void *ctx, const struct alert_group_notification *gn)
{
	struct notify *n = ctx;
	struct buf b;
	buf_init(&b, ALERT_BATCH_MAX_BODY);
	buf_printf(&b, "{\"version\":\"4\",\"groupKey\":");
	buf_put_json_string(&b, gn->group_key);
	buf_printf(&b, ",\"truncatedAlerts\":%zu,\"status\":\"%s\",\"receiver\":\"gpulse\","
		   "\"groupLabels\":", gn->truncated, gn->firing ? "firing" : "resolved");
	alert_put_labels(&b, gn->group_labels, gn->ngroup_labels);
	put_common(&b, "commonLabels", gn, false);
	put_common(&b, "commonAnnotations", gn, true);
	buf_puts(&b, ",\"externalURL\":");
	buf_put_json_string(&b, n->cfg.external_url ? n->cfg.external_url : "");
	buf_puts(&b, ",\"alerts\":[");
	int64_t first_mono = 0;
	for (size_t i = 0; i < gn->nalerts; i++) {
		if (i)
			buf_putc(&b, ',');
		alert_put_webhook_alert(&b, gn->alerts[i], gn->resolved[i]);
		int64_t m = gn->alerts[i]->received_mono_ns;
		if (m && (!first_mono || m < first_mono))
			first_mono = m;
	}
	buf_puts(&b, "]}\n");
	if (b.failed) {
		log_error("alerting: a notification for group %.200s is over %u bytes; dropped",
			  gn->group_key, ALERT_BATCH_MAX_BODY);
	} else {
		for (size_t i = 0; i < n->cfg.nreceivers; i++) {
			struct receiver *r = n->cfg.receivers[i];
			if (r->kind != NOTIFY_ALERTMANAGER)
				enqueue(n, r, b.data, b.len, (unsigned)gn->nalerts, first_mono, 0,
					INT64_MAX);
		}
	}
	buf_free(&b);
}

static void send_am_batch(struct notify *n, struct buf *b, unsigned count, int64_t first_mono,
			  int64_t stale_ms)
{
	if (!count)
		return;
	buf_puts(b, "]\n");
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		struct receiver *r = n->cfg.receivers[i];
		if (r->kind == NOTIFY_ALERTMANAGER)
			enqueue(n, r, b->data, b->len, count, first_mono, n->gen, stale_ms);
	}
}

static void dispatch(struct notify *n, struct alert_item **items, size_t nitems)
{
	bool has_am = false, has_grouped = false;
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		has_am |= n->cfg.receivers[i]->kind == NOTIFY_ALERTMANAGER;
		has_grouped |= n->cfg.receivers[i]->kind != NOTIFY_ALERTMANAGER;
	}
	int64_t now = wall_ms(n), mono = clock_mono_ns() / NS_PER_MS;
	if (has_grouped || (has_am && n->cfg.inhibit_am))
		for (size_t i = 0; i < nitems; i++)
			alert_groups_update(n->groups, items[i], now, mono);
	if (!has_am)
		return;
	pthread_mutex_lock(&n->lock);
	n->gen++;
	for (size_t i = 0; i < nitems; i++)
		seen_note(n, label_key_item(items[i]));
	pthread_mutex_unlock(&n->lock);
	struct buf b;
	buf_init(&b, ALERT_BATCH_MAX_BODY);
	unsigned count = 0;
	int64_t first_mono = 0, stale_ms = INT64_MAX;
	for (size_t i = 0; i < nitems; i++) {
		if (n->cfg.inhibit_am && alert_groups_inhibited(n->groups, items[i], now)) {
			pthread_mutex_lock(&n->lock);
			n->am_inhibited++;
			pthread_mutex_unlock(&n->lock);
			continue;
		}
		size_t mark = b.len;
		buf_puts(&b, count ? "," : "[");
		alert_put_postable(&b, items[i]);
		if (b.failed || count >= n->cfg.batch) {
			/* Full: send what came before, start again with this one. */
			b.failed = 0;
			b.len = mark;
			send_am_batch(n, &b, count, first_mono, stale_ms);
			buf_reset(&b);
			count = 0;
			first_mono = 0;
			stale_ms = INT64_MAX;
			buf_putc(&b, '[');
			alert_put_postable(&b, items[i]);
			if (b.failed) {
				log_error("alerting: one alert does not fit a batch; dropped");
				buf_reset(&b);
				continue;
			}
		}
		count++;
		if (!first_mono || items[i]->received_mono_ns < first_mono)
			first_mono = items[i]->received_mono_ns;
		if (!items[i]->resolved && items[i]->ends_at_ms < stale_ms)
			stale_ms = items[i]->ends_at_ms;
	}
	send_am_batch(n, &b, count, first_mono, stale_ms);
	buf_free(&b);
}

/* Not common/periodic: the dispatcher waits for notices on the ring or the
 * earliest group's flush time (group_wait, group_interval), whichever is
 * first, and sleeps unbounded when no group is pending. */
static void *dispatcher_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-dispatch");
	struct notify *n = arg;
	int64_t next_flush_ms = INT64_MAX;   /* monotonic: group.h */
	for (;;) {
		pthread_mutex_lock(&n->ring_lock);
		while (n->ring_len == 0 && !atomic_load(&n->stopping)) {
			if (next_flush_ms == INT64_MAX) {
				mono_cond_wait(&n->ring_cond, &n->ring_lock);
				continue;
			}
			if (clock_mono_ns() >= next_flush_ms * NS_PER_MS)
				break;
			mono_cond_wait_until(&n->ring_cond, &n->ring_lock, next_flush_ms * NS_PER_MS);
		}
		/* Stopping: what the sink already took is still dispatched, so
		 * it reaches the queue (and the disk) before the senders go. */
		if (atomic_load(&n->stopping) && n->ring_len == 0) {
			pthread_mutex_unlock(&n->ring_lock);
			break;
		}
		size_t cnt = n->ring_len;
		struct alert_item **items = cnt ? xcalloc(cnt, sizeof *items) : NULL;
		for (size_t i = 0; i < cnt; i++)
			items[i] = n->ring[(n->ring_head + i) % n->ring_cap];
		n->ring_head = (n->ring_head + cnt) % n->ring_cap;
		n->ring_len = 0;
		n->dispatcher_busy = true;
		pthread_mutex_unlock(&n->ring_lock);

		dispatch(n, items, cnt);
		for (size_t i = 0; i < cnt; i++)
			free(items[i]);
		free(items);
		next_flush_ms = alert_groups_flush(n->groups, wall_ms(n), clock_mono_ns() / NS_PER_MS,
						   on_group, n);
		pthread_mutex_lock(&n->lock);
		alert_groups_get_stats(n->groups, &n->gst);
		pthread_mutex_unlock(&n->lock);
		pthread_mutex_lock(&n->ring_lock);
		n->dispatcher_busy = false;
		mono_cond_broadcast(&n->ring_cond);
		pthread_mutex_unlock(&n->ring_lock);
	}
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------------- */

static void start_threads(struct notify *n)
{
	atomic_store(&n->stopping, false);
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		struct receiver *r = n->cfg.receivers[i];
		r->n = n;
		r->started = pthread_create(&r->thread, NULL, sender_main, r) == 0;
		if (!r->started)
			log_error("alerting: cannot start the sender for %s", r->shown);
	}
	n->dispatcher_started = pthread_create(&n->dispatcher, NULL, dispatcher_main, n) == 0;
	if (!n->dispatcher_started)
		log_error("alerting: cannot start the dispatcher");
}

static void stop_threads(struct notify *n)
{
	atomic_store(&n->stopping, true);
	pthread_mutex_lock(&n->ring_lock);
	mono_cond_broadcast(&n->ring_cond);
	pthread_mutex_unlock(&n->ring_lock);
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->cfg.nreceivers; i++)
		mono_cond_broadcast(&n->cfg.receivers[i]->cond);
	pthread_mutex_unlock(&n->lock);
	if (n->dispatcher_started)
		pthread_join(n->dispatcher, NULL);
	n->dispatcher_started = false;
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		struct receiver *r = n->cfg.receivers[i];
		if (r->started)
			pthread_join(r->thread, NULL);
		r->started = false;
	}
}

/* Write every batch of r not yet on disk (threads stopped). */
static void persist_all(struct notify *n, struct receiver *r)
{
	if (!r->dir[0])
		return;
	for (struct entry *e = r->head; e; e = e->next)
		if (!e->on_disk)
			persist(n, r, e);
}

static int make_dirs(struct notify *n, struct ncfg *c, char *err, size_t errlen)
{
	(void)n;
	if (!c->queue_dir || c->nreceivers == 0)
		return 0; /* nothing to queue: leave the disk alone */
	if (mkdir(c->queue_dir, 0700) != 0 && errno != EEXIST) {
		str_errf(err, errlen, "cannot create the alert queue directory %s: %s", c->queue_dir,
			 strerror(errno));
		return GPULSE_EIO;
	}
	struct stat st;
	if (stat(c->queue_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		str_errf(err, errlen, "alert queue path %s is not a directory", c->queue_dir);
		return GPULSE_EIO;
	}
	return 0;
}

/* Warn once about queue directories of receivers no longer configured. */
static void report_orphans(struct ncfg *c)
{
	if (!c->queue_dir || c->nreceivers == 0)
		return;
	DIR *d = opendir(c->queue_dir);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		bool known = false;
		for (size_t i = 0; i < c->nreceivers && !known; i++) {
			const char *slash = strrchr(c->receivers[i]->dir, '/');
			known = slash && strcmp(slash + 1, de->d_name) == 0;
		}
		if (!known)
			log_warn("alerting: %s/%s holds the queue of a receiver that is no longer "
				 "configured; left in place", c->queue_dir, de->d_name);
	}
	closedir(d);
}

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

int notify_new(struct notify **out, const struct notify_config *c, char *err, size_t errlen)
{
	static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
	pthread_once(&curl_once, curl_init_once);
	*out = NULL;
	struct notify *n = xcalloc(1, sizeof *n);
	int rc = build_cfg(c, &n->cfg, err, errlen);
	if (rc) {
		free(n);
		return rc;
	}
	if ((rc = make_dirs(n, &n->cfg, err, errlen)) != 0) {
		ncfg_free(&n->cfg);
		free(n);
		return rc;
	}
	pthread_mutex_init(&n->ring_lock, NULL);
	mono_cond_init(&n->ring_cond);
	pthread_mutex_init(&n->lock, NULL);
	n->ring_cap = c->ring_capacity ? c->ring_capacity : NOTIFY_DEFAULT_RING;
	n->ring = xcalloc(n->ring_cap, sizeof *n->ring);
	struct alert_groups_config gc;
	groups_config(&n->cfg, &gc);
	if (alert_groups_new(&n->groups, &gc) != 0) {
		notify_free(n);
		return GPULSE_ENOMEM;
	}
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		struct receiver *r = n->cfg.receivers[i];
		r->n = n;
		if (r->dir[0] && (rc = load_dir(n, r, err, errlen)) != 0) {
			notify_free(n);
			return rc;
		}
	}
	report_orphans(&n->cfg);
	start_threads(n);
	*out = n;
	return 0;
}

void notify_free(struct notify *n)
{
	if (!n)
		return;
	stop_threads(n);
	for (size_t i = 0; i < n->cfg.nreceivers; i++)
		persist_all(n, n->cfg.receivers[i]);
	alert_groups_free(n->groups);
	for (size_t i = 0; i < n->ring_len; i++)
		free(n->ring[(n->ring_head + i) % n->ring_cap]);
	free(n->ring);
	free(n->seen);
	ncfg_free(&n->cfg);
	pthread_mutex_destroy(&n->ring_lock);
	mono_cond_destroy(&n->ring_cond);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

/* Move the FIFO and counters of `o` into `r` (same identity). Batches on
 * disk move to r's directory when it differs. */
static void adopt(struct notify *n, struct receiver *r, struct receiver *o)
{
	r->head = o->head;
	r->tail = o->tail;
	r->count = o->count;
	r->bytes = o->bytes;
	r->next_seq = o->next_seq;
	r->failing = o->failing;
	r->backoff_ms = o->backoff_ms;
	r->retry_at_ns = o->retry_at_ns;
	r->st = o->st;
	o->head = o->tail = NULL;
	o->count = o->bytes = 0;
	if (strcmp(r->dir, o->dir) == 0)
		return;
	for (struct entry *e = r->head; e; e = e->next) {
		bool was = e->on_disk;
		e->on_disk = false;
		if (r->dir[0])
			persist(n, r, e);
		if (was && alert_batch_remove(o->dir, e->seq) != 0)
			atomic_fetch_add(&n->disk_errors, 1);
	}
}

int notify_reconfigure(struct notify *n, const struct notify_config *c, char *err, size_t errlen)
{
	struct ncfg nc;
	int rc = build_cfg(c, &nc, err, errlen);
	if (rc)
		return rc;
	if ((rc = make_dirs(n, &nc, err, errlen)) != 0) {
		ncfg_free(&nc);
		return rc;
	}
	stop_threads(n);
	bool *adopted = xcalloc(nc.nreceivers ? nc.nreceivers : 1, sizeof *adopted);
	/* Under the lock: /metrics reads the old receivers meanwhile (a move
	 * between directories, rare, writes files under it). */
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < nc.nreceivers; i++) {
		struct receiver *r = nc.receivers[i];
		r->n = n;
		for (size_t j = 0; j < n->cfg.nreceivers; j++)
			if (strcmp(n->cfg.receivers[j]->id, r->id) == 0) {
				adopt(n, r, n->cfg.receivers[j]);
				adopted[i] = true;
			}
	}
	pthread_mutex_unlock(&n->lock);
	/* Receivers that leave keep their batches on disk for a later
	 * configuration that names them again. */
	for (size_t j = 0; j < n->cfg.nreceivers; j++)
		persist_all(n, n->cfg.receivers[j]);
	pthread_mutex_lock(&n->ring_lock);
	pthread_mutex_lock(&n->lock);
	struct ncfg old = n->cfg;
	n->cfg = nc;
	n->total_batches = n->total_bytes = 0;
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		n->total_batches += n->cfg.receivers[i]->count;
		n->total_bytes += n->cfg.receivers[i]->bytes;
	}
	struct alert_groups_config gc;
	groups_config(&n->cfg, &gc);
	alert_groups_set_config(n->groups, &gc, wall_ms(n), clock_mono_ns() / NS_PER_MS);
	pthread_mutex_unlock(&n->lock);
	pthread_mutex_unlock(&n->ring_lock);
	ncfg_free(&old);
	for (size_t i = 0; i < n->cfg.nreceivers; i++) {
		struct receiver *r = n->cfg.receivers[i];
		char why[512];
		if (!adopted[i] && r->dir[0] && load_dir(n, r, why, sizeof why) != 0)
			log_warn("alerting: %s", why);
	}
	free(adopted);
	report_orphans(&n->cfg);
	start_threads(n);
	return 0;
}

void notify_sink(void *ctx, const struct alert_notice *notices, size_t cnt)
{
	struct notify *n = ctx;
	if (!n || cnt == 0)
		return;
	int64_t mono = clock_mono_ns();
	pthread_mutex_lock(&n->ring_lock);
	for (size_t i = 0; i < cnt; i++) {
		struct alert_item *it;
		if (n->ring_len == n->ring_cap ||
		    alert_item_new(&it, &notices[i], n->cfg.ext, n->cfg.next, n->cfg.external_url) != 0) {
			n->ring_dropped++;
			continue;
		}
		it->received_mono_ns = mono;
		n->ring[(n->ring_head + n->ring_len) % n->ring_cap] = it;
		n->ring_len++;
	}
	mono_cond_broadcast(&n->ring_cond);
	pthread_mutex_unlock(&n->ring_lock);
}

bool notify_drain(struct notify *n, int64_t timeout_ms)
{
	int64_t deadline = clock_mono_ns() + timeout_ms * NS_PER_MS;
	for (;;) {
		pthread_mutex_lock(&n->ring_lock);
		bool idle = n->ring_len == 0 && !n->dispatcher_busy;
		pthread_mutex_unlock(&n->ring_lock);
		pthread_mutex_lock(&n->lock);
		idle = idle && n->total_batches == 0;
		pthread_mutex_unlock(&n->lock);
		if (idle)
			return true;
		if (clock_mono_ns() >= deadline)
			return false;
		clock_sleep_until(clock_mono_ns() + 5 * NS_PER_MS);
	}
}

void notify_get_stats(struct notify *n, struct notify_stats *out)
{
	memset(out, 0, sizeof *out);
	pthread_mutex_lock(&n->ring_lock);
	out->ring_length = n->ring_len;
	out->ring_capacity = n->ring_cap;
	out->ring_dropped_total = n->ring_dropped;
	pthread_mutex_unlock(&n->ring_lock);
	pthread_mutex_lock(&n->lock);
	out->queue_bytes = n->total_bytes;
	out->queue_batches = n->total_batches;
	out->queue_max_bytes = n->cfg.max_bytes;
	out->queue_max_batches = n->cfg.max_files;
	out->disk_errors_total = atomic_load(&n->disk_errors);
	out->inhibited_total = n->gst.inhibited_total + n->am_inhibited;
	out->alerts_held = n->gst.alerts;
	out->groups = n->gst.groups;
	for (size_t i = 0; i < n->cfg.nreceivers && i < NOTIFY_MAX_RECEIVERS; i++) {
		struct receiver *r = n->cfg.receivers[i];
		out->receivers[i] = r->st;
		out->receivers[i].pending_batches = r->count;
		out->receivers[i].pending_bytes = r->bytes;
		out->nreceivers++;
	}
	pthread_mutex_unlock(&n->lock);
}
