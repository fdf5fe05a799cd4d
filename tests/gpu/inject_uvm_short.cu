// tests/gpu/inject_names_uvm.sh: a program of well under a second: 256 MiB of
// managed memory written on the host, read by a kernel (H2D migration), read
// back on the host (D2H), then it exits. How many bytes the driver migrates
// on faults is its choice (it varies from run to run); with "prefetch" the
// memory is moved by cudaMemPrefetchAsync to the GPU before the kernel and
// back to the host after it, 256 MiB each way, a truth known in advance.
// "linger": a second's sleep before the exit.
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void touch(float *p, size_t n) {
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	for (; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] += 1.0f;
}
int main(int argc, char **argv) {
	size_t bytes = 256ull << 20, n = bytes / sizeof(float);
	float *p;
	if (cudaMallocManaged(&p, bytes) != cudaSuccess) return 1;
	int prefetch = argc > 1 && strcmp(argv[1], "prefetch") == 0;
	cudaMemLocation gpu = {cudaMemLocationTypeDevice, 0}, host = {cudaMemLocationTypeHost, 0};
	for (size_t i = 0; i < n; i++) p[i] = 1.0f;       // on the host
	if (prefetch && cudaMemPrefetchAsync(p, bytes, gpu, 0, 0) != cudaSuccess) return 1;
	touch<<<1024, 256>>>(p, n);                        // migrates to the GPU
	if (prefetch && cudaMemPrefetchAsync(p, bytes, host, 0, 0) != cudaSuccess) return 1;
	cudaDeviceSynchronize();
	double s = 0;
	for (size_t i = 0; i < n; i += 1024) s += p[i];   // back to the host
	printf("sum %.0f\n", s);
	if (argc > 1 && strcmp(argv[1], "linger") == 0)
		sleep(1); // the counters' records given a second before the exit
	cudaFree(p);
	return 0;
}
