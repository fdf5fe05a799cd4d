/* The HTTP server (libmicrohttpd): listens, enforces request limits, and
 * hands each request to a handler registered for its path. It owns no
 * logic of its own (DESIGN.md, layering). */
#ifndef GPULSE_HTTP_SERVER_H
#define GPULSE_HTTP_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "http/http_basic.h"

#define HTTP_MAX_ROUTES 32          /* routes one server holds */
#define HTTP_MAX_ROUTE_PATH 128     /* longest route path, bytes */
#define HTTP_MAX_URL_BYTES 65536    /* longer request targets get 414
                                       (Grafana's templated dashboards
                                       send 9 KB and more) */
#define HTTP_MAX_FORM_BYTES (1u << 20) /* a POST form body; larger gets 413 */
#define HTTP_MAX_FORM_TEXT "1 MiB"
#define HTTP_CONN_MEMORY_BYTES (HTTP_MAX_URL_BYTES + 65536) /* MHD's per-connection
                                       pool: the head, the longest target included */
#define HTTP_MAX_LISTEN 256         /* longest listen address accepted */
#define HTTP_MAX_TLS_FILE (1 << 20) /* largest PEM file read */
#define HTTP_AUTH_THREADS 2         /* threads that run bcrypt */
#define HTTP_AUTH_QUEUED 32         /* verifications waiting, then 503 */
#define HTTP_RATE_MIN_BURST 10      /* the rate limit's default burst, at least */
#define HTTP_RATE_ADDRESSES 4096    /* addresses the rate limit tracks */
#define HTTP_MAX_RESP_HEADERS 8     /* extra headers one response may carry */
#define HTTP_MAX_PUBLIC 32          /* paths served without credentials */

struct addrinfo;
struct sockaddr;

/* How the server turns a listen host into addresses: getaddrinfo's
 * contract. The list is freed with freeaddrinfo, so a stand-in (a test's)
 * must build it with getaddrinfo too, on a numeric address say. */
typedef int http_resolve_fn(const char *host, const char *port, const struct addrinfo *hints,
			    struct addrinfo **res);

/* Why the server closed or refused a connection to keep /metrics
 * answering under slow or many clients (http_config.shed_total; the
 * design is in docs/internals/http.md). */
enum http_shed {
	HTTP_SHED_HEAD_TIMEOUT,      /* no whole request head by its deadline */
	HTTP_SHED_EVICTED,           /* the connection that had waited longest
	                                for a head, to make room for a new one */
	HTTP_SHED_PER_ADDRESS,       /* a new connection over its address's cap
	                                while all of that address's are busy */
	HTTP_SHED_BUSY,              /* 503: ordinary requests held every slot
	                                they may hold (the rest are reserved) */
	HTTP_SHED_COUNT
};

/* Why a request was refused by the security checks (issue 14;
 * http_config.denied_total). */
enum http_denial {
	HTTP_DENY_UNAUTHORIZED,      /* 401: no or a wrong token or Basic pair */
	HTTP_DENY_FORBIDDEN,         /* 403: a write without the write token */
	HTTP_DENY_CLIENT_CERT,       /* 403: no client certificate the CA verifies */
	HTTP_DENY_RATE_LIMITED,      /* 429: over the address's rate limit */
	HTTP_DENY_LOGIN_LIMITED,     /* 429: too many failed Basic logins */
	HTTP_DENY_COUNT
};

