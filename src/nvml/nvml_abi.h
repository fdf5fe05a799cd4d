/* The part of the NVML ABI that gpulse uses, declared by the project itself
 * so that the build needs neither the driver nor nvml.h (DESIGN.md,
 * decision 1). Names are ours (nvml_* types, NVML_ABI_* constants) so that
 * tests/gpu/nvml_conformance.c can include this file beside the real nvml.h
 * and check every size, offset and constant against it on the GPU machine.
 *
 * Versioned structs carry `sizeof(struct) | version << 24` in their first
 * field, exactly as NVML_STRUCT_VERSION computes it. */
#ifndef GPULSE_NVML_ABI_H
#define GPULSE_NVML_ABI_H

#include <stdint.h>

typedef int nvml_return_t;
typedef struct nvml_device_st *nvml_device_t;
typedef struct nvml_event_set_st *nvml_event_set_t;

#define NVML_ABI_STRUCT_VERSION(type, ver) \
	((unsigned int)(sizeof(type) | ((unsigned int)(ver) << 24U)))

/* nvmlReturn_t */
#define NVML_ABI_SUCCESS 0
#define NVML_ABI_ERROR_UNINITIALIZED 1
#define NVML_ABI_ERROR_INVALID_ARGUMENT 2
#define NVML_ABI_ERROR_NOT_SUPPORTED 3
#define NVML_ABI_ERROR_NO_PERMISSION 4
#define NVML_ABI_ERROR_ALREADY_INITIALIZED 5
#define NVML_ABI_ERROR_NOT_FOUND 6
#define NVML_ABI_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ABI_ERROR_INSUFFICIENT_POWER 8
#define NVML_ABI_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ABI_ERROR_TIMEOUT 10
#define NVML_ABI_ERROR_IRQ_ISSUE 11
#define NVML_ABI_ERROR_LIBRARY_NOT_FOUND 12
#define NVML_ABI_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_ABI_ERROR_CORRUPTED_INFOROM 14
#define NVML_ABI_ERROR_GPU_IS_LOST 15
#define NVML_ABI_ERROR_RESET_REQUIRED 16
#define NVML_ABI_ERROR_OPERATING_SYSTEM 17
#define NVML_ABI_ERROR_LIB_RM_VERSION_MISMATCH 18
#define NVML_ABI_ERROR_IN_USE 19
#define NVML_ABI_ERROR_MEMORY 20
#define NVML_ABI_ERROR_NO_DATA 21
#define NVML_ABI_ERROR_VGPU_ECC_NOT_SUPPORTED 22
#define NVML_ABI_ERROR_INSUFFICIENT_RESOURCES 23
#define NVML_ABI_ERROR_FREQ_NOT_SUPPORTED 24
#define NVML_ABI_ERROR_ARGUMENT_VERSION_MISMATCH 25
#define NVML_ABI_ERROR_DEPRECATED 26
#define NVML_ABI_ERROR_NOT_READY 27
#define NVML_ABI_ERROR_GPU_NOT_FOUND 28
#define NVML_ABI_ERROR_INVALID_STATE 29
#define NVML_ABI_ERROR_UNKNOWN 999

/* Buffer sizes */
#define NVML_ABI_DEVICE_UUID_BUFFER_SIZE 80
#define NVML_ABI_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_ABI_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_ABI_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_ABI_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_ABI_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_ABI_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

/* nvmlClockType_t */
#define NVML_ABI_CLOCK_GRAPHICS 0
#define NVML_ABI_CLOCK_SM 1
#define NVML_ABI_CLOCK_MEM 2
#define NVML_ABI_CLOCK_VIDEO 3

/* nvmlTemperatureSensors_t */
#define NVML_ABI_TEMPERATURE_GPU 0

/* nvmlMemoryErrorType_t and nvmlEccCounterType_t */
#define NVML_ABI_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_ABI_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_ABI_VOLATILE_ECC 0
#define NVML_ABI_AGGREGATE_ECC 1

