/* Diagnosis history in the store; see history.h. */
#include "diagnose/history.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "diagnose/diagnose_json.h"
#include "store/ingest.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "common/status.h"

#define RECORD_JSON_MAX (64 * 1024)
#define MIN_RECORD_GAP_S 30.0     /* between two records of one GPU */
#define STABLE_WINDOWS 3          /* a change is recorded once it held this long */
#define FINDING_SHARE 0.1         /* of a window's stored verdicts */
#define PRUNE_EVERY_NS (600LL * NS_PER_SEC)

/* The headroom numbers kept, each a series. */
#define HEADROOM_SERIES(X)                                                  \
	X(sm_active, "gpulse_gpu_headroom_ratio", "resource", "sm_active")   \
	X(tensor_active, "gpulse_gpu_headroom_ratio", "resource", "tensor_active") \
	X(tensor, "gpulse_gpu_headroom_ratio", "resource", "tensor")         \
	X(pipe_active, "gpulse_gpu_headroom_ratio", "resource", "pipe_active") \
	X(pipe, "gpulse_gpu_headroom_ratio", "resource", "pipe")             \
	X(clock_ratio, "gpulse_gpu_headroom_ratio", "resource", "clock")     \
	X(dram, "gpulse_gpu_headroom_ratio", "resource", "dram")             \
	X(pcie, "gpulse_gpu_headroom_ratio", "resource", "pcie")             \
	X(memory_used, "gpulse_gpu_headroom_ratio", "resource", "memory")    \
	X(busy, "gpulse_gpu_headroom_ratio", "resource", "busy")             \
	X(dram_bytes_per_s, "gpulse_gpu_diagnosis_bytes_per_second", "path", "dram") \
	X(pcie_tx_bytes_per_s, "gpulse_gpu_diagnosis_bytes_per_second", "path", "pcie_tx") \
	X(pcie_rx_bytes_per_s, "gpulse_gpu_diagnosis_bytes_per_second", "path", "pcie_rx")

enum {
#define H_ENUM(field, name, lname, lvalue) H_##field,
	HEADROOM_SERIES(H_ENUM)
#undef H_ENUM
	H_COUNT
};

static const struct {
	size_t offset;
	const char *name, *label, *value;
} headroom_series[H_COUNT] = {
#define H_ROW(field, name, lname, lvalue) \
	{offsetof(struct diag_headroom, field), name, lname, lvalue},
	HEADROOM_SERIES(H_ROW)
#undef H_ROW
};

/* Series of one GPU, in this order. */
#define S_CLASS 0
#define S_FINDING (S_CLASS + DIAG_CLASS_COUNT)
#define S_CONF (S_FINDING + DIAG_FINDING_COUNT)
#define S_HEAD (S_CONF + 1)
#define S_MISSING (S_HEAD + H_COUNT)
#define S_COUNT (S_MISSING + DIAG_MISSING_COUNT)

#define NAME_CLASS "gpulse_gpu_bottleneck"
#define NAME_FINDING "gpulse_gpu_diagnosis_finding"
#define NAME_CONF "gpulse_gpu_diagnosis_confidence_ratio"
#define NAME_MISSING "gpulse_gpu_diagnosis_evidence_missing"

/* Every name series_of gives (the headroom names repeat: harmless). */
const char *const diag_history_metrics[] = {
	NAME_CLASS, NAME_FINDING, NAME_CONF, NAME_MISSING,
#define H_NAME(field, name, lname, lvalue) name,
	HEADROOM_SERIES(H_NAME)
#undef H_NAME
	NULL};

struct hist_gpu {
	pthread_mutex_t lock;
	char uuid[96];
	uint32_t ref[S_COUNT];
	bool have_refs;
	int last_class;               /* of the last record */
	unsigned last_findings;
	double last_record_s;
	double window_s;              /* length of the live windows kept; 0: none yet */
	struct diag_window cand;      /* first window of a change not yet recorded */
	int cand_run;                 /* windows the change has held; 0: none */
};

struct pending {
	char key[160];
	int64_t t_ms;
	char *json;
};

struct diag_history {
	struct tsdb *db;
	struct diag_history_opts o;
	struct hist_gpu gpu[GPU_MAX];
	pthread_mutex_t qlock;
	struct mono_cond qcond;
	struct pending q[DIAG_HISTORY_QUEUE];
	size_t qhead, qlen;
	bool stop, writing;
	pthread_t thread;
	int64_t next_prune_ns;
	atomic_uint_fast64_t windows, append_errors, records, dropped;
};

