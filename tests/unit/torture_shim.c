/* The allocation shim of the torture tests (torture.h), linked only into
 * tests/unit/test_torture_*.
 *
 * How allocations are interposed: the test programs are linked with
 * -Wl,--wrap=malloc,calloc,realloc,strdup,free and --wrap=xmalloc, xcalloc,
 * xrealloc, xstrdup (tests/CMakeLists.txt). The gpulse code comes from
 * static libraries, so every call it makes to those names binds to the
 * __wrap_ functions below, which count and may fail, then call the real
 * ones (__real_malloc is whatever malloc the program has: glibc's, or
 * AddressSanitizer's, so ASan and LeakSanitizer keep working). Nothing is
 * preloaded and no allocator is replaced, which is what makes this
 * sturdier than a malloc hook or an LD_PRELOAD library: the shared
 * libraries (libc, SQLite, libyaml, jansson) and the sanitizers allocate
 * as usual. SQLite's own allocations are counted too, through its
 * documented hook (SQLITE_CONFIG_MALLOC): SQLite is built to survive
 * SQLITE_NOMEM anywhere, so the store must survive it as well.
 *
 * xalloc: calls from other files to xmalloc and friends go to
 * __wrap_xmalloc, which marks the thread as inside xalloc while the real
 * one runs; the malloc it makes is then known to be one that aborts on
 * failure by design. TORTURE_RECOVERABLE never fails those;
 * TORTURE_ALL does, in a child, and counts xalloc's abort as the expected
 * end (a SIGABRT handler that sees the flag exits with ABORT_BY_DESIGN).
 *
 * Leaks: the shim counts live blocks of the code's own (malloc +1, free
 * -1) and of SQLite's; a failing run must end with the same counts as the
 * clean run, so the failure point that leaked is named at once, in every
 * build (LeakSanitizer in the ASan stage also checks at exit). A block a
 * library allocated and the code frees (jansson's json_dumps) counts -1
 * alike in both runs. Not wrapped: what the libraries allocate for
 * themselves (libc's regcomp, libyaml, jansson, libcurl), and strndup,
 * asprintf and the like, which the tortured code does not call. */
#include "torture.h"

#include <execinfo.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ABORT_BY_DESIGN 86

void *__real_malloc(size_t n);
void *__real_calloc(size_t c, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void __real_free(void *p);
void *__real_xmalloc(size_t n);
void *__real_xcalloc(size_t c, size_t n);
void *__real_xrealloc(void *p, size_t n);
char *__real_xstrdup(const char *s);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t c, size_t n);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
void __wrap_free(void *p);
void *__wrap_xmalloc(size_t n);
void *__wrap_xcalloc(size_t c, size_t n);
void *__wrap_xrealloc(void *p, size_t n);
char *__wrap_xstrdup(const char *s);

/* The scenarios run on one thread, but the store may start its own
 * (the flusher): the counters are atomic. */
static enum torture_scope scope;
static long fail_at;          /* 0: count only */
static long counted;
static int injected;
static long live;             /* the code's own blocks */
static long sq_live;          /* SQLite's */
static __thread int in_x;     /* inside xalloc on this thread */
static int trace;             /* TORTURE_TRACE set */
static int paused;            /* torture_pause */
/* torture_sqlite_stride: the clean run notes which points are SQLite's
 * (kinds[k - 1]), under the counter's order, which every run repeats. */
static long sq_stride = 1;
static bool *kinds;
static long nkinds, kinds_cap;
static bool noting;

void torture_sqlite_stride(long stride)
{
	sq_stride = stride > 1 ? stride : 1;
}

/* The clean run's point k was SQLite's. */
static void note_kind(long k, bool sq)
{
	if (!noting || k <= 0)
		return;
	if (k > kinds_cap) {
		long cap = kinds_cap ? kinds_cap * 2 : 4096;
		while (cap < k)
			cap *= 2;
		bool *n = __real_realloc(kinds, (size_t)cap * sizeof *kinds);
		if (!n) {
			noting = false;   /* every point is then tried */
			nkinds = 0;
			return;
		}
		kinds = n;
		kinds_cap = cap;
	}
	kinds[k - 1] = sq;
	if (k > nkinds)
		nkinds = k;
}

/* Whether failure point k is tried: every one of the code's own; of a run
 * of SQLite's between two of the code's, the first, the last and every
 * sq_stride-th (one API call's allocations end in the same SQLITE_NOMEM
 * for the code; SQLite's own tests fail each of them). */