/* nvmlEnableState_t */
#define NVML_ABI_FEATURE_DISABLED 0
#define NVML_ABI_FEATURE_ENABLED 1

/* nvmlDeviceArchitecture_t */
#define NVML_ABI_DEVICE_ARCH_KEPLER 2
#define NVML_ABI_DEVICE_ARCH_MAXWELL 3
#define NVML_ABI_DEVICE_ARCH_PASCAL 4
#define NVML_ABI_DEVICE_ARCH_VOLTA 5
#define NVML_ABI_DEVICE_ARCH_TURING 6
#define NVML_ABI_DEVICE_ARCH_AMPERE 7
#define NVML_ABI_DEVICE_ARCH_ADA 8
#define NVML_ABI_DEVICE_ARCH_HOPPER 9

/* Clock event ("throttle") reasons, nvmlClocksEventReason* */
#define NVML_ABI_CLOCKS_EVENT_REASON_GPU_IDLE 0x1ULL
#define NVML_ABI_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING 0x2ULL
#define NVML_ABI_CLOCKS_EVENT_REASON_SW_POWER_CAP 0x4ULL
#define NVML_ABI_CLOCKS_THROTTLE_REASON_HW_SLOWDOWN 0x8ULL
#define NVML_ABI_CLOCKS_EVENT_REASON_SYNC_BOOST 0x10ULL
#define NVML_ABI_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN 0x20ULL
#define NVML_ABI_CLOCKS_THROTTLE_REASON_HW_THERMAL_SLOWDOWN 0x40ULL
#define NVML_ABI_CLOCKS_THROTTLE_REASON_HW_POWER_BRAKE_SLOWDOWN 0x80ULL
#define NVML_ABI_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING 0x100ULL

/* Event types, nvmlEventType* */
#define NVML_ABI_EVENT_TYPE_SINGLE_BIT_ECC_ERROR 0x1ULL
#define NVML_ABI_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR 0x2ULL
#define NVML_ABI_EVENT_TYPE_PSTATE 0x4ULL
#define NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR 0x8ULL
#define NVML_ABI_EVENT_TYPE_CLOCK 0x10ULL

/* Field value ids, NVML_FI_* */
#define NVML_ABI_FI_DEV_ECC_CURRENT 1
#define NVML_ABI_FI_DEV_ECC_SBE_VOL_TOTAL 3
#define NVML_ABI_FI_DEV_ECC_DBE_VOL_TOTAL 4
#define NVML_ABI_FI_DEV_ECC_SBE_AGG_TOTAL 5
#define NVML_ABI_FI_DEV_ECC_DBE_AGG_TOTAL 6
#define NVML_ABI_FI_DEV_MEMORY_TEMP 82
#define NVML_ABI_FI_DEV_TOTAL_ENERGY_CONSUMPTION 83
#define NVML_ABI_FI_DEV_PCIE_REPLAY_COUNTER 94
#define NVML_ABI_FI_DEV_REMAPPED_COR 142
#define NVML_ABI_FI_DEV_REMAPPED_UNC 143
#define NVML_ABI_FI_DEV_REMAPPED_PENDING 144
#define NVML_ABI_FI_DEV_REMAPPED_FAILURE 145
#define NVML_ABI_FI_DEV_POWER_INSTANT 186
/* The clock violation time of each performance policy (the same
 * cumulative ns as nvmlDeviceGetViolationStatus), one field per policy. */
#define NVML_ABI_FI_DEV_PERF_POLICY_POWER 74
#define NVML_ABI_FI_DEV_PERF_POLICY_THERMAL 75
#define NVML_ABI_FI_DEV_PERF_POLICY_SYNC_BOOST 76
#define NVML_ABI_FI_DEV_PERF_POLICY_BOARD_LIMIT 77
#define NVML_ABI_FI_DEV_PERF_POLICY_LOW_UTILIZATION 78
#define NVML_ABI_FI_DEV_PERF_POLICY_RELIABILITY 79
#define NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS 80
#define NVML_ABI_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS 81
/* NVLink data-link error counters summed over every link of the GPU. */
#define NVML_ABI_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL 38
#define NVML_ABI_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL 45
#define NVML_ABI_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL 52
#define NVML_ABI_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL 59
#define NVML_ABI_FI_DEV_NVLINK_LINK_COUNT 91
/* Per link: scope_id is the link; throughput with scope_id
 * NVML_ABI_FI_SCOPE_ALL_LINKS is the sum over the links, in KiB. */
