/* The table of per-GPU scalar fields: the one place that says, for each
 * value gpulse reads, its recording column (DESIGN.md's recording format),
 * its Prometheus metric, its type and the sampling tier that reads it.
 * Values are held in base units (ratio 0-1, bytes, watts, hertz, celsius,
 * joules, bytes per second); a recording column converts as
 * base = column * scale.
 *
 * X(ID, column, scale, metric, labels, type, tier, help)
 *   column  recording CSV column, or NULL when recordings do not carry it
 *   metric  Prometheus family name, or NULL when exported another way
 *   labels  extra label pairs for this member of the family, or ""
 * Consecutive rows that share a metric form one family. */
#ifndef GPULSE_FIELDS_H
#define GPULSE_FIELDS_H

#include <stdint.h>

enum tier { TIER_FAST, TIER_NORMAL, TIER_SLOW, TIER_COUNT };
enum metric_type { METRIC_GAUGE, METRIC_COUNTER };

#define MIB 1048576.0

#define GPULSE_FIELDS(X)                                                                              \
	X(GPU_UTIL, "gpu_util", 0.01, "gpulse_gpu_utilization_ratio", "", GAUGE, FAST,                 \
	  "Fraction of the last sample period in which a kernel ran (NVML utilization.gpu).")          \
	X(MEM_UTIL, "mem_util", 0.01, "gpulse_gpu_memory_utilization_ratio", "", GAUGE, FAST,          \
	  "Fraction of the last sample period in which device memory was read or written.")            \
	X(MEM_USED, "mem_used_mib", MIB, "gpulse_gpu_memory_used_bytes", "", GAUGE, FAST,              \
	  "Device memory in use, driver-reserved memory included (as nvidia-smi counts it).") \
	X(MEM_FREE, NULL, 1, "gpulse_gpu_memory_free_bytes", "", GAUGE, FAST, "Device memory free.")   \
	X(MEM_TOTAL, "mem_total_mib", MIB, "gpulse_gpu_memory_total_bytes", "", GAUGE, FAST,           \
	  "Device memory installed.")                                                                  \
	X(MEM_RESERVED, NULL, 1, "gpulse_gpu_memory_reserved_bytes", "", GAUGE, FAST,                  \
	  "Device memory reserved by the driver and firmware.")                                        \
	X(POWER, "power_w", 1, "gpulse_gpu_power_watts", "", GAUGE, FAST, "Board power draw.")         \
	X(SM_CLOCK, "sm_clock_mhz", 1e6, "gpulse_gpu_sm_clock_hertz", "", GAUGE, FAST,                 \
	  "Current SM clock.")                                                                         \
	X(MEM_CLOCK, "mem_clock_mhz", 1e6, "gpulse_gpu_memory_clock_hertz", "", GAUGE, FAST,           \
	  "Current memory clock.")                                                                     \
	X(TEMP, "temp_c", 1, "gpulse_gpu_temperature_celsius", "", GAUGE, NORMAL, "GPU die temperature.") \
	X(MEM_TEMP, NULL, 1, "gpulse_gpu_memory_temperature_celsius", "", GAUGE, NORMAL,               \
	  "HBM temperature.")                                                                          \
	X(PSTATE, "pstate", 1, "gpulse_gpu_pstate", "", GAUGE, NORMAL,                                 \
	  "Performance state (0 fastest, 15 slowest).")                                                \
	X(CLOCK_REASONS, "clocks_event_reasons", 1, NULL, "", GAUGE, NORMAL,                           \
	  "Bit mask of reasons the clocks are held down (exported decoded).")                          \
	X(ENERGY, NULL, 1e-3, "gpulse_gpu_energy_joules_total", "", COUNTER, SLOW,                     \
	  "Energy used since the driver was loaded (read every slow period: ~3 ms of CPU a call).")                                                  \
	X(PROC_COUNT, "proc_count", 1, "gpulse_gpu_processes", "", GAUGE, NORMAL,                      \
	  "Compute processes running on the GPU.")                                                     \
	X(GPM_GRAPHICS, "graphics_util", 0.01, "gpulse_gpu_graphics_active_ratio", "", GAUGE, SLOW,    \
	  "Fraction of time any graphics or compute engine was active (GPM; 1.5 ms of CPU a read).") \
	X(GPM_SM, "sm_util", 0.01, "gpulse_gpu_sm_active_ratio", "", GAUGE, NORMAL,                    \
	  "Fraction of SM cycles with at least one warp resident (GPM SM_UTIL).")                      \
	X(GPM_OCCUPANCY, "sm_occupancy", 0.01, "gpulse_gpu_sm_occupancy_ratio", "", GAUGE, NORMAL,     \
	  "Resident warps over the SMs' maximum (GPM SM_OCCUPANCY).")                                  \
	X(GPM_INTEGER, "integer_util", 0.01, "gpulse_gpu_integer_active_ratio", "", GAUGE, NORMAL,     \
	  "Fraction of SM cycles issuing integer instructions (GPM).")                                 \
	X(GPM_TENSOR, "tensor_util", 0.01, "gpulse_gpu_tensor_active_ratio", "", GAUGE, NORMAL,        \
	  "Fraction of SM cycles with any tensor pipe active (GPM ANY_TENSOR_UTIL).")                  \
	X(GPM_DFMA, NULL, 0.01, "gpulse_gpu_tensor_dfma_active_ratio", "", GAUGE, NORMAL,              \
	  "Fraction of SM cycles with the FP64 tensor pipe active (GPM).")                             \
	X(GPM_HMMA, NULL, 0.01, "gpulse_gpu_tensor_hmma_active_ratio", "", GAUGE, NORMAL,              \
	  "Fraction of SM cycles with the half-precision tensor pipe active (GPM).")                   \
	X(GPM_IMMA, NULL, 0.01, "gpulse_gpu_tensor_imma_active_ratio", "", GAUGE, NORMAL,              \
	  "Fraction of SM cycles with the integer tensor pipe active (GPM).")                          \
	X(GPM_DRAM, "dram_bw_util", 0.01, "gpulse_gpu_dram_bandwidth_ratio", "", GAUGE, NORMAL,        \
	  "DRAM bandwidth used over the theoretical peak (GPM DRAM_BW_UTIL).")                         \
	X(GPM_FP64, "fp64_util", 0.01, "gpulse_gpu_fp64_active_ratio", "", GAUGE, NORMAL,              \
	  "Fraction of SM cycles issuing non-tensor FP64 (GPM).")                                      \
	X(GPM_FP32, "fp32_util", 0.01, "gpulse_gpu_fp32_active_ratio", "", GAUGE, NORMAL,              \
	  "Fraction of SM cycles issuing non-tensor FP32 (GPM).")                                      \
	X(GPM_FP16, "fp16_util", 0.01, "gpulse_gpu_fp16_active_ratio", "", GAUGE, NORMAL,              \
	  "Fraction of SM cycles issuing non-tensor FP16 (GPM).")                                      \
	X(GPM_PCIE_TX, "pcie_tx_mbps", MIB, "gpulse_gpu_pcie_tx_bytes_per_second", "", GAUGE, NORMAL,  \
	  "PCIe traffic from the GPU (GPM PCIE_TX_PER_SEC).")                                          \
	X(GPM_PCIE_RX, "pcie_rx_mbps", MIB, "gpulse_gpu_pcie_rx_bytes_per_second", "", GAUGE, NORMAL,  \
	  "PCIe traffic to the GPU (GPM PCIE_RX_PER_SEC).")                                            \
	X(GPM_NVLINK_TX, NULL, MIB, "gpulse_gpu_nvlink_tx_bytes_per_second", "", GAUGE, NORMAL,        \
	  "NVLink traffic from the GPU, all links (GPM).")                                             \
	X(GPM_NVLINK_RX, NULL, MIB, "gpulse_gpu_nvlink_rx_bytes_per_second", "", GAUGE, NORMAL,        \
	  "NVLink traffic to the GPU, all links (GPM).")                                               \
	X(POWER_LIMIT, NULL, 1e-3, "gpulse_gpu_power_limit_watts", "", GAUGE, SLOW,                    \
	  "Power limit the driver enforces.")                                                          \
	X(ECC_MODE, NULL, 1, "gpulse_gpu_ecc_enabled", "", GAUGE, SLOW, "1 if ECC is enabled.")        \
	X(ECC_SBE_VOL, NULL, 1, "gpulse_gpu_ecc_errors_total", "type=\"corrected\"", COUNTER, SLOW,    \
	  "ECC errors since the driver was loaded.")                                                   \
	X(ECC_DBE_VOL, NULL, 1, "gpulse_gpu_ecc_errors_total", "type=\"uncorrected\"", COUNTER, SLOW,  \
	  "ECC errors since the driver was loaded.")                                                   \
	X(ECC_SBE_AGG, NULL, 1, "gpulse_gpu_ecc_errors_lifetime_total", "type=\"corrected\"", COUNTER, \
	  SLOW, "ECC errors over the life of the board (InfoROM).")                                   \
	X(ECC_DBE_AGG, NULL, 1, "gpulse_gpu_ecc_errors_lifetime_total", "type=\"uncorrected\"",        \
	  COUNTER, SLOW, "ECC errors over the life of the board (InfoROM).")                          \
	X(REMAP_COR, NULL, 1, "gpulse_gpu_remapped_rows", "cause=\"correctable\"", GAUGE, SLOW,        \
	  "Memory rows remapped, by the kind of error that caused it.")                                \
	X(REMAP_UNC, NULL, 1, "gpulse_gpu_remapped_rows", "cause=\"uncorrectable\"", GAUGE, SLOW,      \
	  "Memory rows remapped, by the kind of error that caused it.")                                \
	X(REMAP_PENDING, NULL, 1, "gpulse_gpu_remapped_rows_pending", "", GAUGE, SLOW,                 \
	  "1 if a row remap waits for the next GPU reset.")                                            \
	X(REMAP_FAILED, NULL, 1, "gpulse_gpu_remapped_rows_failed", "", GAUGE, SLOW,                   \
	  "1 if a row remap failed (the GPU needs service).")                                          \
	X(PCIE_REPLAY, NULL, 1, "gpulse_gpu_pcie_replay_errors_total", "", COUNTER, SLOW,              \
	  "PCIe replays (retransmitted packets) since the driver was loaded.")                         \
	X(PCIE_GEN, NULL, 1, "gpulse_gpu_pcie_link_generation", "", GAUGE, SLOW,                       \
	  "Current PCIe link generation.")                                                             \
	X(PCIE_WIDTH, NULL, 1, "gpulse_gpu_pcie_link_width", "", GAUGE, SLOW,                          \
	  "Current PCIe link width (lanes).")                                                          \
	X(POWER_ENERGY, NULL, 1, "gpulse_gpu_power_energy_joules_total", "", COUNTER, FAST,            \
	  "Energy integrated from the fast tier's power readings since gpulsed started (trapezoid; " \
	  "no NVML call): rate() over a minute is right where the board's energy counter, read "    \
	  "every slow period, is not.")                                                            \
	X(ENC_UTIL, NULL, 0.01, "gpulse_gpu_encoder_utilization_ratio", "", GAUGE, NORMAL,             \
	  "Fraction of the encoder's sampling period in which the video encoder was busy.")          \
	X(DEC_UTIL, NULL, 0.01, "gpulse_gpu_decoder_utilization_ratio", "", GAUGE, NORMAL,             \
	  "Fraction of the decoder's sampling period in which the video decoder was busy.")          \
	VIOLATION_ROW(X, VIOL_POWER, "power")                                                          \
	VIOLATION_ROW(X, VIOL_THERMAL, "thermal")                                                      \
	VIOLATION_ROW(X, VIOL_SYNC_BOOST, "sync_boost")                                                \
	VIOLATION_ROW(X, VIOL_BOARD_LIMIT, "board_limit")                                              \
	VIOLATION_ROW(X, VIOL_LOW_UTIL, "low_utilization")                                             \
	VIOLATION_ROW(X, VIOL_RELIABILITY, "reliability")                                              \
	VIOLATION_ROW(X, VIOL_APP_CLOCKS, "total_app_clocks")                                          \
	VIOLATION_ROW(X, VIOL_BASE_CLOCKS, "total_base_clocks")                                        \
	X(NVLINK_ACTIVE, NULL, 1, "gpulse_gpu_nvlinks_active", "", GAUGE, SLOW,                        \
	  "NVLinks of the GPU that are up (trained and active).")                                    \
	NVLINK_ERROR_ROW(X, NVLINK_REPLAY, "replay")                                                   \
	NVLINK_ERROR_ROW(X, NVLINK_RECOVERY, "recovery")                                               \
	NVLINK_ERROR_ROW(X, NVLINK_CRC_FLIT, "crc_flit")                                               \
	NVLINK_ERROR_ROW(X, NVLINK_CRC_DATA, "crc_data")                                               \
	X(RETIRED_SBE, NULL, 1, "gpulse_gpu_retired_pages", "cause=\"multiple_single_bit_ecc\"", GAUGE, \
	  SLOW, "Device memory pages retired, by cause (cards before Ampere; later ones remap rows).") \
	X(RETIRED_DBE, NULL, 1, "gpulse_gpu_retired_pages", "cause=\"double_bit_ecc\"", GAUGE, SLOW,   \
	  "Device memory pages retired, by cause (cards before Ampere; later ones remap rows).")      \
	X(RETIRED_PENDING, NULL, 1, "gpulse_gpu_retired_pages_pending", "", GAUGE, SLOW,               \
	  "1 if a page waits to be retired at the next reboot or GPU reset.")

