/* A stand-in libcuda.so.1 for `gpulse bench` without a GPU (tests of
 * the benchmark's arithmetic and of its bad conditions). It implements the
 * driver entry points of src/bench/cuda_lib.h under their real names and
 * ABI (src/bench/cuda_abi.h) on a virtual clock: every copy, kernel and
 * matrix multiply (fake_cublaslt.c advances it too) moves its stream's
 * clock by the time the configured rates give, and events read that clock,
 * so the figures the benchmark computes must come back as the rates set
 * here, whatever the machine's speed.
 *
 * Environment (read at cuInit):
 *   GPULSE_FAKE_BENCH_GPUS=N          devices (default 1); device i has the
 *                                     UUID tests/fake_nvml gives GPU i
 *   GPULSE_FAKE_BENCH_NO_DEVICE=1     cuInit returns CUDA_ERROR_NO_DEVICE
 *   GPULSE_FAKE_BENCH_FREE_MIB=N      free device memory (default 100000)
 *   GPULSE_FAKE_BENCH_D2D_GBS=X       device copy, read+write counted (4300)
 *   GPULSE_FAKE_BENCH_READ_GBS=X      read kernel and fill kernel (4000)
 *   GPULSE_FAKE_BENCH_H2D_GBS=X, _D2H_GBS=X  pinned copies (55, 52)
 *   GPULSE_FAKE_BENCH_PAGEABLE_GBS=X  pageable copies, both ways (20)
 *   GPULSE_FAKE_BENCH_LAUNCH_US=X     GPU time of an empty kernel (2)
 *   GPULSE_FAKE_BENCH_JITTER=X        each operation's time is scaled by
 *                                     1 + X * (-1, -0.5, 0, 0.5, 1) in turn
 *   GPULSE_FAKE_BENCH_HOST_STALL=X    a shared host: the host-bound
 *                                     operations (pageable copies, empty
 *                                     kernels) that start in the first
 *                                     half of every 50 ms of virtual time
 *                                     take 1 + X times as long (another
 *                                     tenant's bursts; never faster)
 *   GPULSE_FAKE_BENCH_REALTIME=X      each event wait sleeps X times the
 *                                     virtual time it waited for (a bench
 *                                     that lasts, for the scheduler tests)
 *   GPULSE_FAKE_BENCH_SCREEN_FAULT=TEST:TILE   a card that computes one
 *                                     element of the screening test TEST
 *                                     (gemm_u32, gemm_f32, gemm_f64,
 *                                     gemm_bf16, gemm_f16, gemm_tf32,
 *                                     sum_u64, memory) wrong in tile TILE,
 *                                     the same way every time
 * Allocations of up to 64 MiB are backed by host memory (the device
 * address is the host address), and copies and the screening kernels
 * (src/bench/screen.c) on them compute for real, as the PTX does; larger
 * ones are address space only, and kernels on them only take time.
 * fakeCudaAdvance(stream, seconds) is exported for fake_cublaslt.c. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench/cuda_abi.h"

#define API __attribute__((visibility("default")))
#define MIB (1024ULL * 1024)
#define TOTAL_MIB 143771ULL

struct cu_stream_st {
	double t;          /* virtual seconds */
};
struct cu_event_st {
	struct cu_stream_st *s;
	double t;
	double waited;     /* virtual time at the last synchronize */
};
enum fn_kind { K_FILL = 1, K_READ, K_EMPTY, K_GEMM_U32, K_GEMM_F32, K_GEMM_F64, K_CHECK, K_SUM,
	       K_GEMM_BF16, K_GEMM_F16, K_GEMM_TF32 };
struct cu_func_st {
	enum fn_kind kind;
};
struct cu_mod_st {
	bool mma;          /* the tensor-core module (src/bench/screen_mma.ptx) */
	struct cu_func_st fill, read, empty, gemm_u32, gemm_f32, gemm_f64, check, sum;
	struct cu_func_st gemm_bf16, gemm_f16, gemm_tf32;
};
#define BACKED_MAX (64ULL << 20)

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct cu_stream_st null_stream;
static int ngpus = 1;
static double free_bytes, d2d, rd, h2d, d2h, pageable, launch_s, jitter, realtime, host_stall;
static unsigned long long next_ptr = 0x700000000000ULL, allocated;
static unsigned op_counter;
static int current_dev = -1;

