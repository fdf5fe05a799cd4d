/* src/bench/cuda_abi.h against the real CUDA headers: every constant and
 * the layouts gpulse bench passes to libcuda and cuBLASLt. Built and run by
 * scripts/gpu-check.sh (section bench) with -I/usr/local/cuda/include;
 * compiling is the test (static assertions), running prints a line. */
#include <stddef.h>
#include <stdio.h>

#include <cublasLt.h>
#include <cuda.h>

#include "bench/cuda_abi.h"

#define SAME(ours, theirs) _Static_assert((ours) == (theirs), #ours " != " #theirs)

SAME(CU_ABI_SUCCESS, CUDA_SUCCESS);
SAME(CU_ABI_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME(CU_ABI_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(CU_ABI_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME(CU_ABI_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(CU_ABI_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME(CU_ABI_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_PTX);
SAME(CU_ABI_ERROR_UNSUPPORTED_PTX_VERSION, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
SAME(CU_ABI_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME(CU_ABI_ERROR_SYSTEM_DRIVER_MISMATCH, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
SAME(CU_ABI_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
SAME(CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME(CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME(CU_ABI_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME(CU_ABI_EVENT_DEFAULT, CU_EVENT_DEFAULT);
SAME(sizeof(cu_deviceptr_t), sizeof(CUdeviceptr));
SAME(sizeof(cu_device_t), sizeof(CUdevice));
SAME(sizeof(cu_result_t), sizeof(CUresult));
SAME(sizeof(struct cu_uuid), sizeof(CUuuid));

SAME(CUDA_ABI_R_32F, CUDA_R_32F);
SAME(CUDA_ABI_R_64F, CUDA_R_64F);
SAME(CUDA_ABI_R_16F, CUDA_R_16F);
SAME(CUDA_ABI_R_16BF, CUDA_R_16BF);
SAME(CUDA_ABI_R_8F_E4M3, CUDA_R_8F_E4M3);
SAME(CUBLAS_ABI_COMPUTE_32F, CUBLAS_COMPUTE_32F);
SAME(CUBLAS_ABI_COMPUTE_32F_FAST_TF32, CUBLAS_COMPUTE_32F_FAST_TF32);
SAME(CUBLAS_ABI_COMPUTE_64F, CUBLAS_COMPUTE_64F);
SAME(CUBLAS_ABI_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS);
SAME(CUBLAS_ABI_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_NOT_SUPPORTED);
SAME(CUBLAS_ABI_OP_N, CUBLAS_OP_N);
SAME(CUBLAS_ABI_OP_T, CUBLAS_OP_T);
SAME(CUBLASLT_ABI_MATMUL_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA);
SAME(CUBLASLT_ABI_MATMUL_DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB);
SAME(CUBLASLT_ABI_MATMUL_PREF_MAX_WORKSPACE_BYTES, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
SAME(sizeof(culib_status_t), sizeof(cublasStatus_t));
SAME(sizeof(struct culib_algo), sizeof(cublasLtMatmulAlgo_t));
SAME(sizeof(struct culib_heuristic), sizeof(cublasLtMatmulHeuristicResult_t));
SAME(offsetof(struct culib_heuristic, workspace_size),
     offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
SAME(offsetof(struct culib_heuristic, state), offsetof(cublasLtMatmulHeuristicResult_t, state));
SAME(offsetof(struct culib_heuristic, waves_count),
     offsetof(cublasLtMatmulHeuristicResult_t, wavesCount));
/* The attribute value types: int32 operations, a uint64 workspace. */
SAME(sizeof(int32_t), sizeof(cublasOperation_t));

int main(void)
{
	printf("bench_abi_conformance: cuda_abi.h matches cuda.h %d and cublasLt.h %d.%d.%d\n",
	       CUDA_VERSION, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
	return 0;
}
