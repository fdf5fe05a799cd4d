// A CUDA program whose GPU work is known exactly, for checking what
// libgpulse-inject.so records (scripts/gpu-check.sh, section inject).
// It writes what it did to argv[1] as JSON; tests/gpu/inject_check.py
// compares that with the library's dump (GPULSE_INJECT_DUMP).
//
// Work: three named kernels (one a template) with fixed launch counts,
// two streams; H2D/D2H copies from pinned and pageable memory, D2D
// copies, memsets, all with known sizes; managed memory touched by the
// CPU then the GPU then the CPU (page faults, migrations); NVTX ranges
// (nested push/pop, and one start/end range); and one
// cudaProfilerStart/Stop region holding k_inside.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x)                                                                        \
	do {                                                                            \
		cudaError_t e_ = (x);                                                   \
		if (e_ != cudaSuccess) {                                                \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,     \
				cudaGetErrorString(e_));                                \
			exit(2);                                                        \
		}                                                                       \
	} while (0)

__global__ void k_add(float *a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] += 1.0f;
}

template <typename T> __global__ void k_scale(T *a, T s, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		a[i] *= s;
}

__global__ void k_empty(void) {}
__global__ void k_inside(float *a) { a[threadIdx.x] += 2.0f; }
__global__ void k_nvtx(float *a) { a[threadIdx.x] -= 1.0f; }

__global__ void k_touch(char *p, size_t n, size_t stride)
{
	size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * stride;
	if (i < n)
		p[i] += 1;
}

enum { ADD = 100, SCALE = 37, EMPTY = 1000, INSIDE = 20, NVTX_OUTER = 3, NVTX_INNER = 2 };
static const size_t MiB = 1u << 20;

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: inject_known EXPECTED.json\n");
		return 2;
	}
	CHECK(cudaFree(0)); // CUDA (and the injection) start here, before any NVTX call
	const int n = 1 << 20;
	float *d;
	CHECK(cudaMalloc(&d, 64 * MiB));
	cudaStream_t s1, s2;
	CHECK(cudaStreamCreate(&s1));
	CHECK(cudaStreamCreate(&s2));
	for (int i = 0; i < ADD; i++)
		k_add<<<n / 256, 256, 0, i % 2 ? s1 : s2>>>(d, n);
	for (int i = 0; i < SCALE; i++)
		k_scale<float><<<n / 128, 128, 0, s1>>>(d, 1.0f, n);
	for (int i = 0; i < EMPTY; i++)
		k_empty<<<1, 32>>>();
	CHECK(cudaDeviceSynchronize());

	// Copies: [kind, pinned, count, bytes each]
	char *pinned, *pageable, *d2;
	CHECK(cudaMallocHost(&pinned, 8 * MiB));
	pageable = (char *)malloc(8 * MiB);
	memset(pageable, 1, 8 * MiB);
	CHECK(cudaMalloc(&d2, 64 * MiB));
	for (int i = 0; i < 10; i++)
		CHECK(cudaMemcpy(d2, pinned, 1 * MiB, cudaMemcpyHostToDevice));
	for (int i = 0; i < 5; i++)
		CHECK(cudaMemcpy(d2, pageable, 3 * MiB, cudaMemcpyHostToDevice));
	for (int i = 0; i < 7; i++)
		CHECK(cudaMemcpy(pinned, d2, 2 * MiB, cudaMemcpyDeviceToHost));
	for (int i = 0; i < 3; i++)
		CHECK(cudaMemcpy(pageable, d2, 1 * MiB, cudaMemcpyDeviceToHost));
	for (int i = 0; i < 4; i++)
		CHECK(cudaMemcpy(d2, d, 8 * MiB, cudaMemcpyDeviceToDevice));
	for (int i = 0; i < 6; i++)
		CHECK(cudaMemset(d2, 0, 4 * MiB));
	CHECK(cudaDeviceSynchronize());

	// Managed memory: CPU writes, GPU touches every 4 KiB page, CPU reads.
	const size_t mbytes = 32 * MiB;
	char *m;
	CHECK(cudaMallocManaged(&m, mbytes));
	memset(m, 3, mbytes);
	size_t pages = mbytes / 4096;
	k_touch<<<(unsigned)((pages + 255) / 256), 256>>>(m, mbytes, 4096);
	CHECK(cudaDeviceSynchronize());
	long sum = 0;
	for (size_t i = 0; i < mbytes; i += 4096)
		sum += m[i];
	if (sum != (long)pages * 4) {
		fprintf(stderr, "managed memory check failed: %ld\n", sum);
		return 1;
	}

	// NVTX: outer ranges each holding NVTX_INNER inner ranges with a kernel.
	for (int o = 0; o < NVTX_OUTER; o++) {
		nvtxRangePushA("phase_a");
		for (int i = 0; i < NVTX_INNER; i++) {
			nvtxRangePushA("inner");
			k_nvtx<<<1, 32>>>(d);
			CHECK(cudaDeviceSynchronize());
			nvtxRangePop();
		}
		nvtxRangePop();
	}
	// And one start/end range of the same name (nvtxRangeStartA returns
	// the id that nvtxRangeEnd closes), holding NVTX_INNER more kernels.
	nvtxRangeId_t rid = nvtxRangeStartA("phase_a");
	for (int i = 0; i < NVTX_INNER; i++)
		k_nvtx<<<1, 32>>>(d);
	CHECK(cudaDeviceSynchronize());
	nvtxRangeEnd(rid);

	// One profiler region.
	CHECK(cudaProfilerStart());
	for (int i = 0; i < INSIDE; i++)
		k_inside<<<1, 32>>>(d);
	CHECK(cudaDeviceSynchronize());
	CHECK(cudaProfilerStop());
	CHECK(cudaDeviceSynchronize());

	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 2;
	fprintf(f,
		"{\"kernels\": {\"k_add(\": %d, \"k_scale<float>(\": %d, \"k_empty(\": %d, "
		"\"k_nvtx(\": %d, \"k_inside(\": %d, \"k_touch(\": 1},\n"
		" \"kernel_shape\": {\"k_add(\": {\"grid\": [%d, 1, 1], \"block\": [256, 1, 1]}},\n"
		" \"copies\": [\n"
		"  {\"kind\": \"H2D\", \"pinned\": true, \"count\": 10, \"bytes\": %zu},\n"
		"  {\"kind\": \"H2D\", \"pinned\": false, \"count\": 5, \"bytes\": %zu},\n"
		"  {\"kind\": \"D2H\", \"pinned\": true, \"count\": 7, \"bytes\": %zu},\n"
		"  {\"kind\": \"D2H\", \"pinned\": false, \"count\": 3, \"bytes\": %zu},\n"
		"  {\"kind\": \"D2D\", \"pinned\": true, \"count\": 4, \"bytes\": %zu},\n"
		"  {\"kind\": \"memset\", \"pinned\": true, \"count\": 6, \"bytes\": %zu}],\n"
		" \"ranges\": {\"phase_a\": %d, \"inner\": %d},\n"
		" \"nvtx_kernel\": \"k_nvtx(\", \"profiler_kernel\": \"k_inside(\",\n"
		" \"managed_bytes\": %zu}\n",
		ADD, SCALE, EMPTY, (NVTX_OUTER + 1) * NVTX_INNER, INSIDE, n / 256, 10 * MiB, 15 * MiB,
		14 * MiB, 3 * MiB, 32 * MiB, 24 * MiB, NVTX_OUTER + 1, NVTX_OUTER * NVTX_INNER, mbytes);
	fclose(f);
	printf("inject_known: done\n");
	return 0;
}