static double headroom_get(const struct diag_headroom *h, int i)
{
	double v;
	memcpy(&v, (const char *)h + headroom_series[i].offset, sizeof v);
	return v;
}

static void headroom_set(struct diag_headroom *h, int i, double v)
{
	memcpy((char *)h + headroom_series[i].offset, &v, sizeof v);
}

/* The name and extra label of series s of a GPU. */
static void series_of(int s, const char **name, const char **lname, const char **lvalue)
{
	*lname = NULL;
	*lvalue = NULL;
	if (s < S_FINDING) {
		*name = NAME_CLASS;
		*lname = "class";
		*lvalue = diag_class_name((enum diag_class)(s - S_CLASS));
	} else if (s < S_CONF) {
		*name = NAME_FINDING;
		*lname = "finding";
		*lvalue = diag_finding_name((enum diag_finding)(s - S_FINDING));
	} else if (s == S_CONF) {
		*name = NAME_CONF;
	} else if (s >= S_MISSING) {
		*name = NAME_MISSING;
		*lname = "evidence";
		*lvalue = diag_missing_name((enum diag_missing)(s - S_MISSING));
	} else {
		*name = headroom_series[s - S_HEAD].name;
		*lname = headroom_series[s - S_HEAD].label;
		*lvalue = headroom_series[s - S_HEAD].value;
	}
}

/* The series index of a stored series' labels, or -1. */
static int series_index(const struct label *l, size_t n)
{
	const char *name = NULL, *cls = NULL, *fnd = NULL, *res = NULL, *path = NULL, *evd = NULL;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(l[i].name, "__name__") == 0)
			name = l[i].value;
		else if (strcmp(l[i].name, "class") == 0)
			cls = l[i].value;
		else if (strcmp(l[i].name, "finding") == 0)
			fnd = l[i].value;
		else if (strcmp(l[i].name, "resource") == 0)
			res = l[i].value;
		else if (strcmp(l[i].name, "path") == 0)
			path = l[i].value;
		else if (strcmp(l[i].name, "evidence") == 0)
			evd = l[i].value;
	}
	if (!name)
		return -1;
	if (strcmp(name, NAME_CLASS) == 0) {
		int c = cls ? diag_class_by_name(cls) : -1;
		return c < 0 ? -1 : S_CLASS + c;
	}
	if (strcmp(name, NAME_FINDING) == 0) {
		for (int f = 0; fnd && f < DIAG_FINDING_COUNT; f++)
			if (strcmp(fnd, diag_finding_name((enum diag_finding)f)) == 0)
				return S_FINDING + f;
		return -1;
	}
	if (strcmp(name, NAME_CONF) == 0)
		return S_CONF;
	if (strcmp(name, NAME_MISSING) == 0) {
		for (int m = 0; evd && m < DIAG_MISSING_COUNT; m++)
			if (strcmp(evd, diag_missing_name((enum diag_missing)m)) == 0)
				return S_MISSING + m;
		return -1;
	}
	const char *v = res ? res : path;
	for (int i = 0; v && i < H_COUNT; i++)
		if (strcmp(name, headroom_series[i].name) == 0 && strcmp(v, headroom_series[i].value) == 0)
			return S_HEAD + i;
	return -1;
}

static int make_refs(struct diag_history *h, struct hist_gpu *g, const struct gpu_identity *id)
{
	char gpu[16];
	snprintf(gpu, sizeof gpu, "%d", id->index);
	for (int s = 0; s < S_COUNT; s++) {
		const char *name, *lname, *lvalue;
		series_of(s, &name, &lname, &lvalue);
		struct label l[INGEST_GPU_LABELS_MAX];
		size_t n = ingest_gpu_labels(l, name, gpu, id->uuid, id->name, gpu_source_label(id),
					     lname, lvalue);
		char err[160];
		int rc = tsdb_series(h->db, l, n, &g->ref[s], err, sizeof err);
		if (rc) {
			log_warn("diagnosis history: series %s of GPU %d not stored: %s", name,
				 id->index, err);
			return rc;
		}
	}
	snprintf(g->uuid, sizeof g->uuid, "%s", id->uuid);
	g->have_refs = true;
	return GPULSE_OK;
}

