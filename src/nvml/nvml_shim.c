/* dlopen of libnvidia-ml.so.1 into a table of function pointers; see
 * nvml_shim.h. */
#include "nvml/nvml_shim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

_Thread_local struct nvml_call_watch *nvml_current_watch;

static const char *const fn_names[] = {
#define NVML_FN_NAME(kind, member, sym, alt, params) sym,
	NVML_FUNCS(NVML_FN_NAME)
#undef NVML_FN_NAME
};

static const double bucket_le[] = {
#define NVML_BUCKET(le) le,
	NVML_LATENCY_BUCKETS(NVML_BUCKET)
#undef NVML_BUCKET
};

const char *nvml_fn_name(enum nvml_fn fn)
{
	if ((int)fn < 0 || fn >= NVML_FN_COUNT)
		return "unknown";
	return fn_names[fn];
}

const char *nvml_return_name(nvml_return_t ret)
{
	static const char *const names[] = {
		"SUCCESS", "UNINITIALIZED", "INVALID_ARGUMENT", "NOT_SUPPORTED",
		"NO_PERMISSION", "ALREADY_INITIALIZED", "NOT_FOUND", "INSUFFICIENT_SIZE",
		"INSUFFICIENT_POWER", "DRIVER_NOT_LOADED", "TIMEOUT", "IRQ_ISSUE",
		"LIBRARY_NOT_FOUND", "FUNCTION_NOT_FOUND", "CORRUPTED_INFOROM", "GPU_IS_LOST",
		"RESET_REQUIRED", "OPERATING_SYSTEM", "LIB_RM_VERSION_MISMATCH", "IN_USE",
		"MEMORY", "NO_DATA", "VGPU_ECC_NOT_SUPPORTED", "INSUFFICIENT_RESOURCES",
		"FREQ_NOT_SUPPORTED", "ARGUMENT_VERSION_MISMATCH", "DEPRECATED", "NOT_READY",
		"GPU_NOT_FOUND", "INVALID_STATE",
	};
	if (ret >= 0 && (size_t)ret < sizeof names / sizeof names[0])
		return names[ret];
	return "UNKNOWN";
}

const char *nvml_lib_strerror(const struct nvml_lib *nv, nvml_return_t ret)
{
	if (nv && nv->error_string) {
		const char *s = nv->error_string(ret);
		if (s)
			return s;
	}
	return nvml_return_name(ret);
}

int nvml_status(nvml_return_t ret)
{
	switch (ret) {
	case NVML_ABI_SUCCESS: return GPULSE_OK;
	case NVML_ABI_ERROR_NOT_SUPPORTED:
	case NVML_ABI_ERROR_FUNCTION_NOT_FOUND: return GPULSE_ENOTSUP;
	case NVML_ABI_ERROR_GPU_IS_LOST: return GPULSE_EGPULOST;
	case NVML_ABI_ERROR_DRIVER_NOT_LOADED: return GPULSE_ENODRIVER;
	case NVML_ABI_ERROR_TIMEOUT: return GPULSE_ETIMEDOUT;
	case NVML_ABI_ERROR_INVALID_ARGUMENT: return GPULSE_EINVAL;
	case NVML_ABI_ERROR_NOT_FOUND:
	case NVML_ABI_ERROR_GPU_NOT_FOUND: return GPULSE_ENOENT;
	case NVML_ABI_ERROR_INSUFFICIENT_SIZE: return GPULSE_ELIMIT;
	case NVML_ABI_ERROR_MEMORY: return GPULSE_ENOMEM;
	case NVML_ABI_ERROR_IN_USE: return GPULSE_EBUSY;
	default: return GPULSE_EVENDOR;
	}
}

void nvml_account(struct nvml_lib *nv, enum nvml_fn fn, int64_t start_ns, nvml_return_t ret)
{
	int64_t end = clock_mono_ns();
	struct nvml_call_watch *w = nvml_current_watch;
	if (w)
		atomic_store_explicit(&w->start_ns, 0, memory_order_release);
	struct nvml_fn_stats *s = &nv->stats[fn];
	uint64_t ns = end > start_ns ? (uint64_t)(end - start_ns) : 0;
	atomic_fetch_add_explicit(&s->calls, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->latency_ns_sum, ns, memory_order_relaxed);
	double sec = (double)ns / 1e9;
	int b = 0;
	while (b < NVML_LATENCY_BUCKET_COUNT - 1 && sec > bucket_le[b])
		b++;
	if (sec <= bucket_le[b])
		atomic_fetch_add_explicit(&s->bucket[b], 1, memory_order_relaxed);
	/* A call slower than the last bucket counts only in calls (+Inf). */
	if (ret != NVML_ABI_SUCCESS) {
		int cls = (ret > 0 && ret < NVML_ERROR_CLASSES - 1) ? ret : NVML_ERROR_CLASSES - 1;
		atomic_fetch_add_explicit(&s->errors[cls], 1, memory_order_relaxed);
	}
}

static void *resolve(void *handle, const char *sym, const char *alt)
{
	void *p = dlsym(handle, sym);
	if (!p && alt)
		p = dlsym(handle, alt);
	return p;
}

int nvml_lib_open(struct nvml_lib **out, const char *path, char *err, size_t errlen)
{
	int rc = GPULSE_OK;
	*out = NULL;
	if (!path || !*path)
		path = "libnvidia-ml.so.1";
	struct nvml_lib *nv = calloc(1, sizeof *nv);
	if (!nv) {
		snprintf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	snprintf(nv->path, sizeof nv->path, "%s", path);
	nv->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!nv->handle) {
		const char *why = dlerror();
		snprintf(err, errlen, "cannot load NVML (%s): %s", path, why ? why : "unknown error");
		rc = GPULSE_ENOLIB;
		goto out;
	}
#define NVML_FN_RESOLVE(kind, member, sym, alt, params)                               \
	*(void **)(&nv->member) = resolve(nv->handle, sym, alt);                      \
	if (!nv->member && strcmp(#kind, "REQ") == 0) {                               \
		snprintf(err, errlen, "NVML library %s lacks required symbol %s; "    \
			 "the driver is too old or the file is not NVML", path, sym); \
		rc = GPULSE_ENOLIB;                                                   \
		goto out;                                                             \
	}
	NVML_FUNCS(NVML_FN_RESOLVE)
#undef NVML_FN_RESOLVE
	*(void **)(&nv->error_string) = dlsym(nv->handle, "nvmlErrorString");

	nvml_return_t r = NVML_CALL(nv, init);
	if (r != NVML_ABI_SUCCESS) {
		const char *what = nvml_lib_strerror(nv, r);
		if (r == NVML_ABI_ERROR_DRIVER_NOT_LOADED) {
			snprintf(err, errlen, "NVIDIA driver is not loaded (nvmlInit: %s)", what);
			rc = GPULSE_ENODRIVER;
		} else if (r == NVML_ABI_ERROR_LIB_RM_VERSION_MISMATCH) {
			snprintf(err, errlen, "NVML library and kernel driver versions differ "
				 "(nvmlInit: %s); reboot or reload the driver", what);
			rc = GPULSE_ENODRIVER;
		} else {
			snprintf(err, errlen, "nvmlInit failed: %s (%d)", what, r);
			rc = GPULSE_EVENDOR;
		}
		goto out;
	}
	*out = nv;
	return GPULSE_OK;
out:
	if (nv->handle)
		dlclose(nv->handle);
	free(nv);
	return rc;
}

void nvml_lib_close(struct nvml_lib *nv)
{
	if (!nv)
		return;
	nv->shutdown();
	dlclose(nv->handle);
	free(nv);
}
