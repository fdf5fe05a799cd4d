/* UTF-8 checks; see utf8.h. Hand-written because the check is a dozen
 * lines and the libraries that offer it (ICU, glib) are far larger than
 * what the daemon needs. */
#include "common/utf8.h"

#include <string.h>

size_t utf8_seq_len(const unsigned char *p)
{
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		return (p[1] & 0xC0) == 0x80 ? 2 : 0;
	if (c >= 0xE0 && c <= 0xEF) {
		unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80)
			return 0;
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
		if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

size_t utf8_clean(char *dst, size_t dstlen, const char *src)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t o = 0;
	if (dstlen == 0)
		return 0;
	while (*p) {
		size_t n = utf8_seq_len(p);
		if (n == 0) {
			if (o + 1 >= dstlen)
				break;
			dst[o++] = '?';
			p++;
			continue;
		}
		if (o + n >= dstlen)
			break;
		memcpy(dst + o, p, n);
		o += n;
		p += n;
	}
	dst[o] = '\0';
	return o;
}