static void append(struct diag_history *h, uint32_t ref, int64_t t_ms, double v)
{
	if (isnan(v))
		return;  /* absent, not zero (DESIGN.md decision 2) */
	if (tsdb_append(h->db, ref, t_ms, v) != GPULSE_OK)
		atomic_fetch_add(&h->append_errors, 1);
}

static void enqueue(struct diag_history *h, const char *uuid, const struct diag_window *w,
		    int64_t t_ms)
{
	struct buf b;
	buf_init(&b, RECORD_JSON_MAX);
	if (diag_json_window(&b, w) != GPULSE_OK || buf_putc(&b, '\0') != GPULSE_OK) {
		buf_free(&b);
		atomic_fetch_add(&h->dropped, 1);
		return;
	}
	pthread_mutex_lock(&h->qlock);
	if (h->qlen == DIAG_HISTORY_QUEUE || h->stop) {
		pthread_mutex_unlock(&h->qlock);
		buf_free(&b);
		atomic_fetch_add(&h->dropped, 1);
		return;
	}
	struct pending *p = &h->q[(h->qhead + h->qlen) % DIAG_HISTORY_QUEUE];
	snprintf(p->key, sizeof p->key, "%s/%013lld", uuid[0] ? uuid : "-", (long long)t_ms + 1);
	p->t_ms = t_ms;
	p->json = b.data;  /* the queue owns it now */
	h->qlen++;
	mono_cond_signal(&h->qcond);
	pthread_mutex_unlock(&h->qlock);
}

void diag_history_put(struct diag_history *h, const struct gpu_identity *id,
		      const struct diag_window *w)
{
	if (!h || id->index < 0 || id->index >= GPU_MAX)
		return;
	struct hist_gpu *g = &h->gpu[id->index];
	/* Stamped at the window's last millisecond, so a sample lies in the
	 * window (and rollup bucket) it describes. */
	int64_t t_ms = (int64_t)llround(w->end_s * 1000.0) - 1;
	pthread_mutex_lock(&g->lock);
	if (g->have_refs && strcmp(g->uuid, id->uuid) != 0) {
		g->have_refs = false;  /* another card in this slot */
		g->last_class = -1;
	}
	if (!g->have_refs && make_refs(h, g, id) != GPULSE_OK) {
		pthread_mutex_unlock(&g->lock);
		atomic_fetch_add(&h->append_errors, 1);
		return;
	}
	if (w->end_s > w->start_s)
		g->window_s = w->end_s - w->start_s;
	for (int c = 0; c < DIAG_CLASS_COUNT; c++)
		append(h, g->ref[S_CLASS + c], t_ms, (int)w->bottleneck == c);
	for (int f = 0; f < DIAG_FINDING_COUNT; f++)
		append(h, g->ref[S_FINDING + f], t_ms, (w->findings & DIAG_FINDING_BIT(f)) != 0);
	append(h, g->ref[S_CONF], t_ms, w->confidence);
	for (int i = 0; i < H_COUNT; i++)
		append(h, g->ref[S_HEAD + i], t_ms, headroom_get(&w->headroom, i));
	for (int m = 0; m < DIAG_MISSING_COUNT; m++)
		append(h, g->ref[S_MISSING + m], t_ms, (w->missing & DIAG_MISSING_BIT(m)) != 0);
	atomic_fetch_add(&h->windows, 1);
	/* A record holds the whole window at a change of class or findings
	 * that lasted STABLE_WINDOWS windows (flapping writes none), at most
	 * one per MIN_RECORD_GAP_S, and one every record_interval_s while
	 * nothing changes. */
	const struct diag_window *rec = NULL;
	if (g->last_class == (int)w->bottleneck && g->last_findings == w->findings) {
		g->cand_run = 0;
		if (w->end_s - g->last_record_s >= h->o.record_interval_s)
			rec = w;
	} else {
		if (g->cand_run && g->cand.bottleneck == w->bottleneck &&
		    g->cand.findings == w->findings) {
			g->cand_run++;
		} else {
			g->cand = *w;
			g->cand_run = 1;
		}
		if (g->cand_run >= STABLE_WINDOWS && w->end_s - g->last_record_s >= MIN_RECORD_GAP_S)
			rec = &g->cand;
	}
	char uuid[96];
	memcpy(uuid, g->uuid, sizeof uuid);
	if (rec) {
		g->last_class = (int)rec->bottleneck;
		g->last_findings = rec->findings;
		g->last_record_s = w->end_s;
		g->cand_run = 0;
		enqueue(h, uuid, rec, (int64_t)llround(rec->end_s * 1000.0) - 1);
	}
	pthread_mutex_unlock(&g->lock);
}