static double env_num(const char *name, double def)
{
	const char *s = getenv(name);
	return s && *s ? atof(s) : def;
}

static struct cu_stream_st *stream_of(cu_stream_t s)
{
	return s ? s : &null_stream;
}

static double scale(void)
{
	static const double steps[] = {-1, -0.5, 0, 0.5, 1};
	return 1 + jitter * steps[op_counter++ % 5];
}

API void fakeCudaAdvance(cu_stream_t s, double seconds);
API void fakeCudaAdvance(cu_stream_t s, double seconds)
{
	pthread_mutex_lock(&mu);
	stream_of(s)->t += seconds * scale();
	pthread_mutex_unlock(&mu);
}

/* A host-bound operation: slower while the shared host is busy. */
static void advance_host(cu_stream_t s, double seconds)
{
	pthread_mutex_lock(&mu);
	double phase = fmod(stream_of(s)->t, 0.05);
	pthread_mutex_unlock(&mu);
	fakeCudaAdvance(s, phase < 0.025 ? seconds * (1 + host_stall) : seconds);
}

API cu_result_t cuInit(unsigned int flags);
API cu_result_t cuInit(unsigned int flags)
{
	(void)flags;
	if (env_num("GPULSE_FAKE_BENCH_NO_DEVICE", 0) != 0)
		return CU_ABI_ERROR_NO_DEVICE;
	ngpus = (int)env_num("GPULSE_FAKE_BENCH_GPUS", 1);
	free_bytes = env_num("GPULSE_FAKE_BENCH_FREE_MIB", 100000) * MIB;
	d2d = env_num("GPULSE_FAKE_BENCH_D2D_GBS", 4300) * 1e9;
	rd = env_num("GPULSE_FAKE_BENCH_READ_GBS", 4000) * 1e9;
	h2d = env_num("GPULSE_FAKE_BENCH_H2D_GBS", 55) * 1e9;
	d2h = env_num("GPULSE_FAKE_BENCH_D2H_GBS", 52) * 1e9;
	pageable = env_num("GPULSE_FAKE_BENCH_PAGEABLE_GBS", 20) * 1e9;
	launch_s = env_num("GPULSE_FAKE_BENCH_LAUNCH_US", 2) * 1e-6;
	jitter = env_num("GPULSE_FAKE_BENCH_JITTER", 0);
	realtime = env_num("GPULSE_FAKE_BENCH_REALTIME", 0);
	host_stall = env_num("GPULSE_FAKE_BENCH_HOST_STALL", 0);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuDriverGetVersion(int *v);
API cu_result_t cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CU_ABI_SUCCESS;
}

API cu_result_t cuDeviceGetCount(int *n);
API cu_result_t cuDeviceGetCount(int *n)
{
	*n = ngpus;
	return CU_ABI_SUCCESS;
}

API cu_result_t cuDeviceGet(cu_device_t *d, int ordinal);
API cu_result_t cuDeviceGet(cu_device_t *d, int ordinal)
{
	if (ordinal < 0 || ordinal >= ngpus)
		return CU_ABI_ERROR_INVALID_DEVICE;
	*d = ordinal;
	return CU_ABI_SUCCESS;
}

API cu_result_t cuDeviceGetAttribute(int *v, int attr, cu_device_t d);
API cu_result_t cuDeviceGetAttribute(int *v, int attr, cu_device_t d)
{
	if (d < 0 || d >= ngpus)
		return CU_ABI_ERROR_INVALID_DEVICE;
	switch (attr) {
	case CU_ABI_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; return CU_ABI_SUCCESS;
	case CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; return CU_ABI_SUCCESS;
	case CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; return CU_ABI_SUCCESS;
	default: return CU_ABI_ERROR_INVALID_VALUE;
	}
}

