/* The store engine: series table, sharded in-memory head, flush into
 * SQLite, select, rollups, retention, records. The layout and the crash
 * model are in docs/internals/store.md; the contracts in tsdb.h.
 *
 * Why one file: every part (head, flush, select, rollups, retention,
 * records) works on the private struct tsdb under the same locks (shards,
 * series_mu, db_mu, fault_mu) and its SQLite statements; a split wants an
 * internal header stating that state and the lock order first, as
 * src/inject/inject_internal.h does, which is not done yet. */
#include "store/tsdb.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/chunk.h"
#include "common/label.h"
#include "common/hash.h"
#include "store/rollblock.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/periodic.h"
#include "common/rx.h"
#include "common/status.h"
#include "common/str.h"

#define SHARDS 16
#define DEFAULT_FLUSH_MS 1000
#define DEFAULT_RAW_RETENTION_MS (48LL * 3600 * 1000)
#define DEFAULT_ROLLUP_RETENTION_MS (30LL * 24 * 3600 * 1000)
#define DEFAULT_ROLLUP_STEP_MS 60000
#define DEFAULT_MAX_SERIES 100000
#define DEFAULT_MAX_HEAD_BYTES (256u << 20)
#define RETENTION_PERIOD_MS 60000
#define DEFAULT_OOO_WINDOW_MS (3600LL * 1000)
#define DEFAULT_RETRY_MS 30000
#define CLOCK_STEP_MS 1000             /* a wall-clock jump beyond this is a step */
#define BUSY_TIMEOUT_MS 5000
#define RECORD_LIST_MAX 10000
#define RECORD_FIELD_MAX 65536          /* kind and key bytes */
#define RECORD_JSON_MAX (16u << 20)
/* The head log (docs/internals/store.md, "Head log"): between checkpoints
 * a flusher flush appends one row of just the samples each series took
 * since the last flush, up to LOG_BUF a series (more: its open chunk is
 * written whole, as at a checkpoint); every CHECKPOINT_MS a flush writes
 * every open chunk and empties the log. */
#define LOG_BUF 16
#define CHECKPOINT_MS 60000
#define LOG_FORMAT 1

/* A completed chunk waiting in the head for a flush. */
struct pend {
	struct pend *next;
	int64_t mint, maxt;
	uint16_t n;
	uint16_t len;
	bool overlap;                /* starts below its series' newest sample */
	bool saved;                  /* a flush wrote its row (as the open chunk) */
	int64_t row;                 /* that row's id, 0: not known (put_chunk) */
	uint8_t data[];
};

struct series {
	uint32_t id;                 /* the ref; index + 1 */
	uint32_t nlabels;
	struct label *labels;   /* sorted by name, pointing into blob */
	uint8_t *blob;               /* name\0value\0... as stored on disk */
	size_t blob_len;
	uint64_t hash;
	struct series *hnext;
	const char *name;            /* the __name__ value ("" when none) */
	struct series *nnext;        /* the next series of the same name bucket */
	/* Under the store's db_mu. */
	bool on_disk;
	int64_t rolled_until;        /* rollup rows exist for buckets before this */
	/* Under the shard's mutex. */
	struct chunk_enc *open;
	struct pend *ph, *pt;        /* pending full chunks, oldest first */
	bool has_last;
	int64_t last_t;              /* the newest sample */
	uint16_t open_saved_n;       /* samples of the open chunk already on disk */
	int64_t open_row;            /* the row holding them, 0: not known */
	uint16_t open_logged_n;      /* samples of the open chunk on disk or in
	                              * the head log (>= open_saved_n) */
	/* The samples taken since the last flush, open chunk samples
	 * log_idx.. (log_over: more than LOG_BUF, or the chunk changed). */
	uint16_t log_n, log_idx;
	bool log_over;
	int64_t log_t[LOG_BUF];
	double log_v[LOG_BUF];
	/* A read-only reader's replay of the log into the head: samples
	 * 0..read_n-1 of the chunk starting at read_mint are in its row or
	 * the head (read_n 0: none yet). */
	int64_t read_mint;
	int read_n;
	bool open_overlaps;          /* the open chunk starts below last_t */
	bool ooo;                    /* took a sample older than last_t: chunks
	                              * overlap, reads merge all of them */
};

struct shard {
	pthread_mutex_t mu;
	uint64_t appended;
	uint64_t dropped;
	uint64_t ooo;
} __attribute__((aligned(64)));

enum stmt_id {
	ST_SERIES_INSERT, ST_CHUNK_PUT, ST_CHUNK_RANGE, ST_RBLOCK_PUT, ST_RBLOCK_RANGE, ST_RBLOCK_LAST,
	ST_RBLOCK_OLDER, ST_RBLOCK_DEL, ST_SERIES_ROLLED, ST_RET_CHUNKS, ST_RET_RBLOCKS, ST_REC_PUT, ST_REC_GET, ST_REC_LIST,
	ST_REC_DEL, ST_REC_PRUNE, ST_REC_KEYS, ST_CHUNK_AT, ST_CHUNK_UPDATE, ST_LOG_PUT, ST_LOG_CLEAR,
	ST_BEGIN, ST_COMMIT, ST_ROLLBACK, ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
	[ST_SERIES_INSERT] = "INSERT OR REPLACE INTO series(id, labels, rolled_until_ms) VALUES (?1, ?2, ?3)",
	[ST_CHUNK_PUT] = "INSERT OR REPLACE INTO chunks(series_id, mint, maxt, n, data) VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_CHUNK_RANGE] = "SELECT mint, data, id, maxt FROM chunks WHERE series_id = ?1 AND mint <= ?3 AND maxt >= ?2 ORDER BY mint",
	[ST_RBLOCK_PUT] = "INSERT OR REPLACE INTO rollup_blocks(series_id, mint, maxt, data) VALUES (?1, ?2, ?3, ?4)",
	/* Blocks of a series do not overlap: the first one to read is the
	 * last that starts at or before ?2, found in the index, so a recent
	 * range does not visit every older block's row. */
	[ST_RBLOCK_RANGE] = "SELECT mint, data, id, maxt FROM rollup_blocks WHERE series_id = ?1 AND mint <= ?3"
			    " AND mint >= coalesce((SELECT max(mint) FROM rollup_blocks WHERE series_id = ?1 AND mint <= ?2), ?2)"
			    " AND maxt >= ?2 ORDER BY mint",
	[ST_RBLOCK_LAST] = "SELECT mint, data, id, maxt FROM rollup_blocks WHERE series_id = ?1 ORDER BY mint DESC LIMIT 1",
	[ST_RBLOCK_OLDER] = "SELECT mint, data, id, maxt FROM rollup_blocks WHERE series_id = ?1 AND mint < ?2 ORDER BY mint LIMIT 1",
	[ST_RBLOCK_DEL] = "DELETE FROM rollup_blocks WHERE id = ?1",
	[ST_SERIES_ROLLED] = "UPDATE series SET rolled_until_ms = ?2 WHERE id = ?1",
	[ST_RET_CHUNKS] = "DELETE FROM chunks WHERE series_id = ?1 AND mint < ?2 AND maxt < ?2",
	[ST_RET_RBLOCKS] = "DELETE FROM rollup_blocks WHERE series_id = ?1 AND maxt < ?2",
	[ST_REC_PUT] = "INSERT OR REPLACE INTO records(kind, key, t_ms, json) VALUES (?1, ?2, ?3, ?4)",
	[ST_REC_GET] = "SELECT t_ms, json FROM records WHERE kind = ?1 AND key = ?2",
	[ST_REC_LIST] = "SELECT key, t_ms, json FROM records WHERE kind = ?1 AND t_ms >= ?2 AND t_ms <= ?3 ORDER BY t_ms, key LIMIT ?4",
	[ST_REC_DEL] = "DELETE FROM records WHERE kind = ?1 AND key = ?2",
	[ST_REC_PRUNE] = "DELETE FROM records WHERE kind = ?1 AND t_ms < ?2",
	[ST_REC_KEYS] = "SELECT key, t_ms, json FROM records WHERE kind = ?1 AND key >= ?2 AND key <= ?3 ORDER BY key DESC LIMIT ?4",
	[ST_CHUNK_AT] = "SELECT 1 FROM chunks WHERE series_id = ?1 AND mint = ?2",
	/* The open chunk's row again, found by its id and rewritten in place:
	 * its key (series, first time) is unchanged, so the index is not
	 * touched and the row keeps its page (put_chunk). The key is checked
	 * too: a row id remembered across retention or a new file may name
	 * another row, or none; then the INSERT OR REPLACE writes it. */
	[ST_CHUNK_UPDATE] = "UPDATE chunks SET maxt = ?3, n = ?4, data = ?5 WHERE id = ?6 AND series_id = ?1 AND mint = ?2",
	[ST_LOG_PUT] = "INSERT INTO head_log(data) VALUES (?1)",
	[ST_LOG_CLEAR] = "DELETE FROM head_log",
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
};

/* Versioned migrations: entry i takes the schema from version i to i + 1,
 * in one transaction with the version bump. Append only. */
#define TSDB_READER_MMAP_BYTES "1073741824" /* 1 GiB of address space, not memory */
#define CORRUPT_SEEN_MAX 4096        /* damaged chunks remembered, to count each once */
static const char *const migrations[TSDB_SCHEMA_VERSION] = {
	/* 1: series (labels as name\0value\0..., unique in memory), chunks
	 * (a rowid table: a chunk of at most CHUNK_MAX_BYTES stays on its
	 * leaf page, where WITHOUT ROWID would spill it to overflow pages),
	 * rollups, records. Kept terse: every table and index costs a page. */
	"CREATE TABLE series(id INTEGER PRIMARY KEY, labels BLOB NOT NULL,"
	" rolled_until_ms INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE chunks(id INTEGER PRIMARY KEY, series_id INTEGER NOT NULL,"
	" mint INTEGER NOT NULL, maxt INTEGER NOT NULL, n INTEGER NOT NULL, data BLOB NOT NULL);"
	"CREATE UNIQUE INDEX chunks_series_time ON chunks(series_id, mint);"
	"CREATE TABLE rollups(series_id INTEGER NOT NULL, t INTEGER NOT NULL,"
	" min REAL, max REAL, sum REAL, count INTEGER NOT NULL,"
	" PRIMARY KEY(series_id, t)) WITHOUT ROWID;"
	"CREATE TABLE records(kind TEXT NOT NULL, key TEXT NOT NULL, t_ms INTEGER NOT NULL,"
	" json TEXT NOT NULL, PRIMARY KEY(kind, key)) WITHOUT ROWID;",
	/* 2: chunks of CHUNK_FORMAT 2 carry a CRC-32 (chunk.h). No table
	 * changes: format-1 chunks already stored are read as before, and
	 * the version bump makes an older gpulse refuse the file ("newer than
	 * this gpulse") rather than fail on every new chunk. */
	"",
	/* 3: rollups packed per series, up to ROLLBLOCK_MAX buckets a row
	 * (rollblock.h), a rowid table like chunks so a block stays on its
	 * leaf page. migrate() moves the rows of `rollups` into blocks in the
	 * same transaction, then drops it. */
	"CREATE TABLE rollup_blocks(id INTEGER PRIMARY KEY, series_id INTEGER NOT NULL,"
	" mint INTEGER NOT NULL, maxt INTEGER NOT NULL, data BLOB NOT NULL);"
	"CREATE UNIQUE INDEX rollup_blocks_series_time ON rollup_blocks(series_id, mint);",
	/* 4: the head log, rows of the samples appended since the last
	 * checkpoint (LOG_FORMAT; replayed into the chunks at open). */
	"CREATE TABLE IF NOT EXISTS head_log(id INTEGER PRIMARY KEY, data BLOB NOT NULL);",
};

struct tsdb {
	struct tsdb_opts o;
	char *path;
	int lock_fd;                 /* flock on PATH.lock: one store per file */
	sqlite3 *sql;
	sqlite3_stmt *st[ST_COUNT];
	pthread_mutex_t db_mu;       /* the connection, flushes, series on_disk/rolled_until */
	_Atomic(tsdb_append_hook_fn *) hook;  /* tsdb_set_append_hook */
	void *hook_ctx;

	struct series **series;      /* o.max_series slots; published by nseries */
	_Atomic size_t nseries;
	pthread_mutex_t series_mu;   /* creation and the hash table */
	struct series **htab;
	size_t hcap;
	/* Series by metric name (hcap buckets, newest first): selectors name
	 * their metric, and a select then visits only its series. Buckets
	 * are published with release stores, read without the lock. */
	struct series *_Atomic *ntab;

	struct shard shards[SHARDS];
	_Atomic uint64_t head_bytes;
	_Atomic uint64_t head_dropped;
	_Atomic uint64_t chunks_flushed;
	_Atomic uint64_t storage_errors;
	_Atomic uint64_t flushes;
	_Atomic uint64_t series_limit_hits;
	_Atomic uint64_t label_limit_hits;
	struct complaint flush_complaint;   /* under db_mu */
	bool flush_failing;
	/* Damaged chunks found on disk (under db_mu): each is skipped,
	 * counted and logged once, by its row id; past CORRUPT_SEEN_MAX
	 * distinct ones every sighting counts. */
	_Atomic uint64_t corrupt_chunks;
	struct complaint corrupt_complaint;
	int64_t corrupt_seen[CORRUPT_SEEN_MAX];
	size_t ncorrupt_seen;
	int64_t scratch_t[CHUNK_MAX_SAMPLES];   /* one chunk decoded, under db_mu */
	double scratch_v[CHUNK_MAX_SAMPLES];

	/* The wall clock's offset from the monotonic one at the last flush:
	 * a change is a step (flusher thread only). */
	int64_t clock_off_ms;
	bool have_clock_off;
	_Atomic uint64_t clock_steps;
	/* The file as opened (under db_mu): a different inode at the path,
	 * or none, is a store deleted or replaced under us. */
	dev_t dev;
	ino_t ino, wal_ino, shm_ino;  /* 0: not seen */
	_Atomic uint64_t file_lost;
	/* Unwritable (read-only, replaced): set and cleared under db_mu,
	 * read by tsdb_unwritable under fault_mu. */
	pthread_mutex_t fault_mu;
	bool fault;
	char fault_why[640];
	int64_t retry_at_ns;          /* monotonic time of the next reopen */
	int flush_errno;              /* the system's errno of the last failed flush */
	struct complaint fault_complaint;

	/* The flusher: a flush every flush_interval_ms, the first one a
	 * period after the start; retention at most every
	 * RETENTION_PERIOD_MS, the first at the first flush (next_ret_ns,
	 * flusher thread only; 0 while it is not running). */
	struct periodic flusher;
	int64_t next_ret_ns;
	int64_t log_flushes;          /* under db_mu: flushes to the head log
	                               * since the last checkpoint */
	bool log_replay_pending;      /* under db_mu: the head log of the last
	                               * run is not yet in the chunks */
};

/* ---- small helpers ---- */

