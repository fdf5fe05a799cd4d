/* Silent-corruption screening (`gpulse bench --screen`): workloads whose
 * results are exact by construction, run on one GPU, each reduced to
 * digests per tile, and checked four ways: against a CPU computing a
 * subset the same way, across repetitions within the run, against the
 * card's own earlier digests (same driver and kernels), and against other
 * cards of the same model. A mismatch is reported with its figures: which
 * test, which tile, how many elements, by how much. docs/internals/bench.md,
 * "Screening". */
#ifndef GPULSE_SCREEN_H
#define GPULSE_SCREEN_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* X(id, name) */
#define SCREEN_TESTS(X)                  \
	X(GEMM_U32, "gemm_u32")          \
	X(GEMM_F32, "gemm_f32")          \
	X(GEMM_F64, "gemm_f64")          \
	X(GEMM_BF16, "gemm_bf16")        \
	X(GEMM_F16, "gemm_f16")          \
	X(GEMM_TF32, "gemm_tf32")        \
	X(SUM, "sum_u64")                \
	X(MEMORY, "memory")

enum screen_test_id {
#define SCREEN_TEST_ENUM(id, name) SCREEN_##id,
	SCREEN_TESTS(SCREEN_TEST_ENUM)
#undef SCREEN_TEST_ENUM
	SCREEN_TEST_COUNT
};

#define SCREEN_GEMM_TILE 32            /* GEMM tiles are 32 x 32 elements */
#define SCREEN_TEST_HOOK_ENV "GPULSE_SCREEN_CORRUPT"
#define SCREEN_TEST_SIZES_ENV "GPULSE_SCREEN_TEST_SIZES"

struct screen_opts {
	int gpu;                     /* NVML index */
	bool full;                   /* ≤ 10 min; else the quick variant, ≤ 60 s */
	const char *nvml_path;       /* NULL: $GPULSE_NVML_LIBRARY, libnvidia-ml.so.1 */
	const char *cuda_path;       /* NULL: $GPULSE_CUDA_LIBRARY, libcuda.so.1 */
	volatile sig_atomic_t *stop; /* non-zero: stop between steps */
};

struct screen_test {
	char name[16];
	uint64_t size;               /* GEMM order n; words for sum and memory */
	uint64_t tile;               /* elements (GEMM: edge) or words per tile */
	size_t ntiles;
	uint64_t digest;             /* FNV-1a 64 over the tile digests; 0 for memory */
	uint64_t *tile_digest;       /* ntiles (NULL for memory); owned */
	int reps;                    /* repetitions run */
	int cpu_tiles;               /* tiles checked against the CPU */
	double seconds;
};

/* One disagreement. basis: "cpu", "repeat", "pattern", "reference",
 * "peer". elements: how many differ in the tile (0: unknown, only its
 * digest is known); max_diff: the largest |got - want| (as numbers of
 * the test's type); at: the first element that differs in the tile. */
struct screen_mismatch {
	char test[16];
	char basis[16];
	long tile;                   /* index; GEMM tiles row-major: row = tile / (n/32) */
	uint64_t elements, of;
	double max_diff;
	long at_row, at_col;         /* GEMM: matrix element; else -1 and word index in at_col */
	double got, want;
	char detail[160];            /* for reference and peer: whose digest */
};

struct screen_result {
	int64_t t_ms;
	char mode[8];                /* "quick" or "full" */
	bool test_sizes;             /* GPULSE_SCREEN_TEST_SIZES: tiny sizes (CI) */
	bool hook;                   /* GPULSE_SCREEN_CORRUPT was set */
	char uuid[96], name[96], driver[32];
	int cuda_driver_version;
	char kernels[20];            /* FNV-1a 64 of the PTX, hex: "same kernels" */
	double seconds;
	uint64_t memory_bytes;       /* tested by the pattern test */
	struct screen_test test[SCREEN_TEST_COUNT];
	struct screen_mismatch *mm;  /* owned */
	size_t nmm, capmm;
	char notes[512];             /* references not compared, and why */
};

/* Run the screening on GPU o->gpu into *r (screen_result_free). 0 with
 * *r filled (mismatches in r->mm: a run that found some still returns 0),
 * or with a sentence in err: GPULSE_ENOLIB / ENODRIVER (no driver),
 * ENOENT (no such GPU), ENOMEM, EVENDOR (a CUDA call failed, named),
 * ECANCELED (stopped). */
int screen_run(const struct screen_opts *o, struct screen_result *r, char *err, size_t errlen);
void screen_result_free(struct screen_result *r);

/* Compare r's digests with `other`'s (an earlier run of the same card:
 * basis "reference"; another card: "peer"). Tests are compared only when
 * both ran them at the same size on the same driver and kernels; what was
 * not compared, and why, goes to r->notes. Mismatched tiles are added to
 * r->mm (elements unknown). Returns the number of tiles that differ. */
size_t screen_compare(struct screen_result *r, const struct screen_result *other,
		      const char *basis);

/* JSON (one object; tile digests as hex strings) and back. _from_json:
 * 0 or GPULSE_EINVAL with a sentence. */
void screen_result_to_json(const struct screen_result *r, struct buf *out);
int screen_result_from_json(const char *text, struct screen_result *r, char *err, size_t errlen);

/* One line per mismatch: "gemm_f64 tile 3 (rows 0-31, cols 96-127): 1 of
 * 1024 elements differ from the CPU's, by up to 1 (first at (5,97): got
 * 2.5 want 1.5)". */
void screen_mismatch_text(const struct screen_mismatch *m, char *out, size_t len);

#endif
