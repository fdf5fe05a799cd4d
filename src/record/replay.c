/* Replay of a recording as live GPUs; see replay.h. */
#include "record/replay.h"

#include <errno.h>
#include <libgen.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "record/device_file.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "record/recording.h"
#include "common/status.h"

struct replay {
	struct bus *bus;
	struct recording *rec;
	struct replay_config cfg;
	char path[4096];
	size_t *order;          /* row indices in time order across GPUs */
	int slot[GPU_MAX];      /* bus slot of each recorded gpu index */
	double power_limit_w[GPU_MAX]; /* from the device file; 0 unknown */
	pthread_t thread;
	pthread_mutex_t lock;
	struct mono_cond wake;
	bool stopping;
	atomic_uint_fast64_t rows, loops;
};

/* Facts of the recorded card from the device file beside the recording
 * (device_file.h), so a replay shows the model it was recorded on, and
 * each recorded GPU's power limit (its line, or the first), which the
 * recording has no column for. Missing or unreadable file: generic. */
static void replay_identity_from_device_csv(const char *rec_path, struct gpu_identity *id,
					    double power_limit_w[GPU_MAX])
{
	char path[8192], err[256];
	struct device_file *df = malloc(sizeof *df);
	if (!df)
		return;
	if (device_file_path(rec_path, path, sizeof path) == GPULSE_OK &&
	    device_file_load(path, df, err, sizeof err) == GPULSE_OK && df->ngpus > 0) {
		const struct device_facts *d = &df->gpu[0];
		if (d->name[0])
			snprintf(id->name, sizeof id->name, "%s", d->name);
		snprintf(id->driver_version, sizeof id->driver_version, "%s", d->driver_version);
		id->pcie_max_gen = d->pcie_max_gen;
		id->pcie_max_width = d->pcie_max_width;
		id->max_sm_clock_hz = d->max_sm_clock_hz;
		id->max_mem_clock_hz = d->max_mem_clock_hz;
		for (int g = 0; g < GPU_MAX; g++)
			power_limit_w[g] = df->gpu[g < df->ngpus ? g : 0].power_limit_w;
	}
	free(df);
}

