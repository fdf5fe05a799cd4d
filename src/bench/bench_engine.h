/* The benchmark engine: measures one GPU through the CUDA driver API and
 * cuBLASLt (cuda_lib.h) while a thread watches it through NVML
 * (docs/internals/bench.md). It only reads the GPU's settings: it never
 * changes clocks, power limits, persistence, compute mode or MIG. */
#ifndef GPULSE_BENCH_ENGINE_H
#define GPULSE_BENCH_ENGINE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "bench/bench_result.h"

struct bench_opts {
	int gpu;                    /* NVML index */
	bool full;                  /* --full: longer, steadier */
	bool allow_busy;            /* run on a GPU in use (marked not a baseline) */
	const char *nvml_path;      /* NULL: $GPULSE_NVML_LIBRARY, libnvidia-ml.so.1 */
	const char *cuda_path;      /* NULL: $GPULSE_CUDA_LIBRARY, libcuda.so.1 */
	const char *cublaslt_path;  /* NULL: $GPULSE_CUBLASLT, libcublasLt.so.13/12/11 */
	const char *only;           /* comma-separated figure names; NULL: all */
	volatile sig_atomic_t *stop;/* non-zero: stop at the next run (SIGINT, SIGTERM) */
	const char *host;           /* recorded as the result's host; NULL: gethostname */
};

/* Run the benchmarks into *r. Returns 0 with *r filled: possibly
 * interrupted (r->interrupted) or marked not a baseline (r->baseline
 * false, the reasons in r->notes), figures that could not run listed in
 * r->skip (cuBLASLt missing, a precision the GPU lacks). Nothing is run
 * and, with a sentence in err:
 *   GPULSE_ENOLIB / GPULSE_ENODRIVER  no NVIDIA driver (NVML or libcuda)
 *   GPULSE_ENOENT   no GPU of that index, or CUDA does not see it
 *   GPULSE_ENOTSUP  the GPU is in MIG mode
 *   GPULSE_EBUSY    the GPU is in use (a process, or utilization) and
 *                   allow_busy is off
 *   GPULSE_ENOMEM   not enough free device memory
 *   GPULSE_EVENDOR  a CUDA call failed (named) */
int bench_run(const struct bench_opts *o, struct bench_result *r, char *err, size_t errlen);

#endif
