/* libFuzzer target for the chunk decoder (chunk.h): any bytes must be
 * refused or decoded into at most CHUNK_MAX_SAMPLES strictly increasing
 * timestamps, never read out of bounds; a decoded chunk re-encodes to the
 * same samples, bit for bit. A format-2 input is also decoded with its
 * checksum repaired (else nearly every mutation would stop at the
 * checksum and never reach the bit decoder), and must then decode exactly
 * as the same bit stream in format 1 (no checksum) does. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t t[CHUNK_MAX_SAMPLES], t2[CHUNK_MAX_SAMPLES];
static double v[CHUNK_MAX_SAMPLES], v2[CHUNK_MAX_SAMPLES];
static struct chunk_enc e;

/* Decode, check, re-encode, compare. The sample count or -1. */
static int check(const uint8_t *data, size_t size)
{
	int n = chunk_decode_all(data, size, t, v);
	if (n == -1)
		return -1;
	if (n < 1 || n > CHUNK_MAX_SAMPLES)
		__builtin_trap();
	chunk_enc_init(&e);
	for (int i = 0; i < n; i++) {
		if (i > 0 && t[i] <= t[i - 1])
			__builtin_trap();
		/* A fuzzed chunk may pack more samples into its bytes than the
		 * encoder's worst-case reserve allows: stop re-encoding there. */
		if (chunk_enc_append(&e, t[i], v[i]) != 0)
			return n;
	}
	int m = chunk_decode_all(chunk_enc_bytes(&e), chunk_enc_len(&e), t2, v2);
	if (m != n)
		__builtin_trap();
	for (int i = 0; i < n; i++)
		if (t2[i] != t[i] || memcmp(&v2[i], &v[i], sizeof v[i]) != 0)
			__builtin_trap();
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[CHUNK_MAX_BYTES], v1[CHUNK_MAX_BYTES];
	static int64_t tf[CHUNK_MAX_SAMPLES];
	static double vf[CHUNK_MAX_SAMPLES];
	check(data, size);
	if (size < CHUNK_HEADER_BYTES || size > CHUNK_MAX_BYTES || data[0] != CHUNK_FORMAT)
		return 0;
	memcpy(fixed, data, size);
	uint32_t c = chunk_checksum(fixed, size);
	for (int i = 0; i < 4; i++)
		fixed[3 + i] = (uint8_t)(c >> (8 * i));
	int n = check(fixed, size);
	if (n > 0) {
		memcpy(tf, t, sizeof t[0] * (size_t)n);
		memcpy(vf, v, sizeof v[0] * (size_t)n);
	}
	v1[0] = CHUNK_FORMAT_V1;
	v1[1] = fixed[1];
	v1[2] = fixed[2];
	size_t len1 = size - (CHUNK_HEADER_BYTES - CHUNK_V1_HEADER_BYTES);
	memcpy(v1 + CHUNK_V1_HEADER_BYTES, fixed + CHUNK_HEADER_BYTES, size - CHUNK_HEADER_BYTES);
	if (check(v1, len1) != n)
		__builtin_trap();
	for (int i = 0; i < n; i++)
		if (t[i] != tf[i] || memcmp(&v[i], &vf[i], sizeof v[i]) != 0)
			__builtin_trap();
	return 0;
}
