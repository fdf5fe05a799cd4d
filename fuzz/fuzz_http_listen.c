/* libFuzzer target for http_parse_listen and http_is_loopback_listen
 * (src/http/http_server.c): any input must be accepted or refused with a
 * sentence, and what is accepted must survive a round trip through its
 * canonical spelling. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';

	char host[HTTP_MAX_LISTEN + 1], err[256];
	int port = -1;
	int rc = http_parse_listen(in, host, sizeof host, &port, err, sizeof err);
	(void)http_is_loopback_listen(in);
	if (rc != 0) {
		if (!err[0] || strlen(err) >= sizeof err)
			__builtin_trap();
	} else {
		if (port < 0 || port > 65535 || strlen(host) >= sizeof host)
			__builtin_trap();
		/* Spelled canonically, it parses to the same host and port. */
		char again[HTTP_MAX_LISTEN + 16], host2[HTTP_MAX_LISTEN + 1];
		int port2 = -1;
		snprintf(again, sizeof again, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
		if (http_parse_listen(again, host2, sizeof host2, &port2, NULL, 0) != 0 ||
		    strcmp(host, host2) != 0 || port != port2)
			__builtin_trap();
		/* A host buffer one byte short is refused, never overrun. */
		size_t need = strlen(host) + 1;
		char *tight = malloc(need);
		if (tight) {
			if (need > 1 && http_parse_listen(in, tight, need - 1, &port2, NULL, 0) == 0)
				__builtin_trap();
			if (http_parse_listen(in, tight, need, &port2, NULL, 0) != 0)
				__builtin_trap();
			free(tight);
		}
	}
	free(in);
	return 0;
}
