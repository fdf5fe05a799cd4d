/* Bus -> tsdb; see ingest.h. References are created lazily, under a
 * per-GPU mutex taken only on that slow path; the fast path is an atomic
 * load of the reference and one tsdb_append per valid field. */
#include "store/ingest.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/periodic.h"
#include "common/stale.h"
#include "common/status.h"
#include "common/utf8.h"
#include "attrib/owner.h"

#define SLOT_UP FIELD_COUNT       /* gpulse_gpu_up */
#define NSLOTS (FIELD_COUNT + 1)
#define EXTRA_LABELS_MAX 4        /* extra label pairs of one field */
#define EXTRA_TEXT_MAX 128

struct gpu_refs {
	pthread_mutex_t lock;             /* creating references only */
	bool have_id;
	char gpu[16];
	char uuid[96];
	char model[96];
	const char *source;               /* gpu_source_label: static, or NULL */
	atomic_uint_least32_t ref[NSLOTS]; /* ref + 1; 0: not created yet */
	atomic_uint_least32_t failed[NSLOTS]; /* the store refused this series */
	atomic_uint_fast64_t was_valid;   /* fields that held a value last time */
};

struct ingest {
	struct tsdb *db;
	struct bus *bus;
	struct periodic ticker;      /* ingest_tick, every tick_ns from a tick after the start */
	atomic_uint_fast64_t updates, appended, stale, append_errors, series_errors;
	struct gpu_refs gpu[GPU_MAX];
};

static periodic_fn tick;

int ingest_create(struct ingest **out, struct tsdb *db, struct bus *bus)
{
	struct ingest *ing = calloc(1, sizeof *ing);
	if (!ing)
		return GPULSE_ENOMEM;
	ing->db = db;
	ing->bus = bus;
	periodic_init(&ing->ticker, "gpulse-ingest", true, tick, ing);
	for (int g = 0; g < GPU_MAX; g++)
		pthread_mutex_init(&ing->gpu[g].lock, NULL);
	*out = ing;
	return GPULSE_OK;
}

int ingest_subscribe(struct ingest *ing)
{
	return bus_subscribe(ing->bus, ingest_on_update, ing);
}

void ingest_destroy(struct ingest *ing)
{
	if (!ing)
		return;
	periodic_destroy(&ing->ticker);
	for (int g = 0; g < GPU_MAX; g++)
		pthread_mutex_destroy(&ing->gpu[g].lock);
	free(ing);
}

void ingest_get_stats(const struct ingest *ing, struct ingest_stats *out)
{
	struct ingest *m = (struct ingest *)(uintptr_t)ing; /* atomics are read-only here */
	out->updates_total = atomic_load(&m->updates);
	out->samples_appended_total = atomic_load(&m->appended);
	out->stale_markers_total = atomic_load(&m->stale);
	out->append_errors_total = atomic_load(&m->append_errors);
	out->series_errors_total = atomic_load(&m->series_errors);
}

/* Split fields.h's extra labels ("type=\"corrected\"", pairs joined by
 * commas, values without escapes) into `labels`, names and values written
 * into `text`. Returns the number of pairs. */
static size_t parse_extra(const char *s, struct label *labels, size_t max, char *text,
			  size_t textlen)
{
	size_t n = 0, o = 0;
	while (*s && n < max) {
		const char *eq = strchr(s, '=');
		if (!eq || eq[1] != '"')
			break;
		const char *end = strchr(eq + 2, '"');
		if (!end)
			break;
		size_t nl = (size_t)(eq - s), vl = (size_t)(end - (eq + 2));
		if (o + nl + vl + 2 > textlen)
			break;
		memcpy(text + o, s, nl);
		text[o + nl] = '\0';
		labels[n].name = text + o;
		o += nl + 1;
		memcpy(text + o, eq + 2, vl);
		text[o + vl] = '\0';
		labels[n].value = text + o;
		o += vl + 1;
		n++;
		s = end + 1;
		if (*s == ',')
			s++;
	}
	return n;
}

static const char *slot_metric(int slot)
{
	if (slot == SLOT_UP)
		return INGEST_UP_METRIC;
	if (slot == F_CLOCK_REASONS)
		return INGEST_CLOCK_REASONS_METRIC;
	return field_table[slot].metric;
}

size_t ingest_gpu_labels(struct label *l, const char *name, const char *gpu,
			 const char *uuid, const char *model, const char *source, const char *lname,
			 const char *lvalue)
{
	size_t n = 0;
	l[n++] = (struct label){"__name__", name};
	l[n++] = (struct label){"gpu", gpu};
	if (uuid && uuid[0])
		l[n++] = (struct label){"uuid", uuid};
	if (model && model[0])
		l[n++] = (struct label){"model", model};
	if (source)
		l[n++] = (struct label){"source", source};
	if (lname)
		l[n++] = (struct label){lname, lvalue};
	return n;
}

