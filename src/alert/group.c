/* Alertmanager-style aggregation groups; see group.h. Groups and their
 * alerts are small arrays searched linearly: a node holds tens of alerts,
 * and the bound (max_alerts) keeps the worst case to milliseconds. */
#include "alert/group.h"

#include <stdlib.h>
#include <string.h>

#include "common/label.h"
#include "common/buf.h"
#include "common/status.h"
#include "common/xalloc.h"

struct group {
	char *key;
	struct label *labels;     /* owned strings */
	size_t nlabels;
	struct alert_item **alerts;     /* owned */
	size_t nalerts, cap;
	int64_t next_flush_mono_ms;     /* monotonic: a wall-clock step moves no check */
	/* The notification log entry: what the last notification listed. */
	bool notified;
	uint64_t *last_firing, *last_resolved; /* sorted */
	size_t nlast_firing, nlast_resolved;
	int64_t last_notify_mono_ms;
};

struct alert_groups {
	char **group_by;
	size_t ngroup_by;
	bool group_by_all;
	int64_t wait_ms, interval_ms, repeat_ms;
	const struct alert_inhibit_rule *inhibit;
	size_t ninhibit;
	size_t max_alerts;
	struct group **groups;
	size_t ngroups, cap;
	size_t nalerts;
	struct alert_groups_stats st;
};

static void free_labels(struct label *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free((void *)(uintptr_t)l[i].name);
		free((void *)(uintptr_t)l[i].value);
	}
	free(l);
}

static void group_free(struct group *gr)
{
	if (!gr)
		return;
	free(gr->key);
	free_labels(gr->labels, gr->nlabels);
	for (size_t i = 0; i < gr->nalerts; i++)
		free(gr->alerts[i]);
	free(gr->alerts);
	free(gr->last_firing);
	free(gr->last_resolved);
	free(gr);
}

static void set_config(struct alert_groups *g, const struct alert_groups_config *c)
{
	for (size_t i = 0; i < g->ngroup_by; i++)
		free(g->group_by[i]);
	free(g->group_by);
	g->group_by = c->ngroup_by ? xcalloc(c->ngroup_by, sizeof *g->group_by) : NULL;
	for (size_t i = 0; i < c->ngroup_by; i++)
		g->group_by[i] = xstrdup(c->group_by[i]);
	g->ngroup_by = c->ngroup_by;
	g->group_by_all = c->group_by_all;
	g->wait_ms = c->group_wait_ms;
	g->interval_ms = c->group_interval_ms > 0 ? c->group_interval_ms : 1;
	g->repeat_ms = c->repeat_interval_ms;
	g->inhibit = c->inhibit;
	g->ninhibit = c->ninhibit;
	g->max_alerts = c->max_alerts ? c->max_alerts : ALERT_GROUPS_MAX_ALERTS;
}

int alert_groups_new(struct alert_groups **out, const struct alert_groups_config *c)
{
	struct alert_groups *g = calloc(1, sizeof *g);
	if (!g)
		return GPULSE_ENOMEM;
	set_config(g, c);
	*out = g;
	return 0;
}

void alert_groups_free(struct alert_groups *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->ngroups; i++)
		group_free(g->groups[i]);
	free(g->groups);
	for (size_t i = 0; i < g->ngroup_by; i++)
		free(g->group_by[i]);
	free(g->group_by);
	free(g);
}

/* The group labels of `it` (sorted, owned copies; absent labels left out,
 * as Alertmanager does) and its key text. */
static void group_of(const struct alert_groups *g, const struct alert_item *it,
		     struct label **labels, size_t *n, struct buf *key)
{
	size_t cap = g->group_by_all ? it->nlabels : g->ngroup_by;
	struct label *l = cap ? xcalloc(cap, sizeof *l) : NULL;
	size_t k = 0;
	if (g->group_by_all) {
		for (size_t i = 0; i < it->nlabels; i++) {
			l[k].name = xstrdup(it->labels[i].name);
			l[k++].value = xstrdup(it->labels[i].value);
		}
	} else {
		for (size_t i = 0; i < g->ngroup_by; i++) {
			const char *v = alert_label_get(it->labels, it->nlabels, g->group_by[i]);
			if (!*v)
				continue;
			bool dup = false;
			for (size_t j = 0; j < k; j++)
				dup |= strcmp(l[j].name, g->group_by[i]) == 0;
			if (dup)
				continue;
			l[k].name = xstrdup(g->group_by[i]);
			l[k++].value = xstrdup(v);
		}
	}
	if (k)
		qsort(l, k, sizeof *l, label_cmp_name);
	buf_puts(key, "{}:{");
	for (size_t i = 0; i < k; i++) {
		buf_printf(key, "%s%s=", i ? ", " : "", l[i].name);
		buf_put_json_string(key, l[i].value);
	}
	buf_putc(key, '}');
	*labels = l;
	*n = k;
}

