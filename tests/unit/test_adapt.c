/* Adaptive sampling (src/collect/adapt.c) on an injected clock: a steady
 * stretch is read at the floor, a moving one at the ceiling, every cause
 * of a move (a change past the threshold, a process, a throttle reason,
 * an XID, a raise) brings the dear reads to the ceiling at the next sweep,
 * and, replayed sweep by sweep as the collector makes them, the two
 * labelled H200 recordings lose no change of memory use over 5% of the
 * card for more than one ceiling period. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "collect/adapt.h"
#include "common/clock.h"
#include "record/recording.h"
#include "common/status.h"

#define CEIL_FAST (100 * NS_PER_MS)
#define CEIL_NORMAL (1 * NS_PER_SEC)
#define T0 (5 * NS_PER_SEC)   /* the monotonic clock at the first sweep */

/* A GPU as the test plays it, and what the collector would have read. */
struct sim {
	struct adapt_state st;
	struct adapt_config cfg;
	double mem_held;          /* the memory value the snapshot holds */
	bool mem_held_valid;
	int mem_reads, gpm_reads;
};

static void sim_init(struct sim *s)
{
	memset(s, 0, sizeof *s);
	adapt_init(&s->st);
	adapt_config_defaults(&s->cfg);
}

/* One fast sweep at `now` with the true values util, power, memory used
 * (of 100 GB). */
static void fast_sweep(struct sim *s, int64_t now, double util, double power, double mem)
{
	struct gpu_update u;
	memset(&u, 0, sizeof u);
	uint64_t skip = adapt_plan(&s->st, &s->cfg, TIER_FAST, CEIL_FAST, now);
	u.v[F_GPU_UTIL] = util;
	u.v[F_POWER] = power;
	u.valid = FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_POWER);
	if (!(skip & FIELD_BIT(F_MEM_USED))) {
		u.v[F_MEM_USED] = mem;
		u.v[F_MEM_TOTAL] = 100e9;
		u.valid |= FIELD_BIT(F_MEM_USED) | FIELD_BIT(F_MEM_TOTAL);
		s->mem_held = mem;
		s->mem_held_valid = true;
		s->mem_reads++;
	}
	adapt_observe(&s->st, &s->cfg, &u, now);
}

/* One normal sweep with `npids` processes (pids 100..), throttle reasons
 * and SM activity. */
static void normal_sweep(struct sim *s, int64_t now, int npids, uint64_t reasons, double sm)
{
	struct gpu_update u;
	memset(&u, 0, sizeof u);
	uint64_t skip = adapt_plan(&s->st, &s->cfg, TIER_NORMAL, CEIL_NORMAL, now);
	u.has_procs = true;
	u.nprocs = npids;
	for (int i = 0; i < npids; i++)
		u.procs[i].pid = (uint32_t)(100 + i);
	u.v[F_PROC_COUNT] = npids;
	u.v[F_CLOCK_REASONS] = (double)reasons;
	u.valid = FIELD_BIT(F_PROC_COUNT) | FIELD_BIT(F_CLOCK_REASONS);
	if (!(skip & FIELD_BIT(F_GPM_SM))) {
		u.v[F_GPM_SM] = sm;
		u.valid |= FIELD_BIT(F_GPM_SM);
		s->gpm_reads++;
	}
	adapt_observe(&s->st, &s->cfg, &u, now);
}

/* 60 s steady: memory read at 1 s, GPM at 2 s, not at 100 ms and 1 s. */
static void test_steady_reads_at_the_floor(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s);
	for (int k = 0; k < 600; k++) {
		int64_t now = T0 + k * CEIL_FAST;
		fast_sweep(&s, now, 0.0, 90.0 + (k % 3) * 0.5, 600e6);
		if (k % 10 == 0)
			normal_sweep(&s, now, 1, 0x1, 0.0);
	}
	assert_int_equal(s.mem_reads, 60);
	assert_int_equal(s.gpm_reads, 30);
	assert_false(adapt_is_moving(&s.st, T0 + 600 * CEIL_FAST));
	assert_int_equal(atomic_load(&s.st.reads[AG_MEMORY]), 60);
	assert_int_equal(atomic_load(&s.st.skips[AG_MEMORY]), 540);
}

/* A utilization step moves the GPU: memory is read at every sweep from
 * the next one on, until quiet has passed with nothing moving; then the
 * floor again. */