struct http_config {
	const char *listen;          /* "127.0.0.1:9401", "[::1]:9401", ":9401" */
	unsigned max_connections;    /* default 64 */
	unsigned threads;            /* worker threads, default 2 */
	unsigned timeout_s;          /* idle connection timeout, default 10;
	                                also the time a kept-alive connection
	                                has, from the end of a response, to
	                                deliver the next whole request head */
	unsigned header_timeout_ms;  /* a connection's first request head, TLS
	                                handshake included, must be in whole
	                                this long after accept; default 5000 */
	size_t max_body_bytes;       /* largest response a handler may build */
	const char *tls_cert_file;   /* PEM; NULL for plain HTTP */
	const char *tls_key_file;
	const char *tls_client_ca_file; /* PEM; when set (with TLS), every
	                                request needs a client certificate
	                                that this CA verifies, else 403 and
	                                the connection closes */
	const char *auth_token;      /* when set, every request needs
	                                "Authorization: Bearer TOKEN" (or
	                                the write token) */
	const char *write_token;     /* when set, routes marked with
	                                http_route_writes need "Authorization:
	                                Bearer WRITE_TOKEN"; it also passes
	                                where auth_token is asked for. Unset:
	                                such routes are served only on a
	                                numeric loopback listen
	                                (http_is_loopback_listen) and get 403
	                                elsewhere */
	const char *write_hint;      /* ends the 403's sentence (how to allow
	                                writes); NULL: none */
	/* HTTP Basic users (http_basic.h; the strings are copied at start):
	 * with any, a request
	 * passes with "Authorization: Basic" of one of them instead of the
	 * read token, as a reader (writes still need write_token). bcrypt
	 * runs on a pool of HTTP_AUTH_THREADS, never on an HTTP thread; a
	 * pair that verified once is cached; an address whose failures
	 * exceed its bucket gets 429 with Retry-After. They count as the
	 * token for refuse_insecure_remote. */
	struct http_basic_user basic_users[HTTP_BASIC_MAX_USERS];
	size_t nbasic_users;
	/* Requests per second one client address (IPv6: one /64) may make,
	 * a token bucket of rate_limit_burst (0: twice the rate, at least
	 * HTTP_RATE_MIN_BURST); beyond, 429 with Retry-After. Routes of
	 * http_route_reserved are exempt. 0: no limit. */
	double rate_limit;
	unsigned rate_limit_burst;
	unsigned max_per_ip;         /* connections from one address (IPv6: one
	                                /64); 0: all of max_connections on a
	                                loopback listen, else a quarter of it
	                                (at least 4) */
	/* Optional counters the server bumps (NULL: none), so the daemon's
	 * self-metrics need no glue: every request, and every request refused
	 * with 401, 403, 405, 413, 414, 429 or 503. */
	atomic_uint_fast64_t *requests_total;
	atomic_uint_fast64_t *rejected_total;
	/* HTTP_SHED_COUNT counters, one per enum http_shed (NULL: none). */
	atomic_uint_fast64_t *shed_total;
	/* HTTP_DENY_COUNT counters, one per enum http_denial (NULL: none). */
	atomic_uint_fast64_t *denied_total;
	/* Listening beyond loopback needs TLS and auth_token when this is
	 * true: a host is loopback only when every address it resolves to is
	 * (http_addr_is_loopback), and the addresses checked are the ones
	 * bound, so a name is never trusted for what it says. */
	bool refuse_insecure_remote;
	const char *insecure_remote_hint; /* ends that refusal's sentence
	                                     (how to allow it); NULL: none */
	http_resolve_fn *resolve;    /* NULL: getaddrinfo */
};

/* Zero fields of http_config take these defaults. */
#define HTTP_DEFAULT_MAX_CONNECTIONS 64
#define HTTP_DEFAULT_THREADS 2
#define HTTP_DEFAULT_TIMEOUT_S 10
#define HTTP_DEFAULT_HEADER_TIMEOUT_MS 5000
#define HTTP_DEFAULT_MAX_BODY (16u << 20)

struct http_request {
	const char *method;          /* "GET" */
	const char *path;            /* "/metrics" */
	void *conn;                  /* opaque, for http_request_header/arg */
	int64_t received_ns;         /* clock_mono_ns() when the request was
	                                routed: a deadline counts from here,
	                                time queued for a pool included */
	void *job;                   /* opaque: set for a handler on a pool */
};

/* A request header's value or NULL. Valid during the handler. */
const char *http_request_header(const struct http_request *req, const char *name);
/* A parameter's value or NULL: the form body's (a POST to a route of
 * http_route_form), else the query string's. Valid during the handler. */
const char *http_request_arg(const struct http_request *req, const char *name);
/* Every value of a parameter that may repeat (Prometheus's match[]):
 * the form body's in order, then the query string's; the first `max` go
 * to out[], the return is how many there were in all. Valid during the
 * handler. */
size_t http_request_args(const struct http_request *req, const char *name, const char **out,
			 size_t max);
/* The name of the first parameter (form body's, then query string's)
 * whose name or value holds a NUL byte ("%00"), or NULL. Such a value
 * reads as cut at the NUL through http_request_arg: a handler that must
 * not act on a cut value refuses the request first. Valid during the
 * handler. */
