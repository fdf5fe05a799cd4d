/* libFuzzer target for the pod-resources answer (src/attrib/podres.c):
 * the bytes a process on the kubelet's socket sends back, so any bytes.
 * The input is read as a gRPC response body (unframed, then decoded) and
 * whole as a ListPodResourcesResponse, into a small table so that the
 * bound is crossed. Every entry must be NUL-terminated and UTF-8; counts
 * must add up; nothing may leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attrib/podres.h"
#include "common/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct attrib_allocation *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *f[] = {a[i].pod, a[i].namespace_, a[i].container, a[i].resource,
				   a[i].device_id};
		for (size_t k = 0; k < 5; k++) {
			char again[128];
			if (utf8_clean(again, sizeof again, f[k]) != strlen(f[k]))
				abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct attrib_allocation out[8];
	size_t n, dropped;
	char err[160];
	const uint8_t *msg;
	size_t mlen;
	if (podres_grpc_unframe(data, size, &msg, &mlen, err, sizeof err) == 0) {
		if (msg + mlen > data + size)
			abort();
		if (podres_decode(msg, mlen, out, 8, &n, &dropped, err, sizeof err) == 0)
			check(out, n);
	}
	if (podres_decode(data, size, out, 8, &n, &dropped, err, sizeof err) == 0) {
		if (n > 8)
			abort();
		check(out, n);
	}
	return 0;
}
