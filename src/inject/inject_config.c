/* Environment settings of the injection library; see inject_config.h. */
#include "inject/inject_config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/str.h"

const char *inject_mode_name(unsigned mode)
{
	switch (mode) {
	case WIRE_MODE_CONTINUOUS: return "continuous";
	case WIRE_MODE_FOCUSED_PROFILER: return "profiler-api";
	case WIRE_MODE_FOCUSED_NVTX: return "nvtx";
	case WIRE_MODE_FULL: return "full";
	case WIRE_MODE_OFF: return "off";
	default: return "unknown";
	}
}

int inject_parse_mode(const char *s, uint8_t *mode, char *nvtx, size_t nvtxlen)
{
	if (!s)
		return GPULSE_EINVAL;
	if (strcmp(s, "continuous") == 0)
		*mode = WIRE_MODE_CONTINUOUS;
	else if (strcmp(s, "profiler-api") == 0)
		*mode = WIRE_MODE_FOCUSED_PROFILER;
	else if (strcmp(s, "full") == 0)
		*mode = WIRE_MODE_FULL;
	else if (strcmp(s, "off") == 0)
		*mode = WIRE_MODE_OFF;
	else if (strncmp(s, "nvtx:", 5) == 0 && s[5] && strlen(s + 5) <= WIRE_NAME_MAX) {
		*mode = WIRE_MODE_FOCUSED_NVTX;
		if (nvtx)
			str_copy(nvtx, nvtxlen, s + 5);
	} else
		return GPULSE_EINVAL;
	return GPULSE_OK;
}

int inject_parse_budget(const char *s, uint32_t *ppm)
{
	if (!s || !*s)
		return GPULSE_EINVAL;
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return GPULSE_EINVAL;
	double scale;
	if (strcmp(end, "%") == 0)
		scale = 1e4;
	else if (strcmp(end, "ppm") == 0)
		scale = 1;
	else if (*end == '\0')
		scale = 1e6;
	else
		return GPULSE_EINVAL;
	double p = v * scale;
	if (!(p > 0) || p > 1e6)
		return GPULSE_EINVAL;
	*ppm = p < 1 ? 1 : (uint32_t)(p + 0.5);
	return GPULSE_OK;
}

static void add_err(char *err, size_t errlen, const char *msg)
{
	if (!err || errlen == 0)
		return;
	size_t n = strlen(err);
	snprintf(err + n, errlen - n, "%s%s", n ? "; " : "", msg);
}

/* A number of nanoseconds from the environment: 1 and *out when `name`
 * is set to one in (lo, hi] (lo < 0: in [0, hi]); else 0, and a line in
 * err naming the value and `range` ("(0, 1e6]; using 2000") when set. */
static int env_number(const char *(*get)(const char *), const char *name, double lo, double hi,
		      const char *range, double *out, char *err, size_t errlen)
{
	const char *v = get(name);
	if (!v || !*v)
		return 0;
	char *end;
	double d = strtod(v, &end);
	if (*end || !(lo < 0 ? d >= 0 : d > lo) || d > hi) {
		char msg[192];
		snprintf(msg, sizeof msg, "%s=%.64s is not in %s", name, v, range);
		add_err(err, errlen, msg);
		return 0;
	}
	*out = d;
	return 1;
}

