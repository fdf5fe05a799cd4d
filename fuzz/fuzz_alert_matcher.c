/* libFuzzer target for Alertmanager matchers (matcher.h): any text must
 * parse or be refused with a reason, never crash, leak or hang (regular
 * expressions are bounded); what parses must be usable on a label set.
 * The input is split at the first newline: a matcher, then a label value
 * to match it against. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alert/matcher.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 4096)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char *value = strchr(text, '\n');
	if (value)
		*value++ = '\0';
	struct alert_matcher m;
	char err[512] = "";
	if (alert_matcher_parse(text, &m, err, sizeof err) != 0) {
		if (!err[0])
			__builtin_trap();
	} else {
		struct label l[] = {{"alertname", value ? value : ""}, {"gpu", "0"}};
		bool matched;
		(void)alert_matcher_matches(&m, l, 2, &matched);
		alert_matcher_free(&m);
	}
	free(text);
	return 0;
}
