// What a held, event-timed sample measures beside a kernel's traced
// duration, and whether a kernel of known length run by the library itself
// could calibrate the difference in the application's process.
//
// Continuous mode times one launch in many the way the library does it
// (src/inject/census_windows.c, census_time_start/end): the stream waits on a
// host-mapped word, a floor event f and a start event a are recorded, the
// kernel is launched, an end event b is recorded, and the word is set.
// The GPU then meets f, a, the kernel and b back to back; a->b is the
// kernel plus the GPU's own steps for the launch and for b. The library
// takes off two floors (f->a) as those steps; on the H200 that left
// microsecond kernels 0.15-0.33 us short of a full trace (the inference
// loop's shares 6.24 points off on 2026-12-04). This program measures, per
// kernel: the held a->b, the floor, the traced duration (CUPTI
// CONCURRENT_KERNEL, after the held phase), and for spin kernels of known
// length T (spinning on %globaltimer) the span the kernel itself saw, so
// that the intercept c of a->b = T + c can be set against the traced
// kernels' excess (a->b - trace).
//
// Build and run (the GPU machine; scripts/gpu-check.sh sample-offset):
//   nvcc -O2 -arch=sm_90 -o /tmp/sample_offset bench/sample_offset.cu -lcuda -lcupti
//   /tmp/sample_offset [samples per kernel, default 300]
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                                  \
	do {                                                                                   \
		cudaError_t e_ = (x);                                                          \
		if (e_ != cudaSuccess) {                                                       \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
			exit(1);                                                               \
		}                                                                              \
	} while (0)
#define CD(x)                                                                                  \
	do {                                                                                   \
		CUresult r_ = (x);                                                             \
		if (r_ != CUDA_SUCCESS) {                                                      \
			fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x, (int)r_);  \
			exit(1);                                                               \
		}                                                                              \
	} while (0)
#define CP(x)                                                                                  \
	do {                                                                                   \
		CUptiResult p_ = (x);                                                          \
		if (p_ != CUPTI_SUCCESS) {                                                     \
			fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x, (int)p_);  \
			exit(1);                                                               \
		}                                                                              \
	} while (0)

__device__ __forceinline__ unsigned long long gtimer()
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__global__ void k_empty() {}

__global__ void k_scale(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * 1.0001f + 0.5f;
}

// One warp spins until the global timer has moved `ns`; the first and
// last reading go to out[0..1].
__global__ void k_spin(unsigned long long ns, unsigned long long *out)
{
	unsigned long long t0 = gtimer(), t = t0;
	while (t - t0 < ns)
		t = gtimer();
	if (threadIdx.x == 0) {
		out[0] = t0;
		out[1] = t;
	}
}

// A spin kernel of 2 us with a parameter block of B bytes: whether the
// GPU's upload of a large parameter block (PyTorch's CatArrayBatchedCopy,
// TMA descriptors of cuBLAS's kernels) falls inside the held interval and
// outside the trace, which the one-thread calibration kernel cannot see.
template <int B> struct pblock {
	unsigned char b[B];
};
template <int B> __global__ void k_spin_p(const __grid_constant__ pblock<B> p, unsigned long long ns, unsigned long long *out)
{
	unsigned long long t0 = gtimer(), t = t0;
	while (t - t0 < ns)
		t = gtimer();
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		out[0] = t0;
		out[1] = t + p.b[B - 1];
	}
}

// Many blocks spinning 2 us each: whether a wide grid's dispatch and
// drain add to the held interval beyond the trace.
__global__ void k_spin_wide(unsigned long long ns, unsigned long long *out)
{
	unsigned long long t0 = gtimer(), t = t0;
	while (t - t0 < ns)
		t = gtimer();
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		out[0] = t0;
		out[1] = t;
	}
}