static int64_t floor_div(int64_t a, int64_t b)
{
	int64_t q = a / b;
	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* The start of t's bucket; saturates at INT64_MIN for the far past. */
static int64_t bucket_of(int64_t t, int64_t step)
{
	int64_t q = floor_div(t, step);
	return q < INT64_MIN / step ? INT64_MIN : q * step;
}

int64_t tsdb_now_ms(const struct tsdb *db)
{
	return clock_wall_ms(&db->o.clock);
}

static struct series *series_at(struct tsdb *db, uint32_t ref)
{
	size_t n = atomic_load_explicit(&db->nseries, memory_order_acquire);
	if (ref == 0 || ref > n)
		return NULL;
	return db->series[ref - 1];
}

static void series_free(struct series *s)
{
	if (!s)
		return;
	struct pend *p = s->ph;
	while (p) {
		struct pend *next = p->next;
		free(p);
		p = next;
	}
	free(s->open);
	free(s->labels);
	free(s->blob);
	free(s);
}

/* Build a series (labels parsed out of a blob that the caller hands over). */
static int series_from_blob(uint8_t *blob, size_t len, struct series **out)
{
	struct series *s = calloc(1, sizeof *s);
	if (!s) {
		free(blob);
		return GPULSE_ENOMEM;
	}
	s->blob = blob;
	s->blob_len = len;
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		if (blob[i] == 0)
			n++;
	if (n == 0 || n % 2 || n / 2 > TSDB_MAX_LABELS || blob[len - 1] != 0) {
		series_free(s);
		return GPULSE_EPARSE;
	}
	s->nlabels = (uint32_t)(n / 2);
	s->labels = calloc(s->nlabels, sizeof *s->labels);
	s->open = malloc(sizeof *s->open);
	if (!s->labels || !s->open) {
		series_free(s);
		return GPULSE_ENOMEM;
	}
	chunk_enc_init(s->open);
	const char *p = (const char *)blob;
	for (uint32_t i = 0; i < s->nlabels; i++) {
		s->labels[i].name = p;
		p += strlen(p) + 1;
		s->labels[i].value = p;
		p += strlen(p) + 1;
		if (i > 0 && strcmp(s->labels[i - 1].name, s->labels[i].name) >= 0) {
			series_free(s);
			return GPULSE_EPARSE;
		}
	}
	s->hash = fnv1a64(blob, len);
	*out = s;
	return 0;
}

static struct series *htab_find(struct tsdb *db, const uint8_t *blob, size_t len, uint64_t h)
{
	for (struct series *s = db->htab[h & (db->hcap - 1)]; s; s = s->hnext)
		if (s->hash == h && s->blob_len == len && memcmp(s->blob, blob, len) == 0)
			return s;
	return NULL;
}

static const char *series_label(const struct series *s, const char *name);

/* Add a series under series_mu; the slot count was checked. */
static void series_publish(struct tsdb *db, struct series *s)
{
	size_t n = atomic_load_explicit(&db->nseries, memory_order_relaxed);
	s->id = (uint32_t)(n + 1);
	size_t b = s->hash & (db->hcap - 1);
	s->hnext = db->htab[b];
	db->htab[b] = s;
	s->name = series_label(s, "__name__");
	size_t nb = fnv1a64_str(s->name) & (db->hcap - 1);
	s->nnext = atomic_load_explicit(&db->ntab[nb], memory_order_relaxed);
	atomic_store_explicit(&db->ntab[nb], s, memory_order_release);
	db->series[n] = s;
	atomic_fetch_add(&db->head_bytes, sizeof *s + sizeof *s->open + s->blob_len);
	atomic_store_explicit(&db->nseries, n + 1, memory_order_release);
}

/* ---- SQLite plumbing ---- */

static int sql_step_done(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : rc;
}

static int exec_stmt(struct tsdb *db, enum stmt_id id)
{
	return sql_step_done(db->st[id]);
}

static int pragma_int(sqlite3 *sql, const char *q, int64_t *out, int *sqlrc)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(sql, q, -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*out = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			*out = 0;
			rc = SQLITE_OK;
		}
	}
	sqlite3_finalize(st);
	*sqlrc = rc;
	return rc == SQLITE_OK ? 0 : GPULSE_EIO;
}

/* True when an SQLite result says the disk or the system failed, not the
 * file: a full disk, an I/O error, a file that cannot be opened, written
 * or locked. Such a file may be perfectly sound, so it must never be
 * reported as damaged or foreign (that stops gpulsed as a configuration
 * error, exit 2, when only the disk is at fault). */
static bool sql_is_io(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_NOMEM:   /* no verdict on the file either */
	case SQLITE_FULL:
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_NOLFS:
	case SQLITE_PROTOCOL:
		return true;
	default:
		return false;
	}
}

/* The sentence for an I/O failure `rc` of SQLite while doing `what`:
 * "FILE: disk full (SQLITE_FULL) while WHAT" or "FILE: I/O error (SQLite
 * code N) while WHAT: MESSAGE". GPULSE_EIO; GPULSE_ENOMEM and "FILE: out
 * of memory while WHAT" for SQLITE_NOMEM. */
static int io_errf(struct tsdb *db, int rc, const char *what, char *err, size_t errlen)
{
	if ((rc & 0xff) == SQLITE_NOMEM) {
		str_errf(err, errlen, "%s: out of memory while %s", db->path, what);
		return GPULSE_ENOMEM;
	}
	if ((rc & 0xff) == SQLITE_FULL)
		str_errf(err, errlen, "%s: disk full (SQLITE_FULL) while %s", db->path, what);
	else
		str_errf(err, errlen, "%s: I/O error (SQLite code %d) while %s: %s", db->path, rc,
			 what, sqlite3_errstr(rc));
	return GPULSE_EIO;
}

static int check_file(struct tsdb *db, int64_t *version, char *err, size_t errlen)
{
	int64_t app = 0, tables = 0;
	int sqlrc = 0;
	if (pragma_int(db->sql, "PRAGMA application_id", &app, &sqlrc) != 0) {
		/* Reading a WAL database maps its -shm file, which fails on a
		 * full disk with an I/O error: that is no verdict on the file. */
		if (sql_is_io(sqlrc))
			return io_errf(db, sqlrc, "reading its header", err, errlen);
		str_errf(err, errlen, "%s: not a gpulse database: %s", db->path,
			 sqlite3_errstr(sqlrc));
		return GPULSE_EPARSE;
	}
	if (pragma_int(db->sql, "PRAGMA user_version", version, &sqlrc) != 0 ||
	    pragma_int(db->sql, "SELECT count(*) FROM sqlite_master", &tables, &sqlrc) != 0) {
		if (sql_is_io(sqlrc))
			return io_errf(db, sqlrc, "reading its schema", err, errlen);
		str_errf(err, errlen, "%s: damaged or unreadable database: %s", db->path,
			 sqlite3_errstr(sqlrc));
		return GPULSE_EPARSE;
	}
	if (app != TSDB_APPLICATION_ID && (app != 0 || tables > 0)) {
		str_errf(err, errlen,
			 "%s: an SQLite database of another application (application_id 0x%llx, %lld tables), not a gpulse store",
			 db->path, (unsigned long long)app, (long long)tables);
		return GPULSE_EPARSE;
	}
	if (*version > TSDB_SCHEMA_VERSION) {
		str_errf(err, errlen, "%s: schema version %lld is newer than this gpulse (%d)",
			 db->path, (long long)*version, TSDB_SCHEMA_VERSION);
		return GPULSE_EPARSE;
	}
	/* The quick form: checks page structure without reading every index
	 * entry back, fast enough for every open. */
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db->sql, "PRAGMA quick_check(1)", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		if (sql_is_io(rc)) {
			sqlite3_finalize(st);
			return io_errf(db, rc, "checking it", err, errlen);
		}
		str_errf(err, errlen, "%s: damaged database: %s", db->path, sqlite3_errmsg(db->sql));
		sqlite3_finalize(st);
		return GPULSE_EPARSE;
	}
	const char *res = (const char *)sqlite3_column_text(st, 0);
	if (!res || strcmp(res, "ok") != 0) {
		str_errf(err, errlen, "%s: damaged database: %.200s", db->path, res ? res : "?");
		sqlite3_finalize(st);
		return GPULSE_EPARSE;
	}
	sqlite3_finalize(st);
	return 0;
}

static uint32_t be_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* SQLite refused the file as malformed: say "truncated" when its bytes
 * show it (SQLite says only "database disk image is malformed", which the
 * checks above reported as "not a gpulse database"). The header is read
 * raw: an SQLite file shorter than its 100-byte header, or shorter than
 * the pages its header counts (offset 28, valid when the change counter
 * at 24 equals the one at 92), or not a whole number of pages. Only on
 * this path: a sound WAL store may be shorter than its header says while
 * a checkpoint runs, but it is then not refused. Rewrites err, keeps the
 * status. */
static void explain_truncated(struct tsdb *db, char *err, size_t errlen)
{
	static const char magic[16] = "SQLite format 3";
	uint8_t h[100];
	struct stat sb;
	int fd = open(db->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = fstat(fd, &sb) == 0 ? pread(fd, h, sizeof h, 0) : -1;
	close(fd);
	if (n <= 0 || memcmp(h, magic, (size_t)n < sizeof magic ? (size_t)n : sizeof magic) != 0)
		return;
	const char *whose = n >= 72 && be_u32(h + 68) == TSDB_APPLICATION_ID ? "a gpulse store" : "an SQLite file";
	if (n < (ssize_t)sizeof h) {
		str_errf(err, errlen,
			 "%s: truncated or damaged: %lld bytes, shorter than an SQLite header (100 bytes); "
			 "move it away or restore it from a backup",
			 db->path, (long long)sb.st_size);
		return;
	}
	uint32_t page = (uint32_t)h[16] << 8 | h[17];
	if (page == 1)
		page = 65536;
	uint32_t pages = be_u32(h + 28);
	if (page < 512 || (page & (page - 1)) != 0)
		return;
	if (pages > 0 && be_u32(h + 24) == be_u32(h + 92) &&
	    (uint64_t)sb.st_size < (uint64_t)pages * page)
		str_errf(err, errlen,
			 "%s: truncated: %s of %lld bytes whose header counts %u pages of %u bytes "
			 "(%llu bytes); move it away or restore it from a backup",
			 db->path, whose, (long long)sb.st_size, pages, page,
			 (unsigned long long)pages * page);
	else if (sb.st_size % page != 0)
		str_errf(err, errlen,
			 "%s: truncated or damaged: %s of %lld bytes, not a whole number of %u-byte "
			 "pages; move it away or restore it from a backup",
			 db->path, whose, (long long)sb.st_size, page);
}

/* Write block b of series `id` as its row (replacing the row of the same
 * first bucket). 0 or an SQLite code. */
static int put_rollblock(sqlite3_stmt *st, int64_t id, const struct rollblock *b)
{
	uint8_t buf[ROLLBLOCK_MAX_BYTES];
	size_t len = rollblock_encode(b, buf);
	if (len == 0)
		return 0;   /* empty */
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, b->b[0].t_ms);
	sqlite3_bind_int64(st, 3, b->b[b->n - 1].t_ms);
	sqlite3_bind_blob(st, 4, buf, (int)len, SQLITE_TRANSIENT);
	return sql_step_done(st);
}

/* Schema 3: the rows of `rollups` (one per bucket) packed into blocks,
 * then the table dropped. In migrate()'s transaction. An SQLite code. */
static int pack_rollups(struct tsdb *db)
{
	sqlite3_stmt *sel = NULL, *put = NULL;
	int rc = sqlite3_prepare_v2(db->sql,
				    "SELECT series_id, t, min, max, sum, count FROM rollups"
				    " ORDER BY series_id, t", -1, &sel, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db->sql, stmt_sql[ST_RBLOCK_PUT], -1, &put, NULL);
	struct rollblock b = {0};
	int64_t cur = 0;
	uint64_t skipped = 0;
	while (rc == SQLITE_OK && (rc = sqlite3_step(sel)) == SQLITE_ROW) {
		rc = SQLITE_OK;
		int64_t id = sqlite3_column_int64(sel, 0);
		struct rollblock_bucket k = {sqlite3_column_int64(sel, 1), sqlite3_column_double(sel, 2),
					     sqlite3_column_double(sel, 3), sqlite3_column_double(sel, 4),
					     (uint64_t)sqlite3_column_int64(sel, 5)};
		int f = id == cur ? rollblock_add(&b, &k) : 0;
		if (f == 0) {
			rc = put_rollblock(put, cur, &b);
			b.n = 0;
			cur = id;
			f = rollblock_add(&b, &k);
		}
		if (f < 0)
			skipped++;   /* no samples: not a bucket */
	}
	if (rc == SQLITE_DONE)
		rc = put_rollblock(put, cur, &b);
	sqlite3_finalize(sel);
	sqlite3_finalize(put);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db->sql, "DROP TABLE rollups", NULL, NULL, NULL);
	if (rc == SQLITE_OK && skipped)
		log_warn("tsdb: %s: %llu rollup rows with no samples left out of the packed rollups",
			 db->path, (unsigned long long)skipped);
	return rc;
}

static int migrate(struct tsdb *db, int64_t from, char *err, size_t errlen)
{
	for (int64_t v = from; v < TSDB_SCHEMA_VERSION; v++) {
		char tail[256];
		/* The schema version is the header's user_version. */
		snprintf(tail, sizeof tail, "PRAGMA application_id = %d; PRAGMA user_version = %lld;",
			 TSDB_APPLICATION_ID, (long long)v + 1);
		char *msg = NULL;
		int r = GPULSE_EIO;
		int rc = sqlite3_exec(db->sql, "BEGIN IMMEDIATE", NULL, NULL, &msg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db->sql, migrations[v], NULL, NULL, &msg);
		if (rc == SQLITE_OK && v + 1 == 3 && (rc = pack_rollups(db)) != SQLITE_OK)
			msg = sqlite3_mprintf("packing the rollups: %s", sqlite3_errmsg(db->sql));
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db->sql, tail, NULL, NULL, &msg);
		if (rc == SQLITE_OK)
			rc = sqlite3_exec(db->sql, "COMMIT", NULL, NULL, &msg);
		if (rc != SQLITE_OK) {
			if (sql_is_io(rc)) {
				char what[64];
				snprintf(what, sizeof what, "creating schema %lld", (long long)v + 1);
				r = io_errf(db, rc, what, err, errlen);
			} else {
				str_errf(err, errlen, "%s: migration to schema %lld failed: %s", db->path,
					 (long long)v + 1, msg ? msg : sqlite3_errstr(rc));
			}
			sqlite3_free(msg);
			sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
			return r;
		}
	}
	/* A new file: schema 3 dropped the table schema 1 made; give its
	 * pages back (a few KiB: instant). */
	if (from == 0 && sqlite3_exec(db->sql, "VACUUM", NULL, NULL, NULL) != SQLITE_OK)
		log_warn("tsdb: %s: VACUUM of the new store failed: %s", db->path, sqlite3_errmsg(db->sql));
	return 0;
}

static int load_series(struct tsdb *db, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db->sql,
				    "SELECT id, labels, rolled_until_ms FROM series ORDER BY id", -1, &st, NULL);
	if (rc != SQLITE_OK)
		goto sqlfail;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		size_t len = (size_t)sqlite3_column_bytes(st, 1);
		const void *b = sqlite3_column_blob(st, 1);
		size_t n = atomic_load(&db->nseries);
		if (id != (int64_t)n + 1 || !b || len == 0 ||
		    len > TSDB_MAX_LABELS * (TSDB_MAX_LABEL_NAME + TSDB_MAX_LABEL_VALUE + 2)) {
			str_errf(err, errlen, "%s: damaged series table (row id %lld)", db->path,
				 (long long)id);
			sqlite3_finalize(st);
			return GPULSE_EPARSE;
		}
		if (n >= db->o.max_series) {
			str_errf(err, errlen, "%s: holds more series than max_series (%zu)", db->path,
				 db->o.max_series);
			sqlite3_finalize(st);
			return GPULSE_ELIMIT;
		}
		uint8_t *copy = malloc(len);
		struct series *s;
		int r = GPULSE_ENOMEM;
		if (copy) {
			memcpy(copy, b, len);
			r = series_from_blob(copy, len, &s);
		}
		if (r == GPULSE_ENOMEM)
			str_errf(err, errlen, "%s: out of memory while loading its series", db->path);
		else if (r != 0)
			str_errf(err, errlen, "%s: damaged label set of series %lld", db->path,
				 (long long)id);
		if (r != 0) {
			sqlite3_finalize(st);
			return r;
		}
		s->on_disk = true;
		s->rolled_until = sqlite3_column_int64(st, 2);
		series_publish(db, s);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		goto sqlfail;
	/* Appends after a restart continue after what is on disk. */
	rc = sqlite3_prepare_v2(db->sql, "SELECT series_id, max(maxt) FROM chunks GROUP BY series_id",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		goto sqlfail;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct series *s = series_at(db, (uint32_t)sqlite3_column_int64(st, 0));
		if (s) {
			s->has_last = true;
			s->last_t = sqlite3_column_int64(st, 1);
		}
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		goto sqlfail;
	return 0;
sqlfail:
	if (sql_is_io(rc))
		return io_errf(db, rc, "loading its series", err, errlen);
	str_errf(err, errlen, "%s: cannot load series: %s", db->path, sqlite3_errmsg(db->sql));
	return GPULSE_EPARSE;
}

/* ---- open / close ---- */

static int set_page_cap(struct tsdb *db, int64_t pages)
{
	char q[64];
	/* SQLite's largest page count stands for "no cap". */
	snprintf(q, sizeof q, "PRAGMA max_page_count = %lld",
		 (long long)(pages > 0 ? pages : 4294967294LL));
	return sqlite3_exec(db->sql, q, NULL, NULL, NULL) == SQLITE_OK ? 0 : GPULSE_EIO;
}

int tsdb_set_max_db_pages(struct tsdb *db, int64_t pages)
{
	pthread_mutex_lock(&db->db_mu);
	int rc = set_page_cap(db, pages);
	pthread_mutex_unlock(&db->db_mu);
	return rc;
}

static void db_disconnect(struct tsdb *db);
static void flusher_run(void *arg);
static void note_unwritable_at_open(struct tsdb *db);
static int replay_log(struct tsdb *db, bool into_head);

static void db_free(struct tsdb *db)
{
	db_disconnect(db);
	size_t n = atomic_load(&db->nseries);
	for (size_t i = 0; i < n; i++)
		series_free(db->series[i]);
	free(db->series);
	free(db->htab);
	free(db->ntab);
	for (int i = 0; i < SHARDS; i++)
		pthread_mutex_destroy(&db->shards[i].mu);
	pthread_mutex_destroy(&db->db_mu);
	pthread_mutex_destroy(&db->series_mu);
	periodic_destroy(&db->flusher);
	pthread_mutex_destroy(&db->fault_mu);
	if (db->lock_fd >= 0)
		close(db->lock_fd);   /* releases the flock */
	free(db->path);
	free(db);
}

