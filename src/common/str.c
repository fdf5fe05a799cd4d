/* String helpers; see str.h. */
#include "common/str.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool str_copy(char *dst, size_t size, const char *src)
{
	size_t n = strlen(src);
	bool fits = n < size;
	if (!fits)
		n = size - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
	return fits;
}

void str_errf(char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

bool str_is_label_name(const char *s)
{
	if (!s || !((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_' ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}
