/* Live diagnosis over the bus; see live.h. */
#include "diagnose/live.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/recording.h"
#include "common/status.h"

#define LIVE_FIELDS_MAX 64

/* One fast-tier sample with the normal tier's values written back. Floats
 * keep a GPU's history small; the diagnosis compares fractions and rates,
 * which a float's 24 bits carry with room to spare. */
struct live_row {
	double t_s;
	uint64_t valid;                  /* bits of live columns */
	float v[];                       /* ncols */
};

struct live_gpu {
	pthread_mutex_t lock;
	struct gpu_identity id;
	bool have_id;
	unsigned char *rows;             /* ring of cap rows of row_size bytes */
	size_t cap, head, count;         /* head: index of the oldest */
	double last_fast_s;
	double last_normal_s;            /* 0 before the first normal update */
	double judged_until_s;           /* end of the last window judged */
	double power_limit_w;            /* last one any tier reported; 0 never */
};

struct diag_live {
	struct bus *bus;
	double window_s, history_s;
	size_t cap;                      /* rows per GPU */
	size_t row_size;
	int ncols;
	int col_field[LIVE_FIELDS_MAX];  /* live column -> field */
	int field_col[FIELD_COUNT];      /* field -> live column or -1 */
	struct live_gpu gpu[GPU_MAX];
	diag_live_sink_fn *sink;
	void *sink_ctx;
	diag_live_trace_fn *trace;
	void *trace_ctx;
	struct diag_options opts;
};

static struct live_row *row_at(const struct diag_live *dl, struct live_gpu *g, size_t i)
{
	return (struct live_row *)(g->rows + ((g->head + i) % g->cap) * dl->row_size);
}

/* Turn the held rows from since_s on into rec_rows for the classifier. */
static int rows_since(struct diag_live *dl, struct live_gpu *g, double since_s,
		      struct rec_row **out, size_t *n)
{
	size_t first = 0;
	while (first < g->count && row_at(dl, g, first)->t_s < since_s)
		first++;
	size_t k = g->count - first;
	*out = NULL;
	*n = 0;
	if (k == 0)
		return GPULSE_OK;
	struct rec_row *r = calloc(k, sizeof *r);
	if (!r)
		return GPULSE_ENOMEM;
	for (size_t i = 0; i < k; i++) {
		const struct live_row *lr = row_at(dl, g, first + i);
		r[i].t_s = lr->t_s;
		r[i].gpu = g->id.index;
		for (int c = 0; c < dl->ncols; c++) {
			if (!(lr->valid & (1ULL << c)))
				continue;
			r[i].v[dl->col_field[c]] = lr->v[c];
			r[i].valid |= FIELD_BIT(dl->col_field[c]);
		}
	}
	*out = r;
	*n = k;
	return GPULSE_OK;
}

static void peaks_of(const struct gpu_identity *id, double power_limit_w,
		     const struct rec_row *last, struct gpu_peaks *p)
{
	peaks_init(p);
	/* The limit the driver enforces (a slow-tier read; a replay's device
	 * file), before the model's default board power. */
	if (power_limit_w > 0) {
		p->power_limit_w = power_limit_w;
		p->power_source = "device";
	}
	snprintf(p->model, sizeof p->model, "%s", id->name);
	if (id->max_sm_clock_hz > 0) {
		p->sm_clock_max_hz = id->max_sm_clock_hz;
		p->clock_source = "device";
	}
	if (id->max_mem_clock_hz > 0)
		p->mem_clock_max_hz = id->max_mem_clock_hz;
	if (id->pcie_max_gen && id->pcie_max_width) {
		p->pcie_gen = id->pcie_max_gen;
		p->pcie_width = id->pcie_max_width;
	}
	if (last && (last->valid & FIELD_BIT(F_MEM_TOTAL))) {
		p->mem_total_bytes = last->v[F_MEM_TOTAL];
		p->mem_source = "device";
	}
	peaks_derive(p);
}

/* Judge the windows that became complete, newest verdict to the bus.
 * Called with g->lock held. */