/* Close the connection (statements first). Under db_mu, or before the
 * store is shared. */
static void db_disconnect(struct tsdb *db)
{
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(db->st[i]);
		db->st[i] = NULL;
	}
	/* _v2: a statement still held (an iterator's, finalized under db_mu
	 * later) keeps the old connection alive until it is finalized, where
	 * sqlite3_close would fail with SQLITE_BUSY and leave it open for
	 * good, its descriptors on the file with it. */
	if (db->sql)
		sqlite3_close_v2(db->sql);
	db->sql = NULL;
}

/* Open the connection to `file` (db->path, or ":memory:" for a stand-in
 * while the path cannot be used), check, migrate and prepare. 0 with
 * db->sql and db->st set and *version the schema found (0: a new file);
 * else nothing is left open and err says why (tsdb_open's statuses). */
static int db_connect(struct tsdb *db, const char *file, int64_t *version, char *err, size_t errlen)
{
	/* A reader's connection without SQLite's own mutex: every use of it
	 * is under db_mu already, and a report steps millions of rollup rows,
	 * each step and column read otherwise a lock and unlock (a fifth of
	 * a month's capacity report, docs/PERFORMANCE.md). */
	int rc = sqlite3_open_v2(file, &db->sql,
				 db->o.read_only ? SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX
						 : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
				 NULL);
	int r = GPULSE_EIO;
	if (rc != SQLITE_OK) {
		str_errf(err, errlen, "%s: cannot open: %s", db->path,
			 db->sql ? sqlite3_errmsg(db->sql) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(db->sql, 1);
	sqlite3_busy_timeout(db->sql, BUSY_TIMEOUT_MS);
	if (db->o.read_only) {
		/* A reader (a report, a query from the file) walks most of the
		 * file once: mapped, its 1 KiB pages are read in place instead
		 * of one pread(2) and copy each (a fifth of a month's capacity
		 * report, docs/PERFORMANCE.md). The writer keeps pread: a map
		 * costs it nothing it needs, and WAL readers see the same data
		 * either way. */
		sqlite3_exec(db->sql, "PRAGMA mmap_size = " TSDB_READER_MMAP_BYTES, NULL, NULL, NULL);
	}
	*version = 0;
	r = check_file(db, version, err, errlen);
	if (r != 0) {
		if (r == GPULSE_EPARSE)
			explain_truncated(db, err, errlen);
		goto fail;
	}
	if (db->o.read_only && *version != TSDB_SCHEMA_VERSION) {
		/* A reader may not migrate: the owner does that when it opens. */
		str_errf(err, errlen,
			 *version == 0 ? "%s: an empty file, not a gpulse store"
				       : "%s: schema version %lld; open it once with gpulsed to bring it to %d",
			 db->path, (long long)*version, TSDB_SCHEMA_VERSION);
		r = GPULSE_EPARSE;
		goto fail;
	}
	if (!db->o.read_only) {
		char *msg = NULL;
		/* Small pages for a new file: a store of a few GPUs is small, and
		 * every table and index costs at least one page. */
		if (*version == 0)
			sqlite3_exec(db->sql, "PRAGMA page_size = 1024", NULL, NULL, NULL);
		rc = sqlite3_exec(db->sql, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;", NULL, NULL, &msg);
		if (rc != SQLITE_OK && sql_is_io(rc)) {
			sqlite3_free(msg);
			r = io_errf(db, rc, "enabling WAL", err, errlen);
			goto fail;
		}
		if (rc != SQLITE_OK) {
			str_errf(err, errlen, "%s: cannot enable WAL: %s", db->path, msg ? msg : sqlite3_errstr(rc));
			sqlite3_free(msg);
			r = GPULSE_EIO;
			goto fail;
		}
		/* The cap before the schema is written: a capped store then fails
		 * its creation as one on a full disk does. */
		if (db->o.max_db_pages > 0)
			set_page_cap(db, db->o.max_db_pages);
		r = migrate(db, *version, err, errlen);
		if (r != 0)
			goto fail;
	}
	for (int i = 0; i < ST_COUNT; i++) {
		rc = sqlite3_prepare_v3(db->sql, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &db->st[i], NULL);
		if (rc != SQLITE_OK && sql_is_io(rc)) {
			r = io_errf(db, rc, "reading its schema", err, errlen);
			goto fail;
		}
		if (rc != SQLITE_OK) {
			str_errf(err, errlen, "%s: unexpected schema: %s", db->path, sqlite3_errmsg(db->sql));
			r = GPULSE_EPARSE;
			goto fail;
		}
	}
	return 0;
fail:
	db_disconnect(db);
	return r;
}

/* Series ids are allocated in memory, so two stores writing one file would
 * corrupt each other's series: the second open is refused. The kernel drops
 * the lock when the process dies, kill -9 included. */
static int lock_file(struct tsdb *db, char *err, size_t errlen)
{
	char lp[4096];
	if ((size_t)snprintf(lp, sizeof lp, "%s.lock", db->path) >= sizeof lp) {
		str_errf(err, errlen, "%s: path too long", db->path);
		return GPULSE_EINVAL;
	}
	db->lock_fd = open(lp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (db->lock_fd < 0) {
		str_errf(err, errlen, "%s: cannot open: %s", lp, strerror(errno));
		return GPULSE_EIO;
	}
	if (flock(db->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		str_errf(err, errlen, "%s: %s", db->path,
			 e == EWOULDBLOCK ? "in use by another gpulse store (its .lock file is held)"
					  : strerror(e));
		return e == EWOULDBLOCK ? GPULSE_EBUSY : GPULSE_EIO;
	}
	return 0;
}

/* ---- the file under the store: read-only, deleted, replaced ---- */

/* An SQLite result that says the file cannot be written now (its mode, a
 * read-only file system), as opposed to a full disk or an I/O error. */
static bool sql_is_unwritable(int sys_errno, int rc)
{
	switch (rc & 0xff) {
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_CANTOPEN:
		return true;
	case SQLITE_IOERR:
		return sys_errno == EROFS || sys_errno == EACCES || sys_errno == EPERM;
	default:
		return false;
	}
}

/* The store cannot be written (why: a sentence naming the file): samples
 * wait in the head, the file is opened again after the retry interval.
 * Under db_mu. */
static void set_fault(struct tsdb *db, const char *why)
{
	pthread_mutex_lock(&db->fault_mu);
	db->fault = true;
	snprintf(db->fault_why, sizeof db->fault_why, "%s", why);
	pthread_mutex_unlock(&db->fault_mu);
	db->retry_at_ns = clock_mono_ns() + db->o.retry_interval_ms * NS_PER_MS;
	complain(&db->fault_complaint,
		 "tsdb: %s; samples wait in memory (at most %zu bytes of them) and writing is tried "
		 "again every %gs", why, db->o.max_head_bytes, (double)db->o.retry_interval_ms / 1000);
}

/* Under db_mu. */
static void clear_fault(struct tsdb *db, const char *what)
{
	if (!db->fault)
		return;
	pthread_mutex_lock(&db->fault_mu);
	db->fault = false;
	db->fault_why[0] = '\0';
	pthread_mutex_unlock(&db->fault_mu);
	complaint_clear(&db->fault_complaint, "tsdb: %s: %s; the samples held in memory are written",
			db->path, what);
}

int tsdb_unwritable(struct tsdb *db, char *why, size_t len)
{
	pthread_mutex_lock(&db->fault_mu);
	bool f = db->fault;
	if (f && why && len)
		snprintf(why, len, "%s", db->fault_why);
	pthread_mutex_unlock(&db->fault_mu);
	return f ? GPULSE_EIO : 0;
}

/* The inode of PATH SUFFIX, 0 when there is none (*dev: its device). */
static ino_t ino_of(const char *path, const char *suffix, dev_t *dev)
{
	char p[4096];
	struct stat sb;
	if ((size_t)snprintf(p, sizeof p, "%s%s", path, suffix) >= sizeof p || stat(p, &sb) != 0)
		return 0;
	if (dev)
		*dev = sb.st_dev;
	return sb.st_ino;
}

/* Remember the file, its -wal and its -shm as they are now. Under db_mu. */
static void note_files(struct tsdb *db)
{
	db->ino = ino_of(db->path, "", &db->dev);
	db->wal_ino = ino_of(db->path, "-wal", NULL);
	db->shm_ino = ino_of(db->path, "-shm", NULL);
}

/* The sentence for a file SQLite opened read-only. */
static void unwritable_why(struct tsdb *db, char *why, size_t len)
{
	int e = access(db->path, W_OK) != 0 ? errno : EROFS;
	str_errf(why, len, "%s: not writable (%s): SQLite opened it read-only", db->path, strerror(e));
}

/* May this process write the store's file, its -wal and its -shm now?
 * SQLite makes the -wal and -shm with the file's mode, so a store made
 * 0444 leaves a -shm of mode 0444 behind, which a file given its mode
 * back does not change: every later connection then maps the -shm
 * read-only and fails its first write with SQLITE_READONLY. A side file
 * of ours that cannot be written is given the file's mode again, as
 * SQLite itself does for an empty one. 0 when all three can be written;
 * else the sentence in why. */
static int writable_now(struct tsdb *db, char *why, size_t len)
{
	struct stat sb;
	if (access(db->path, W_OK) != 0 || stat(db->path, &sb) != 0) {
		str_errf(why, len, "%s: not writable (%s)", db->path, strerror(errno));
		return GPULSE_EIO;
	}
	static const char *const sides[] = {"-wal", "-shm"};
	for (size_t i = 0; i < sizeof sides / sizeof *sides; i++) {
		char p[4096];
		struct stat ss;
		if ((size_t)snprintf(p, sizeof p, "%s%s", db->path, sides[i]) >= sizeof p ||
		    stat(p, &ss) != 0 || access(p, W_OK) == 0)
			continue;
		int e = errno;
		if (e == EACCES && ss.st_uid == geteuid() && chmod(p, sb.st_mode & 0777) == 0 &&
		    access(p, W_OK) == 0) {
			log_info("tsdb: %s: given the mode of %s again (0%o; made while the store "
				 "could not be written)", p, db->path, (unsigned)(sb.st_mode & 0777));
			continue;
		}
		str_errf(why, len, "%s: not writable (%s)", p, strerror(e));
		return GPULSE_EIO;
	}
	return 0;
}

/* SQLite opens a file it may not write read-only, without a word: say so
 * at open, and keep the samples until it can be written. */
static void note_unwritable_at_open(struct tsdb *db)
{
	note_files(db);
	if (sqlite3_db_readonly(db->sql, "main") == 1) {
		char why[640];
		unwritable_why(db, why, sizeof why);
		set_fault(db, why);
	}
}

/* A new, empty file at the path: every series and every head chunk (the
 * open ones whole) is written to it afresh. Under db_mu. */
static void forget_disk(struct tsdb *db)
{
	size_t n = atomic_load_explicit(&db->nseries, memory_order_acquire);
	for (size_t i = 0; i < n; i++) {
		struct series *s = db->series[i];
		struct shard *sh = &db->shards[s->id % SHARDS];
		s->on_disk = false;
		s->rolled_until = 0;
		pthread_mutex_lock(&sh->mu);
		s->open_saved_n = 0;
		s->open_row = 0;
		s->open_logged_n = 0;
		s->log_over = true;
		for (struct pend *p = s->ph; p; p = p->next) {
			p->saved = false;
			p->row = 0;
		}
		pthread_mutex_unlock(&sh->mu);
	}
	db->ncorrupt_seen = 0;
}

/* The .lock file went with the store (rm gpulse.db*): take a new one, so
 * that a second store on the path is still refused. Under db_mu. */
static int relock(struct tsdb *db, char *err, size_t errlen)
{
	char lp[4096];
	struct stat a, b;
	snprintf(lp, sizeof lp, "%s.lock", db->path);
	if (db->lock_fd >= 0 && fstat(db->lock_fd, &a) == 0 && stat(lp, &b) == 0 &&
	    a.st_ino == b.st_ino && a.st_dev == b.st_dev)
		return 0;
	int old = db->lock_fd;
	db->lock_fd = -1;
	int r = lock_file(db, err, errlen);
	if (r != 0) {
		if (db->lock_fd >= 0)
			close(db->lock_fd);
		db->lock_fd = old;
		return r;
	}
	if (old >= 0)
		close(old);
	return 0;
}

/* Open the connection again. `lost`: the file, its -wal or its -shm went
 * away under the old one, which is closed first: it then writes what its
 * deleted -wal holds into the file, and no new connection reads a -wal or
 * -shm that belongs to another. When the path cannot be opened then, a
 * stand-in in memory takes its place (reads find nothing; the fault stays
 * set, so nothing is written to it). Otherwise the old connection stays
 * until the new one is open. Under db_mu. 0 when the file can be written
 * now; else the sentence in err. */
static int reopen(struct tsdb *db, bool lost, char *err, size_t errlen)
{
	int64_t version = 0;
	int r;
	if (lost) {
		db_disconnect(db);
		r = db_connect(db, db->path, &version, err, errlen);
		if (r != 0) {
			char e2[256];
			int64_t v2;
			if (db_connect(db, ":memory:", &v2, e2, sizeof e2) != 0)
				log_error("tsdb: %s: no connection at all: %s", db->path, e2);
			return r;
		}
	} else {
		sqlite3 *old = db->sql;
		sqlite3_stmt *old_st[ST_COUNT];
		memcpy(old_st, db->st, sizeof old_st);
		db->sql = NULL;
		memset(db->st, 0, sizeof db->st);
		r = db_connect(db, db->path, &version, err, errlen);
		if (r != 0) {
			db->sql = old;
			memcpy(db->st, old_st, sizeof old_st);
			return r;
		}
		for (int i = 0; i < ST_COUNT; i++)
			sqlite3_finalize(old_st[i]);
		sqlite3_close_v2(old);
	}
	note_files(db);
	if (version == 0)
		forget_disk(db);
	if (sqlite3_db_readonly(db->sql, "main") == 1) {
		unwritable_why(db, err, errlen);
		return GPULSE_EIO;
	}
	/* SQLite does not always say a reopened file is read-only (it may
	 * reuse the descriptor of the connection just closed): one small
	 * write tells. */
	char q[96];
	snprintf(q, sizeof q, "BEGIN IMMEDIATE; PRAGMA user_version = %d; COMMIT", TSDB_SCHEMA_VERSION);
	int rc = sqlite3_exec(db->sql, q, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		int e = sqlite3_system_errno(db->sql);
		str_errf(err, errlen, "%s: not writable (%s)", db->path, e ? strerror(e) : sqlite3_errstr(rc));
		sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
		return GPULSE_EIO;
	}
	return 0;
}

/* Before a flush, under db_mu: is the file at the path still the one
 * open, and, while it cannot be written, is it time to open it again?
 * 0 when the flush may write. */
static int check_store(struct tsdb *db)
{
	char err[640];
	struct stat sb;
	int64_t now = clock_mono_ns();
	bool gone = stat(db->path, &sb) != 0 && errno == ENOENT;
	bool replaced = !gone && db->ino && (sb.st_ino != db->ino || sb.st_dev != db->dev);
	const char *side = NULL;
	if (!gone && !replaced && !db->fault) {
		if (db->wal_ino && ino_of(db->path, "-wal", NULL) != db->wal_ino)
			side = "-wal";
		else if (db->shm_ino && ino_of(db->path, "-shm", NULL) != db->shm_ino)
			side = "-shm";
	}
	if (gone || side) {
		bool noticed = side || db->ino != 0;
		if (noticed) {
			atomic_fetch_add(&db->file_lost, 1);
			if (gone)
				log_error("tsdb: %s was deleted while the store was open: the history it held "
					  "is gone; a new store is created at the path, holding from now on "
					  "what memory holds and what comes", db->path);
			else
				log_warn("tsdb: %s%s was deleted while the store was open: opening the store "
					 "again (what that file held is written into %s first)", db->path,
					 side, db->path);
			db->ino = 0;
		} else if (!db->fault || now < db->retry_at_ns) {
			return GPULSE_EIO;
		}
		int r = gone ? relock(db, err, sizeof err) : 0;
		if (r == 0)
			r = reopen(db, true, err, sizeof err);
		if (r != 0) {
			set_fault(db, err);
			return GPULSE_EIO;
		}
		if (gone)
			log_warn("tsdb: %s: a new store created; samples are written to it from now on",
				 db->path);
		clear_fault(db, gone ? "a new store created at the path" : "opened again");
		return 0;
	}
	if (replaced) {
		if (!db->fault) {
			atomic_fetch_add(&db->file_lost, 1);
			str_errf(err, sizeof err,
				 "%s: replaced by another file while the store was open: not written to; "
				 "restart gpulsed to open it, or remove it to have a new store created",
				 db->path);
			set_fault(db, err);
		}
		return GPULSE_EIO;
	}
	if (!db->fault) {
		/* A mode changed under the open connection: its descriptors
		 * still write, but the store was made read-only on purpose (or
		 * the next open would find it so): written no more until the
		 * mode returns. Root passes, as it passes every mode. */
		if (access(db->path, W_OK) == 0)
			return 0;
		str_errf(err, sizeof err, "%s: not writable (%s) while the store was open", db->path,
			 strerror(errno));
		set_fault(db, err);
		return GPULSE_EIO;
	}
	if (now < db->retry_at_ns)
		return GPULSE_EIO;
	/* Nothing is opened while the file cannot be written: a connection
	 * opened then would make a read-only -shm (writable_now). */
	if (writable_now(db, err, sizeof err) != 0) {
		set_fault(db, err);
		return GPULSE_EIO;
	}
	/* Closed first, as for a lost file: a second connection beside the
	 * read-only one would share its file and be taken for writable. */
	if (reopen(db, true, err, sizeof err) != 0) {
		set_fault(db, err);
		return GPULSE_EIO;
	}
	clear_fault(db, "writable again");
	return 0;
}

int tsdb_open(struct tsdb **out, const struct tsdb_opts *opts, char *err, size_t errlen)
{
	*out = NULL;
	if (!opts || !opts->path || !*opts->path) {
		str_errf(err, errlen, "tsdb: no database path");
		return GPULSE_EINVAL;
	}
	struct tsdb *db = calloc(1, sizeof *db);
	if (!db) {
		str_errf(err, errlen, "%s: out of memory while opening it", opts->path);
		return GPULSE_ENOMEM;
	}
	db->lock_fd = -1;
	db->o = *opts;
	if (db->o.flush_interval_ms <= 0)
		db->o.flush_interval_ms = DEFAULT_FLUSH_MS;
	if (db->o.raw_retention_ms <= 0)
		db->o.raw_retention_ms = DEFAULT_RAW_RETENTION_MS;
	if (db->o.rollup_retention_ms <= 0)
		db->o.rollup_retention_ms = DEFAULT_ROLLUP_RETENTION_MS;
	if (db->o.rollup_step_ms <= 0)
		db->o.rollup_step_ms = DEFAULT_ROLLUP_STEP_MS;
	if (db->o.max_series == 0)
		db->o.max_series = DEFAULT_MAX_SERIES;
	if (db->o.max_head_bytes == 0)
		db->o.max_head_bytes = DEFAULT_MAX_HEAD_BYTES;
	if (db->o.max_series > UINT32_MAX / 2)
		db->o.max_series = UINT32_MAX / 2;
	if (db->o.ooo_window_ms == 0)
		db->o.ooo_window_ms = DEFAULT_OOO_WINDOW_MS;
	if (db->o.retry_interval_ms <= 0)
		db->o.retry_interval_ms = DEFAULT_RETRY_MS;
	pthread_mutex_init(&db->fault_mu, NULL);
	pthread_mutex_init(&db->db_mu, NULL);
	pthread_mutex_init(&db->series_mu, NULL);
	periodic_init(&db->flusher, "gpulse-flusher", true, flusher_run, db);
	for (int i = 0; i < SHARDS; i++)
		pthread_mutex_init(&db->shards[i].mu, NULL);
	db->path = strdup(opts->path);
	db->series = calloc(db->o.max_series, sizeof *db->series);
	db->hcap = 1024;
	while (db->hcap < db->o.max_series && db->hcap < (1u << 24))
		db->hcap <<= 1;
	db->htab = calloc(db->hcap, sizeof *db->htab);
	db->ntab = calloc(db->hcap, sizeof *db->ntab);
	if (!db->path || !db->series || !db->htab || !db->ntab) {
		str_errf(err, errlen, "%s: out of memory while opening it", opts->path);
		db_free(db);
		return GPULSE_ENOMEM;
	}

	if (db->o.read_only) {
		if (access(db->path, F_OK) != 0) {
			str_errf(err, errlen, "%s: no such store: %s", db->path, strerror(errno));
			db_free(db);
			return errno == ENOENT ? GPULSE_ENOENT : GPULSE_EIO;
		}
	} else {
		int lr = lock_file(db, err, errlen);
		if (lr != 0) {
			db_free(db);
			return lr;
		}
	}
	int64_t version = 0;
	int r = db_connect(db, db->path, &version, err, errlen);
	if (r != 0) {
		db_free(db);
		return r;
	}
	if (!db->o.read_only) {
		note_unwritable_at_open(db);
		/* Before the series load: appends go on after what it held.
		 * An unwritable file: at the first flush that can write. */
		db->log_replay_pending = true;
		if (!db->fault && replay_log(db, false) != 0)
			log_warn("tsdb: %s: replaying the head log failed (%s); retried at the next flush",
				 db->path, sqlite3_errmsg(db->sql));
	}
	r = load_series(db, err, errlen);
	if (r != 0) {
		if (r == GPULSE_EPARSE)
			explain_truncated(db, err, errlen);
		db_free(db);
		return r;
	}
	/* A reader beside the owner: what its last flushes put in the log. */
	if (db->o.read_only && replay_log(db, true) != 0)
		log_warn("tsdb: %s: reading the head log failed (%s): the samples since the owner's "
			 "last checkpoint are left out", db->path, sqlite3_errmsg(db->sql));
	*out = db;
	return 0;
}

void tsdb_close(struct tsdb *db)
{
	if (!db)
		return;
	tsdb_stop_flusher(db);
	if (!db->o.read_only) {
		db->retry_at_ns = 0;   /* an unwritable file: one last try */
		tsdb_flush(db);
	}
	db_free(db);
}

/* ---- series ---- */

int tsdb_series(struct tsdb *db, const struct label *labels, size_t n, uint32_t *ref,
		char *err, size_t errlen)
{
	struct label sorted[TSDB_MAX_LABELS];
	if (n > TSDB_MAX_LABELS) {
		atomic_fetch_add(&db->label_limit_hits, 1);
		str_errf(err, errlen, "series has %zu labels; the limit is %d", n, TSDB_MAX_LABELS);
		return GPULSE_ELIMIT;
	}
	size_t len = 0;
	bool has_name = false;
	for (size_t i = 0; i < n; i++) {
		if (!labels[i].name || !labels[i].value || !str_is_label_name(labels[i].name)) {
			str_errf(err, errlen, "invalid label name \"%.64s\"",
				 labels[i].name ? labels[i].name : "(null)");
			return GPULSE_EINVAL;
		}
		size_t ln = strlen(labels[i].name), lv = strlen(labels[i].value);
		if (ln > TSDB_MAX_LABEL_NAME || lv > TSDB_MAX_LABEL_VALUE) {
			atomic_fetch_add(&db->label_limit_hits, 1);
			str_errf(err, errlen, "label %.64s: name or value longer than %d/%d bytes",
				 labels[i].name, TSDB_MAX_LABEL_NAME, TSDB_MAX_LABEL_VALUE);
			return GPULSE_ELIMIT;
		}
		if (lv == 0) {
			str_errf(err, errlen, "label %.64s has an empty value", labels[i].name);
			return GPULSE_EINVAL;
		}
		if (strcmp(labels[i].name, "__name__") == 0)
			has_name = true;
		sorted[i] = labels[i];
		len += ln + lv + 2;
	}
	if (!has_name) {
		str_errf(err, errlen, "series has no __name__ label");
		return GPULSE_EINVAL;
	}
	qsort(sorted, n, sizeof *sorted, label_cmp_name);
	for (size_t i = 1; i < n; i++)
		if (strcmp(sorted[i - 1].name, sorted[i].name) == 0) {
			str_errf(err, errlen, "label %.64s given twice", sorted[i].name);
			return GPULSE_EINVAL;
		}
	uint8_t *blob = malloc(len);
	if (!blob)
		return GPULSE_ENOMEM;
	uint8_t *p = blob;
	for (size_t i = 0; i < n; i++) {
		size_t ln = strlen(sorted[i].name) + 1, lv = strlen(sorted[i].value) + 1;
		memcpy(p, sorted[i].name, ln);
		memcpy(p + ln, sorted[i].value, lv);
		p += ln + lv;
	}
	uint64_t h = fnv1a64(blob, len);
	pthread_mutex_lock(&db->series_mu);
	struct series *s = htab_find(db, blob, len, h);
	if (s) {
		*ref = s->id;
		pthread_mutex_unlock(&db->series_mu);
		free(blob);
		return 0;
	}
	if (db->o.read_only) {
		pthread_mutex_unlock(&db->series_mu);
		free(blob);
		str_errf(err, errlen, "%s: opened read-only: no new series", db->path);
		return GPULSE_ESTATE;
	}
	if (atomic_load(&db->nseries) >= db->o.max_series) {
		pthread_mutex_unlock(&db->series_mu);
		free(blob);
		atomic_fetch_add(&db->series_limit_hits, 1);
		str_errf(err, errlen, "series limit reached (max_series %zu)", db->o.max_series);
		return GPULSE_ELIMIT;
	}
	int rc = series_from_blob(blob, len, &s);
	if (rc == 0) {
		series_publish(db, s);
		*ref = s->id;
	}
	pthread_mutex_unlock(&db->series_mu);
	if (rc != 0)
		str_errf(err, errlen, "cannot create series: %s", gpulse_strerror(rc));
	return rc;
}

/* ---- the head ---- */

static void drop_oldest(struct tsdb *db, struct shard *sh, struct series *s)
{
	struct pend *p = s->ph;
	s->ph = p->next;
	if (!s->ph)
		s->pt = NULL;
	sh->dropped += p->n;
	atomic_fetch_sub(&db->head_bytes, sizeof *p + p->len);
	free(p);
}

/* The open chunk is full: move its bytes to the pending list (one
 * allocation per chunk) and start a new one. Under the shard lock. */
static void cut_chunk(struct tsdb *db, struct shard *sh, struct series *s)
{
	struct chunk_enc *e = s->open;
	size_t len = chunk_enc_len(e);
	struct pend *p = malloc(sizeof *p + len);
	if (!p) {
		sh->dropped += e->n;
	} else {
		memcpy(p->data, chunk_enc_bytes(e), len);
		p->len = (uint16_t)len;
		p->n = e->n;
		p->mint = e->t_first;
		p->maxt = e->t_last;
		p->overlap = s->open_overlaps;
		/* Its first time is taken by a row or by log entries. */
		p->saved = s->open_saved_n > 0 || s->open_logged_n > 0;
		p->row = s->open_row;
		p->next = NULL;
		if (s->pt)
			s->pt->next = p;
		else
			s->ph = p;
		s->pt = p;
		uint64_t hb = atomic_fetch_add(&db->head_bytes, sizeof *p + len) + sizeof *p + len;
		/* Over the bound (the disk has been failing): the oldest chunk of
		 * this series goes, counted. */
		if (hb > db->o.max_head_bytes)
			drop_oldest(db, sh, s);
	}
	chunk_enc_init(e);
	s->open_saved_n = 0;
	s->open_row = 0;
	s->open_logged_n = 0;
	s->log_n = 0;
	s->log_over = false;
	s->open_overlaps = false;
}

static int head_append(struct tsdb *db, uint32_t ref, int64_t t_ms, double v, bool hook);

int tsdb_append(struct tsdb *db, uint32_t ref, int64_t t_ms, double v)
{
	if (db->o.read_only)
		return GPULSE_ESTATE;
	return head_append(db, ref, t_ms, v, true);
}

/* tsdb_append's work; hook: call the append hook. */
static int head_append(struct tsdb *db, uint32_t ref, int64_t t_ms, double v, bool hook)
{
	struct series *s = series_at(db, ref);
	if (!s)
		return GPULSE_EINVAL;
	struct shard *sh = &db->shards[ref % SHARDS];
	pthread_mutex_lock(&sh->mu);
	/* Older than the series' newest sample: the wall clock stepped back
	 * (an NTP step, a corrected RTC). Taken within the window, as
	 * Prometheus's out_of_order_time_window takes it, so samples keep
	 * coming rather than stop until the clock passes its old time: a
	 * sample older than the open chunk's last starts a chunk of its own
	 * (chunks are in time order inside; reads merge them). The newest's
	 * own time is a repeat (a rule evaluated twice): refused. */
	bool older = s->has_last && t_ms <= s->last_t;
	if (older && (t_ms == s->last_t || db->o.ooo_window_ms < 0 ||
		      t_ms < s->last_t - db->o.ooo_window_ms ||
		      (s->open->n > 0 && t_ms == s->open->t_last))) {
		sh->dropped++;
		pthread_mutex_unlock(&sh->mu);
		return GPULSE_ERANGE;
	}
	if (older && s->open->n > 0 && t_ms < s->open->t_last)
		cut_chunk(db, sh, s);
	int rc = chunk_enc_append(s->open, t_ms, v);
	if (rc == GPULSE_ELIMIT) {
		cut_chunk(db, sh, s);
		rc = chunk_enc_append(s->open, t_ms, v);
	}
	if (rc == 0) {
		if (s->open->n == 1)
			s->open_overlaps = older;
		if (s->log_n == 0)
			s->log_idx = (uint16_t)(s->open->n - 1);
		if (s->log_n < LOG_BUF) {
			s->log_t[s->log_n] = t_ms;
			s->log_v[s->log_n] = v;
			s->log_n++;
		} else {
			s->log_over = true;
		}
		if (older) {
			s->ooo = true;
			sh->ooo++;
		} else {
			s->has_last = true;
			s->last_t = t_ms;
		}
		sh->appended++;
	} else {
		sh->dropped++;
	}
	pthread_mutex_unlock(&sh->mu);
	if (rc == 0 && hook) {
		tsdb_append_hook_fn *fn = atomic_load_explicit(&db->hook, memory_order_acquire);
		if (fn)
			fn(db->hook_ctx, ref, t_ms, v);
	}
	return rc;
}

void tsdb_set_append_hook(struct tsdb *db, tsdb_append_hook_fn *fn, void *ctx)
{
	db->hook_ctx = ctx;
	atomic_store_explicit(&db->hook, fn, memory_order_release);
}

int tsdb_series_labels(struct tsdb *db, uint32_t ref, const struct label **labels,
		       size_t *n)
{
	struct series *s = series_at(db, ref);
	if (!s)
		return GPULSE_EINVAL;
	*labels = s->labels;
	*n = s->nlabels;
	return 0;
}

/* ---- flush ---- */

struct flush_item {
	struct series *s;
	struct pend *list;      /* detached pending chunks */
	struct pend *snap;      /* copy of the open chunk, or NULL */
	int64_t snap_row;       /* the row snap was written to */
	int64_t newest;         /* newest sample written, or INT64_MIN */
	int64_t rolled_until;   /* new watermark */
	/* A head log entry: open chunk (first time log_mint) samples
	 * log_idx.. (log_n of them, 0: none). */
	uint16_t log_n, log_idx;
	int64_t log_mint;
	int64_t log_t[LOG_BUF];
	double log_v[LOG_BUF];
};

/* Write chunk p of series id: over row p->row when that row still holds
 * this chunk (an earlier flush wrote it as the open chunk), else as a
 * row of its own, replacing any of the same series and first time. The
 * open chunk of every active series is rewritten at each flush, so this
 * is the flush's main cost: an update in place touches the row's page
 * only, where a replace deletes the row and its index entry and inserts
 * both anew. *row: the row written. 0 or an SQLite code. */
static int put_chunk(struct tsdb *db, uint32_t id, const struct pend *p, int64_t *row)
{
	int rc;
	if (p->row > 0) {
		sqlite3_stmt *st = db->st[ST_CHUNK_UPDATE];
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, p->mint);
		sqlite3_bind_int64(st, 3, p->maxt);
		sqlite3_bind_int(st, 4, p->n);
		sqlite3_bind_blob(st, 5, p->data, p->len, SQLITE_STATIC);
		sqlite3_bind_int64(st, 6, p->row);
		rc = sql_step_done(st);
		sqlite3_clear_bindings(st);
		if (rc != 0)
			return rc;
		if (sqlite3_changes(db->sql) == 1) {
			*row = p->row;
			return 0;
		}
	}
	sqlite3_stmt *st = db->st[ST_CHUNK_PUT];
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, p->mint);
	sqlite3_bind_int64(st, 3, p->maxt);
	sqlite3_bind_int(st, 4, p->n);
	sqlite3_bind_blob(st, 5, p->data, p->len, SQLITE_STATIC);
	rc = sql_step_done(st);
	sqlite3_clear_bindings(st);
	if (rc == 0)
		*row = sqlite3_last_insert_rowid(db->sql);
	return rc;
}

struct racc {
	int64_t t;
	double min, max, sum;
	uint64_t count;
};

static void racc_add(struct racc *a, double v)
{
	if (isnan(v))
		return;   /* staleness markers and missing values are not data */
	if (a->count == 0 || v < a->min)
		a->min = v;
	if (a->count == 0 || v > a->max)
		a->max = v;
	a->sum += v;
	a->count++;
}

/* One bucket into an aggregate of buckets. */
static void racc_merge(struct racc *a, const struct rollblock_bucket *k)
{
	if (a->count == 0 || k->min < a->min)
		a->min = k->min;
	if (a->count == 0 || k->max > a->max)
		a->max = k->max;
	a->sum += k->sum;
	a->count += k->count;
}


/* A series' labels as {a="b", ...} (values cut at 64 bytes) for logs. */
static void series_desc(const struct series *s, char *out, size_t cap)
{
	size_t w = 0;
	int n = snprintf(out, cap, "{");
	w = n > 0 ? (size_t)n : 0;
	for (uint32_t i = 0; i < s->nlabels && w < cap; i++) {
		n = snprintf(out + w, cap - w, "%s%s=\"%.64s\"", i ? ", " : "", s->labels[i].name,
			     s->labels[i].value);
		w += n > 0 ? (size_t)n : 0;
	}
	if (w < cap)
		snprintf(out + w, cap - w, "}");
}

/* A damaged chunk or rollup block on disk (`why`: checksum mismatch,
 * bad header, undecodable bit stream): counted and logged the first time
 * this process sees its row, through a rate-limited complaint. Under
 * db_mu. */
static void note_damaged(struct tsdb *db, const struct series *s, bool block, int64_t row,
			 int64_t mint, int64_t maxt, const char *why)
{
	int64_t key = block ? -row - 1 : row;   /* row ids are positive in both tables */
	for (size_t i = 0; i < db->ncorrupt_seen; i++)
		if (db->corrupt_seen[i] == key)
			return;
	if (db->ncorrupt_seen < CORRUPT_SEEN_MAX)
		db->corrupt_seen[db->ncorrupt_seen++] = key;
	atomic_fetch_add(&db->corrupt_chunks, 1);
	char desc[512];
	series_desc(s, desc, sizeof desc);
	const char *what = block ? "rollup block" : "chunk";
	complain(&db->corrupt_complaint,
		 "tsdb: %s: damaged %s skipped (%s): series %s, %s from %lld to %lld ms "
		 "(%s row %lld); the rest of the range is served",
		 db->path, what, why ? why : "invalid", desc, block ? "buckets" : "samples",
		 (long long)mint, (long long)maxt, what, (long long)row);
}

static void note_corrupt(struct tsdb *db, const struct series *s, int64_t row, int64_t mint,
			 int64_t maxt, const char *why)
{
	note_damaged(db, s, false, row, mint, maxt, why);
}

/* Decode the rollup blocks of series `s` overlapping [lo, hi] and call
 * `fn` for each bucket in range, until it returns non-zero (its answer
 * in *fn_rc). A damaged block is skipped whole, counted and logged.
 * Under db_mu. 0 or an SQLite code. */
typedef int bucket_fn(void *ctx, const struct rollblock_bucket *k);

static int scan_blocks(struct tsdb *db, const struct series *s, int64_t lo, int64_t hi,
		       bucket_fn *fn, void *ctx, int *fn_rc)
{
	sqlite3_stmt *st = db->st[ST_RBLOCK_RANGE];
	sqlite3_bind_int64(st, 1, s->id);
	sqlite3_bind_int64(st, 2, lo);
	sqlite3_bind_int64(st, 3, hi);
	int rc = SQLITE_DONE, out = 0;
	struct rollblock b;
	while (out == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *why = NULL;
		int64_t mint = sqlite3_column_int64(st, 0);
		if (rollblock_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
				     mint, &b, &why) != 0) {
			note_damaged(db, s, true, sqlite3_column_int64(st, 2), mint,
				     sqlite3_column_int64(st, 3), why);
			continue;
		}
		for (int i = 0; i < b.n && out == 0; i++)
			if (b.b[i].t_ms >= lo && b.b[i].t_ms <= hi)
				out = fn(ctx, &b.b[i]);
	}
	sqlite3_reset(st);
	*fn_rc = out;
	return out != 0 || rc == SQLITE_DONE ? 0 : rc;
}

/* Decode the chunks of series `s` on disk overlapping [lo, hi] and call
 * `fn` for each sample in range. A damaged chunk is skipped whole (decoded
 * into scratch first, so none of its samples reach `fn`), counted and
 * logged (note_corrupt); the others are served. Under db_mu. 0 or an
 * SQLite code. */
typedef void sample_fn(void *ctx, int64_t t, double v);

static int scan_disk(struct tsdb *db, const struct series *s, int64_t lo, int64_t hi,
		     sample_fn *fn, void *ctx)
{
	sqlite3_stmt *st = db->st[ST_CHUNK_RANGE];
	sqlite3_bind_int64(st, 1, s->id);
	sqlite3_bind_int64(st, 2, lo);
	sqlite3_bind_int64(st, 3, hi);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct chunk_iter it;
		const uint8_t *b = sqlite3_column_blob(st, 1);
		size_t len = (size_t)sqlite3_column_bytes(st, 1);
		int n = 0, r = chunk_iter_init(&it, b, len) != 0 ? -1 : 0;
		while (r == 0 && (r = chunk_iter_next(&it, &db->scratch_t[n], &db->scratch_v[n])) == 1) {
			n++;
			r = 0;
		}
		if (r < 0) {
			note_corrupt(db, s, sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 0),
				     sqlite3_column_int64(st, 3), it.why);
			continue;
		}
		for (int i = 0; i < n; i++)
			if (db->scratch_t[i] >= lo && db->scratch_t[i] <= hi)
				fn(ctx, db->scratch_t[i], db->scratch_v[i]);
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : rc;
}

/* New rollup buckets of one series, packed into its newest block. */
struct roll_ctx {
	struct tsdb *db;
	const struct series *s;
	struct racc a;               /* the bucket being summed */
	struct rollblock b;          /* the block it goes into */
	bool dirty;                  /* b holds buckets not written */
	int rc;
};

/* Start from the series' newest block when it has room: the buckets of
 * one block are consecutive, whatever flush wrote them. */
static int roll_load(struct roll_ctx *c)
{
	sqlite3_stmt *st = c->db->st[ST_RBLOCK_LAST];
	sqlite3_bind_int64(st, 1, c->s->id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *why = NULL;
		int64_t mint = sqlite3_column_int64(st, 0);
		if (rollblock_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
				     mint, &c->b, &why) != 0)
			note_damaged(c->db, c->s, true, sqlite3_column_int64(st, 2), mint,
				     sqlite3_column_int64(st, 3), why);   /* new buckets start a block */
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : rc;
}

static int roll_flush(struct roll_ctx *c)
{
	if (!c->dirty)
		return 0;
	c->dirty = false;
	return put_rollblock(c->db->st[ST_RBLOCK_PUT], c->s->id, &c->b);
}

static int roll_put(struct roll_ctx *c, const struct racc *a)
{
	if (a->count == 0)
		return 0;
	struct rollblock_bucket k = {a->t, a->min, a->max, a->sum, a->count};
	if (c->b.n > 0 && a->t == c->b.b[c->b.n - 1].t_ms) {
		/* The same bucket again: replaced, as a row was. */
		struct rollblock rest = {0};
		for (int i = 0; i < c->b.n - 1; i++)
			rollblock_add(&rest, &c->b.b[i]);
		c->b = rest;
	}
	int f = rollblock_add(&c->b, &k);
	if (f == 0) {
		int rc = roll_flush(c);
		if (rc != 0)
			return rc;
		c->b.n = 0;
		f = rollblock_add(&c->b, &k);
	}
	if (f < 0) {
		/* Older than the buckets stored (the watermark forbids it): not
		 * stored, and counted. */
		atomic_fetch_add(&c->db->storage_errors, 1);
		return 0;
	}
	c->dirty = true;
	return 0;
}

static void roll_sample(void *ctx, int64_t t, double v)
{
	struct roll_ctx *c = ctx;
	int64_t b = bucket_of(t, c->db->o.rollup_step_ms);
	/* Chunks that overlap (samples taken out of order) come by their
	 * first time: a bucket already passed is not gone back to. */
	if (b < c->a.t)
		return;
	if (b != c->a.t) {
		if (c->rc == 0)
			c->rc = roll_put(c, &c->a);
		memset(&c->a, 0, sizeof c->a);
		c->a.t = b;
	}
	racc_add(&c->a, v);
}

/* Write the rollup rows of buckets that the newest flushed sample closed. */
static int roll_series(struct tsdb *db, struct flush_item *it)
{
	struct series *s = it->s;
	it->rolled_until = s->rolled_until;
	if (it->newest == INT64_MIN)
		return 0;
	int64_t hi = bucket_of(it->newest, db->o.rollup_step_ms);
	if (hi <= s->rolled_until)
		return 0;
	struct roll_ctx c = { .db = db, .s = s, .a = { .t = INT64_MIN } };
	int rc = roll_load(&c);
	/* A damaged chunk rolls up as what could be read. */
	if (rc == 0)
		rc = scan_disk(db, s, s->rolled_until, hi - 1, roll_sample, &c);
	if (rc == 0)
		rc = c.rc;
	if (rc == 0 && c.a.t != INT64_MIN)
		rc = roll_put(&c, &c.a);
	if (rc == 0)
		rc = roll_flush(&c);
	if (rc == 0) {
		sqlite3_stmt *st = db->st[ST_SERIES_ROLLED];
		sqlite3_bind_int64(st, 1, s->id);
		sqlite3_bind_int64(st, 2, hi);
		rc = sql_step_done(st);
	}
	if (rc == 0)
		it->rolled_until = hi;
	return rc;
}

static struct pend *snapshot_open(struct chunk_enc *e)
{
	size_t len = chunk_enc_len(e);
	struct pend *p = malloc(sizeof *p + len);
	if (!p)
		return NULL;
	memcpy(p->data, chunk_enc_bytes(e), len);
	p->len = (uint16_t)len;
	p->n = e->n;
	p->mint = e->t_first;
	p->maxt = e->t_last;
	p->next = NULL;
	return p;
}

static void free_list(struct pend *p)
{
	while (p) {
		struct pend *next = p->next;
		free(p);
		p = next;
	}
}

/* A head log row (LOG_FORMAT): byte 0 the format, then per entry the
 * series id (4 bytes), the open chunk's first time (8), the index of the
 * entry's first sample in that chunk (2) and the length (2) of a chunk
 * (chunk.h, checksummed) holding the entry's samples; little endian. */
static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

#define LOG_ENTRY_HEAD 16

/* The log row of the items' entries in *out (malloc'd; NULL, 0: none).
 * 0 or GPULSE_ENOMEM. */
static int log_encode(struct flush_item *items, size_t n, uint8_t **out, size_t *len)
{
	size_t cap = 1, used = 1;
	*out = NULL;
	*len = 0;
	for (size_t i = 0; i < n; i++)
		if (items[i].log_n)
			cap += LOG_ENTRY_HEAD + CHUNK_MAX_BYTES;
	if (cap == 1)
		return 0;
	uint8_t *b = malloc(cap);
	if (!b)
		return GPULSE_ENOMEM;
	b[0] = LOG_FORMAT;
	struct chunk_enc e;
	for (size_t i = 0; i < n; i++) {
		struct flush_item *it = &items[i];
		if (!it->log_n)
			continue;
		chunk_enc_init(&e);
		for (uint16_t j = 0; j < it->log_n; j++)
			chunk_enc_append(&e, it->log_t[j], it->log_v[j]);   /* at most LOG_BUF: fits */
		size_t cl = chunk_enc_len(&e);
		uint8_t *h = b + used;
		put_le(h, it->s->id, 4);
		put_le(h + 4, (uint64_t)it->log_mint, 8);
		put_le(h + 12, it->log_idx, 2);
		put_le(h + 14, cl, 2);
		memcpy(h + LOG_ENTRY_HEAD, chunk_enc_bytes(&e), cl);
		used += LOG_ENTRY_HEAD + cl;
	}
	*out = b;
	*len = used;
	return 0;
}

static int write_items(struct tsdb *db, struct flush_item *items, size_t n, bool full,
		       const uint8_t *log, size_t log_len, uint64_t *chunks)
{
	int rc = exec_stmt(db, ST_BEGIN);
	if (rc != 0)
		return rc;
	if (log) {
		sqlite3_stmt *st = db->st[ST_LOG_PUT];
		sqlite3_bind_blob(st, 1, log, (int)log_len, SQLITE_STATIC);
		rc = sql_step_done(st);
		sqlite3_clear_bindings(st);
	}
	/* A checkpoint writes every open chunk: the log is then in the chunks. */
	if (full && rc == 0)
		rc = exec_stmt(db, ST_LOG_CLEAR);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct series *s = items[i].s;
		if (!s->on_disk) {
			sqlite3_stmt *st = db->st[ST_SERIES_INSERT];
			sqlite3_bind_int64(st, 1, s->id);
			sqlite3_bind_blob(st, 2, s->blob, (int)s->blob_len, SQLITE_STATIC);
			sqlite3_bind_int64(st, 3, s->rolled_until);
			rc = sql_step_done(st);
			sqlite3_clear_bindings(st);
		}
		int64_t row;
		for (struct pend *p = items[i].list; p && rc == 0; p = p->next) {
			rc = put_chunk(db, s->id, p, &row);
			items[i].newest = p->maxt;
			(*chunks)++;
		}
		if (items[i].snap && rc == 0) {
			rc = put_chunk(db, s->id, items[i].snap, &items[i].snap_row);
			items[i].newest = items[i].snap->maxt;
			(*chunks)++;
		}
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = roll_series(db, &items[i]);
	if (rc == 0)
		rc = exec_stmt(db, ST_COMMIT);
	if (rc != 0) {
		db->flush_errno = sqlite3_system_errno(db->sql);   /* before the rollback's */
		exec_stmt(db, ST_ROLLBACK);
	}
	return rc;
}

/* The chunk in data/len without its first sample, into *out. */
static void chunk_drop_first(const uint8_t *data, size_t len, struct chunk_enc *out)
{
	struct chunk_iter ci;
	int64_t t;
	double v;
	bool first = true;
	chunk_enc_init(out);
	if (chunk_iter_init(&ci, data, len) != 0)
		return;
	while (chunk_iter_next(&ci, &t, &v) == 1) {
		if (!first)
			chunk_enc_append(out, t, v);
		first = false;
	}
}

/* Whether series s has a chunk on disk starting at t. Under db_mu. */
static bool chunk_at(struct tsdb *db, const struct series *s, int64_t t)
{
	if (!s->on_disk)
		return false;
	sqlite3_stmt *st = db->st[ST_CHUNK_AT];
	sqlite3_bind_int64(st, 1, s->id);
	sqlite3_bind_int64(st, 2, t);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_ROW;
}

/* A chunk that starts below its series' newest sample may start at the
 * time of a chunk on disk, whose row (keyed by series and first time) it
 * would replace. Its first sample is then a duplicate of that chunk's,
 * which Prometheus refuses too: dropped and counted, until the chunk
 * starts at a free time. A row the flushes wrote for this very chunk
 * (saved) is replaced, as it should be. Under db_mu and the shard lock. */
static void drop_duplicate_starts(struct tsdb *db, struct shard *sh, struct series *s)
{
	struct chunk_enc e;
	struct pend *prev = NULL;
	for (struct pend *p = s->ph; p;) {
		if (!p->overlap || p->saved || !chunk_at(db, s, p->mint)) {
			prev = p;
			p = p->next;
			continue;
		}
		chunk_drop_first(p->data, p->len, &e);
		struct pend *q = e.n ? snapshot_open(&e) : NULL;
		if (e.n && !q) {
			prev = p;   /* out of memory: written as it is */
			p = p->next;
			continue;
		}
		sh->dropped++;
		struct pend *next = p->next;
		if (q) {
			q->overlap = true;
			q->next = next;
			atomic_fetch_add(&db->head_bytes, sizeof *q + q->len);
		}
		struct pend *keep = q ? q : next;
		if (prev)
			prev->next = keep;
		else
			s->ph = keep;
		if (s->pt == p)
			s->pt = q ? q : prev;
		atomic_fetch_sub(&db->head_bytes, sizeof *p + p->len);
		free(p);
		p = keep;   /* q is looked at again: its new first time */
	}
	while (s->open_overlaps && s->open_logged_n == 0 && s->open->n > 0 &&
	       chunk_at(db, s, s->open->t_first)) {
		chunk_drop_first(chunk_enc_bytes(s->open), chunk_enc_len(s->open), &e);
		*s->open = e;
		s->log_over = true;   /* the buffered samples' indices moved */
		sh->dropped++;
	}
}

/* Take series s's part of a flush into *it: its pending chunks, and the
 * samples of its open chunk not yet on disk, as a head log entry (!full,
 * when the buffer holds all of them) or as a copy of the whole chunk.
 * Under the shard lock. */
static void take_series(struct series *s, struct flush_item *it, bool full)
{
	it->list = s->ph;
	s->ph = s->pt = NULL;
	it->snap = NULL;
	it->log_n = 0;
	struct chunk_enc *o = s->open;
	if (o->n > 0 && o->n != s->open_saved_n) {
		uint16_t from = s->open_logged_n;
		if (!full && o->n == from) {
			/* All in the log already. */
		} else if (!full && !s->log_over && s->log_n > 0 && s->log_idx <= from &&
			   s->log_idx + s->log_n == o->n) {
			uint16_t skip = (uint16_t)(from - s->log_idx);
			it->log_n = (uint16_t)(s->log_n - skip);
			it->log_idx = from;
			it->log_mint = o->t_first;
			memcpy(it->log_t, s->log_t + skip, it->log_n * sizeof *it->log_t);
			memcpy(it->log_v, s->log_v + skip, it->log_n * sizeof *it->log_v);
		} else {
			it->snap = snapshot_open(o);
			if (it->snap)
				it->snap->row = s->open_row;
		}
	}
	/* Logged or written whole: later samples are buffered afresh. */
	s->log_n = 0;
	s->log_over = false;
}

/* Flush; full: a checkpoint (every open chunk written, the log emptied);
 * else one too when CHECKPOINT_MS of flush intervals went by since the
 * last. */
static int flush(struct tsdb *db, bool full)
{
	if (db->o.read_only)
		return GPULSE_ESTATE;
	pthread_mutex_lock(&db->db_mu);
	if (db->log_flushes + 1 >= CHECKPOINT_MS / db->o.flush_interval_ms)
		full = true;
	if (check_store(db) != 0) {
		/* Unwritable: the head keeps the samples, within its bound. */
		pthread_mutex_unlock(&db->db_mu);
		return GPULSE_EIO;
	}
	if (db->log_replay_pending && replay_log(db, false) != 0) {
		/* The last run's log first: later chunks start after it. */
		atomic_fetch_add(&db->storage_errors, 1);
		complain(&db->flush_complaint, "tsdb: %s: replaying the head log failed, samples kept in memory: %s",
			 db->path, sqlite3_errmsg(db->sql));
		db->flush_failing = true;
		pthread_mutex_unlock(&db->db_mu);
		return GPULSE_EIO;
	}
	size_t n = atomic_load_explicit(&db->nseries, memory_order_acquire);
	struct flush_item *items = calloc(n ? n : 1, sizeof *items);
	if (!items) {
		pthread_mutex_unlock(&db->db_mu);
		return GPULSE_ENOMEM;
	}
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		struct series *s = db->series[i];
		struct shard *sh = &db->shards[s->id % SHARDS];
		struct flush_item *it = &items[m];
		pthread_mutex_lock(&sh->mu);
		if (s->ooo)
			drop_duplicate_starts(db, sh, s);
		take_series(s, it, full);
		pthread_mutex_unlock(&sh->mu);
		it->newest = INT64_MIN;
		if (it->list || it->snap || it->log_n || !s->on_disk) {
			it->s = s;
			m++;
		}
	}
	uint64_t chunks = 0;
	uint8_t *log = NULL;
	size_t log_len = 0;
	int rc = log_encode(items, m, &log, &log_len);
	if (rc == 0 && (m || full))
		rc = write_items(db, items, m, full, log, log_len, &chunks);
	else if (rc != 0)
		rc = SQLITE_NOMEM;
	free(log);
	for (size_t i = 0; i < m; i++) {
		struct flush_item *it = &items[i];
		struct series *s = it->s;
		struct shard *sh = &db->shards[s->id % SHARDS];
		pthread_mutex_lock(&sh->mu);
		if (rc == 0) {
			/* The open chunk may have been cut meanwhile: its full
			 * version is pending and replaces the partial row. */
			if (it->snap && s->open->n > 0 && s->open->t_first == it->snap->mint) {
				s->open_saved_n = it->snap->n;
				s->open_logged_n = it->snap->n;
				s->open_row = it->snap_row;
			} else if (it->log_n && s->open->n > 0 && s->open->t_first == it->log_mint) {
				s->open_logged_n = (uint16_t)(it->log_idx + it->log_n);
			} else if (it->log_n && s->ph && s->ph->mint == it->log_mint) {
				s->ph->saved = true;   /* cut meanwhile: log entries hold its time */
			} else if (it->snap && s->ph && s->ph->mint == it->snap->mint) {
				/* Cut meanwhile (the first chunk cut since the
				 * snapshot is the one snapped): its full version
				 * rewrites this row, its own. */
				s->ph->saved = true;
				s->ph->row = it->snap_row;
			}
		} else if (it->list) {
			/* Put the chunks back in front of any cut since. */
			struct pend *last = it->list;
			while (last->next)
				last = last->next;
			last->next = s->ph;
			s->ph = it->list;
			if (!s->pt)
				s->pt = last;
			it->list = NULL;
		}
		pthread_mutex_unlock(&sh->mu);
		if (rc == 0) {
			uint64_t freed = 0;
			for (struct pend *p = it->list; p; p = p->next)
				freed += sizeof *p + p->len;
			atomic_fetch_sub(&db->head_bytes, freed);
			s->on_disk = true;
			s->rolled_until = it->rolled_until;
		}
		free_list(it->list);
		free(it->snap);
	}
	free(items);
	if (rc == 0)
		db->log_flushes = full ? 0 : db->log_flushes + 1;
	atomic_fetch_add(&db->flushes, 1);
	if (rc != 0) {
		atomic_fetch_add(&db->storage_errors, 1);
		complain(&db->flush_complaint, "tsdb: %s: flush failed, samples kept in memory: %s",
			 db->path, sqlite3_errstr(rc));
		db->flush_failing = true;
		/* An I/O error whose errno SQLite did not keep (a WAL write
		 * deep in a commit) may still be a read-only file system. */
		int e = db->flush_errno;
		bool unwritable = sql_is_unwritable(e, rc);
		if (!unwritable && (rc & 0xff) == SQLITE_IOERR && access(db->path, W_OK) != 0) {
			e = errno;
			unwritable = true;
		}
		if (unwritable) {
			/* A file system remounted read-only, a mode changed under
			 * a connection that reopened: open it again later. */
			char why[640];
			str_errf(why, sizeof why, "%s: not writable (%s) while flushing", db->path,
				 e ? strerror(e) : sqlite3_errstr(rc));
			set_fault(db, why);
		}
	} else {
		if (!db->wal_ino || !db->shm_ino)
			note_files(db);
		atomic_fetch_add(&db->chunks_flushed, chunks);
		if (db->flush_failing)
			complaint_clear(&db->flush_complaint, "tsdb: %s: writing again", db->path);
		db->flush_failing = false;
	}
	pthread_mutex_unlock(&db->db_mu);
	return rc == 0 ? 0 : GPULSE_EIO;
}