static struct group *find_group(struct alert_groups *g, const char *key, size_t *idx)
{
	for (size_t i = 0; i < g->ngroups; i++)
		if (strcmp(g->groups[i]->key, key) == 0) {
			if (idx)
				*idx = i;
			return g->groups[i];
		}
	return NULL;
}

static struct alert_item **find_alert(struct alert_groups *g, uint64_t fp, struct group **in)
{
	for (size_t i = 0; i < g->ngroups; i++)
		for (size_t j = 0; j < g->groups[i]->nalerts; j++)
			if (g->groups[i]->alerts[j]->fingerprint == fp) {
				if (in)
					*in = g->groups[i];
				return &g->groups[i]->alerts[j];
			}
	return NULL;
}

static void group_add(struct group *gr, struct alert_item *c)
{
	if (gr->nalerts == gr->cap) {
		gr->cap = gr->cap ? gr->cap * 2 : 4;
		gr->alerts = xrealloc(gr->alerts, gr->cap * sizeof *gr->alerts);
	}
	gr->alerts[gr->nalerts++] = c;
}

/* Put the owned copy `c` into its group, creating the group. */
static void place(struct alert_groups *g, struct alert_item *c, int64_t wall_ms, int64_t mono_ms)
{
	struct label *labels;
	size_t n;
	struct buf key;
	buf_init(&key, 1u << 20);
	group_of(g, c, &labels, &n, &key);
	struct group *gr = find_group(g, key.data ? key.data : "{}:{}", NULL);
	if (gr) {
		free_labels(labels, n);
		buf_free(&key);
	} else {
		gr = xcalloc(1, sizeof *gr);
		gr->key = key.data ? buf_steal(&key) : xstrdup("{}:{}");
		gr->labels = labels;
		gr->nlabels = n;
		/* Alertmanager flushes at once a group whose first alert
		 * started longer than group_wait ago (the alert's start is
		 * a wall time; the check is scheduled on the monotonic
		 * clock). */
		gr->next_flush_mono_ms = c->starts_at_ms > 0 && c->starts_at_ms + g->wait_ms < wall_ms
						 ? mono_ms : mono_ms + g->wait_ms;
		if (g->ngroups == g->cap) {
			g->cap = g->cap ? g->cap * 2 : 8;
			g->groups = xrealloc(g->groups, g->cap * sizeof *g->groups);
		}
		g->groups[g->ngroups++] = gr;
	}
	group_add(gr, c);
}

