/* `gpulse fleet`'s pure parts: Prometheus instant-query answers parsed
 * into samples (strict about the shape, bounded; fuzz/fuzz_fleet_vector.c),
 * GPUs keyed across those answers, and outliers among GPUs of one model by
 * a robust z-score (median and MAD). No HTTP here: cmd_fleet.c asks, this
 * file judges, so each is tested alone. */
#ifndef GPULSE_FLEET_H
#define GPULSE_FLEET_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* One sample of an instant vector: its label set (a JSON object of
 * strings, owned by the vector's document) and value. */
struct fleet_sample {
	json_t *metric;
	double value;
};

struct fleet_vector {
	json_t *root;               /* the whole answer; owns every metric */
	size_t n;
	struct fleet_sample *s;     /* n samples, malloc'ed */
};

/* Parse Prometheus's instant-query answer ({"status": "success", "data":
 * {"resultType": "vector", "result": [{"metric": {...}, "value": [t,
 * "v"]}]}}) of `len` bytes. More than `max_series` samples is refused
 * (GPULSE_ELIMIT). "status": "error" is GPULSE_EIO with the server's
 * text; any other shape GPULSE_EPARSE naming what and where (the sample's
 * index). One sentence in `err` on failure. On 0, *out owns its memory:
 * release it with fleet_vector_free. */
int fleet_parse_vector(const char *body, size_t len, size_t max_series, struct fleet_vector *out,
		       char *err, size_t errlen);
/* Release a vector; accepts a zeroed one. */
void fleet_vector_free(struct fleet_vector *v);
/* A label's value in a sample, or "" when it has none. */
const char *fleet_label(const struct fleet_sample *s, const char *name);

/* The robust z-scores of x[0..n): 0.6745 * (x - median) / MAD (Iglewicz
 * and Hoaglin's modified z). When MAD is 0 (more than half the values
 * equal) the mean absolute deviation from the median, times 1.2533,
 * stands in for it (the same scale for normal data); when that is 0 too,
 * every value equals the median and every z is 0. z[i] is NAN where x[i]
 * is not finite; non-finite values take no part. GPULSE_EINVAL when
 * fewer than FLEET_MIN_PEERS values are finite (too few to call one of
 * them odd), 0 otherwise. *median_out gets the median when not NULL. */
int fleet_robust_z(const double *x, size_t n, double *z, double *median_out);

#define FLEET_MIN_PEERS 3     /* GPUs of one model needed to judge outliers */
#define FLEET_Z_THRESHOLD 3.5 /* |z| past this is an outlier (Iglewicz & Hoaglin) */

/* Whether x is an outlier among its peers: |z| > FLEET_Z_THRESHOLD and
 * at least `min_abs` away from the median, so that a fleet whose values
 * agree to a hair does not flag the one a hair off. */
bool fleet_is_outlier(double x, double z, double median, double min_abs);

#endif
