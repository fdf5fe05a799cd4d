/* gpulsed's scheduled silent-corruption screening; see screend.h and
 * docs/internals/bench.md "Screening". benchd's scheduler thread runs the
 * child; this file decides when a GPU is due and what its result means.
 * The comparison with the card's earlier digests is screen.c's
 * (screen_compare): this file only picks which earlier run is the
 * reference. */
#include "daemon/screend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <jansson.h>

#include "bench/screen.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "common/str.h"
#include "diagnose/health_live.h"

#define SCREEND_MAX_GPUS 64
#define HISTORY_SCAN 64              /* stored runs looked at for a reference */
#define MAX_RECORD (64u << 20)       /* a full run's digests: a few MB */

enum outcome { OUT_PASSED, OUT_MISMATCH, OUT_ABORTED, OUT_REFUSED, OUT_FAILED, OUT_COUNT };
static const char *const outcome_names[OUT_COUNT] = {"passed", "mismatch", "aborted", "refused",
						     "failed"};
static const char *const test_names[SCREEN_TEST_COUNT] = {
#define SCREEN_TEST_NAME(id, name) name,
	SCREEN_TESTS(SCREEN_TEST_NAME)
#undef SCREEN_TEST_NAME
};

/* The last kept run of a GPU, as /metrics and the status show it. */
struct last_run {
	bool have;
	int64_t t_ms;
	char uuid[96], name[96], driver[32], mode[8];
	bool passed;
	unsigned mismatches[SCREEN_TEST_COUNT]; /* tiles per test */
	size_t nmm;
	char first[512];                        /* the first mismatch, in words */
	char reason[GPU_HEALTH_EVIDENCE_LEN];   /* the health score's evidence */
	char notes[512];
};

struct gpu_state {
	int64_t next_due_ms;     /* wall; 0: due */
	bool due_known;          /* read from the store */
	uint64_t runs[OUT_COUNT];
	bool running;
	struct last_run last;
};

struct screend {
	const struct gpulse_config *cfg;
	int64_t period_ms;
	bool scheduled;
	struct health_live *_Atomic health;
	pthread_mutex_t mu;
	struct gpu_state gpu[SCREEND_MAX_GPUS];
};

static void note_health(struct screend *s, const struct last_run *l);

struct screend *screend_create(const struct gpulse_config *c)
{
	struct screend *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->cfg = c;
	s->period_ms = c->screen.interval_ns / NS_PER_MS;
	s->scheduled = c->screen.enabled && s->period_ms > 0;
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

void screend_destroy(struct screend *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	free(s);
}

bool screend_scheduled(const struct screend *s)
{
	return s && s->scheduled;
}

void screend_set_health(struct screend *s, struct health_live *hl)
{
	if (!s)
		return;
	atomic_store(&s->health, hl);
	/* A verdict restored from the store before the health score was
	 * wired is told now. */
	pthread_mutex_lock(&s->mu);
	for (unsigned g = 0; hl && g < SCREEND_MAX_GPUS; g++)
		if (s->gpu[g].last.have && !s->gpu[g].last.passed)
			note_health(s, &s->gpu[g].last);
	pthread_mutex_unlock(&s->mu);
}

static struct gpu_state *gpu_of(struct screend *s, int gpu)
{
	return gpu >= 0 && gpu < SCREEND_MAX_GPUS ? &s->gpu[gpu] : NULL;
}

/* ---- a kept run, from its record ---------------------------------------- */

/* The summary of a stored run (screen_result_to_json's document, with the
 * mismatches that run and its reference comparison found). 0, or
 * GPULSE_EINVAL for a record that is not one. */
static int summary_of(const json_t *o, struct last_run *l)
{
	const char *kind = json_string_value(json_object_get(o, "kind"));
	if (!kind || strcmp(kind, "gpulse-screen") != 0)
		return GPULSE_EINVAL;
	memset(l, 0, sizeof *l);
	l->have = true;
	l->t_ms = json_integer_value(json_object_get(o, "t_ms"));
	str_copy(l->uuid, sizeof l->uuid, json_string_value(json_object_get(o, "uuid")) ?: "");
	str_copy(l->name, sizeof l->name, json_string_value(json_object_get(o, "name")) ?: "");
	str_copy(l->driver, sizeof l->driver, json_string_value(json_object_get(o, "driver")) ?: "");
	str_copy(l->mode, sizeof l->mode, json_string_value(json_object_get(o, "mode")) ?: "");
	str_copy(l->notes, sizeof l->notes, json_string_value(json_object_get(o, "notes")) ?: "");
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(o, "mismatches"), i, m) {
		const char *test = json_string_value(json_object_get(m, "test"));
		for (int t = 0; test && t < SCREEN_TEST_COUNT; t++)
			if (strcmp(test, test_names[t]) == 0)
				l->mismatches[t]++;
		if (!l->nmm) {
			str_copy(l->first, sizeof l->first,
				 json_string_value(json_object_get(m, "text")) ?: "");
			snprintf(l->reason, sizeof l->reason, "screening: %s tile %lld differs (%s)",
				 test ? test : "?", (long long)json_integer_value(json_object_get(m, "tile")),
				 json_string_value(json_object_get(m, "basis")) ?: "?");
		}
		l->nmm++;
	}
	if (l->nmm > 1 && strlen(l->reason) + sizeof ", and more" <= sizeof l->reason)
		strcat(l->reason, ", and more");
	l->passed = l->nmm == 0;
	return 0;
}

