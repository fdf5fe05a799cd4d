/* GPU machine only: checks the project's own NVML declarations
 * (src/nvml/nvml_abi.h) against the real nvml.h of the installed CUDA:
 * struct sizes, field offsets, constants and the versioned struct values.
 * Prints one line per check that fails and a count; exit 1 on mismatch.
 * Build: cc -I/usr/local/cuda/include -Isrc/nvml tests/gpu/nvml_conformance.c */
#include <stddef.h>
#include <stdio.h>

#include <nvml.h>

#include "nvml_abi.h"

static int checks, failures;

static void expect(const char *what, long long ours, long long theirs)
{
	checks++;
	if (ours != theirs) {
		failures++;
		printf("MISMATCH %-60s ours %lld, nvml.h %lld\n", what, ours, theirs);
	}
}

#define SIZE(ours, theirs) expect("sizeof " #ours, (long long)sizeof(ours), (long long)sizeof(theirs))
#define OFF(ours, of, theirs, tf) \
	expect("offsetof " #ours "." #of, (long long)offsetof(ours, of), (long long)offsetof(theirs, tf))
#define CONST(ours, theirs) expect(#ours, (long long)(ours), (long long)(theirs))

int main(void)
{
	SIZE(struct nvml_utilization, nvmlUtilization_t);
	OFF(struct nvml_utilization, memory, nvmlUtilization_t, memory);
	SIZE(struct nvml_memory_v2, nvmlMemory_v2_t);
	OFF(struct nvml_memory_v2, total, nvmlMemory_v2_t, total);
	OFF(struct nvml_memory_v2, reserved, nvmlMemory_v2_t, reserved);
	OFF(struct nvml_memory_v2, free, nvmlMemory_v2_t, free);
	OFF(struct nvml_memory_v2, used, nvmlMemory_v2_t, used);
	CONST(NVML_ABI_MEMORY_V2_VERSION, nvmlMemory_v2);
	SIZE(struct nvml_memory_v1, nvmlMemory_t);
	OFF(struct nvml_memory_v1, used, nvmlMemory_t, used);
	SIZE(struct nvml_pci_info, nvmlPciInfo_t);
	OFF(struct nvml_pci_info, domain, nvmlPciInfo_t, domain);
	OFF(struct nvml_pci_info, pci_subsystem_id, nvmlPciInfo_t, pciSubSystemId);
	OFF(struct nvml_pci_info, bus_id, nvmlPciInfo_t, busId);
	SIZE(struct nvml_process_info, nvmlProcessInfo_t);
	OFF(struct nvml_process_info, used_gpu_memory, nvmlProcessInfo_t, usedGpuMemory);
	OFF(struct nvml_process_info, gpu_instance_id, nvmlProcessInfo_t, gpuInstanceId);
	OFF(struct nvml_process_info, compute_instance_id, nvmlProcessInfo_t, computeInstanceId);
	SIZE(struct nvml_process_utilization_sample, nvmlProcessUtilizationSample_t);
	OFF(struct nvml_process_utilization_sample, timestamp_us, nvmlProcessUtilizationSample_t, timeStamp);
	OFF(struct nvml_process_utilization_sample, sm_util, nvmlProcessUtilizationSample_t, smUtil);
	OFF(struct nvml_process_utilization_sample, mem_util, nvmlProcessUtilizationSample_t, memUtil);
	OFF(struct nvml_process_utilization_sample, dec_util, nvmlProcessUtilizationSample_t, decUtil);
	SIZE(struct nvml_event_data, nvmlEventData_t);
	OFF(struct nvml_event_data, event_type, nvmlEventData_t, eventType);
	OFF(struct nvml_event_data, event_data, nvmlEventData_t, eventData);
	OFF(struct nvml_event_data, gpu_instance_id, nvmlEventData_t, gpuInstanceId);
	OFF(struct nvml_event_data, compute_instance_id, nvmlEventData_t, computeInstanceId);
	SIZE(union nvml_value, nvmlValue_t);
	SIZE(struct nvml_field_value, nvmlFieldValue_t);
	OFF(struct nvml_field_value, scope_id, nvmlFieldValue_t, scopeId);
	OFF(struct nvml_field_value, timestamp_us, nvmlFieldValue_t, timestamp);
	OFF(struct nvml_field_value, latency_us, nvmlFieldValue_t, latencyUsec);
	OFF(struct nvml_field_value, value_type, nvmlFieldValue_t, valueType);
	OFF(struct nvml_field_value, nvml_return, nvmlFieldValue_t, nvmlReturn);
	OFF(struct nvml_field_value, value, nvmlFieldValue_t, value);
	SIZE(nvml_gpm_sample_t, nvmlGpmSample_t);
	SIZE(struct nvml_gpm_metric, nvmlGpmMetric_t);
	OFF(struct nvml_gpm_metric, nvml_return, nvmlGpmMetric_t, nvmlReturn);
	OFF(struct nvml_gpm_metric, value, nvmlGpmMetric_t, value);
	OFF(struct nvml_gpm_metric, metric_info, nvmlGpmMetric_t, metricInfo);
	OFF(struct nvml_gpm_metrics_get, num_metrics, nvmlGpmMetricsGet_t, numMetrics);
	OFF(struct nvml_gpm_metrics_get, sample1, nvmlGpmMetricsGet_t, sample1);
	OFF(struct nvml_gpm_metrics_get, sample2, nvmlGpmMetricsGet_t, sample2);
	OFF(struct nvml_gpm_metrics_get, metrics, nvmlGpmMetricsGet_t, metrics);
	/* Our array may be shorter than NVML_GPM_METRIC_MAX (NVML fills only
	 * numMetrics entries); it must hold every metric id we request. */
	expect("NVML_ABI_GPM_METRICS_MAX <= NVML_GPM_METRIC_MAX",
	       NVML_ABI_GPM_METRICS_MAX <= NVML_GPM_METRIC_MAX, 1);
	CONST(NVML_ABI_GPM_METRICS_GET_VERSION, NVML_GPM_METRICS_GET_VERSION);
	SIZE(struct nvml_gpm_support, nvmlGpmSupport_t);
	OFF(struct nvml_gpm_support, is_supported_device, nvmlGpmSupport_t, isSupportedDevice);
	CONST(NVML_ABI_GPM_SUPPORT_VERSION, NVML_GPM_SUPPORT_VERSION);

	CONST(NVML_ABI_SUCCESS, NVML_SUCCESS);
	CONST(NVML_ABI_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED);
	CONST(NVML_ABI_ERROR_NO_PERMISSION, NVML_ERROR_NO_PERMISSION);
	CONST(NVML_ABI_ERROR_NOT_FOUND, NVML_ERROR_NOT_FOUND);
	CONST(NVML_ABI_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INSUFFICIENT_SIZE);
	CONST(NVML_ABI_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_DRIVER_NOT_LOADED);
	CONST(NVML_ABI_ERROR_TIMEOUT, NVML_ERROR_TIMEOUT);
	CONST(NVML_ABI_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND);
	CONST(NVML_ABI_ERROR_GPU_IS_LOST, NVML_ERROR_GPU_IS_LOST);
	CONST(NVML_ABI_ERROR_LIB_RM_VERSION_MISMATCH, NVML_ERROR_LIB_RM_VERSION_MISMATCH);
	CONST(NVML_ABI_ERROR_MEMORY, NVML_ERROR_MEMORY);
	CONST(NVML_ABI_ERROR_NO_DATA, NVML_ERROR_NO_DATA);
	CONST(NVML_ABI_ERROR_ARGUMENT_VERSION_MISMATCH, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	CONST(NVML_ABI_ERROR_NOT_READY, NVML_ERROR_NOT_READY);
	CONST(NVML_ABI_ERROR_GPU_NOT_FOUND, NVML_ERROR_GPU_NOT_FOUND);
	CONST(NVML_ABI_ERROR_INVALID_STATE, NVML_ERROR_INVALID_STATE);
	CONST(NVML_ABI_ERROR_UNKNOWN, NVML_ERROR_UNKNOWN);
	CONST(NVML_ABI_DEVICE_UUID_BUFFER_SIZE, NVML_DEVICE_UUID_BUFFER_SIZE);
	CONST(NVML_ABI_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
	CONST(NVML_ABI_DEVICE_SERIAL_BUFFER_SIZE, NVML_DEVICE_SERIAL_BUFFER_SIZE);
	CONST(NVML_ABI_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
	CONST(NVML_ABI_DEVICE_PCI_BUS_ID_BUFFER_SIZE, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
	CONST(NVML_ABI_CLOCK_SM, NVML_CLOCK_SM);
	CONST(NVML_ABI_CLOCK_MEM, NVML_CLOCK_MEM);
	CONST(NVML_ABI_TEMPERATURE_GPU, NVML_TEMPERATURE_GPU);
	CONST(NVML_ABI_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED);
	CONST(NVML_ABI_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
	CONST(NVML_ABI_VOLATILE_ECC, NVML_VOLATILE_ECC);
	CONST(NVML_ABI_AGGREGATE_ECC, NVML_AGGREGATE_ECC);
	CONST(NVML_ABI_FEATURE_ENABLED, NVML_FEATURE_ENABLED);
	CONST(NVML_ABI_DEVICE_ARCH_AMPERE, NVML_DEVICE_ARCH_AMPERE);
	CONST(NVML_ABI_DEVICE_ARCH_HOPPER, NVML_DEVICE_ARCH_HOPPER);
	CONST(NVML_ABI_CLOCKS_EVENT_REASON_GPU_IDLE, nvmlClocksEventReasonGpuIdle);
	CONST(NVML_ABI_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING, nvmlClocksEventReasonApplicationsClocksSetting);
	CONST(NVML_ABI_CLOCKS_EVENT_REASON_SW_POWER_CAP, nvmlClocksEventReasonSwPowerCap);
	CONST(NVML_ABI_CLOCKS_THROTTLE_REASON_HW_SLOWDOWN, nvmlClocksThrottleReasonHwSlowdown);
	CONST(NVML_ABI_CLOCKS_EVENT_REASON_SYNC_BOOST, nvmlClocksEventReasonSyncBoost);
	CONST(NVML_ABI_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN, nvmlClocksEventReasonSwThermalSlowdown);
	CONST(NVML_ABI_CLOCKS_THROTTLE_REASON_HW_THERMAL_SLOWDOWN, nvmlClocksThrottleReasonHwThermalSlowdown);
	CONST(NVML_ABI_CLOCKS_THROTTLE_REASON_HW_POWER_BRAKE_SLOWDOWN, nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
	CONST(NVML_ABI_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING, nvmlClocksEventReasonDisplayClockSetting);
	CONST(NVML_ABI_EVENT_TYPE_SINGLE_BIT_ECC_ERROR, nvmlEventTypeSingleBitEccError);
	CONST(NVML_ABI_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR, nvmlEventTypeDoubleBitEccError);
	CONST(NVML_ABI_EVENT_TYPE_PSTATE, nvmlEventTypePState);
	CONST(NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR, nvmlEventTypeXidCriticalError);
	CONST(NVML_ABI_EVENT_TYPE_CLOCK, nvmlEventTypeClock);
	CONST(NVML_ABI_FI_DEV_ECC_CURRENT, NVML_FI_DEV_ECC_CURRENT);
	CONST(NVML_ABI_FI_DEV_ECC_SBE_VOL_TOTAL, NVML_FI_DEV_ECC_SBE_VOL_TOTAL);
	CONST(NVML_ABI_FI_DEV_ECC_DBE_VOL_TOTAL, NVML_FI_DEV_ECC_DBE_VOL_TOTAL);
	CONST(NVML_ABI_FI_DEV_ECC_SBE_AGG_TOTAL, NVML_FI_DEV_ECC_SBE_AGG_TOTAL);
	CONST(NVML_ABI_FI_DEV_ECC_DBE_AGG_TOTAL, NVML_FI_DEV_ECC_DBE_AGG_TOTAL);
	CONST(NVML_ABI_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_MEMORY_TEMP);
	CONST(NVML_ABI_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION);
	CONST(NVML_ABI_FI_DEV_PCIE_REPLAY_COUNTER, NVML_FI_DEV_PCIE_REPLAY_COUNTER);
	SIZE(struct nvml_violation_time, nvmlViolationTime_t);
	OFF(struct nvml_violation_time, violation_time, nvmlViolationTime_t, violationTime);
	CONST(NVML_ABI_PERF_POLICY_POWER, NVML_PERF_POLICY_POWER);
	CONST(NVML_ABI_PERF_POLICY_THERMAL, NVML_PERF_POLICY_THERMAL);
	CONST(NVML_ABI_PERF_POLICY_SYNC_BOOST, NVML_PERF_POLICY_SYNC_BOOST);
	CONST(NVML_ABI_PERF_POLICY_BOARD_LIMIT, NVML_PERF_POLICY_BOARD_LIMIT);
	CONST(NVML_ABI_PERF_POLICY_LOW_UTILIZATION, NVML_PERF_POLICY_LOW_UTILIZATION);
	CONST(NVML_ABI_PERF_POLICY_RELIABILITY, NVML_PERF_POLICY_RELIABILITY);
	CONST(NVML_ABI_PERF_POLICY_TOTAL_APP_CLOCKS, NVML_PERF_POLICY_TOTAL_APP_CLOCKS);
	CONST(NVML_ABI_PERF_POLICY_TOTAL_BASE_CLOCKS, NVML_PERF_POLICY_TOTAL_BASE_CLOCKS);
	CONST(NVML_ABI_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_REPLAY);
	CONST(NVML_ABI_NVLINK_ERROR_DL_RECOVERY, NVML_NVLINK_ERROR_DL_RECOVERY);
	CONST(NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT, NVML_NVLINK_ERROR_DL_CRC_FLIT);
	CONST(NVML_ABI_NVLINK_ERROR_DL_CRC_DATA, NVML_NVLINK_ERROR_DL_CRC_DATA);
	CONST(NVML_ABI_NVLINK_MAX_LINKS, NVML_NVLINK_MAX_LINKS);
	CONST(NVML_ABI_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
	      NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
	CONST(NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
	CONST(NVML_ABI_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_COR);
	CONST(NVML_ABI_FI_DEV_REMAPPED_UNC, NVML_FI_DEV_REMAPPED_UNC);
	CONST(NVML_ABI_FI_DEV_REMAPPED_PENDING, NVML_FI_DEV_REMAPPED_PENDING);
	CONST(NVML_ABI_FI_DEV_REMAPPED_FAILURE, NVML_FI_DEV_REMAPPED_FAILURE);
	CONST(NVML_ABI_FI_DEV_POWER_INSTANT, NVML_FI_DEV_POWER_INSTANT);
	CONST(NVML_ABI_VALUE_TYPE_DOUBLE, NVML_VALUE_TYPE_DOUBLE);
	CONST(NVML_ABI_VALUE_TYPE_UNSIGNED_INT, NVML_VALUE_TYPE_UNSIGNED_INT);
	CONST(NVML_ABI_VALUE_TYPE_UNSIGNED_LONG_LONG, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
	CONST(NVML_ABI_VALUE_TYPE_SIGNED_LONG_LONG, NVML_VALUE_TYPE_SIGNED_LONG_LONG);
	CONST(NVML_ABI_GPM_METRIC_GRAPHICS_UTIL, NVML_GPM_METRIC_GRAPHICS_UTIL);
	CONST(NVML_ABI_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_UTIL);
	CONST(NVML_ABI_GPM_METRIC_SM_OCCUPANCY, NVML_GPM_METRIC_SM_OCCUPANCY);
	CONST(NVML_ABI_GPM_METRIC_INTEGER_UTIL, NVML_GPM_METRIC_INTEGER_UTIL);
	CONST(NVML_ABI_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL);
	CONST(NVML_ABI_GPM_METRIC_DFMA_TENSOR_UTIL, NVML_GPM_METRIC_DFMA_TENSOR_UTIL);
	CONST(NVML_ABI_GPM_METRIC_HMMA_TENSOR_UTIL, NVML_GPM_METRIC_HMMA_TENSOR_UTIL);
	CONST(NVML_ABI_GPM_METRIC_IMMA_TENSOR_UTIL, NVML_GPM_METRIC_IMMA_TENSOR_UTIL);
	CONST(NVML_ABI_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL);
	CONST(NVML_ABI_GPM_METRIC_FP64_UTIL, NVML_GPM_METRIC_FP64_UTIL);
	CONST(NVML_ABI_GPM_METRIC_FP32_UTIL, NVML_GPM_METRIC_FP32_UTIL);
	CONST(NVML_ABI_GPM_METRIC_FP16_UTIL, NVML_GPM_METRIC_FP16_UTIL);
	CONST(NVML_ABI_GPM_METRIC_PCIE_TX_PER_SEC, NVML_GPM_METRIC_PCIE_TX_PER_SEC);
	CONST(NVML_ABI_GPM_METRIC_PCIE_RX_PER_SEC, NVML_GPM_METRIC_PCIE_RX_PER_SEC);
	CONST(NVML_ABI_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC);
	CONST(NVML_ABI_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC);

	printf("nvml_conformance: %d checks, %d mismatches (nvml.h API version %d)\n", checks,
	       failures, NVML_API_VERSION);
	return failures ? 1 : 0;
}