/* The slow path: read the GPU's identity once, then create the series. */
static int create_ref(struct ingest *ing, int g, int slot, uint32_t *ref)
{
	struct gpu_refs *gr = &ing->gpu[g];
	int rc = GPULSE_OK;
	pthread_mutex_lock(&gr->lock);
	uint32_t have = atomic_load(&gr->ref[slot]);
	if (have) {
		*ref = have - 1;
		goto out;
	}
	if (atomic_load(&gr->failed[slot])) {
		rc = GPULSE_ELIMIT;
		goto out;
	}
	if (!gr->have_id) {
		/* bus_read copies a whole snapshot: done once per GPU. */
		struct gpu_snapshot *s = malloc(sizeof *s);
		if (!s || bus_read(ing->bus, g, s) != GPULSE_OK) {
			if (!s)
				atomic_fetch_add(&ing->series_errors, 1);
			free(s);
			rc = GPULSE_ENOENT;
			goto out;
		}
		snprintf(gr->gpu, sizeof gr->gpu, "%d", s->id.index >= 0 ? s->id.index : 0);
		utf8_clean(gr->uuid, sizeof gr->uuid, s->id.uuid);
		utf8_clean(gr->model, sizeof gr->model, s->id.name);
		gr->source = gpu_source_label(&s->id);
		free(s);
		gr->have_id = true;
	}
	struct label l[INGEST_GPU_LABELS_MAX + EXTRA_LABELS_MAX];
	char text[EXTRA_TEXT_MAX];
	size_t n = ingest_gpu_labels(l, slot_metric(slot), gr->gpu, gr->uuid, gr->model, gr->source, NULL,
				     NULL);
	if (slot < FIELD_COUNT)
		n += parse_extra(field_table[slot].labels, l + n, EXTRA_LABELS_MAX, text, sizeof text);
	char err[256];
	uint32_t r;
	rc = tsdb_series(ing->db, l, n, &r, err, sizeof err);
	if (rc) {
		atomic_fetch_add(&ing->series_errors, 1);
		/* A label set refused or a bound reached holds for good: that
		 * series is not asked for again (and said so once). Out of
		 * memory passes: the next sample asks again. */
		if (rc != GPULSE_ENOMEM) {
			atomic_store(&gr->failed[slot], 1);
			log_warn("store: series %s of GPU %d refused: %s", slot_metric(slot), g, err);
		}
		goto out;
	}
	atomic_store(&gr->ref[slot], r + 1);
	*ref = r;
out:
	pthread_mutex_unlock(&gr->lock);
	return rc;
}

static void append(struct ingest *ing, int g, int slot, int64_t t_ms, double v)
{
	uint32_t ref = atomic_load(&ing->gpu[g].ref[slot]);
	if (ref)
		ref--;
	else if (create_ref(ing, g, slot, &ref) != GPULSE_OK)
		return;
	if (tsdb_append(ing->db, ref, t_ms, v) == GPULSE_OK)
		atomic_fetch_add(&ing->appended, 1);
	else
		atomic_fetch_add(&ing->append_errors, 1);
}

void ingest_on_update(void *ctx, const struct gpu_update *u)
{
	struct ingest *ing = ctx;
	if (u->gpu < 0 || u->gpu >= GPU_MAX)
		return;
	atomic_fetch_add(&ing->updates, 1);
	struct gpu_refs *gr = &ing->gpu[u->gpu];
	int64_t t_ms = u->wall_ns / 1000000;
	double stale = stale_nan();
	uint64_t now_valid = 0, gone = 0;
	uint64_t before = atomic_load(&gr->was_valid);
	for (int f = 0; f < FIELD_COUNT; f++) {
		uint64_t bit = FIELD_BIT(f);
		if (!(u->mask & bit) || !slot_metric(f))
			continue;
		if (u->valid & bit) {
			append(ing, u->gpu, f, t_ms, u->v[f]);
			now_valid |= bit;
		} else if (before & bit) {
			append(ing, u->gpu, f, t_ms, stale);
			atomic_fetch_add(&ing->stale, 1);
			gone |= bit;
		}
	}
	if (now_valid)
		atomic_fetch_or(&gr->was_valid, now_valid);
	if (gone)
		atomic_fetch_and(&gr->was_valid, ~gone);
}

/* ---- the ticker ---- */