/* Tell the health score: a mismatch makes the card drain-worthy, with
 * the test and tile in the reason; a run that passed clears it. */
static void note_health(struct screend *s, const struct last_run *l)
{
	struct health_live *hl = atomic_load(&s->health);
	if (hl)
		health_live_note(hl, l->uuid, HEALTH_MEASURE_CORRUPTION, !l->passed, l->reason);
}

static void record_range(const char *uuid, char *lo, char *hi, size_t len)
{
	snprintf(lo, len, "%s/", uuid);
	snprintf(hi, len, "%s/~", uuid);
}

bool screend_due(struct screend *s, struct tsdb *db, int gpu, const char *uuid, int64_t now_ms)
{
	struct gpu_state *g = gpu_of(s, gpu);
	if (!g || !s->scheduled)
		return false;
	pthread_mutex_lock(&s->mu);
	bool need = !g->due_known && db && uuid[0];
	pthread_mutex_unlock(&s->mu);
	if (need) {
		/* The newest stored run: when the next is due, and its result,
		 * which stays the card's verdict until the next run. */
		char lo[160], hi[160];
		record_range(uuid, lo, hi, sizeof lo);
		struct tsdb_record *rec = NULL;
		size_t n = 0;
		int64_t due = 0;
		struct last_run l = {0};
		json_t *o = NULL;
		if (tsdb_record_keys(db, SCREEND_RECORD_KIND, lo, hi, 1, &rec, &n) == 0 && n) {
			due = rec[0].t_ms + s->period_ms;
			o = json_loads(rec[0].json, 0, NULL);
			if (!o || summary_of(o, &l) != 0)
				log_warn("screen: stored run %s is unreadable; skipped", rec[0].key);
		}
		tsdb_records_free(rec, n);
		pthread_mutex_lock(&s->mu);
		if (!g->next_due_ms)
			g->next_due_ms = due;
		if (l.have && !g->last.have)
			g->last = l;
		g->due_known = true;
		pthread_mutex_unlock(&s->mu);
		if (l.have && !l.passed) {
			log_warn("screen: GPU %d (%s): its last screening found %zu mismatch%s: %s", gpu,
				 uuid, l.nmm, l.nmm == 1 ? "" : "es", l.first);
			note_health(s, &l);
		}
		json_decref(o);
	}
	pthread_mutex_lock(&s->mu);
	bool due = now_ms >= g->next_due_ms;
	pthread_mutex_unlock(&s->mu);
	return due;
}

void screend_started(struct screend *s, int gpu)
{
	struct gpu_state *g = gpu_of(s, gpu);
	if (!g)
		return;
	pthread_mutex_lock(&s->mu);
	g->running = true;
	pthread_mutex_unlock(&s->mu);
}

/* ---- the reference -------------------------------------------------------- */

/* Load into *ref the run r is compared with: the newest stored run of
 * the card in r's variant and sizes that passed, on r's driver and
 * kernels; when there is none, the newest that passed on another (so
 * that screen_compare says the new run starts a new reference). false:
 * no earlier run that passed. */
