/* Small string helpers the C library lacks. */
#ifndef GPULSE_STR_H
#define GPULSE_STR_H

#include <stdbool.h>
#include <stddef.h>

/* Copy `src` into `dst` (size `size` > 0), cutting it if needed; always
 * NUL-terminates. Returns true when the whole string fit. Use it where a
 * cut is acceptable (labels, messages); check the result where not. */
bool str_copy(char *dst, size_t size, const char *src);

#endif