int tsdb_flush(struct tsdb *db)
{
	return flush(db, true);
}

int tsdb_flush_periodic(struct tsdb *db)
{
	return flush(db, false);
}

/* The head log a run left (a crash: its samples since the last
 * checkpoint) into the chunks: each entry's samples that its chunk's row
 * lacks are appended to that row (created when missing); entries whose
 * samples a row already holds (the chunk was written whole later) are
 * skipped. Then the log is emptied, all in one transaction. Under db_mu
 * (or at open). into_head (a read-only reader, at open, after the series
 * load): nothing is written; the samples the rows lack go into the head,
 * which reads merge with the rows, so the reader sees what the owner's
 * last flush held. 0 or an SQLite code. */
static int replay_log(struct tsdb *db, bool into_head)
{
	sqlite3_stmt *q = NULL, *get = NULL;
	uint64_t replayed = 0, bad = 0;
	int64_t *et = malloc(CHUNK_MAX_SAMPLES * sizeof *et);
	double *ev = malloc(CHUNK_MAX_SAMPLES * sizeof *ev);
	int rc = !et || !ev ? SQLITE_NOMEM : into_head ? SQLITE_OK : exec_stmt(db, ST_BEGIN);
	if (rc != 0) {
		free(et);
		free(ev);
		return rc;
	}
	rc = sqlite3_prepare_v2(db->sql, "SELECT data FROM head_log ORDER BY id", -1, &q, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db->sql, "SELECT n, data FROM chunks WHERE series_id = ?1 AND mint = ?2",
					-1, &get, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(q)) == SQLITE_ROW) {
		const uint8_t *b = sqlite3_column_blob(q, 0);
		size_t len = (size_t)sqlite3_column_bytes(q, 0);
		rc = SQLITE_OK;
		if (!b || len < 1 || b[0] != LOG_FORMAT) {
			bad++;
			continue;
		}
		for (size_t pos = 1; pos < len && rc == SQLITE_OK;) {
			if (len - pos < LOG_ENTRY_HEAD) {
				bad++;
				break;
			}
			const uint8_t *h = b + pos;
			int64_t sid = (int64_t)get_le(h, 4), mint = (int64_t)get_le(h + 4, 8);
			int idx = (int)get_le(h + 12, 2);
			size_t cl = (size_t)get_le(h + 14, 2);
			if (cl > len - pos - LOG_ENTRY_HEAD) {
				bad++;
				break;
			}
			pos += LOG_ENTRY_HEAD + cl;
			int ne = chunk_decode_all(h + LOG_ENTRY_HEAD, cl, et, ev);
			if (ne <= 0) {
				bad++;
				continue;
			}
			sqlite3_bind_int64(get, 1, sid);
			sqlite3_bind_int64(get, 2, mint);
			int nd = 0, grc = sqlite3_step(get);
			struct chunk_enc e;
			chunk_enc_init(&e);
			if (grc == SQLITE_ROW) {
				nd = sqlite3_column_int(get, 0);
				int got = chunk_decode_all(sqlite3_column_blob(get, 1),
							   (size_t)sqlite3_column_bytes(get, 1), db->scratch_t,
							   db->scratch_v);
				for (int j = 0; j < got; j++)
					chunk_enc_append(&e, db->scratch_t[j], db->scratch_v[j]);
				if (got != nd)
					nd = -1;   /* damaged: left as it is */
			} else if (grc != SQLITE_DONE) {
				rc = grc;
			}
			sqlite3_reset(get);
			if (rc != SQLITE_OK)
				break;
			struct series *rs = into_head ? series_at(db, (uint32_t)sid) : NULL;
			if (into_head && !rs)
				continue;
			if (rs && rs->read_n > 0 && rs->read_mint == mint && nd >= 0 && rs->read_n > nd)
				nd = rs->read_n;   /* the head holds nd.. already */
			/* The entry holds samples idx.. of the chunk, the row 0..nd-1. */
			if (nd < 0 || idx > nd || idx + ne <= nd) {
				bad += nd < 0 || idx > nd;
				continue;
			}
			uint16_t before = e.n;
			for (int j = nd - idx; j < ne; j++)
				if (chunk_enc_append(&e, et[j], ev[j]) != 0)
					break;
			if (e.n == before)
				continue;
			if (into_head) {
				for (int j = nd - idx; j < ne; j++)
					if (head_append(db, (uint32_t)sid, et[j], ev[j], false) == 0)
						replayed++;
				rs->read_mint = mint;
				rs->read_n = idx + ne;
				continue;
			}
			sqlite3_stmt *st = db->st[ST_CHUNK_PUT];
			sqlite3_bind_int64(st, 1, sid);
			sqlite3_bind_int64(st, 2, e.t_first);
			sqlite3_bind_int64(st, 3, e.t_last);
			sqlite3_bind_int(st, 4, e.n);
			sqlite3_bind_blob(st, 5, chunk_enc_bytes(&e), (int)chunk_enc_len(&e), SQLITE_STATIC);
			rc = sql_step_done(st);
			sqlite3_clear_bindings(st);
			replayed += (uint64_t)(e.n - before);
		}
	}
	if (rc == SQLITE_DONE)
		rc = SQLITE_OK;
	sqlite3_finalize(q);
	sqlite3_finalize(get);
	free(et);
	free(ev);
	if (into_head)
		return rc;
	if (rc == SQLITE_OK)
		rc = exec_stmt(db, ST_LOG_CLEAR);
	if (rc == SQLITE_OK)
		rc = exec_stmt(db, ST_COMMIT);
	if (rc != SQLITE_OK) {
		exec_stmt(db, ST_ROLLBACK);
		return rc;
	}
	db->log_replay_pending = false;
	if (replayed || bad)
		log_info("tsdb: %s: %llu samples of the head log replayed into their chunks%s", db->path,
			 (unsigned long long)replayed, bad ? " (damaged log entries skipped)" : "");
	return 0;
}

