/* Chunk codec: every value comes back bit for bit (random bits, NaN
 * payloads, Prometheus staleness markers, the real H200 recording),
 * timestamps must increase, and damaged bytes (truncated, trailing
 * garbage, bad header, flipped bits) are refused or decoded without
 * reading out of bounds; every flipped bit fails the checksum, and a
 * format-1 chunk (no checksum) still decodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/chunk.h"
#include "common/status.h"

#define STALE_NAN 0x7ff0000000000002ull

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;   /* xorshift64* */
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 2685821657736338717ull;
}

static double from_bits(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

static uint64_t to_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

/* Encode all samples, cutting chunks when full; decode every chunk and
 * compare bits. */
static void round_trip(const int64_t *t, const double *v, size_t n)
{
	static struct chunk_enc e;
	static int64_t dt[CHUNK_MAX_SAMPLES];
	static double dv[CHUNK_MAX_SAMPLES];
	size_t start = 0, i = 0;
	chunk_enc_init(&e);
	while (i <= n) {
		int rc = i < n ? chunk_enc_append(&e, t[i], v[i]) : GPULSE_ELIMIT;
		if (rc == 0) {
			i++;
			continue;
		}
		assert_int_equal(rc, GPULSE_ELIMIT);
		size_t len = chunk_enc_len(&e);
		assert_true(len <= CHUNK_MAX_BYTES);
		int got = chunk_decode_all(chunk_enc_bytes(&e), len, dt, dv);
		assert_int_equal(got, (int)(i - start));
		for (int k = 0; k < got; k++) {
			assert_int_equal(dt[k], t[start + (size_t)k]);
			assert_true(to_bits(dv[k]) == to_bits(v[start + (size_t)k]));
		}
		if (i == n)
			break;
		start = i;
		chunk_enc_init(&e);
	}
}

static void test_random(void **state)
{
	(void)state;
	enum { N = 20000 };
	int64_t *t = malloc(N * sizeof *t);
	double *v = malloc(N * sizeof *v);
	assert_non_null(t);
	assert_non_null(v);
	int64_t now = -5000;   /* negative timestamps too */
	for (int i = 0; i < N; i++) {
		uint64_t r = rnd();
		switch (r % 5) {
		case 0: now += 100; break;                               /* regular */
		case 1: now += 1 + (int64_t)(rnd() % 20); break;         /* jitter */
		case 2: now += 1 + (int64_t)(rnd() % 1000000); break;    /* gaps */
		case 3: now += 1 + (int64_t)(rnd() % (1ull << 40)); break; /* huge */
		default: now += 100; break;
		}
		t[i] = now;
		switch ((r >> 8) % 12) {
		case 0: v[i] = from_bits(rnd()); break;                  /* any bits, NaN payloads */
		case 1: v[i] = from_bits(STALE_NAN); break;
		case 2: v[i] = i > 0 ? v[i - 1] : 0; break;
		case 3: v[i] = (double)(rnd() % 1000); break;
		case 4: v[i] = -0.0; break;
		case 5: v[i] = INFINITY; break;
		case 6: v[i] = (double)(rnd() % 100000) / 1000.0; break;
		case 7: v[i] = from_bits(0x7ff8000000000000ull | (rnd() & 0xfffff)); break;
		/* Decimals at the edges of the decimal path: 2^53 and beyond,
		 * many digits, tiny and huge magnitudes, negative. */
		case 8: v[i] = 9007199254740992.0 - (double)(rnd() % 3); break;
		case 9: v[i] = (double)(int64_t)(rnd() % 2000000) / 1e6 - 1.0; break;
		case 10: v[i] = (rnd() & 1) ? 1e300 : 1e-300; break;
		default: v[i] = (double)(int64_t)(rnd() >> 12) / 1e15; break;
		}
	}
	round_trip(t, v, N);
	/* A power-like series: decimal deltas of changing widths. */
	for (int i = 0; i < N; i++)
		v[i] = (double)(int64_t)(90000 + (int64_t)(rnd() % (1u << (rnd() % 20)))) / 1000.0;
	round_trip(t, v, N);
	/* Constant series fill a chunk by count, random ones by bytes. */
	for (int i = 0; i < N; i++)
		v[i] = 42.0;
	round_trip(t, v, N);
	free(t);
	free(v);
}

/* Every column of the real recording, bit-exact. */
static void test_real(void **state)
{
	(void)state;
	const char *dir = getenv("GPULSE_TEST_DATA");
	char path[4096];
	snprintf(path, sizeof path, "%s/recordings/h200-phases-10hz.csv", dir ? dir : GPULSE_SOURCE_DATADIR);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	enum { MAXR = 4000, MAXC = 32 };
	static int64_t t[MAXR];
	static double v[MAXC][MAXR];
	char line[8192];
	assert_non_null(fgets(line, sizeof line, f));
	int ncols = 0;
	size_t nrows = 0;
	while (fgets(line, sizeof line, f) && nrows < MAXR) {
		char *p = line, *end;
		t[nrows] = (int64_t)llround(strtod(p, &end) * 1000.0);
		int c = 0;
		while (*end == ',' && c < MAXC) {
			p = end + 1;
			v[c][nrows] = strtod(p, &end);
			c++;
		}
		ncols = c;
		nrows++;
	}
	fclose(f);
	assert_true(nrows > 1000);
	assert_int_equal(ncols, 22);
	for (int c = 0; c < ncols; c++)
		round_trip(t, v[c], nrows);
}

static void test_order(void **state)
{
	(void)state;
	struct chunk_enc e;
	chunk_enc_init(&e);
	assert_int_equal(chunk_enc_append(&e, 1000, 1.0), 0);
	assert_int_equal(chunk_enc_append(&e, 1000, 2.0), GPULSE_ERANGE);
	assert_int_equal(chunk_enc_append(&e, 999, 2.0), GPULSE_ERANGE);
	assert_int_equal(chunk_enc_append(&e, 1001, 2.0), 0);
	assert_int_equal(e.n, 2);
	/* A delta that overflows int64 is refused, not wrapped. */
	chunk_enc_init(&e);
	assert_int_equal(chunk_enc_append(&e, INT64_MIN + 5, 1.0), 0);
	assert_int_equal(chunk_enc_append(&e, INT64_MAX, 1.0), GPULSE_ERANGE);
}

static void test_damaged(void **state)
{
	(void)state;
	static struct chunk_enc e;
	static int64_t dt[CHUNK_MAX_SAMPLES];
	static double dv[CHUNK_MAX_SAMPLES];
	chunk_enc_init(&e);
	int64_t t = 1700000000000;
	for (int i = 0; i < 100; i++) {
		t += 100 + (i % 3);
		assert_int_equal(chunk_enc_append(&e, t, (double)(i * 7 % 13) + 0.25), 0);
	}
	size_t len = chunk_enc_len(&e);
	uint8_t good[CHUNK_MAX_BYTES + 1];
	memcpy(good, chunk_enc_bytes(&e), len);
	assert_int_equal(chunk_decode_all(good, len, dt, dv), 100);

	/* Every truncation loses needed bits. Heap copies of the exact
	 * length let ASan catch any read past the end. */
	for (size_t l = 0; l < len; l++) {
		uint8_t *p = malloc(l ? l : 1);
		memcpy(p, good, l);
		assert_int_equal(chunk_decode_all(l ? p : NULL, l, dt, dv), -1);
		free(p);
	}
	/* Trailing garbage. */
	good[len] = 0;
	assert_int_equal(chunk_decode_all(good, len + 1, dt, dv), -1);
	/* Header: format, count 0, count over the maximum. */
	uint8_t bad[CHUNK_MAX_BYTES];
	memcpy(bad, good, len);
	bad[0] = 9;
	assert_int_equal(chunk_decode_all(bad, len, dt, dv), -1);
	memcpy(bad, good, len);
	bad[1] = bad[2] = 0;
	assert_int_equal(chunk_decode_all(bad, len, dt, dv), -1);
	bad[1] = 0xff;
	bad[2] = 0xff;
	assert_int_equal(chunk_decode_all(bad, len, dt, dv), -1);
	/* Too long for any chunk. */
	assert_int_equal(chunk_decode_all(good, CHUNK_MAX_BYTES + 1, dt, dv), -1);
	/* Flipped bits: refused, or decoded into at most the declared count
	 * of strictly increasing timestamps. */
	for (size_t bit = 0; bit < len * 8; bit++) {
		uint8_t *p = malloc(len);
		memcpy(p, good, len);
		p[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
		int n = chunk_decode_all(p, len, dt, dv);
		assert_true(n == -1 || (n >= 1 && n <= CHUNK_MAX_SAMPLES));
		for (int i = 1; i < n; i++)
			assert_true(dt[i] > dt[i - 1]);
		free(p);
	}
}

/* The checksum: every single flipped bit of a chunk is refused before a
 * sample is decoded (saying so), where the same chunk without a checksum
 * (format 1, as stored before issue 14) decodes many flips into other
 * values; and a format-1 chunk still decodes. */
static void test_checksum(void **state)
{
	(void)state;
	static struct chunk_enc e;
	static int64_t dt[CHUNK_MAX_SAMPLES], t0[CHUNK_MAX_SAMPLES];
	static double dv[CHUNK_MAX_SAMPLES], v0[CHUNK_MAX_SAMPLES];
	chunk_enc_init(&e);
	int64_t t = 1700000000000;
	for (int i = 0; i < 200; i++) {
		t += 100 + (i % 3);
		assert_int_equal(chunk_enc_append(&e, t, (double)(i * 7 % 13) + 0.25), 0);
	}
	size_t len = chunk_enc_len(&e);
	uint8_t good[CHUNK_MAX_BYTES], v1[CHUNK_MAX_BYTES];
	memcpy(good, chunk_enc_bytes(&e), len);
	assert_int_equal(good[0], CHUNK_FORMAT);
	assert_int_equal(chunk_decode_all(good, len, t0, v0), 200);
	/* Format 1: the same bit stream behind a 3-byte header. */
	v1[0] = CHUNK_FORMAT_V1;
	v1[1] = good[1];
	v1[2] = good[2];
	memcpy(v1 + CHUNK_V1_HEADER_BYTES, good + CHUNK_HEADER_BYTES, len - CHUNK_HEADER_BYTES);
	size_t len1 = len - (CHUNK_HEADER_BYTES - CHUNK_V1_HEADER_BYTES);
	assert_int_equal(chunk_decode_all(v1, len1, dt, dv), 200);
	assert_memory_equal(dt, t0, 200 * sizeof dt[0]);
	assert_memory_equal(dv, v0, 200 * sizeof dv[0]);

	int silent_v1 = 0;
	for (size_t bit = 0; bit < len * 8; bit++) {
		uint8_t p[CHUNK_MAX_BYTES];
		memcpy(p, good, len);
		p[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
		struct chunk_iter it;
		assert_int_equal(chunk_iter_init(&it, p, len), GPULSE_EPARSE);
		assert_string_equal(it.why, bit < 8 ? "bad header" : "checksum mismatch");
		assert_int_equal(chunk_decode_all(p, len, dt, dv), -1);
	}
	for (size_t bit = CHUNK_V1_HEADER_BYTES * 8; bit < len1 * 8; bit++) {
		uint8_t p[CHUNK_MAX_BYTES];
		memcpy(p, v1, len1);
		p[bit / 8] ^= (uint8_t)(0x80 >> (bit % 8));
		if (chunk_decode_all(p, len1, dt, dv) == 200 &&
		    (memcmp(dt, t0, sizeof dt[0] * 200) || memcmp(dv, v0, sizeof dv[0] * 200)))
			silent_v1++;
	}
	/* Why the checksum: without it, flips pass as other data. */
	assert_true(silent_v1 > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_real),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_damaged),
		cmocka_unit_test(test_checksum),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
