/* What every reader of a Prometheus HTTP API answer checks first: the
 * JSON, "status": "success" (or the server's own error), and the data's
 * resultType and result array; and sample values as Prometheus writes
 * them (strings, with NaN and +-Inf). jansson reads the JSON; the checks
 * of its shape are here so that a proxy's error page or a truncated answer
 * says what is wrong the same way in every reader (gpulse fleet's vectors,
 * the capacity report's matrices). */
#ifndef GPULSE_PROMJSON_H
#define GPULSE_PROMJSON_H

#include <stddef.h>

#include <jansson.h>

#include "common/buf.h"

/* Parse `body` and check its envelope. On success *root is the document
 * (the caller json_decref's it), *type the data's resultType and *result
 * its result array. GPULSE_EPARSE (not JSON, no success status, no
 * resultType or result) or GPULSE_EIO (the server answered an error),
 * with `err` saying which; *root is NULL then. */
int promjson_open(const char *body, size_t len, json_t **root, const char **type, json_t **result,
		  char *err, size_t errlen);

/* A sample value string ("0.5", "NaN", "+Inf", "-Inf") into *v; 0 or
 * GPULSE_EPARSE (not a string, or not a number). */
int promjson_value(json_t *j, double *v);

/* Append Prometheus's error answer and a newline:
 * {"status":"error","errorType":TYPE,"error":MSG}. One writer for every
 * endpoint shaped like the query API, so that all of them read alike to
 * the readers above. type is one of Prometheus's errorType words
 * (bad_data, execution, timeout, canceled, internal, unavailable,
 * not_found; gpulse adds forbidden), msg any text (JSON-escaped here).
 * 0 or the buffer's status. */
int promjson_put_error(struct buf *b, const char *type, const char *msg);

#endif