/* Drop series s's rollup buckets older than `cutoff`: whole blocks, and
 * the old buckets of the one block that straddles it (rewritten from its
 * first kept bucket). Under db_mu, in a transaction. 0 or an SQLite code. */
static int retain_blocks(struct tsdb *db, const struct series *s, int64_t cutoff)
{
	sqlite3_stmt *st = db->st[ST_RET_RBLOCKS];
	sqlite3_bind_int64(st, 1, s->id);
	sqlite3_bind_int64(st, 2, cutoff);
	int rc = sql_step_done(st);
	/* Blocks do not overlap, so one is left at most; a loop in case the
	 * file holds more (each pass removes the row it read). */
	for (int pass = 0; rc == 0 && pass < 64; pass++) {
		st = db->st[ST_RBLOCK_OLDER];
		sqlite3_bind_int64(st, 1, s->id);
		sqlite3_bind_int64(st, 2, cutoff);
		int r = sqlite3_step(st);
		if (r != SQLITE_ROW) {
			sqlite3_reset(st);
			return r == SQLITE_DONE ? 0 : r;
		}
		struct rollblock b, keep = {0};
		const char *why = NULL;
		int64_t mint = sqlite3_column_int64(st, 0), row = sqlite3_column_int64(st, 2);
		int64_t maxt = sqlite3_column_int64(st, 3);
		bool ok = rollblock_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
					   mint, &b, &why) == 0;
		sqlite3_reset(st);
		if (!ok)
			note_damaged(db, s, true, row, mint, maxt, why);
		for (int i = 0; ok && i < b.n; i++)
			if (b.b[i].t_ms >= cutoff)
				rollblock_add(&keep, &b.b[i]);   /* a tail of a block fits one */
		st = db->st[ST_RBLOCK_DEL];
		sqlite3_bind_int64(st, 1, row);
		rc = sql_step_done(st);
		if (rc == 0 && keep.n > 0)
			rc = put_rollblock(db->st[ST_RBLOCK_PUT], s->id, &keep);
	}
	return rc;
}