const char *http_request_nul_arg(const struct http_request *req);

/* An immutable, reference-counted response body that many responses can
 * send without copying (a cached /metrics rendering, say). */
struct http_blob;

/* A blob holding a copy of `len` bytes, with one reference for the
 * caller. NULL when out of memory. */
struct http_blob *http_blob_new(const void *data, size_t len);
/* Take or drop a reference; the last drop frees. Thread-safe; unref
 * accepts NULL. */
struct http_blob *http_blob_ref(struct http_blob *b);
void http_blob_unref(struct http_blob *b);
/* The blob's bytes and their length (valid while a reference is held). */
const char *http_blob_data(const struct http_blob *b);
size_t http_blob_len(const struct http_blob *b);

struct http_response {
	int status;                  /* default 200 */
	const char *content_type;    /* default "text/plain; charset=utf-8" */
	struct buf body;             /* bounded by max_body_bytes */
	struct http_blob *blob;      /* when set, sent instead of body; the
	                                server takes over this reference */
	/* Extra headers (ETag, Cache-Control, Content-Encoding, ...): added
	 * with http_response_header. The strings are not copied: they must
	 * stay valid until the response is sent, i.e. be static or owned by
	 * the route's ctx (a pool's handler's answer is sent after it
	 * returns). */
	struct { const char *name, *value; } headers[HTTP_MAX_RESP_HEADERS];
	size_t nheaders;
};

/* Add a header to resp (see http_response.headers for the strings'
 * lifetime). 0, or GPULSE_ELIMIT past HTTP_MAX_RESP_HEADERS. */
int http_response_header(struct http_response *resp, const char *name, const char *value);

/* Answer with HTTP `status` and Prometheus's error body
 * (promjson_put_error: {"status":"error","errorType":type,"error":msg}),
 * as application/json; whatever the body held is dropped. 0 or the
 * buffer's status. */
int http_api_error(struct http_response *resp, int status, const char *type, const char *msg);

/* A handler fills `resp` and returns 0; a non-zero return, a body that
 * hit max_body_bytes, or a status outside 100-599 sends a 500 instead.
 * content_type is copied, so any string valid during the call will do.
 * Handlers run on the server's threads, several at once, or on a pool's
 * threads for a route of http_route_deferred. */
typedef int http_handler_fn(void *ctx, const struct http_request *req,
			    struct http_response *resp);
/* Whether the route's handler serves `path` (the request path, without
 * the query string); ctx is the route's. Called on the server's threads,
 * several at once: it must only read. */
typedef bool http_known_fn(void *ctx, const char *path);

struct http_server;

/* Bind and start serving on cfg->threads threads (epoll). Errors are
 * written to err as one sentence and nothing is left running: what the
 * configuration got wrong is GPULSE_EINVAL (a bad or unresolvable
 * address, half of TLS, a listen beyond loopback without TLS and a token
 * under refuse_insecure_remote, naming the address) or GPULSE_EPARSE (a TLS file that is not PEM or
 * too large); what the machine refuses is GPULSE_EIO (the port is in use,
 * permission, no such interface, a TLS file unreadable, libmicrohttpd's
 * refusal), GPULSE_ENOTSUP (no TLS in libmicrohttpd) or GPULSE_ENOMEM.
 * Free with http_server_stop. `cfg` and its
 * strings need not outlive the call; the counters it points to must.
 *
 * Connections: at most max_connections are held at once; when one more
 * arrives, the connection that has waited longest for a request head is
 * closed to make room (a connection being served is never evicted). One
 * address holds at most max_per_ip, on the same terms. A connection that
 * has not delivered a whole head header_timeout_ms after accept (TLS
 * handshake included), or timeout_s after its previous response, is
 * closed. Requests for routes other than reserved ones (http_route_reserved)
 * keep at most max_connections minus a reserve (an eighth, at least 2, at
 * most half) busy at once; beyond that they get 503 with Retry-After, so a
 * scrape always finds a slot. Each closure is counted in shed_total.
 *
 * Every request goes through, in order: a target over HTTP_MAX_URL_BYTES
 * gets 414; a POST to no route gets 404; a POST is accepted on a route
 * marked http_route_form (a form body, or none) and on one marked
 * http_route_writes (a write action started by POST, without a body; the
 * handler sees req->method), and gets 405 on any other route (with
 * "Allow: GET, HEAD, POST" on a form route); another method other than
 * GET or HEAD gets 405 with "Allow: GET, HEAD"; a request body gets 413,
 * except a form POST's, which gets 413 (a JSON error) over
 * HTTP_MAX_FORM_BYTES and 400 when it is a form that does not decode;
 * with tls_client_ca_file, a connection
 * without a client certificate that CA verifies gets 403 and is closed;
 * an ordinary request over the busy cap
 * gets 503; a request over its address's rate limit (rate_limit; not
 * for reserved routes) gets 429 with Retry-After; a missing or wrong
 * bearer token (when configured; the write token passes too) or Basic
 * pair (when users are configured) gets 401 with WWW-Authenticate, and
 * an address with too many failed Basic logins 429; a path with no route
 * gets 404; a route that changes state (http_route_writes) without the
 * write token, or without writes allowed at all, gets 403. Successful
 * answers keep the connection alive. */