/* Time a performance policy held the clocks below their target
 * (nvmlDeviceGetViolationStatus, ns in NVML, seconds here): counters that
 * rate() turns into the share of time each limiter was active. Slow tier:
 * eight calls a GPU, and a counter's rate needs no finer sampling. */
#define VIOLATION_ROW(X, id, policy)                                                               \
	X(id, NULL, 1e-9, "gpulse_gpu_clock_violation_seconds_total", "policy=\"" policy "\"", COUNTER, \
	  SLOW, "Time the policy held the clocks down since the driver was loaded (NVML violation " \
	  "status).")
/* NVLink data-link errors summed over the active links
 * (nvmlDeviceGetNvLinkErrorCounter), as DCGM's *_COUNT_TOTAL fields are.
 * A link that goes down leaves the sum, which rate() reads as a reset. */
#define NVLINK_ERROR_ROW(X, id, type)                                                              \
	X(id, NULL, 1, "gpulse_gpu_nvlink_errors_total", "type=\"" type "\"", COUNTER, SLOW,          \
	  "NVLink data-link errors over the active links since the driver was loaded.")

enum field_id {
#define FIELD_ENUM(id, col, scale, metric, labels, type, tier, help) F_##id,
	GPULSE_FIELDS(FIELD_ENUM)
#undef FIELD_ENUM
	FIELD_COUNT
};

