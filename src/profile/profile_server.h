/* gpulsed's end of the injection library's socket (DESIGN.md decisions 7
 * to 9): a Unix stream socket served by one thread with poll(), so no
 * client can block the rest of the daemon. Each peer's credentials are
 * read with SO_PEERCRED when it connects (allowed uids/gids, a cap per
 * uid and in all), its HELLO must name the peer's own pid and uid, every
 * frame goes through wire_decode, and everything a client can make the
 * daemon hold is bounded: clients, one frame's payload per client (read
 * as it arrives), a small send buffer, capture events, and the time a
 * connection may stay silent before or after its HELLO. Bad frames are
 * counted by reason; a bad header (the stream can no longer be framed)
 * or a lying HELLO ends the connection.
 *
 * The thread feeds a profile_agg, sends each new client the daemon's
 * defaults (a CONFIG frame), runs captures for HTTP threads, expires
 * processes, and appends the per-process series into the store. */
#ifndef GPULSE_PROFILE_SERVER_H
#define GPULSE_PROFILE_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "profile/profile_agg.h"
#include "profile/profile_emit.h"
#include "store/tsdb.h"
#include "wire/wire.h"

#define PROFILE_MAX_ALLOWED_IDS 32        /* entries of allowed_uids / allowed_gids */
#define PROFILE_MAX_CAPTURES 4            /* captures running at once */
#define PROFILE_HELLO_TIMEOUT_NS (10LL * 1000000000LL) /* default, connect to HELLO */
#define PROFILE_IDLE_TIMEOUT_NS (30LL * 1000000000LL)  /* default, silence after HELLO */
#define PROFILE_SEND_BUFFER 4096          /* per client, daemon → library */
#define PROFILE_CAPTURE_GRACE_NS (5LL * 1000000000LL) /* default wait past a capture's length */

struct profile_server_config {
	const char *socket_path;          /* created with mode 0666; its directory
	                                     is created 0755 when missing */
	unsigned max_clients;             /* default 128 */
	unsigned max_clients_per_uid;     /* 0: max_clients / 4, at least 1; so
	                                     that one user's connections cannot
	                                     take every slot */
	uint32_t allowed_uids[PROFILE_MAX_ALLOWED_IDS];
	size_t n_allowed_uids;            /* 0 (and no gids): any local user */
	uint32_t allowed_gids[PROFILE_MAX_ALLOWED_IDS];  /* the peer's primary group */
	size_t n_allowed_gids;
	struct wire_config defaults;      /* sent after each HELLO */
	unsigned capture_max_events;      /* default 50000 */
	struct profile_agg *agg;          /* fed; must outlive the server */
	struct profile_timeline *timeline; /* fed too when not NULL; must outlive it */
	struct tsdb *db;                  /* NULL: no store appends */
	int64_t store_interval_ns;        /* default 15 s */
	int64_t hello_timeout_ns;         /* default PROFILE_HELLO_TIMEOUT_NS */
	int64_t idle_timeout_ns;          /* default PROFILE_IDLE_TIMEOUT_NS: a
	                                     connection past its HELLO with no
	                                     whole frame for this long is closed
	                                     (the library sends STATUS every
	                                     second) */
	int64_t capture_grace_ns;         /* default PROFILE_CAPTURE_GRACE_NS */
};

/* Refusal and bad-frame reasons, as label values. */
#define PROFILE_REFUSE_TABLE(X)                                               \
	X(MAX_CLIENTS, "max_clients")                                         \
	X(MAX_PER_UID, "max_clients_per_uid")                                 \
	X(NOT_ALLOWED, "not_allowed")                                         \
	X(NO_CREDENTIALS, "no_credentials")                                   \
	X(PID_MISMATCH, "pid_mismatch")                                       \
	X(UID_MISMATCH, "uid_mismatch")                                       \
	X(MAX_PROCESSES, "max_processes")                                     \
	X(HELLO_TIMEOUT, "hello_timeout")     /* closed: no HELLO in time */       \
	X(IDLE_TIMEOUT, "idle_timeout")       /* closed: silent past idle_timeout_ns */

