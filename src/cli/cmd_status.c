/* `gpulse status`: fetch /api/v1/gpus and show every GPU on one screen:
 * health, load with bars, power, clocks against their maximum, the GPM
 * block, why clocks are held down (in words), errors and processes.
 * A value the daemon could not read prints "-", never 0 (DESIGN.md,
 * decision 2), and a replay says so at the top in a banner. */
#include "cli/cmd_status.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/client.h"
#include "collect/fields.h"
#include "common/status.h"

#define SGR_RESET "\033[0m"
#define SGR_BOLD "\033[1m"
#define SGR_DIM "\033[2m"
#define SGR_RED "\033[31m"
#define SGR_GREEN "\033[32m"
#define SGR_YELLOW "\033[33m"
#define SGR_CYAN "\033[36m"
#define SGR_BOLD_RED "\033[1;31m"
#define SGR_BOLD_YELLOW "\033[1;33m"
#define SGR_BANNER "\033[1;30;43m" /* bold black on yellow */

#define LABEL_FMT "  %-10s"         /* the left column of every GPU line */
#define BAR_WIDTH 20
#define CELL 48

struct out {
	FILE *f;
	bool color;
};

static void on(const struct out *o, const char *sgr)
{
	if (o->color && sgr)
		fputs(sgr, o->f);
}

static void off(const struct out *o)
{
	if (o->color)
		fputs(SGR_RESET, o->f);
}

