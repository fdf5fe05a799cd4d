/* libFuzzer target for the embedded file server's header parsers
 * (src/http/http_static.c): Accept-Encoding and If-None-Match straight
 * from the client, with properties that must hold for any input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_static.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	size_t n = strlen(in);

	(void)http_accepts_gzip(in);
	/* A list that refuses gzip by name, last, never accepts it. */
	char *buf = malloc(n + 32);
	if (buf) {
		memcpy(buf, in, n);
		memcpy(buf + n, ", gzip;q=0", 11);
		if (!strstr(in, "gzip") && http_accepts_gzip(buf))
			__builtin_trap();
		free(buf);
	}

	/* The tag itself, listed after anything without a quote in it, is
	 * always found; "*" matches whatever is listed. */
	(void)http_etag_matches(in, "\"0123456789abcdef\"");
	char *list = malloc(n + 32);
	if (list) {
		if (!strpbrk(in, "\"")) {
			memcpy(list, in, n);
			memcpy(list + n, ",\"0123456789abcdef\"", 20);
			if (!http_etag_matches(list, "\"0123456789abcdef\""))
				__builtin_trap();
		}
		free(list);
	}
	if (!http_etag_matches("*", in))
		__builtin_trap();
	free(in);
	return 0;
}
