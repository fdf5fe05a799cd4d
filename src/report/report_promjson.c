/* Prometheus's range-query answer (JSON) into report series: the one
 * parser the report has for what a server sends, strict about the shape
 * and bounded (fuzz/fuzz_report_matrix.c). jansson does the JSON. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/promjson.h"
#include "report/report.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

int report_parse_matrix(const char *body, size_t len, size_t max_series, size_t max_points,
			struct report_matrix *out, char *err, size_t errlen)
{
	json_t *root, *result;
	const char *type;
	int rc = promjson_open(body, len, &root, &type, &result, err, errlen);
	if (rc)
		return rc;
	if (!type || strcmp(type, "matrix") != 0 || !json_is_array(result)) {
		str_errf(err, errlen, "the answer is not a matrix (data.resultType \"%.32s\")",
			 type ? type : "?");
		rc = GPULSE_EPARSE;
		goto out;
	}
	size_t ns = json_array_size(result), points = 0;
	for (size_t i = 0; i < out->n; i++)
		points += out->series[i].n;
	if (out->n + ns > max_series) {
		str_errf(err, errlen, "the answer has %zu series; at most %zu are read", out->n + ns,
			 max_series);
		rc = GPULSE_ELIMIT;
		goto out;
	}
	size_t base = out->n;
	out->series = xrealloc(out->series, (base + ns + 1) * sizeof *out->series);
	for (size_t i = 0; i < ns; i++) {
		json_t *sj = json_array_get(result, i);
		json_t *metric = json_object_get(sj, "metric");
		json_t *values = json_object_get(sj, "values");
		if (!json_is_object(metric) || !json_is_array(values)) {
			str_errf(err, errlen, "result[%zu]: no \"metric\" object or \"values\" array", i);
			rc = GPULSE_EPARSE;
			goto out;
		}
		struct report_series *s = &out->series[out->n];
		memset(s, 0, sizeof *s);
		out->n++;
		size_t nl = json_object_size(metric), np = json_array_size(values);
		if (points + np > max_points) {
			str_errf(err, errlen, "the answer has more than %zu points", max_points);
			rc = GPULSE_ELIMIT;
			goto out;
		}
		points += np;
		s->labels = xcalloc(nl ? nl : 1, sizeof *s->labels);
		const char *k;
		json_t *v;
		json_object_foreach(metric, k, v) {
			const char *vs = json_string_value(v);
			if (!vs) {
				str_errf(err, errlen, "result[%zu]: label \"%.64s\" is not a string", i, k);
				rc = GPULSE_EPARSE;
				goto out;
			}
			s->labels[s->nlabels].name = xstrdup(k);
			s->labels[s->nlabels].value = xstrdup(vs);
			s->nlabels++;
		}
		s->t_ms = xmalloc((np ? np : 1) * sizeof *s->t_ms);
		s->v = xmalloc((np ? np : 1) * sizeof *s->v);
		for (size_t p = 0; p < np; p++) {
			json_t *pair = json_array_get(values, p);
			json_t *tj = json_array_get(pair, 0);
			double t = json_is_number(tj) ? json_number_value(tj) : NAN;
			double x;
			if (!json_is_array(pair) || json_array_size(pair) != 2 || !isfinite(t) ||
			    fabs(t) > 1e13 || promjson_value(json_array_get(pair, 1), &x) != 0) {
				str_errf(err, errlen,
					 "result[%zu].values[%zu]: not a [time, \"value\"] pair", i, p);
				rc = GPULSE_EPARSE;
				goto out;
			}
			s->t_ms[s->n] = (int64_t)llround(t * 1000);
			s->v[s->n] = x;
			s->n++;
		}
	}
out:
	json_decref(root);
	return rc;
}