API cu_result_t cuDeviceGetName(char *name, int len, cu_device_t d);
API cu_result_t cuDeviceGetName(char *name, int len, cu_device_t d)
{
	(void)d;
	snprintf(name, (size_t)len, "NVIDIA H200");
	return CU_ABI_SUCCESS;
}

/* GPU-fa4e0000-0000-4000-8000-%012x, as tests/fake_nvml names GPU d. */
API cu_result_t cuDeviceGetUuid_v2(struct cu_uuid *u, cu_device_t d);
API cu_result_t cuDeviceGetUuid_v2(struct cu_uuid *u, cu_device_t d)
{
	static const unsigned char head[10] = {0xfa, 0x4e, 0, 0, 0, 0, 0x40, 0, 0x80, 0};
	if (d < 0 || d >= ngpus)
		return CU_ABI_ERROR_INVALID_DEVICE;
	memcpy(u->bytes, head, sizeof head);
	unsigned long long x = (unsigned long long)d;
	for (int i = 15; i >= 10; i--, x >>= 8)
		u->bytes[i] = (unsigned char)(x & 0xff);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuDevicePrimaryCtxRetain(cu_ctx_t *c, cu_device_t d);
API cu_result_t cuDevicePrimaryCtxRetain(cu_ctx_t *c, cu_device_t d)
{
	if (d < 0 || d >= ngpus)
		return CU_ABI_ERROR_INVALID_DEVICE;
	*c = (cu_ctx_t)(uintptr_t)(0x1000 + d);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuDevicePrimaryCtxRelease_v2(cu_device_t d);
API cu_result_t cuDevicePrimaryCtxRelease_v2(cu_device_t d)
{
	(void)d;
	return CU_ABI_SUCCESS;
}

API cu_result_t cuCtxSetCurrent(cu_ctx_t c);
API cu_result_t cuCtxSetCurrent(cu_ctx_t c)
{
	current_dev = (int)((uintptr_t)c - 0x1000);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuCtxSynchronize(void);
API cu_result_t cuCtxSynchronize(void)
{
	return CU_ABI_SUCCESS;
}

API cu_result_t cuMemGetInfo_v2(size_t *f, size_t *t);
API cu_result_t cuMemGetInfo_v2(size_t *f, size_t *t)
{
	if (current_dev < 0)
		return CU_ABI_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&mu);
	double left = free_bytes - (double)allocated;
	*f = left > 0 ? (size_t)left : 0;
	*t = TOTAL_MIB * MIB;
	pthread_mutex_unlock(&mu);
	return CU_ABI_SUCCESS;
}

#define MAX_BLOCKS 256
static size_t *blocks[MAX_BLOCKS]; /* {address, bytes} of each allocation */

static void remember(size_t *rec)
{
	for (int i = 0; rec && i < MAX_BLOCKS; i++)
		if (!blocks[i]) {
			blocks[i] = rec;
			return;
		}
	free(rec);
}

API cu_result_t cuMemAlloc_v2(cu_deviceptr_t *p, size_t bytes);
API cu_result_t cuMemAlloc_v2(cu_deviceptr_t *p, size_t bytes)
{
	pthread_mutex_lock(&mu);
	cu_result_t r = CU_ABI_SUCCESS;
	if ((double)(allocated + bytes) > free_bytes) {
		r = CU_ABI_ERROR_OUT_OF_MEMORY;
	} else {
		/* A size header before each block, so that free knows it. */
		void *h = bytes <= BACKED_MAX ? calloc(1, bytes ? bytes : 1) : NULL;
		if (h) {
			*p = (cu_deviceptr_t)(uintptr_t)h;
		} else {
			*p = next_ptr + 256;
			next_ptr += bytes + 512;
		}
		allocated += bytes;
		size_t *rec = malloc(sizeof *rec * 3);
		if (rec) {
			rec[0] = (size_t)*p;
			rec[1] = bytes;
			rec[2] = h != NULL;
		}
		remember(rec);
	}
	pthread_mutex_unlock(&mu);
	return r;
}

API cu_result_t cuMemFree_v2(cu_deviceptr_t p);
API cu_result_t cuMemFree_v2(cu_deviceptr_t p)
{
	pthread_mutex_lock(&mu);
	cu_result_t r = CU_ABI_ERROR_INVALID_VALUE;
	for (int i = 0; i < MAX_BLOCKS; i++)
		if (blocks[i] && blocks[i][0] == (size_t)p) {
			allocated -= blocks[i][1];
			if (blocks[i][2])
				free((void *)(uintptr_t)p);
			free(blocks[i]);
			blocks[i] = NULL;
			r = CU_ABI_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	return r;
}

/* The host memory behind device range [p, p + n), or NULL when it is not
 * backed (address space only). */
static unsigned char *backed(cu_deviceptr_t p, size_t n)
{
	unsigned char *h = NULL;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_BLOCKS; i++)
		if (blocks[i] && blocks[i][2] && (size_t)p >= blocks[i][0] &&
		    (size_t)p + n <= blocks[i][0] + blocks[i][1])
			h = (unsigned char *)(uintptr_t)p;
	pthread_mutex_unlock(&mu);
	return h;
}

/* Pinned memory: address space only (mmap, never touched here), so a
 * 1 GiB buffer costs the test nothing. */
struct host_block {
	void *p;
	size_t n;
};
static struct host_block hosts[16];

API cu_result_t cuMemAllocHost_v2(void **p, size_t bytes);
API cu_result_t cuMemAllocHost_v2(void **p, size_t bytes)
{
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	if (m == MAP_FAILED)
		return CU_ABI_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 16; i++)
		if (!hosts[i].p) {
			hosts[i] = (struct host_block){m, bytes};
			break;
		}
	pthread_mutex_unlock(&mu);
	*p = m;
	return CU_ABI_SUCCESS;
}

static bool is_pinned(const void *p)
{
	for (int i = 0; i < 16; i++)
		if (hosts[i].p && (const char *)p >= (const char *)hosts[i].p &&
		    (const char *)p < (const char *)hosts[i].p + hosts[i].n)
			return true;
	return false;
}

API cu_result_t cuMemFreeHost(void *p);
API cu_result_t cuMemFreeHost(void *p)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 16; i++)
		if (hosts[i].p == p) {
			munmap(p, hosts[i].n);
			hosts[i].p = NULL;
			pthread_mutex_unlock(&mu);
			return CU_ABI_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CU_ABI_ERROR_INVALID_VALUE;
}