/* Write the queued records; called with qlock held, drops it meanwhile. */
static void drain(struct diag_history *h)
{
	while (h->qlen) {
		struct pending p = h->q[h->qhead];
		h->qhead = (h->qhead + 1) % DIAG_HISTORY_QUEUE;
		h->qlen--;
		h->writing = true;
		pthread_mutex_unlock(&h->qlock);
		if (tsdb_record_put(h->db, DIAG_HISTORY_KIND, p.key, p.t_ms, p.json) == GPULSE_OK)
			atomic_fetch_add(&h->records, 1);
		else
			atomic_fetch_add(&h->dropped, 1);
		free(p.json);
		pthread_mutex_lock(&h->qlock);
		h->writing = false;
	}
	mono_cond_broadcast(&h->qcond);
}

static void prune(struct diag_history *h)
{
	int64_t now = clock_mono_ns();
	if (now < h->next_prune_ns)
		return;
	h->next_prune_ns = now + PRUNE_EVERY_NS;
	int64_t before = tsdb_now_ms(h->db) - h->o.record_retention_ms;
	size_t n = 0;
	if (tsdb_record_prune(h->db, DIAG_HISTORY_KIND, before, &n) == GPULSE_OK && n)
		log_debug("diagnosis history: pruned %zu record(s)", n);
}

/* Not common/periodic: a queue's writer, woken by each record queued; the
 * queue's condition also wakes diag_history_sync's callers once drained,
 * and a stop drains what is queued first. The 60 s wait is only for the
 * prune when no record comes. */
static void *writer(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-diaghist");
	struct diag_history *h = arg;
	pthread_mutex_lock(&h->qlock);
	while (!h->stop || h->qlen) {
		drain(h);
		pthread_mutex_unlock(&h->qlock);
		prune(h);
		pthread_mutex_lock(&h->qlock);
		if (!h->stop && !h->qlen) {
			mono_cond_wait_until(&h->qcond, &h->qlock,
					     clock_mono_ns() + 60 * NS_PER_SEC);
		}
	}
	pthread_mutex_unlock(&h->qlock);
	return NULL;
}

int diag_history_create(struct diag_history **out, struct tsdb *db,
			const struct diag_history_opts *o)
{
	*out = NULL;
	if (!db || (o && (o->record_interval_s < 0 || o->record_retention_ms < 0)))
		return GPULSE_EINVAL;
	struct diag_history *h = calloc(1, sizeof *h);
	if (!h)
		return GPULSE_ENOMEM;
	h->db = db;
	if (o)
		h->o = *o;
	if (h->o.record_interval_s == 0)
		h->o.record_interval_s = 600;
	if (h->o.record_retention_ms == 0)
		h->o.record_retention_ms = 48LL * 3600 * 1000;
	for (int i = 0; i < GPU_MAX; i++) {
		pthread_mutex_init(&h->gpu[i].lock, NULL);
		h->gpu[i].last_class = -1;
	}
	pthread_mutex_init(&h->qlock, NULL);
	mono_cond_init(&h->qcond);
	if (pthread_create(&h->thread, NULL, writer, h) != 0) {
		for (int i = 0; i < GPU_MAX; i++)
			pthread_mutex_destroy(&h->gpu[i].lock);
		pthread_mutex_destroy(&h->qlock);
		mono_cond_destroy(&h->qcond);
		free(h);
		return GPULSE_ENOMEM;
	}
	*out = h;
	return GPULSE_OK;
}

void diag_history_destroy(struct diag_history *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->qlock);
	h->stop = true;
	mono_cond_broadcast(&h->qcond);
	pthread_mutex_unlock(&h->qlock);
	pthread_join(h->thread, NULL);
	for (int i = 0; i < GPU_MAX; i++)
		pthread_mutex_destroy(&h->gpu[i].lock);
	pthread_mutex_destroy(&h->qlock);
	mono_cond_destroy(&h->qcond);
	free(h);
}