int http_server_start(struct http_server **out, const struct http_config *cfg,
		      char *err, size_t errlen);
/* Route `path` (exact match, or a prefix when it ends in '/') for GET and
 * HEAD. Register before requests arrive. 0 or GPULSE_ELIMIT. */
/* Mark the route registered at exactly `path` as one that also takes
 * POST, as Prometheus's API does: an application/x-www-form-urlencoded
 * body (at most HTTP_MAX_FORM_BYTES) is decoded as Go's ParseForm does,
 * and its values come before the query string's in http_request_arg and
 * http_request_args (Go's FormValue and Form). Other bodies are read and
 * ignored. Call after registering the route and before requests arrive.
 * 0, or GPULSE_ENOENT when no route has that path. */
int http_route_form(struct http_server *s, const char *path);
int http_route(struct http_server *s, const char *path, http_handler_fn *fn, void *ctx);
/* As http_route, for a route that must answer however busy the others
 * are (/metrics, /healthz): its requests may use the reserved slots. Keep
 * such handlers quick; they are what the reserve is for. */
int http_route_reserved(struct http_server *s, const char *path, http_handler_fn *fn,
			void *ctx);
/* Mark the route registered at exactly `path` as one that changes state
 * (starts work in other processes, reloads, deletes): it needs the write
 * token (http_config.write_token), or, with none configured, a numeric
 * loopback listen; anything else gets 403 with a JSON error
 * ({"status":"error","errorType":"forbidden","error":...}) before the
 * handler runs. Call after registering the route and before requests
 * arrive. 0, GPULSE_ENOENT when no route has that path, or GPULSE_EINVAL
 * when the path is public (http_path_public). */
int http_route_writes(struct http_server *s, const char *path);
/* Give the prefix route registered at exactly `path` (a path ending in
 * '/') the test of which paths under it its handler serves. A POST to a
 * path it does not know is then answered as a POST to no route, 404 (as
 * Prometheus answers unknown paths), where it would otherwise be 405 for
 * the route's GET-only handler; GET and HEAD still reach the handler,
 * which answers them, 404 included. For the dashboard's `/`, which takes
 * every path left. Call after registering the route and before requests
 * arrive. 0, GPULSE_ENOENT when no route has that path, or GPULSE_EINVAL
 * when it is not a prefix route or `known` is NULL. */
int http_route_known(struct http_server *s, const char *path, http_known_fn *known);
/* Serve the request path `path` (exact match; the query string does not
 * count) without credentials: no bearer token, no Basic pair is asked
 * for, even when they are configured. A client certificate (with
 * tls_client_ca_file), the busy cap and the rate limit still apply, and
 * every other path still gets 401 before its route is looked up. For
 * what holds no data: the dashboard's HTML, scripts and styles, which
 * are the same bytes as the source tree, and which must load before a
 * browser can ask its user for a token. A path marked with
 * http_route_writes cannot be public. Call before requests arrive.
 * 0, GPULSE_EINVAL (empty, too long) or GPULSE_ELIMIT (HTTP_MAX_PUBLIC
 * paths already). */
