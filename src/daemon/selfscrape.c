/* gpulsed's /metrics into its own store; see selfscrape.h. Every family
 * arrives through the sink as samples with their labels (no text is
 * rendered or parsed); one table of series gives staleness, forgetting
 * and the bound. */
#include "daemon/selfscrape.h"

#include <math.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/metric.h"
#include "common/periodic.h"
#include "promql/queryable.h"
#include "common/stale.h"
#include "common/status.h"

#define NS_PER_MS 1000000LL
#define MAX_LABELS 32

enum owner { O_OURS, O_FOREIGN };

struct family {
	char *name;
	size_t len;
	enum owner owner;
};

struct sseries {
	struct sseries *next;        /* the bucket's chain */
	char *key;                   /* name and labels (sink_series) */
	size_t len;                  /* of key */
	uint64_t hash;
	uint32_t ref;
	uint64_t seen;               /* the scrape that last had it */
	bool live;                   /* its last sample was a value, not a marker */
};

struct selfscrape {
	struct tsdb *db;
	struct selfscrape_opts o;
	selfscrape_render_fn *render;
	void *render_ctx;
	struct sseries **bucket;
	size_t nbuckets, nseries;
	struct family *fam;
	size_t nfam;
	size_t last_fam;             /* the family of the last line: the next one's, mostly */
	uint64_t gen;
	struct metric_sink direct;  /* the render's sink */
	int64_t t_ms;               /* the time of the scrape under way */
	struct periodic ticker;     /* scrape, every interval_ms */
	atomic_uint_fast64_t scrapes, appended, append_errors, refused, nseries_pub, owned, foreign;
};

/* The labels of a new series, for tsdb_series. */
struct label_list {
	struct label l[MAX_LABELS + 1]; /* __name__ and MAX_LABELS others */
	size_t n;
};

static int add_label(void *ctx, const char *name, const char *value)
{
	struct label_list *ll = ctx;
	if (ll->n == sizeof ll->l / sizeof ll->l[0])
		return GPULSE_ELIMIT;
	ll->l[ll->n++] = (struct label){name, value};
	return 0;
}

static struct family *family_get(struct selfscrape *s, const char *name, size_t len)
{
	/* A family's samples come together: try the last sample's first.
	 * The lengths are kept (a strlen per family per sample was the
	 * scrape's largest cost on the dev VM). */
	if (s->last_fam < s->nfam && s->fam[s->last_fam].len == len &&
	    memcmp(s->fam[s->last_fam].name, name, len) == 0)
		return &s->fam[s->last_fam];
	for (size_t i = 0; i < s->nfam; i++)
		if (s->fam[i].len == len && memcmp(s->fam[i].name, name, len) == 0) {
			s->last_fam = i;
			return &s->fam[i];
		}
	if (s->nfam == SELFSCRAPE_MAX_FAMILIES)
		return NULL;
	char *copy = strndup(name, len);
	if (!copy)
		return NULL;
	/* Whose it is follows from what the other writers of this process
	 * declared, never from what the store holds: after a restart the
	 * store holds every name the last run stored, this scraper's own
	 * included. */
	enum owner owner = O_OURS;
	for (const char *const *f = s->o.foreign_names; f && *f; f++)
		if (strlen(*f) == len && memcmp(*f, name, len) == 0) {
			owner = O_FOREIGN;
			break;
		}
	atomic_fetch_add(owner == O_OURS ? &s->owned : &s->foreign, 1);
	s->fam[s->nfam] = (struct family){copy, len, owner};
	s->last_fam = s->nfam;
	return &s->fam[s->nfam++];
}

static void put(struct selfscrape *s, struct sseries *x, int64_t t_ms, double v)
{
	if (tsdb_append(s->db, x->ref, t_ms, v) == GPULSE_OK)
		atomic_fetch_add(&s->appended, 1);
	else
		atomic_fetch_add(&s->append_errors, 1);
}

/* The series of a sample that the render gave the sink. Its key is the
 * name, then each label with a value as its name and value, each after
 * its length in two bytes: no value, whatever its bytes, makes two label
 * sets one key. */