int tsdb_enforce_retention(struct tsdb *db, int64_t now_ms)
{
	if (db->o.read_only)
		return GPULSE_ESTATE;
	pthread_mutex_lock(&db->db_mu);
	if (db->fault) {
		pthread_mutex_unlock(&db->db_mu);
		return GPULSE_EIO;   /* unwritable (said so): the next round */
	}
	size_t n = atomic_load_explicit(&db->nseries, memory_order_acquire);
	int rc = exec_stmt(db, ST_BEGIN);
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct series *s = db->series[i];
		if (!s->on_disk)
			continue;
		sqlite3_stmt *st = db->st[ST_RET_CHUNKS];
		sqlite3_bind_int64(st, 1, s->id);
		sqlite3_bind_int64(st, 2, now_ms - db->o.raw_retention_ms);
		rc = sql_step_done(st);
		if (rc != 0)
			break;
		/* A bucket goes when all of it is older than the retention. */
		rc = retain_blocks(db, s, now_ms - db->o.rollup_retention_ms - db->o.rollup_step_ms + 1);
	}
	if (rc == 0)
		rc = exec_stmt(db, ST_COMMIT);
	if (rc != 0) {
		exec_stmt(db, ST_ROLLBACK);
		atomic_fetch_add(&db->storage_errors, 1);
	}
	pthread_mutex_unlock(&db->db_mu);
	return rc == 0 ? 0 : GPULSE_EIO;
}

/* ---- the flusher thread ---- */

/* Samples are stamped by the wall clock: a step of it (an NTP step, a
 * corrected RTC) is logged once and counted here, where it shows as a
 * change of the wall clock's offset from the monotonic one. A step back
 * makes samples older than their series' newest (tsdb_append takes them
 * within the window). Flusher thread only. */
