/* The part of the CUDA driver API (libcuda.so.1) and of cuBLASLt
 * (libcublasLt.so.N) that `gpulse bench` uses, declared by the project
 * itself, as nvml_abi.h does for NVML (DESIGN.md, decision 1): the build
 * needs neither the CUDA toolkit nor its headers, and a machine without
 * them builds and runs everything but the benchmark, which says what is
 * missing. Names are ours (cu_*, culib_*, CU_ABI_*, CUBLASLT_ABI_*), so
 * the file can be compiled beside the real cuda.h and cublasLt.h to check
 * the values (scripts/gpu-check.sh, section bench, does that).
 *
 * Values are those of CUDA 13.0's cuda.h, library_types.h, cublas_api.h
 * and cublasLt.h; every one used here has been stable since CUDA 11. The
 * versioned driver entry points are named as cuda.h's #defines map them
 * (cuMemAlloc -> cuMemAlloc_v2); cuda_lib.c falls back to the older name
 * where an older driver lacks the newer. */
#ifndef GPULSE_CUDA_ABI_H
#define GPULSE_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef int cu_result_t;              /* CUresult */
typedef int cu_device_t;              /* CUdevice */
typedef struct cu_ctx_st *cu_ctx_t;   /* CUcontext */
typedef struct cu_mod_st *cu_module_t;
typedef struct cu_func_st *cu_function_t;
typedef struct cu_stream_st *cu_stream_t;
typedef struct cu_event_st *cu_event_t;
typedef unsigned long long cu_deviceptr_t; /* CUdeviceptr (64-bit) */

struct cu_uuid {
	unsigned char bytes[16];
};

/* CUresult */
#define CU_ABI_SUCCESS 0
#define CU_ABI_ERROR_INVALID_VALUE 1
#define CU_ABI_ERROR_OUT_OF_MEMORY 2
#define CU_ABI_ERROR_NOT_INITIALIZED 3
#define CU_ABI_ERROR_NO_DEVICE 100
#define CU_ABI_ERROR_INVALID_DEVICE 101
#define CU_ABI_ERROR_INVALID_PTX 218
#define CU_ABI_ERROR_UNSUPPORTED_PTX_VERSION 222
#define CU_ABI_ERROR_NOT_READY 600
#define CU_ABI_ERROR_SYSTEM_DRIVER_MISMATCH 803

/* CUdevice_attribute */
#define CU_ABI_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76

/* Flags */
#define CU_ABI_STREAM_NON_BLOCKING 0x1
#define CU_ABI_EVENT_DEFAULT 0x0

/* cudaDataType_t (library_types.h) */
#define CUDA_ABI_R_32F 0
#define CUDA_ABI_R_64F 1
#define CUDA_ABI_R_16F 2
#define CUDA_ABI_R_16BF 14
#define CUDA_ABI_R_8F_E4M3 28

/* cublasComputeType_t (cublas_api.h) */
#define CUBLAS_ABI_COMPUTE_32F 68
#define CUBLAS_ABI_COMPUTE_32F_FAST_TF32 77
#define CUBLAS_ABI_COMPUTE_64F 70

/* cublasStatus_t, cublasOperation_t */
#define CUBLAS_ABI_STATUS_SUCCESS 0
#define CUBLAS_ABI_STATUS_NOT_SUPPORTED 15
#define CUBLAS_ABI_OP_N 0
#define CUBLAS_ABI_OP_T 1

/* cublasLtMatmulDescAttributes_t (int32_t values: cublasOperation_t) */
#define CUBLASLT_ABI_MATMUL_DESC_TRANSA 3
#define CUBLASLT_ABI_MATMUL_DESC_TRANSB 4
/* cublasLtMatmulPreferenceAttributes_t (uint64_t value) */
#define CUBLASLT_ABI_MATMUL_PREF_MAX_WORKSPACE_BYTES 1

typedef int culib_status_t;                        /* cublasStatus_t */
typedef struct culib_handle_st *culib_handle_t;    /* cublasLtHandle_t */
typedef struct culib_desc_st *culib_desc_t;        /* cublasLtMatmulDesc_t */
typedef struct culib_layout_st *culib_layout_t;    /* cublasLtMatrixLayout_t */
typedef struct culib_pref_st *culib_pref_t;        /* cublasLtMatmulPreference_t */

/* cublasLtMatmulAlgo_t: opaque, 8 words. */
struct culib_algo {
	uint64_t data[8];
};

/* cublasLtMatmulHeuristicResult_t */
struct culib_heuristic {
	struct culib_algo algo;
	size_t workspace_size;
	culib_status_t state;
	float waves_count;
	int reserved[4];
};

#endif
