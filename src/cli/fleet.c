/* The parts of `gpulse fleet` that judge, apart from those that ask:
 * the instant-vector parser and the robust z-score (fleet.h). jansson
 * reads the JSON; the checks of its shape are ours, so that a proxy's
 * error page or a truncated answer says what is wrong and where. */
#include "cli/fleet.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/promjson.h"
#include "common/quantile.h"
#include "common/status.h"
#include "common/str.h"

int fleet_parse_vector(const char *body, size_t len, size_t max_series, struct fleet_vector *out,
		       char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	json_t *root, *result;
	const char *type;
	int rc = promjson_open(body, len, &root, &type, &result, err, errlen);
	if (rc)
		return rc;
	if (strcmp(type, "vector") != 0) {
		str_errf(err, errlen, "the answer is a %.40s, not an instant vector", type);
		rc = GPULSE_EPARSE;
		goto out;
	}
	size_t n = json_array_size(result);
	if (n > max_series) {
		str_errf(err, errlen, "the answer holds %zu series, over the %zu allowed", n, max_series);
		rc = GPULSE_ELIMIT;
		goto out;
	}
	out->s = n ? calloc(n, sizeof *out->s) : NULL;
	if (n && !out->s) {
		str_errf(err, errlen, "out of memory");
		rc = GPULSE_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *e = json_array_get(result, i);
		json_t *metric = json_object_get(e, "metric");
		json_t *value = json_object_get(e, "value");
		if (!json_is_object(metric)) {
			str_errf(err, errlen, "result[%zu] has no \"metric\" object", i);
			rc = GPULSE_EPARSE;
			goto out;
		}
		const char *k;
		json_t *lv;
		json_object_foreach(metric, k, lv) {
			if (!json_is_string(lv)) {
				str_errf(err, errlen, "result[%zu] label \"%.60s\" is not a string", i, k);
				rc = GPULSE_EPARSE;
				goto out;
			}
		}
		if (!json_is_array(value) || json_array_size(value) != 2 ||
		    !json_is_number(json_array_get(value, 0))) {
			str_errf(err, errlen, "result[%zu] has no [time, \"value\"] pair", i);
			rc = GPULSE_EPARSE;
			goto out;
		}
		if (promjson_value(json_array_get(value, 1), &out->s[i].value) != 0) {
			str_errf(err, errlen, "result[%zu] value is not a number in a string", i);
			rc = GPULSE_EPARSE;
			goto out;
		}
		out->s[i].metric = metric;
	}
	out->n = n;
	out->root = root;
	return 0;
out:
	free(out->s);
	out->s = NULL;
	out->n = 0;
	json_decref(root);
	return rc;
}

void fleet_vector_free(struct fleet_vector *v)
{
	if (!v)
		return;
	free(v->s);
	json_decref(v->root);
	memset(v, 0, sizeof *v);
}

const char *fleet_label(const struct fleet_sample *s, const char *name)
{
	const char *v = json_string_value(json_object_get(s->metric, name));
	return v ? v : "";
}

int fleet_robust_z(const double *x, size_t n, double *z, double *median_out)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += isfinite(x[i]) != 0;
	if (m < FLEET_MIN_PEERS) {
		for (size_t i = 0; i < n; i++)
			z[i] = NAN;
		return GPULSE_EINVAL;
	}
	double *v = malloc(m * sizeof *v);
	if (!v)
		return GPULSE_ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (isfinite(x[i]))
			v[k++] = x[i];
	double med = quantile_of(v, m, 0.5);
	double sum_abs = 0;
	for (size_t i = 0; i < m; i++) {
		v[i] = fabs(v[i] - med);
		sum_abs += v[i];
	}
	double mad = quantile_of(v, m, 0.5);
	free(v);
	/* 0.6745 = the 75th percentile of the standard normal: with it, z is
	 * in standard deviations for normal data. Without a MAD, the mean
	 * absolute deviation scaled to the same (sqrt(pi/2) = 1.2533). */
	double scale = mad > 0 ? mad / 0.6745 : 1.2533 * sum_abs / (double)m;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(x[i]))
			z[i] = NAN;
		else if (scale > 0)
			z[i] = (x[i] - med) / scale;
		else
			z[i] = 0;
	}
	if (median_out)
		*median_out = med;
	return 0;
}

bool fleet_is_outlier(double x, double z, double median, double min_abs)
{
	return isfinite(z) && fabs(z) > FLEET_Z_THRESHOLD && fabs(x - median) >= min_abs;
}
