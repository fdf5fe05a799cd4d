/* CUPTI opened at run time into one table of function pointers (the NVML
 * shim's habit, DESIGN.md decision 1). The CUPTI headers give the types
 * only: the library links no CUPTI, so an application without CUPTI, or
 * with another version of it, loads it all the same and is told why it
 * steps aside. */
#ifndef GPULSE_INJECT_CUPTI_SHIM_H
#define GPULSE_INJECT_CUPTI_SHIM_H

#include <stddef.h>

#include <cupti.h>

/* X(required, member, symbol) */
#define CUPTI_FUNCS(X)                                                   \
	X(1, get_version, cuptiGetVersion)                               \
	X(1, get_result_string, cuptiGetResultString)                    \
	X(1, subscribe, cuptiSubscribe)                                  \
	X(1, unsubscribe, cuptiUnsubscribe)                              \
	X(1, enable_callback, cuptiEnableCallback)                       \
	X(1, activity_enable, cuptiActivityEnable)                       \
	X(1, activity_disable, cuptiActivityDisable)                     \
	X(1, activity_register_callbacks, cuptiActivityRegisterCallbacks) \
	X(1, activity_get_next_record, cuptiActivityGetNextRecord)       \
	X(1, activity_get_num_dropped_records, cuptiActivityGetNumDroppedRecords) \
	X(1, activity_flush_all, cuptiActivityFlushAll)                  \
	X(1, get_timestamp, cuptiGetTimestamp)                           \
	X(0, activity_configure_uvm, cuptiActivityConfigureUnifiedMemoryCounter) \
	X(0, get_device_id, cuptiGetDeviceId)                            \
	X(0, get_context_id, cuptiGetContextId)                          \
	X(0, activity_set_attribute, cuptiActivitySetAttribute)          \
	X(0, subscribe_v2, cuptiSubscribe_v2)                            \
	X(0, finalize, cuptiFinalize)

struct cupti_lib {
	void *handle;
	char path[512];
	uint32_t version;
	int app_loaded;            /* the application had loaded it itself */
#define CUPTI_FN_MEMBER(req, member, sym) __typeof__(sym) *member;
	CUPTI_FUNCS(CUPTI_FN_MEMBER)
#undef CUPTI_FN_MEMBER
};

/* Find and open CUPTI: the copy the application already loaded
 * (RTLD_NOLOAD), then `configured` (GPULSE_CUPTI_PATH; may be NULL or
 * ""), then the CUDA toolkit's. Fills *lib. 0, GPULSE_ENOLIB (not found,
 * or a required symbol missing) or GPULSE_ENOTSUP (a CUPTI whose major
 * version differs from the headers the library was built with); err
 * says which in one sentence. */
int cupti_lib_open(struct cupti_lib *lib, const char *configured, char *err, size_t errlen);

/* CUPTI's text for a result code (never NULL). */
const char *cupti_lib_strerror(const struct cupti_lib *lib, CUptiResult r);

#endif