static void judge_ready(struct diag_live *dl, struct live_gpu *g, int slot)
{
	double ready = g->last_fast_s;
	if (g->last_normal_s > 0 && g->last_normal_s < ready)
		ready = g->last_normal_s;
	double w = dl->window_s;
	double end = floor(ready / w) * w;   /* last boundary all evidence reached */
	if (g->judged_until_s == 0) {
		/* The first window may be partial: start at the first full one. */
		double first = row_at(dl, g, 0)->t_s;
		g->judged_until_s = ceil(first / w) * w;
	}
	if (end <= g->judged_until_s)
		return;
	double start = end - w;
	struct rec_row *rows;
	size_t n;
	if (rows_since(dl, g, start, &rows, &n) != GPULSE_OK || n == 0) {
		free(rows);
		return;
	}
	size_t m = 0;
	while (m < n && rows[m].t_s < end)
		m++;
	struct gpu_peaks pk;
	peaks_of(&g->id, g->power_limit_w, m ? &rows[m - 1] : NULL, &pk);
	struct diag_input in = {.gpu = g->id.index, .rows = rows, .nrows = m,
				.origin_s = start, .window_s = w, .opts = &dl->opts};
	struct diag_trace tr;
	if (dl->trace && dl->trace(dl->trace_ctx, g->id.index, start, end, &tr)) {
		in.traces = &tr;
		in.ntraces = 1;
	}
	struct diag_window *win = NULL;
	size_t nw = 0;
	if (m && diagnose_gpu(&in, &pk, &win, &nw) == GPULSE_OK && nw > 0) {
		bus_set_diagnosis(dl->bus, slot, (int)win[nw - 1].bottleneck, win[nw - 1].findings, end);
		if (dl->sink)
			dl->sink(dl->sink_ctx, &g->id, &win[nw - 1]);
	}
	free(win);
	free(rows);
	g->judged_until_s = end;
}

static void live_update(void *ctx, const struct gpu_update *u)
{
	struct diag_live *dl = ctx;
	if (u->gpu < 0 || u->gpu >= GPU_MAX)
		return;
	struct live_gpu *g = &dl->gpu[u->gpu];
	double t = (double)u->wall_ns / 1e9;
	uint64_t read = u->mask & u->valid;
	pthread_mutex_lock(&g->lock);
	if (!g->have_id) {
		struct gpu_snapshot snap;
		if (bus_read(dl->bus, u->gpu, &snap) == GPULSE_OK) {
			g->id = snap.id;
			g->have_id = true;
		}
	}
	if (!g->rows) {
		g->rows = calloc(dl->cap, dl->row_size);
		g->cap = g->rows ? dl->cap : 0;
	}
	if (!g->rows || t <= 0)
		goto out;
	/* Whatever tier carries it (the collector's slow tier, a replay's
	 * every row): rows keep no slow-tier column, the peaks need it. */
	if ((read & FIELD_BIT(F_POWER_LIMIT)) && u->v[F_POWER_LIMIT] > 0)
		g->power_limit_w = u->v[F_POWER_LIMIT];
	if (u->tier == TIER_FAST) {
		if (t <= g->last_fast_s)
			goto out;
		/* Drop what has left the history, and the oldest if full. */
		while (g->count && (g->count == g->cap || row_at(dl, g, 0)->t_s < t - dl->history_s)) {
			g->head = (g->head + 1) % g->cap;
			g->count--;
		}
		struct live_row *r = row_at(dl, g, g->count);
		memset(r, 0, dl->row_size);
		r->t_s = t;
		for (int c = 0; c < dl->ncols; c++) {
			int f = dl->col_field[c];
			if (read & FIELD_BIT(f)) {
				r->v[c] = (float)u->v[f];
				r->valid |= 1ULL << c;
			}
		}
		g->count++;
		g->last_fast_s = t;
	} else if (u->tier == TIER_NORMAL) {
		/* These values describe the time since the previous normal
		 * update: write them into the rows of that interval. */
		for (size_t i = g->count; i-- > 0;) {
			struct live_row *r = row_at(dl, g, i);
			if (r->t_s <= g->last_normal_s || r->t_s > t)
				break;
			for (int c = 0; c < dl->ncols; c++) {
				int f = dl->col_field[c];
				if (field_table[f].tier != TIER_NORMAL)
					continue;
				if (read & FIELD_BIT(f)) {
					r->v[c] = (float)u->v[f];
					r->valid |= 1ULL << c;
				}
			}
		}
		g->last_normal_s = t;
	} else {
		goto out;
	}
	if (g->count)
		judge_ready(dl, g, u->gpu);
out:
	pthread_mutex_unlock(&g->lock);
}

int diag_live_create(struct diag_live **out, struct bus *bus, double window_s, double history_s,
		     double rate_hz)
{
	*out = NULL;
	if (!(window_s >= 0.1) || !(history_s >= window_s) || !(rate_hz > 0) ||
	    history_s * rate_hz > 1e6)
		return GPULSE_EINVAL;
	struct diag_live *dl = calloc(1, sizeof *dl);
	if (!dl)
		return GPULSE_ENOMEM;
	dl->bus = bus;
	dl->window_s = window_s;
	dl->history_s = history_s;
	diag_options_defaults(&dl->opts);
	dl->cap = (size_t)(history_s * rate_hz * 1.1) + 16;  /* jitter room */
	for (int f = 0; f < FIELD_COUNT; f++) {
		dl->field_col[f] = -1;
		if (field_table[f].tier == TIER_SLOW || dl->ncols == LIVE_FIELDS_MAX)
			continue;
		dl->field_col[f] = dl->ncols;
		dl->col_field[dl->ncols++] = f;
	}
	dl->row_size = sizeof(struct live_row) + (size_t)dl->ncols * sizeof(float);
	dl->row_size = (dl->row_size + 7) & ~(size_t)7;
	for (int i = 0; i < GPU_MAX; i++)
		pthread_mutex_init(&dl->gpu[i].lock, NULL);
	int rc = bus_subscribe(bus, live_update, dl);
	if (rc) {
		diag_live_destroy(dl);
		return rc;
	}
	*out = dl;
	return GPULSE_OK;
}