_Static_assert(FIELD_COUNT <= 64, "field validity is a 64-bit mask");

#define FIELD_BIT(id) (1ULL << (id))

struct field_info {
	const char *column;  /* recording column or NULL */
	double scale;        /* base = column * scale */
	const char *metric;  /* Prometheus family or NULL */
	const char *labels;  /* extra labels, "" when none */
	enum metric_type type;
	enum tier tier;
	const char *help;
};

extern const struct field_info field_table[FIELD_COUNT];

/* Convert a value in the field's recording/NVML unit to base units and
 * back. A scale like 0.01 is applied as a division by 100, so 57 % becomes
 * exactly 0.57 (57 * 0.01 would be 0.5700000000000001). */
double field_to_base(enum field_id f, double unit_value);
double field_from_base(enum field_id f, double base_value);

/* The field's ID in lower case ("gpm_sm"), the key used by JSON and the
 * CLI. Static storage; thread-safe. */
const char *field_key(enum field_id f);
/* The field with that key, or -1. */
int field_by_key(const char *key);
/* Mask of the fields read by `tier`. */
uint64_t fields_of_tier(enum tier tier);
/* The field whose recording column is `column`, or -1. */
int field_by_column(const char *column);
/* "fast", "normal", "slow". */
const char *tier_name(enum tier tier);

/* Clock event ("throttle") reasons, decoded one by one:
 * X(bit, label, description). */
#define GPULSE_CLOCK_REASONS(X)                                                   \
	X(0x1ULL, "gpu_idle", "nothing is running")                               \
	X(0x2ULL, "applications_clocks", "application clocks setting")            \
	X(0x4ULL, "sw_power_cap", "software power cap")                           \
	X(0x8ULL, "hw_slowdown", "hardware slowdown (thermal or power brake)")    \
	X(0x10ULL, "sync_boost", "sync boost with other GPUs")                    \
	X(0x20ULL, "sw_thermal_slowdown", "software thermal slowdown")            \
	X(0x40ULL, "hw_thermal_slowdown", "hardware thermal slowdown")            \
	X(0x80ULL, "hw_power_brake_slowdown", "hardware power brake")             \
	X(0x100ULL, "display_clocks", "display clock setting")

struct clock_reason_info {
	uint64_t bit;
	const char *label;
	const char *description;
};
extern const struct clock_reason_info clock_reason_table[];
extern const int clock_reason_count;

#endif
