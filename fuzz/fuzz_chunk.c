/* libFuzzer target for the chunk decoder (chunk.h): any bytes must be
 * refused or decoded into at most CHUNK_MAX_SAMPLES strictly increasing
 * timestamps, never read out of bounds; a decoded chunk re-encodes to the
 * same samples, bit for bit. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int64_t t[CHUNK_MAX_SAMPLES], t2[CHUNK_MAX_SAMPLES];
	static double v[CHUNK_MAX_SAMPLES], v2[CHUNK_MAX_SAMPLES];
	static struct chunk_enc e;
	int n = chunk_decode_all(data, size, t, v);
	if (n == -1)
		return 0;
	if (n < 1 || n > CHUNK_MAX_SAMPLES)
		__builtin_trap();
	chunk_enc_init(&e);
	for (int i = 0; i < n; i++) {
		if (i > 0 && t[i] <= t[i - 1])
			__builtin_trap();
		/* A fuzzed chunk may pack more samples into its bytes than the
		 * encoder's worst-case reserve allows: stop re-encoding there. */
		if (chunk_enc_append(&e, t[i], v[i]) != 0)
			return 0;
	}
	int m = chunk_decode_all(chunk_enc_bytes(&e), chunk_enc_len(&e), t2, v2);
	if (m != n)
		__builtin_trap();
	for (int i = 0; i < n; i++)
		if (t2[i] != t[i] || memcmp(&v2[i], &v[i], sizeof v[i]) != 0)
			__builtin_trap();
	return 0;
}
