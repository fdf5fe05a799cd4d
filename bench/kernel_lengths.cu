// Kernels of known length for the injection library's accuracy check
// (scripts/gpu-check.sh accuracy): six kernels that spin on %globaltimer
// for 2, 5, 20, 100, 500 and 2000 us, each its own template instance (so
// its own name), launched in turn on one stream for SECONDS seconds, the
// short ones more often so each holds a fair share of launches and time.
// Prints one JSON line: per kernel, the launches and the span each
// instance saw inside itself (the mean of its own end - start), the truth
// a trace's durations should match up to the launch's ramp.
//   nvcc -O2 -arch=sm_90 -o kernel_lengths bench/kernel_lengths.cu
//   kernel_lengths [SECONDS, default 8]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ unsigned long long gtimer()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

template <int US>
__global__ void spin_us(unsigned long long *span)
{
	unsigned long long t0 = gtimer(), t;
	do {
		t = gtimer();
	} while (t - t0 < (unsigned long long)US * 1000ull);
	if (threadIdx.x == 0 && blockIdx.x == 0)
		atomicAdd(span, t - t0);
}

#define CK(x)                                                                                  \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                          \
		if (e_ != cudaSuccess) {                                                       \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));               \
			return 1;                                                              \
		}                                                                              \
	} while (0)

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 8.0;
	const int us[6] = {2, 5, 20, 100, 500, 2000};
	/* launches per round: about equal time for the long ones, more
	 * launches for the short ones */
	const int per_round[6] = {40, 20, 10, 4, 1, 1};
	unsigned long long *span;
	CK(cudaMalloc(&span, sizeof(unsigned long long) * 6));
	CK(cudaMemset(span, 0, sizeof(unsigned long long) * 6));
	long launches[6] = {0};
	auto t0 = std::chrono::steady_clock::now();
	while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
		for (int k = 0; k < 6; k++)
			for (int i = 0; i < per_round[k]; i++) {
				switch (k) {
				case 0: spin_us<2><<<1, 32>>>(span + 0); break;
				case 1: spin_us<5><<<1, 32>>>(span + 1); break;
				case 2: spin_us<20><<<1, 32>>>(span + 2); break;
				case 3: spin_us<100><<<1, 32>>>(span + 3); break;
				case 4: spin_us<500><<<1, 32>>>(span + 4); break;
				case 5: spin_us<2000><<<1, 32>>>(span + 5); break;
				}
				launches[k]++;
			}
		CK(cudaStreamSynchronize(0));
	}
	unsigned long long h[6];
	CK(cudaMemcpy(h, span, sizeof h, cudaMemcpyDeviceToHost));
	printf("{\"kernels\":[");
	for (int k = 0; k < 6; k++)
		printf("%s{\"us\":%d,\"launches\":%ld,\"inside_mean_ns\":%.1f}", k ? "," : "", us[k], launches[k],
		       launches[k] ? (double)h[k] / (double)launches[k] : 0.0);
	printf("]}\n");
	return 0;
}