struct kernel_case {
	const char *label;
	int kind; // 0 empty, 1 scale, 2 spin, 3 spin 2 us with n parameter bytes, 4 spin 2 us on n blocks,
	          // 5 spin 2 us with n bytes of dynamic shared memory (the SMs' carveout changed for it)
	int n;    // scale: floats; spin: ns; 3: bytes; 4: blocks; 5: bytes
};

static const kernel_case cases[] = {
	{"empty", 0, 0},           {"scale 64K", 1, 1 << 16},  {"scale 1M", 1, 1 << 20},
	{"scale 8M", 1, 1 << 23},  {"spin 0.5us", 2, 500},     {"spin 1us", 2, 1000},
	{"spin 2us", 2, 2000},     {"spin 5us", 2, 5000},      {"spin 10us", 2, 10000},
	{"spin 20us", 2, 20000},   {"2us par 1K", 3, 1024},   {"2us par 4K", 3, 4096},
	{"2us par 16K", 3, 16384}, {"2us par 32K", 3, 32000}, {"2us 1K blk", 4, 1024},
	{"2us 8K blk", 4, 8192},   {"2us smem 200K", 5, 200 * 1024},
};
enum { NCASES = sizeof cases / sizeof cases[0] };

static float *g_x;
static unsigned long long *g_span;

static void launch(const kernel_case &c, cudaStream_t s)
{
	switch (c.kind) {
	case 0: k_empty<<<1, 32, 0, s>>>(); break;
	case 1: k_scale<<<(c.n + 255) / 256, 256, 0, s>>>(g_x, c.n); break;
	case 2: k_spin<<<1, 32, 0, s>>>((unsigned long long)c.n, g_span); break;
	case 3: {
		static pblock<1024> p1;
		static pblock<4096> p4;
		static pblock<16384> p16;
		static pblock<32000> p32;
		if (c.n == 1024)
			k_spin_p<1024><<<1, 32, 0, s>>>(p1, 2000ull, g_span);
		else if (c.n == 4096)
			k_spin_p<4096><<<1, 32, 0, s>>>(p4, 2000ull, g_span);
		else if (c.n == 16384)
			k_spin_p<16384><<<1, 32, 0, s>>>(p16, 2000ull, g_span);
		else
			k_spin_p<32000><<<1, 32, 0, s>>>(p32, 2000ull, g_span);
		break;
	}
	case 4: k_spin_wide<<<c.n, 128, 0, s>>>(2000ull, g_span); break;
	default: k_spin<<<1, 32, c.n, s>>>(2000ull, g_span); break;
	}
}

// Traced durations, per case (the case being traced is `g_cur`); while
// pairs are traced (g_cur == PAIRS), each kernel's start and end.
static std::vector<double> g_trace[NCASES];
static int g_cur = -1;
enum { PAIRS = 1000 };
static std::vector<std::pair<unsigned long long, unsigned long long>> g_pair_trace;

static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max)
{
	*size = 8 << 20;
	*b = (uint8_t *)aligned_alloc(8, *size);
	*max = 0;
}

static void CUPTIAPI buf_done(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid)
{
	CUpti_Activity *r = NULL;
	while (valid && cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g_cur == PAIRS) {
			const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
			g_pair_trace.push_back({k->start, k->end});
		} else if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && g_cur >= 0) {
			const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
			g_trace[g_cur].push_back((double)(k->end - k->start));
		}
	}
	free(b);
}

static double median(std::vector<double> v)
{
	if (v.empty())
		return -1;
	std::sort(v.begin(), v.end());
	return v[v.size() / 2];
}

static double pct(std::vector<double> v, double p)
{
	if (v.empty())
		return -1;
	std::sort(v.begin(), v.end());
	return v[(size_t)(p * (v.size() - 1))];
}

