/* libFuzzer target for the rollup block decoder (rollblock.h): any bytes
 * must be refused or decoded into 1..ROLLBLOCK_MAX buckets with strictly
 * increasing starts from the row's mint and counts of at least 1, never
 * read out of bounds; a decoded block re-encodes within
 * ROLLBLOCK_MAX_BYTES, and that decodes to the same buckets bit for bit.
 * An input is also decoded with its checksum repaired, else nearly every
 * mutation would stop at the checksum and never reach the bucket fields.
 * The first 8 bytes are the row's mint (so the overflow guard is
 * reached), the rest the blob. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "store/rollblock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const uint8_t *blob, size_t len, int64_t mint)
{
	static struct rollblock b, b2, built;
	static uint8_t again[ROLLBLOCK_MAX_BYTES];
	const char *why = NULL;
	if (rollblock_decode(blob, len, mint, &b, &why) != 0) {
		if (!why || b.n != 0)
			__builtin_trap();
		return;
	}
	if (b.n < 1 || b.n > ROLLBLOCK_MAX || b.b[0].t_ms != mint)
		__builtin_trap();
	for (int i = 0; i < b.n; i++)
		if (b.b[i].count == 0 || (i > 0 && b.b[i].t_ms <= b.b[i - 1].t_ms))
			__builtin_trap();
	/* Built again bucket by bucket, the canonical form is never longer. */
	memset(&built, 0, sizeof built);
	for (int i = 0; i < b.n; i++)
		if (rollblock_add(&built, &b.b[i]) != 1)
			__builtin_trap();
	size_t n = rollblock_encode(&built, again);
	if (n == 0 || n > len || n != built.bytes)
		__builtin_trap();
	if (rollblock_decode(again, n, mint, &b2, &why) != 0 || b2.n != b.n)
		__builtin_trap();
	if (memcmp(b2.b, b.b, sizeof b.b[0] * (size_t)b.n) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t fixed[ROLLBLOCK_MAX_BYTES];
	if (size < 8)
		return 0;
	int64_t mint;
	memcpy(&mint, data, sizeof mint);
	const uint8_t *blob = data + 8;
	size_t len = size - 8;
	check(blob, len, mint);
	if (len < ROLLBLOCK_HEADER_BYTES || len > ROLLBLOCK_MAX_BYTES)
		return 0;
	memcpy(fixed, blob, len);
	uint32_t c = rollblock_checksum(fixed, len);
	for (int i = 0; i < 4; i++)
		fixed[2 + i] = (uint8_t)(c >> (8 * i));
	check(fixed, len, mint);
	return 0;
}
