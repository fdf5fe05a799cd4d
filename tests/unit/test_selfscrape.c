/* The store's scrape of /metrics (src/daemon/selfscrape.c) against a real
 * store, every family through the metric sink: a name no other writer
 * declares is taken on its first scrape and its series come back with
 * their labels (empty and absent values dropped), histograms as
 * _bucket/_sum/_count; a name another writer declares is left alone, and
 * so are the bench results benchd stores (benchd_store_metrics) before
 * the store holds any; a store reopened after a restart, holding every
 * name the last run stored, changes nothing (the names are taken again at
 * once); a failed render ends no series; a series gone gets one
 * staleness marker and is forgotten after SELFSCRAPE_FORGET_SCRAPES;
 * max_series holds. With gpulsed's own renderer (prom_emit), the series
 * the store holds after some scrapes, and again after a restart on the
 * same store, are exactly those /metrics shows that no other writer
 * declares, and every family /metrics shows but the fields' is declared
 * in the registry. The clock is injected: samples are stamped relative
 * to a fixed T0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alert/notify.h"
#include "collect/bus.h"
#include "anomaly/anomaly.h"
#include "attrib/owner.h"
#include "collect/collector.h"
#include "collect/fields.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/status.h"
#include "daemon/benchd.h"
#include "daemon/selfscrape.h"
#include "export/expfmt.h"
#include "export/families.h"
#include "export/prom.h"
#include "export/selfstats.h"
#include "nvml/nvml_shim.h"
#include "store/ingest.h"
#include "store/tsdb.h"

#define T0 1795965289000LL

static char dir[64];
static char path[128];

static int64_t test_now(void *ctx)
{
	(void)ctx;
	return T0 + 3600 * 1000;
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/gpulse-scrapeXXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/store.db", dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static struct tsdb *open_db(void)
{
	struct tsdb_opts o = {.path = path, .clock.now_ms = test_now};
	struct tsdb *db = NULL;
	char err[256] = "";
	if (tsdb_open(&db, &o, err, sizeof err))
		fail_msg("tsdb_open: %s", err);
	return db;
}

/* Samples of the series matching name (and k=v when k) in [T0, T0+1h]:
 * how many series, and the values of the first, in *vals. */
static size_t samples(struct tsdb *db, const char *name, const char *k, const char *v,
		      double *vals, size_t max, size_t *nseries, char *labels, size_t lcap)
{
	struct tsdb_matcher m[2] = {{TSDB_MATCH_EQ, "__name__", name}, {TSDB_MATCH_EQ, k, v}};
	struct tsdb_select_opts so = {.mint = T0 - 1000, .maxt = T0 + 3600 * 1000,
				      .mode = TSDB_READ_RAW};
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, m, k ? 2 : 1, &so, &it, err, sizeof err), 0);
	size_t n = 0;
	*nseries = 0;
	while (tsdb_iter_next_series(it) == 1) {
		if ((*nseries)++ == 0) {
			size_t nl;
			const struct label *l = tsdb_iter_labels(it, &nl);
			size_t w = 0;
			for (size_t i = 0; i < nl && labels; i++)
				w += (size_t)snprintf(labels + w, lcap - w, "%s%s=%s", i ? "," : "",
						      l[i].name, l[i].value);
			int64_t t;
			double x;
			while (tsdb_iter_next_sample(it, &t, &x) == 1)
				if (n < max)
					vals[n++] = x;
		}
	}
	tsdb_iter_free(it);
	return n;
}

/* The families of the scrapes below, as a module declares its own. */
#define L0 ((const char *const[]){NULL})
static const struct metric_family t_info = {
	"gpulse_gpu_info", METRIC_KIND_INFO, "Identity.",
	(const char *const[]){"gpu", "model", "driver", "source", "serial", NULL}};
static const struct metric_family t_gpus = {"gpulse_gpus", METRIC_KIND_GAUGE, "GPUs.", L0};
static const struct metric_family t_lat = {"gpulse_lat_seconds", METRIC_KIND_HISTOGRAM,
					   "Latency.", L0};
