/* Packed rollup blocks: consecutive rollup buckets of one series in one
 * SQLite row, so a month of 1-minute rollups is a few hundred rows per
 * series instead of 43,200 (stepping a row each was three quarters of a
 * month's capacity report, docs/PERFORMANCE.md), in about the bytes
 * SQLite's own compact record took.
 *
 * Hand-written because it is a small variable-length layout of a few
 * fields, smaller than any serialisation library's framing; the decoder
 * is fuzzed (fuzz/fuzz_rollblock.c).
 *
 * Layout (docs/internals/store.md): byte 0 the format (ROLLBLOCK_FORMAT),
 * byte 1 the bucket count (1..ROLLBLOCK_MAX), bytes 2-5 the CRC-32 (zlib's
 * crc32, little endian) of every other byte, then per bucket: a tag byte
 * (bits 0-1 how the minimum is stored, 2-3 the maximum, 4-5 the sum: 0 a
 * zigzag varint of an integer value, 1 the IEEE-754 double in 8 bytes,
 * little endian, 2 (maximum only) equal to the minimum; bits 6-7 zero),
 * for every bucket but the first the milliseconds since the previous
 * bucket's start (a varint, at least 1), the sample count (a varint,
 * at least 1), then the minimum, maximum and sum as tagged. Varints are
 * LEB128, at most 10 bytes. The first bucket starts at the row's mint. */
#ifndef GPULSE_ROLLBLOCK_H
#define GPULSE_ROLLBLOCK_H

#include <stddef.h>
#include <stdint.h>

#define ROLLBLOCK_FORMAT 1
#define ROLLBLOCK_MAX 240          /* the most buckets of one block */
#define ROLLBLOCK_HEADER_BYTES 6   /* format, count, CRC-32 */
#define ROLLBLOCK_BUCKET_MAX_BYTES 45   /* tag, two 10-byte varints, three doubles */
/* The most bytes of one block: with the row's other columns it stays on
 * its 1 KiB SQLite page. */
#define ROLLBLOCK_MAX_BYTES 900

/* One bucket [t_ms, t_ms + step) of a series: NaN samples are not in it. */
struct rollblock_bucket {
	int64_t t_ms;
	double min, max, sum;
	uint64_t count;
};

struct rollblock {
	int n;
	size_t bytes;                /* encoded length of the n buckets */
	struct rollblock_bucket b[ROLLBLOCK_MAX];
};

/* Append k after the block's last bucket. 1 appended; 0 the block is
 * full (write it, start an empty one: an empty block takes any bucket);
 * -1 never (k does not start after the last bucket, or has no samples). */
int rollblock_add(struct rollblock *b, const struct rollblock_bucket *k);

/* Encode into out (ROLLBLOCK_MAX_BYTES): the length written, or 0 when
 * the block is empty. */
size_t rollblock_encode(const struct rollblock *b, uint8_t *out);

/* Decode a row's block whose first bucket starts at mint_ms. 0, or -1
 * with *why naming what is wrong (bad header, length, checksum, a field
 * out of range). */
int rollblock_decode(const uint8_t *data, size_t len, int64_t mint_ms, struct rollblock *out,
		     const char **why);

/* The CRC-32 the header carries: of every byte but bytes 2-5. */
uint32_t rollblock_checksum(const uint8_t *data, size_t len);

#endif