void diag_live_destroy(struct diag_live *dl)
{
	if (!dl)
		return;
	for (int i = 0; i < GPU_MAX; i++) {
		free(dl->gpu[i].rows);
		pthread_mutex_destroy(&dl->gpu[i].lock);
	}
	free(dl);
}

int diag_live_windows(struct diag_live *dl, int slot, double since_s, double window_s,
		      struct diag_window **out, size_t *n, struct gpu_peaks *peaks)
{
	*out = NULL;
	*n = 0;
	if (slot < 0 || slot >= GPU_MAX)
		return GPULSE_ENOENT;
	if (window_s == 0)
		window_s = dl->window_s;
	if (!(window_s >= 0.1))
		return GPULSE_EINVAL;
	struct live_gpu *g = &dl->gpu[slot];
	pthread_mutex_lock(&g->lock);
	struct rec_row *rows = NULL;
	size_t nr = 0;
	int rc = g->count ? rows_since(dl, g, since_s, &rows, &nr) : GPULSE_ENOENT;
	struct gpu_identity id = g->id;
	double power_limit_w = g->power_limit_w;
	pthread_mutex_unlock(&g->lock);
	if (rc == GPULSE_OK && nr == 0)
		rc = GPULSE_ENOENT;
	if (rc)
		goto out;
	peaks_of(&id, power_limit_w, &rows[nr - 1], peaks);
	struct diag_input in = {.gpu = id.index, .rows = rows, .nrows = nr,
				.origin_s = floor(rows[0].t_s / window_s) * window_s,
				.window_s = window_s, .opts = &dl->opts};
	/* One trace summary per window, where processes were traced. */
	size_t nwin = (size_t)ceil((rows[nr - 1].t_s - in.origin_s) / window_s) + 1;
	struct diag_trace *tr = dl->trace ? calloc(nwin, sizeof *tr) : NULL;
	size_t ntr = 0;
	for (size_t k = 0; tr && k < nwin; k++) {
		double a = in.origin_s + (double)k * window_s;
		if (dl->trace(dl->trace_ctx, id.index, a, a + window_s, &tr[ntr]))
			ntr++;
	}
	in.traces = tr;
	in.ntraces = ntr;
	rc = diagnose_gpu(&in, peaks, out, n);
	free(tr);
out:
	free(rows);
	return rc;
}

void diag_live_set_trace_source(struct diag_live *dl, diag_live_trace_fn *fn, void *ctx)
{
	dl->trace = fn;
	dl->trace_ctx = ctx;
}

int diag_live_set_options(struct diag_live *dl, const struct diag_options *o)
{
	if (diag_options_check(o) != GPULSE_OK)
		return GPULSE_EINVAL;
	dl->opts = *o;
	return GPULSE_OK;
}

void diag_live_set_sink(struct diag_live *dl, diag_live_sink_fn *fn, void *ctx)
{
	dl->sink = fn;
	dl->sink_ctx = ctx;
}

int diag_live_peaks(struct diag_live *dl, int slot, struct gpu_peaks *peaks)
{
	if (slot < 0 || slot >= GPU_MAX)
		return GPULSE_ENOENT;
	struct live_gpu *g = &dl->gpu[slot];
	pthread_mutex_lock(&g->lock);
	int rc = g->have_id ? GPULSE_OK : GPULSE_ENOENT;
	if (rc == GPULSE_OK) {
		struct rec_row *rows = NULL;
		size_t n = 0;
		double since = g->count ? row_at(dl, g, g->count - 1)->t_s : 0;
		if (g->count && rows_since(dl, g, since, &rows, &n) == GPULSE_OK && n)
			peaks_of(&g->id, g->power_limit_w, &rows[n - 1], peaks);
		else
			peaks_of(&g->id, g->power_limit_w, NULL, peaks);
		free(rows);
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

double diag_live_history_s(const struct diag_live *dl)
{
	return dl->history_s;
}

double diag_live_window_s(const struct diag_live *dl)
{
	return dl->window_s;
}
