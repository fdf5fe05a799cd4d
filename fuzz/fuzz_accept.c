/* libFuzzer target for prom_wants_openmetrics (src/export/prom.c): content
 * negotiation on an Accept header straight from the client, and the UTF-8
 * cleaner that guards label values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "export/prom.h"
#include "common/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';

	(void)prom_wants_openmetrics(in);
	/* Whatever follows it, text/plain with q=1 listed first is never
	 * beaten: no q is above 1, and a tie goes to the first listed. */
	size_t n = strlen(in);
	char *pre = malloc(n + 32);
	if (pre) {
		memcpy(pre, "text/plain;q=1, ", 16);
		memcpy(pre + 16, in, n + 1);
		if (prom_wants_openmetrics(pre))
			__builtin_trap();
		free(pre);
	}

	/* Cleaning is idempotent and never grows the text. */
	size_t cap = n + 1;
	char *a = malloc(cap), *b = malloc(cap);
	if (a && b) {
		size_t la = utf8_clean(a, cap, in);
		size_t lb = utf8_clean(b, cap, a);
		if (la > n || la != lb || memcmp(a, b, la + 1) != 0)
			__builtin_trap();
	}
	free(a);
	free(b);
	free(in);
	return 0;
}
