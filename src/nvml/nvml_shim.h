/* The NVML shim: libnvidia-ml.so.1 opened with dlopen into one table of
 * function pointers (DESIGN.md, decision 1). Required symbols must resolve
 * or the open fails with a clear message; optional ones may be NULL and
 * each caller checks. Versioned entry points fall back to older names
 * (nvmlInit_v2 -> nvmlInit, ..._v3 -> ..._v2).
 *
 * Every call goes through NVML_CALL, which counts calls and errors per
 * function, records latency in a histogram, and tells a per-thread watch
 * (set by collector lanes) which call is in flight and since when, so a
 * watchdog can see a call that hangs. */
#ifndef GPULSE_NVML_SHIM_H
#define GPULSE_NVML_SHIM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "nvml/nvml_abi.h"

/* X(kind, member, symbol, fallback symbol or NULL, parameter list)
 * kind: REQ (open fails without it) or OPT. */
#define NVML_FUNCS(X)                                                                         \
	X(REQ, init, "nvmlInit_v2", "nvmlInit", (void))                                       \
	X(REQ, shutdown, "nvmlShutdown", NULL, (void))                                        \
	X(REQ, device_get_count, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", (unsigned int *)) \
	X(REQ, device_get_handle_by_index, "nvmlDeviceGetHandleByIndex_v2",                   \
	  "nvmlDeviceGetHandleByIndex", (unsigned int, nvml_device_t *))                      \
	X(OPT, system_get_driver_version, "nvmlSystemGetDriverVersion", NULL, (char *, unsigned int)) \
	X(OPT, system_get_nvml_version, "nvmlSystemGetNVMLVersion", NULL, (char *, unsigned int)) \
	X(OPT, system_get_cuda_driver_version, "nvmlSystemGetCudaDriverVersion_v2",           \
	  "nvmlSystemGetCudaDriverVersion", (int *))                                          \
	X(OPT, device_get_handle_by_uuid, "nvmlDeviceGetHandleByUUID", NULL,                  \
	  (const char *, nvml_device_t *))                                                    \
	X(OPT, device_get_name, "nvmlDeviceGetName", NULL, (nvml_device_t, char *, unsigned int)) \
	X(OPT, device_get_uuid, "nvmlDeviceGetUUID", NULL, (nvml_device_t, char *, unsigned int)) \
	X(OPT, device_get_serial, "nvmlDeviceGetSerial", NULL, (nvml_device_t, char *, unsigned int)) \
	X(OPT, device_get_pci_info, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2",     \
	  (nvml_device_t, struct nvml_pci_info *))                                            \
	X(OPT, device_get_architecture, "nvmlDeviceGetArchitecture", NULL, (nvml_device_t, unsigned int *)) \
	X(OPT, device_get_cuda_compute_capability, "nvmlDeviceGetCudaComputeCapability", NULL, \
	  (nvml_device_t, int *, int *))                                                      \
	X(OPT, device_get_mig_mode, "nvmlDeviceGetMigMode", NULL,                             \
	  (nvml_device_t, unsigned int *, unsigned int *))                                    \
	X(OPT, device_get_enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit", NULL,      \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_max_clock_info, "nvmlDeviceGetMaxClockInfo", NULL,                  \
	  (nvml_device_t, int, unsigned int *))                                               \
	X(OPT, device_get_max_pcie_link_generation, "nvmlDeviceGetMaxPcieLinkGeneration", NULL, \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_max_pcie_link_width, "nvmlDeviceGetMaxPcieLinkWidth", NULL,         \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_memory_bus_width, "nvmlDeviceGetMemoryBusWidth", NULL,              \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_num_gpu_cores, "nvmlDeviceGetNumGpuCores", NULL,                    \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_cpu_affinity, "nvmlDeviceGetCpuAffinity", NULL,                     \
	  (nvml_device_t, unsigned int, unsigned long *))                                     \
	X(OPT, device_get_utilization_rates, "nvmlDeviceGetUtilizationRates", NULL,           \
	  (nvml_device_t, struct nvml_utilization *))                                         \
	X(OPT, device_get_memory_info_v2, "nvmlDeviceGetMemoryInfo_v2", NULL,                 \
	  (nvml_device_t, struct nvml_memory_v2 *))                                           \
	X(OPT, device_get_memory_info, "nvmlDeviceGetMemoryInfo", NULL,                       \
	  (nvml_device_t, struct nvml_memory_v1 *))                                           \
	X(OPT, device_get_power_usage, "nvmlDeviceGetPowerUsage", NULL, (nvml_device_t, unsigned int *)) \
	X(OPT, device_get_clock_info, "nvmlDeviceGetClockInfo", NULL,                         \
	  (nvml_device_t, int, unsigned int *))                                               \
	X(OPT, device_get_temperature, "nvmlDeviceGetTemperature", NULL,                      \
	  (nvml_device_t, int, unsigned int *))                                               \
	X(OPT, device_get_performance_state, "nvmlDeviceGetPerformanceState", NULL,           \
	  (nvml_device_t, int *))                                                             \
	X(OPT, device_get_current_clocks_event_reasons, "nvmlDeviceGetCurrentClocksEventReasons", \
	  "nvmlDeviceGetCurrentClocksThrottleReasons", (nvml_device_t, unsigned long long *)) \
	X(OPT, device_get_total_energy_consumption, "nvmlDeviceGetTotalEnergyConsumption", NULL, \
	  (nvml_device_t, unsigned long long *))                                              \
	X(OPT, device_get_compute_running_processes, "nvmlDeviceGetComputeRunningProcesses_v3", NULL, \
	  (nvml_device_t, unsigned int *, struct nvml_process_info *))                        \
	X(OPT, device_get_process_utilization, "nvmlDeviceGetProcessUtilization", NULL,       \
	  (nvml_device_t, struct nvml_process_utilization_sample *, unsigned int *,           \
	   unsigned long long))                                                               \
	X(OPT, device_get_ecc_mode, "nvmlDeviceGetEccMode", NULL, (nvml_device_t, int *, int *)) \
	X(OPT, device_get_total_ecc_errors, "nvmlDeviceGetTotalEccErrors", NULL,              \
	  (nvml_device_t, int, int, unsigned long long *))                                    \
	X(OPT, device_get_remapped_rows, "nvmlDeviceGetRemappedRows", NULL,                   \
	  (nvml_device_t, unsigned int *, unsigned int *, unsigned int *, unsigned int *))    \
	X(OPT, device_get_pcie_replay_counter, "nvmlDeviceGetPcieReplayCounter", NULL,        \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_curr_pcie_link_generation, "nvmlDeviceGetCurrPcieLinkGeneration", NULL, \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_curr_pcie_link_width, "nvmlDeviceGetCurrPcieLinkWidth", NULL,       \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_encoder_utilization, "nvmlDeviceGetEncoderUtilization", NULL,       \
	  (nvml_device_t, unsigned int *, unsigned int *))                                    \
	X(OPT, device_get_decoder_utilization, "nvmlDeviceGetDecoderUtilization", NULL,       \
	  (nvml_device_t, unsigned int *, unsigned int *))                                    \
	X(OPT, device_get_violation_status, "nvmlDeviceGetViolationStatus", NULL,             \
	  (nvml_device_t, int, struct nvml_violation_time *))                                 \
	X(OPT, device_get_nvlink_state, "nvmlDeviceGetNvLinkState", NULL,                     \
	  (nvml_device_t, unsigned int, int *))                                               \
	X(OPT, device_get_nvlink_error_counter, "nvmlDeviceGetNvLinkErrorCounter", NULL,      \
	  (nvml_device_t, unsigned int, int, unsigned long long *))                           \
	X(OPT, device_get_retired_pages, "nvmlDeviceGetRetiredPages", NULL,                   \
	  (nvml_device_t, int, unsigned int *, unsigned long long *))                         \
	X(OPT, device_get_retired_pages_pending_status, "nvmlDeviceGetRetiredPagesPendingStatus", \
	  NULL, (nvml_device_t, int *))                                                       \
	X(OPT, device_get_field_values, "nvmlDeviceGetFieldValues", NULL,                     \
	  (nvml_device_t, int, struct nvml_field_value *))                                    \
	X(OPT, gpm_query_device_support, "nvmlGpmQueryDeviceSupport", NULL,                   \
	  (nvml_device_t, struct nvml_gpm_support *))                                         \
	X(OPT, gpm_sample_alloc, "nvmlGpmSampleAlloc", NULL, (nvml_gpm_sample_t *))           \
	X(OPT, gpm_sample_free, "nvmlGpmSampleFree", NULL, (nvml_gpm_sample_t))               \
	X(OPT, gpm_sample_get, "nvmlGpmSampleGet", NULL, (nvml_device_t, nvml_gpm_sample_t))  \
	X(OPT, gpm_metrics_get, "nvmlGpmMetricsGet", NULL, (struct nvml_gpm_metrics_get *))   \
	X(OPT, event_set_create, "nvmlEventSetCreate", NULL, (nvml_event_set_t *))            \
	X(OPT, device_get_supported_event_types, "nvmlDeviceGetSupportedEventTypes", NULL,    \
	  (nvml_device_t, unsigned long long *))                                              \
	X(OPT, device_register_events, "nvmlDeviceRegisterEvents", NULL,                      \
	  (nvml_device_t, unsigned long long, nvml_event_set_t))                              \
	X(OPT, event_set_wait, "nvmlEventSetWait_v2", "nvmlEventSetWait",                     \
	  (nvml_event_set_t, struct nvml_event_data *, unsigned int))                         \
	X(OPT, event_set_free, "nvmlEventSetFree", NULL, (nvml_event_set_t))                 \
	X(OPT, device_get_max_mig_device_count, "nvmlDeviceGetMaxMigDeviceCount", NULL,       \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_mig_device_handle_by_index, "nvmlDeviceGetMigDeviceHandleByIndex", NULL, \
	  (nvml_device_t, unsigned int, nvml_device_t *))                                     \
	X(OPT, device_get_gpu_instance_id, "nvmlDeviceGetGpuInstanceId", NULL,                \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_compute_instance_id, "nvmlDeviceGetComputeInstanceId", NULL,        \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, gpm_mig_sample_get, "nvmlGpmMigSampleGet", NULL,                               \
	  (nvml_device_t, unsigned int, nvml_gpm_sample_t))                                   \
	X(OPT, device_get_minor_number, "nvmlDeviceGetMinorNumber", NULL,                     \
	  (nvml_device_t, unsigned int *))                                                    \
	X(OPT, device_get_topology_common_ancestor, "nvmlDeviceGetTopologyCommonAncestor", NULL, \
	  (nvml_device_t, nvml_device_t, int *))                                              \
	/* No fallback to the unversioned name: it fills the old nvmlPciInfo_t. */          \
	X(OPT, device_get_nvlink_remote_pci_info, "nvmlDeviceGetNvLinkRemotePciInfo_v2", NULL, \
	  (nvml_device_t, unsigned int, struct nvml_pci_info *))                              \
	X(OPT, device_get_samples, "nvmlDeviceGetSamples", NULL,                              \
	  (nvml_device_t, int, unsigned long long, int *, unsigned int *, struct nvml_sample *))

enum nvml_fn {
#define NVML_FN_ENUM(kind, member, sym, alt, params) NVML_FN_##member,
	NVML_FUNCS(NVML_FN_ENUM)
#undef NVML_FN_ENUM
	NVML_FN_COUNT
};

/* Latency histogram bucket upper bounds in seconds (le labels). Calls on
 * the H200 range from under 1 µs (warm, cheap) to ~3.4 ms (energy), and a
 * hang is anything past the deadline; eight buckets span that, and keep
 * the histogram of ~40 functions to a third of a scrape. */
#define NVML_LATENCY_BUCKETS(X) \
	X(0.00001) X(0.00005) X(0.00025) X(0.001) X(0.005) X(0.025) X(0.1) X(1.0)
#define NVML_LATENCY_BUCKET_COUNT 8

/* Return codes are folded into these classes for the error counter. */
#define NVML_ERROR_CLASSES 32 /* codes 0..30 as themselves, 31 = other */

struct nvml_fn_stats {
	atomic_uint_fast64_t calls;
	atomic_uint_fast64_t latency_ns_sum;
	atomic_uint_fast64_t bucket[NVML_LATENCY_BUCKET_COUNT]; /* not cumulative */
	atomic_uint_fast64_t errors[NVML_ERROR_CLASSES];        /* [0] unused */
};

struct nvml_lib {
	void *handle;
	char path[256];
#define NVML_FN_MEMBER(kind, member, sym, alt, params) nvml_return_t(*member) params;
	NVML_FUNCS(NVML_FN_MEMBER)
#undef NVML_FN_MEMBER
	const char *(*error_string)(nvml_return_t);
	struct nvml_fn_stats stats[NVML_FN_COUNT];
};

/* What a collector lane publishes about the call it is making, so that a
 * watchdog in another thread can see how long it has been inside NVML. */
struct nvml_call_watch {
	atomic_int_fast64_t start_ns; /* monotonic; 0 when not in a call */
	atomic_int fn;                /* enum nvml_fn of the call in flight */
};

/* The calling thread's watch, or NULL. Set by collector lanes. */
extern _Thread_local struct nvml_call_watch *nvml_current_watch;

/* Open `path` (NULL: "libnvidia-ml.so.1"), resolve the table and call
 * nvmlInit. On failure returns GPULSE_ENOLIB (library or required symbol
 * missing), GPULSE_ENODRIVER (driver not loaded) or GPULSE_EVENDOR, and
 * writes one sentence for the user to `err`. On success *out is owned by
 * the caller and released with nvml_lib_close. */
int nvml_lib_open(struct nvml_lib **out, const char *path, char *err, size_t errlen);
/* nvmlShutdown, dlclose and free. Accepts NULL. */
void nvml_lib_close(struct nvml_lib *nv);

/* The name NVML gives `ret` ("Not Supported"), or our own text when the
 * library has no nvmlErrorString. Static storage. */
const char *nvml_lib_strerror(const struct nvml_lib *nv, nvml_return_t ret);
/* A stable short name for metrics labels ("NOT_SUPPORTED", "GPU_IS_LOST"). */
const char *nvml_return_name(nvml_return_t ret);
/* The name of function `fn` as NVML spells it ("nvmlDeviceGetPowerUsage"). */
const char *nvml_fn_name(enum nvml_fn fn);
/* Map an NVML return code to a gpulse status code. */
int nvml_status(nvml_return_t ret);

/* Record one call's outcome; used by NVML_CALL. */
void nvml_account(struct nvml_lib *nv, enum nvml_fn fn, int64_t start_ns, nvml_return_t ret);

static inline void nvml_watch_begin(enum nvml_fn fn, int64_t start_ns)
{
	struct nvml_call_watch *w = nvml_current_watch;
	if (w) {
		atomic_store_explicit(&w->fn, (int)fn, memory_order_relaxed);
		atomic_store_explicit(&w->start_ns, start_ns, memory_order_release);
	}
}

/* Call NVML function `member` through the table, with accounting. The
 * caller must have checked that the optional member is non-NULL. */
#define NVML_CALL(nv, member, ...)                                            \
	__extension__({                                                       \
		int64_t nvml_t0_ = clock_mono_ns();                           \
		nvml_watch_begin(NVML_FN_##member, nvml_t0_);                 \
		nvml_return_t nvml_r_ = (nv)->member(__VA_ARGS__);            \
		nvml_account((nv), NVML_FN_##member, nvml_t0_, nvml_r_);      \
		nvml_r_;                                                      \
	})

#endif
