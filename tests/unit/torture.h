/* Allocation torture for the unit tests (issue 14), curl's habit: run a
 * scenario once counting its allocations, then once per allocation k with
 * the k-th one failing, and check that each run either succeeds or ends in
 * a clean error, leaking nothing. torture_shim.c says how allocations are
 * interposed and which of them may fail. */
#ifndef GPULSE_TEST_TORTURE_H
#define GPULSE_TEST_TORTURE_H

#include <stdbool.h>
#include <stddef.h>

/* Which allocations are counted and failed. */
enum torture_scope {
	/* Those meant to recover: the direct malloc/calloc/realloc/strdup
	 * calls of the code (the store's, and the parts of the rule engine
	 * that return GPULSE_ENOMEM), and SQLite's own once
	 * torture_route_sqlite ran. Not those through xalloc.h, which abort
	 * by design (STYLE.md: "the daemon may abort on out-of-memory through
	 * one wrapper"). */
	TORTURE_RECOVERABLE,
	/* Every allocation, xalloc's included: run in a child per failure
	 * point, where an xalloc failure must end in xalloc's abort and
	 * nothing else (no crash from an unchecked pointer). */
	TORTURE_ALL,
};

/* A scenario: 0 when it completed, a GPULSE_ status when it stopped at a
 * clean error, -1 when it saw a broken contract (it prints why). */
typedef int torture_scenario_fn(void *ctx);

struct torture_report {
	long points;        /* allocations counted in the clean run */
	long runs;          /* failure points tried */
	long completed;     /* runs that completed anyway */
	long clean_errors;  /* runs that stopped at a clean error */
	long aborted;       /* TORTURE_ALL: runs that ended in xalloc's abort */
	long bad;           /* contract broken, leak, crash: each is printed */
};

/* Send SQLite's allocations through the counter (sqlite3_config
 * SQLITE_CONFIG_MALLOC). Must run before anything opens SQLite. 0 or an
 * SQLite code. */
int torture_route_sqlite(void);

/* Run `fn` clean, then failing allocation k for k = 1..points, at most
 * `max_runs` of them (0: all), spread evenly and deterministically. In
 * TORTURE_RECOVERABLE every run is in this process and must free what it
 * allocated (the count of live blocks after it equals the clean run's);
 * in TORTURE_ALL each failing run is a child process. The clean run must
 * complete (0). Fills *r; returns r->bad. */
long torture_run(const char *name, enum torture_scope scope, torture_scenario_fn *fn, void *ctx,
		 long max_runs, struct torture_report *r);

/* Fail only every stride-th of SQLite's allocations in a row (the first
 * and the last of each row always), every one of the code's own still;
 * 1 (the default): every allocation. For scenarios where SQLite's
 * allocations are most of the points (opening and creating stores): the
 * code sees each SQLite call fail all the same, and the run stays within
 * its time on a loaded machine. Set before torture_run. */
void torture_sqlite_stride(long stride);

/* Whether the current run has failed its allocation yet (scenarios use it
 * to tell an injected failure from a real one). */
bool torture_injected(void);

/* SQLite writes: a VFS over the default one, made the default, that
 * fails the k-th write (SQLITE_FULL or SQLITE_IOERR_WRITE), sync
 * (SQLITE_IOERR_FSYNC) or truncate (SQLITE_IOERR_TRUNCATE) of any file
 * opened after, counting from torture_io_arm; with `sticky` every one from
 * the k-th on (a disk that stays full); k 0: count only. Disarm returns
 * the count. Install: 0 or an SQLite code. */
int torture_io_install(void);
void torture_io_uninstall(void);
void torture_io_arm(long k, bool sticky);
long torture_io_disarm(void);

/* While on, allocations are neither counted nor failed: for a set-up that
 * another scenario tortures already. */
void torture_pause(bool on);

/* A store's file in a temporary folder, for cmocka's set-up and tear-down:
 * thousands of stores are made and removed, so in memory where there is
 * a tmpfs (fsync there costs nothing). torture_store_remove deletes the
 * file and its -wal, -shm, -journal and .lock. */
extern char torture_store_dir[80], torture_store_path[128];
int torture_store_setup(void **state);
int torture_store_teardown(void **state);
void torture_store_remove(void);

#endif