int http_path_public(struct http_server *s, const char *path);
/* The port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Stop accepting, finish in-flight requests, free. Accepts NULL. */
void http_server_stop(struct http_server *s);
/* Requests seen and requests refused since start (see rejected_total). */
void http_server_counters(const struct http_server *s, uint64_t *requests,
			  uint64_t *rejected);
/* Connections closed or refused for `why` since start (see shed_total). */
uint64_t http_server_shed(const struct http_server *s, enum http_shed why);

/* ---- handlers that may take long (issue 14) ------------------------------
 *
 * A PromQL query or a trace capture must not hold one of the few threads
 * that serve /metrics. Its route is served on a pool: the HTTP thread
 * suspends the connection (libmicrohttpd's suspend/resume) and goes back
 * to other requests; a pool thread runs the handler and resumes the
 * connection, whose HTTP thread then sends the answer. While suspended a
 * connection holds no thread and is not subject to http.timeout. */
struct http_pool;

struct http_pool_stats {
	uint64_t running;            /* handlers running now */
	uint64_t queued;             /* requests waiting for a thread */
	uint64_t started_total;      /* handlers started */
	uint64_t rejected_total;     /* answered by `busy`: the pool was full */
	uint64_t gone_total;         /* dropped unrun: the client left while queued */
};

/* A pool of `threads` threads owned by `s` (http_server_stop stops it and
 * frees it), with room for `max_queued` requests waiting for a thread.
 * `name` (at most 15 bytes) names the threads; `nice` (0-19) lowers their
 * scheduling priority by that much, so that CPU-bound handlers yield to
 * the HTTP threads. 0 with *out set, or
 * GPULSE_ENOMEM, GPULSE_EIO (no thread), GPULSE_EINVAL (threads 0),
 * GPULSE_ELIMIT (HTTP_MAX_POOLS pools already). Create before requests
 * arrive. */
#define HTTP_MAX_POOLS 4
int http_pool_new(struct http_server *s, const char *name, unsigned threads,
		  unsigned max_queued, int nice, struct http_pool **out);

/* Route `path` as http_route does, with `fn` run on `pool`. When the pool
 * has no room (every thread busy and max_queued waiting) or is stopping,
 * `busy` runs instead, on the HTTP thread, and must answer at once (a
 * 503). A request whose client leaves while it waits is dropped unrun.
 * 0, GPULSE_EINVAL or GPULSE_ELIMIT. */
int http_route_deferred(struct http_server *s, const char *path, http_handler_fn *fn,
			http_handler_fn *busy, void *ctx, struct http_pool *pool);

/* For a handler running on a pool: true once its client has closed the
 * connection (poll(2) says the peer hung up) or the server is stopping, so
 * the work can stop. One poll(2) per call; false for other handlers. */
bool http_request_gone(const struct http_request *req);

/* A snapshot of the pool's counters. Thread-safe; p may be NULL (zeros). */
void http_pool_stats(struct http_pool *p, struct http_pool_stats *out);

/* Split a listen address into host and port without touching the network:
 *   "a.b.c.d:PORT", "HOSTNAME:PORT", "[IPV6]:PORT" (a zone is allowed:
 *   "[fe80::1%eth0]:PORT"), ":PORT" or "*:PORT" (all interfaces: host "").
 * PORT is 0-65535 (0 picks a free port). Writes the host, NUL-terminated,
 * to host[hostlen] and the port to *port. Returns 0, or GPULSE_EINVAL with
 * one sentence in err[errlen] (err may be NULL). Pure and thread-safe. */
int http_parse_listen(const char *listen, char *host, size_t hostlen, int *port,
		      char *err, size_t errlen);
/* True when `listen` parses and its host is a numeric address on this
 * machine only: 127.0.0.0/8, ::1 or ::ffff:127.x.x.x. All interfaces is
 * false, and so is every host name ("localhost" too): what a name means
 * is up to the resolver, so http_server_start judges it by the addresses
 * it resolves to. Never touches the network. */
bool http_is_loopback_listen(const char *listen);
/* True when `sa` is a loopback address: AF_INET in 127.0.0.0/8, AF_INET6
 * ::1 or IPv4-mapped 127.x.x.x. Anything else (0.0.0.0, ::) is false. */
bool http_addr_is_loopback(const struct sockaddr *sa);

#endif