/* Append v at t_ms to the series NAME{gpu,uuid,model[,lname=lvalue]}. */
static void tick_put(struct ingest *ing, const struct gpu_refs *gr, const char *name,
		     const char *lname, const char *lvalue, int64_t t_ms, double v)
{
	struct label l[INGEST_GPU_LABELS_MAX];
	size_t n = ingest_gpu_labels(l, name, gr->gpu, gr->uuid, gr->model, gr->source, lname,
				     lvalue);
	char err[160];
	uint32_t ref;
	if (tsdb_series(ing->db, l, n, &ref, err, sizeof err) != GPULSE_OK) {
		atomic_fetch_add(&ing->series_errors, 1);
		return;
	}
	if (tsdb_append(ing->db, ref, t_ms, v) == GPULSE_OK)
		atomic_fetch_add(&ing->appended, 1);
	else
		atomic_fetch_add(&ing->append_errors, 1);
}

/* The processes of a GPU as /metrics shows them (prom.c,
 * render_processes): device memory and SM share per (pid, comm), so that
 * capacity reports can name who held memory on an idle GPU. A process
 * that ends simply stops getting samples; its series is not marked stale
 * (PromQL's lookback ends it within 5 minutes, as a scrape would). The
 * number of these series is bounded by tsdb's max_series like any other. */
const char *const ingest_process_metrics[] = {
	"gpulse_process_gpu_memory_bytes", "gpulse_process_sm_utilization_ratio", NULL};

/* What the ticker writes beside the fields and the processes (tick_gpu
 * names them from here), so that ingest_metric_names declares exactly the
 * families it writes. */
enum tick_metric {
	TM_UP, TM_STALE, TM_THROTTLE, TM_XID, TM_ECC, TM_LOST, TM_PCIE_GEN, TM_PCIE_WIDTH, TM_COUNT
};
static const char *const tick_metrics[TM_COUNT] = {
	[TM_UP] = INGEST_UP_METRIC,
	[TM_STALE] = "gpulse_gpu_stale",
	[TM_THROTTLE] = "gpulse_gpu_throttle_active",
	[TM_XID] = "gpulse_gpu_xid_errors_total",
	[TM_ECC] = "gpulse_gpu_ecc_events_total",
	[TM_LOST] = "gpulse_gpu_lost_total",
	[TM_PCIE_GEN] = "gpulse_gpu_pcie_link_max_generation",
	[TM_PCIE_WIDTH] = "gpulse_gpu_pcie_link_max_width",
};

static int add_name(const char **out, size_t cap, size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(out[i], name) == 0)
			return GPULSE_OK;
	if (*n == cap)
		return GPULSE_ELIMIT;
	out[(*n)++] = name;
	return GPULSE_OK;
}

int ingest_metric_names(const char **out, size_t cap, size_t *n)
{
	int rc = GPULSE_OK;
	*n = 0;
	for (int f = 0; f < FIELD_COUNT && rc == GPULSE_OK; f++)
		if (slot_metric(f))
			rc = add_name(out, cap, n, slot_metric(f));
	for (int k = 0; k < TM_COUNT && rc == GPULSE_OK; k++)
		rc = add_name(out, cap, n, tick_metrics[k]);
	for (const char *const *p = ingest_process_metrics; *p && rc == GPULSE_OK; p++)
		rc = add_name(out, cap, n, *p);
	return rc;
}

static void tick_processes(struct ingest *ing, const struct gpu_refs *gr,
			   const struct gpu_snapshot *s, int64_t t_ms)
{
	if (!s->procs_valid)
		return;
	for (int k = 0; k < s->nprocs && k < GPU_PROC_MAX; k++) {
		const struct gpu_process *p = &s->procs[k];
		char pid[16], comm[GPU_COMM_LEN * 3 + 1], raw[GPU_COMM_LEN + 1];
		snprintf(pid, sizeof pid, "%u", (unsigned)p->pid);
		memcpy(raw, p->comm, GPU_COMM_LEN);
		raw[GPU_COMM_LEN] = '\0';
		utf8_clean(comm, sizeof comm, raw);
		if (!comm[0])
			snprintf(comm, sizeof comm, "?");
		for (int m = 0; m < 2; m++) {
			if (m == 0 ? !p->mem_valid : !p->util_valid)
				continue;
			struct label l[INGEST_GPU_LABELS_MAX + 2 + OWNER_FIELD_COUNT];
			size_t n = ingest_gpu_labels(l,
						     ingest_process_metrics[m],
						     gr->gpu, gr->uuid, gr->model, gr->source, "pid",
						     pid);
			l[n++] = (struct label){"comm", comm};
			char gi[16];
			if (p->in_mig) {
				snprintf(gi, sizeof gi, "%u", p->gpu_instance);
				l[n++] = (struct label){"gpu_instance", gi};
			}
			/* The attribution labels /metrics shows (prom.c,
			 * owner_labels), already bounded and UTF-8. */
			for (int f = 0; f < OWNER_FIELD_COUNT; f++) {
				const char *v = owner_field_value(&p->owner, (enum owner_field)f);
				if ((p->owner.labels & 1u << f) && v[0])
					l[n++] = (struct label){
						owner_field_name((enum owner_field)f), v};
			}
			char err[160];
			uint32_t ref;
			if (tsdb_series(ing->db, l, n, &ref, err, sizeof err) != GPULSE_OK) {
				atomic_fetch_add(&ing->series_errors, 1);
				continue;
			}
			double v = m == 0 ? (double)p->used_bytes : p->sm_ratio;
			if (tsdb_append(ing->db, ref, t_ms, v) == GPULSE_OK)
				atomic_fetch_add(&ing->appended, 1);
			else
				atomic_fetch_add(&ing->append_errors, 1);
		}
	}
}