void inject_config_load(struct inject_config *c, const char *(*get)(const char *name),
			unsigned uid, char *err, size_t errlen)
{
	char msg[WIRE_NAME_MAX + 128];
	memset(c, 0, sizeof *c);
	if (err && errlen)
		err[0] = '\0';
	c->mode = WIRE_MODE_CONTINUOUS;
	c->budget_ppm = 5000;
	c->topk = 64;
	c->cost_ns = 2000;
	c->tail_ns = 2000000000ull;
	c->sample_every = INJECT_SAMPLE_EVERY;
	c->offset_floors = -1;
	const char *v = get("GPULSE_MODE");
	if (v && *v && inject_parse_mode(v, &c->mode, c->nvtx_range, sizeof c->nvtx_range)) {
		snprintf(msg, sizeof msg, "GPULSE_MODE=%.64s is not continuous, profiler-api, "
			 "nvtx:NAME, full or off; using continuous", v);
		add_err(err, errlen, msg);
	} else if (v && *v) {
		c->mode_set = 1;
	}
	v = get("GPULSE_BUDGET");
	if (v && *v && inject_parse_budget(v, &c->budget_ppm)) {
		snprintf(msg, sizeof msg, "GPULSE_BUDGET=%.64s is not a share like 0.5%% or "
			 "5000ppm in (0, 100%%]; using 0.5%%", v);
		add_err(err, errlen, msg);
	} else if (v && *v) {
		c->budget_set = 1;
	}
	v = get("GPULSE_TOPK");
	if (v && *v) {
		char *end;
		unsigned long k = strtoul(v, &end, 10);
		if (*end || k < 1 || k >= WIRE_MAX_KERNELS) {
			snprintf(msg, sizeof msg, "GPULSE_TOPK=%.64s is not in 1..%d; using 64", v,
				 WIRE_MAX_KERNELS - 1);
			add_err(err, errlen, msg);
		} else {
			c->topk = (unsigned)k;
		}
	}
	double d;
	if (env_number(get, "GPULSE_COST_NS", 0, 1e6, "(0, 1e6]; using the default", &d, err, errlen)) {
		c->cost_ns = d;
		c->cost_ns_set = 1;
	}
	if (env_number(get, "GPULSE_TAIL_NS", -1, 60e9, "[0, 6e10]; using the default", &d, err, errlen)) {
		c->tail_ns = (uint64_t)d;
		c->tail_ns_set = 1;
	}
	if (env_number(get, "GPULSE_SAMPLE_EVERY", 0, 65536, "in 1..65536; using 32", &d, err, errlen)) {
		if (d != (double)(unsigned)d)
			add_err(err, errlen, "GPULSE_SAMPLE_EVERY is not a whole number; using 32");
		else
			c->sample_every = (unsigned)d;
	}
	if (env_number(get, "GPULSE_SAMPLE_OFFSET", -1, 4, "[0, 4] (floors); using the GPU's own figure", &d,
		       err, errlen))
		c->offset_floors = d;
	v = get("GPULSE_SOCKET");
	if (v && *v) {
		if (!str_copy(c->socket_paths[0], INJECT_PATH_MAX, v))
			add_err(err, errlen, "GPULSE_SOCKET is too long; using the default paths");
		else
			goto sock_done;
		c->socket_paths[0][0] = '\0';
	}
	{
		unsigned n = 0;
		str_copy(c->socket_paths[n++], INJECT_PATH_MAX, WIRE_DEFAULT_SOCKET);
		const char *xdg = get("XDG_RUNTIME_DIR");
		if (xdg && *xdg && strlen(xdg) + 32 < INJECT_PATH_MAX)
			snprintf(c->socket_paths[n++], INJECT_PATH_MAX, "%s/gpulse/inject.sock", xdg);
		snprintf(c->socket_paths[n], INJECT_PATH_MAX, "/tmp/gpulse-%u/inject.sock", uid);
	}
sock_done:
	v = get("GPULSE_INJECT_DUMP");
	if (v && *v && !str_copy(c->dump_path, sizeof c->dump_path, v)) {
		c->dump_path[0] = '\0';
		add_err(err, errlen, "GPULSE_INJECT_DUMP is too long; no dump");
	}
	v = get("GPULSE_INJECT_SKIP");
	if (v && *v) {
		char list[128];
		str_copy(list, sizeof list, v);
		char *save = NULL;
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			static const struct {
				const char *name;
				unsigned bit;
			} parts[] = {
				{"uvm", INJECT_SKIP_UVM},     {"nvtx", INJECT_SKIP_NVTX},
				{"probe", INJECT_SKIP_PROBE}, {"sync", INJECT_SKIP_SYNC},
				{"copies", INJECT_SKIP_COPIES}, {"perthread", INJECT_SKIP_PERTHREAD}, {"hold", INJECT_SKIP_HOLD},
				{"samples", INJECT_SKIP_SAMPLES}, {"interpose", INJECT_SKIP_INTERPOSE},
				{"calibrate", INJECT_SKIP_CALIBRATE},
			};
			size_t i = 0;
			while (i < sizeof parts / sizeof parts[0] && strcmp(t, parts[i].name) != 0)
				i++;
			if (i < sizeof parts / sizeof parts[0]) {
				c->skip |= parts[i].bit;
			} else {
				snprintf(msg, sizeof msg, "GPULSE_INJECT_SKIP: unknown part '%.32s' "
					 "(known: uvm, nvtx, probe, sync, copies, perthread, hold, samples, "
					 "interpose); ignored", t);
				add_err(err, errlen, msg);
			}
		}
	}
	v = get("GPULSE_DETACH");
	if (v && *v) {
		if (strcmp(v, "1") == 0)
			c->detach = 1;
		else if (strcmp(v, "0") != 0)
			add_err(err, errlen, "GPULSE_DETACH is not 0 or 1; not detaching");
	}
	v = get("GPULSE_CUPTI_PATH");
	if (v && *v && !str_copy(c->cupti_path, sizeof c->cupti_path, v)) {
		c->cupti_path[0] = '\0';
		add_err(err, errlen, "GPULSE_CUPTI_PATH is too long; searching the usual places");
	}
}
