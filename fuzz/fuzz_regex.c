/* libFuzzer target for the RE2-dialect translator and matcher (rx.h):
 * any bytes must compile or be refused with "error parsing regexp: ...",
 * never crash, leak or run away (the match is bounded by PCRE2's limits).
 * The input is split at the first newline: a pattern, then a subject to
 * match, expand and replace with it, anchored and not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/rx.h"
#include "common/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *subject = strchr(text, '\n');
	if (subject)
		*subject++ = '\0';
	else
		subject = text + size;
	size_t slen = strlen(subject);
	for (unsigned flags = 0; flags <= RX_ANCHORED; flags += RX_ANCHORED) {
		struct rx *r = NULL;
		char err[256] = "";
		int rc = rx_compile(text, flags, &r, err, sizeof err);
		if (rc != 0) {
			if (r || strncmp(err, "error parsing regexp", 20) != 0)
				__builtin_trap();
			continue;
		}
		bool hit;
		rc = rx_match(r, subject, slen, &hit);
		if (rc != 0 && rc != GPULSE_ELIMIT)
			__builtin_trap();
		size_t nsp = rx_groups(r) + 1;
		struct rx_span *sp = calloc(nsp, sizeof *sp);
		bool found = false;
		if (sp && rx_exec(r, subject, slen, 0, sp, nsp, &found) == 0 && found) {
			if (!hit || sp[0].start < 0 || sp[0].end > (long)slen || sp[0].start > sp[0].end)
				__builtin_trap();
			struct buf b;
			buf_init(&b, 1 << 16);
			rx_expand(r, &b, "<$1|${2}|$name|$$>", subject, sp, nsp);
			buf_free(&b);
		}
		free(sp);
		struct buf b;
		buf_init(&b, 1 << 16);
		(void)rx_replace_all(r, &b, subject, "[$0]");
		buf_free(&b);
		rx_free(r);
	}
	free(text);
	return 0;
}
