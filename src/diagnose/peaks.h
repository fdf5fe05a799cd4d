/* A GPU's own peaks, the yardstick the diagnosis measures each window
 * against: DRAM bandwidth, PCIe bandwidth, SM count and clocks, power
 * limit, memory. They come from the card's identity (model name, PCIe
 * generation and width, limits): what the caller knows is filled in, and
 * peaks_derive fills the rest from documented hardware facts (a table of
 * known models, the PCIe line rates) or leaves it unknown. Nothing here is
 * read from a file or a device: callers pass plain values. */
#ifndef GPULSE_PEAKS_H
#define GPULSE_PEAKS_H

#include <stdbool.h>

/* Every number is 0 when unknown; each *_source says where a fact came
 * from: "device" (the caller's identity), "model table", "link", or
 * "unknown". Sources are static strings. */
struct gpu_peaks {
	char model[96];              /* "NVIDIA H200"; "" when unknown */
	int sm_count;
	double sm_clock_max_hz;
	double mem_clock_max_hz;
	double dram_bytes_per_s;     /* theoretical peak DRAM bandwidth */
	unsigned pcie_gen;           /* link generation the card supports */
	unsigned pcie_width;         /* lanes */
	double pcie_bytes_per_s;     /* per direction, after line coding */
	double power_limit_w;
	double mem_total_bytes;
	const char *sm_source;
	const char *clock_source;
	const char *dram_source;
	const char *pcie_source;
	const char *power_source;
	const char *mem_source;
};

/* All facts unknown. */
void peaks_init(struct gpu_peaks *p);

/* Fill what the caller left unknown from what it gave: PCIe bandwidth from
 * generation and width; SM count, DRAM bandwidth, memory size and (as a
 * default limit) board power from the model table when the model is in
 * it. Facts the caller set are kept. */
void peaks_derive(struct gpu_peaks *p);

/* Usable PCIe bandwidth per direction in bytes/s of a link of `gen`
 * (1-6) and `width` lanes: the line rate times the line code's efficiency
 * (8b/10b for gen 1-2, 128b/130b for gen 3-5, FLIT 242/256 for gen 6).
 * 0 when either is unknown or out of range. Gen5 x16: 63.0e9. */
double peaks_pcie_bytes_per_s(unsigned gen, unsigned width);

/* A known model: the first table entry whose pattern the name contains
 * (case-insensitive), or false. Outputs may be NULL. */
bool peaks_model_lookup(const char *name, int *sm_count, double *dram_bytes_per_s,
			double *mem_total_bytes, double *tdp_w);

#endif
