/* Compressed chunks of one series: delta-of-delta timestamps in
 * milliseconds (Gorilla, Pelkonen et al., VLDB 2015, with a 4-bit bucket
 * for the jitter of real samplers) and values as decimal deltas when a
 * value is a short decimal (v == S / 10^k exactly, as most telemetry is:
 * 92.752 W is S = 92752 at k = 3), else Gorilla XOR. Bit-exact for every
 * value: NaN payloads, -0.0 and Prometheus's staleness marker
 * 0x7ff0000000000002 take the XOR path.
 *
 * Hand-written because no Debian library offers this codec; it is small,
 * and the decoder is fuzzed (fuzz/fuzz_chunk.c).
 *
 * Layout (docs/internals/store.md): byte 0 is the format (CHUNK_FORMAT),
 * bytes 1-2 the sample count (little endian), bytes 3-6 the CRC-32 (zlib's
 * crc32, little endian) of every other byte of the chunk, then a
 * big-endian bit stream: t0 (64 bits, two's complement), v0 (64 bits),
 * then per sample a timestamp delta-of-delta bucket and a value record;
 * the last byte is padded with zero bits. Timestamps strictly increase
 * within a chunk. Format 1 (CHUNK_FORMAT_V1, written before issue 14) is
 * the same without the checksum (a 3-byte header) and is still decoded.
 * docs/internals/store.md has the bit-level grammar. */
#ifndef GPULSE_CHUNK_H
#define GPULSE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#define CHUNK_FORMAT 2            /* with a checksum */
#define CHUNK_FORMAT_V1 1         /* without: read, never written */
#define CHUNK_HEADER_BYTES 7      /* format, count, CRC-32 */
#define CHUNK_V1_HEADER_BYTES 3
#define CHUNK_MAX_SAMPLES 1024    /* 102 s at 10 Hz; amortises per-chunk overhead */
#define CHUNK_MAX_BYTES 900       /* one chunk fits a 1 KiB SQLite page */
#define CHUNK_MAX_SCALE 15        /* 10^15 < 2^53: every power is exact */
/* Worst case of one sample: 4+64 timestamp bits, 3+2+5+6+64 value bits. */
#define CHUNK_SAMPLE_MAX_BITS 148

/* An open chunk being appended to. Plain memory: copy it to snapshot it. */
struct chunk_enc {
	uint32_t nbits;           /* bits written after the header */
	uint16_t n;               /* samples */
	uint8_t lead, trail;      /* previous XOR window; lead 0xff: none yet */
	int8_t scale;             /* k of the decimal state; -1: none */
	uint8_t width;            /* previous decimal delta width; 0: none */
	uint8_t xor_streak;       /* values in a row that were not decimal */
	int64_t t_first, t_last;
	int64_t delta;            /* previous timestamp delta */
	int64_t scaled;           /* S of the previous value when scale >= 0 */
	uint64_t v_last;          /* previous value bits */
	uint8_t data[CHUNK_MAX_BYTES];
};

/* Start an empty chunk. */
void chunk_enc_init(struct chunk_enc *e);
/* Append one sample. 0; GPULSE_ELIMIT when the chunk is full (by count or
 * bytes: start another); GPULSE_ERANGE when t_ms is not after the last
 * sample (nothing is written). */
int chunk_enc_append(struct chunk_enc *e, int64_t t_ms, double v);
/* The encoded bytes so far (header filled in, checksum included), valid
 * until the next append. */
size_t chunk_enc_len(const struct chunk_enc *e);
const uint8_t *chunk_enc_bytes(struct chunk_enc *e);

/* Decoding one chunk's bytes. The iterator does not copy `data`; it must
 * outlive the iterator. */
struct chunk_iter {
	const uint8_t *data;
	size_t nbits_total;       /* bits available after the header */
	size_t pos;               /* next bit */
	uint16_t n, i;
	uint8_t lead, trail;
	int8_t scale;
	uint8_t width;
	int64_t t, delta, scaled;
	uint64_t v;
	int err;                  /* sticky: GPULSE_EPARSE once invalid */
	const char *why;          /* what was wrong once err is set (static) */
};

/* Check the header and, for CHUNK_FORMAT, the checksum over the whole
 * chunk. 0 or GPULSE_EPARSE (wrong format, count 0 or above
 * CHUNK_MAX_SAMPLES, length over CHUNK_MAX_BYTES or too short, checksum
 * mismatch), with it->why saying which. */
int chunk_iter_init(struct chunk_iter *it, const uint8_t *data, size_t len);
/* Next sample: 1 with *t_ms and *v set; 0 at the end; -1 when the bytes
 * are invalid (it->err becomes GPULSE_EPARSE and stays, it->why says
 * "undecodable bit stream"). Never reads
 * outside [data, data+len); the end is reported only once every bit of
 * the input has been accounted for (no trailing garbage). */
int chunk_iter_next(struct chunk_iter *it, int64_t *t_ms, double *v);

/* Decode a whole chunk into caller arrays of CHUNK_MAX_SAMPLES entries.
 * Returns the number of samples, or -1 when the bytes are invalid (every
 * sample is checked, trailing garbage included). */
int chunk_decode_all(const uint8_t *data, size_t len, int64_t *t_ms, double *v);

/* The checksum a CHUNK_FORMAT chunk of `len` bytes must carry in bytes
 * 3-6: the CRC-32 of bytes 0-2 and 7.. (len >= CHUNK_HEADER_BYTES). The
 * fuzz target uses it to let mutated bytes reach the bit decoder. */
uint32_t chunk_checksum(const uint8_t *data, size_t len);

#endif