static void test_move_reads_at_the_ceiling_then_quiets(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s);
	int k = 0;
	for (; k < 50; k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.0, 90.0, 1e9);
	int before = s.mem_reads;
	/* Moving for 5 s: utilization alternates 0.3 / 0.9. */
	for (; k < 100; k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, (k % 2) ? 0.9 : 0.3, 90.0, 1e9);
	/* Every sweep from the first move on read memory (the first at
	 * its floor, k = 50, the others because the GPU moves). */
	assert_int_equal(s.mem_reads - before, 50);
	/* Steady again: 10 s of quiet at the ceiling, then the floor. */
	int at_quiet_start = s.mem_reads;
	for (int j = 0; j < 100; j++, k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.9, 90.0, 1e9);
	assert_int_equal(s.mem_reads - at_quiet_start, 99);
	int at_floor = s.mem_reads;
	for (int j = 0; j < 100; j++, k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.9, 90.0, 1e9);
	assert_in_range(s.mem_reads - at_floor, 9, 11);
}

/* A memory jump with nothing else moving is read at the next floor read,
 * and the GPU then moves (memory at the ceiling) for the quiet period. */
static void test_memory_jump_alone(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s);
	int k = 0;
	for (; k < 30; k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.0, 90.0, 1e9);
	int64_t jump = T0 + k * CEIL_FAST;
	int64_t seen = 0;
	for (; k < 60; k++) {
		int64_t now = T0 + k * CEIL_FAST;
		fast_sweep(&s, now, 0.0, 90.0, 80e9);
		if (!seen && s.mem_held == 80e9)
			seen = now;
	}
	assert_true(seen > 0);
	assert_true(seen - jump <= s.cfg.floor_ns[TIER_FAST]);
	assert_true(adapt_is_moving(&s.st, T0 + k * CEIL_FAST));
	assert_int_equal(atomic_load(&s.st.moves[AC_CHANGE]), 1);
}

/* A process starting, a throttle reason appearing and an XID each move
 * the GPU; the idle reason appearing does not. */
static void test_causes(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s);
	int64_t now = T0;
	for (int k = 0; k < 3; k++, now += CEIL_NORMAL)
		normal_sweep(&s, now, 1, 0x0, 0.0);
	assert_false(adapt_is_moving(&s.st, now));
	normal_sweep(&s, now, 1, 0x1, 0.0);   /* gpu_idle appears: work stopped */
	assert_false(adapt_is_moving(&s.st, now));

	normal_sweep(&s, now, 2, 0x1, 0.0);
	assert_true(adapt_is_moving(&s.st, now));
	assert_int_equal(atomic_load(&s.st.moves[AC_PROCESS]), 1);
	now += 11 * NS_PER_SEC;
	normal_sweep(&s, now, 2, 0x1, 0.0);
	assert_false(adapt_is_moving(&s.st, now));

	normal_sweep(&s, now, 2, 0x1 | 0x4, 0.0);  /* sw_power_cap appears */
	assert_true(adapt_is_moving(&s.st, now));
	assert_int_equal(atomic_load(&s.st.moves[AC_REASON]), 1);
	now += 11 * NS_PER_SEC;
	normal_sweep(&s, now, 2, 0x1 | 0x4, 0.0);
	assert_false(adapt_is_moving(&s.st, now));

	adapt_note_xid(&s.st);   /* the event thread */
	assert_false(adapt_is_moving(&s.st, now));
	normal_sweep(&s, now, 2, 0x1 | 0x4, 0.0);
	assert_true(adapt_is_moving(&s.st, now));
	assert_int_equal(atomic_load(&s.st.moves[AC_XID]), 1);
}

/* A raise holds every group at the ceiling until its end, however
 * steady the GPU; a shorter raise does not cut a longer one. */
static void test_raise(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s);
	int k = 0;
	for (; k < 20; k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.0, 90.0, 1e9);
	int64_t now = T0 + k * CEIL_FAST;
	adapt_raise(&s.st, now + 30 * NS_PER_SEC);
	adapt_raise(&s.st, now + 1 * NS_PER_SEC);
	int before = s.mem_reads, gpm_before = s.gpm_reads;
	for (int j = 0; j < 300; j++, k++) {
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.0, 90.0, 1e9);
		if (j % 10 == 0)
			normal_sweep(&s, T0 + k * CEIL_FAST, 1, 0, 0.0);
	}
	assert_int_equal(s.mem_reads - before, 300);
	assert_int_equal(s.gpm_reads - gpm_before, 30);
	assert_false(adapt_is_moving(&s.st, T0 + (k + 1) * CEIL_FAST));
}

/* Disabled, or a floor not above the ceiling: every sweep reads. */
static void test_disabled(void **state)
{
	(void)state;
	struct sim s;
	sim_init(&s);
	s.cfg.enabled = false;
	for (int k = 0; k < 50; k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.0, 90.0, 1e9);
	assert_int_equal(s.mem_reads, 50);
	sim_init(&s);
	s.cfg.floor_ns[TIER_FAST] = CEIL_FAST;
	for (int k = 0; k < 50; k++)
		fast_sweep(&s, T0 + k * CEIL_FAST, 0.0, 90.0, 1e9);
	assert_int_equal(s.mem_reads, 50);
}