static const struct metric_family t_power = {"gpulse_gpu_power_watts", METRIC_KIND_GAUGE,
					     "Power.", (const char *const[]){"gpu", NULL}};
static const struct metric_family t_proc = {"gpulse_proc", METRIC_KIND_GAUGE, "A process.",
					    (const char *const[]){"pid", NULL}};

/* Which scrape render_scrape gives: 1 every family above, 2 gpulse_gpus
 * alone; 0 fails (the render's error). */
struct scrape_ctx {
	int which;
};

static int render_scrape(void *ctx, struct metric_sink *s)
{
	struct scrape_ctx *c = ctx;
	if (c->which == 0)
		return GPULSE_ENOMEM;
	if (c->which == 2) {
		metric_u64(s, &t_gpus, NULL, 3);
		return 0;
	}
	/* An empty value and a NULL one: no label in the store. */
	metric_u64(s, &t_info,
		   (const char *const[]){"0", "NVIDIA \"H200\"", "", "a\\b\nc", NULL}, 1);
	metric_u64(s, &t_gpus, NULL, 2);
	s->ops->u64(s, &t_lat, "_bucket", (const char *const[]){"0.1"}, 3);
	s->ops->u64(s, &t_lat, "_bucket", (const char *const[]){"+Inf"}, 5);
	s->ops->f64(s, &t_lat, "_sum", NULL, 1.5);
	s->ops->u64(s, &t_lat, "_count", NULL, 5);
	metric_u64(s, &t_power, (const char *const[]){"0"}, 100);
	metric_u64(s, &t_proc, (const char *const[]){"1"}, 7);
	return 0;
}

static const char *const power_writer[] = {"gpulse_gpu_power_watts", NULL};

