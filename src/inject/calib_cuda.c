/* calib_measure (calib.h): the calibration kernel launched through the
 * held path on a stream of the library's own. The driver's functions are
 * looked up in the libcuda.so.1 the application loaded (never loaded
 * here). */
#include "inject/calib.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

/* One thread: %globaltimer as it starts, spin until `spin` ns have passed
 * by it, %globaltimer as it ends, and the smallest non-zero step it saw
 * (all ones when none): three words at `out`. PTX, compiled by the
 * driver for the GPU at hand; sm_75 is the oldest CUDA 13 runs on. */
static const char calib_ptx[] =
	".version 6.4\n"
	".target sm_75\n"
	".address_size 64\n"
	".visible .entry gpulse_calibrate(.param .u64 out, .param .u64 spin)\n"
	"{\n"
	"	.reg .pred %p<3>;\n"
	"	.reg .b64 %rd<12>;\n"
	"	ld.param.u64 %rd1, [out];\n"
	"	ld.param.u64 %rd2, [spin];\n"
	"	cvta.to.global.u64 %rd1, %rd1;\n"
	"	mov.u64 %rd3, %globaltimer;\n"
	"	mov.u64 %rd4, %rd3;\n"
	"	mov.u64 %rd7, -1;\n"
	"SPIN:\n"
	"	mov.u64 %rd5, %globaltimer;\n"
	"	sub.u64 %rd6, %rd5, %rd4;\n"
	"	setp.ne.u64 %p1, %rd6, 0;\n"
	"	min.u64 %rd8, %rd7, %rd6;\n"
	"	selp.u64 %rd7, %rd8, %rd7, %p1;\n"
	"	mov.u64 %rd4, %rd5;\n"
	"	sub.u64 %rd9, %rd5, %rd3;\n"
	"	setp.lt.u64 %p2, %rd9, %rd2;\n"
	"	@%p2 bra SPIN;\n"
	"	st.global.u64 [%rd1], %rd3;\n"
	"	st.global.u64 [%rd1+8], %rd5;\n"
	"	st.global.u64 [%rd1+16], %rd7;\n"
	"	ret;\n"
	"}\n";

static _Thread_local int in_calib;

int calib_this_thread(void)
{
	return in_calib;
}

static struct {
	__typeof__(cuDeviceGet) *device_get;
	__typeof__(cuDevicePrimaryCtxGetState) *primary_state;
	__typeof__(cuDevicePrimaryCtxRetain) *primary_retain;
	__typeof__(cuDevicePrimaryCtxRelease) *primary_release;
	__typeof__(cuCtxPushCurrent) *push;
	__typeof__(cuCtxPopCurrent) *pop;
	__typeof__(cuThreadExchangeStreamCaptureMode) *capture_mode;
	__typeof__(cuModuleLoadData) *module_load;
	__typeof__(cuModuleGetFunction) *module_function;
	__typeof__(cuMemHostAlloc) *host_alloc;
	__typeof__(cuStreamCreate) *stream_create;
	__typeof__(cuStreamDestroy) *stream_destroy;
	__typeof__(cuStreamQuery) *stream_query;
	__typeof__(cuStreamWaitValue32) *wait_value;
	__typeof__(cuEventCreate) *event_create;
	__typeof__(cuEventRecord) *event_record;
	__typeof__(cuEventElapsedTime) *event_elapsed;
	__typeof__(cuEventDestroy) *event_destroy;
	__typeof__(cuLaunchKernel) *launch;
} d;

static const char *load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return "libcuda.so.1 is not loaded";
	static const struct { const char *name; void **fn; } fns[] = {
		{"cuDeviceGet", (void **)&d.device_get},
		{"cuDevicePrimaryCtxGetState", (void **)&d.primary_state},
		{"cuDevicePrimaryCtxRetain", (void **)&d.primary_retain},
		{"cuDevicePrimaryCtxRelease_v2", (void **)&d.primary_release},
		{"cuCtxPushCurrent_v2", (void **)&d.push},
		{"cuCtxPopCurrent_v2", (void **)&d.pop},
		{"cuThreadExchangeStreamCaptureMode", (void **)&d.capture_mode},
		{"cuModuleLoadData", (void **)&d.module_load},
		{"cuModuleGetFunction", (void **)&d.module_function},
		{"cuMemHostAlloc", (void **)&d.host_alloc},
		{"cuStreamCreate", (void **)&d.stream_create},
		{"cuStreamDestroy_v2", (void **)&d.stream_destroy},
		{"cuStreamQuery", (void **)&d.stream_query},
		{"cuStreamWaitValue32_v2", (void **)&d.wait_value},
		{"cuEventCreate", (void **)&d.event_create},
		{"cuEventRecord", (void **)&d.event_record},
		{"cuEventElapsedTime_v2", (void **)&d.event_elapsed},
		{"cuEventDestroy_v2", (void **)&d.event_destroy},
		{"cuLaunchKernel", (void **)&d.launch},
	};
	for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
		*fns[i].fn = dlsym(h, fns[i].name);
		if (!*fns[i].fn && strcmp(fns[i].name, "cuEventElapsedTime_v2") == 0)
			*fns[i].fn = dlsym(h, "cuEventElapsedTime");
		if (!*fns[i].fn)
			return fns[i].name; /* named in the reason */
	}
	return NULL;
}