void diag_history_sync(struct diag_history *h)
{
	pthread_mutex_lock(&h->qlock);
	mono_cond_broadcast(&h->qcond);
	while (h->qlen || h->writing)
		mono_cond_wait(&h->qcond, &h->qlock);
	pthread_mutex_unlock(&h->qlock);
}

void diag_history_get_stats(struct diag_history *h, struct diag_history_stats *out)
{
	out->windows_total = atomic_load(&h->windows);
	out->append_errors_total = atomic_load(&h->append_errors);
	out->records_total = atomic_load(&h->records);
	out->records_dropped_total = atomic_load(&h->dropped);
}

/* ---- reading ---- */

/* Past this many stored verdicts in one read the answer is refused: a
 * day of 1-s live windows is 86 400; the bound only stops a runaway. */
#define VERDICTS_MAX (8u << 20)
/* The rollup bucket when the read cannot tell it from the buckets'
 * spacing (one bucket): the store's default. */
#define ROLLUP_FALLBACK_MS 60000

/* Sums of one output window: over all its stored verdicts for the
 * classes and findings (their shares are the evidence), over the
 * verdicts of its winning class for every other number, so that the
 * class and the numbers shown beside it describe the same time. */
struct acc {
	double sum[S_COUNT];
	double cnt[S_COUNT];
	int64_t first_ms, last_ms;  /* the stored verdicts' stamps in it */
	bool any;
	int best;                   /* the winning class, once known */
};

/* One stored verdict (raw: one live window; rollup: one bucket's share
 * of a class). */
struct verdict {
	int64_t t_ms;
	int cls;
	double weight;
};

static int cmp_verdict(const void *a, const void *b)
{
	const struct verdict *x = a, *y = b;
	if (x->t_ms != y->t_ms)
		return x->t_ms < y->t_ms ? -1 : 1;
	return x->weight > y->weight ? -1 : x->weight < y->weight ? 1 : x->cls - y->cls;
}

/* The class of the verdict stamped at t (the bucket's largest), or -1. */
static int class_at(const struct verdict *v, size_t n, int64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].t_ms < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].t_ms == t ? v[lo].cls : -1;
}

static void finish_window(struct diag_window *w, const struct acc *a, const struct gpu_peaks *pk)
{
	double nsub = 0;
	for (int c = 0; c < DIAG_CLASS_COUNT; c++)
		nsub = fmax(nsub, a->cnt[S_CLASS + c]);
	w->nverdicts = (size_t)llround(nsub);
	w->nsamples = w->judged_samples = 0;
	w->judged_start_s = w->start_s;
	w->judged_end_s = w->end_s;
	w->rule = "the class that held most of the time (the stored windows' shares in the "
		  "evidence), with that time's numbers";
	int best = a->best;
	w->bottleneck = (enum diag_class)best;
	double top_share = nsub > 0 ? a->sum[S_CLASS + best] / nsub : 0;
	for (int c = 0; c < DIAG_CLASS_COUNT && w->nevidence < DIAG_EVIDENCE_MAX; c++) {
		double share = nsub > 0 ? a->sum[S_CLASS + c] / nsub : 0;
		if (share <= 0)
			continue;
		w->evidence[w->nevidence++] = (struct diag_evidence){
			.name = diag_class_name((enum diag_class)c), .stat = "share_of_windows",
			.value = share, .op = c == best ? ">=" : "", .threshold = c == best ? share : NAN,
			.peak = NAN, .unit = "ratio", .holds = c == best};
	}
	for (int f = 0; f < DIAG_FINDING_COUNT; f++) {
		double share = nsub > 0 ? a->sum[S_FINDING + f] / nsub : 0;
		if (share <= 0)
			continue;
		bool keep = a->sum[S_FINDING + f] >= 1 && share >= FINDING_SHARE;
		if (keep)
			w->findings |= DIAG_FINDING_BIT(f);
		if (w->nevidence < DIAG_EVIDENCE_MAX)
			w->evidence[w->nevidence++] = (struct diag_evidence){
				.name = diag_finding_name((enum diag_finding)f),
				.stat = "share_of_windows", .value = share, .op = ">=",
				.threshold = FINDING_SHARE, .peak = NAN, .unit = "ratio", .holds = keep};
	}
	/* Evidence missing from any of its class's windows weakens it. */
	for (int m = 0; m < DIAG_MISSING_COUNT; m++)
		if (a->sum[S_MISSING + m] > 0)
			w->missing |= DIAG_MISSING_BIT(m);
	double conf = a->cnt[S_CONF] > 0 ? a->sum[S_CONF] / a->cnt[S_CONF] : NAN;
	w->confidence = isnan(conf) ? top_share : conf * top_share;
	for (int i = 0; i < H_COUNT; i++) {
		int s = S_HEAD + i;
		headroom_set(&w->headroom, i, a->cnt[s] > 0 ? a->sum[s] / a->cnt[s] : NAN);
	}
	w->headroom.pipe_name = NULL;
	diagnose_describe(w, pk);
}