static void note_clock_step(struct tsdb *db)
{
	int64_t off = tsdb_now_ms(db) - clock_mono_ns() / NS_PER_MS;
	int64_t d = off - db->clock_off_ms;
	if (db->have_clock_off && (d > CLOCK_STEP_MS || d < -CLOCK_STEP_MS)) {
		atomic_fetch_add(&db->clock_steps, 1);
		if (d < 0 && (db->o.ooo_window_ms < 0 || -d > db->o.ooo_window_ms))
			log_warn("tsdb: %s: the wall clock stepped back %.3f s: samples older than their "
				 "series' newest by more than the window (%g s) are refused and counted "
				 "until the clock passes the newest", db->path, (double)-d / 1000,
				 db->o.ooo_window_ms < 0 ? 0.0 : (double)db->o.ooo_window_ms / 1000);
		else
			log_warn("tsdb: %s: the wall clock stepped %s %.3f s; samples keep being stored%s",
				 db->path, d < 0 ? "back" : "forward", (double)(d < 0 ? -d : d) / 1000,
				 d < 0 ? " (those older than their series' newest merged by time, "
					 "counted in gpulse_storage_samples_out_of_order_total)" : "");
	}
	db->clock_off_ms = off;
	db->have_clock_off = true;
}

static void flusher_run(void *arg)
{
	struct tsdb *db = arg;
	note_clock_step(db);
	tsdb_flush_periodic(db);
	if (clock_mono_ns() >= db->next_ret_ns) {
		tsdb_enforce_retention(db, tsdb_now_ms(db));
		db->next_ret_ns = clock_mono_ns() + RETENTION_PERIOD_MS * NS_PER_MS;
	}
}

int tsdb_start_flusher(struct tsdb *db)
{
	if (db->o.read_only)
		return GPULSE_ESTATE;
	return periodic_start(&db->flusher, db->o.flush_interval_ms * NS_PER_MS);
}

void tsdb_stop_flusher(struct tsdb *db)
{
	if (!db)
		return;
	periodic_stop(&db->flusher);
	db->next_ret_ns = 0; /* the thread has ended: a new one enforces retention at its first flush */
}

void tsdb_get_stats(struct tsdb *db, struct tsdb_stats *out)
{
	memset(out, 0, sizeof *out);
	for (int i = 0; i < SHARDS; i++) {
		pthread_mutex_lock(&db->shards[i].mu);
		out->samples_appended_total += db->shards[i].appended;
		out->samples_dropped_total += db->shards[i].dropped;
		out->samples_out_of_order_total += db->shards[i].ooo;
		pthread_mutex_unlock(&db->shards[i].mu);
	}
	out->samples_dropped_total += atomic_load(&db->head_dropped);
	out->chunks_flushed_total = atomic_load(&db->chunks_flushed);
	out->storage_errors_total = atomic_load(&db->storage_errors);
	out->flushes_total = atomic_load(&db->flushes);
	out->series_limit_hits_total = atomic_load(&db->series_limit_hits);
	out->label_limit_hits_total = atomic_load(&db->label_limit_hits);
	out->corrupt_chunks_total = atomic_load(&db->corrupt_chunks);
	out->clock_steps_total = atomic_load(&db->clock_steps);
	out->file_lost_total = atomic_load(&db->file_lost);
	out->writable = tsdb_unwritable(db, NULL, 0) == 0;
	out->series = atomic_load(&db->nseries);
	out->head_bytes = atomic_load(&db->head_bytes);
	struct stat st;
	char wal[4096];
	if (stat(db->path, &st) == 0)
		out->db_bytes += (uint64_t)st.st_size;
	snprintf(wal, sizeof wal, "%s-wal", db->path);
	if (stat(wal, &st) == 0)
		out->db_bytes += (uint64_t)st.st_size;
}

/* ---- select ---- */

struct tsample {
	int64_t t;
	double v;
};

struct cmatcher {
	enum tsdb_match_op op;
	const char *name;
	const char *value;
	struct rx *re;               /* compiled for RE and NRE */
};

struct tsdb_iter {
	struct tsdb *db;
	struct tsdb_select_opts o;
	bool rollup;
	bool total;                  /* TSDB_READ_ROLLUP_TOTAL: one bucket per series */
	struct series **match;
	size_t nmatch, next;
	struct series *cur;
	struct tsample *s;           /* the current series' samples */
	size_t ns, caps, pos;
	struct tsdb_rollup *r;       /* or its buckets */
	size_t nr, capr, rpos;
	int err;
	sqlite3_stmt *oldest;        /* TSDB_READ_SPAN: a series' oldest data on disk */
};

/* Whether v satisfies m, in *ok. 0, or rx_match's GPULSE_ELIMIT (the
 * pattern's cost limit) or GPULSE_ENOMEM with a sentence naming the
 * matcher in err: the select fails rather than read it as no match,
 * which would drop the series from a 200 answer. */
static int matcher_ok(const struct cmatcher *m, const char *v, bool *ok, char *err, size_t errlen)
{
	*ok = false;
	switch (m->op) {
	case TSDB_MATCH_EQ:
		*ok = strcmp(v, m->value) == 0;
		return 0;
	case TSDB_MATCH_NE:
		*ok = strcmp(v, m->value) != 0;
		return 0;
	case TSDB_MATCH_RE:
	case TSDB_MATCH_NRE: {
		bool hit = false;
		int rc = rx_match(m->re, v, strlen(v), &hit);
		if (rc) {
			str_errf(err, errlen, "regular expression in matcher %s%s\"%.200s\" %s", m->name,
				 m->op == TSDB_MATCH_RE ? "=~" : "!~", m->value,
				 rc == GPULSE_ELIMIT ? "exceeded its match limit" : "ran out of memory");
			return rc;
		}
		*ok = (m->op == TSDB_MATCH_RE) == hit;
		return 0;
	}
	}
	return 0;
}

static const char *series_label(const struct series *s, const char *name)
{
	for (uint32_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, name) == 0)
			return s->labels[i].value;
	return "";
}

static int series_cmp(const void *a, const void *b)
{
	const struct series *x = *(struct series *const *)a, *y = *(struct series *const *)b;
	for (uint32_t i = 0; i < x->nlabels && i < y->nlabels; i++) {
		int c = strcmp(x->labels[i].name, y->labels[i].name);
		if (c == 0)
			c = strcmp(x->labels[i].value, y->labels[i].value);
		if (c != 0)
			return c;
	}
	return (x->nlabels > y->nlabels) - (x->nlabels < y->nlabels);
}

static void free_matchers(struct cmatcher *cm, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rx_free(cm[i].re);
}

int tsdb_select(struct tsdb *db, const struct tsdb_matcher *m, size_t nm,
		const struct tsdb_select_opts *o, struct tsdb_iter **out, char *err, size_t errlen)
{
	*out = NULL;
	if (nm == 0 || nm > TSDB_MAX_MATCHERS || !o || o->mint > o->maxt) {
		str_errf(err, errlen, "select needs 1 to %d matchers and mint <= maxt", TSDB_MAX_MATCHERS);
		return GPULSE_EINVAL;
	}
	struct cmatcher cm[TSDB_MAX_MATCHERS];
	memset(cm, 0, sizeof cm);
	bool nonempty = false;
	int rc = 0;
	for (size_t i = 0; i < nm; i++) {
		if (!m[i].name || !m[i].value || (unsigned)m[i].op > TSDB_MATCH_NRE) {
			str_errf(err, errlen, "matcher %zu is incomplete", i);
			rc = GPULSE_EINVAL;
			goto out;
		}
		cm[i].op = m[i].op;
		cm[i].name = m[i].name;
		cm[i].value = m[i].value;
		if (m[i].op == TSDB_MATCH_RE || m[i].op == TSDB_MATCH_NRE) {
			/* Prometheus anchors: ^(?:re)$ (RX_ANCHORED). */
			char msg[256];
			int r = rx_compile(m[i].value, RX_ANCHORED, &cm[i].re, msg, sizeof msg);
			if (r != 0) {
				str_errf(err, errlen, "bad regular expression \"%.64s\": %s", m[i].value, msg);
				rc = r == GPULSE_ENOMEM ? GPULSE_ENOMEM : GPULSE_EINVAL;
				goto out;
			}
		}
		bool empty;
		if ((rc = matcher_ok(&cm[i], "", &empty, err, errlen)) != 0)
			goto out;
		if (!empty)
			nonempty = true;
	}
	if (!nonempty) {
		str_errf(err, errlen, "at least one matcher must not match the empty string");
		rc = GPULSE_EINVAL;
		goto out;
	}
	struct tsdb_iter *it = calloc(1, sizeof *it);
	size_t n = atomic_load_explicit(&db->nseries, memory_order_acquire);
	if (!it || !(it->match = malloc((n ? n : 1) * sizeof *it->match))) {
		free(it);
		rc = GPULSE_ENOMEM;
		goto out;
	}
	it->db = db;
	it->o = *o;
	const char *want_name = NULL;
	for (size_t j = 0; j < nm && !want_name; j++)
		if (cm[j].op == TSDB_MATCH_EQ && strcmp(cm[j].name, "__name__") == 0)
			want_name = cm[j].value;
	if (want_name) {
		/* Only the series of that name: its bucket's chain, series
		 * published up to n (later ones are not in this select). */
		size_t nb = fnv1a64_str(want_name) & (db->hcap - 1);
		for (struct series *s = atomic_load_explicit(&db->ntab[nb], memory_order_acquire); s;
		     s = s->nnext) {
			if (s->id > n || strcmp(s->name, want_name) != 0)
				continue;
			bool ok = true;
			for (size_t j = 0; j < nm && ok && !rc; j++)
				rc = matcher_ok(&cm[j], series_label(s, cm[j].name), &ok, err, errlen);
			if (rc)
				break;
			if (ok)
				it->match[it->nmatch++] = s;
		}
	} else {
		for (size_t i = 0; i < n && !rc; i++) {
			struct series *s = db->series[i];
			bool ok = true;
			for (size_t j = 0; j < nm && ok && !rc; j++)
				rc = matcher_ok(&cm[j], series_label(s, cm[j].name), &ok, err, errlen);
			if (ok && !rc)
				it->match[it->nmatch++] = s;
		}
	}
	if (rc) {
		tsdb_iter_free(it);
		goto out;
	}
	qsort(it->match, it->nmatch, sizeof *it->match, series_cmp);
	int64_t now = o->now_ms ? o->now_ms : tsdb_now_ms(db);
	it->total = o->mode == TSDB_READ_ROLLUP_TOTAL;
	it->rollup = o->mode == TSDB_READ_ROLLUP || it->total ||
		     (o->mode == TSDB_READ_AUTO &&
		      (o->step_hint_ms >= db->o.rollup_step_ms || o->mint < now - db->o.raw_retention_ms));
	*out = it;
out:
	free_matchers(cm, nm);
	return rc;
}

static void iter_push(void *ctx, int64_t t, double v)
{
	struct tsdb_iter *it = ctx;
	if (it->err)
		return;
	if (it->ns == it->caps) {
		size_t cap = it->caps ? it->caps * 2 : 256;
		struct tsample *p = realloc(it->s, cap * sizeof *p);
		if (!p) {
			it->err = GPULSE_ENOMEM;
			return;
		}
		it->s = p;
		it->caps = cap;
	}
	it->s[it->ns].t = t;
	it->s[it->ns].v = v;
	it->ns++;
}

static int tsample_cmp(const void *a, const void *b)
{
	const struct tsample *x = a, *y = b;
	return (x->t > y->t) - (x->t < y->t);
}

static void push_chunk(struct tsdb_iter *it, const uint8_t *data, size_t len, int64_t lo, int64_t hi)
{
	struct chunk_iter ci;
	int64_t t;
	double v;
	if (chunk_iter_init(&ci, data, len) != 0)
		return;
	while (chunk_iter_next(&ci, &t, &v) == 1)
		if (t >= lo && t <= hi)
			iter_push(it, t, v);
}

/* The newest sample of a chunk within [lo, hi] into *best when it is
 * newer than *best's (best->t = INT64_MIN: none yet). */
static void newest_in_chunk(const uint8_t *data, size_t len, int64_t lo, int64_t hi,
			    struct tsample *best)
{
	struct chunk_iter ci;
	int64_t t;
	double v;
	if (chunk_iter_init(&ci, data, len) != 0)
		return;
	while (chunk_iter_next(&ci, &t, &v) == 1)
		if (t >= lo && t <= hi && t > best->t)
			*best = (struct tsample){.t = t, .v = v};
}

static void keep_newest(void *ctx, int64_t t, double v)
{
	struct tsample *best = ctx;
	if (t > best->t)
		*best = (struct tsample){.t = t, .v = v};
}

/* Only the newest sample of `s` in [lo, hi]: the open chunk holds the
 * newest data, then the head's full chunks, then disk (older still), so
 * the search stops at the first place that has one. Under db_mu. */
static int gather_latest(struct tsdb_iter *it, struct series *s, int64_t lo, int64_t hi)
{
	struct tsdb *db = it->db;
	struct tsample best = {.t = INT64_MIN};
	it->ns = 0;
	struct shard *sh = &db->shards[s->id % SHARDS];
	pthread_mutex_lock(&sh->mu);
	if (s->open->n > 0 && s->open->t_last >= lo && s->open->t_first <= hi)
		newest_in_chunk(chunk_enc_bytes(s->open), chunk_enc_len(s->open), lo, hi, &best);
	/* Chunks that overlap (a sample taken out of order) hold the newest
	 * sample anywhere: all are looked at. */
	bool all = s->ooo;
	if (best.t == INT64_MIN || all)
		for (struct pend *p = s->ph; p; p = p->next)
			if (p->maxt >= lo && p->mint <= hi)
				newest_in_chunk(p->data, p->len, lo, hi, &best);
	pthread_mutex_unlock(&sh->mu);
	if ((best.t == INT64_MIN || all) && s->on_disk) {
		if (scan_disk(db, s, lo, hi, keep_newest, &best) != 0)
			return GPULSE_EIO;
	}
	if (best.t != INT64_MIN)
		iter_push(it, best.t, best.v);
	return it->err;
}

/* Gather raw samples of `s` in [lo, hi] from disk and head, sorted, one
 * per timestamp (the open chunk is both on disk and in the head). Under
 * db_mu, which keeps a flush from detaching head chunks meanwhile. */
static int gather_raw(struct tsdb_iter *it, struct series *s, int64_t lo, int64_t hi)
{
	struct tsdb *db = it->db;
	it->ns = 0;
	struct shard *sh = &db->shards[s->id % SHARDS];
	/* Disk holds what is older than the head, plus a copy of the part of
	 * the open chunk the last flush saw: read disk only below the head,
	 * so the pieces come in order and need no sort. */
	pthread_mutex_lock(&sh->mu);
	int64_t head_first = s->ph ? s->ph->mint : s->open->n ? s->open->t_first : INT64_MAX;
	if (s->ooo)
		head_first = INT64_MAX;   /* chunks overlap: all of disk, merged below */
	pthread_mutex_unlock(&sh->mu);
	int64_t disk_hi = head_first - 1 < hi ? head_first - 1 : hi;
	if (s->on_disk && disk_hi >= lo && scan_disk(db, s, lo, disk_hi, iter_push, it) != 0)
		return GPULSE_EIO;
	pthread_mutex_lock(&sh->mu);
	for (struct pend *p = s->ph; p; p = p->next)
		if (p->maxt >= lo && p->mint <= hi)
			push_chunk(it, p->data, p->len, lo, hi);
	if (s->open->n > 0 && s->open->t_last >= lo && s->open->t_first <= hi)
		push_chunk(it, chunk_enc_bytes(s->open), chunk_enc_len(s->open), lo, hi);
	pthread_mutex_unlock(&sh->mu);
	if (it->err)
		return it->err;
	/* Usually sorted already; qsort is cheap then, and it is what makes
	 * the merge order-proof. */
	bool sorted = true;
	for (size_t i = 1; i < it->ns && sorted; i++)
		sorted = it->s[i - 1].t < it->s[i].t;
	if (!sorted) {
		qsort(it->s, it->ns, sizeof *it->s, tsample_cmp);
		size_t w = 0;
		for (size_t i = 0; i < it->ns; i++)
			if (w == 0 || it->s[w - 1].t != it->s[i].t)
				it->s[w++] = it->s[i];
		it->ns = w;
	}
	return 0;
}

static int push_rollup(struct tsdb_iter *it, const struct racc *a)
{
	if (a->count == 0)
		return 0;
	if (it->nr == it->capr) {
		size_t cap = it->capr ? it->capr * 2 : 64;
		struct tsdb_rollup *p = realloc(it->r, cap * sizeof *p);
		if (!p)
			return GPULSE_ENOMEM;
		it->r = p;
		it->capr = cap;
	}
	it->r[it->nr++] = (struct tsdb_rollup){ a->t, a->min, a->max, a->sum, a->count };
	return 0;
}

static int bucket_total(void *ctx, const struct rollblock_bucket *k)
{
	racc_merge(ctx, k);
	return 0;
}

static int bucket_push(void *ctx, const struct rollblock_bucket *k)
{
	struct racc a = {k->t_ms, k->min, k->max, k->sum, k->count};
	return push_rollup(ctx, &a);
}