static struct sseries *direct_series(struct selfscrape *s, const char *name, size_t namelen,
				     const struct metric_family *f, const char *suffix,
				     const char *const *values)
{
	char key[4096];
	size_t n = metric_family_nlabels(f);
	bool le = strcmp(suffix, "_bucket") == 0;
	size_t len = namelen;
	if (len >= sizeof key)
		return NULL;
	memcpy(key, name, namelen);
	for (size_t i = 0; i < n + le; i++) {
		if (!values[i] || !values[i][0])
			continue;
		const char *ln = i < n ? f->labels[i] : "le";
		size_t a = strlen(ln), b = strlen(values[i]);
		if (len + a + b + 4 >= sizeof key)
			return NULL;
		key[len++] = (char)(a >> 8);
		key[len++] = (char)a;
		memcpy(key + len, ln, a);
		len += a;
		key[len++] = (char)(b >> 8);
		key[len++] = (char)b;
		memcpy(key + len, values[i], b);
		len += b;
	}
	uint64_t h = fnv1a64(key, len);
	struct sseries **bk = &s->bucket[h & (s->nbuckets - 1)];
	for (struct sseries *x = *bk; x; x = x->next)
		if (x->hash == h && x->len == len && memcmp(x->key, key, len) == 0)
			return x;
	if (s->nseries >= s->o.max_series) {
		atomic_fetch_add(&s->refused, 1);
		return NULL;
	}
	/* A label with an empty value is no label, as Prometheus has it. */
	struct label_list ll = {.n = 0};
	add_label(&ll, "__name__", name);
	for (size_t i = 0; i < n + le; i++)
		if (values[i] && values[i][0] &&
		    add_label(&ll, i < n ? f->labels[i] : "le", values[i]))
			return NULL;
	uint32_t ref;
	char err[256];
	if (tsdb_series(s->db, ll.l, ll.n, &ref, err, sizeof err) != GPULSE_OK) {
		atomic_fetch_add(&s->refused, 1);
		return NULL;
	}
	struct sseries *x = calloc(1, sizeof *x);
	char *k = x ? malloc(len) : NULL;
	if (!k) {
		free(x);
		return NULL;
	}
	memcpy(k, key, len);
	*x = (struct sseries){.next = *bk, .key = k, .len = len, .hash = h, .ref = ref};
	*bk = x;
	s->nseries++;
	return x;
}

static void direct_put(struct selfscrape *s, const struct metric_family *f, const char *suffix,
		       const char *const *values, double v)
{
	/* name and suffix joined by hand: snprintf here was a quarter of a
	 * scrape. */
	char name[256];
	size_t a = strlen(f->name), b = suffix[0] ? strlen(suffix) : 0;
	if (a + b >= sizeof name)
		return;
	memcpy(name, f->name, a);
	memcpy(name + a, suffix, b);
	name[a + b] = '\0';
	size_t namelen = a + b;
	struct family *fam = family_get(s, name, namelen);
	struct sseries *x = fam && fam->owner == O_OURS
		? direct_series(s, name, namelen, f, suffix, values) : NULL;
	if (x) {
		put(s, x, s->t_ms, v);
		x->seen = s->gen;
		x->live = true;
	}
}

static void direct_f64(struct metric_sink *sink, const struct metric_family *f, const char *suffix,
		       const char *const *values, double v)
{
	struct selfscrape *s = (struct selfscrape *)((char *)sink - offsetof(struct selfscrape, direct));
	direct_put(s, f, suffix, values, v);
}

static void direct_u64(struct metric_sink *sink, const struct metric_family *f, const char *suffix,
		       const char *const *values, uint64_t v)
{
	direct_f64(sink, f, suffix, values, (double)v);
}

/* Another writer's families: the render may leave out their work. */
static bool direct_wants(struct metric_sink *sink, const char *name)
{
	struct selfscrape *s = (struct selfscrape *)((char *)sink - offsetof(struct selfscrape, direct));
	struct family *f = family_get(s, name, strlen(name));
	return f && f->owner == O_OURS;
}

static const struct metric_sink_ops direct_ops = {
	.f64 = direct_f64, .u64 = direct_u64, .wants = direct_wants,
};