#define PROFILE_BAD_TABLE(X)                                                  \
	X(BAD_HEADER, "bad_header")           /* magic or version: disconnected */ \
	X(OVERSIZED, "oversized")             /* payload_len over the maximum: disconnected */ \
	X(INVALID, "invalid_payload")         /* wire_decode refused it */   \
	X(UNKNOWN_TYPE, "unknown_type")                                       \
	X(WRONG_DIRECTION, "wrong_direction") /* CAPTURE/CONFIG from a library */ \
	X(BEFORE_HELLO, "before_hello")                                       \
	X(DUPLICATE_HELLO, "duplicate_hello")                                 \
	X(UNKNOWN_CAPTURE, "unknown_capture") /* trace events nobody asked for */ \
	X(NO_MEMORY, "no_memory")

enum profile_refuse {
#define PROFILE_ENUM(n, s) PROFILE_REFUSE_##n,
	PROFILE_REFUSE_TABLE(PROFILE_ENUM)
#undef PROFILE_ENUM
	PROFILE_REFUSE_COUNT
};

enum profile_bad {
#define PROFILE_ENUM(n, s) PROFILE_BAD_##n,
	PROFILE_BAD_TABLE(PROFILE_ENUM)
#undef PROFILE_ENUM
	PROFILE_BAD_COUNT
};

#define PROFILE_FRAME_KINDS 12  /* the 11 wire types and "unknown" */

struct profile_server_stats {
	uint64_t clients;                 /* connected now */
	uint64_t accepted_total;
	uint64_t refused_total[PROFILE_REFUSE_COUNT];
	uint64_t frames_total[PROFILE_FRAME_KINDS]; /* received, by type (index: profile_frame_kind) */
	uint64_t bad_frames_total[PROFILE_BAD_COUNT];
	uint64_t bytes_total;
	uint64_t frames_sent_total;
	uint64_t frames_send_dropped_total; /* the client's send buffer was full */
	uint64_t captures_total;
	uint64_t captures_failed_total;   /* no such client */
	uint64_t capture_events_dropped_total; /* over capture_max_events */
	uint64_t store_appended_total;
	uint64_t store_refused_total;
};

struct profile_server;

/* Create the socket and start the thread. 0, or GPULSE_EIO / GPULSE_EBUSY
 * (another gpulsed serves the path) / GPULSE_EINVAL (path too long, not a
 * socket, an unsafe directory) with one sentence in err. */
int profile_server_start(struct profile_server **out, const struct profile_server_config *c,
			 char *err, size_t errlen);
/* Stop the thread, close every client, remove the socket. Accepts NULL. */
void profile_server_stop(struct profile_server *s);
/* Make captures in progress return now (GPULSE_ESTATE) and the thread
 * stop serving, without freeing anything: call before stopping the HTTP
 * threads that wait on captures, then profile_server_stop. Accepts NULL. */
void profile_server_interrupt(struct profile_server *s);
/* Append to `db` from now on (started with cfg.db NULL: a store that
 * opened late). Any thread; set once; `db` must outlive the server.
 * Accepts NULL. */
void profile_server_set_store(struct profile_server *s, struct tsdb *db);

void profile_server_stats(struct profile_server *s, struct profile_server_stats *out);
/* Emit the gpulse_profile_* self-metrics. */
void profile_server_emit(struct profile_server *s, struct profile_emitter *e);

/* The type name behind index i of frames_total ("HELLO" ... "unknown"). */
const char *profile_frame_kind_name(unsigned i);

struct profile_capture {
	/* in */
	uint32_t pid;
	uint32_t seconds;                 /* 1..3600 */
	/* out; events is the caller's to free(): one block, with the names
	 * its events point to after them */
	uint64_t capture_id;
	struct wire_event *events;
	size_t n;
	uint64_t received;
	uint64_t dropped_daemon;
	uint64_t dropped_library;
	bool complete;                    /* TRACE_END arrived in time */
	char comm[PROFILE_COMM_MAX];
	size_t max_events;
};

/* Ask the library of process c->pid for a capture of c->seconds, and wait
 * for its TRACE_END or c->seconds + capture_grace_ns. Runs on the
 * caller's (HTTP) thread. 0 with the events (complete or not); ENOENT (no
 * connected library of that pid), EBUSY (that pid is being captured, or
 * PROFILE_MAX_CAPTURES are running), ESTATE (server stopping), with one
 * sentence in err. */
int profile_server_capture(struct profile_server *s, struct profile_capture *c, char *err,
			   size_t errlen);

/* Parse "1000,1001" (also spaces) into ids[max]: 0 with *n, or
 * GPULSE_EINVAL naming the bad entry. "" gives *n = 0. */
int profile_parse_ids(const char *s, uint32_t *ids, size_t max, size_t *n, char *err,
		      size_t errlen);

#endif