static bool load_reference(struct tsdb *db, const struct screen_result *r, struct screen_result *ref)
{
	if (!db)
		return false;
	char lo[160], hi[160];
	record_range(r->uuid, lo, hi, sizeof lo);
	struct tsdb_record *recs = NULL;
	size_t n = 0;
	if (tsdb_record_keys(db, SCREEND_RECORD_KIND, lo, hi, HISTORY_SCAN, &recs, &n) != 0)
		return false;
	ssize_t same = -1, other = -1;
	for (size_t i = 0; i < n && same < 0; i++) { /* newest first */
		json_t *o = json_loads(recs[i].json, 0, NULL);
		const char *mode = json_string_value(json_object_get(o, "mode"));
		const char *drv = json_string_value(json_object_get(o, "driver"));
		const char *ker = json_string_value(json_object_get(o, "kernels"));
		if (json_is_true(json_object_get(o, "passed")) && mode && strcmp(mode, r->mode) == 0 &&
		    json_is_true(json_object_get(o, "test_sizes")) == r->test_sizes) {
			if (drv && ker && strcmp(drv, r->driver) == 0 && strcmp(ker, r->kernels) == 0)
				same = (ssize_t)i;
			else if (other < 0)
				other = (ssize_t)i;
		}
		json_decref(o);
	}
	ssize_t pick = same >= 0 ? same : other;
	char err[256];
	bool ok = pick >= 0 && screen_result_from_json(recs[pick].json, ref, err, sizeof err) == 0;
	if (pick >= 0 && !ok)
		log_warn("screen: stored run %s is unreadable (%s); not a reference", recs[pick].key, err);
	tsdb_records_free(recs, n);
	return ok;
}

/* ---- the end of a run ------------------------------------------------------ */

