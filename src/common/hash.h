/* FNV-1a, 64 bits: the one string hash of gpulse (hash tables of series,
 * label-set fingerprints, kernel-name slots, ETags). Not for anything an
 * adversary must not collide: it is fast and well spread, nothing more.
 *
 * Inline, and with no source file, because the hottest callers (the
 * store's series lookup, the evaluator's maps) hash once per sample, and
 * because libgpulse-inject.so, which may use nothing beyond libc, takes it
 * without another source in its list. */
#ifndef GPULSE_HASH_H
#define GPULSE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A64_OFFSET 0xcbf29ce484222325ull /* the offset basis */
#define FNV1A64_PRIME 0x100000001b3ull

/* Continue hash h over the n bytes at p: FNV1A64_OFFSET as h starts one. */
static inline uint64_t fnv1a64_add(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * FNV1A64_PRIME;
	return h;
}

/* Continue hash h over the NUL-terminated string s (the NUL not included). */
static inline uint64_t fnv1a64_add_str(uint64_t h, const char *s)
{
	for (const unsigned char *q = (const unsigned char *)s; *q; q++)
		h = (h ^ *q) * FNV1A64_PRIME;
	return h;
}

/* Continue hash h over s and then the byte 0xff, which no UTF-8 text
 * holds: hashing a sequence of strings so, ("ab","c") and ("a","bc")
 * differ. */
static inline uint64_t fnv1a64_add_field(uint64_t h, const char *s)
{
	return (fnv1a64_add_str(h, s) ^ 0xff) * FNV1A64_PRIME;
}

/* FNV-1a of n bytes. */
static inline uint64_t fnv1a64(const void *p, size_t n)
{
	return fnv1a64_add(FNV1A64_OFFSET, p, n);
}

/* FNV-1a of a NUL-terminated string. */
static inline uint64_t fnv1a64_str(const char *s)
{
	return fnv1a64_add_str(FNV1A64_OFFSET, s);
}

#endif