/* Read the series of GPU `gpu` whose names `names` matches over the
 * range into the windows' sums. Class series (pass 1) go to every
 * window's class sums and to `vs` (the verdicts, raw 0s left out);
 * other series (pass 2) count only at the stamps whose verdict is the
 * window's winning class, findings excepted (see finish_window). */
static int read_pass(struct diag_history *h, int gpu, bool classes, const char *names,
		     const struct tsdb_select_opts *so, int64_t origin_ms, int64_t win_ms,
		     struct acc *acc, size_t nwin, struct verdict **vs, size_t *nv, size_t *cap,
		     bool *rollup)
{
	char g[16];
	snprintf(g, sizeof g, "%d", gpu);
	struct tsdb_matcher m[2] = {
		{TSDB_MATCH_RE, "__name__", names},
		{TSDB_MATCH_EQ, "gpu", g},
	};
	struct tsdb_iter *it = NULL;
	char err[160];
	int rc = tsdb_select(h->db, m, 2, so, &it, err, sizeof err);
	if (rc)
		return rc;
	*rollup = tsdb_iter_is_rollup(it);
	int r;
	while ((r = tsdb_iter_next_series(it)) == 1) {
		size_t nl;
		const struct label *l = tsdb_iter_labels(it, &nl);
		int s = series_index(l, nl);
		if (s < 0 || (classes != (s < S_FINDING)))
			continue;
		int64_t t;
		double v;
		struct tsdb_rollup ru;
		for (;;) {
			double sum, cnt;
			if (*rollup) {
				if (tsdb_iter_next_rollup(it, &ru) != 1)
					break;
				t = ru.t_ms;
				sum = ru.sum;
				cnt = (double)ru.count;
			} else {
				if (tsdb_iter_next_sample(it, &t, &v) != 1)
					break;
				if (isnan(v))
					continue;  /* staleness marker */
				sum = v;
				cnt = 1;
			}
			if (t < origin_ms)
				continue;
			size_t k = (size_t)((t - origin_ms) / win_ms);
			if (k >= nwin)
				continue;
			struct acc *a = &acc[k];
			if (classes) {
				if (!a->any || t < a->first_ms)
					a->first_ms = t;
				if (!a->any || t > a->last_ms)
					a->last_ms = t;
				a->any = true;
				if (sum > 0) {
					if (*nv == *cap) {
						size_t ncap = *cap ? *cap * 2 : 1024;
						struct verdict *nvs = ncap <= VERDICTS_MAX ?
							realloc(*vs, ncap * sizeof **vs) : NULL;
						if (!nvs) {
							rc = ncap <= VERDICTS_MAX ? GPULSE_ENOMEM
										  : GPULSE_EINVAL;
							goto out;
						}
						*vs = nvs;
						*cap = ncap;
					}
					(*vs)[(*nv)++] = (struct verdict){t, s - S_CLASS, sum};
				}
			} else if (s >= S_FINDING && s < S_CONF) {
				/* Findings: over every window (docs/DIAGNOSIS.md). */
			} else if (class_at(*vs, *nv, t) != a->best) {
				continue;
			}
			a->sum[s] += sum;
			a->cnt[s] += cnt;
		}
	}
	if (r < 0)
		rc = -r;
out:
	tsdb_iter_free(it);
	return rc;
}

/* The first or the last stamp (`last`) of GPU `gpu`'s stored verdicts in
 * [mint, maxt], read from the raw samples (a rollup bucket says only
 * which minute), with the smallest spacing of the stamps it saw in
 * *gap_ms when that is smaller. 1 found, 0 not (raw data gone), or an
 * error. */