void screend_finish(struct screend *s, struct tsdb *db, int gpu, int exit_status,
		    const struct buf *out, const char *errline, const char *abort_why,
		    int64_t now_ms, char *state, size_t state_len, char *msg, size_t msg_len)
{
	struct gpu_state *g = gpu_of(s, gpu);
	int64_t retry = now_ms + s->cfg->bench.retry_interval_ns / NS_PER_MS;
	enum outcome oc;
	if (abort_why[0]) {
		oc = OUT_ABORTED;
		str_copy(state, state_len, "aborted");
		snprintf(msg, msg_len, "%s: screening aborted, nothing kept; tried again when the GPU "
			 "is idle", abort_why);
		log_info("screen: GPU %d: %s: screening aborted, nothing kept", gpu, abort_why);
		goto count;
	}
	/* 0: passed; 3: mismatches found by the run itself. Both print the
	 * result on stdout; anything else is a run that did not screen. */
	int code = WIFEXITED(exit_status) ? WEXITSTATUS(exit_status) : -1;
	struct screen_result r = {0};
	char perr[256] = "";
	char *text = NULL;
	if ((code == 0 || code == 3) && out->len && out->len < MAX_RECORD) {
		text = strndup(out->data, out->len);
		if (text && screen_result_from_json(text, &r, perr, sizeof perr) != 0)
			code = -1;
	} else {
		code = -1;
	}
	if (code < 0) {
		bool refused = strstr(errline, "in use") || strstr(errline, "MIG") ||
			       strstr(errline, "no NVIDIA driver") || strstr(errline, "not enough") ||
			       strstr(errline, "out of memory");
		oc = refused ? OUT_REFUSED : OUT_FAILED;
		str_copy(state, state_len, refused ? "refused" : "failed");
		snprintf(msg, msg_len, "%s", errline[0] ? errline : perr[0] ? perr
					     : WIFSIGNALED(exit_status) ? strsignal(WTERMSIG(exit_status))
									: "no result");
		log_warn("screen: GPU %d: %s", gpu, msg);
		free(text);
		screen_result_free(&r);
		goto count;
	}
	/* The run's own mismatches are in its document; screen_result_from_json
	 * reads the digests only, so they are taken from the document and the
	 * reference's are added after them. */
	json_t *doc = json_loads(text, 0, NULL);
	free(text);
	struct screen_result ref;
	size_t differ = 0;
	if (load_reference(db, &r, &ref)) {
		differ = screen_compare(&r, &ref, "reference");
		screen_result_free(&ref);
	} else {
		snprintf(r.notes + strlen(r.notes), sizeof r.notes - strlen(r.notes), "%s%s",
			 r.notes[0] ? "; " : "", "no earlier run of this card: this run is its first reference");
	}
	/* The record: the document as the run wrote it, with the reference's
	 * mismatches and notes added. */
	json_t *mms = json_object_get(doc, "mismatches");
	if (!json_is_array(mms)) {
		mms = json_array();
		json_object_set_new(doc, "mismatches", mms);
	}
	for (size_t i = r.nmm - differ; i < r.nmm; i++) {
		const struct screen_mismatch *m = &r.mm[i];
		char line[512];
		screen_mismatch_text(m, line, sizeof line);
		json_array_append_new(mms, json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s}", "test", m->test,
						     "basis", m->basis, "tile", (json_int_t)m->tile,
						     "elements", (json_int_t)0, "of", (json_int_t)m->of,
						     "detail", m->detail, "text", line));
	}
	json_object_set_new(doc, "passed", json_boolean(json_array_size(mms) == 0));
	json_object_set_new(doc, "notes", json_string(r.notes));
	struct last_run l;
	summary_of(doc, &l);
	if (db) {
		char *rec = json_dumps(doc, JSON_COMPACT);
		char key[160];
		snprintf(key, sizeof key, "%s/%016lld", r.uuid, (long long)r.t_ms);
		if (!rec || tsdb_record_put(db, SCREEND_RECORD_KIND, key, r.t_ms, rec) != 0)
			log_warn("screen: cannot keep the screening of GPU %d in the store", gpu);
		free(rec);
		size_t pruned = 0;
		tsdb_record_prune(db, SCREEND_RECORD_KIND, now_ms - s->cfg->bench.retention_ns / NS_PER_MS,
				  &pruned);
	}
	oc = l.passed ? OUT_PASSED : OUT_MISMATCH;
	str_copy(state, state_len, "done");
	if (l.passed) {
		snprintf(msg, msg_len, "screening passed%s%s", r.notes[0] ? ": " : "", r.notes);
		log_info("screen: GPU %d (%s) screened (%s) in %.1f s: passed%s%s", gpu, r.uuid, r.mode,
			 r.seconds, r.notes[0] ? "; " : "", r.notes);
	} else {
		snprintf(msg, msg_len, "SCREENING FAILED: %zu mismatch%s: %s", l.nmm,
			 l.nmm == 1 ? "" : "es", l.first);
		log_error("screen: GPU %d (%s): %zu mismatch%s: %s", gpu, r.uuid, l.nmm,
			  l.nmm == 1 ? "" : "es", l.first);
	}
	pthread_mutex_lock(&s->mu);
	if (g)
		g->last = l;
	pthread_mutex_unlock(&s->mu);
	note_health(s, &l);
	json_decref(doc);
	screen_result_free(&r);
	retry = now_ms + s->period_ms;