/* A scrape begins: samples from here on are this scrape's. */
static void scrape_begin(struct selfscrape *s, int64_t t_ms)
{
	s->gen++;
	s->t_ms = t_ms;
	atomic_fetch_add(&s->scrapes, 1);
}

/* The scrape ends: end what it no longer has; forget what is long gone. */
static void scrape_end(struct selfscrape *s)
{
	for (size_t i = 0; i < s->nbuckets; i++) {
		for (struct sseries **pp = &s->bucket[i]; *pp;) {
			struct sseries *x = *pp;
			if (x->seen != s->gen && x->live) {
				put(s, x, s->t_ms, stale_nan());
				x->live = false;
			}
			if (s->gen - x->seen >= SELFSCRAPE_FORGET_SCRAPES) {
				*pp = x->next;
				free(x->key);
				free(x);
				s->nseries--;
				continue;
			}
			pp = &x->next;
		}
	}
	atomic_store(&s->nseries_pub, s->nseries);
}

void selfscrape_scrape_at(struct selfscrape *s, int64_t t_ms)
{
	scrape_begin(s, t_ms);
	/* A failed render ends no series: what it gave is stored. */
	if (s->render(s->render_ctx, &s->direct) == 0)
		scrape_end(s);
}

/* One scrape, on the ticker's thread. */
static void scrape(void *arg)
{
	selfscrape_scrape_at(arg, clock_wall_ns() / NS_PER_MS);
}

int selfscrape_create(struct selfscrape **out, struct tsdb *db, const struct selfscrape_opts *o,
		      selfscrape_render_fn *render, void *ctx)
{
	*out = NULL;
	struct selfscrape *s = calloc(1, sizeof *s);
	if (!s)
		return GPULSE_ENOMEM;
	s->db = db;
	s->o = o ? *o : (struct selfscrape_opts){0};
	if (s->o.interval_ms <= 0)
		s->o.interval_ms = SELFSCRAPE_DEFAULT_INTERVAL_MS;
	if (!s->o.max_series)
		s->o.max_series = SELFSCRAPE_DEFAULT_MAX_SERIES;
	s->render = render;
	s->render_ctx = ctx;
	s->direct = (struct metric_sink){.ops = &direct_ops, .openmetrics = false};
	s->nbuckets = 1;
	while (s->nbuckets < s->o.max_series)
		s->nbuckets <<= 1;
	s->bucket = calloc(s->nbuckets, sizeof *s->bucket);
	s->fam = calloc(SELFSCRAPE_MAX_FAMILIES, sizeof *s->fam);
	if (!s->bucket || !s->fam) {
		free(s->bucket);
		free(s->fam);
		free(s);
		return GPULSE_ENOMEM;
	}
	periodic_init(&s->ticker, "gpulse-selfscr", false, scrape, s);
	*out = s;
	return GPULSE_OK;
}

int selfscrape_start(struct selfscrape *s)
{
	return periodic_start(&s->ticker, s->o.interval_ms * NS_PER_MS);
}

void selfscrape_stop(struct selfscrape *s)
{
	if (s)
		periodic_stop(&s->ticker);
}

void selfscrape_destroy(struct selfscrape *s)
{
	if (!s)
		return;
	periodic_destroy(&s->ticker);
	for (size_t i = 0; i < s->nbuckets; i++)
		for (struct sseries *x = s->bucket[i]; x;) {
			struct sseries *next = x->next;
			free(x->key);
			free(x);
			x = next;
		}
	free(s->bucket);
	for (size_t i = 0; i < s->nfam; i++)
		free(s->fam[i].name);
	free(s->fam);
	free(s);
}

void selfscrape_get_stats(struct selfscrape *s, struct selfscrape_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!s)
		return;
	out->scrapes_total = atomic_load(&s->scrapes);
	out->samples_appended_total = atomic_load(&s->appended);
	out->append_errors_total = atomic_load(&s->append_errors);
	out->series_refused_total = atomic_load(&s->refused);
	out->series = atomic_load(&s->nseries_pub);
	out->names_owned = atomic_load(&s->owned);
	out->names_foreign = atomic_load(&s->foreign);
}
