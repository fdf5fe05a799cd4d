/* Small string helpers the C library lacks. */
#ifndef GPULSE_STR_H
#define GPULSE_STR_H

#include <stdbool.h>
#include <stddef.h>

/* Copy `src` into `dst` (size `size` > 0), cutting it if needed; always
 * NUL-terminates. Returns true when the whole string fit. Use it where a
 * cut is acceptable (labels, messages); check the result where not. */
bool str_copy(char *dst, size_t size, const char *src);

/* Whether s is a Prometheus label name, [a-zA-Z_][a-zA-Z0-9_]* (NULL
 * is not). */
bool str_is_label_name(const char *s);

/* Write a formatted message into err[errlen] for the caller to show; a
 * NULL or empty buffer is left alone. */
void str_errf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