int main(int argc, char **argv)
{
	int m = argc > 1 ? atoi(argv[1]) : 300;
	if (m < 10)
		m = 10;
	CK(cudaSetDevice(0));
	CK(cudaFuncSetAttribute(k_spin, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
	CK(cudaMalloc(&g_x, (size_t)(1 << 23) * sizeof(float)));
	CK(cudaMemset(g_x, 0, (size_t)(1 << 23) * sizeof(float)));
	CK(cudaMalloc(&g_span, 4 * sizeof(unsigned long long)));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	uint32_t *flag = NULL;
	CD(cuMemHostAlloc((void **)&flag, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
	*flag = 0;
	uint32_t seq = 0;
	for (int i = 0; i < NCASES; i++) // warm up (module load, clocks)
		for (int j = 0; j < 50; j++)
			launch(cases[i], s);
	CK(cudaStreamSynchronize(s));

	// Held samples, the cases interleaved so that drift meets them all.
	std::vector<double> raw[NCASES], floor_ns[NCASES], span[NCASES];
	for (int rep = 0; rep < m; rep++) {
		for (int i = 0; i < NCASES; i++) {
			CUevent f, a, b;
			CD(cuEventCreate(&f, CU_EVENT_DEFAULT));
			CD(cuEventCreate(&a, CU_EVENT_DEFAULT));
			CD(cuEventCreate(&b, CU_EVENT_DEFAULT));
			seq++;
			CD(cuStreamWaitValue32((CUstream)s, (CUdeviceptr)(uintptr_t)flag, seq, CU_STREAM_WAIT_VALUE_GEQ));
			CD(cuEventRecord(f, (CUstream)s));
			CD(cuEventRecord(a, (CUstream)s));
			launch(cases[i], s);
			CD(cuEventRecord(b, (CUstream)s));
			__atomic_store_n(flag, seq, __ATOMIC_RELEASE);
			CD(cuEventSynchronize(b));
			float fa = 0, ab = 0;
			CD(cuEventElapsedTime(&fa, f, a));
			CD(cuEventElapsedTime(&ab, a, b));
			raw[i].push_back(ab * 1e6);
			floor_ns[i].push_back(fa * 1e6);
			if (cases[i].kind >= 2) {
				unsigned long long t[2];
				CK(cudaMemcpy(t, g_span, sizeof t, cudaMemcpyDeviceToHost));
				span[i].push_back((double)(t[1] - t[0]));
			}
			cuEventDestroy(f);
			cuEventDestroy(a);
			cuEventDestroy(b);
		}
	}

	// The library's in-process calibration (src/inject/calib.h): pairs of
	// spin kernels (2 us, then 0) back to back on the held stream; the
	// second's first stamp less the first's last (G) stands for what a
	// trace counts as a kernel's besides its span.
	std::vector<double> pair_gap;
	for (int rep = 0; rep < m; rep++) {
		seq++;
		CD(cuStreamWaitValue32((CUstream)s, (CUdeviceptr)(uintptr_t)flag, seq, CU_STREAM_WAIT_VALUE_GEQ));
		k_spin<<<1, 32, 0, s>>>(2000ull, g_span);
		k_spin<<<1, 32, 0, s>>>(0ull, g_span + 2);
		__atomic_store_n(flag, seq, __ATOMIC_RELEASE);
		CK(cudaStreamSynchronize(s));
		unsigned long long t[4];
		CK(cudaMemcpy(t, g_span, sizeof t, cudaMemcpyDeviceToHost));
		pair_gap.push_back((double)(long long)(t[2] - t[1]));
	}

	// The trace of the same kernels, each launched alone on an idle GPU
	// (as the held ones met it) and then back to back.
	std::vector<double> trace_idle[NCASES], trace_b2b[NCASES];
	CP(cuptiActivityRegisterCallbacks(buf_req, buf_done));
	CP(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < NCASES; i++) {
			g_cur = i;
			for (int j = 0; j < m; j++) {
				launch(cases[i], s);
				if (pass == 0)
					CK(cudaStreamSynchronize(s));
			}
			CK(cudaStreamSynchronize(s));
			CP(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
			(pass == 0 ? trace_idle : trace_b2b)[i].swap(g_trace[i]);
			g_trace[i].clear();
		}
	// The same pairs traced: the gap the trace leaves between them.
	g_cur = PAIRS;
	for (int j = 0; j < m; j++) {
		k_spin<<<1, 32, 0, s>>>(2000ull, g_span);
		k_spin<<<1, 32, 0, s>>>(0ull, g_span + 2);
		CK(cudaStreamSynchronize(s));
	}
	CP(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
	g_cur = -1;
	std::sort(g_pair_trace.begin(), g_pair_trace.end());
	std::vector<double> trace_gap;
	for (size_t i = 0; i + 1 < g_pair_trace.size(); i += 2)
		trace_gap.push_back((double)(long long)(g_pair_trace[i + 1].first - g_pair_trace[i].second));

	printf("sample_offset: %d held samples per kernel; ns, medians (10th-90th percentile of raw)\n", m);
	printf("%-11s %9s %9s %9s %19s %9s %9s %9s %9s %9s %9s\n", "kernel", "trace", "trace b2b", "span", "held a->b",
	       "floor", "excess", "2 floors", "left", "a->b-span", "trace-span");
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	int np = 0;
	for (int i = 0; i < NCASES; i++) {
		double t = median(trace_idle[i]), tb = median(trace_b2b[i]), r = median(raw[i]), fl = median(floor_ns[i]);
		double sp = cases[i].kind >= 2 ? median(span[i]) : -1;
		printf("%-11s %9.0f %9.0f %9.0f %9.0f (%4.0f-%4.0f) %9.0f %9.0f %9.0f %9.0f %9.0f %9.0f\n", cases[i].label, t, tb, sp,
		       r, pct(raw[i], 0.1), pct(raw[i], 0.9), fl, r - t, 2 * fl, r - 2 * fl - t, sp >= 0 ? r - sp : -1,
		       sp >= 0 ? t - sp : -1);
		if (cases[i].kind == 2 && cases[i].n >= 1000) { // a->b against the span the kernel saw
			sx += sp, sy += r, sxx += sp * sp, sxy += sp * r, np++;
		}
	}
	if (np >= 2) {
		double slope = (np * sxy - sx * sy) / (np * sxx - sx * sx), icpt = (sy - slope * sx) / np;
		printf("spin kernels (>= 1 us): held a->b = %.4f x span + %.0f ns\n", slope, icpt);
		double tx = 0, ty = 0, txx = 0, txy = 0;
		for (int i = 0; i < NCASES; i++)
			if (cases[i].kind == 2 && cases[i].n >= 1000) {
				double sp = median(span[i]), t = median(trace_idle[i]);
				tx += sp, ty += t, txx += sp * sp, txy += sp * t;
			}
		double ts = (np * txy - tx * ty) / (np * txx - tx * tx), ti = (ty - ts * tx) / np;
		printf("spin kernels (>= 1 us): trace = %.4f x span + %.0f ns\n", ts, ti);
		printf("calibration by spin: excess = %.0f ns (held intercept - trace intercept)\n", icpt - ti);
		double G = median(pair_gap), tg = median(trace_gap);
		printf("pairs back to back: span gap G = %.0f ns (%.0f-%.0f), trace gap (launched unheld) = %.0f ns (%.0f-%.0f)\n", G,
		       pct(pair_gap, 0.1), pct(pair_gap, 0.9), tg, pct(trace_gap, 0.1), pct(trace_gap, 0.9));
		printf("in-process calibration: E - G/2 = %.0f ns (bracket %.0f..%.0f); against the trace %.0f ns; "
		       "error %+.0f ns (head + tail by the trace %.0f ns, kernel-to-kernel step %.0f ns)\n",
		       icpt - G / 2, icpt - G, icpt, icpt - ti, (icpt - G / 2) - (icpt - ti), ti, G - ti);
	}
	return 0;
}
