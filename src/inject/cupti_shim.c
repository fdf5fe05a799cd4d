/* dlopen of CUPTI into a table of function pointers; see cupti_shim.h. */
#include "inject/cupti_shim.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "common/str.h"

#if CUPTI_API_VERSION / 10000 == 13
#define CUPTI_SONAME "libcupti.so.13"
#else
#define CUPTI_SONAME "libcupti.so"
#endif

/* Where the CUDA toolkit keeps CUPTI, newest layout first. */
static const char *const toolkit_paths[] = {
	"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
	"/usr/local/cuda/lib64/libcupti.so",
	"/usr/local/cuda/lib/libcupti.so",
	CUPTI_SONAME,
	"libcupti.so",
};

struct find_loaded {
	char path[512];
};

/* dl_iterate_phdr callback: remember a loaded object named libcupti.so*. */
static int find_loaded_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct find_loaded *f = arg;
	const char *name = info->dlpi_name;
	if (!name || !*name)
		return 0;
	const char *base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, "libcupti.so", 11) == 0) {
		str_copy(f->path, sizeof f->path, name);
		return 1;
	}
	return 0;
}

static int resolve_all(struct cupti_lib *lib, char *err, size_t errlen)
{
#define CUPTI_FN_RESOLVE(req, member, sym)                                            \
	*(void **)(&lib->member) = dlsym(lib->handle, #sym);                          \
	if (!lib->member && req) {                                                    \
		str_errf(err, errlen, "CUPTI at %s lacks %s; it is too old", lib->path, #sym); \
		return GPULSE_ENOLIB;                                                 \
	}
	CUPTI_FUNCS(CUPTI_FN_RESOLVE)
#undef CUPTI_FN_RESOLVE
	return GPULSE_OK;
}

int cupti_lib_open(struct cupti_lib *lib, const char *configured, char *err, size_t errlen)
{
	memset(lib, 0, sizeof *lib);
	/* 1. The CUPTI the application already loaded (PyTorch links one):
	 * two copies of CUPTI in a process would fight over the driver. */
	struct find_loaded f = { .path = "" };
	dl_iterate_phdr(find_loaded_cb, &f);
	if (f.path[0]) {
		lib->handle = dlopen(f.path, RTLD_NOW | RTLD_NOLOAD);
		if (lib->handle) {
			str_copy(lib->path, sizeof lib->path, f.path);
			lib->app_loaded = 1;
		}
	}
	/* 2. A configured path, 3. the toolkit's. */
	if (!lib->handle && configured && *configured) {
		lib->handle = dlopen(configured, RTLD_NOW | RTLD_LOCAL);
		if (!lib->handle) {
			const char *why = dlerror();
			str_errf(err, errlen, "cannot load CUPTI from GPULSE_CUPTI_PATH=%s: %s", configured,
				 why ? why : "unknown error");
			return GPULSE_ENOLIB;
		}
		str_copy(lib->path, sizeof lib->path, configured);
	}
	for (size_t i = 0; !lib->handle && i < sizeof toolkit_paths / sizeof toolkit_paths[0]; i++) {
		lib->handle = dlopen(toolkit_paths[i], RTLD_NOW | RTLD_LOCAL);
		if (lib->handle)
			str_copy(lib->path, sizeof lib->path, toolkit_paths[i]);
	}
	if (!lib->handle) {
		str_errf(err, errlen, "CUPTI not found (not loaded by the application, not in "
			 "/usr/local/cuda; set GPULSE_CUPTI_PATH)");
		return GPULSE_ENOLIB;
	}
	int rc = resolve_all(lib, err, errlen);
	if (rc != GPULSE_OK)
		goto fail;
	if (lib->get_version(&lib->version) != CUPTI_SUCCESS) {
		str_errf(err, errlen, "CUPTI at %s does not report its version", lib->path);
		rc = GPULSE_ENOLIB;
		goto fail;
	}
	/* Activity record layouts are fixed within a major version (from
	 * CUDA 13 on the version is xxyyzz with xx the CUDA major). */
	if (lib->version / 10000 != CUPTI_API_VERSION / 10000) {
		str_errf(err, errlen, "CUPTI at %s has API version %u; this library was built for "
			 "CUPTI %u.x", lib->path, lib->version, CUPTI_API_VERSION / 10000);
		rc = GPULSE_ENOTSUP;
		goto fail;
	}
	return GPULSE_OK;
fail:
	/* Never dlclose a CUPTI the application loaded; closing ours is
	 * harmless, but a failed CUPTI may have started threads: keep it. */
	lib->handle = NULL;
	return rc;
}

const char *cupti_lib_strerror(const struct cupti_lib *lib, CUptiResult r)
{
	const char *s = NULL;
	if (lib && lib->get_result_string && lib->get_result_string(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}