static bool tried(long k)
{
	if (sq_stride <= 1 || k > nkinds || !kinds[k - 1])
		return true;
	if (k == 1 || !kinds[k - 2] || k == nkinds || !kinds[k])
		return true;
	long first = k;
	while (first > 1 && kinds[first - 2])
		first--;
	return (k - first) % sq_stride == 0;
}

void torture_pause(bool on)
{
	__atomic_store_n(&paused, on, __ATOMIC_SEQ_CST);
}

bool torture_injected(void)
{
	return __atomic_load_n(&injected, __ATOMIC_SEQ_CST) != 0;
}

/* Whether this allocation fails (sq: it is SQLite's). */
static int fail_now(int x, bool sq)
{
	if ((x && scope == TORTURE_RECOVERABLE) || __atomic_load_n(&paused, __ATOMIC_SEQ_CST))
		return 0;
	long k = __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST);
	note_kind(k, sq);
	if (fail_at <= 0 || k != fail_at)
		return 0;
	__atomic_store_n(&injected, x ? 2 : 1, __ATOMIC_SEQ_CST);
	/* TORTURE_TRACE=1: where each failure is injected (addr2line or gdb
	 * turn the addresses into lines). */
	if (trace) {
		void *bt[24];
		int n = backtrace(bt, 24);
		fprintf(stderr, "torture: failing allocation %ld here:\n", k);
		backtrace_symbols_fd(bt, n, 2);
	}
	return 1;
}

static void *got(void *p)
{
	if (p)
		__atomic_add_fetch(&live, 1, __ATOMIC_SEQ_CST);
	return p;
}

void *__wrap_malloc(size_t n)
{
	return fail_now(in_x, false) ? NULL : got(__real_malloc(n));
}

void *__wrap_calloc(size_t c, size_t n)
{
	return fail_now(in_x, false) ? NULL : got(__real_calloc(c, n));
}

void *__wrap_realloc(void *p, size_t n)
{
	if (fail_now(in_x, false))
		return NULL;
	void *q = __real_realloc(p, n);
	if (!p)
		return got(q);
	if (!n && !q)   /* glibc: realloc(p, 0) frees p */
		__atomic_sub_fetch(&live, 1, __ATOMIC_SEQ_CST);
	return q;
}

char *__wrap_strdup(const char *s)
{
	return fail_now(in_x, false) ? NULL : got(__real_strdup(s));
}

void __wrap_free(void *p)
{
	if (p)
		__atomic_sub_fetch(&live, 1, __ATOMIC_SEQ_CST);
	__real_free(p);
}

void *__wrap_xmalloc(size_t n)
{
	in_x++;
	void *p = __real_xmalloc(n);
	in_x--;
	return p;
}

void *__wrap_xcalloc(size_t c, size_t n)
{
	in_x++;
	void *p = __real_xcalloc(c, n);
	in_x--;
	return p;
}

void *__wrap_xrealloc(void *p, size_t n)
{
	in_x++;
	void *q = __real_xrealloc(p, n);
	in_x--;
	return q;
}

char *__wrap_xstrdup(const char *s)
{
	in_x++;
	char *p = __real_xstrdup(s);
	in_x--;
	return p;
}

/* ---- SQLite's allocator: the real malloc behind a 16-byte size header ---- */

static void *sq_malloc(int n)
{
	if (fail_now(0, true))
		return NULL;
	uint64_t *p = __real_malloc((size_t)n + 16);
	if (!p)
		return NULL;
	__atomic_add_fetch(&sq_live, 1, __ATOMIC_SEQ_CST);
	p[0] = (uint64_t)n;
	return p + 2;
}

static void sq_free(void *p)
{
	if (!p)
		return;
	__atomic_sub_fetch(&sq_live, 1, __ATOMIC_SEQ_CST);
	__real_free((uint64_t *)p - 2);
}

static void *sq_realloc(void *p, int n)
{
	if (!p)
		return sq_malloc(n);
	if (fail_now(0, true))
		return NULL;
	uint64_t *q = __real_realloc((uint64_t *)p - 2, (size_t)n + 16);
	if (!q)
		return NULL;
	q[0] = (uint64_t)n;
	return q + 2;
}

static int sq_size(void *p)
{
	return p ? (int)((uint64_t *)p - 2)[0] : 0;
}

static int sq_roundup(int n)
{
	return (n + 7) & ~7;
}

