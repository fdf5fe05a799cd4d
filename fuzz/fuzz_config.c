/* libFuzzer target for the configuration parser (config_parse): any bytes
 * must parse or be refused with "fuzz.yml:LINE:COL: ..." leaving the
 * config untouched; never crash, leak or read out of bounds. What parses
 * must survive config_dump and parse back to the same values. The input
 * is not NUL-terminated, on purpose. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "daemon/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gpulse_config c, before, back;
	char err[512];
	config_defaults(&c);
	before = c;
	int rc = config_parse(&c, (const char *)data, size, "fuzz.yml", err, sizeof err);
	if (rc != 0) {
		if (strncmp(err, "fuzz.yml:", 9) != 0 || memcmp(&c, &before, sizeof c) != 0)
			__builtin_trap();
		return 0;
	}
	struct buf b;
	buf_init(&b, 1 << 20);
	if (config_dump(&c, &b) != 0)
		__builtin_trap();
	config_defaults(&back);
	if (config_parse(&back, b.data, b.len, "dump.yml", err, sizeof err) != 0 ||
	    !config_equal(&c, &back))
		__builtin_trap();
	buf_free(&b);
	return 0;
}
