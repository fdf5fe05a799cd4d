/* String helpers; see str.h. */
#include "str.h"

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
