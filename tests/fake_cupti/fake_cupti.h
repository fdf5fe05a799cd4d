/* The test's side of the CUPTI stand-in (tests/fake_cupti/fake_cupti.c):
 * what the application does, and what the stand-in saw. No CUPTI types,
 * so tests include it anywhere (they find the functions with dlsym). */
#ifndef GPULSE_TESTS_FAKE_CUPTI_H
#define GPULSE_TESTS_FAKE_CUPTI_H

#include <stdint.h>

struct fake_cupti_stats {
	uint64_t launches;          /* kernels the application launched */
	uint64_t kernel_records;    /* of them, recorded (kernel kind on) */
	uint64_t enables, disables; /* calls for the kernel kind */
	uint64_t subscribes;        /* successful cuptiSubscribe calls */
	uint64_t driver_callbacks;  /* driver API calls a subscriber heard of (launches, copies) */
	uint64_t finalizes;         /* cuptiFinalize at an API exit */
	uint64_t finalize_refused;  /* cuptiFinalize anywhere else (refused) */
	uint64_t registrations;     /* cuptiActivityRegisterCallbacks calls */
	uint64_t kind_changes;      /* enable/disable calls for any kind */
	int shared_buffer;          /* per-thread activity buffers turned off */
	uint64_t late_attributes;   /* that attribute set after the callbacks
				     * or a kind: undefined in CUPTI */
	int subscribed;             /* a subscriber exists now */
	int foreign;                /* it is the test's "other profiler" */
	int kernel_kind_on;
	int uvm_on;
};

/* A context exists now: unified-memory counters can be configured, and a
 * subscriber that asked for context creation hears of it. */
void fake_cupti_context_created(void);
/* An API call the subscriber may have asked to hear about (site:
 * CUPTI_API_ENTER 0, CUPTI_API_EXIT 1). */
void fake_cupti_api(int domain, int cbid, int site);
/* n launches of `name` (a pointer that stays valid, as CUPTI's names do),
 * dur_ns each, on stream 7 of device 0. */
void fake_cupti_launch(const char *name, uint64_t dur_ns, int n);
/* The next n launches' exit callbacks are not delivered. */
void fake_cupti_drop_exits(int n);
void fake_cupti_set_launch_call_ns(const char *name, int64_t ns);
/* cudaProfilerStart (start = 1: the callback at its exit) or
 * cudaProfilerStop (start = 0: at its entry). */
void fake_cupti_profiler(int start);
/* A copy of `bytes` to the device (to_device = 1) or back, from pinned or
 * pageable host memory. */
void fake_cupti_memcpy(int to_device, int pinned, uint64_t bytes, uint64_t dur_ns);
/* A unified-memory migration of `bytes`, to the device or back. */
void fake_cupti_uvm(int to_device, uint64_t bytes);
/* Another profiler takes CUPTI's one subscriber; 0 if someone holds it. */
int fake_cupti_take_subscriber(void);
/* The next cuptiSubscribe waits until fake_cupti_take_subscriber has
 * succeeded (at most 30 s): it then finds CUPTI taken. So a test orders
 * the other profiler's subscription before the library's next probe,
 * whatever the scheduler does with the library's thread. */
void fake_cupti_gate_next_subscribe(void);
void fake_cupti_stats(struct fake_cupti_stats *s);
/* NVTX calls as CUPTI's callbacks report them: push/pop (one thread),
 * start/end (any threads; a start's id is its return value, ret_id 0 for
 * a start whose id CUPTI did not pass). */
void fake_cupti_nvtx_push(const char *name);
void fake_cupti_nvtx_pop(void);
void fake_cupti_nvtx_start(const char *name, uint64_t ret_id);
void fake_cupti_nvtx_end(uint64_t id);
/* Keep full buffers (on = 1) through flushes until the first flush after
 * the hold ends (on = 0), as CUPTI does when its thread falls behind, so
 * the library's cap on buffers is reached. */
void fake_cupti_hold_buffers(int on);
/* An NVTX range edge as a MARKER activity record (continuous and full
 * modes): start = 1 opens range `id` named `name` (a lasting pointer),
 * start = 0 closes it. */
void fake_cupti_marker(int start, uint32_t id, const char *name);
/* From now on every flush takes ms milliseconds (a stuck CUPTI). */
void fake_cupti_slow_flush(int ms);

#endif