count:
	pthread_mutex_lock(&s->mu);
	if (g) {
		g->runs[oc]++;
		g->running = false;
		g->next_due_ms = retry;
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---- /metrics and the status ---------------------------------------------- */

void screend_emit(struct screend *s, struct profile_emitter *e, unsigned ngpus)
{
	if (!s)
		return;
	static const char *const gl[] = {"gpu", "uuid", "model"};
	static const char *const tl[] = {"gpu", "uuid", "model", "test"};
	pthread_mutex_lock(&s->mu);
	for (int f = 0; f < 3; f++) {
		static const struct {
			const char *name, *help;
		} fam[] = {
			{"gpulse_gpu_screen_last_run_timestamp_seconds",
			 "When the GPU's last kept silent-corruption screening started (Unix seconds)."},
			{"gpulse_gpu_screen_passed",
			 "1 when the GPU's last screening passed every check (the CPU reference, its "
			 "repetitions, the memory pattern, its own earlier digests on this driver); 0: "
			 "a mismatch (GPUSilentCorruption)."},
			{"gpulse_gpu_screen_mismatches",
			 "Tiles of each test of the last screening whose results differ from what they "
			 "must be (the test label; 0: none)."},
		};
		profile_family(e, fam[f].name, PROFILE_GAUGE, fam[f].help);
		for (unsigned g = 0; g < SCREEND_MAX_GPUS; g++) {
			const struct last_run *l = &s->gpu[g].last;
			if (!l->have)
				continue;
			char idx[16];
			snprintf(idx, sizeof idx, "%u", g);
			const char *gv[] = {idx, l->uuid, l->name, NULL};
			if (f == 0)
				e->sample(e, gl, gv, 3, (double)l->t_ms / 1e3);
			else if (f == 1)
				e->sample(e, gl, gv, 3, l->passed ? 1 : 0);
			else
				for (int t = 0; t < SCREEN_TEST_COUNT; t++) {
					gv[3] = test_names[t];
					e->sample(e, tl, gv, 4, l->mismatches[t]);
				}
		}
	}
	profile_family(e, "gpulse_gpu_screen_runs_total", PROFILE_COUNTER,
		       "Scheduled silent-corruption screenings by outcome: passed, mismatch, aborted "
		       "(a process appeared; nothing kept), refused (the GPU was in use, no driver, "
		       "no memory), failed.");
	static const char *const ol[] = {"gpu", "outcome"};
	for (unsigned g = 0; g < SCREEND_MAX_GPUS; g++) {
		char idx[16];
		snprintf(idx, sizeof idx, "%u", g);
		for (int o = 0; o < OUT_COUNT; o++)
			if (s->gpu[g].runs[o] || (s->scheduled && g < ngpus))
				e->sample(e, ol, (const char *const[]){idx, outcome_names[o]}, 2,
					  (double)s->gpu[g].runs[o]);
	}
	profile_family(e, "gpulse_gpu_screen_running", PROFILE_GAUGE,
		       "1 while a silent-corruption screening runs on the GPU of its gpu label.");
	for (unsigned g = 0; g < SCREEND_MAX_GPUS; g++)
		if (s->gpu[g].running) {
			char idx[16];
			snprintf(idx, sizeof idx, "%u", g);
			e->sample(e, (const char *const[]){"gpu"}, (const char *const[]){idx}, 1, 1);
		}
	pthread_mutex_unlock(&s->mu);
}

void screend_status_json(struct screend *s, int gpu, struct buf *o)
{
	struct gpu_state *g = s ? gpu_of(s, gpu) : NULL;
	if (!g)
		return;
	pthread_mutex_lock(&s->mu);
	buf_printf(o, ",\"screen\":{\"scheduled\":%s,\"variant\":", s->scheduled ? "true" : "false");
	buf_put_json_string(o, s->cfg->screen.variant);
	buf_printf(o, ",\"running\":%s", g->running ? "true" : "false");
	if (s->scheduled && g->due_known) {
		buf_puts(o, ",\"next_due\":\"");
		buf_put_rfc3339(o, g->next_due_ms, false);
		buf_putc(o, '"');
	}
	const struct last_run *l = &g->last;
	if (l->have) {
		buf_puts(o, ",\"last\":{\"time\":\"");
		buf_put_rfc3339(o, l->t_ms, false);
		buf_puts(o, "\",\"uuid\":");
		buf_put_json_string(o, l->uuid);
		buf_puts(o, ",\"driver\":");
		buf_put_json_string(o, l->driver);
		buf_puts(o, ",\"mode\":");
		buf_put_json_string(o, l->mode);
		buf_printf(o, ",\"passed\":%s,\"mismatches\":{", l->passed ? "true" : "false");
		for (int t = 0; t < SCREEN_TEST_COUNT; t++)
			buf_printf(o, "%s\"%s\":%u", t ? "," : "", test_names[t], l->mismatches[t]);
		buf_puts(o, "},\"first_mismatch\":");
		buf_put_json_string(o, l->first);
		buf_puts(o, ",\"notes\":");
		buf_put_json_string(o, l->notes);
		buf_putc(o, '}');
	}
	buf_puts(o, ",\"runs\":{");
	for (int oc = 0; oc < OUT_COUNT; oc++)
		buf_printf(o, "%s\"%s\":%llu", oc ? "," : "", outcome_names[oc],
			   (unsigned long long)g->runs[oc]);
	buf_puts(o, "}}");
	pthread_mutex_unlock(&s->mu);
}