static void paint(const struct out *o, const char *sgr, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Print in colour `sgr` (NULL: plain). A trailing newline goes after the
 * reset, so no colour bleeds into the next line. */
static void paint(const struct out *o, const char *sgr, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	size_t n = strlen(text);
	bool newline = n > 0 && text[n - 1] == '\n';
	if (newline)
		text[--n] = '\0';
	on(o, sgr);
	fputs(text, o->f);
	if (sgr)
		off(o);
	if (newline)
		fputc('\n', o->f);
}

static void label(const struct out *o, const char *name)
{
	on(o, SGR_DIM);
	fprintf(o->f, LABEL_FMT, name);
	off(o);
}

/* Text from the daemon, made safe for a terminal: control bytes (which
 * could carry escape sequences from a process name) become '?'. */
static const char *safe(const char *s, char *buf, size_t len)
{
	if (!s || !s[0])
		return "-";
	size_t i = 0;
	for (; s[i] && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	buf[i] = '\0';
	return buf;
}

static const char *str_of(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

/* Whether GPU `g` of /api/v1/gpus is a recording played back. */
static bool is_replay(json_t *g)
{
	const char *source = str_of(g, "source");
	return source && strcmp(source, "replay") == 0;
}

static bool num_of(json_t *obj, const char *key, double *v)
{
	json_t *j = json_object_get(obj, key);
	if (!json_is_number(j))
		return false;
	*v = json_number_value(j);
	return isfinite(*v);
}

static bool field(json_t *fields, enum field_id f, double *v)
{
	return num_of(fields, field_key(f), v);
}

/* ---- formatting ------------------------------------------------------- */

static const char *fmt_pct(char *c, bool have, double ratio)
{
	if (!have)
		return "-";
	snprintf(c, CELL, "%.0f%%", ratio * 100);
	return c;
}

static const char *fmt_bytes(char *c, bool have, double bytes)
{
	if (!have)
		return "-";
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (fabs(bytes) >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(c, CELL, "%.*f %s", u >= 3 ? 1 : 0, bytes, unit[u]);
	return c;
}

static const char *fmt_rate(char *c, bool have, double bytes_per_s)
{
	if (!have)
		return "-";
	snprintf(c, CELL, "%.2f GB/s", bytes_per_s / 1e9);
	return c;
}

/* A whole number of v / scale, with a prefix and a suffix ("P0", "60 C"). */
static const char *fmt_num(char *c, bool have, double v, double scale, const char *prefix,
			   const char *suffix)
{
	if (!have)
		return "-";
	snprintf(c, CELL, "%s%.0f%s", prefix, v / scale, suffix);
	return c;
}

static const char *fmt_energy(char *c, bool have, double joules)
{
	if (!have)
		return "-";
	if (joules >= 3.6e6)
		snprintf(c, CELL, "%.1f kWh", joules / 3.6e6);
	else if (joules >= 1e3)
		snprintf(c, CELL, "%.1f kJ", joules / 1e3);
	else
		snprintf(c, CELL, "%.0f J", joules);
	return c;
}

static void fmt_age(char *c, double s)
{
	long long t = (long long)s;
	if (t >= 86400)
		snprintf(c, CELL, "%lldd%lldh", t / 86400, t % 86400 / 3600);
	else if (t >= 3600)
		snprintf(c, CELL, "%lldh%02lldm", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(c, CELL, "%lldm%02llds", t / 60, t % 60);
	else
		snprintf(c, CELL, "%llds", t);
}

static const char *level_color(double ratio)
{
	return ratio >= 0.9 ? SGR_RED : ratio >= 0.75 ? SGR_YELLOW : SGR_GREEN;
}

/* "[#######.............]"; blank inside when the value is missing, so a
 * missing value never looks like an empty (zero) bar. */
static void bar(const struct out *o, bool have, double ratio, bool warn_high)
{
	fputc('[', o->f);
	if (!have) {
		fprintf(o->f, "%*s", BAR_WIDTH, "");
	} else {
		if (ratio < 0)
			ratio = 0;
		if (ratio > 1)
			ratio = 1;
		int n = (int)lround(ratio * BAR_WIDTH);
		on(o, warn_high ? level_color(ratio) : SGR_CYAN);
		for (int i = 0; i < n; i++)
			fputc('#', o->f);
		off(o);
		on(o, SGR_DIM);
		for (int i = n; i < BAR_WIDTH; i++)
			fputc('.', o->f);
		off(o);
	}
	fputs("]  ", o->f);
}

/* ---- one GPU ------------------------------------------------------------ */

static void render_title(const struct out *o, json_t *g)
{
	char idx[CELL], b1[128], b2[128], b3[64], b4[64], b5[32];
	double v = 0;
	if (num_of(g, "gpu", &v))
		snprintf(idx, sizeof idx, "%.0f", v);
	else
		snprintf(idx, sizeof idx, "-");
	paint(o, SGR_BOLD, "GPU %s  %s", idx, safe(str_of(g, "model"), b1, sizeof b1));

	/* "GPU-3f2a1b4c-...": the first group is enough to tell GPUs apart.
	 * Other identifiers (a replay's) are shown whole. */
	const char *uuid = str_of(g, "uuid");
	char shortid[128];
	safe(uuid, shortid, sizeof shortid);
	if (uuid && (strncmp(uuid, "GPU-", 4) == 0 || strncmp(uuid, "MIG-", 4) == 0)) {
		char *dash = strchr(shortid + 4, '-');
		if (dash)
			*dash = '\0';
	}
	fprintf(o->f, "  %s", uuid && uuid[0] ? shortid : "-");
	const char *bus = str_of(g, "pci_bus_id");
	if (bus && bus[0])
		fprintf(o->f, "  %s", safe(bus, b2, sizeof b2));
	/* Architecture, compute capability and MIG, those that are known. */
	const char *arch = str_of(g, "architecture");
	const char *cc = str_of(g, "compute_capability");
	const char *mig = str_of(g, "mig_mode");
	const char *sep = "  ";
	on(o, SGR_DIM);
	if (arch && arch[0]) {
		fprintf(o->f, "%s%s", sep, safe(arch, b3, sizeof b3));
		sep = ", ";
	}
	if (cc && cc[0]) {
		fprintf(o->f, "%sCC %s", sep, safe(cc, b4, sizeof b4));
		sep = ", ";
	}
	if (mig && mig[0])
		fprintf(o->f, "%sMIG %s", sep, safe(mig, b5, sizeof b5));
	off(o);

	const char *health = str_of(g, "health");
	const char *reason = str_of(g, "health_reason");
	char rb[256];
	fputs("  ", o->f);
	if (health && strcmp(health, "up") == 0) {
		paint(o, SGR_GREEN, "up");
	} else if (health && strcmp(health, "stale") == 0) {
		paint(o, SGR_BOLD_YELLOW, "STALE");
		if (reason && reason[0])
			paint(o, SGR_YELLOW, " (%s)", safe(reason, rb, sizeof rb));
	} else if (health && strcmp(health, "lost") == 0) {
		paint(o, SGR_BOLD_RED, "LOST");
		if (reason && reason[0])
			paint(o, SGR_RED, " (%s)", safe(reason, rb, sizeof rb));
	} else {
		paint(o, SGR_YELLOW, "health %s", safe(health, rb, sizeof rb));
	}
	if (is_replay(g))
		paint(o, SGR_BOLD_YELLOW, "  [replay]");
	fputc('\n', o->f);

	json_t *stale = json_object_get(g, "stale_fields");
	if (json_is_array(stale) && json_array_size(stale) > 0) {
		label(o, "stale");
		on(o, SGR_YELLOW);
		size_t i;
		json_t *s;
		json_array_foreach(stale, i, s) {
			fprintf(o->f, "%s%s", i ? ", " : "", safe(json_string_value(s), rb, sizeof rb));
		}
		fputs(" (not refreshed in time)", o->f);
		off(o);
		fputc('\n', o->f);
	}
}

static void render_load(const struct out *o, json_t *g, json_t *fl)
{
	char a[CELL], b[CELL], c[CELL], d[CELL];
	double util = 0, mutil = 0, used = 0, total = 0, mfree = 0, reserved = 0;
	double power = 0, limit = 0, energy = 0;
	bool h_util = field(fl, F_GPU_UTIL, &util), h_mutil = field(fl, F_MEM_UTIL, &mutil);
	bool h_used = field(fl, F_MEM_USED, &used), h_total = field(fl, F_MEM_TOTAL, &total);
	bool h_free = field(fl, F_MEM_FREE, &mfree), h_res = field(fl, F_MEM_RESERVED, &reserved);
	bool h_power = field(fl, F_POWER, &power), h_limit = field(fl, F_POWER_LIMIT, &limit);
	bool h_energy = field(fl, F_ENERGY, &energy);
	(void)g;

	label(o, "util");
	bar(o, h_util, util, false);
	fprintf(o->f, "%-5s", fmt_pct(a, h_util, util));
	paint(o, SGR_DIM, "   memory busy ");
	fprintf(o->f, "%s\n", fmt_pct(b, h_mutil, mutil));

	bool h_mem_ratio = h_used && h_total && total > 0;
	double mem_ratio = h_mem_ratio ? used / total : 0;
	label(o, "memory");
	bar(o, h_mem_ratio, mem_ratio, true);
	fprintf(o->f, "%s / %s", fmt_bytes(a, h_used, used), fmt_bytes(b, h_total, total));
	if (h_mem_ratio)
		paint(o, level_color(mem_ratio), " (%.0f%%)", mem_ratio * 100);
	on(o, SGR_DIM);
	fprintf(o->f, "   free %s   reserved %s", fmt_bytes(c, h_free, mfree),
		fmt_bytes(d, h_res, reserved));
	off(o);
	fputc('\n', o->f);

	bool h_pratio = h_power && h_limit && limit > 0;
	double pratio = h_pratio ? power / limit : 0;
	label(o, "power");
	bar(o, h_pratio, pratio, true);
	fprintf(o->f, "%s / %s W", fmt_num(a, h_power, power, 1, "", ""),
		fmt_num(b, h_limit, limit, 1, "", ""));
	if (h_pratio)
		paint(o, level_color(pratio), " (%.0f%%)", pratio * 100);
	paint(o, SGR_DIM, "   energy %s", fmt_energy(c, h_energy, energy));
	fputc('\n', o->f);
}

static void render_thermal_clocks(const struct out *o, json_t *g, json_t *fl)
{
	char a[CELL], b[CELL], c[CELL], d[CELL], e[CELL], f[CELL];
	double temp = 0, mtemp = 0, pstate = 0, sm = 0, mem = 0, sm_max = 0, mem_max = 0;
	double gen = 0, width = 0, gen_max = 0, width_max = 0;
	bool h_temp = field(fl, F_TEMP, &temp), h_mtemp = field(fl, F_MEM_TEMP, &mtemp);
	bool h_pstate = field(fl, F_PSTATE, &pstate);
	bool h_sm = field(fl, F_SM_CLOCK, &sm), h_mem = field(fl, F_MEM_CLOCK, &mem);
	bool h_sm_max = num_of(g, "max_sm_clock_hz", &sm_max) && sm_max > 0;
	bool h_mem_max = num_of(g, "max_mem_clock_hz", &mem_max) && mem_max > 0;
	bool h_gen = field(fl, F_PCIE_GEN, &gen), h_width = field(fl, F_PCIE_WIDTH, &width);
	bool h_gen_max = num_of(g, "pcie_max_gen", &gen_max) && gen_max > 0;
	bool h_width_max = num_of(g, "pcie_max_width", &width_max) && width_max > 0;

	label(o, "temp");
	if (h_temp)
		paint(o, temp >= 85 ? SGR_RED : temp >= 75 ? SGR_YELLOW : NULL, "%.0f C", temp);
	else
		fputs("-", o->f);
	fprintf(o->f, "   HBM %s", h_mtemp ? fmt_num(a, true, mtemp, 1, "", " C") : "-");
	fprintf(o->f, "   P-state %s\n", h_pstate ? fmt_num(b, true, pstate, 1, "P", "") : "-");

	label(o, "clocks");
	fprintf(o->f, "SM %s / %s MHz", fmt_num(a, h_sm, sm, 1e6, "", ""),
		fmt_num(b, h_sm_max, sm_max, 1e6, "", ""));
	if (h_sm && h_sm_max)
		paint(o, SGR_DIM, " (%.0f%%)", sm / sm_max * 100);
	fprintf(o->f, "   memory %s / %s MHz", fmt_num(c, h_mem, mem, 1e6, "", ""),
		fmt_num(d, h_mem_max, mem_max, 1e6, "", ""));
	if (h_gen || h_width)
		fprintf(o->f, "   PCIe gen %s x%s", fmt_num(e, h_gen, gen, 1, "", ""),
			fmt_num(f, h_width, width, 1, "", ""));
	else
		fputs("   PCIe link -", o->f);
	if (h_gen_max || h_width_max) {
		bool degraded = (h_gen && h_gen_max && gen < gen_max) ||
				(h_width && h_width_max && width < width_max);
		paint(o, degraded ? SGR_YELLOW : SGR_DIM, " (max gen %s x%s)",
		      fmt_num(a, h_gen_max, gen_max, 1, "", ""),
		      fmt_num(b, h_width_max, width_max, 1, "", ""));
	}
	fputc('\n', o->f);
}

static void render_gpm(const struct out *o, json_t *g, json_t *fl)
{
	static const struct {
		enum field_id f;
		const char *name;
		int line;
	} pct[] = {
		{F_GPM_SM, "SM active", 0},     {F_GPM_OCCUPANCY, "occupancy", 0},
		{F_GPM_TENSOR, "tensor", 0},    {F_GPM_DRAM, "DRAM bandwidth", 0},
		{F_GPM_FP64, "FP64", 1},        {F_GPM_FP32, "FP32", 1},
		{F_GPM_FP16, "FP16", 1},        {F_GPM_INTEGER, "integer", 1},
	};
	char a[CELL], b[CELL];
	double v = 0;
	bool any = false;
	for (int f = F_GPM_GRAPHICS; f <= F_GPM_NVLINK_RX; f++)
		any |= field(fl, (enum field_id)f, &v);
	json_t *supported = json_object_get(g, "gpm_supported");
	label(o, "GPM");
	if (!any && json_is_false(supported)) {
		paint(o, SGR_DIM, "not supported on this GPU\n");
		return;
	}
	for (int line = 0; line < 2; line++) {
		if (line)
			fprintf(o->f, LABEL_FMT, "");
		const char *gap = "";
		for (size_t i = 0; i < sizeof pct / sizeof pct[0]; i++) {
			if (pct[i].line != line)
				continue;
			bool have = field(fl, pct[i].f, &v);
			on(o, SGR_DIM);
			fprintf(o->f, "%s%s ", gap, pct[i].name);
			off(o);
			fputs(fmt_pct(a, have, v), o->f);
			gap = "   ";
		}
		fputc('\n', o->f);
	}
	double tx = 0, rx = 0;
	bool h_tx = field(fl, F_GPM_PCIE_TX, &tx), h_rx = field(fl, F_GPM_PCIE_RX, &rx);
	fprintf(o->f, LABEL_FMT, "");
	on(o, SGR_DIM);
	fputs("PCIe tx ", o->f);
	off(o);
	fprintf(o->f, "%s", fmt_rate(a, h_tx, tx));
	on(o, SGR_DIM);
	fputs("  rx ", o->f);
	off(o);
	fprintf(o->f, "%s", fmt_rate(b, h_rx, rx));
	h_tx = field(fl, F_GPM_NVLINK_TX, &tx);
	h_rx = field(fl, F_GPM_NVLINK_RX, &rx);
	on(o, SGR_DIM);
	fputs("   NVLink tx ", o->f);
	off(o);
	fprintf(o->f, "%s", fmt_rate(a, h_tx, tx));
	on(o, SGR_DIM);
	fputs("  rx ", o->f);
	off(o);
	fprintf(o->f, "%s\n", fmt_rate(b, h_rx, rx));
}

static const struct clock_reason_info *reason_by_label(const char *l)
{
	for (int i = 0; l && i < clock_reason_count; i++)
		if (strcmp(clock_reason_table[i].label, l) == 0)
			return &clock_reason_table[i];
	return NULL;
}

static const char *reason_color(uint64_t bit)
{
	if (bit == 0x1) /* idle: the clocks rest because nothing runs */
		return SGR_DIM;
	if (bit & (0x8 | 0x20 | 0x40 | 0x80)) /* slowdowns: thermal, brakes */
		return SGR_RED;
	return SGR_YELLOW;
}

/* Throttle reasons in words: from the daemon's decoded list, or failing
 * that from the raw clock_reasons mask. */
static void render_throttle(const struct out *o, json_t *g, json_t *fl)
{
	char b[128];
	json_t *list = json_object_get(g, "throttle_reasons");
	double mask = 0;
	label(o, "throttle");
	if (json_is_array(list)) {
		if (json_array_size(list) == 0) {
			paint(o, SGR_GREEN, "clocks not held down\n");
			return;
		}
		fputs("clocks held down by: ", o->f);
		size_t i;
		json_t *r;
		json_array_foreach(list, i, r) {
			const char *l = json_string_value(r);
			const struct clock_reason_info *info = reason_by_label(l);
			if (i)
				fputs(", ", o->f);
			if (info)
				paint(o, reason_color(info->bit), "%s", info->description);
			else
				paint(o, SGR_YELLOW, "%s", safe(l, b, sizeof b));
		}
		fputc('\n', o->f);
		return;
	}
	if (!field(fl, F_CLOCK_REASONS, &mask) || mask < 0 || mask >= 18446744073709551616.0) {
		fputs("-\n", o->f);
		return;
	}
	uint64_t bits = (uint64_t)mask;
	if (bits == 0) {
		paint(o, SGR_GREEN, "clocks not held down\n");
		return;
	}
	fputs("clocks held down by: ", o->f);
	bool first = true;
	for (int i = 0; i < clock_reason_count; i++) {
		if (!(bits & clock_reason_table[i].bit))
			continue;
		paint(o, reason_color(clock_reason_table[i].bit), "%s%s", first ? "" : ", ",
		      clock_reason_table[i].description);
		bits &= ~clock_reason_table[i].bit;
		first = false;
	}
	if (bits)
		paint(o, SGR_YELLOW, "%sunknown reasons 0x%llx", first ? "" : ", ",
		      (unsigned long long)bits);
	fputc('\n', o->f);
}

/* ECC, remapped rows, PCIe replays and XID: one line when all is well. */
static void render_errors(const struct out *o, json_t *g, json_t *fl)
{
	char a[CELL], b[CELL], c[CELL], d[CELL];
	double ecc_mode = 0, sbe_vol = 0, dbe_vol = 0, sbe_agg = 0, dbe_agg = 0;
	double r_cor = 0, r_unc = 0, r_pend = 0, r_fail = 0, replay = 0;
	bool h_mode = field(fl, F_ECC_MODE, &ecc_mode);
	bool h_sv = field(fl, F_ECC_SBE_VOL, &sbe_vol), h_dv = field(fl, F_ECC_DBE_VOL, &dbe_vol);
	bool h_sa = field(fl, F_ECC_SBE_AGG, &sbe_agg), h_da = field(fl, F_ECC_DBE_AGG, &dbe_agg);
	bool h_rc = field(fl, F_REMAP_COR, &r_cor), h_ru = field(fl, F_REMAP_UNC, &r_unc);
	bool h_rp = field(fl, F_REMAP_PENDING, &r_pend), h_rf = field(fl, F_REMAP_FAILED, &r_fail);
	bool h_replay = field(fl, F_PCIE_REPLAY, &replay);
	json_t *xid = json_object_get(g, "xid");
	double xid_other = 0, ev_sb = 0, ev_db = 0;
	num_of(g, "xid_other", &xid_other);
	json_t *ev = json_object_get(g, "ecc_events");
	num_of(ev, "single_bit", &ev_sb);
	num_of(ev, "double_bit", &ev_db);
	bool has_xid = (json_is_array(xid) && json_array_size(xid) > 0) || xid_other > 0;

	bool bad = (h_dv && dbe_vol > 0) || (h_da && dbe_agg > 0) || (h_ru && r_unc > 0) ||
		   (h_rp && r_pend > 0) || (h_rf && r_fail > 0) || has_xid || ev_db > 0;
	bool warn = (h_sv && sbe_vol > 0) || (h_sa && sbe_agg > 0) || (h_rc && r_cor > 0) ||
		    (h_replay && replay > 0) || ev_sb > 0;
	const char *mode = !h_mode ? "ECC -" : ecc_mode > 0 ? "ECC on" : "ECC off";

	bool any_read = h_mode || h_sv || h_dv || h_sa || h_da || h_rc || h_ru || h_rp || h_rf ||
			h_replay;
	label(o, "errors");
	if (!bad && !warn) {
		if (any_read) {
			paint(o, SGR_GREEN, "none");
			paint(o, SGR_DIM, " (%s, no XID)\n", mode);
		} else {
			/* Nothing read is not the same as nothing wrong. */
			fprintf(o->f, "- (ECC counters not read; %s)\n",
				json_is_array(xid) ? "no XID events" : "XID -");
		}
		return;
	}
	on(o, bad ? SGR_RED : SGR_YELLOW);
	fprintf(o->f, "%s: corrected %s, uncorrected %s (lifetime %s / %s)", mode,
		fmt_num(a, h_sv, sbe_vol, 1, "", ""), fmt_num(b, h_dv, dbe_vol, 1, "", ""),
		fmt_num(c, h_sa, sbe_agg, 1, "", ""), fmt_num(d, h_da, dbe_agg, 1, "", ""));
	if (ev_sb > 0 || ev_db > 0)
		fprintf(o->f, "; events %.0f single-bit, %.0f double-bit", ev_sb, ev_db);
	fputc('\n', o->f);
	fprintf(o->f, LABEL_FMT, "");
	fprintf(o->f, "remapped rows %s corrected, %s uncorrected",
		fmt_num(a, h_rc, r_cor, 1, "", ""), fmt_num(b, h_ru, r_unc, 1, "", ""));
	if (h_rp && r_pend > 0)
		fputs(", remap pending (reset the GPU)", o->f);
	if (h_rf && r_fail > 0)
		fputs(", REMAP FAILED (the GPU needs service)", o->f);
	fprintf(o->f, "; PCIe replays %s", fmt_num(c, h_replay, replay, 1, "", ""));
	fputc('\n', o->f);
	fprintf(o->f, LABEL_FMT, "");
	if (!has_xid) {
		fputs("no XID events", o->f);
	} else {
		fputs("XID", o->f);
		size_t i;
		json_t *x;
		json_array_foreach(xid, i, x) {
			double code = 0, count = 0;
			bool h_code = num_of(x, "code", &code);
			num_of(x, "count", &count);
			fprintf(o->f, "%s %s x%.0f", i ? "," : "", fmt_num(a, h_code, code, 1, "", ""),
				count);
		}
		if (xid_other > 0)
			fprintf(o->f, " (+%.0f other)", xid_other);
	}
	off(o);
	fputc('\n', o->f);
}

/* The health score (docs/internals/health.md): the score, DRAIN with
 * its reason when it says so, then one line per reason that saw
 * something: the points it took and its evidence. */
static void render_health_score(const struct out *o, json_t *g)
{
	json_t *h = json_object_get(g, "health_score");
	label(o, "health");
	double score = 0, window = 0;
	if (!json_is_object(h) || !num_of(h, "score", &score)) {
		fputs("- (not scored yet)\n", o->f);
		return;
	}
	num_of(h, "window_s", &window);
	bool drain = json_is_true(json_object_get(h, "drain"));
	char rb[64];
	const char *sgr = drain ? SGR_RED : score < 60 ? SGR_YELLOW : score < 100 ? NULL : SGR_GREEN;
	paint(o, sgr, "%.0f/100", score);
	if (drain)
		paint(o, SGR_RED, "  DRAIN: %s", safe(str_of(h, "reason"), rb, sizeof rb));
	paint(o, SGR_DIM, "  (history %.0f s)\n", window);
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(h, "reasons"), i, r) {
		double pen = 0;
		num_of(r, "penalty", &pen);
		char eb[256];
		fprintf(o->f, LABEL_FMT, "");
		paint(o, json_is_true(json_object_get(r, "drain")) ? SGR_RED : NULL, "-%-3.0f %s: %s\n",
		      pen, safe(str_of(r, "reason"), rb, sizeof rb),
		      safe(str_of(r, "evidence"), eb, sizeof eb));
	}
}

static void render_processes(const struct out *o, json_t *g, json_t *fl)
{
	char a[CELL], b[CELL], c[CELL], d[CELL], comm[32];
	json_t *procs = json_object_get(g, "processes");
	double count = 0, dropped = 0;
	bool h_count = field(fl, F_PROC_COUNT, &count);
	num_of(g, "processes_dropped", &dropped);
	label(o, "processes");
	if (!json_is_array(procs) || json_array_size(procs) == 0) {
		if (h_count && count > 0)
			fprintf(o->f, "%.0f running (%s)\n", count,
				is_replay(g) ? "the recording has no process details"
					     : "details not read");
		else if (h_count || json_is_array(procs))
			paint(o, SGR_DIM, "none\n");
		else
			fputs("-\n", o->f);
		return;
	}
	on(o, SGR_DIM);
	fprintf(o->f, "%-8s %-16s %11s %5s %5s  %s\n", "PID", "COMMAND", "GPU MEMORY", "SM", "MEM",
		"OWNER");
	off(o);
	size_t i;
	json_t *p;
	json_array_foreach(procs, i, p) {
		double pid = 0, used = 0, sm = 0, mem = 0;
		bool h_pid = num_of(p, "pid", &pid), h_used = num_of(p, "used_bytes", &used);
		bool h_sm = num_of(p, "sm_ratio", &sm), h_mem = num_of(p, "mem_ratio", &mem);
		/* The owner: pod, job or container, and the user. */
		char owner[224] = "-", sum[160], user[48];
		json_t *ow = json_object_get(p, "owner");
		const char *s1 = json_is_object(ow) ? str_of(ow, "summary") : NULL;
		const char *s2 = json_is_object(ow) ? str_of(ow, "user") : NULL;
		safe(s1, sum, sizeof sum);
		safe(s2, user, sizeof user);
		if (s1 && s1[0] && s2 && s2[0])
			snprintf(owner, sizeof owner, "%s (%s)", sum, user);
		else if (s1 && s1[0])
			snprintf(owner, sizeof owner, "%s", sum);
		else if (s2 && s2[0])
			snprintf(owner, sizeof owner, "%s", user);
		fprintf(o->f, LABEL_FMT "%-8s %-16s %11s %5s %5s  %s\n", "",
			h_pid ? fmt_num(a, true, pid, 1, "", "") : "-",
			safe(str_of(p, "comm"), comm, sizeof comm), fmt_bytes(b, h_used, used),
			fmt_pct(c, h_sm, sm), fmt_pct(d, h_mem, mem), owner);
	}
	if (dropped > 0)
		paint(o, SGR_YELLOW, LABEL_FMT "+%.0f more not shown\n", "", dropped);
}

/* Who holds the GPU by the kubelet's pod-resources API, and whether that
 * pod runs anything on it; then its MIG instances. Nothing when neither. */
static void render_allocations_mig(const struct out *o, json_t *g)
{
	char a[CELL], b[CELL], c[CELL], s1[96], s2[96], s3[96];
	size_t i;
	json_t *al;
	json_array_foreach(json_object_get(g, "allocations"), i, al) {
		json_t *idle = json_object_get(al, "idle");
		label(o, i ? "" : "allocated");
		const char *job = str_of(al, "job");
		if (job && job[0])
			fprintf(o->f, "Slurm job %s (%s)", safe(job, s1, sizeof s1),
				safe(str_of(al, "job_user"), s2, sizeof s2));
		else
			fprintf(o->f, "%s/%s/%s", safe(str_of(al, "namespace"), s1, sizeof s1),
				safe(str_of(al, "pod"), s2, sizeof s2),
				safe(str_of(al, "container"), s3, sizeof s3));
		if (json_is_true(idle))
			paint(o, SGR_YELLOW, " (idle: none of its processes runs here)");
		fputc('\n', o->f);
	}
	json_t *m;
	json_array_foreach(json_object_get(g, "mig"), i, m) {
		double gi = 0, ci = 0, used = 0, total = 0, sm = 0;
		num_of(m, "gpu_instance", &gi);
		num_of(m, "compute_instance", &ci);
		bool h_used = num_of(m, "memory_used_bytes", &used);
		bool h_total = num_of(m, "memory_total_bytes", &total);
		bool h_sm = num_of(m, "sm_active_ratio", &sm);
		label(o, i ? "" : "mig");
		fprintf(o->f, "GI %-2.0f CI %-2.0f %-9s mem %s/%s  SM %s\n", gi, ci,
			safe(str_of(m, "profile"), s1, sizeof s1), fmt_bytes(a, h_used, used),
			fmt_bytes(b, h_total, total), fmt_pct(c, h_sm, sm));
	}
}

/* The GPU's activity split across its processes and their owners
 * (status JSON's tenants, workloads, bottleneck_owner): each one's part
 * of the GPU's SM, tensor and DRAM activity, its GPU time share, how the
 * part was obtained and what it is bound by. Nothing when there is none. */
static void render_tenants(const struct out *o, json_t *g)
{
	char a[CELL], b[CELL], c[CELL], d[CELL], comm[32], own[160], who[64];
	json_t *rows = json_object_get(g, "tenants");
	if (!json_is_array(rows) || json_array_size(rows) == 0)
		return;
	label(o, "activity");
	on(o, SGR_DIM);
	fprintf(o->f, "%-8s %-16s %-7s %5s %5s %6s %5s  %-26s %s\n", "PID", "COMMAND", "SOURCE",
		"BUSY", "SM", "TENSOR", "DRAM", "BOUND", "OWNER");
	off(o);
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r) {
		double pid = 0, busy = 0, sm = 0, te = 0, dr = 0;
		num_of(r, "pid", &pid);
		bool h_busy = num_of(r, "busy", &busy), h_sm = num_of(r, "sm_active", &sm);
		bool h_te = num_of(r, "tensor_active", &te), h_dr = num_of(r, "dram_bandwidth", &dr);
		char bound[96];
		const char *bn = str_of(r, "bound"), *bd = str_of(r, "bound_detail");
		snprintf(bound, sizeof bound, "%s%s%s%s", bn ? bn : "-", bd && bd[0] ? " (" : "",
			 bd && bd[0] ? bd : "", bd && bd[0] ? ")" : "");
		char pidtext[24];
		if (pid > 0)
			snprintf(pidtext, sizeof pidtext, "%.0f", pid);
		else
			snprintf(pidtext, sizeof pidtext, "other");
		fprintf(o->f, LABEL_FMT "%-8s %-16s %-7s %5s %5s %6s %5s  %-26s %s\n", "", pidtext,
			safe(str_of(r, "comm"), comm, sizeof comm), safe(str_of(r, "source"), who, sizeof who),
			fmt_pct(a, h_busy, busy), fmt_pct(b, h_sm, sm), fmt_pct(c, h_te, te),
			fmt_pct(d, h_dr, dr), bound, safe(str_of(r, "owner"), own, sizeof own));
	}
	json_t *wl = json_object_get(g, "workloads");
	const char *dev = str_of(g, "device_bound");
	json_t *bo = json_object_get(g, "bottleneck_owner");
	const char *act = json_is_object(bo) ? str_of(bo, "activity") : NULL;
	json_array_foreach(wl, i, r) {
		double busy = 0, sm = 0, te = 0, dr = 0, n = 0, bs = 0;
		bool h_busy = num_of(r, "busy", &busy), h_sm = num_of(r, "sm_active", &sm);
		bool h_te = num_of(r, "tensor_active", &te), h_dr = num_of(r, "dram_bandwidth", &dr);
		num_of(r, "processes", &n);
		/* Held against the device: its share of what bounds the GPU. */
		char vs[96] = "";
		if (num_of(r, "bottleneck_share", &bs) && dev)
			snprintf(vs, sizeof vs, "; GPU %s, %.0f%% of its %s activity", dev, 100 * bs,
				 act ? act : "sm");
		const char *sum = str_of(r, "summary");
		label(o, i ? "" : "by owner");
		fprintf(o->f, "%-25s %-7s %5s %5s %6s %5s  %s%s%s, %.0f process%s%s\n",
			sum && sum[0] ? safe(sum, own, sizeof own) : "(no owner known)",
			safe(str_of(r, "source"), who, sizeof who), fmt_pct(a, h_busy, busy),
			fmt_pct(b, h_sm, sm), fmt_pct(c, h_te, te), fmt_pct(d, h_dr, dr),
			str_of(r, "bound") ? str_of(r, "bound") : "-",
			str_of(r, "bound_detail") && str_of(r, "bound_detail")[0] ? " on " : "",
			str_of(r, "bound_detail") ? str_of(r, "bound_detail") : "", n,
			n == 1 ? "" : "es", vs);
	}
	double share = 0, pid = 0;
	if (json_is_object(bo) && num_of(bo, "share", &share) && num_of(bo, "pid", &pid)) {
		label(o, "bottleneck");
		fprintf(o->f, "pid %.0f (%s) holds %.0f%% of the %s activity that bounds the GPU (%s)\n",
			pid, safe(str_of(bo, "comm"), comm, sizeof comm), 100 * share,
			safe(str_of(bo, "activity"), who, sizeof who), dev ? dev : "-");
	}
}

/* Who holds the GPU (an allocation, or a process of theirs) and whether
 * each has been idle by the split (status JSON's holders). */
static void render_holders(const struct out *o, json_t *g)
{
	char a[CELL], b[CELL], s1[96], s2[96];
	size_t i;
	json_t *h;
	json_array_foreach(json_object_get(g, "holders"), i, h) {
		double sm = 0, low = 0, n = 0;
		bool h_sm = num_of(h, "sm_active", &sm);
		bool h_low = num_of(h, "idle_for_s", &low);
		num_of(h, "processes", &n);
		const char *job = str_of(h, "job");
		char who[200];
		if (job && job[0])
			snprintf(who, sizeof who, "job %s", safe(job, s1, sizeof s1));
		else
			snprintf(who, sizeof who, "%s/%s", safe(str_of(h, "namespace"), s1, sizeof s1),
				 safe(str_of(h, "pod"), s2, sizeof s2));
		label(o, i ? "" : "holders");
		b[0] = '\0';
		if (h_low && low > 0)
			snprintf(b, sizeof b, "  under the idle line for %.0fs", low);
		fprintf(o->f, "%-32s %-9s %2.0f proc  SM %5s%s", who,
			json_is_true(json_object_get(h, "allocated")) ? "allocated" : "running", n,
			fmt_pct(a, h_sm, sm), b);
		if (json_is_true(json_object_get(h, "idle")))
			paint(o, SGR_YELLOW, "  (allocated but idle)");
		fputc('\n', o->f);
	}
}

static void render_gpu(const struct out *o, json_t *g)
{
	json_t *fl = json_object_get(g, "fields"); /* NULL: every value prints "-" */
	render_title(o, g);
	render_load(o, g, fl);
	render_thermal_clocks(o, g, fl);
	render_gpm(o, g, fl);
	render_throttle(o, g, fl);
	render_errors(o, g, fl);
	render_health_score(o, g);
	render_processes(o, g, fl);
	render_tenants(o, g);
	render_holders(o, g);
	render_allocations_mig(o, g);
}

/* ---- the whole screen ------------------------------------------------------ */

static void render_header(const struct out *o, json_t *data, json_t *gpus)
{
	char b1[512], b2[64], b3[64], age[CELL];
	const char *mode = str_of(data, "mode");
	const char *detail = str_of(data, "detail");
	double speed = 0, start = 0;
	bool h_speed = num_of(data, "replay_speed", &speed);
	bool replay = mode && strcmp(mode, "replay") == 0;

	if (replay) {
		char sp[CELL] = "-";
		if (h_speed)
			snprintf(sp, sizeof sp, "%gx", speed);
		const char *spd = sp;
		if (o->color) {
			paint(o, SGR_BANNER, "  REPLAY  ");
			paint(o, SGR_BOLD_YELLOW, " recorded data from %s at speed %s: not live GPUs",
			      safe(detail, b1, sizeof b1), spd);
			fputc('\n', o->f);
		} else {
			fprintf(o->f, "*** REPLAY of %s at speed %s: recorded data, not live GPUs ***\n",
				safe(detail, b1, sizeof b1), spd);
		}
	}

	/* Driver and CUDA from the first GPU that knows them. */
	const char *driver = NULL, *cuda = NULL;
	size_t i;
	json_t *g;
	json_array_foreach(gpus, i, g) {
		const char *d = str_of(g, "driver_version"), *c = str_of(g, "cuda_version");
		if (!driver && d && d[0])
			driver = d;
		if (!cuda && c && c[0])
			cuda = c;
	}
	size_t n = json_array_size(gpus);
	paint(o, SGR_BOLD, "gpulse status");
	fputs("  mode ", o->f);
	if (replay)
		paint(o, SGR_BOLD_YELLOW, "REPLAY");
	else if (mode && strcmp(mode, "nvml") == 0)
		paint(o, SGR_GREEN, "nvml");
	else
		paint(o, SGR_YELLOW, "%s", safe(mode, b1, sizeof b1));
	fprintf(o->f, "  |  %zu GPU%s  |  driver %s  |  CUDA %s", n, n == 1 ? "" : "s",
		safe(driver, b2, sizeof b2), safe(cuda, b3, sizeof b3));
	if (num_of(data, "start_time", &start) && start > 0) {
		double up = (double)time(NULL) - start;
		if (up >= 0 && up < 100.0 * 365 * 86400) {
			fmt_age(age, up);
			fprintf(o->f, "  |  gpulsed up %s", age);
		}
	}
	fputc('\n', o->f);
	if (!replay && detail && detail[0] && !(mode && strcmp(mode, "nvml") == 0))
		paint(o, SGR_YELLOW, "%s\n", safe(detail, b1, sizeof b1));
}

/* See cmd_status.h. One question to /api/v1/gpus, whatever the caller. */
bool status_has_gpu(const struct client_opts *co, int gpu, char *have, size_t havelen)
{
	json_t *root = NULL;
	char err[512];
	have[0] = '\0';
	if (client_get_json(co, "/api/v1/gpus", &root, NULL, err, sizeof err) != GPULSE_OK)
		return true;
	json_t *gpus = json_object_get(json_object_get(root, "data"), "gpus");
	bool found = !json_is_array(gpus);
	json_t *g;
	size_t i;
	json_array_foreach(gpus, i, g) {
		json_int_t idx = json_integer_value(json_object_get(g, "gpu"));
		size_t n = strlen(have);
		snprintf(have + n, havelen - n, "%s%lld", n ? ", " : "", (long long)idx);
		if (idx == gpu)
			found = true;
	}
	json_decref(root);
	return found;
}

int status_render(json_t *root, FILE *out, bool color)
{
	struct out o = {.f = out, .color = color};
	json_t *data = json_object_get(root, "data");
	if (!json_is_object(data))
		data = root;
	json_t *gpus = json_object_get(data, "gpus");
	if (!json_is_object(data) || !json_is_array(gpus))
		return GPULSE_EPARSE;
	render_header(&o, data, gpus);
	if (json_array_size(gpus) == 0) {
		paint(&o, SGR_YELLOW, "no GPUs to show\n");
		return 0;
	}
	size_t i;
	json_t *g;
	json_array_foreach(gpus, i, g) {
		fputc('\n', out);
		if (json_is_object(g))
			render_gpu(&o, g);
	}
	return ferror(out) ? GPULSE_EIO : 0;
}

/* ---- the command ------------------------------------------------------------ */

static void status_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse status [--json] [--url URL] [--token-file FILE] [--no-color]\n"
		"\n"
		"One screen for every GPU gpulsed watches: health, utilization and memory,\n"
		"power, temperatures, clocks, GPM counters, why clocks are held down,\n"
		"errors and processes. Values gpulsed could not read show as \"-\".\n"
		"\n"
		"  --json             print gpulsed's /api/v1/gpus answer as JSON\n"
		"  --url URL          gpulsed to ask (env GPULSE_URL; default %s)\n"
		"  --token-file FILE  bearer token file (env GPULSE_TOKEN_FILE)\n"
		"  --no-color         no colour (also when NO_COLOR is set or not a terminal)\n",
		CLIENT_DEFAULT_URL);
}

int cmd_status(int argc, char **argv)
{
	enum { OPT_NO_COLOR = 256, OPT_URL, OPT_TOKEN };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"no-color", no_argument, NULL, OPT_NO_COLOR},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_opts co = {0};
	bool json = false, no_color = false;
	int ch;
	while ((ch = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': json = true; break;
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case OPT_NO_COLOR: no_color = true; break;
		case 'h': status_usage(stdout); return CLI_OK;
		default: status_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpulse status: unexpected argument \"%s\"\n", argv[optind]);
		status_usage(stderr);
		return CLI_USAGE;
	}

	char err[1024];
	json_t *root = NULL;
	struct buf raw;
	buf_init(&raw, CLIENT_MAX_RESPONSE);
	int rc = client_get_json(&co, "/api/v1/gpus", &root, json ? &raw : NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse: %s\n", err);
		buf_free(&raw);
		return client_exit_code(rc);
	}
	int exit_code = CLI_OK;
	if (json) {
		client_print_json(stdout, raw.data, raw.len);
	} else {
		const char *no_color_env = getenv("NO_COLOR");
		const char *term = getenv("TERM");
		bool color = !no_color && isatty(STDOUT_FILENO) &&
			     !(no_color_env && no_color_env[0]) && !(term && strcmp(term, "dumb") == 0);
		if (status_render(root, stdout, color) == GPULSE_EPARSE) {
			fprintf(stderr, "gpulse: gpulsed at %s sent /api/v1/gpus in an unexpected shape "
				"(is it the same version as this gpulse?)\n", client_base_url(&co));
			exit_code = CLI_FAIL;
		}
	}
	json_decref(root);
	buf_free(&raw);
	return exit_code;
}
