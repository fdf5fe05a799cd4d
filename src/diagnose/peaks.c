/* A GPU's peaks from its identity; see peaks.h. The model table holds
 * vendor datasheet figures (theoretical DRAM bandwidth, SM count, memory
 * size, default board power). The DRAM figure only turns ratios into
 * bytes per second for the headroom report: the classifier compares the
 * GPM DRAM counter, which the driver already gives as a fraction of the
 * card's own peak, so an unknown model weakens no class. */
#include "diagnose/peaks.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define TB (1e12)
#define GB (1e9)

/* Ordered most specific first: "A100" must be tried before "A10", "L40S"
 * before "L40" before "L4", "H100 PCIe" before "H100", "GH200" and
 * "H200 NVL" before "H200". Patterns are
 * matched as substrings of the NVML/nvidia-smi name, case-insensitive. */
static const struct model {
	const char *pattern;
	int sm_count;
	double dram_bytes_per_s;
	double mem_bytes;
	double tdp_w;              /* board power at default settings */
} models[] = {
	{"GH200 144G", 132, 4.9 * TB, 144 * GB, 1000},
	{"GH200", 132, 4.0 * TB, 96 * GB, 1000},
	{"H200 NVL", 132, 4.8 * TB, 141 * GB, 600},
	{"H200", 132, 4.8 * TB, 141 * GB, 700},      /* SXM */
	{"H100 NVL", 132, 3.9 * TB, 94 * GB, 400},
	{"H100 PCIe", 114, 2.0 * TB, 80 * GB, 350},
	{"H100", 132, 3.35 * TB, 80 * GB, 700},      /* SXM5, "H100 80GB HBM3" */
	{"H800", 132, 3.35 * TB, 80 * GB, 700},
	{"B200", 148, 8.0 * TB, 180 * GB, 1000},
	{"A100-SXM4-80GB", 108, 2.039 * TB, 80 * GB, 400},
	{"A100 80GB PCIe", 108, 1.935 * TB, 80 * GB, 300},
	{"A100-PCIE-80GB", 108, 1.935 * TB, 80 * GB, 300},
	{"A100-SXM4-40GB", 108, 1.555 * TB, 40 * GB, 400},
	{"A100-PCIE-40GB", 108, 1.555 * TB, 40 * GB, 250},
	{"A100", 108, 1.555 * TB, 40 * GB, 250},     /* unnamed variant: the 40 GB PCIe figures */
	{"A800", 108, 2.039 * TB, 80 * GB, 400},
	{"A30", 56, 0.933 * TB, 24 * GB, 165},
	{"A10G", 80, 0.6 * TB, 24 * GB, 300},
	{"A10", 72, 0.6 * TB, 24 * GB, 150},
	{"L40S", 142, 0.864 * TB, 48 * GB, 350},
	{"L40", 142, 0.864 * TB, 48 * GB, 300},
	{"L4", 58, 0.3 * TB, 24 * GB, 72},
	{"V100S", 80, 1.134 * TB, 32 * GB, 250},
	{"V100", 80, 0.9 * TB, 16 * GB, 300},
	{"T4", 40, 0.32 * TB, 16 * GB, 70},
};

static bool contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return true;
	return false;
}

bool peaks_model_lookup(const char *name, int *sm_count, double *dram_bytes_per_s,
			double *mem_total_bytes, double *tdp_w)
{
	if (!name || !name[0])
		return false;
	for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
		if (!contains_nocase(name, models[i].pattern))
			continue;
		if (sm_count)
			*sm_count = models[i].sm_count;
		if (dram_bytes_per_s)
			*dram_bytes_per_s = models[i].dram_bytes_per_s;
		if (mem_total_bytes)
			*mem_total_bytes = models[i].mem_bytes;
		if (tdp_w)
			*tdp_w = models[i].tdp_w;
		return true;
	}
	return false;
}

double peaks_pcie_bytes_per_s(unsigned gen, unsigned width)
{
	/* Line rate per lane in transfers/s and the line code's payload
	 * share. Gen 6 sends 256-byte FLITs carrying 242 bytes of TLP data
	 * (the rest is CRC and FEC). */
	static const struct {
		double gt_per_s;
		double efficiency;
	} gens[] = {
		{0, 0},
		{2.5e9, 8.0 / 10.0},
		{5e9, 8.0 / 10.0},
		{8e9, 128.0 / 130.0},
		{16e9, 128.0 / 130.0},
		{32e9, 128.0 / 130.0},
		{64e9, 242.0 / 256.0},
	};
	if (gen < 1 || gen >= sizeof gens / sizeof gens[0] || width < 1 || width > 32)
		return 0;
	return gens[gen].gt_per_s * gens[gen].efficiency / 8.0 * width;
}

void peaks_init(struct gpu_peaks *p)
{
	memset(p, 0, sizeof *p);
	p->sm_source = p->clock_source = p->dram_source = p->pcie_source = p->power_source =
		p->mem_source = "unknown";
}

void peaks_derive(struct gpu_peaks *p)
{
	int sm = 0;
	double dram = 0, mem = 0, tdp = 0;
	bool known = peaks_model_lookup(p->model, &sm, &dram, &mem, &tdp);
	if (known && p->sm_count <= 0) {
		p->sm_count = sm;
		p->sm_source = "model table";
	}
	if (known && !(p->dram_bytes_per_s > 0)) {
		p->dram_bytes_per_s = dram;
		p->dram_source = "model table";
	}
	if (known && !(p->mem_total_bytes > 0)) {
		p->mem_total_bytes = mem;
		p->mem_source = "model table";
	}
	/* The default board power stands in for a limit nobody reported;
	 * an administrator may have set a lower one, which only the device
	 * can say. */
	if (known && !(p->power_limit_w > 0)) {
		p->power_limit_w = tdp;
		p->power_source = "model table (default limit)";
	}
	if (!(p->pcie_bytes_per_s > 0)) {
		p->pcie_bytes_per_s = peaks_pcie_bytes_per_s(p->pcie_gen, p->pcie_width);
		if (p->pcie_bytes_per_s > 0)
			p->pcie_source = "link";
	}
}
