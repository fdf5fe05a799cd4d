/* The HTTP server's connection guard: a deadline for each request head,
 * a cap per client address, and connection slots kept for scrapes, so that
 * slow or many clients cannot take /metrics down. Used by http_server.c
 * only; the design is in docs/internals/http.md. */
#ifndef GPULSE_HTTP_GUARD_H
#define GPULSE_HTTP_GUARD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/http_server.h"      /* enum http_shed */

struct sockaddr;

struct guard_config {
	unsigned max_connections;    /* N: connections held at once before
	                                waiting ones are evicted */
	unsigned slots;              /* table size: MHD's hard connection limit,
	                                > max_connections */
	unsigned reserved;           /* of N, slots that only reserved routes
	                                (scrapes) may hold busy */
	unsigned per_address;        /* connections per address (IPv6: per /64) */
	int64_t head_timeout_ns;     /* first head, TLS handshake included, from
	                                accept */
	int64_t next_head_timeout_ns; /* later heads on a kept-alive connection,
	                                 from the end of the previous response */
	int64_t sweep_ns;            /* how often deadlines are checked */
	/* Optional: HTTP_SHED_COUNT counters, one per reason (NULL: none). */
	atomic_uint_fast64_t *shed_total;
};

struct http_guard;
struct guard_conn;

/* Allocate the table and start the sweeper thread. 0, GPULSE_ENOMEM or
 * GPULSE_EIO (no thread). Free with guard_stop. */
int guard_start(struct http_guard **out, const struct guard_config *cfg);
/* What counts as one client address, as a key: a family tag, then the
 * IPv4 address or the IPv6 /64 (IPv4-mapped IPv6 is IPv4); all zero for
 * NULL or another family. Shared by the per-address limits. Pure. */
#define GUARD_KEY_LEN 9
void guard_peer_key(const struct sockaddr *sa, unsigned char key[GUARD_KEY_LEN]);
/* Stop the sweeper and free. Every connection must have been closed
 * (guard_close) first: call after MHD_stop_daemon. Accepts NULL. */
void guard_stop(struct http_guard *g);

/* A connection was accepted on socket `fd` from `peer` (NULL: unknown).
 * `head_buffered`: its whole first head is already in the socket's buffer
 * (a plaintext peek), so it is never chosen for eviction while MHD gets
 * round to reading it. Returns its entry, or NULL when the table is full;
 * either way the guard may already have shut the socket down (then MHD
 * closes it on its next read). Called on the connection's thread before
 * any of its I/O. */
struct guard_conn *guard_open(struct http_guard *g, int fd, const struct sockaddr *peer,
			      bool head_buffered);
/* The connection's request head is complete, for a reserved route or not.
 * Returns true when it may be served; false when it must be refused with
 * 503 because the slots ordinary requests may hold busy are all taken
 * (counted as HTTP_SHED_BUSY). `c` NULL: true. */
bool guard_head(struct http_guard *g, struct guard_conn *c, bool reserved);
/* The request on `c` is finished (answered or abandoned): the connection
 * waits for its next head. Accepts NULL. */
void guard_done(struct http_guard *g, struct guard_conn *c);
/* MHD is closing the connection (its socket is still open): forget it.
 * After this the guard never touches the socket. Accepts NULL. */
void guard_close(struct http_guard *g, struct guard_conn *c);

/* Connections the guard closed or refused for `why` since start. */
uint64_t guard_shed(const struct http_guard *g, enum http_shed why);

/* How many times the deadline sweeper has looked since start: it sleeps
 * while no connection waits for a head. */
uint64_t guard_sweeps(const struct http_guard *g);

#endif
