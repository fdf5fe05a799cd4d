/* Allocation for the daemon and the CLI: out of memory aborts with one
 * message (STYLE.md allows it there). The injection library must never use
 * these: it degrades and counts instead. */
#ifndef GPULSE_XALLOC_H
#define GPULSE_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

#endif
