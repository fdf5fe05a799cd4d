/* The health score of a GPU: a pure function of what the card reported
 * over a window of its history (ECC counts and their rate, remapped rows,
 * retired pages, XIDs by code, PCIe replays and link width, thermal and
 * power violation time, hardware clock slowdowns) and of what gpulse
 * measured on it (a benchmark regression, a silent-corruption screening
 * mismatch). Each reason takes points off 100 and says why in one line;
 * some reasons mean "drain this GPU". The rules, their thresholds and the
 * meaning of every XID used are in docs/internals/health.md: the table
 * below and that page change together.
 *
 * Nothing here reads a device, the bus or a clock: callers pass plain
 * arrays (src/diagnose/health_live.c builds them from the bus). */
#ifndef GPULSE_HEALTH_H
#define GPULSE_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/sample.h"

/* X(id, name) — name is the `reason` label of gpulse_gpu_health_*. */
#define HEALTH_REASONS(X)                                 \
	X(ECC_UNCORRECTED, "ecc_uncorrected")             \
	X(ECC_CORRECTED_RATE, "ecc_corrected_rate")       \
	X(REMAP_PENDING, "row_remap_pending")             \
	X(REMAP_FAILED, "row_remap_failed")               \
	X(ROWS_REMAPPED, "rows_remapped")                 \
	X(RETIRED_PAGES, "retired_pages")                 \
	X(XID, "xid")                                     \
	X(PCIE_REPLAY, "pcie_replay")                     \
	X(PCIE_LINK, "pcie_link_width")                   \
	X(THERMAL, "thermal_violation")                   \
	X(POWER, "power_violation")                       \
	X(CLOCK_SLOWDOWN, "clock_slowdown")               \
	X(BENCH_REGRESSION, "bench_regression")           \
	X(CORRUPTION, "silent_corruption")

enum health_reason {
#define HEALTH_REASON_ENUM(id, name) HEALTH_##id,
	HEALTH_REASONS(HEALTH_REASON_ENUM)
#undef HEALTH_REASON_ENUM
	HEALTH_REASON_COUNT
};
_Static_assert(HEALTH_REASON_COUNT <= GPU_HEALTH_REASON_MAX, "sample.h holds the reasons");

/* "ecc_uncorrected"; NULL out of range. Static storage. */
const char *health_reason_name(int reason);

/* What one slow-tier reading gave: X(id) of the inputs a point holds. */
#define HEALTH_INPUTS(X)                                                        \
	X(ECC_SBE)        /* corrected ECC errors since driver load */          \
	X(ECC_DBE)        /* uncorrected ECC errors since driver load */        \
	X(REMAP_COR)      /* rows remapped for correctable errors */            \
	X(REMAP_UNC)      /* rows remapped for uncorrectable errors */          \
	X(REMAP_PENDING)  /* 1 when a remap waits for a reset */                \
	X(REMAP_FAILED)   /* 1 when a remap ever failed */                      \
	X(RETIRED_SBE)    /* pages retired for repeated single-bit errors */    \
	X(RETIRED_DBE)    /* pages retired for a double-bit error */            \
	X(RETIRED_PENDING) /* 1 when a page waits to be retired */              \
	X(PCIE_REPLAY)    /* PCIe replays since driver load */                  \
	X(PCIE_WIDTH)     /* current link width, lanes */                       \
	X(PCIE_WIDTH_MAX) /* the width the card and slot support */             \
	X(VIOL_THERMAL)   /* seconds the thermal policy held clocks down */     \
	X(VIOL_POWER)     /* seconds the power policy held clocks down */       \
	X(HW_SLOWDOWN)    /* 1 when a hardware slowdown reason was set */

enum health_in {
#define HEALTH_INPUT_ENUM(id) HI_##id,
	HEALTH_INPUTS(HEALTH_INPUT_ENUM)
#undef HEALTH_INPUT_ENUM
	HI_COUNT
};

struct health_point {
	double t_s;      /* Unix seconds */
	uint32_t valid;  /* bit (1u << enum health_in) per value read */
	double v[HI_COUNT];
};

/* XIDs the driver reported: `count` events of `code` at t_s. */
struct health_xid {
	double t_s;
	uint32_t code;
	uint32_t count;
};

/* One XID's meaning in NVIDIA's Xid catalog and what it costs here:
 * points, and whether it drains the GPU. */
struct health_xid_info {
	uint32_t code;
	const char *meaning;
	double penalty;
	bool drain;
};
/* The code's row, or NULL for a code outside the table (health_eval
 * counts such codes at HEALTH_XID_OTHER_PENALTY). */
const struct health_xid_info *health_xid_lookup(uint32_t code);
/* The table, for documentation and tests. */
extern const struct health_xid_info health_xid_table[];
extern const size_t health_xid_count;
#define HEALTH_XID_OTHER_PENALTY 10.0

/* What gpulse measured on the GPU itself; text is shown as evidence. */
struct health_finding {
	bool set;
	char text[GPU_HEALTH_EVIDENCE_LEN];
};

struct health_input {
	const struct health_point *points; /* oldest first */
	size_t npoints;
	const struct health_xid *xids;     /* any order */
	size_t nxids;
	double now_s;                      /* Unix seconds */
	double window_s;                   /* only points and XIDs after now - window count */
	struct health_finding bench;       /* a benchmark regressed against its baseline */
	struct health_finding corruption;  /* a screening digest did not match */
};

/* Judge the GPU. Writes every field of *out (valid true). Points outside
 * the window, or not after the previous one, are ignored; a counter that
 * went down (a driver reload) starts its count again from there. Pure:
 * the same input gives the same verdict. */
void health_eval(const struct health_input *in, struct gpu_health_score *out);

#endif