static bool strlist_equal(char **a, size_t na, const char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

void alert_groups_set_config(struct alert_groups *g, const struct alert_groups_config *c,
			     int64_t wall_ms, int64_t mono_ms)
{
	bool regroup = c->group_by_all != g->group_by_all ||
		       !strlist_equal(g->group_by, g->ngroup_by, c->group_by, c->ngroup_by);
	set_config(g, c);
	if (!regroup)
		return;
	struct group **old = g->groups;
	size_t nold = g->ngroups;
	g->groups = NULL;
	g->ngroups = g->cap = 0;
	for (size_t i = 0; i < nold; i++) {
		for (size_t j = 0; j < old[i]->nalerts; j++) {
			place(g, old[i]->alerts[j], wall_ms, mono_ms);
			old[i]->alerts[j] = NULL;
		}
		old[i]->nalerts = 0;
		group_free(old[i]);
	}
	free(old);
}

int alert_groups_update(struct alert_groups *g, const struct alert_item *it, int64_t wall_ms,
			int64_t mono_ms)
{
	struct group *in = NULL;
	struct alert_item **slot = find_alert(g, it->fingerprint, &in);
	if (slot) {
		/* Alertmanager keeps the first startsAt of an alert it holds. */
		struct alert_item *c = alert_item_dup(it);
		if (!c)
			return GPULSE_ENOMEM;
		if ((*slot)->starts_at_ms > 0 && (*slot)->starts_at_ms < c->starts_at_ms &&
		    !alert_item_is_resolved(*slot, wall_ms))
			c->starts_at_ms = (*slot)->starts_at_ms;
		free(*slot);
		*slot = c;
		return 0;
	}
	if (g->nalerts >= g->max_alerts) {
		g->st.dropped_total++;
		return GPULSE_ELIMIT;
	}
	struct alert_item *c = alert_item_dup(it);
	if (!c)
		return GPULSE_ENOMEM;
	place(g, c, wall_ms, mono_ms);
	g->nalerts++;
	return 0;
}

static bool muted_by_any(const struct alert_groups *g, const struct alert_item *t, int64_t now_ms)
{
	for (size_t r = 0; r < g->ninhibit; r++)
		for (size_t i = 0; i < g->ngroups; i++)
			for (size_t j = 0; j < g->groups[i]->nalerts; j++) {
				const struct alert_item *s = g->groups[i]->alerts[j];
				if (s == t || s->fingerprint == t->fingerprint ||
				    alert_item_is_resolved(s, now_ms))
					continue;
				if (alert_inhibit_rule_mutes(&g->inhibit[r], s->labels, s->nlabels,
							     t->labels, t->nlabels))
					return true;
			}
	return false;
}

bool alert_groups_inhibited(struct alert_groups *g, const struct alert_item *it, int64_t now_ms)
{
	return g->ninhibit && muted_by_any(g, it, now_ms);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every element of a[na] is in the sorted b[nb]. */
static bool subset(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	for (size_t i = 0; i < na; i++)
		if (!bsearch(&a[i], b, nb, sizeof *b, u64_cmp))
			return false;
	return true;
}

/* Alertmanager's DedupStage.needsUpdate, with send_resolved on. */
static bool needs_update(const struct alert_groups *g, const struct group *gr, const uint64_t *f,
			 size_t nf, const uint64_t *r, size_t nr, int64_t mono_ms)
{
	if (!gr->notified)
		return nf > 0;
	if (!subset(f, nf, gr->last_firing, gr->nlast_firing))
		return true;
	if (nf == 0)
		return gr->nlast_firing > 0;
	if (!subset(r, nr, gr->last_resolved, gr->nlast_resolved))
		return true;
	return gr->last_notify_mono_ms + g->repeat_ms <= mono_ms;
}

/* Alerts resolve by wall time (their endsAt); the group's checks and
 * repeat_interval run on the monotonic clock. */
static void flush_group(struct alert_groups *g, struct group *gr, int64_t now_ms, int64_t mono_ms,
			alert_group_notify_fn *fn, void *ctx)
{
	size_t n = gr->nalerts;
	const struct alert_item **list = xcalloc(n ? n : 1, sizeof *list);
	bool *res = xcalloc(n ? n : 1, sizeof *res);
	uint64_t *f = xcalloc(n ? n : 1, sizeof *f), *r = xcalloc(n ? n : 1, sizeof *r);
	size_t nf = 0, nr = 0, k = 0;
	/* Firing first, then resolved, each in arrival order. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			const struct alert_item *a = gr->alerts[i];
			bool is_res = alert_item_is_resolved(a, now_ms);
			if (is_res != (pass == 1))
				continue;
			if (g->ninhibit && muted_by_any(g, a, now_ms)) {
				g->st.inhibited_total++;
				continue;
			}
			list[k] = a;
			res[k++] = is_res;
			if (is_res)
				r[nr++] = a->fingerprint;
			else
				f[nf++] = a->fingerprint;
		}
	qsort(f, nf, sizeof *f, u64_cmp);
	qsort(r, nr, sizeof *r, u64_cmp);
	if (needs_update(g, gr, f, nf, r, nr, mono_ms)) {
		size_t shown = k > ALERT_GROUPS_MAX_PER_NOTIFICATION ? ALERT_GROUPS_MAX_PER_NOTIFICATION : k;
		struct alert_group_notification gn = {
			.group_key = gr->key, .group_labels = gr->labels, .ngroup_labels = gr->nlabels,
			.alerts = list, .resolved = res, .nalerts = shown, .truncated = k - shown,
			.firing = nf > 0,
		};
		fn(ctx, &gn);
		g->st.notifications_total++;
		free(gr->last_firing);
		free(gr->last_resolved);
		gr->last_firing = f;
		gr->nlast_firing = nf;
		gr->last_resolved = r;
		gr->nlast_resolved = nr;
		f = r = NULL;
		gr->notified = true;
		gr->last_notify_mono_ms = mono_ms;
	} else {
		g->st.deduplicated_total++;
	}
	free(f);
	free(r);
	free(list);
	free(res);
	/* Resolved alerts leave the group once a check has seen them. */
	size_t w = 0;
	for (size_t i = 0; i < gr->nalerts; i++) {
		if (alert_item_is_resolved(gr->alerts[i], now_ms)) {
			free(gr->alerts[i]);
			g->nalerts--;
		} else {
			gr->alerts[w++] = gr->alerts[i];
		}
	}
	gr->nalerts = w;
	if (gr->next_flush_mono_ms <= mono_ms)
		gr->next_flush_mono_ms += ((mono_ms - gr->next_flush_mono_ms) / g->interval_ms + 1) *
					  g->interval_ms;
}

int64_t alert_groups_flush(struct alert_groups *g, int64_t wall_ms, int64_t mono_ms,
			   alert_group_notify_fn *fn, void *ctx)
{
	int64_t next = INT64_MAX;
	for (size_t i = 0; i < g->ngroups;) {
		struct group *gr = g->groups[i];
		if (gr->next_flush_mono_ms <= mono_ms)
			flush_group(g, gr, wall_ms, mono_ms, fn, ctx);
		if (gr->nalerts == 0) {
			group_free(gr);
			g->groups[i] = g->groups[--g->ngroups];
			continue;
		}
		if (gr->next_flush_mono_ms < next)
			next = gr->next_flush_mono_ms;
		i++;
	}
	return next;
}

void alert_groups_get_stats(const struct alert_groups *g, struct alert_groups_stats *out)
{
	*out = g->st;
	out->alerts = g->nalerts;
	out->groups = g->ngroups;
}
