/* libFuzzer target for the alert template parser and executor
 * (src/rules/template.c): any bytes must parse or be refused with Go's
 * "template: NAME:LINE: reason", never crash, leak, recurse without
 * bound or write past TMPL_MAX_OUTPUT; a template that parses is
 * expanded with labels, external labels and a few values. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "rules/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > TMPL_MAX_TEXT + 16)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct tmpl *t = NULL;
	char err[512] = "";
	if (tmpl_parse("__alert_Fuzz", text, &t, err, sizeof err) == 0) {
		static const struct label l[] = {{"__name__", "m"}, {"gpu", "0"}, {"job", "j"}};
		static const struct label ext[] = {{"site", "s"}};
		static const double vals[] = {0, 1.5, -3, 1e300, NAN, INFINITY};
		for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
			struct tmpl_data d = {.labels = l, .nlabels = 3, .ext_labels = ext, .next_labels = 1,
					      .external_url = "http://x", .value = vals[i]};
			struct buf b;
			buf_init(&b, TMPL_MAX_OUTPUT + 1024);
			tmpl_expand(t, &d, &b);
			if (b.len > TMPL_MAX_OUTPUT + 1024)
				abort();
			buf_free(&b);
		}
		tmpl_free(t);
	} else if (t != NULL || strncmp(err, "template: __alert_Fuzz:", 23) != 0) {
		abort(); /* a refusal says why, in Go's words, and hands out nothing */
	}
	free(text);
	return 0;
}