static int raw_edge(struct diag_history *h, int gpu, int64_t mint, int64_t maxt, bool last,
		    int64_t *t_out, int64_t *gap_ms)
{
	char g[16];
	snprintf(g, sizeof g, "%d", gpu);
	/* Every verdict writes every class series: one of them has every stamp. */
	struct tsdb_matcher m[3] = {
		{TSDB_MATCH_EQ, "__name__", NAME_CLASS},
		{TSDB_MATCH_EQ, "class", diag_class_name(DIAG_IDLE)},
		{TSDB_MATCH_EQ, "gpu", g},
	};
	struct tsdb_select_opts so = {.mint = mint, .maxt = maxt, .mode = TSDB_READ_RAW};
	struct tsdb_iter *it = NULL;
	char err[160];
	int rc = tsdb_select(h->db, m, 3, &so, &it, err, sizeof err);
	if (rc)
		return -rc;
	int found = 0, r;
	while ((r = tsdb_iter_next_series(it)) == 1) {
		int64_t t, prev = INT64_MIN;
		double v;
		while (tsdb_iter_next_sample(it, &t, &v) == 1) {
			if (isnan(v))
				continue;
			if (prev != INT64_MIN && t > prev && (*gap_ms == 0 || t - prev < *gap_ms))
				*gap_ms = t - prev;
			prev = t;
			if (!found || (last ? t > *t_out : t < *t_out))
				*t_out = t;
			found = 1;
		}
	}
	tsdb_iter_free(it);
	return r < 0 ? r : found;
}

