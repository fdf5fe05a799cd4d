/* UTF-8 well-formedness (RFC 3629) for text gpulse did not write itself:
 * NVML strings, a process's comm, request parameters. Label values and
 * JSON strings must be UTF-8. */
#ifndef GPULSE_UTF8_H
#define GPULSE_UTF8_H

#include <stddef.h>

/* Length (1 to 4) of the well-formed UTF-8 sequence that starts at p, or
 * 0 when none does: a stray continuation byte, 0xC0/0xC1/0xF5..0xFF, an
 * overlong form, a surrogate (U+D800..U+DFFF), a code point above
 * U+10FFFF, or a sequence cut short. p is NUL-terminated, and reading
 * stops at the first byte that does not fit, so it never passes the NUL. */
size_t utf8_seq_len(const unsigned char *p);

/* Copy `src` into dst[dstlen] (dstlen > 0), NUL-terminated, replacing
 * every byte that is not part of well-formed UTF-8 with '?' and cutting
 * only on a character boundary. Returns the length written. */
size_t utf8_clean(char *dst, size_t dstlen, const char *src);

#endif