/* Wait for the stream, at most CALIB_WAIT_NS: the GPU may be full of the
 * application's work (a kernel holding every SM for seconds), and the
 * library's thread must not wait for it. 1 done, 0 not in time, -1 an
 * error. */
static int wait_stream(CUstream st)
{
	int64_t until = clock_mono_ns() + CALIB_WAIT_NS;
	for (;;) {
		CUresult q = d.stream_query(st);
		if (q == CUDA_SUCCESS)
			return 1;
		if (q != CUDA_ERROR_NOT_READY)
			return -1;
		if (clock_mono_ns() >= until)
			return 0;
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

/* What a device's calibration keeps for the life of the process, made at
 * its first try: the module, and one block of pinned, device-mapped host
 * memory holding each try's stamps and the word its stream waits on
 * (about 2 KB a try). Nothing of it is ever freed or unloaded, and no
 * stamp is copied back: cuMemFree, cuMemFreeHost, cuModuleUnload and
 * cuMemcpyDtoH wait for work of the whole device or of the legacy
 * stream, which may be the application's launch held on its word until
 * that launch returns, and the watchdog that lets such a hold go runs on
 * this very thread: a driver that makes the launch wait for the
 * synchronising call would deadlock the application. A try abandoned
 * under a busy GPU leaves its kernels pending on their own block, which
 * no later try touches. */
#define CALIB_DEVS 64
struct calib_block {
	uint64_t stamps[CALIB_LAUNCHES + 2 * CALIB_PAIRS][3];
	uint32_t flag;
};
static struct {
	CUmodule mod;
	CUfunction fn;
	struct calib_block *blocks; /* CALIB_TRIES of them */
	int tries;
} devs[CALIB_DEVS];

/* The launches, in device `ordinal`'s context, already current. Returns
 * the samples kept (after the warm-up) or -1 with *why set. */
static int run(int ordinal, struct calib_sample *out, double *gaps, int *npairs, const char **why, int *busy)
{
	CUstream st = NULL;
	CUevent f = NULL, a = NULL, b = NULL;
	int kept = -1, abandoned = 0;
	float fa[CALIB_LAUNCHES], ab[CALIB_LAUNCHES];
	if (ordinal < 0 || ordinal >= CALIB_DEVS) {
		*why = "the device's ordinal is past the calibration's table";
		return -1;
	}
	__typeof__(devs[0]) *dv = &devs[ordinal];
	if (dv->tries >= CALIB_TRIES) {
		*why = "the device's calibration tries are spent";
		return -1;
	}
	if (!dv->mod && d.module_load(&dv->mod, calib_ptx) != CUDA_SUCCESS) {
		dv->mod = NULL;
		*why = "the driver did not compile the calibration kernel";
		return -1;
	}
	if (!dv->fn && d.module_function(&dv->fn, dv->mod, "gpulse_calibrate") != CUDA_SUCCESS) {
		dv->fn = NULL;
		*why = "the calibration module has no kernel";
		return -1;
	}
	if (!dv->blocks &&
	    d.host_alloc((void **)&dv->blocks, CALIB_TRIES * sizeof *dv->blocks,
			 CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP) != CUDA_SUCCESS) {
		dv->blocks = NULL;
		*why = "the calibration's memory could not be made";
		return -1;
	}
	struct calib_block *blk = &dv->blocks[dv->tries++];
	memset(blk, 0, sizeof *blk);
	uint32_t *flag = &blk->flag;
	CUfunction fn = dv->fn;
	if (d.stream_create(&st, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
	    d.event_create(&f, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    d.event_create(&a, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
	    d.event_create(&b, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
		*why = "the calibration's stream or events could not be made";
		goto out;
	}
	for (unsigned i = 0; i < CALIB_LAUNCHES; i++) {
		/* The held path of census_time_start: the stream waits on a
		 * word, then the floor event, the start event, the kernel and
		 * the end event are queued, then the word lets it go. */
		unsigned long long spin = calib_spin_ns[i % CALIB_SPINS];
		CUdeviceptr slot = (CUdeviceptr)(uintptr_t)blk->stamps[i];
		void *args[] = {&slot, &spin};
		uint32_t seq = i + 1;
		int ok = d.wait_value(st, (CUdeviceptr)(uintptr_t)flag, seq, CU_STREAM_WAIT_VALUE_GEQ) ==
				 CUDA_SUCCESS &&
			 d.event_record(f, st) == CUDA_SUCCESS && d.event_record(a, st) == CUDA_SUCCESS &&
			 d.launch(fn, 1, 1, 1, 1, 1, 1, 0, st, args, NULL) == CUDA_SUCCESS &&
			 d.event_record(b, st) == CUDA_SUCCESS;
		__atomic_store_n(flag, seq, __ATOMIC_RELEASE);
		int w = ok ? wait_stream(st) : -1;
		if (w == 0) {
			*why = "the GPU did not run the calibration kernel within 20 ms (busy with other work)";
			abandoned = 1;
			goto out;
		}
		if (w < 0 || d.event_elapsed(&fa[i], f, a) != CUDA_SUCCESS ||
		    d.event_elapsed(&ab[i], a, b) != CUDA_SUCCESS) {
			*why = "a calibration launch failed";
			goto out;
		}
	}
	/* Pairs back to back on the held stream: the second's first stamp
	 * less the first's last is the first's tail and the second's head. */
	for (unsigned i = 0; i < CALIB_PAIRS; i++) {
		int ok = 1;
		uint32_t seq = CALIB_LAUNCHES + i + 1;
		ok = d.wait_value(st, (CUdeviceptr)(uintptr_t)flag, seq, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS;
		for (unsigned k = 0; k < 2 && ok; k++) {
			unsigned long long spin = k == 0 ? CALIB_PAIR_SPIN_NS : 0;
			CUdeviceptr slot = (CUdeviceptr)(uintptr_t)blk->stamps[CALIB_LAUNCHES + 2 * i + k];
			void *args[] = {&slot, &spin};
			ok = d.launch(fn, 1, 1, 1, 1, 1, 1, 0, st, args, NULL) == CUDA_SUCCESS;
		}
		__atomic_store_n(flag, seq, __ATOMIC_RELEASE);
		int w = ok ? wait_stream(st) : -1;
		if (w == 0) {
			*why = "the GPU did not run the calibration kernels within 20 ms (busy with other work)";
			abandoned = 1;
			goto out;
		}
		if (w < 0) {
			*why = "a calibration pair failed";
			goto out;
		}
	}
	/* Every kernel of the try completed (its stream was seen idle): its
	 * stamps are in the mapped memory. */
	uint64_t host[CALIB_LAUNCHES + 2 * CALIB_PAIRS][3];
	for (unsigned i = 0; i < CALIB_LAUNCHES + 2 * CALIB_PAIRS; i++)
		for (unsigned k = 0; k < 3; k++)
			host[i][k] = __atomic_load_n(&blk->stamps[i][k], __ATOMIC_ACQUIRE);
	kept = 0;
	for (unsigned i = CALIB_WARMUP; i < CALIB_LAUNCHES; i++) {
		if (host[i][1] < host[i][0] || fa[i] < 0 || ab[i] < 0)
			continue;
		out[kept].ab_ns = (double)ab[i] * 1e6;
		out[kept].fa_ns = (double)fa[i] * 1e6;
		out[kept].span_ns = (double)(host[i][1] - host[i][0]);
		out[kept].timer_step_ns = host[i][2] == UINT64_MAX ? 0 : (double)host[i][2];
		kept++;
	}
	*npairs = 0;
	for (unsigned i = 0; i < CALIB_PAIRS; i++) {
		const uint64_t *first = host[CALIB_LAUNCHES + 2 * i], *second = host[CALIB_LAUNCHES + 2 * i + 1];
		if (first[1] >= first[0] && second[1] >= second[0])
			gaps[(*npairs)++] = (double)(int64_t)(second[0] - first[1]);
	}
out:
	__atomic_store_n(flag, UINT32_MAX, __ATOMIC_RELEASE); /* nothing left waiting */
	*busy = abandoned;
	/* A stream and events with work pending are released by the driver
	 * once it completes (neither call waits for it). */
	if (st)
		d.stream_destroy(st);
	if (f)
		d.event_destroy(f);
	if (a)
		d.event_destroy(a);
	if (b)
		d.event_destroy(b);
	return abandoned ? -1 : kept;
}

int calib_measure(int ordinal, struct calib_result *r)
{
	memset(r, 0, sizeof *r);
	const char *missing = load();
	if (missing) {
		snprintf(r->why, sizeof r->why, "the driver offers no %s", missing);
		return 0;
	}
	CUdevice dev;
	unsigned flags = 0;
	int active = 0;
	if (d.device_get(&dev, ordinal) != CUDA_SUCCESS ||
	    d.primary_state(dev, &flags, &active) != CUDA_SUCCESS || !active) {
		snprintf(r->why, sizeof r->why, "device %d's primary context is not active", ordinal);
		return 0;
	}
	CUcontext ctx = NULL, popped = NULL;
	if (d.primary_retain(&ctx, dev) != CUDA_SUCCESS) {
		snprintf(r->why, sizeof r->why, "device %d's primary context could not be retained", ordinal);
		return 0;
	}
	struct calib_sample s[CALIB_SPINS * CALIB_PER_SPIN];
	double gaps[CALIB_PAIRS];
	int n = -1, npairs = 0, busy = 0;
	const char *why = "the context could not be made current";
	if (d.push(ctx) == CUDA_SUCCESS) {
		/* Relaxed: a graph the application captures meanwhile (in
		 * global mode) is not broken by this thread's calls, which
		 * touch none of its streams. */
		CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
		int exchanged = d.capture_mode(&mode) == CUDA_SUCCESS;
		in_calib = 1;
		n = run(ordinal, s, gaps, &npairs, &why, &busy);
		in_calib = 0;
		if (exchanged)
			d.capture_mode(&mode);
		d.pop(&popped);
	}
	d.primary_release(dev);
	if (n < 0) {
		snprintf(r->why, sizeof r->why, "%s", why);
		r->retry = busy;
		return 0;
	}
	calib_fit(s, (unsigned)n, gaps, (unsigned)npairs, r);
	return r->ok;
}

/* The kernel module's version from /proc/driver/nvidia/version ("NVRM
 * version: NVIDIA UNIX ... Kernel Module  580.159.04  Release Build ..."):
 * the first word of digits and dots with a dot in it. */
static int module_version(char *buf, size_t n)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "re");
	if (!f)
		return 0;
	char line[512];
	int found = 0;
	if (fgets(line, sizeof line, f)) {
		for (char *w = strtok(line, " \t\n"); w && !found; w = strtok(NULL, " \t\n")) {
			size_t len = strspn(w, "0123456789.");
			if (len == strlen(w) && len > 2 && strchr(w, '.') && w[0] != '.')
				found = snprintf(buf, n, "%s", w) > 0;
		}
	}
	fclose(f);
	return found;
}

int calib_device_key(int ordinal, char *key, size_t n)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return 0;
	CUresult (*get_uuid)(CUuuid *, CUdevice) = NULL;
	CUresult (*get_version)(int *) = NULL;
	*(void **)(&get_uuid) = dlsym(h, "cuDeviceGetUuid_v2");
	if (!get_uuid)
		*(void **)(&get_uuid) = dlsym(h, "cuDeviceGetUuid");
	*(void **)(&get_version) = dlsym(h, "cuDriverGetVersion");
	CUdevice dev;
	CUuuid u;
	char ver[64];
	int cuda_ver = 0;
	int ok = get_uuid && (d.device_get || load() == NULL) && d.device_get(&dev, ordinal) == CUDA_SUCCESS &&
		 get_uuid(&u, dev) == CUDA_SUCCESS;
	if (ok && !module_version(ver, sizeof ver))
		ok = get_version && get_version(&cuda_ver) == CUDA_SUCCESS && cuda_ver > 0 &&
		     snprintf(ver, sizeof ver, "cuda%d", cuda_ver) > 0;
	dlclose(h);
	if (!ok)
		return 0;
	char hex[33];
	for (int i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)u.bytes[i]);
	int w = snprintf(key, n, "GPU-%s-%s", hex, ver);
	return w > 0 && (size_t)w < n;
}
