/* The device file beside a recording: "PREFIX-device.csv", the static
 * facts of the recorded card as `nvidia-smi --query-gpu=name,
 * driver_version,vbios_version,pcie.link.gen.max,pcie.link.width.max,
 * power.limit,clocks.max.sm,clocks.max.memory --format=csv` prints them
 * (docs/RECORDING.md): a header line, then one line per GPU
 * in index order. Cells may carry units ("700.00 W", "1980 MHz") and
 * unreadable ones say "[N/A]"; columns are found by name, in any order,
 * and unknown ones are ignored. Replay shows the recorded model from it;
 * diagnosis takes the card's peaks from it. */
#ifndef GPULSE_DEVICE_FILE_H
#define GPULSE_DEVICE_FILE_H

#include <stddef.h>

#define DEVICE_FILE_MAX_GPUS 64

/* One card's facts. Strings are empty and numbers 0 when the file does
 * not say (or says "[N/A]"). Strings hold printable ASCII only. */
struct device_facts {
	char name[96];
	char driver_version[32];
	char vbios_version[32];
	unsigned pcie_max_gen;
	unsigned pcie_max_width;
	double power_limit_w;
	double max_sm_clock_hz;
	double max_mem_clock_hz;
	double mem_total_bytes;     /* memory.total, when the file has it */
};

struct device_file {
	int ngpus;                  /* data lines read, at most DEVICE_FILE_MAX_GPUS */
	struct device_facts gpu[DEVICE_FILE_MAX_GPUS];
};

/* The device file's path for a recording: the recording's directory, then
 * its file name up to the first '-' followed by "-device.csv"
 * ("dir/h200-phases-10hz.csv" -> "dir/h200-device.csv"). GPULSE_ELIMIT
 * when it does not fit in `outlen`. */
int device_file_path(const char *recording_path, char *out, size_t outlen);

/* Read a device file. 0 on success (ngpus may be 0 for a header-only
 * file); GPULSE_ENOENT when there is no such file; GPULSE_EIO when it
 * cannot be read; GPULSE_EPARSE with "FILE:LINE: problem" in `err` when a
 * line is too long or has more cells than the header. `out` is zeroed
 * first in every case. */
int device_file_load(const char *path, struct device_file *out, char *err, size_t errlen);

#endif
