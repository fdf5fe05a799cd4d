/* A Prometheus API answer's envelope and sample values; see promjson.h. */
#include "common/promjson.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/str.h"

int promjson_put_error(struct buf *b, const char *type, const char *msg)
{
	buf_puts(b, "{\"status\":\"error\",\"errorType\":");
	buf_put_json_string(b, type);
	buf_puts(b, ",\"error\":");
	buf_put_json_string(b, msg);
	return buf_puts(b, "}\n");
}

int promjson_value(json_t *j, double *v)
{
	const char *s = json_string_value(j);
	if (!s)
		return GPULSE_EPARSE;
	if (strcmp(s, "NaN") == 0) {
		*v = NAN;
		return 0;
	}
	if (strcmp(s, "+Inf") == 0 || strcmp(s, "Inf") == 0) {
		*v = INFINITY;
		return 0;
	}
	if (strcmp(s, "-Inf") == 0) {
		*v = -INFINITY;
		return 0;
	}
	char *end;
	errno = 0;
	*v = strtod(s, &end);
	return (end == s || *end) ? GPULSE_EPARSE : 0;
}

int promjson_open(const char *body, size_t len, json_t **root_out, const char **type,
		  json_t **result, char *err, size_t errlen)
{
	*root_out = NULL;
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je);
	if (!root) {
		str_errf(err, errlen, "the answer is not JSON: %s at line %d column %d", je.text,
			 je.line, je.column);
		return GPULSE_EPARSE;
	}
	int rc = 0;
	const char *status = json_string_value(json_object_get(root, "status"));
	if (!status || strcmp(status, "success") != 0) {
		const char *e = json_string_value(json_object_get(root, "error"));
		if (status && strcmp(status, "error") == 0) {
			str_errf(err, errlen, "the server answered: %.300s", e ? e : "error");
			rc = GPULSE_EIO;
		} else {
			str_errf(err, errlen, "the answer has no \"status\": \"success\"");
			rc = GPULSE_EPARSE;
		}
		json_decref(root);
		return rc;
	}
	json_t *data = json_object_get(root, "data");
	*type = json_string_value(json_object_get(data, "resultType"));
	*result = json_object_get(data, "result");
	if (!json_is_object(data) || !*type || !json_is_array(*result)) {
		str_errf(err, errlen, "the answer lacks data.resultType or data.result");
		json_decref(root);
		return GPULSE_EPARSE;
	}
	*root_out = root;
	return 0;
}