static void tick_gpu(struct ingest *ing, int g, const struct gpu_snapshot *s, int64_t t_ms)
{
	struct gpu_refs *gr = &ing->gpu[g];
	pthread_mutex_lock(&gr->lock);
	if (!gr->have_id) {
		snprintf(gr->gpu, sizeof gr->gpu, "%d", s->id.index >= 0 ? s->id.index : 0);
		utf8_clean(gr->uuid, sizeof gr->uuid, s->id.uuid);
		utf8_clean(gr->model, sizeof gr->model, s->id.name);
		gr->source = gpu_source_label(&s->id);
		gr->have_id = true;
	}
	pthread_mutex_unlock(&gr->lock);
	bool up = s->health == GPU_HEALTH_UP, stale = gpu_snapshot_is_stale(s);
	tick_put(ing, gr, tick_metrics[TM_UP], NULL, NULL, t_ms, up);
	tick_put(ing, gr, tick_metrics[TM_STALE], NULL, NULL, t_ms, stale);
	if (!up || s->health == GPU_HEALTH_STALE) {
		/* Lost or stuck: its values are gone. End their series now,
		 * as a failed scrape ends a target's. */
		uint64_t was = atomic_exchange(&gr->was_valid, 0);
		for (int f = 0; f < FIELD_COUNT; f++)
			if ((was & FIELD_BIT(f)) && slot_metric(f)) {
				append(ing, g, f, t_ms, stale_nan());
				atomic_fetch_add(&ing->stale, 1);
			}
	} else if (!stale && (s->valid & FIELD_BIT(F_CLOCK_REASONS))) {
		double v = s->v[F_CLOCK_REASONS];
		uint64_t mask = (v >= 0 && v < 18446744073709551616.0) ? (uint64_t)v : 0;
		for (int k = 0; k < clock_reason_count; k++)
			tick_put(ing, gr, tick_metrics[TM_THROTTLE], "reason",
				 clock_reason_table[k].label, t_ms,
				 (mask & clock_reason_table[k].bit) != 0);
	}
	char code[24];
	for (int k = 0; k < s->nxid && k < GPU_XID_MAX; k++) {
		snprintf(code, sizeof code, "%u", (unsigned)s->xid[k].code);
		tick_put(ing, gr, tick_metrics[TM_XID], "xid", code, t_ms,
			 (double)s->xid[k].count);
	}
	if (s->xid_other)
		tick_put(ing, gr, tick_metrics[TM_XID], "xid", "other", t_ms,
			 (double)s->xid_other);
	tick_put(ing, gr, tick_metrics[TM_ECC], "type", "single_bit", t_ms,
		 (double)s->ecc_events[0]);
	tick_put(ing, gr, tick_metrics[TM_ECC], "type", "double_bit", t_ms,
		 (double)s->ecc_events[1]);
	tick_put(ing, gr, tick_metrics[TM_LOST], NULL, NULL, t_ms, (double)s->lost_total);
	if (up && !stale)
		tick_processes(ing, gr, s, t_ms);
	if (s->id.pcie_max_gen)
		tick_put(ing, gr, tick_metrics[TM_PCIE_GEN], NULL, NULL, t_ms,
			 s->id.pcie_max_gen);
	if (s->id.pcie_max_width)
		tick_put(ing, gr, tick_metrics[TM_PCIE_WIDTH], NULL, NULL, t_ms,
			 s->id.pcie_max_width);
}

void ingest_tick(struct ingest *ing, int64_t t_ms)
{
	struct gpu_snapshot *s = malloc(sizeof *s);
	if (!s)
		return;
	int n = bus_gpu_count(ing->bus);
	for (int g = 0; g < n && g < GPU_MAX; g++)
		if (bus_read(ing->bus, g, s) == GPULSE_OK)
			tick_gpu(ing, g, s, t_ms);
	free(s);
}

/* One tick, on the ticker's thread. */
static void tick(void *arg)
{
	struct ingest *ing = arg;
	ingest_tick(ing, tsdb_now_ms(ing->db));
}

int ingest_start(struct ingest *ing, int64_t tick_ns)
{
	return periodic_start(&ing->ticker, tick_ns);
}

void ingest_stop(struct ingest *ing)
{
	if (ing)
		periodic_stop(&ing->ticker);
}