static int cmp_row_time(const void *a, const void *b, void *arg)
{
	const struct recording *rec = arg;
	double ta = rec->rows[*(const size_t *)a].t_s, tb = rec->rows[*(const size_t *)b].t_s;
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Wait until monotonic `deadline` or stop; true if stopping. Replay paces
 * each row by the recording's own timestamps (scaled by speed), not by a
 * period, so common/periodic does not fit. */
static bool replay_wait(struct replay *r, int64_t deadline)
{
	pthread_mutex_lock(&r->lock);
	while (!r->stopping && clock_mono_ns() < deadline)
		if (mono_cond_wait_until(&r->wake, &r->lock, deadline) == ETIMEDOUT)
			break;
	bool stop = r->stopping;
	pthread_mutex_unlock(&r->lock);
	return stop;
}

static void *replay_main(void *arg)
{
	struct replay *r = arg;
	struct recording *rec = r->rec;
	pthread_setname_np(pthread_self(), "gpulse-replay");
	struct gpu_update *u = calloc(1, sizeof *u);
	if (!u) {
		log_error("replay: out of memory");
		return NULL;
	}
	double t0 = rec->rows[r->order[0]].t_s;
	double span = rec->rows[r->order[rec->nrows - 1]].t_s - t0;
	/* One gap of the median-ish sample period between loops. */
	double gap = rec->nrows > 1 ? span / (double)(rec->nrows - 1) : 0.1;
	int64_t start = clock_mono_ns();
	for (;;) {
		for (size_t i = 0; i < rec->nrows; i++) {
			const struct rec_row *row = &rec->rows[r->order[i]];
			int64_t due = start + (int64_t)((row->t_s - t0) / r->cfg.speed * 1e9);
			if (replay_wait(r, due))
				goto out;
			u->gpu = r->slot[row->gpu];
			u->tier = TIER_FAST;
			u->wall_ns = clock_wall_ns();
			u->mask = rec->columns;
			u->valid = row->valid;
			memcpy(u->v, row->v, sizeof u->v);
			if (r->power_limit_w[row->gpu] > 0) {
				u->mask |= FIELD_BIT(F_POWER_LIMIT);
				u->valid |= FIELD_BIT(F_POWER_LIMIT);
				u->v[F_POWER_LIMIT] = r->power_limit_w[row->gpu];
			}
			u->has_procs = false;
			bus_publish(r->bus, u);
			atomic_fetch_add(&r->rows, 1);
		}
		if (!r->cfg.loop)
			break;
		atomic_fetch_add(&r->loops, 1);
		start += (int64_t)((span + gap) / r->cfg.speed * 1e9);
	}
out:
	free(u);
	return NULL;
}

int replay_start(struct replay **out, struct bus *bus, const struct replay_config *cfg,
		 char *err, size_t errlen)
{
	*out = NULL;
	if (!(cfg->speed > 0)) {
		snprintf(err, errlen, "replay speed must be above 0");
		return GPULSE_EINVAL;
	}
	struct recording *rec = NULL;
	/* The parser refuses a recording without rows. */
	int rc = recording_load(cfg->path, &rec, err, errlen);
	if (rc)
		return rc;
	if (rec->ninvalid)
		log_warn("replay: %s", rec->invalid_note);
	if (rec->nnan)
		log_debug("replay: %s: %zu nan cell%s, read as absent", cfg->path, rec->nnan,
			  rec->nnan == 1 ? "" : "s");
	struct replay *r = calloc(1, sizeof *r);
	size_t *order = calloc(rec->nrows, sizeof *order);
	if (!r || !order) {
		free(r);
		free(order);
		recording_free(rec);
		snprintf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	for (size_t i = 0; i < rec->nrows; i++)
		order[i] = i;
	qsort_r(order, rec->nrows, sizeof *order, cmp_row_time, rec);
	r->bus = bus;
	r->rec = rec;
	r->cfg = *cfg;
	r->order = order;
	snprintf(r->path, sizeof r->path, "%s", cfg->path);
	r->cfg.path = r->path;

	struct gpu_identity base;
	memset(&base, 0, sizeof base);
	snprintf(base.name, sizeof base.name, "recorded GPU");
	replay_identity_from_device_csv(cfg->path, &base, r->power_limit_w);
	char fname[4096];
	snprintf(fname, sizeof fname, "%s", cfg->path);
	const char *bn = basename(fname);
	for (int g = 0; g < rec->ngpus; g++) {
		struct gpu_identity id = base;
		id.index = g;
		id.mig_mode = -1;
		id.minor_number = -1;
		id.gpm_supported = (rec->columns & FIELD_BIT(F_GPM_SM)) != 0;
		snprintf(id.source, sizeof id.source, "replay");
		snprintf(id.uuid, sizeof id.uuid, "REPLAY-%.60s-%d", bn, g);
		rc = bus_attach_gpu(bus, &id, &r->slot[g]);
		if (rc) {
			snprintf(err, errlen, "%s: too many GPUs in the recording", cfg->path);
			goto fail;
		}
	}
	pthread_mutex_init(&r->lock, NULL);
	mono_cond_init(&r->wake);
	if (pthread_create(&r->thread, NULL, replay_main, r) != 0) {
		snprintf(err, errlen, "cannot start the replay thread");
		rc = GPULSE_ENOMEM;
		pthread_mutex_destroy(&r->lock);
		mono_cond_destroy(&r->wake);
		goto fail;
	}
	log_info("replaying %s: %zu rows, %d GPU(s), %.1f s at speed %g%s", cfg->path, rec->nrows,
		 rec->ngpus, rec->rows[order[rec->nrows - 1]].t_s - rec->rows[order[0]].t_s,
		 cfg->speed, cfg->loop ? ", looping" : "");
	*out = r;
	return GPULSE_OK;
fail:
	recording_free(rec);
	free(order);
	free(r);
	return rc;
}

void replay_stop(struct replay *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stopping = true;
	mono_cond_broadcast(&r->wake);
	pthread_mutex_unlock(&r->lock);
	pthread_join(r->thread, NULL);
	pthread_mutex_destroy(&r->lock);
	mono_cond_destroy(&r->wake);
	recording_free(r->rec);
	free(r->order);
	free(r);
}

void replay_progress(struct replay *r, uint64_t *rows, uint64_t *loops)
{
	*rows = atomic_load(&r->rows);
	*loops = atomic_load(&r->loops);
}