static void test_owned_and_foreign(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	/* Another writer stores gpulse_gpu_power_watts already, and says so. */
	struct label pl[2] = {{"__name__", "gpulse_gpu_power_watts"}, {"gpu", "0"}};
	uint32_t pref;
	char err[256];
	assert_int_equal(tsdb_series(db, pl, 2, &pref, err, sizeof err), 0);
	assert_int_equal(tsdb_append(db, pref, T0, 99), 0);

	struct selfscrape *s;
	struct selfscrape_opts o = {.foreign_names = power_writer};
	struct scrape_ctx c = {1};
	assert_int_equal(selfscrape_create(&s, db, &o, render_scrape, &c), 0);
	/* The first scrape stores already: no name waits on the store. */
	selfscrape_scrape_at(s, T0 + 2000);
	double v[16];
	size_t ns;
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 1);
	assert_int_equal(ns, 1);
	for (int i = 3; i <= 4; i++)
		selfscrape_scrape_at(s, T0 + i * 1000);
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_int_equal(ns, 1);
	assert_true(v[0] == 2 && v[2] == 2);
	/* Labels: the values as given, the empty and the absent dropped. */
	char labels[512];
	assert_int_equal(samples(db, "gpulse_gpu_info", NULL, NULL, v, 16, &ns, labels, sizeof labels), 3);
	assert_string_equal(labels, "__name__=gpulse_gpu_info,gpu=0,model=NVIDIA \"H200\",source=a\\b\nc");
	/* A histogram, as its three sample names. */
	assert_int_equal(samples(db, "gpulse_lat_seconds_bucket", "le", "+Inf", v, 16, &ns, NULL, 0), 3);
	assert_true(v[0] == 5);
	assert_int_equal(samples(db, "gpulse_lat_seconds_bucket", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_int_equal(ns, 2);
	assert_int_equal(samples(db, "gpulse_lat_seconds_sum", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_true(v[0] == 1.5);
	assert_int_equal(samples(db, "gpulse_lat_seconds_count", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	/* The foreign name: only its own writer's sample. */
	assert_int_equal(samples(db, "gpulse_gpu_power_watts", NULL, NULL, v, 16, &ns, NULL, 0), 1);
	assert_true(v[0] == 99);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.scrapes_total, 3);
	assert_int_equal(st.names_foreign, 1);
	assert_int_equal(st.names_owned, 6); /* info, gpus, _bucket, _sum, _count, proc */
	assert_int_equal(st.series, 7);

	/* A failed render ends nothing and counts the scrape. */
	c.which = 0;
	selfscrape_scrape_at(s, T0 + 4500);
	assert_int_equal(samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0), 3);
	assert_false(isnan(v[2]));
	/* gpulse_proc{pid="1"} goes away: one staleness marker, then nothing;
	 * after SELFSCRAPE_FORGET_SCRAPES it is forgotten. */
	c.which = 2;
	selfscrape_scrape_at(s, T0 + 5000);
	selfscrape_scrape_at(s, T0 + 6000);
	size_t n = samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0);
	assert_int_equal(n, 4);
	assert_true(isnan(v[3]) && v[2] == 7);
	for (int i = 0; i < SELFSCRAPE_FORGET_SCRAPES; i++)
		selfscrape_scrape_at(s, T0 + 7000 + i * 1000);
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.series, 1);
	assert_int_equal(samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* A restart (issue: every systemd restart stored nothing of /metrics):
 * the store reopened holds every name the last run's scraper stored; the
 * new scraper takes them again from its first scrape, and still leaves
 * the declared name alone. */
static void test_reopened_store(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	struct selfscrape_opts o = {.foreign_names = power_writer};
	struct selfscrape *s;
	struct scrape_ctx c = {1};
	assert_int_equal(selfscrape_create(&s, db, &o, render_scrape, &c), 0);
	for (int i = 1; i <= 3; i++)
		selfscrape_scrape_at(s, T0 + i * 1000);
	selfscrape_destroy(s);
	tsdb_close(db);

	db = open_db();
	assert_int_equal(selfscrape_create(&s, db, &o, render_scrape, &c), 0);
	selfscrape_scrape_at(s, T0 + 10000);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.names_owned, 6); /* info, gpus, _bucket, _sum, _count, proc */
	assert_int_equal(st.names_foreign, 1);
	assert_int_equal(st.series, 7);
	assert_int_equal(st.samples_appended_total, 7);
	double v[16];
	size_t ns;
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	assert_int_equal(samples(db, "gpulse_lat_seconds_count", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	assert_int_equal(samples(db, "gpulse_gpu_power_watts", NULL, NULL, v, 16, &ns, NULL, 0), 0);
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* A name declared another writer's (the ingest's per-process series) is
 * never taken, though the store holds none of it yet. */
static void test_declared_foreign(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	static const char *const foreign[] = {"gpulse_proc", NULL};
	struct selfscrape_opts o = {.foreign_names = foreign};
	struct selfscrape *s;
	struct scrape_ctx c = {1};
	assert_int_equal(selfscrape_create(&s, db, &o, render_scrape, &c), 0);
	for (int i = 1; i <= 4; i++)
		selfscrape_scrape_at(s, T0 + i * 1000);
	double v[16];
	size_t ns;
	assert_int_equal(samples(db, "gpulse_proc", NULL, NULL, v, 16, &ns, NULL, 0), 0);
	assert_int_equal(ns, 0);
	assert_int_equal(samples(db, "gpulse_gpus", NULL, NULL, v, 16, &ns, NULL, 0), 4);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.names_foreign, 1);
	assert_int_equal(st.names_owned, 6); /* info, gpus, _bucket, _sum, _count, power */
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* The bench results (benchd_store_metrics, which benchd writes into the
 * store at each run) are never taken from /metrics, though the store
 * holds none of them yet (opened after a run), while benchd's counters,
 * stored by no one else, are. The list is the daemon's: daemon.c hands
 * it to the scraper with the ingest's. */
/* benchd's families as it emits them: each result, and its run counter. */
static int render_bench(void *ctx, struct metric_sink *s)
{
	const struct metric_family *res = ctx;
	for (; res->name; res++)
		metric_f64(s, res, (const char *const[]){"0", "GPU-a", "matmul"}, 1.5);
	static const char *const runs_labels[] = {"gpu", "outcome", NULL};
	static const struct metric_family runs = {"gpulse_bench_runs_total", METRIC_KIND_COUNTER,
						  "Runs.", runs_labels};
	metric_u64(s, &runs, (const char *const[]){"0", "kept"}, 1);
	return 0;
}

static void test_bench_results_left_to_benchd(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	struct selfscrape_opts o = {.foreign_names = benchd_store_metrics};
	size_t nres = 0;
	while (benchd_store_metrics[nres])
		nres++;
	assert_true(nres >= 10);
	struct metric_family *res = calloc(nres + 1, sizeof *res);
	assert_non_null(res);
	for (size_t i = 0; i < nres; i++)
		res[i] = (struct metric_family){benchd_store_metrics[i], METRIC_KIND_GAUGE, "A result.",
						(const char *const[]){"gpu", "uuid", "figure", NULL}};
	struct selfscrape *s;
	assert_int_equal(selfscrape_create(&s, db, &o, render_bench, res), 0);
	for (int i = 1; i <= 5; i++)
		selfscrape_scrape_at(s, T0 + i * 1000);
	double v[16];
	size_t ns;
	for (const char *const *n = benchd_store_metrics; *n; n++) {
		if (samples(db, *n, NULL, NULL, v, 16, &ns, NULL, 0) != 0 || ns != 0)
			fail_msg("%s was taken from /metrics", *n);
	}
	assert_int_equal(samples(db, "gpulse_bench_runs_total", NULL, NULL, v, 16, &ns, NULL, 0), 5);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.names_foreign, nres);
	assert_int_equal(st.names_owned, 1);
	free(res);
	selfscrape_destroy(s);
	tsdb_close(db);
}

/* More series than max_series: the rest are refused and counted. */
static int render_twelve(void *ctx, struct metric_sink *s)
{
	(void)ctx;
	for (int i = 0; i < 12; i++) {
		char pid[16];
		snprintf(pid, sizeof pid, "%d", i);
		metric_u64(s, &t_proc, (const char *const[]){pid}, (uint64_t)i);
	}
	return 0;
}

static void test_bound(void **state)
{
	(void)state;
	struct tsdb *db = open_db();
	struct selfscrape *s;
	struct selfscrape_opts o = {.max_series = 5};
	assert_int_equal(selfscrape_create(&s, db, &o, render_twelve, NULL), 0);
	for (int k = 0; k < 3; k++)
		selfscrape_scrape_at(s, T0 + k * 1000);
	struct selfscrape_stats st;
	selfscrape_get_stats(s, &st);
	assert_int_equal(st.series, 5);
	assert_int_equal(st.series_refused_total, 3 * 7);
	selfscrape_destroy(s);
	tsdb_close(db);
	selfscrape_destroy(NULL);
}

/* ---- the real renderer: the store holds what /metrics shows ---------- */

struct world {
	struct bus *bus;
	struct nvml_lib *nv;
	struct collector_stats cs;
	struct self_stats self;
	int renders;
};

static void storage_stats(void *ctx, struct storage_self_stats *out)
{
	(void)ctx;
	memset(out, 0, sizeof *out);
	out->open = out->available = true;
	out->series = 42;
	out->samples_appended_total = 1u << 20;
}

static size_t rule_stats(void *ctx, struct rule_group_self_stats *out, size_t max)
{
	(void)ctx;
	(void)max;
	snprintf(out[0].name, sizeof out[0].name, "/etc/r.yml;gpu \"hot\"\nx");
	out[0].evaluations_total = 5;
	return 1;
}

static void notify_stats(void *ctx, struct notify_stats *out)
{
	(void)ctx;
	memset(out, 0, sizeof *out);
	out->nreceivers = 1;
	out->receivers[0].kind = NOTIFY_WEBHOOK;
	snprintf(out->receivers[0].target, sizeof out->receivers[0].target, "http://hook/");
	out->receivers[0].latency_bucket[2] = 1;
	out->receivers[0].latency_count = 1;
}

static void world_init(struct world *w)
{
	memset(w, 0, sizeof *w);
	assert_int_equal(bus_create(&w->bus), 0);
	for (int g = 0; g < 2; g++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = g;
		snprintf(id.uuid, sizeof id.uuid, "GPU-scrape-%d", g);
		snprintf(id.name, sizeof id.name, "NVIDIA \"H200\"");
		int slot;
		assert_int_equal(bus_attach_gpu(w->bus, &id, &slot), 0);
		static struct gpu_update u;
		for (int t = 0; t < TIER_COUNT; t++) {
			memset(&u, 0, sizeof u);
			u.gpu = slot;
			u.tier = (enum tier)t;
			u.wall_ns = clock_wall_ns();
			u.mask = fields_of_tier((enum tier)t);
			for (int f = 0; f < FIELD_COUNT; f++)
				if (u.mask & FIELD_BIT(f)) {
					u.v[f] = 0.5 * f + g;
					u.valid |= FIELD_BIT(f);
				}
			if (t == TIER_NORMAL) {
				u.has_procs = true;
				u.nprocs = 1;
				u.procs[0].pid = 4000 + (uint32_t)g;
				snprintf(u.procs[0].comm, sizeof u.procs[0].comm, "python3");
				u.procs[0].mem_valid = true;
				u.procs[0].used_bytes = 1ULL << 30;
			}
			bus_publish(w->bus, &u);
		}
	}
	pthread_mutex_init(&w->self.mode_lock, NULL);
	/* An empty detail: written detail="" on /metrics, no label in the
	 * store, on both paths. */
	self_stats_set_mode(&w->self, MODE_REPLAY, "", 1.0);
	w->self.start_wall_ns = (T0 - 60000) * 1000000;
	atomic_store(&w->self.http_denied_total[1], 3);
	atomic_store(&w->self.last_reload_wall_ns, (T0 - 1000) * 1000000);
	w->self.storage_stats = storage_stats;
	w->self.rule_stats = rule_stats;
	w->self.notify_stats = notify_stats;
	w->nv = calloc(1, sizeof *w->nv);
	assert_non_null(w->nv);
	for (int f = 0; f < NVML_FN_COUNT; f += 3) {
		atomic_store(&w->nv->stats[f].calls, 10 + (uint64_t)f);
		atomic_store(&w->nv->stats[f].bucket[2], 4);
		atomic_store(&w->nv->stats[f].latency_ns_sum, 1000 + (uint64_t)f);
		atomic_store(&w->nv->stats[f].errors[NVML_ABI_ERROR_NOT_SUPPORTED], 1);
	}
	w->cs.lanes_alive = 2;
	w->cs.sweeps[TIER_FAST] = 77;
}

static void world_free(struct world *w)
{
	bus_destroy(w->bus);
	free(w->nv);
	pthread_mutex_destroy(&w->self.mode_lock);
}

/* The selfscrape's render: prom.c's families to the store's sink. */
static int world_render(void *ctx, struct metric_sink *sink)
{
	struct world *w = ctx;
	w->renders++;
	assert_non_null(sink);
	return prom_emit(sink, w->bus, w->nv, &w->cs, &w->self);
}

/* Label sets as sorted "k=v" joined by '\x1f'; a set of them, sorted. */
struct keyset {
	char **k;
	size_t n, cap;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void keyset_add(struct keyset *ks, char **pairs, size_t n)
{
	qsort(pairs, n, sizeof *pairs, cmp_str);
	char key[4096];
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		w += (size_t)snprintf(key + w, sizeof key - w, "%s%s", i ? "\x1f" : "", pairs[i]);
	assert_true(w < sizeof key);
	if (ks->n == ks->cap) {
		ks->cap = ks->cap ? 2 * ks->cap : 256;
		ks->k = realloc(ks->k, ks->cap * sizeof *ks->k);
		assert_non_null(ks->k);
	}
	ks->k[ks->n++] = strdup(key);
}

static void keyset_free(struct keyset *ks)
{
	for (size_t i = 0; i < ks->n; i++)
		free(ks->k[i]);
	free(ks->k);
}

struct pairs {
	char *p[40];
	size_t n;
};

static int collect_label(void *ctx, const char *name, const char *value)
{
	struct pairs *pp = ctx;
	if (pp->n == 40)
		return GPULSE_ELIMIT;
	if (asprintf(&pp->p[pp->n], "%s=%s", name, value) < 0)
		return GPULSE_ENOMEM;
	pp->n++;
	return 0;
}

static bool declared(const char *const *names, const char *name, size_t len)
{
	for (; *names; names++)
		if (strlen(*names) == len && memcmp(*names, name, len) == 0)
			return true;
	return false;
}

/* The series /metrics shows now (the whole text, as prom_render writes
 * it for a scrape), less the names other writers declare. */
static void metrics_series(struct world *w, const char *const *foreign, struct keyset *ks)
{
	struct buf b;
	buf_init(&b, 16u << 20);
	assert_int_equal(prom_render(&b, w->bus, w->nv, &w->cs, &w->self, false), 0);
	const char *p = b.data, *end = b.data + b.len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		struct expfmt_sample smp;
		if (expfmt_line(p, le, &smp) == EXPFMT_SAMPLE && !declared(foreign, p, smp.namelen)) {
			char scratch[4096];
			struct pairs pp = {.n = 0};
			assert_int_equal(expfmt_labels(p, smp.keylen, smp.namelen, scratch, sizeof scratch,
						       collect_label, &pp), 0);
			keyset_add(ks, pp.p, pp.n);
			for (size_t i = 0; i < pp.n; i++)
				free(pp.p[i]);
		}
		p = nl ? nl + 1 : end;
	}
	buf_free(&b);
}

/* Every series in the store; *fresh gets how many have exactly `want`
 * samples at or after since_ms. */
static void store_series(struct tsdb *db, struct keyset *ks, int64_t since_ms, size_t want,
			 size_t *fresh)
{
	struct tsdb_matcher m = {TSDB_MATCH_RE, "__name__", ".+"};
	struct tsdb_select_opts so = {.mint = T0 - 1000, .maxt = T0 + 3600 * 1000,
				      .mode = TSDB_READ_RAW};
	struct tsdb_iter *it;
	char err[256];
	assert_int_equal(tsdb_select(db, &m, 1, &so, &it, err, sizeof err), 0);
	*fresh = 0;
	while (tsdb_iter_next_series(it) == 1) {
		size_t nl;
		const struct label *l = tsdb_iter_labels(it, &nl);
		struct pairs pp = {.n = 0};
		for (size_t i = 0; i < nl; i++)
			assert_int_equal(collect_label(&pp, l[i].name, l[i].value), 0);
		keyset_add(ks, pp.p, pp.n);
		for (size_t i = 0; i < pp.n; i++)
			free(pp.p[i]);
		int64_t t;
		double x;
		size_t n = 0;
		while (tsdb_iter_next_sample(it, &t, &x) == 1)
			n += t >= since_ms;
		*fresh += n == want;
	}
	tsdb_iter_free(it);
}

static void assert_same_series(struct keyset *a, struct keyset *b)
{
	qsort(a->k, a->n, sizeof *a->k, cmp_str);
	qsort(b->k, b->n, sizeof *b->k, cmp_str);
	for (size_t i = 0; i < a->n || i < b->n; i++) {
		if (i >= a->n || i >= b->n || strcmp(a->k[i], b->k[i]) != 0)
			fail_msg("store and /metrics differ at %zu: store %s, /metrics %s", i,
				 i < a->n ? a->k[i] : "(end)", i < b->n ? b->k[i] : "(end)");
	}
}

static bool keyset_has(const struct keyset *ks, const char *key)
{
	for (size_t i = 0; i < ks->n; i++)
		if (strcmp(ks->k[i], key) == 0)
			return true;
	return false;
}

static void test_store_holds_metrics(void **state)
{
	(void)state;
	static struct world w;
	world_init(&w);
	const char *foreign[INGEST_METRIC_NAMES_MAX + 1];
	size_t nf;
	assert_int_equal(ingest_metric_names(foreign, INGEST_METRIC_NAMES_MAX, &nf), 0);
	foreign[nf] = NULL;
	struct selfscrape_opts o = {.foreign_names = foreign};

	for (int run = 0; run < 2; run++) {
		/* The second run is a restart on the store the first left. */
		int64_t t = T0 + run * 10000;
		struct tsdb *db = open_db();
		struct selfscrape *s;
		assert_int_equal(selfscrape_create(&s, db, &o, world_render, &w), 0);
		for (int k = 0; k < 3; k++)
			selfscrape_scrape_at(s, t + k * 1000);
		struct keyset want = {0}, got = {0};
		metrics_series(&w, foreign, &want);
		size_t fresh;
		store_series(db, &got, t, 3, &fresh);
		assert_same_series(&got, &want);
		/* Every series took this run's three scrapes. */
		assert_int_equal(fresh, want.n);
		/* Not a vacuous comparison: families of both paths are there. */
		assert_true(want.n > 100);
		assert_true(keyset_has(&want, "__name__=gpulse_mode_info\x1fmode=replay"));
		assert_true(keyset_has(&want, "__name__=gpulse_nvml_call_duration_seconds_bucket\x1f"
					      "call=nvmlInit_v2\x1fle=+Inf"));
		assert_true(keyset_has(&want, "__name__=gpulse_collector_sweeps_total\x1ftier=fast"));
		assert_true(keyset_has(&want, "__name__=gpulse_rule_evaluations_total\x1f"
					      "rule_group=/etc/r.yml;gpu \"hot\"\nx"));
		assert_true(keyset_has(&want, "__name__=gpulse_notifications_latency_seconds_bucket\x1f"
					      "le=+Inf\x1freceiver=http://hook/\x1ftype=webhook"));
		struct selfscrape_stats st;
		selfscrape_get_stats(s, &st);
		assert_int_equal(st.series, want.n);
		assert_int_equal(st.samples_appended_total, 3 * want.n);
		keyset_free(&want);
		keyset_free(&got);
		selfscrape_destroy(s);
		tsdb_close(db);
	}
	assert_int_equal(w.renders, 6);
	world_free(&w);
}

/* The registry is the declaration of what /metrics shows: every family of
 * the whole text (text format) but the fields' (collect/fields.h, their
 * own table) is declared in export/families.h with the same type and
 * help, and each sample carries a subsequence of the declared labels, in
 * their order (a histogram's _bucket with le after them). */
struct declared_label_check {
	const struct metric_family *f;
	size_t next; /* the next declared label a sample's may be */
	bool ok;
};

static int check_label(void *ctx, const char *name, const char *value)
{
	(void)value;
	struct declared_label_check *c = ctx;
	if (strcmp(name, "__name__") == 0)
		return 0;
	size_t n = metric_family_nlabels(c->f);
	while (c->next < n && strcmp(c->f->labels[c->next], name) != 0)
		c->next++;
	if (c->next < n) {
		c->next++;
		return 0;
	}
	if (strcmp(name, "le") != 0)
		c->ok = false;
	return 0;
}

static const struct metric_family *registry_family(const char *name, size_t len)
{
	for (size_t i = 0; i < MF_COUNT; i++)
		if (strlen(metric_families[i].name) == len &&
		    memcmp(metric_families[i].name, name, len) == 0)
			return &metric_families[i];
	return NULL;
}

static bool field_family(const char *name, size_t len)
{
	for (int f = 0; f < FIELD_COUNT; f++)
		if (field_table[f].metric && strlen(field_table[f].metric) == len &&
		    memcmp(field_table[f].metric, name, len) == 0)
			return true;
	return false;
}

static void test_registry_declares_metrics(void **state)
{
	(void)state;
	static struct world w;
	world_init(&w);
	/* What the world lacks, for more families: MIG, owners on every
	 * label, peers, XIDs, a diagnosis, a health score. */
	struct gpu_update *u = calloc(1, sizeof *u);
	assert_non_null(u);
	u->gpu = 0;
	u->tier = TIER_NORMAL;
	u->wall_ns = (T0 - 500) * 1000000;
	u->has_procs = true;
	u->nprocs = 1;
	u->procs[0].pid = 77;
	u->procs[0].mem_valid = u->procs[0].util_valid = true;
	u->procs[0].in_mig = true;
	u->procs[0].owner.resolved = true;
	u->procs[0].owner.labels = (1u << OWNER_FIELD_COUNT) - 1;
	snprintf(u->procs[0].owner.pod, sizeof u->procs[0].owner.pod, "p");
	snprintf(u->procs[0].owner.user, sizeof u->procs[0].owner.user, "u");
	u->has_mig = true;
	u->nmig = 1;
	snprintf(u->mig[0].uuid, sizeof u->mig[0].uuid, "MIG-x");
	u->mig[0].mem_valid = true;
	u->mig[0].gpm_valid = 0xf;
	bus_publish(w.bus, u);
	free(u);
	struct gpu_peer peer = {1, 10, 2};
	bus_set_peers(w.bus, 0, &peer, 1);
	bus_note_xid(w.bus, 0, 79, (T0 - 100) * 1000000);
	bus_set_diagnosis(w.bus, 0, 1, 1, (double)T0 / 1000);
	struct gpu_health_score hs = {.valid = true, .score = 90, .top_reason = -1};
	bus_set_health_score(w.bus, 0, &hs);

	/* The registry's own labels are the ones its code writes. */
	for (int f = 0; f < OWNER_FIELD_COUNT; f++)
		assert_string_equal(metric_families[MF_PROC_INFO].labels[MF_GPU_BASE_LABELS + 1 + f],
				    owner_field_name((enum owner_field)f));
	assert_string_equal(metric_families[MF_ANOMALY_SCORE].name, ANOMALY_METRIC);

	struct buf b;
	buf_init(&b, 16u << 20);
	assert_int_equal(prom_render(&b, w.bus, w.nv, &w.cs, &w.self, false), 0);
	static const char *const types[] = {"gauge", "counter", "histogram", "gauge"};
	const struct metric_family *cur = NULL;
	size_t families = 0, samples = 0, per_gpu = 0;
	const char *p = b.data, *end = b.data + b.len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (strncmp(p, "# HELP ", 7) == 0) {
			const char *name = p + 7, *sp = memchr(name, ' ', (size_t)(le - name));
			assert_non_null(sp);
			cur = registry_family(name, (size_t)(sp - name));
			if (!cur) {
				if (!field_family(name, (size_t)(sp - name)))
					fail_msg("%.*s is on /metrics and not in the registry",
						 (int)(sp - name), name);
			} else {
				families++;
				if (strlen(cur->help) != (size_t)(le - sp - 1) ||
				    memcmp(cur->help, sp + 1, (size_t)(le - sp - 1)) != 0)
					fail_msg("%s: help differs from the registry's", cur->name);
			}
		} else if (strncmp(p, "# TYPE ", 7) == 0 && cur) {
			const char *t = p + 7 + strlen(cur->name) + 1;
			assert_true(t < le);
			if (strlen(types[cur->kind]) != (size_t)(le - t) ||
			    memcmp(types[cur->kind], t, (size_t)(le - t)) != 0)
				fail_msg("%s: TYPE differs from the registry's", cur->name);
		} else if (cur) {
			struct expfmt_sample smp;
			assert_int_equal(expfmt_line(p, le, &smp), EXPFMT_SAMPLE);
			assert_true(strncmp(p, cur->name, strlen(cur->name)) == 0);
			char scratch[4096];
			struct declared_label_check c = {cur, 0, true};
			assert_int_equal(expfmt_labels(p, smp.keylen, smp.namelen, scratch, sizeof scratch,
						       check_label, &c), 0);
			if (!c.ok)
				fail_msg("%.*s: labels not declared, or not in the declared order",
					 (int)smp.keylen, p);
			samples++;
			per_gpu += strncmp(p + smp.namelen, "{gpu=", 5) == 0;
		}
		p = nl ? nl + 1 : end;
	}
	/* Not vacuous: the per-GPU families and the daemon's are there. */
	assert_true(families > 80);
	assert_true(per_gpu > 50);
	assert_true(strstr(b.data, "\ngpulse_mig_info{"));
	assert_true(strstr(b.data, "\ngpulse_process_info{"));
	assert_true(strstr(b.data, "\ngpulse_gpu_topology_info{"));
	assert_true(samples > per_gpu);
	buf_free(&b);
	world_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_owned_and_foreign, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reopened_store, setup, teardown),
		cmocka_unit_test_setup_teardown(test_declared_foreign, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bench_results_left_to_benchd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_holds_metrics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_declares_metrics, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