/* The stored buckets of [lo, the iterator's maxt] below the watermark. */
static int gather_blocks(struct tsdb_iter *it, struct series *s, int64_t lo, bucket_fn *fn,
			 void *ctx)
{
	if (!s->on_disk || lo >= s->rolled_until)
		return 0;
	int64_t hi = it->o.maxt < s->rolled_until - 1 ? it->o.maxt : s->rolled_until - 1;
	int fn_rc = 0;
	int rc = scan_blocks(it->db, s, lo, hi, fn, ctx, &fn_rc);
	if (fn_rc != 0)
		return fn_rc;
	return rc == 0 ? 0 : GPULSE_EIO;
}

/* TSDB_READ_ROLLUP_TOTAL: the stored buckets below the watermark and the
 * raw samples above it, as one bucket. Under db_mu. */
static int gather_total(struct tsdb_iter *it, struct series *s, int64_t lo)
{
	struct racc a = {.t = it->o.mint};
	int rc0 = gather_blocks(it, s, lo, bucket_total, &a);
	if (rc0 != 0)
		return rc0;
	int64_t from = lo > s->rolled_until ? lo : s->rolled_until;
	if (from <= it->o.maxt) {
		int rc = gather_raw(it, s, from, it->o.maxt);
		if (rc != 0)
			return rc;
	}
	for (size_t i = 0; i < it->ns; i++)
		racc_add(&a, it->s[i].v);
	it->ns = 0;
	return push_rollup(it, &a);
}

/* Rollup rows from disk below the watermark, buckets computed from raw
 * samples above it. Under db_mu. */
static int gather_rollup(struct tsdb_iter *it, struct series *s)
{
	struct tsdb *db = it->db;
	int64_t step = db->o.rollup_step_ms;
	int64_t lo = bucket_of(it->o.mint, step);
	int rc = 0;
	it->nr = 0;
	if (it->total)
		return gather_total(it, s, lo);
	rc = gather_blocks(it, s, lo, bucket_push, it);
	int64_t from = lo > s->rolled_until ? lo : s->rolled_until;
	if (rc == 0 && from <= it->o.maxt)
		rc = gather_raw(it, s, from, it->o.maxt);
	if (rc != 0)
		return rc;
	struct racc a = { .t = INT64_MIN };
	for (size_t i = 0; i < it->ns && rc == 0; i++) {
		int64_t b = bucket_of(it->s[i].t, step);
		if (b != a.t) {
			rc = push_rollup(it, &a);
			memset(&a, 0, sizeof a);
			a.t = b;
		}
		racc_add(&a, it->s[i].v);
	}
	if (rc == 0)
		rc = push_rollup(it, &a);
	it->ns = 0;
	return rc;
}

/* TSDB_READ_SPAN: whether the series' first sample is at or before
 * maxt and its last at or after mint (as Prometheus decides from its
 * chunks' min and max times, without reading them). The head's times
 * first; then the oldest raw chunk and rollup block on disk, two indexed
 * looks. Rollups count only where they reach below the raw chunks'
 * bucket (raw data dropped by retention): their times are bucket starts,
 * before the first sample. The answer in *spans; 0 or a status. Under
 * db_mu. */
static int series_spans(struct tsdb_iter *it, struct series *s, bool *spans)
{
	*spans = false;
	struct tsdb *db = it->db;
	struct shard *sh = &db->shards[s->id % SHARDS];
	pthread_mutex_lock(&sh->mu);
	int64_t first = s->ph ? s->ph->mint : s->open->n ? s->open->t_first : INT64_MAX;
	bool has_last = s->has_last;
	int64_t last = s->last_t;
	pthread_mutex_unlock(&sh->mu);
	/* A store reopened on rollups alone (its raw chunks past retention)
	 * knows no last sample: its rollups reach rolled_until. */
	if (!has_last && s->on_disk && s->rolled_until > 0) {
		has_last = true;
		last = s->rolled_until - 1;
	}
	if (!has_last || last < it->o.mint)
		return 0;
	if (first > it->o.maxt && s->on_disk) {
		if (!it->oldest) {
			int rc = sqlite3_prepare_v2(db->sql,
						    "SELECT (SELECT min(mint) FROM chunks WHERE series_id = ?1),"
						    " (SELECT min(mint) FROM rollup_blocks WHERE series_id = ?1)",
						    -1, &it->oldest, NULL);
			if (rc != SQLITE_OK)
				return sql_is_io(rc) ? GPULSE_EIO : GPULSE_ENOMEM;
		}
		sqlite3_bind_int64(it->oldest, 1, s->id);
		int rc = sqlite3_step(it->oldest);
		if (rc == SQLITE_ROW) {
			bool raw = sqlite3_column_type(it->oldest, 0) != SQLITE_NULL;
			bool roll = sqlite3_column_type(it->oldest, 1) != SQLITE_NULL;
			int64_t raw_t = sqlite3_column_int64(it->oldest, 0);
			int64_t roll_t = sqlite3_column_int64(it->oldest, 1);
			if (raw && raw_t < first)
				first = raw_t;
			if (roll && (!raw || roll_t < bucket_of(raw_t, db->o.rollup_step_ms)) &&
			    roll_t < first)
				first = roll_t;
		}
		sqlite3_reset(it->oldest);
		if (rc != SQLITE_ROW)
			return GPULSE_EIO;
	}
	*spans = first <= it->o.maxt;
	return 0;
}

int tsdb_iter_next_series(struct tsdb_iter *it)
{
	while (it->next < it->nmatch) {
		struct series *s = it->match[it->next++];
		if (it->o.mode == TSDB_READ_SPAN) {
			bool spans;
			pthread_mutex_lock(&it->db->db_mu);
			int rc = series_spans(it, s, &spans);
			pthread_mutex_unlock(&it->db->db_mu);
			if (rc != 0)
				return -rc;
			if (!spans)
				continue;
			it->ns = it->nr = it->pos = it->rpos = 0;
			it->cur = s;
			return 1;
		}
		pthread_mutex_lock(&it->db->db_mu);
		int rc = it->rollup ? gather_rollup(it, s)
			 : it->o.mode == TSDB_READ_LATEST ? gather_latest(it, s, it->o.mint, it->o.maxt)
							  : gather_raw(it, s, it->o.mint, it->o.maxt);
		pthread_mutex_unlock(&it->db->db_mu);
		it->err = 0;
		if (rc != 0)
			return -rc;   /* negative: GPULSE_ENOMEM is 1 */
		it->pos = it->rpos = 0;
		if ((it->rollup && it->nr > 0) || (!it->rollup && it->ns > 0)) {
			it->cur = s;
			return 1;
		}
	}
	it->cur = NULL;
	return 0;
}

const struct label *tsdb_iter_labels(const struct tsdb_iter *it, size_t *n)
{
	*n = it->cur ? it->cur->nlabels : 0;
	return it->cur ? it->cur->labels : NULL;
}

bool tsdb_iter_is_rollup(const struct tsdb_iter *it)
{
	return it->rollup;
}

int tsdb_iter_next_sample(struct tsdb_iter *it, int64_t *t_ms, double *v)
{
	if (it->rollup || !it->cur || it->pos >= it->ns)
		return 0;
	*t_ms = it->s[it->pos].t;
	*v = it->s[it->pos].v;
	it->pos++;
	return 1;
}

int tsdb_iter_next_rollup(struct tsdb_iter *it, struct tsdb_rollup *r)
{
	if (!it->rollup || !it->cur || it->rpos >= it->nr)
		return 0;
	*r = it->r[it->rpos++];
	return 1;
}

void tsdb_iter_free(struct tsdb_iter *it)
{
	if (!it)
		return;
	if (it->oldest) {
		/* Finalized under the connection's lock, as it ran. */
		pthread_mutex_lock(&it->db->db_mu);
		sqlite3_finalize(it->oldest);
		pthread_mutex_unlock(&it->db->db_mu);
	}
	free(it->match);
	free(it->s);
	free(it->r);
	free(it);
}

/* ---- label listing (from the in-memory series table) ---- */

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void tsdb_strings_free(char **s, size_t n)
{
	if (!s)
		return;
	for (size_t i = 0; i < n; i++)
		free(s[i]);
	free(s);
}

/* Collect the names (name == NULL) or the values of `name`, sort, unique. */
static int list_labels(struct tsdb *db, const char *name, char ***out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	size_t n = atomic_load_explicit(&db->nseries, memory_order_acquire);
	size_t cap = 0, cnt = 0;
	const char **tmp = NULL;
	for (size_t i = 0; i < n; i++) {
		struct series *s = db->series[i];
		for (uint32_t j = 0; j < s->nlabels; j++) {
			const char *x = NULL;
			if (!name)
				x = s->labels[j].name;
			else if (strcmp(s->labels[j].name, name) == 0)
				x = s->labels[j].value;
			if (!x)
				continue;
			if (cnt == cap) {
				cap = cap ? cap * 2 : 64;
				const char **p = realloc(tmp, cap * sizeof *p);
				if (!p) {
					free(tmp);
					return GPULSE_ENOMEM;
				}
				tmp = p;
			}
			tmp[cnt++] = x;
		}
	}
	if (cnt > 1) /* tmp is NULL in an empty store: qsort's argument must not be */
		qsort(tmp, cnt, sizeof *tmp, str_cmp);
	char **res = calloc(cnt ? cnt : 1, sizeof *res);
	if (!res) {
		free(tmp);
		return GPULSE_ENOMEM;
	}
	size_t w = 0;
	for (size_t i = 0; i < cnt; i++) {
		if (w > 0 && strcmp(res[w - 1], tmp[i]) == 0)
			continue;
		if (!(res[w] = strdup(tmp[i]))) {
			tsdb_strings_free(res, w);
			free(tmp);
			return GPULSE_ENOMEM;
		}
		w++;
	}
	free(tmp);
	*out = res;
	*nout = w;
	return 0;
}

int tsdb_label_names(struct tsdb *db, char ***out, size_t *n)
{
	return list_labels(db, NULL, out, n);
}

int tsdb_label_values(struct tsdb *db, const char *name, char ***out, size_t *n)
{
	if (!name)
		return GPULSE_EINVAL;
	return list_labels(db, name, out, n);
}

/* ---- records ---- */

static bool record_args_ok(const char *kind, const char *key)
{
	return kind && key && *kind && strlen(kind) < RECORD_FIELD_MAX && strlen(key) < RECORD_FIELD_MAX;
}

int tsdb_record_put(struct tsdb *db, const char *kind, const char *key, int64_t t_ms, const char *json)
{
	if (!record_args_ok(kind, key) || !json || strlen(json) > RECORD_JSON_MAX)
		return GPULSE_EINVAL;
	pthread_mutex_lock(&db->db_mu);
	if (db->fault) {
		/* Unwritable, and said so (set_fault): counted, not logged. */
		pthread_mutex_unlock(&db->db_mu);
		atomic_fetch_add(&db->storage_errors, 1);
		return GPULSE_EIO;
	}
	sqlite3_stmt *st = db->st[ST_REC_PUT];
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, t_ms);
	sqlite3_bind_text(st, 4, json, -1, SQLITE_STATIC);
	int rc = sql_step_done(st);
	sqlite3_clear_bindings(st);
	pthread_mutex_unlock(&db->db_mu);
	if (rc != 0) {
		atomic_fetch_add(&db->storage_errors, 1);
		log_warn("tsdb: %s: record %s/%s not written: %s", db->path, kind, key, sqlite3_errstr(rc));
		return GPULSE_EIO;
	}
	return 0;
}

void tsdb_record_clear(struct tsdb_record *r)
{
	if (!r)
		return;
	free(r->kind);
	free(r->key);
	free(r->json);
	memset(r, 0, sizeof *r);
}

void tsdb_records_free(struct tsdb_record *r, size_t n)
{
	if (!r)
		return;
	for (size_t i = 0; i < n; i++)
		tsdb_record_clear(&r[i]);
	free(r);
}

static int record_fill(struct tsdb_record *r, const char *kind, const char *key, int64_t t,
		       const unsigned char *json)
{
	r->kind = strdup(kind);
	r->key = strdup(key);
	r->t_ms = t;
	r->json = strdup(json ? (const char *)json : "");
	if (!r->kind || !r->key || !r->json) {
		tsdb_record_clear(r);
		return GPULSE_ENOMEM;
	}
	return 0;
}

int tsdb_record_get(struct tsdb *db, const char *kind, const char *key, struct tsdb_record *out)
{
	memset(out, 0, sizeof *out);
	if (!record_args_ok(kind, key))
		return GPULSE_EINVAL;
	pthread_mutex_lock(&db->db_mu);
	sqlite3_stmt *st = db->st[ST_REC_GET];
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
	int r = sqlite3_step(st), rc;
	if (r == SQLITE_ROW)
		rc = record_fill(out, kind, key, sqlite3_column_int64(st, 0), sqlite3_column_text(st, 1));
	else
		rc = r == SQLITE_DONE ? GPULSE_ENOENT : GPULSE_EIO;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	pthread_mutex_unlock(&db->db_mu);
	return rc;
}

/* Step `st` (bound, locked by the caller) and copy its rows (key, t_ms,
 * json) into a new array. */
static int collect_records(sqlite3_stmt *st, const char *kind, struct tsdb_record **out, size_t *n)
{
	struct tsdb_record *res = NULL;
	size_t cnt = 0, cap = 0;
	int rc = 0, r = SQLITE_DONE;
	while (rc == 0 && (r = sqlite3_step(st)) == SQLITE_ROW) {
		if (cnt == cap) {
			cap = cap ? cap * 2 : 16;
			struct tsdb_record *p = realloc(res, cap * sizeof *p);
			if (!p) {
				rc = GPULSE_ENOMEM;
				break;
			}
			res = p;
		}
		const unsigned char *key = sqlite3_column_text(st, 0);
		rc = record_fill(&res[cnt], kind, key ? (const char *)key : "",
				 sqlite3_column_int64(st, 1), sqlite3_column_text(st, 2));
		if (rc == 0)
			cnt++;
	}
	if (rc == 0 && r != SQLITE_DONE)
		rc = GPULSE_EIO;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	if (rc != 0) {
		tsdb_records_free(res, cnt);
		return rc;
	}
	*out = res;
	*n = cnt;
	return 0;
}

int tsdb_record_list(struct tsdb *db, const char *kind, int64_t mint, int64_t maxt, size_t limit,
		     struct tsdb_record **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!record_args_ok(kind, ""))
		return GPULSE_EINVAL;
	if (limit == 0 || limit > RECORD_LIST_MAX)
		limit = RECORD_LIST_MAX;
	pthread_mutex_lock(&db->db_mu);
	sqlite3_stmt *st = db->st[ST_REC_LIST];
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, mint);
	sqlite3_bind_int64(st, 3, maxt);
	sqlite3_bind_int64(st, 4, (int64_t)limit);
	int rc = collect_records(st, kind, out, n);
	pthread_mutex_unlock(&db->db_mu);
	return rc;
}

int tsdb_record_keys(struct tsdb *db, const char *kind, const char *key_lo, const char *key_hi,
		     size_t limit, struct tsdb_record **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (!record_args_ok(kind, key_lo) || !record_args_ok(kind, key_hi))
		return GPULSE_EINVAL;
	if (limit == 0 || limit > RECORD_LIST_MAX)
		limit = RECORD_LIST_MAX;
	pthread_mutex_lock(&db->db_mu);
	sqlite3_stmt *st = db->st[ST_REC_KEYS];
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key_lo, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, key_hi, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, (int64_t)limit);
	int rc = collect_records(st, kind, out, n);
	pthread_mutex_unlock(&db->db_mu);
	return rc;
}

/* Run the bound delete `st` (db_mu held by the caller, released here) and
 * count the rows it removed. 0 or GPULSE_EIO (counted). */
static int run_delete(struct tsdb *db, sqlite3_stmt *st, int *changes)
{
	int rc = sql_step_done(st);
	*changes = sqlite3_changes(db->sql);
	sqlite3_clear_bindings(st);
	pthread_mutex_unlock(&db->db_mu);
	if (rc != 0) {
		atomic_fetch_add(&db->storage_errors, 1);
		return GPULSE_EIO;
	}
	return 0;
}

int tsdb_record_delete(struct tsdb *db, const char *kind, const char *key)
{
	if (!record_args_ok(kind, key))
		return GPULSE_EINVAL;
	pthread_mutex_lock(&db->db_mu);
	sqlite3_stmt *st = db->st[ST_REC_DEL];
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
	int changes;
	int rc = run_delete(db, st, &changes);
	return rc ? rc : changes > 0 ? 0 : GPULSE_ENOENT;
}

int tsdb_record_prune(struct tsdb *db, const char *kind, int64_t before_ms, size_t *deleted)
{
	if (deleted)
		*deleted = 0;
	if (!record_args_ok(kind, ""))
		return GPULSE_EINVAL;
	pthread_mutex_lock(&db->db_mu);
	sqlite3_stmt *st = db->st[ST_REC_PRUNE];
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, before_ms);
	int changes;
	int rc = run_delete(db, st, &changes);
	if (rc == 0 && deleted)
		*deleted = (size_t)changes;
	return rc;
}
