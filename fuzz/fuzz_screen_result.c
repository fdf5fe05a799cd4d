/* libFuzzer target for the screening result parser (src/bench/screen.c):
 * it reads other cards' files and the card's own earlier run
 * (gpulse bench --screen --reference / --compare), so any bytes. Whatever
 * it accepts must write back to JSON that parses again to the same tests
 * and digests. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "bench/screen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	struct screen_result r, again;
	char err[256];
	if (screen_result_from_json(text, &r, err, sizeof err) != 0) {
		free(text);
		if (!memchr(err, '\0', sizeof err))
			abort();
		return 0;
	}
	free(text);
	struct buf b;
	buf_init(&b, 64u << 20);
	screen_result_to_json(&r, &b);
	if (!b.failed) {
		buf_putc(&b, '\0');
		if (screen_result_from_json(b.data, &again, err, sizeof err) != 0)
			abort();
		for (int t = 0; t < SCREEN_TEST_COUNT; t++) {
			if (again.test[t].ntiles != r.test[t].ntiles || again.test[t].digest != r.test[t].digest)
				abort();
			for (size_t k = 0; k < r.test[t].ntiles; k++)
				if (again.test[t].tile_digest[k] != r.test[t].tile_digest[k])
					abort();
		}
		if (strcmp(again.uuid, r.uuid) != 0 || strcmp(again.driver, r.driver) != 0 ||
		    strcmp(again.kernels, r.kernels) != 0)
			abort();
		screen_result_free(&again);
	}
	buf_free(&b);
	screen_result_free(&r);
	return 0;
}