static int sq_init(void *app)
{
	(void)app;
	return SQLITE_OK;
}

static void sq_shutdown(void *app)
{
	(void)app;
}

int torture_route_sqlite(void)
{
	static const sqlite3_mem_methods m = {
		.xMalloc = sq_malloc, .xFree = sq_free, .xRealloc = sq_realloc,
		.xSize = sq_size, .xRoundup = sq_roundup, .xInit = sq_init,
		.xShutdown = sq_shutdown,
	};
	int rc = sqlite3_config(SQLITE_CONFIG_MALLOC, &m);
	/* Lookaside buffers would hide small allocations from the hook. */
	if (rc == SQLITE_OK)
		rc = sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);
	return rc;
}

/* ---- SQLite writes (torture.h). As in test_tsdb's full-disk VFS, each
 * file is the real VFS's own with its method table swapped for a copy
 * that counts. ---- */
static sqlite3_vfs fault_vfs;
static sqlite3_vfs *real_vfs;
static struct {
	const sqlite3_io_methods *real;
	sqlite3_io_methods fake;
} tables[4];
static long io_count, io_fail_at;
static bool io_armed;
static bool io_sticky;   /* every operation from the k-th on fails: a disk that stays full */

static const sqlite3_io_methods *real_of(sqlite3_file *f)
{
	for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
		if (f->pMethods == &tables[i].fake)
			return tables[i].real;
	return NULL;
}

static bool io_fail(void)
{
	if (!io_armed)
		return false;
	++io_count;
	return io_fail_at > 0 && (io_sticky ? io_count >= io_fail_at : io_count == io_fail_at);
}

static int fault_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
	if (io_fail())
		return io_fail_at % 2 ? SQLITE_FULL : SQLITE_IOERR_WRITE;
	return real_of(f)->xWrite(f, p, n, off);
}

static int fault_sync(sqlite3_file *f, int flags)
{
	return io_fail() ? SQLITE_IOERR_FSYNC : real_of(f)->xSync(f, flags);
}

static int fault_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return io_fail() ? SQLITE_IOERR_TRUNCATE : real_of(f)->xTruncate(f, size);
}

static int fault_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	(void)vfs;
	int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);
	if (rc != SQLITE_OK || !f->pMethods)
		return rc;
	for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
		if (!tables[i].real) {
			tables[i].real = f->pMethods;
			tables[i].fake = *f->pMethods;
			tables[i].fake.xWrite = fault_write;
			tables[i].fake.xSync = fault_sync;
			tables[i].fake.xTruncate = fault_truncate;
		}
		if (tables[i].real == f->pMethods) {
			f->pMethods = &tables[i].fake;
			break;
		}
	}
	return rc;
}

int torture_io_install(void)
{
	real_vfs = sqlite3_vfs_find(NULL);
	if (!real_vfs)
		return SQLITE_ERROR;
	fault_vfs = *real_vfs;
	fault_vfs.zName = "gpulse-test-faults";
	fault_vfs.pNext = NULL;
	fault_vfs.xOpen = fault_open;
	return sqlite3_vfs_register(&fault_vfs, 1);
}

void torture_io_uninstall(void)
{
	sqlite3_vfs_unregister(&fault_vfs);
}

void torture_io_arm(long k, bool sticky)
{
	io_count = 0;
	io_fail_at = k;
	io_sticky = sticky;
	io_armed = true;
}

long torture_io_disarm(void)
{
	io_armed = false;
	return io_count;
}

/* ---- the runner ---- */

static void arm(enum torture_scope s, long k)
{
	scope = s;
	__atomic_store_n(&counted, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&injected, 0, __ATOMIC_SEQ_CST);
	fail_at = k;
}

static void on_abort(int sig)
{
	(void)sig;
	if (__atomic_load_n(&injected, __ATOMIC_SEQ_CST) == 2)
		_exit(ABORT_BY_DESIGN);
	signal(SIGABRT, SIG_DFL);
	raise(SIGABRT);
}

static void tally(struct torture_report *r, int rc)
{
	if (rc == 0)
		r->completed++;
	else if (rc > 0)
		r->clean_errors++;
	else
		r->bad++;
}

