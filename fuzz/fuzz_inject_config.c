/* libFuzzer target for the injection library's settings parser
 * (src/inject/inject_config.c): the environment of any process that loads
 * libgpulse-inject.so, so any bytes. The input is read as NAME=VALUE
 * lines forming the environment, and whole as a mode and as a budget.
 * Whatever is accepted must be in range; nothing may read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inject/inject_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_VARS 16

static char text[8192];
static const char *names[MAX_VARS], *values[MAX_VARS];
static int nvars;

static const char *get(const char *name)
{
	for (int i = 0; i < nvars; i++)
		if (strcmp(names[i], name) == 0)
			return values[i];
	return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size >= sizeof text)
		size = sizeof text - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	uint8_t mode;
	char nvtx[WIRE_NAME_MAX + 1];
	if (inject_parse_mode(text, &mode, nvtx, sizeof nvtx) == 0 &&
	    (mode > WIRE_MODE_OFF || strlen(nvtx) > WIRE_NAME_MAX))
		abort();
	uint32_t ppm;
	if (inject_parse_budget(text, &ppm) == 0 && (ppm == 0 || ppm > 1000000))
		abort();
	/* Now as an environment: split lines at '\n', names at '='. */
	nvars = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line && nvars < MAX_VARS;
	     line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = '\0';
		names[nvars] = line;
		values[nvars] = eq + 1;
		nvars++;
	}
	struct inject_config c;
	char err[1024];
	inject_config_load(&c, get, 1000, err, sizeof err);
	if (c.mode > WIRE_MODE_OFF || c.budget_ppm == 0 || c.budget_ppm > 1000000 || c.topk < 1 ||
	    c.topk >= WIRE_MAX_KERNELS || !(c.cost_ns > 0) || c.socket_paths[0][0] == '\0' ||
	    strnlen(err, sizeof err) == sizeof err || strnlen(c.nvtx_range, sizeof c.nvtx_range) > WIRE_NAME_MAX)
		abort();
	return 0;
}
