/* The device file beside a recording; see device_file.h. Hand-written:
 * nvidia-smi's CSV has no quoting, and a card's eight facts do not call
 * for a CSV library. Lenient by design: the file is optional context, so
 * a cell that does not parse leaves its fact unknown instead of refusing
 * the recording it describes. */
#include "record/device_file.h"

#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/fields.h"
#include "common/status.h"

/* Longer than any nvidia-smi line of these columns by far. */
#define LINE_MAX_BYTES 2048
#define CELLS_MAX 64

enum fact {
	FACT_IGNORED,
	FACT_NAME,
	FACT_DRIVER,
	FACT_VBIOS,
	FACT_PCIE_GEN,
	FACT_PCIE_WIDTH,
	FACT_POWER_LIMIT,
	FACT_MAX_SM_CLOCK,
	FACT_MAX_MEM_CLOCK,
	FACT_MEM_TOTAL,
};

/* Header names as nvidia-smi prints them, without the " [unit]" suffix. */
static const struct {
	const char *key;
	enum fact fact;
} fact_names[] = {
	{"name", FACT_NAME},
	{"driver_version", FACT_DRIVER},
	{"vbios_version", FACT_VBIOS},
	{"pcie.link.gen.max", FACT_PCIE_GEN},
	{"pcie.link.width.max", FACT_PCIE_WIDTH},
	{"power.limit", FACT_POWER_LIMIT},
	{"enforced.power.limit", FACT_POWER_LIMIT},
	{"clocks.max.sm", FACT_MAX_SM_CLOCK},
	{"clocks.max.memory", FACT_MAX_MEM_CLOCK},
	{"clocks.max.mem", FACT_MAX_MEM_CLOCK},
	{"memory.total", FACT_MEM_TOTAL},
};

int device_file_path(const char *recording_path, char *out, size_t outlen)
{
	char dir_buf[4096], base_buf[4096];
	if (snprintf(dir_buf, sizeof dir_buf, "%s", recording_path) >= (int)sizeof dir_buf)
		return GPULSE_ELIMIT;
	snprintf(base_buf, sizeof base_buf, "%s", recording_path);
	const char *dir = dirname(dir_buf);
	char *base = basename(base_buf);
	char *dash = strchr(base, '-');
	if (dash)
		*dash = '\0';
	int n = snprintf(out, outlen, "%s/%s-device.csv", dir, base);
	return n < 0 || (size_t)n >= outlen ? GPULSE_ELIMIT : GPULSE_OK;
}

/* Strip blanks and the line ending from both ends, in place. */
static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/* Split at commas, keeping empty cells (strtok would merge them and shift
 * every later column). Returns the cell count, at most `max`; cells past
 * `max` are dropped. */
static int split(char *line, char **cells, int max)
{
	int n = 0;
	char *p = line;
	while (n < max) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		cells[n++] = trim(p);
		if (!comma)
			break;
		p = comma + 1;
	}
	return n;
}

static enum fact fact_of(const char *header)
{
	size_t len = strcspn(header, " [");
	for (size_t i = 0; i < sizeof fact_names / sizeof fact_names[0]; i++)
		if (strlen(fact_names[i].key) == len && strncmp(fact_names[i].key, header, len) == 0)
			return fact_names[i].fact;
	return FACT_IGNORED;
}

/* A leading number, its unit after it ("700.00 W"); false for "[N/A]",
 * "[Not Supported]" or anything else that is not a finite positive
 * number. */
static bool leading_number(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || !(v > 0) || v > 1e18)
		return false;
	*out = v;
	return true;
}

/* Copy as printable ASCII, so the text is safe in JSON and terminals. */
static void copy_text(char *dst, size_t size, const char *src)
{
	size_t n = 0;
	for (; src[n] && n + 1 < size; n++) {
		unsigned char c = (unsigned char)src[n];
		dst[n] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	dst[n] = '\0';
}

static void set_fact(struct device_facts *d, enum fact f, const char *cell)
{
	double v = 0;
	bool num = leading_number(cell, &v);
	switch (f) {
	case FACT_NAME: copy_text(d->name, sizeof d->name, cell); break;
	case FACT_DRIVER: copy_text(d->driver_version, sizeof d->driver_version, cell); break;
	case FACT_VBIOS: copy_text(d->vbios_version, sizeof d->vbios_version, cell); break;
	case FACT_PCIE_GEN: d->pcie_max_gen = num && v < 100 ? (unsigned)v : 0; break;
	case FACT_PCIE_WIDTH: d->pcie_max_width = num && v < 100 ? (unsigned)v : 0; break;
	case FACT_POWER_LIMIT: d->power_limit_w = num ? v : 0; break;
	case FACT_MAX_SM_CLOCK: d->max_sm_clock_hz = num ? v * 1e6 : 0; break;
	case FACT_MAX_MEM_CLOCK: d->max_mem_clock_hz = num ? v * 1e6 : 0; break;
	case FACT_MEM_TOTAL: d->mem_total_bytes = num ? v * MIB : 0; break;
	case FACT_IGNORED: break;
	}
}

int device_file_load(const char *path, struct device_file *out, char *err, size_t errlen)
{
	char head[LINE_MAX_BYTES], line[LINE_MAX_BYTES];
	char *hcells[CELLS_MAX], *cells[CELLS_MAX];
	enum fact facts[CELLS_MAX];
	int rc = GPULSE_OK;

	memset(out, 0, sizeof *out);
	if (err && errlen)
		err[0] = '\0';
	FILE *f = fopen(path, "r");
	if (!f) {
		if (errno == ENOENT) {
			snprintf(err, errlen, "%s: no such file", path);
			return GPULSE_ENOENT;
		}
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	if (!fgets(head, sizeof head, f)) {
		if (ferror(f)) {
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			rc = GPULSE_EIO;
		}
		goto out;
	}
	if (!strchr(head, '\n') && !feof(f)) {
		snprintf(err, errlen, "%s:1: line longer than %d bytes", path, LINE_MAX_BYTES - 1);
		rc = GPULSE_EPARSE;
		goto out;
	}
	int nh = split(head, hcells, CELLS_MAX);
	for (int i = 0; i < nh; i++)
		facts[i] = fact_of(hcells[i]);
	for (int lineno = 2; out->ngpus < DEVICE_FILE_MAX_GPUS && fgets(line, sizeof line, f);
	     lineno++) {
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %d bytes", path, lineno,
				 LINE_MAX_BYTES - 1);
			rc = GPULSE_EPARSE;
			goto out;
		}
		if (trim(line)[0] == '\0')
			continue;
		int n = split(line, cells, CELLS_MAX);
		/* Fewer cells than the header leave the rest unknown; more
		 * mean the columns cannot be matched up. */
		if (n > nh) {
			snprintf(err, errlen, "%s:%d: %d cells, the header has %d", path, lineno, n, nh);
			rc = GPULSE_EPARSE;
			goto out;
		}
		struct device_facts *d = &out->gpu[out->ngpus++];
		for (int i = 0; i < n; i++)
			set_fact(d, facts[i], cells[i]);
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		rc = GPULSE_EIO;
	}
out:
	fclose(f);
	if (rc != GPULSE_OK)
		memset(out, 0, sizeof *out);
	return rc;
}