#define NVML_ABI_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138
#define NVML_ABI_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139
#define NVML_ABI_FI_DEV_NVLINK_GET_SPEED 164
#define NVML_ABI_FI_DEV_NVLINK_GET_STATE 165
#define NVML_ABI_FI_SCOPE_ALL_LINKS 0xFFFFFFFFU

/* Values of NVML_ABI_FI_DEV_NVLINK_GET_STATE. */
#define NVML_ABI_NVLINK_STATE_INACTIVE 0
#define NVML_ABI_NVLINK_STATE_ACTIVE 1
#define NVML_ABI_NVLINK_STATE_SLEEP 2

/* nvmlValueType_t */
#define NVML_ABI_VALUE_TYPE_DOUBLE 0
#define NVML_ABI_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_ABI_VALUE_TYPE_UNSIGNED_LONG 2
#define NVML_ABI_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define NVML_ABI_VALUE_TYPE_SIGNED_LONG_LONG 4
#define NVML_ABI_VALUE_TYPE_SIGNED_INT 5
#define NVML_ABI_VALUE_TYPE_UNSIGNED_SHORT 6

/* GPM metric ids, nvmlGpmMetricId_t */
#define NVML_ABI_GPM_METRIC_GRAPHICS_UTIL 1
#define NVML_ABI_GPM_METRIC_SM_UTIL 2
#define NVML_ABI_GPM_METRIC_SM_OCCUPANCY 3
#define NVML_ABI_GPM_METRIC_INTEGER_UTIL 4
#define NVML_ABI_GPM_METRIC_ANY_TENSOR_UTIL 5
#define NVML_ABI_GPM_METRIC_DFMA_TENSOR_UTIL 6
#define NVML_ABI_GPM_METRIC_HMMA_TENSOR_UTIL 7
#define NVML_ABI_GPM_METRIC_IMMA_TENSOR_UTIL 9
#define NVML_ABI_GPM_METRIC_DRAM_BW_UTIL 10
#define NVML_ABI_GPM_METRIC_FP64_UTIL 11
#define NVML_ABI_GPM_METRIC_FP32_UTIL 12
#define NVML_ABI_GPM_METRIC_FP16_UTIL 13
#define NVML_ABI_GPM_METRIC_PCIE_TX_PER_SEC 20
#define NVML_ABI_GPM_METRIC_PCIE_RX_PER_SEC 21
#define NVML_ABI_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC 60
#define NVML_ABI_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC 61
/* Our metrics array only has to hold what we ask for: NVML fills
 * numMetrics entries, and the struct version does not encode the size. */
#define NVML_ABI_GPM_METRICS_MAX 98
#define NVML_ABI_GPM_METRICS_GET_VERSION 1
#define NVML_ABI_GPM_SUPPORT_VERSION 1

/* nvmlPerfPolicyType_t: what nvmlDeviceGetViolationStatus reports on. */
#define NVML_ABI_PERF_POLICY_POWER 0
#define NVML_ABI_PERF_POLICY_THERMAL 1
#define NVML_ABI_PERF_POLICY_SYNC_BOOST 2
#define NVML_ABI_PERF_POLICY_BOARD_LIMIT 3
#define NVML_ABI_PERF_POLICY_LOW_UTILIZATION 4
#define NVML_ABI_PERF_POLICY_RELIABILITY 5
#define NVML_ABI_PERF_POLICY_TOTAL_APP_CLOCKS 10
#define NVML_ABI_PERF_POLICY_TOTAL_BASE_CLOCKS 11

/* nvmlViolationTime_t: reference_time in µs of CPU time, violation_time
 * the cumulative time the policy held the clocks down, in ns. */
