/* libFuzzer target for `gpulse fleet`'s parser of Prometheus instant-query
 * answers (fleet_parse_vector): any bytes must parse or be refused with a
 * reason, never crash; what parses has a label lookup that answers for
 * every sample, and its values go through the robust z-score. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/fleet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fleet_vector v;
	char err[512] = "";
	int rc = fleet_parse_vector((const char *)data, size, 1000, &v, err, sizeof err);
	if (rc != 0) {
		if (!err[0] || v.n != 0 || v.s)
			__builtin_trap();
		return 0;
	}
	double *x = malloc((v.n ? v.n : 1) * sizeof *x), *z = malloc((v.n ? v.n : 1) * sizeof *z);
	if (x && z) {
		for (size_t i = 0; i < v.n; i++) {
			if (!fleet_label(&v.s[i], "instance") || !fleet_label(&v.s[i], "gpu"))
				__builtin_trap();
			x[i] = v.s[i].value;
		}
		double med;
		if (fleet_robust_z(x, v.n, z, &med) == 0)
			for (size_t i = 0; i < v.n; i++)
				(void)fleet_is_outlier(x[i], z[i], med, 0);
	}
	free(x);
	free(z);
	fleet_vector_free(&v);
	return 0;
}