long torture_run(const char *name, enum torture_scope s, torture_scenario_fn *fn, void *ctx,
		 long max_runs, struct torture_report *r)
{
	memset(r, 0, sizeof *r);
	trace = getenv("TORTURE_TRACE") != NULL;
	long live0 = __atomic_load_n(&live, __ATOMIC_SEQ_CST);
	long sq0 = __atomic_load_n(&sq_live, __ATOMIC_SEQ_CST);
	arm(s, 0);
	nkinds = 0;
	noting = sq_stride > 1;
	int rc = fn(ctx);
	noting = false;
	r->points = __atomic_load_n(&counted, __ATOMIC_SEQ_CST);
	long dlive = __atomic_load_n(&live, __ATOMIC_SEQ_CST) - live0;
	long dsq = __atomic_load_n(&sq_live, __ATOMIC_SEQ_CST) - sq0;
	if (rc != 0) {
		fprintf(stderr, "torture %s: the clean run failed (%d)\n", name, rc);
		r->bad++;
		return r->bad;
	}
	long step = 1;
	if (max_runs > 0 && r->points > max_runs)
		step = (r->points + max_runs - 1) / max_runs;
	/* TORTURE_ONLY=K: that failure point alone (to debug it). */
	long only = getenv("TORTURE_ONLY") ? atol(getenv("TORTURE_ONLY")) : 0;
	for (long k = 1; k <= r->points; k += step) {
		if ((only > 0 && k != only) || !tried(k))
			continue;
		r->runs++;
		if (s == TORTURE_RECOVERABLE) {
			long l0 = __atomic_load_n(&live, __ATOMIC_SEQ_CST);
			long q0 = __atomic_load_n(&sq_live, __ATOMIC_SEQ_CST);
			arm(s, k);
			rc = fn(ctx);
			arm(s, 0);
			long dl = __atomic_load_n(&live, __ATOMIC_SEQ_CST) - l0;
			long dq = __atomic_load_n(&sq_live, __ATOMIC_SEQ_CST) - q0;
			if (rc < 0)
				fprintf(stderr, "torture %s: allocation %ld of %ld failed: contract broken\n",
					name, k, r->points);
			else if (dl != dlive || dq != dsq) {
				fprintf(stderr, "torture %s: allocation %ld of %ld failed: %ld blocks of "
					"the code's and %ld of SQLite's left live (clean run: %ld, %ld)\n",
					name, k, r->points, dl, dq, dlive, dsq);
				rc = -1;
			}
			tally(r, rc);
			continue;
		}
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			perror("torture: fork");
			r->bad++;
			break;
		}
		if (pid == 0) {
			signal(SIGABRT, on_abort);
			/* xalloc's message is expected on every aborting run. */
			if (!freopen("/dev/null", "w", stderr))
				_exit(3);
			arm(s, k);
			rc = fn(ctx);
			_exit(rc < 0 ? 2 : rc > 0 ? 1 : 0);
		}
		int st = 0;
		while (waitpid(pid, &st, 0) < 0)
			;
		if (WIFEXITED(st) && WEXITSTATUS(st) == ABORT_BY_DESIGN)
			r->aborted++;
		else if (WIFEXITED(st) && WEXITSTATUS(st) <= 1)
			tally(r, WEXITSTATUS(st));
		else {
			fprintf(stderr, "torture %s: allocation %ld of %ld failed: the child %s %d\n",
				name, k, r->points, WIFSIGNALED(st) ? "died of signal" : "exited",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			r->bad++;
		}
	}
	fprintf(stderr, "torture %s: %ld allocations, %ld failure points tried: %ld completed, "
		"%ld clean errors, %ld xalloc aborts, %ld bad\n", name, r->points, r->runs,
		r->completed, r->clean_errors, r->aborted, r->bad);
	return r->bad;
}

char torture_store_dir[80];
char torture_store_path[128];

void torture_store_remove(void)
{
	char p[160];
	static const char *const sfx[] = {"", "-wal", "-shm", "-journal", ".lock"};
	for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
		snprintf(p, sizeof p, "%s%s", torture_store_path, sfx[i]);
		unlink(p);
	}
}

int torture_store_setup(void **state)
{
	(void)state;
	strcpy(torture_store_dir, access("/dev/shm", W_OK) == 0 ? "/dev/shm/gpulse-tortureXXXXXX"
							   : "/tmp/gpulse-tortureXXXXXX");
	if (!mkdtemp(torture_store_dir))
		return -1;
	snprintf(torture_store_path, sizeof torture_store_path, "%s/store.db", torture_store_dir);
	return 0;
}

int torture_store_teardown(void **state)
{
	(void)state;
	torture_store_remove();
	rmdir(torture_store_dir);
	return 0;
}
