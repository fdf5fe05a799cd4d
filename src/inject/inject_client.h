/* The injection library's side of the socket to gpulsed. A background
 * thread owns the socket: it connects without blocking, sends HELLO first
 * on every connection, then the queued frames, reads the daemon's frames
 * (CAPTURE, CONFIG) and hands them to a callback, and reconnects with
 * back-off when the daemon is absent or restarts. Other threads only put
 * encoded frames in a bounded ring (client_push): when it is full the
 * frame is dropped and counted, nothing ever waits for the daemon.
 *
 * Fork: the child must not inherit the parent's connection or queue; the
 * fork handlers (client_fork_prepare/parent/child, registered by the
 * owner with pthread_atfork) keep the ring consistent across fork, and
 * the child starts over with an empty ring, a new HELLO (its own pid) and
 * a new thread. */
#ifndef GPULSE_INJECT_INJECT_CLIENT_H
#define GPULSE_INJECT_INJECT_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define CLIENT_PATHS_MAX 3

/* Called on the client thread with each valid frame from the daemon.
 * The message is freed after the call returns. */
typedef void client_msg_fn(const struct wire_msg *m, void *user);

struct client_config {
	const char *paths[CLIENT_PATHS_MAX]; /* socket paths tried in order; NULL ends */
	size_t ring_bytes;          /* queued frames at most (default 4 MiB) */
	int64_t backoff_min_ns;     /* first reconnect delay (default 50 ms) */
	int64_t backoff_max_ns;     /* longest delay (default 5 s) */
	client_msg_fn *on_msg;      /* may be NULL */
	void *user;
};

struct client_stats {
	uint64_t frames_queued;     /* accepted by client_push */
	uint64_t frames_sent;
	uint64_t frames_dropped;    /* ring full, too large, or lost with a broken connection */
	uint64_t bytes_sent;
	uint64_t connects;          /* successful connections */
	uint64_t connect_failures;
	uint64_t frames_received;   /* valid frames from the daemon */
	uint64_t frames_rejected;   /* frames from the daemon that failed to decode */
	int connected;
};

struct client;

/* Create the client and start its thread. `hello` is the first frame of
 * every connection (copied). 0, GPULSE_ENOMEM, GPULSE_EINVAL (no path),
 * GPULSE_EIO (no thread). */
int client_create(struct client **out, const struct client_config *cfg,
		  const struct wire_hello *hello);

/* Queue one encoded frame (header included). Never blocks on I/O: 0, or
 * GPULSE_ELIMIT when the ring is full or the frame larger than the ring
 * (the frame is dropped and counted). Thread-safe. */
int client_push(struct client *c, const uint8_t *frame, size_t len);

/* Wait until every queued frame is sent or the monotonic deadline passes
 * (for exit). 0 when the ring drained, GPULSE_ETIMEDOUT otherwise. Never
 * waits past the deadline. */
int client_flush(struct client *c, int64_t deadline_ns);

void client_get_stats(struct client *c, struct client_stats *out);

/* Replace the HELLO sent on the next connections (e.g. a mode change). */
void client_set_hello(struct client *c, const struct wire_hello *hello);

/* Stop the thread (at most a poll interval later), close the socket and
 * free. Frames still queued are dropped (counted). Accepts NULL. */
void client_destroy(struct client *c);

/* Fork handlers: call prepare in the parent before fork, parent in the
 * parent after it, child in the child (with the child's HELLO). */
void client_fork_prepare(struct client *c);
void client_fork_parent(struct client *c);
void client_fork_child(struct client *c, const struct wire_hello *hello);

#endif
