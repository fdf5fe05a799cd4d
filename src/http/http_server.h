/* The HTTP server (libmicrohttpd): listens, enforces request limits, and
 * hands each request to a handler registered for its path. It owns no
 * logic of its own (DESIGN.md, layering). */
#ifndef GPULSE_HTTP_SERVER_H
#define GPULSE_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

struct http_config {
	const char *listen;          /* "127.0.0.1:9401", "[::1]:9401", ":9401" */
	unsigned max_connections;    /* default 64 */
	unsigned threads;            /* worker threads, default 2 */
	unsigned timeout_s;          /* idle connection timeout, default 10 */
	size_t max_body_bytes;       /* largest response a handler may build */
	const char *tls_cert_file;   /* PEM; NULL for plain HTTP */
	const char *tls_key_file;
	const char *auth_token;      /* when set, every request needs
	                                "Authorization: Bearer TOKEN" */
};

struct http_request {
	const char *method;          /* "GET" */
	const char *path;            /* "/metrics" */
	void *conn;                  /* opaque, for http_request_header/arg */
};

/* A request header's value or NULL. Valid during the handler. */
const char *http_request_header(const struct http_request *req, const char *name);
/* A query-string argument's value or NULL. Valid during the handler. */
const char *http_request_arg(const struct http_request *req, const char *name);

struct http_response {
	int status;                  /* default 200 */
	const char *content_type;    /* static storage; default text/plain */
	struct buf body;             /* bounded by max_body_bytes */
};

/* A handler fills `resp` and returns 0; a non-zero return sends a 500. */
typedef int http_handler_fn(void *ctx, const struct http_request *req,
			    struct http_response *resp);

struct http_server;

/* Bind and start serving. Errors (bad address, port in use, TLS files)
 * are written to err as one sentence. Free with http_server_stop. */
int http_server_start(struct http_server **out, const struct http_config *cfg,
		      char *err, size_t errlen);
/* Route `path` (exact match, or a prefix when it ends in '/') for GET and
 * HEAD. Register before requests arrive. 0 or GPULSE_ELIMIT. */
int http_route(struct http_server *s, const char *path, http_handler_fn *fn, void *ctx);
/* The port actually bound (useful with port 0). */
int http_server_port(const struct http_server *s);
/* Stop accepting, finish in-flight requests, free. Accepts NULL. */
void http_server_stop(struct http_server *s);

#endif
