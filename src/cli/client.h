/* The CLI's side of gpulsed's HTTP API (libcurl): where the daemon is,
 * the bearer token, bounded GETs, and one-line errors a person can act on.
 * This is all the CLI shares with the daemon (DESIGN.md, layering). */
#ifndef GPULSE_CLIENT_H
#define GPULSE_CLIENT_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "common/buf.h"

#define CLIENT_DEFAULT_URL "http://127.0.0.1:9401"
#define CLIENT_TIMEOUT_MS 5000L              /* connect and whole-request limit */
#define CLIENT_MAX_RESPONSE (16u << 20)      /* larger answers are refused */
#define CLIENT_URL_MAX 1024
#define CLIENT_TOKEN_MAX 4096

/* Where and how to reach gpulsed. Zero-initialise, then set what the
 * command line gave; the rest comes from the environment. */
struct client_opts {
	const char *url;         /* NULL: $GPULSE_URL, else CLIENT_DEFAULT_URL */
	const char *token_file;  /* NULL: $GPULSE_TOKEN_FILE, else no token */
	long timeout_ms;         /* 0: CLIENT_TIMEOUT_MS */
	bool post;               /* POST with an empty body instead of GET (a
	                            write action: POST /api/v1/bench) */
	const char *server;      /* what is asked, for messages: NULL is
	                            "gpulsed" (with its 'make run' hint);
	                            "Prometheus" for --prometheus */
};

/* The base URL these options resolve to (for messages). Static storage or
 * a string of `o`; valid until the environment or `o` changes. */
const char *client_base_url(const struct client_opts *o);

/* GET base URL + `path` ("/api/v1/gpus"). On 0 the body (any HTTP status)
 * is appended to `body` (initialise it with buf_init; the caller frees it
 * with buf_free) and the status goes to *http_status. Errors, with one
 * sentence in `err` (no "gpulse:" prefix):
 *   GPULSE_EINVAL   the URL is not http:// or https://   (a usage error)
 *   GPULSE_EIO      gpulsed unreachable, TLS failure, token file unusable
 *   GPULSE_ETIMEDOUT no answer within the timeout
 *   GPULSE_ELIMIT   the answer is larger than CLIENT_MAX_RESPONSE */
int client_get(const struct client_opts *o, const char *path, struct buf *body,
	       long *http_status, char *err, size_t errlen);

/* client_get, then parse the body as the API's JSON envelope
 * ({"status": "success", "data": ...}). A non-2xx status or
 * "status": "error" becomes GPULSE_EIO with the daemon's "error" text in
 * `err`; a body that is not JSON, GPULSE_EPARSE. On 0, *out holds the
 * whole document (the caller json_decref()s it) and, when `raw` is not
 * NULL, the body's text is appended to it too. */
int client_get_json(const struct client_opts *o, const char *path, json_t **out,
		    struct buf *raw, char *err, size_t errlen);

/* The exit status for a client error: CLI_USAGE for GPULSE_EINVAL,
 * CLI_FAIL otherwise (see commands.h). */
int client_exit_code(int status);

/* Print JSON text re-indented by two spaces, every token byte for byte
 * (jansson would re-print numbers with 17 digits, changing the daemon's
 * text). `text` must already be valid JSON. 0, or GPULSE_EIO when writing
 * fails. */
int client_print_json(FILE *out, const char *text, size_t len);

/* Release libcurl's global state; call once before exit. */
void client_global_cleanup(void);

#endif