/* The labelled recordings, sweep by sweep as the collector reads them
 * (the fast tier at each 10 Hz row, memory when planned): the longest run
 * of rows in which the memory value held is off by over 5% of the card,
 * and the memory reads made. */
/* The span of the phase labelled "idle" in `labels` (its CSV: phase,
 * start, end in Unix seconds). */
static void idle_phase(const char *labels, double *from, double *to)
{
	FILE *f = fopen(labels, "r");
	assert_non_null(f);
	char line[256];
	*from = *to = 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "idle,%lf,%lf", from, to) == 2)
			break;
	fclose(f);
	assert_true(*to > *from);
}

static void replay_recording(const char *name, const char *labels, int *longest_miss,
			     size_t *reads, size_t *rows, size_t *idle_reads, size_t *idle_rows)
{
	char path[1024], err[256];
	const char *data = getenv("GPULSE_TEST_DATA");
	assert_non_null(data);
	snprintf(path, sizeof path, "%s/recordings/%s", data, labels);
	double idle_from, idle_to;
	idle_phase(path, &idle_from, &idle_to);
	snprintf(path, sizeof path, "%s/recordings/%s", data, name);
	struct recording *rec = NULL;
	assert_int_equal(recording_load(path, &rec, err, sizeof err), GPULSE_OK);
	struct adapt_state st;
	struct adapt_config cfg;
	adapt_init(&st);
	adapt_config_defaults(&cfg);
	double held = -1, t0 = rec->rows[0].t_s;
	int run = 0;
	*longest_miss = 0;
	*reads = *idle_reads = *idle_rows = 0;
	*rows = rec->nrows;
	for (size_t i = 0; i < rec->nrows; i++) {
		const struct rec_row *r = &rec->rows[i];
		int64_t now = T0 + (int64_t)((r->t_s - t0) * 1e9);
		struct gpu_update u;
		memset(&u, 0, sizeof u);
		uint64_t skip = adapt_plan(&st, &cfg, TIER_FAST, CEIL_FAST, now);
		u.valid = r->valid & fields_of_tier(TIER_FAST) & ~skip;
		memcpy(u.v, r->v, sizeof u.v);
		bool read = !(skip & FIELD_BIT(F_MEM_USED));
		if (read) {
			held = r->v[F_MEM_USED];
			(*reads)++;
		}
		adapt_observe(&st, &cfg, &u, now);
		/* The idle phase is steady once the quiet period after
		 * the phase before has passed. */
		if (r->t_s > idle_from + 10.5 && r->t_s < idle_to) {
			(*idle_rows)++;
			*idle_reads += read;
		}
		if (held >= 0 && (r->v[F_MEM_USED] - held > 0.05 * r->v[F_MEM_TOTAL] ||
				  held - r->v[F_MEM_USED] > 0.05 * r->v[F_MEM_TOTAL])) {
			if (++run > *longest_miss)
				*longest_miss = run;
		} else {
			run = 0;
		}
	}
	recording_free(rec);
}

static void test_labelled_recordings(void **state)
{
	(void)state;
	static const char *const names[] = {"h200-phases-10hz.csv", "h200-mixed-10hz.csv"};
	static const char *const labels[] = {"h200-phases-labels.csv", "h200-mixed-labels.csv"};
	size_t all_idle_rows = 0;
	for (size_t i = 0; i < 2; i++) {
		int miss;
		size_t reads, rows, idle_reads, idle_rows;
		replay_recording(names[i], labels[i], &miss, &reads, &rows, &idle_reads, &idle_rows);
		print_message("%s: memory read %zu of %zu rows, idle %zu of %zu, longest miss %d rows\n",
			      names[i], reads, rows, idle_reads, idle_rows, miss);
		/* Never off by 5% of the card past one ceiling period. */
		assert_true(miss <= 1);
		/* The idle phase, once steady, at the floor: one read a
		 * second (the phases are 10-12 s, the quiet 10 s: only the
		 * longer idle phase has rows left). */
		assert_true(idle_reads * 10 <= idle_rows + 10);
		all_idle_rows += idle_rows;
		assert_true(reads < rows);
	}
	assert_true(all_idle_rows > 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_steady_reads_at_the_floor),
		cmocka_unit_test(test_move_reads_at_the_ceiling_then_quiets),
		cmocka_unit_test(test_memory_jump_alone),
		cmocka_unit_test(test_causes),
		cmocka_unit_test(test_raise),
		cmocka_unit_test(test_disabled),
		cmocka_unit_test(test_labelled_recordings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