int diag_history_read(struct diag_history *h, int gpu, double since_s, double until_s,
		      double window_s, size_t max_windows, const struct gpu_peaks *peaks,
		      struct diag_window **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!(window_s >= 0.1) || !(until_s > since_s) || !isfinite(since_s) || !isfinite(until_s) ||
	    gpu < 0 || gpu >= GPU_MAX)
		return GPULSE_EINVAL;
	double origin = floor(since_s / window_s) * window_s;
	double span = ceil((until_s - origin) / window_s);
	if (!(span >= 1) || span > (double)max_windows)
		return GPULSE_EINVAL;
	size_t nwin = (size_t)span;
	int64_t origin_ms = (int64_t)llround(origin * 1000.0);
	int64_t win_ms = (int64_t)llround(window_s * 1000.0);
	struct acc *acc = calloc(nwin, sizeof *acc);
	struct verdict *vs = NULL;
	size_t nv = 0, cap = 0;
	bool rollup = false;
	if (!acc)
		return GPULSE_ENOMEM;
	pthread_mutex_lock(&h->gpu[gpu].lock);
	double live_s = h->gpu[gpu].window_s;
	pthread_mutex_unlock(&h->gpu[gpu].lock);
	struct tsdb_select_opts so = {
		.mint = (int64_t)floor(since_s * 1000.0) + 1, .maxt = (int64_t)floor(until_s * 1000.0),
		/* Raw samples while they are kept, whatever the window: a
		 * rollup minute mixes the classes, and the numbers shown must
		 * be the winning class's own. Rollups past the retention. */
		.mode = TSDB_READ_AUTO, .step_hint_ms = 1};
	/* Pass 1: the classes, and each stamp's verdict. */
	int rc = read_pass(h, gpu, true, NAME_CLASS, &so, origin_ms, win_ms, acc, nwin, &vs, &nv, &cap,
			   &rollup);
	if (rc)
		goto out;
	size_t used = 0;
	for (size_t k = 0; k < nwin; k++)
		used += acc[k].any;
	if (used == 0)
		goto out;
	/* One verdict per stamp: a rollup bucket's is its largest class. */
	qsort(vs, nv, sizeof *vs, cmp_verdict);
	size_t nu = 0;
	int64_t gap_ms = 0;  /* the smallest spacing of stamps */
	for (size_t i = 0; i < nv; i++) {
		if (nu && vs[nu - 1].t_ms == vs[i].t_ms)
			continue;
		if (nu && (gap_ms == 0 || vs[i].t_ms - vs[nu - 1].t_ms < gap_ms))
			gap_ms = vs[i].t_ms - vs[nu - 1].t_ms;
		vs[nu++] = vs[i];
	}
	nv = nu;
	/* Each window's class: the one that held most of its time. The
	 * live windows are of one length, so their count is their time. */
	for (size_t k = 0; k < nwin; k++) {
		int best = 0;
		for (int c = 1; c < DIAG_CLASS_COUNT; c++)
			if (acc[k].sum[S_CLASS + c] > acc[k].sum[S_CLASS + best])
				best = c;
		acc[k].best = best;
	}
	/* Pass 2: the numbers of those times. */
	rc = read_pass(h, gpu, false,
		       NAME_FINDING "|" NAME_CONF "|" NAME_MISSING
				    "|gpulse_gpu_headroom_ratio|gpulse_gpu_diagnosis_bytes_per_second",
		       &so, origin_ms, win_ms, acc, nwin, &vs, &nv, &cap, &rollup);
	if (rc)
		goto out;
	/* What a stamp covers: a raw verdict the live window ending at it,
	 * a rollup bucket the bucket starting at it. */
	size_t kfirst = 0, klast = nwin - 1;
	while (!acc[kfirst].any)
		kfirst++;
	while (!acc[klast].any)
		klast--;
	double before_s, after_s, first_s = -INFINITY, last_s = INFINITY;
	if (rollup) {
		/* A bucket says which minute; the history's first and last
		 * stamps, where the raw samples still hold them, say when. */
		int64_t bucket_ms = gap_ms > 0 ? gap_ms : ROLLUP_FALLBACK_MS, t, raw_gap = 0;
		before_s = 0;
		after_s = (double)bucket_ms / 1000.0;
		int f = raw_edge(h, gpu, acc[kfirst].first_ms, acc[kfirst].first_ms + bucket_ms - 1,
				 false, &t, &raw_gap);
		double live = live_s > 0 ? live_s : (double)raw_gap / 1000.0;
		if (f == 1)
			first_s = (double)t / 1000.0 + 0.001 - live;
		int l = raw_edge(h, gpu, acc[klast].last_ms, acc[klast].last_ms + bucket_ms - 1, true,
				 &t, &raw_gap);
		if (l == 1)
			last_s = (double)t / 1000.0 + 0.001;
		if (f < 0 || l < 0) {
			rc = -(f < 0 ? f : l);
			goto out;
		}
	} else {
		before_s = (live_s > 0 ? live_s : (double)gap_ms / 1000.0) - 0.001;
		after_s = 0.001;
	}
	struct diag_window *w = calloc(used, sizeof *w);
	if (!w) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	size_t j = 0;
	for (size_t k = 0; k < nwin && j < used; k++) {
		if (!acc[k].any)
			continue;
		/* The window's edges are its data's: never before the first
		 * stored verdict's time nor after the last's (nor `until_s`,
		 * now), whatever the length asked for. */
		double a = origin + (double)k * window_s, b = a + window_s;
		a = fmax(a, fmax(since_s, (double)acc[k].first_ms / 1000.0 - before_s));
		b = fmin(b, fmin(until_s, (double)acc[k].last_ms / 1000.0 + after_s));
		if (k == kfirst)
			a = fmax(a, first_s);
		if (k == klast)
			b = fmin(b, last_s);
		if (!(b > a))
			b = a + 0.001;
		w[j].gpu = gpu;
		w[j].start_s = a;
		w[j].end_s = b;
		finish_window(&w[j], &acc[k], peaks);
		j++;
	}
	*out = w;
	*n = j;
out:
	free(vs);
	free(acc);
	return rc;
}

int diag_history_records_json(struct diag_history *h, const char *uuid, double since_s,
			      double until_s, size_t limit, struct buf *b)
{
	char lo[160], hi[160];  /* keys hold the window's end */
	snprintf(lo, sizeof lo, "%s/%013lld", uuid[0] ? uuid : "-",
		 (long long)floor(since_s * 1000.0) + 1);
	snprintf(hi, sizeof hi, "%s/%013lld", uuid[0] ? uuid : "-", (long long)floor(until_s * 1000.0));
	struct tsdb_record *r = NULL;
	size_t nr = 0;
	int rc = tsdb_record_keys(h->db, DIAG_HISTORY_KIND, lo, hi, limit, &r, &nr);
	if (rc)
		return rc;
	/* Newest first from the store; oldest first in the document. */
	buf_putc(b, '[');
	for (size_t i = nr; i-- > 0;) {
		buf_puts(b, r[i].json);
		if (i)
			buf_putc(b, ',');
	}
	buf_putc(b, ']');
	tsdb_records_free(r, nr);
	return b->failed ? GPULSE_ELIMIT : GPULSE_OK;
}
