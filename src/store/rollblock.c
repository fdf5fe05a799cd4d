/* Packed rollup blocks (rollblock.h). */
#include "store/rollblock.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <zlib.h>

enum { K_INT = 0, K_F64 = 1, K_SAME = 2 };
#define EXACT_INT_MAX 9007199254740992.0   /* 2^53: every integer below is a double */

static size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		p[n++] = (uint8_t)(c | (v ? 0x80 : 0));
	} while (v);
	return n;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >>= 7)
		n++;
	return n;
}

/* 0 or -1 (runs past the end, over 64 bits, or not in its shortest form). */
static int varint_get(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		if (*p >= end)
			return -1;
		uint8_t c = *(*p)++;
		if (i == 9 && c > 1)
			return -1;
		v |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			if (i > 0 && c == 0)
				return -1;
			*out = v;
			return 0;
		}
	}
	return -1;
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t u)
{
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static bool is_int(double v)
{
	return fabs(v) < EXACT_INT_MAX && v == (double)(int64_t)v && !(v == 0 && signbit(v));
}

static bool same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

static int kind_of(double v)
{
	return is_int(v) ? K_INT : K_F64;
}

static size_t field_len(int kind, double v)
{
	return kind == K_INT ? varint_len(zigzag((int64_t)v)) : kind == K_F64 ? 8 : 0;
}

static size_t field_put(uint8_t *p, int kind, double v)
{
	if (kind == K_INT)
		return varint_put(p, zigzag((int64_t)v));
	if (kind == K_SAME)
		return 0;
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(u >> (8 * i));
	return 8;
}

static int field_get(const uint8_t **p, const uint8_t *end, int kind, double *v)
{
	if (kind == K_INT) {
		uint64_t u;
		if (varint_get(p, end, &u) != 0)
			return -1;
		int64_t i = unzigzag(u);
		if (i <= -(int64_t)EXACT_INT_MAX || i >= (int64_t)EXACT_INT_MAX)
			return -1;
		*v = (double)i;
		return 0;
	}
	if (kind != K_F64 || end - *p < 8)
		return -1;
	uint64_t u = 0;
	for (int i = 7; i >= 0; i--)
		u = u << 8 | (*p)[i];
	*p += 8;
	memcpy(v, &u, sizeof *v);
	return 0;
}

static uint8_t tag_of(const struct rollblock_bucket *k)
{
	int kmax = same_bits(k->max, k->min) ? K_SAME : kind_of(k->max);
	return (uint8_t)(kind_of(k->min) | kmax << 2 | kind_of(k->sum) << 4);
}

/* The bytes of bucket k after `prev` (NULL for the first). */
static size_t bucket_len(const struct rollblock_bucket *k, const struct rollblock_bucket *prev)
{
	uint8_t tag = tag_of(k);
	return 1 + (prev ? varint_len((uint64_t)k->t_ms - (uint64_t)prev->t_ms) : 0) +
	       varint_len(k->count) + field_len(tag & 3, k->min) + field_len(tag >> 2 & 3, k->max) +
	       field_len(tag >> 4 & 3, k->sum);
}

uint32_t rollblock_checksum(const uint8_t *data, size_t len)
{
	uLong c = crc32(0L, Z_NULL, 0);
	c = crc32(c, data, 2);
	c = crc32(c, data + ROLLBLOCK_HEADER_BYTES, (uInt)(len - ROLLBLOCK_HEADER_BYTES));
	return (uint32_t)c;
}

int rollblock_add(struct rollblock *b, const struct rollblock_bucket *k)
{
	if (k->count == 0)
		return -1;
	const struct rollblock_bucket *prev = b->n ? &b->b[b->n - 1] : NULL;
	if (prev && k->t_ms <= prev->t_ms)
		return -1;
	if (b->n == 0)
		b->bytes = ROLLBLOCK_HEADER_BYTES;
	size_t len = bucket_len(k, prev);
	if (b->n == ROLLBLOCK_MAX || b->bytes + len > ROLLBLOCK_MAX_BYTES)
		return 0;
	b->b[b->n++] = *k;
	b->bytes += len;
	return 1;
}

size_t rollblock_encode(const struct rollblock *b, uint8_t *out)
{
	if (b->n < 1 || b->n > ROLLBLOCK_MAX)
		return 0;
	out[0] = ROLLBLOCK_FORMAT;
	out[1] = (uint8_t)b->n;
	uint8_t *p = out + ROLLBLOCK_HEADER_BYTES;
	for (int i = 0; i < b->n; i++) {
		const struct rollblock_bucket *k = &b->b[i];
		uint8_t tag = tag_of(k);
		*p++ = tag;
		if (i > 0)
			p += varint_put(p, (uint64_t)k->t_ms - (uint64_t)b->b[i - 1].t_ms);
		p += varint_put(p, k->count);
		p += field_put(p, tag & 3, k->min);
		p += field_put(p, tag >> 2 & 3, k->max);
		p += field_put(p, tag >> 4 & 3, k->sum);
	}
	size_t len = (size_t)(p - out);
	uint32_t c = rollblock_checksum(out, len);
	for (int i = 0; i < 4; i++)
		out[2 + i] = (uint8_t)(c >> (8 * i));
	return len;
}

int rollblock_decode(const uint8_t *data, size_t len, int64_t mint_ms, struct rollblock *out,
		     const char **why)
{
	const char *w = NULL;
	out->n = 0;
	out->bytes = 0;
	if (!data || len < ROLLBLOCK_HEADER_BYTES || len > ROLLBLOCK_MAX_BYTES ||
	    data[0] != ROLLBLOCK_FORMAT || data[1] < 1 || data[1] > ROLLBLOCK_MAX) {
		w = "bad header";
	} else if (rollblock_checksum(data, len) !=
		   ((uint32_t)data[2] | (uint32_t)data[3] << 8 | (uint32_t)data[4] << 16 |
		    (uint32_t)data[5] << 24)) {
		w = "checksum mismatch";
	} else {
		const uint8_t *p = data + ROLLBLOCK_HEADER_BYTES, *end = data + len;
		int64_t t = mint_ms;
		for (int i = 0; i < data[1] && !w; i++) {
			struct rollblock_bucket *k = &out->b[i];
			uint64_t dt = 0;
			if (p >= end) {
				w = "ends inside a bucket";
				break;
			}
			uint8_t tag = *p++;
			if ((tag & 3) == K_SAME || (tag & 3) > K_F64 || (tag >> 4 & 3) > K_F64 ||
			    (tag >> 2 & 3) > K_SAME || (tag & 0xc0)) {
				w = "bad bucket tag";
				break;
			}
			if (i > 0 && (varint_get(&p, end, &dt) != 0 || dt == 0 ||
				      dt > (uint64_t)INT64_MAX - (uint64_t)t)) {
				w = "bucket starts out of order";
				break;
			}
			t += (int64_t)dt;
			k->t_ms = t;
			if (varint_get(&p, end, &k->count) != 0 || k->count == 0 ||
			    field_get(&p, end, tag & 3, &k->min) != 0) {
				w = "bad bucket field";
				break;
			}
			if ((tag >> 2 & 3) == K_SAME)
				k->max = k->min;
			else if (field_get(&p, end, tag >> 2 & 3, &k->max) != 0)
				w = "bad bucket field";
			if (!w && field_get(&p, end, tag >> 4 & 3, &k->sum) != 0)
				w = "bad bucket field";
			out->n = i + 1;
		}
		if (!w && p != end)
			w = "bytes after the last bucket";
	}
	if (w) {
		out->n = 0;
		out->bytes = 0;
	} else {
		out->bytes = len;
	}
	if (why)
		*why = w;
	return w ? -1 : 0;
}
