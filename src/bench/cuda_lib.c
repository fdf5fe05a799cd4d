/* dlopen of libcuda.so.1 and libcublasLt.so.N; see cuda_lib.h. */
#include "bench/cuda_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

static void *resolve(void *handle, const char *sym, const char *alt)
{
	void *p = dlsym(handle, sym);
	if (!p && alt)
		p = dlsym(handle, alt);
	return p;
}

int cuda_lib_open(struct cuda_lib **out, const char *path, char *err, size_t errlen)
{
	*out = NULL;
	if (!path || !*path)
		path = getenv("GPULSE_CUDA_LIBRARY");
	if (!path || !*path)
		path = "libcuda.so.1";
	struct cuda_lib *cu = calloc(1, sizeof *cu);
	if (!cu) {
		snprintf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	snprintf(cu->path, sizeof cu->path, "%s", path);
	cu->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!cu->handle) {
		const char *why = dlerror();
		snprintf(err, errlen,
			 "no NVIDIA driver: cannot load the CUDA driver library %s (%s)", path,
			 why ? why : "dlopen failed");
		free(cu);
		return GPULSE_ENOLIB;
	}
#define CUDA_FN_RESOLVE(member, sym, alt, params)                                            \
	*(void **)&cu->member = resolve(cu->handle, sym, alt);                                \
	if (!cu->member) {                                                                    \
		snprintf(err, errlen, "%s lacks %s: the driver is too old for gpulse bench", \
			 path, sym);                                                          \
		cuda_lib_close(cu);                                                           \
		return GPULSE_ENOLIB;                                                         \
	}
	CUDA_FUNCS(CUDA_FN_RESOLVE)
#undef CUDA_FN_RESOLVE
	*(void **)&cu->get_error_name = dlsym(cu->handle, "cuGetErrorName");
	cu_result_t r = cu->init(0);
	if (r != CU_ABI_SUCCESS) {
		snprintf(err, errlen, "the CUDA driver did not start (cuInit: %s)%s",
			 cuda_lib_strerror(cu, r),
			 r == CU_ABI_ERROR_NO_DEVICE ? ": no CUDA-capable GPU is visible" : "");
		cuda_lib_close(cu);
		return GPULSE_ENODRIVER;
	}
	*out = cu;
	return GPULSE_OK;
}

void cuda_lib_close(struct cuda_lib *cu)
{
	if (!cu)
		return;
	if (cu->handle)
		dlclose(cu->handle);
	free(cu);
}

const char *cuda_lib_strerror(const struct cuda_lib *cu, cu_result_t r)
{
	static _Thread_local char buf[48];
	const char *s = NULL;
	if (cu && cu->get_error_name && cu->get_error_name(r, &s) == CU_ABI_SUCCESS && s)
		return s;
	snprintf(buf, sizeof buf, "CUresult %d", r);
	return buf;
}

static int lt_try(struct cublaslt_lib *lt, const char *path, char *err, size_t errlen)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(err, errlen, "%s (%s)", path, why ? why : "dlopen failed");
		return GPULSE_ENOLIB;
	}
	lt->handle = h;
	snprintf(lt->path, sizeof lt->path, "%s", path);
#define CUBLASLT_FN_RESOLVE(member, sym, alt, params)                                  \
	*(void **)&lt->member = resolve(h, sym, alt);                                   \
	if (!lt->member) {                                                              \
		snprintf(err, errlen, "%s lacks %s", path, sym);                        \
		dlclose(h);                                                             \
		lt->handle = NULL;                                                      \
		return GPULSE_ENOLIB;                                                   \
	}
	CUBLASLT_FUNCS(CUBLASLT_FN_RESOLVE)
#undef CUBLASLT_FN_RESOLVE
	size_t (*get_version)(void);
	*(void **)&get_version = dlsym(h, "cublasLtGetVersion");
	lt->version = get_version ? get_version() : 0;
	return GPULSE_OK;
}

int cublaslt_lib_open(struct cublaslt_lib **out, const char *path, char *err, size_t errlen)
{
	*out = NULL;
	struct cublaslt_lib *lt = calloc(1, sizeof *lt);
	if (!lt) {
		snprintf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	const char *env = getenv("GPULSE_CUBLASLT");
	const char *given = path && *path ? path : env && *env ? env : NULL;
	static const char *const names[] = {"libcublasLt.so.13", "libcublasLt.so.12",
					    "libcublasLt.so.11"};
	char why[3][160];
	if (given) {
		if (lt_try(lt, given, why[0], sizeof why[0]) == GPULSE_OK) {
			*out = lt;
			return GPULSE_OK;
		}
		snprintf(err, errlen, "cuBLASLt not loaded: %s", why[0]);
		free(lt);
		return GPULSE_ENOLIB;
	}
	for (size_t i = 0; i < 3; i++)
		if (lt_try(lt, names[i], why[i], sizeof why[i]) == GPULSE_OK) {
			*out = lt;
			return GPULSE_OK;
		}
	snprintf(err, errlen,
		 "cuBLASLt not found (tried libcublasLt.so.13, .12, .11: %s): install the CUDA "
		 "toolkit's libcublasLt or give --cublaslt PATH (or GPULSE_CUBLASLT)",
		 why[0]);
	free(lt);
	return GPULSE_ENOLIB;
}

void cublaslt_lib_close(struct cublaslt_lib *lt)
{
	if (!lt)
		return;
	if (lt->handle)
		dlclose(lt->handle);
	free(lt);
}