struct nvml_violation_time {
	unsigned long long reference_time;
	unsigned long long violation_time;
};

/* nvmlNvLinkErrorCounter_t */
#define NVML_ABI_NVLINK_ERROR_DL_REPLAY 0
#define NVML_ABI_NVLINK_ERROR_DL_RECOVERY 1
#define NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT 2
#define NVML_ABI_NVLINK_ERROR_DL_CRC_DATA 3
/* NVML_NVLINK_MAX_LINKS of the 12.x/13.x headers (Hopper has 18). */
#define NVML_ABI_NVLINK_MAX_LINKS 18

/* nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs on
 * the PCIe tree (nvmlDeviceGetTopologyCommonAncestor), spaced by 10. */
#define NVML_ABI_TOPOLOGY_INTERNAL 0
#define NVML_ABI_TOPOLOGY_SINGLE 10
#define NVML_ABI_TOPOLOGY_MULTIPLE 20
#define NVML_ABI_TOPOLOGY_HOSTBRIDGE 30
#define NVML_ABI_TOPOLOGY_NODE 40
#define NVML_ABI_TOPOLOGY_SYSTEM 50

/* nvmlSamplingType_t: the driver's own sample buffers (nvmlDeviceGetSamples). */
#define NVML_ABI_TOTAL_POWER_SAMPLES 0
#define NVML_ABI_GPU_UTILIZATION_SAMPLES 1
#define NVML_ABI_MEMORY_UTILIZATION_SAMPLES 2
#define NVML_ABI_PROCESSOR_CLK_SAMPLES 5
#define NVML_ABI_MEMORY_CLK_SAMPLES 6

/* nvmlPageRetirementCause_t */
#define NVML_ABI_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS 0
#define NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR 1

struct nvml_utilization {
	unsigned int gpu;
	unsigned int memory;
};

struct nvml_memory_v2 {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
};
#define NVML_ABI_MEMORY_V2_VERSION NVML_ABI_STRUCT_VERSION(struct nvml_memory_v2, 2)

struct nvml_memory_v1 {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

struct nvml_pci_info {
	char bus_id_legacy[NVML_ABI_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pci_device_id;
	unsigned int pci_subsystem_id;
	char bus_id[NVML_ABI_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

/* nvmlProcessInfo_t as returned by the _v3 process queries. */
struct nvml_process_info {
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};
#define NVML_ABI_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL

struct nvml_process_utilization_sample {
	unsigned int pid;
	unsigned long long timestamp_us;
	unsigned int sm_util;
	unsigned int mem_util;
	unsigned int enc_util;
	unsigned int dec_util;
};

struct nvml_event_data {
	nvml_device_t device;
	unsigned long long event_type;
	unsigned long long event_data;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

union nvml_value {
	double d;
	unsigned int ui;
	unsigned long ul;
	unsigned long long ull;
	long long sll;
	int si;
	unsigned short us;
};

struct nvml_field_value {
	unsigned int field_id;
	unsigned int scope_id;
	long long timestamp_us;
	long long latency_us;
	unsigned int value_type;
	nvml_return_t nvml_return;
	union nvml_value value;
};

/* nvmlSample_t: timestamp_us is a CPU timestamp in µs. */
struct nvml_sample {
	unsigned long long timestamp_us;
	union nvml_value value;
};

struct nvml_gpm_sample_st;
typedef struct nvml_gpm_sample_st *nvml_gpm_sample_t;

struct nvml_gpm_metric {
	unsigned int metric_id;
	nvml_return_t nvml_return;
	double value;
	struct {
		char *short_name;
		char *long_name;
		char *unit;
	} metric_info;
};

struct nvml_gpm_metrics_get {
	unsigned int version;
	unsigned int num_metrics;
	nvml_gpm_sample_t sample1;
	nvml_gpm_sample_t sample2;
	struct nvml_gpm_metric metrics[NVML_ABI_GPM_METRICS_MAX];
};

struct nvml_gpm_support {
	unsigned int version;
	unsigned int is_supported_device;
};

#endif
