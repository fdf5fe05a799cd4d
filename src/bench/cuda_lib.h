/* The CUDA driver API and cuBLASLt, opened with dlopen into tables of
 * function pointers (DESIGN.md, decision 1), for `gpulse bench` only:
 * the rest of gpulse never touches CUDA. The ABI is declared in
 * cuda_abi.h. Every symbol listed is required: a library lacking one is
 * refused with a sentence naming it. */
#ifndef GPULSE_CUDA_LIB_H
#define GPULSE_CUDA_LIB_H

#include <stddef.h>

#include "bench/cuda_abi.h"

/* X(member, symbol, older symbol or NULL, parameter list) */
#define CUDA_FUNCS(X)                                                                   \
	X(init, "cuInit", NULL, (unsigned int))                                         \
	X(driver_get_version, "cuDriverGetVersion", NULL, (int *))                      \
	X(device_get_count, "cuDeviceGetCount", NULL, (int *))                          \
	X(device_get, "cuDeviceGet", NULL, (cu_device_t *, int))                        \
	X(device_get_attribute, "cuDeviceGetAttribute", NULL, (int *, int, cu_device_t)) \
	X(device_get_name, "cuDeviceGetName", NULL, (char *, int, cu_device_t))         \
	X(device_get_uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid", (struct cu_uuid *, cu_device_t)) \
	X(primary_ctx_retain, "cuDevicePrimaryCtxRetain", NULL, (cu_ctx_t *, cu_device_t)) \
	X(primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", \
	  (cu_device_t))                                                                \
	X(ctx_set_current, "cuCtxSetCurrent", NULL, (cu_ctx_t))                         \
	X(ctx_synchronize, "cuCtxSynchronize", NULL, (void))                            \
	X(mem_get_info, "cuMemGetInfo_v2", "cuMemGetInfo", (size_t *, size_t *))        \
	X(mem_alloc, "cuMemAlloc_v2", "cuMemAlloc", (cu_deviceptr_t *, size_t))         \
	X(mem_free, "cuMemFree_v2", "cuMemFree", (cu_deviceptr_t))                      \
	X(mem_alloc_host, "cuMemAllocHost_v2", "cuMemAllocHost", (void **, size_t))     \
	X(mem_free_host, "cuMemFreeHost", NULL, (void *))                               \
	X(memcpy_htod_async, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync",               \
	  (cu_deviceptr_t, const void *, size_t, cu_stream_t))                          \
	X(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync",               \
	  (void *, cu_deviceptr_t, size_t, cu_stream_t))                                \
	X(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync",               \
	  (cu_deviceptr_t, cu_deviceptr_t, size_t, cu_stream_t))                        \
	X(stream_create, "cuStreamCreate", NULL, (cu_stream_t *, unsigned int))         \
	X(stream_destroy, "cuStreamDestroy_v2", "cuStreamDestroy", (cu_stream_t))       \
	X(stream_synchronize, "cuStreamSynchronize", NULL, (cu_stream_t))               \
	X(event_create, "cuEventCreate", NULL, (cu_event_t *, unsigned int))            \
	X(event_destroy, "cuEventDestroy_v2", "cuEventDestroy", (cu_event_t))           \
	X(event_record, "cuEventRecord", NULL, (cu_event_t, cu_stream_t))               \
	X(event_synchronize, "cuEventSynchronize", NULL, (cu_event_t))                  \
	X(event_elapsed_time, "cuEventElapsedTime_v2", "cuEventElapsedTime",            \
	  (float *, cu_event_t, cu_event_t))                                            \
	X(module_load_data, "cuModuleLoadData", NULL, (cu_module_t *, const void *))    \
	X(module_unload, "cuModuleUnload", NULL, (cu_module_t))                         \
	X(module_get_function, "cuModuleGetFunction", NULL,                             \
	  (cu_function_t *, cu_module_t, const char *))                                 \
	X(launch_kernel, "cuLaunchKernel", NULL,                                        \
	  (cu_function_t, unsigned int, unsigned int, unsigned int, unsigned int,       \
	   unsigned int, unsigned int, unsigned int, cu_stream_t, void **, void **))

#define CUBLASLT_FUNCS(X)                                                               \
	X(create, "cublasLtCreate", NULL, (culib_handle_t *))                           \
	X(destroy, "cublasLtDestroy", NULL, (culib_handle_t))                           \
	X(desc_create, "cublasLtMatmulDescCreate", NULL, (culib_desc_t *, int, int))    \
	X(desc_destroy, "cublasLtMatmulDescDestroy", NULL, (culib_desc_t))              \
	X(desc_set, "cublasLtMatmulDescSetAttribute", NULL,                             \
	  (culib_desc_t, int, const void *, size_t))                                    \
	X(layout_create, "cublasLtMatrixLayoutCreate", NULL,                            \
	  (culib_layout_t *, int, uint64_t, uint64_t, int64_t))                         \
	X(layout_destroy, "cublasLtMatrixLayoutDestroy", NULL, (culib_layout_t))        \
	X(pref_create, "cublasLtMatmulPreferenceCreate", NULL, (culib_pref_t *))        \
	X(pref_destroy, "cublasLtMatmulPreferenceDestroy", NULL, (culib_pref_t))        \
	X(pref_set, "cublasLtMatmulPreferenceSetAttribute", NULL,                       \
	  (culib_pref_t, int, const void *, size_t))                                    \
	X(heuristic, "cublasLtMatmulAlgoGetHeuristic", NULL,                            \
	  (culib_handle_t, culib_desc_t, culib_layout_t, culib_layout_t, culib_layout_t, \
	   culib_layout_t, culib_pref_t, int, struct culib_heuristic *, int *))         \
	X(matmul, "cublasLtMatmul", NULL,                                               \
	  (culib_handle_t, culib_desc_t, const void *, const void *, culib_layout_t,    \
	   const void *, culib_layout_t, const void *, const void *, culib_layout_t,    \
	   void *, culib_layout_t, const struct culib_algo *, void *, size_t, cu_stream_t))

struct cuda_lib {
	void *handle;
	char path[256];
#define CUDA_FN_MEMBER(member, sym, alt, params) cu_result_t(*member) params;
	CUDA_FUNCS(CUDA_FN_MEMBER)
#undef CUDA_FN_MEMBER
	cu_result_t (*get_error_name)(cu_result_t, const char **);  /* optional */
};

struct cublaslt_lib {
	void *handle;
	char path[256];
	size_t version;          /* cublasLtGetVersion(): 130000 for 13.0.0; 0 unknown */
#define CUBLASLT_FN_MEMBER(member, sym, alt, params) culib_status_t(*member) params;
	CUBLASLT_FUNCS(CUBLASLT_FN_MEMBER)
#undef CUBLASLT_FN_MEMBER
};

/* Open the driver API: `path`, else $GPULSE_CUDA_LIBRARY, else
 * "libcuda.so.1", and call cuInit(0). 0 with *out the caller's
 * (cuda_lib_close), or GPULSE_ENOLIB (no library or a symbol missing),
 * GPULSE_ENODRIVER (cuInit failed: no device, driver mismatch), with one
 * sentence in err. */
int cuda_lib_open(struct cuda_lib **out, const char *path, char *err, size_t errlen);
void cuda_lib_close(struct cuda_lib *cu);  /* accepts NULL */
/* "CUDA_ERROR_OUT_OF_MEMORY" or "CUresult 2"; static or thread-local. */
const char *cuda_lib_strerror(const struct cuda_lib *cu, cu_result_t r);

/* Open cuBLASLt: `path` when given (only it), else $GPULSE_CUBLASLT, else
 * libcublasLt.so.13, .12, .11 in that order. 0 with *out the caller's
 * (cublaslt_lib_close), or GPULSE_ENOLIB with a sentence saying what was
 * tried and what dlopen said. */
int cublaslt_lib_open(struct cublaslt_lib **out, const char *path, char *err, size_t errlen);
void cublaslt_lib_close(struct cublaslt_lib *lt);  /* accepts NULL */

#endif