API cu_result_t cuMemcpyHtoDAsync_v2(cu_deviceptr_t d, const void *h, size_t n, cu_stream_t s);
API cu_result_t cuMemcpyHtoDAsync_v2(cu_deviceptr_t d, const void *h, size_t n, cu_stream_t s)
{
	unsigned char *dst = backed(d, n);
	if (dst)
		memcpy(dst, h, n);
	pthread_mutex_lock(&mu);
	bool pinned = is_pinned(h);
	pthread_mutex_unlock(&mu);
	if (pinned)
		fakeCudaAdvance(s, (double)n / h2d);
	else
		advance_host(s, (double)n / pageable);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuMemcpyDtoHAsync_v2(void *h, cu_deviceptr_t d, size_t n, cu_stream_t s);
API cu_result_t cuMemcpyDtoHAsync_v2(void *h, cu_deviceptr_t d, size_t n, cu_stream_t s)
{
	const unsigned char *src = backed(d, n);
	if (src)
		memcpy(h, src, n);
	pthread_mutex_lock(&mu);
	bool pinned = is_pinned(h);
	pthread_mutex_unlock(&mu);
	if (pinned)
		fakeCudaAdvance(s, (double)n / d2h);
	else
		advance_host(s, (double)n / pageable);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuMemcpyDtoDAsync_v2(cu_deviceptr_t d, cu_deviceptr_t src, size_t n, cu_stream_t s);
API cu_result_t cuMemcpyDtoDAsync_v2(cu_deviceptr_t d, cu_deviceptr_t src, size_t n, cu_stream_t s)
{
	(void)d;
	(void)src;
	fakeCudaAdvance(s, 2.0 * (double)n / d2d);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuStreamCreate(cu_stream_t *s, unsigned int flags);
API cu_result_t cuStreamCreate(cu_stream_t *s, unsigned int flags)
{
	(void)flags;
	*s = calloc(1, sizeof **s);
	return *s ? CU_ABI_SUCCESS : CU_ABI_ERROR_OUT_OF_MEMORY;
}

API cu_result_t cuStreamDestroy_v2(cu_stream_t s);
API cu_result_t cuStreamDestroy_v2(cu_stream_t s)
{
	free(s);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuStreamSynchronize(cu_stream_t s);
API cu_result_t cuStreamSynchronize(cu_stream_t s)
{
	(void)s;
	return CU_ABI_SUCCESS;
}

API cu_result_t cuEventCreate(cu_event_t *e, unsigned int flags);
API cu_result_t cuEventCreate(cu_event_t *e, unsigned int flags)
{
	(void)flags;
	*e = calloc(1, sizeof **e);
	return *e ? CU_ABI_SUCCESS : CU_ABI_ERROR_OUT_OF_MEMORY;
}

API cu_result_t cuEventDestroy_v2(cu_event_t e);
API cu_result_t cuEventDestroy_v2(cu_event_t e)
{
	free(e);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuEventRecord(cu_event_t e, cu_stream_t s);
API cu_result_t cuEventRecord(cu_event_t e, cu_stream_t s)
{
	pthread_mutex_lock(&mu);
	e->s = stream_of(s);
	e->t = e->s->t;
	pthread_mutex_unlock(&mu);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuEventSynchronize(cu_event_t e);
API cu_result_t cuEventSynchronize(cu_event_t e)
{
	static double last_waited;
	double wait = e->t - last_waited;
	last_waited = e->t;
	if (realtime > 0 && wait > 0) {
		double s = wait * realtime;
		struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
		nanosleep(&ts, NULL);
	}
	return CU_ABI_SUCCESS;
}

API cu_result_t cuEventElapsedTime_v2(float *ms, cu_event_t a, cu_event_t b);
API cu_result_t cuEventElapsedTime_v2(float *ms, cu_event_t a, cu_event_t b)
{
	if (!a->s || !b->s)
		return CU_ABI_ERROR_INVALID_VALUE;
	*ms = (float)((b->t - a->t) * 1e3);
	return CU_ABI_SUCCESS;
}

/* The benchmark's PTX must arrive whole: its three entries and a header. */
API cu_result_t cuModuleLoadData(cu_module_t *m, const void *image);
API cu_result_t cuModuleLoadData(cu_module_t *m, const void *image)
{
	const char *s = image;
	if (strstr(s, ".version") && strstr(s, ".target sm_80") &&
	    strstr(s, ".entry gpulse_screen_gemm_bf16(") && strstr(s, ".entry gpulse_screen_gemm_f16(") &&
	    strstr(s, ".entry gpulse_screen_gemm_tf32(") && strstr(s, "mma.sync.aligned.m16n8k8")) {
		*m = calloc(1, sizeof **m);
		if (!*m)
			return CU_ABI_ERROR_OUT_OF_MEMORY;
		(*m)->mma = true;
		(*m)->gemm_bf16.kind = K_GEMM_BF16;
		(*m)->gemm_f16.kind = K_GEMM_F16;
		(*m)->gemm_tf32.kind = K_GEMM_TF32;
		return CU_ABI_SUCCESS;
	}
	if (!strstr(s, ".version") || !strstr(s, ".entry gpulse_fill(") ||
	    !strstr(s, ".entry gpulse_read(") || !strstr(s, ".entry gpulse_empty(") ||
	    !strstr(s, "FILL_DONE:\n\tret;\n}"))
		return CU_ABI_ERROR_INVALID_PTX;
	*m = calloc(1, sizeof **m);
	if (!*m)
		return CU_ABI_ERROR_OUT_OF_MEMORY;
	(*m)->fill.kind = K_FILL;
	(*m)->read.kind = K_READ;
	(*m)->empty.kind = K_EMPTY;
	(*m)->gemm_u32.kind = K_GEMM_U32;
	(*m)->gemm_f32.kind = K_GEMM_F32;
	(*m)->gemm_f64.kind = K_GEMM_F64;
	(*m)->check.kind = K_CHECK;
	(*m)->sum.kind = K_SUM;
	return CU_ABI_SUCCESS;
}

API cu_result_t cuModuleUnload(cu_module_t m);
API cu_result_t cuModuleUnload(cu_module_t m)
{
	free(m);
	return CU_ABI_SUCCESS;
}

API cu_result_t cuModuleGetFunction(cu_function_t *f, cu_module_t m, const char *name);
API cu_result_t cuModuleGetFunction(cu_function_t *f, cu_module_t m, const char *name)
{
	if (m->mma) {
		if (strcmp(name, "gpulse_screen_gemm_bf16") == 0)
			*f = &m->gemm_bf16;
		else if (strcmp(name, "gpulse_screen_gemm_f16") == 0)
			*f = &m->gemm_f16;
		else if (strcmp(name, "gpulse_screen_gemm_tf32") == 0)
			*f = &m->gemm_tf32;
		else
			return 500; /* CUDA_ERROR_NOT_FOUND */
		return CU_ABI_SUCCESS;
	}
	if (strcmp(name, "gpulse_fill") == 0)
		*f = &m->fill;
	else if (strcmp(name, "gpulse_read") == 0)
		*f = &m->read;
	else if (strcmp(name, "gpulse_empty") == 0)
		*f = &m->empty;
	else if (strcmp(name, "gpulse_screen_gemm_u32") == 0)
		*f = &m->gemm_u32;
	else if (strcmp(name, "gpulse_screen_gemm_f32") == 0)
		*f = &m->gemm_f32;
	else if (strcmp(name, "gpulse_screen_gemm_f64") == 0)
		*f = &m->gemm_f64;
	else if (strcmp(name, "gpulse_screen_check") == 0)
		*f = &m->check;
	else if (strcmp(name, "gpulse_screen_sum") == 0)
		*f = &m->sum;
	else
		return 500; /* CUDA_ERROR_NOT_FOUND */
	return CU_ABI_SUCCESS;
}

/* ---- the screening kernels, computed as their PTX does ---- */

static uint32_t fmix(unsigned long long i, uint32_t seed)
{
	uint32_t h = (uint32_t)i ^ seed ^ ((uint32_t)(i >> 32) * 0x27d4eb2fU);
	h *= 0x9e3779b1U;
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}

/* GPULSE_FAKE_BENCH_SCREEN_FAULT: the tile of `test` this card gets
 * wrong, or -1. */
static long fault_tile(const char *test)
{
	const char *f = getenv("GPULSE_FAKE_BENCH_SCREEN_FAULT");
	size_t l = strlen(test);
	if (!f || strncmp(f, test, l) != 0 || f[l] != ':')
		return -1;
	return atol(f + l + 1);
}

static void fill_words(void **params, unsigned long long n)
{
	uint32_t *p = (uint32_t *)backed(*(cu_deviceptr_t *)params[0], n * 4);
	if (!p)
		return;
	uint32_t seed = *(uint32_t *)params[2];
	uint32_t and0 = *(uint32_t *)params[3], or0 = *(uint32_t *)params[4];
	uint32_t and1 = *(uint32_t *)params[5], or1 = *(uint32_t *)params[6];
	for (unsigned long long i = 0; i < n; i++)
		p[i] = (fmix(i, seed) & (i % 2 ? and1 : and0)) | (i % 2 ? or1 : or0);
}

static void gemm(enum fn_kind k, void **params, unsigned n)
{
	size_t es = k == K_GEMM_F64 ? 8 : 4, bytes = (size_t)n * n * es;
	const unsigned char *a = backed(*(cu_deviceptr_t *)params[0], bytes);
	const unsigned char *b = backed(*(cu_deviceptr_t *)params[1], bytes);
	unsigned char *c = backed(*(cu_deviceptr_t *)params[2], bytes);
	if (!a || !b || !c)
		return;
	for (size_t r = 0; r < n; r++)
		for (size_t col = 0; col < n; col++) {
			if (k == K_GEMM_U32) {
				uint32_t acc = 0, x, y;
				for (size_t i = 0; i < n; i++) {
					memcpy(&x, a + (r * n + i) * 4, 4);
					memcpy(&y, b + (i * n + col) * 4, 4);
					acc += x * y;
				}
				memcpy(c + (r * n + col) * 4, &acc, 4);
			} else if (k == K_GEMM_F32) {
				float acc = 0, x, y;
				for (size_t i = 0; i < n; i++) {
					memcpy(&x, a + (r * n + i) * 4, 4);
					memcpy(&y, b + (i * n + col) * 4, 4);
					acc = fmaf(x, y, acc);
				}
				memcpy(c + (r * n + col) * 4, &acc, 4);
			} else {
				double acc = 0, x, y;
				for (size_t i = 0; i < n; i++) {
					memcpy(&x, a + (r * n + i) * 8, 8);
					memcpy(&y, b + (i * n + col) * 8, 8);
					acc = fma(x, y, acc);
				}
				memcpy(c + (r * n + col) * 8, &acc, 8);
			}
		}
	long t = fault_tile(k == K_GEMM_U32 ? "gemm_u32" : k == K_GEMM_F32 ? "gemm_f32" : "gemm_f64");
	size_t per = n / 32;
	if (t >= 0 && per && (size_t)t < per * per)
		c[((size_t)t / per * 32 * n + (size_t)t % per * 32) * es] ^= 1;
}

/* Input element i of a tensor-core GEMM as the tensor core reads it. */
static float mma_in(enum fn_kind k, const unsigned char *m, size_t i)
{
	if (k == K_GEMM_TF32) {
		uint32_t u;
		memcpy(&u, m + i * 4, 4);
		u &= 0xffffe000u;      /* tf32: the low 13 bits are not read */
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	uint16_t h;
	memcpy(&h, m + i * 2, 2);
	if (k == K_GEMM_BF16) {
		uint32_t u = (uint32_t)h << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	int e = h >> 10 & 0x1f;
	float v = e == 0 ? ldexpf((float)(h & 0x3ff), -24)
			 : ldexpf((float)(0x400 | (h & 0x3ff)), e - 25);
	return h & 0x8000 ? -v : v;
}

/* The tensor-core GEMMs: fp32 accumulation in k order (screen.c keeps
 * every step exact, so the order inside an mma.sync does not matter). */
static void gemm_mma(enum fn_kind k, void **params, unsigned n)
{
	size_t in = k == K_GEMM_TF32 ? 4 : 2;
	const unsigned char *a = backed(*(cu_deviceptr_t *)params[0], (size_t)n * n * in);
	const unsigned char *b = backed(*(cu_deviceptr_t *)params[1], (size_t)n * n * in);
	unsigned char *c = backed(*(cu_deviceptr_t *)params[2], (size_t)n * n * 4);
	if (!a || !b || !c)
		return;
	for (size_t r = 0; r < n; r++)
		for (size_t col = 0; col < n; col++) {
			float acc = 0;
			for (size_t i = 0; i < n; i++)
				acc = fmaf(mma_in(k, a, r * n + i), mma_in(k, b, i * n + col), acc);
			memcpy(c + (r * n + col) * 4, &acc, 4);
		}
	long t = fault_tile(k == K_GEMM_BF16 ? "gemm_bf16" : k == K_GEMM_F16 ? "gemm_f16" : "gemm_tf32");
	size_t per = n / 32;
	if (t >= 0 && per && (size_t)t < per * per)
		c[((size_t)t / per * 32 * n + (size_t)t % per * 32) * 4] ^= 1;
}

static void check_words(void **params, unsigned long long n)
{
	const uint32_t *p = (const uint32_t *)backed(*(cu_deviceptr_t *)params[0], n * 4);
	uint32_t seed = *(uint32_t *)params[2];
	unsigned long long tile = *(unsigned long long *)params[3];
	unsigned long long ntiles = tile ? (n + tile - 1) / tile : 0;
	uint32_t *bad = (uint32_t *)backed(*(cu_deviceptr_t *)params[4], ntiles * 4);
	if (!p || !bad)
		return;
	for (unsigned long long i = 0; i < n; i++)
		if (p[i] != fmix(i, seed))
			bad[i / tile]++;
	long t = fault_tile("memory");
	if (t >= 0 && (unsigned long long)t < ntiles)
		bad[t]++;
}

static void sum_words(void **params, unsigned long long nchunks)
{
	const uint32_t *p = (const uint32_t *)backed(*(cu_deviceptr_t *)params[0], nchunks * 1024);
	unsigned long long tile = *(unsigned long long *)params[2];
	unsigned long long ntiles = tile ? nchunks * 256 / tile : 0;
	uint64_t *sums = (uint64_t *)backed(*(cu_deviceptr_t *)params[3], ntiles * 8);
	if (!p || !sums)
		return;
	for (unsigned long long i = 0; i < nchunks * 256; i++)
		sums[i / tile] += p[i];
	long t = fault_tile("sum_u64");
	if (t >= 0 && (unsigned long long)t < ntiles)
		sums[t] += 1;
}

API cu_result_t cuLaunchKernel(cu_function_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned shmem, cu_stream_t s,
			       void **params, void **extra);
API cu_result_t cuLaunchKernel(cu_function_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			       unsigned by, unsigned bz, unsigned shmem, cu_stream_t s,
			       void **params, void **extra)
{
	(void)gz, (void)bz, (void)shmem, (void)extra;
	if (!gx || !bx || bx > 1024)
		return CU_ABI_ERROR_INVALID_VALUE;
	switch (f->kind) {
	case K_EMPTY:
		advance_host(s, launch_s);
		break;
	case K_FILL: {
		unsigned long long n = *(unsigned long long *)params[1];
		fill_words(params, n);
		fakeCudaAdvance(s, launch_s + (double)n * 4 / rd);
		break;
	}
	case K_GEMM_U32:
	case K_GEMM_F32:
	case K_GEMM_F64: {
		unsigned n = *(unsigned *)params[3];
		if (!gx || (unsigned long long)gx * bx < n)
			return CU_ABI_ERROR_INVALID_VALUE;
		gemm(f->kind, params, n);
		fakeCudaAdvance(s, launch_s + 2.0 * n * n * n / 50e12);
		break;
	}
	case K_GEMM_BF16:
	case K_GEMM_F16:
	case K_GEMM_TF32: {
		/* One warp per 16 x 8 tile of C, as screen_mma.ptx is written for. */
		unsigned n = *(unsigned *)params[3];
		if (n % 16 || bx != 32 || by != 1 || gx != n / 8 || gy != n / 16)
			return CU_ABI_ERROR_INVALID_VALUE;
		gemm_mma(f->kind, params, n);
		fakeCudaAdvance(s, launch_s + 2.0 * n * n * n / 400e12);
		break;
	}
	case K_CHECK: {
		unsigned long long n = *(unsigned long long *)params[1];
		check_words(params, n);
		fakeCudaAdvance(s, launch_s + (double)n * 4 / rd);
		break;
	}
	case K_SUM: {
		unsigned long long nchunks = *(unsigned long long *)params[1];
		sum_words(params, nchunks);
		fakeCudaAdvance(s, launch_s + (double)nchunks * 1024 / rd);
		break;
	}
	case K_READ: {
		/* nvec must be a multiple of four grid strides (the kernel
		 * reads four vectors a stride apart without bounds checks). */
		unsigned long long n = *(unsigned long long *)params[1];
		if (n % (4ULL * gx * bx) != 0)
			return CU_ABI_ERROR_INVALID_VALUE;
		fakeCudaAdvance(s, launch_s + (double)n * 16 / rd);
		break;
	}
	}
	return CU_ABI_SUCCESS;
}

API cu_result_t cuGetErrorName(cu_result_t r, const char **s);
API cu_result_t cuGetErrorName(cu_result_t r, const char **s)
{
	switch (r) {
	case CU_ABI_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
	case CU_ABI_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
	case CU_ABI_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
	case CU_ABI_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
	default: return CU_ABI_ERROR_INVALID_VALUE;
	}
	return CU_ABI_SUCCESS;
}
