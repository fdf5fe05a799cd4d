/* The records of libgpulse-inject.so's exact tracing: kernel names
 * demangled as torch.profiler shows them, CUPTI's activity buffers and
 * the records in them (kernels, copies, memsets, synchronisations, NVTX
 * markers, unified-memory counters) added to the interval's tables, and
 * the NVTX ranges heard on callbacks of the focused modes. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <generated_nvtx_meta.h>

#include "inject/inject_internal.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/str.h"

#define BUFFER_BYTES    (1u << 20)  /* one CUPTI activity buffer */
#define BUFFERS_MAX     32          /* outstanding: 32 MiB at most */
#define NVTX_DEPTH      32          /* nested ranges tracked per thread */

struct inject_activity act = { .buffers_mu = PTHREAD_MUTEX_INITIALIZER };

struct nvtx_frame {
	int64_t start_mono_ns;
	uint8_t focus;
	char name[WIRE_NAME_MAX + 1];
};

static _Thread_local struct {
	unsigned depth;
	struct nvtx_frame frames[NVTX_DEPTH];
} nvtx_stack;

/* NVTX start/end ranges (focused nvtx mode): unlike push/pop they may end
 * on another thread, so they live in one small table under their own
 * lock, held only to copy an entry in or out. */
#define NVTX_OPEN_MAX 64

static struct {
	pthread_mutex_t mu;
	struct nvtx_open {
		uint64_t id;           /* nvtxRangeId_t; 0: free */
		struct nvtx_frame f;
	} open[NVTX_OPEN_MAX];
} nvtx_ranges = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* In a forked child: no range is open, and the lock is free (fork_child). */
void nvtx_fork_child(void)
{
	pthread_mutex_init(&nvtx_ranges.mu, NULL);
	memset(nvtx_ranges.open, 0, sizeof nvtx_ranges.open);
	nvtx_stack.depth = 0;
}

/* ---- names ---- */

typedef char *cxa_demangle_fn(const char *, char *, size_t *, int *);
static cxa_demangle_fn *demangler;

void find_demangler(void)
{
	*(void **)(&demangler) = dlsym(RTLD_DEFAULT, "__cxa_demangle");
	if (!demangler) {
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
		if (h)
			*(void **)(&demangler) = dlsym(h, "__cxa_demangle");
	}
}

/* The kernel's name as torch.profiler (Kineto: abi::__cxa_demangle, the
 * mangled text when that fails) and Nsight Systems show it, fitted to
 * WIRE_KERNEL_NAME_MAX with a hash of the whole past it. */
static void demangle_into(const char *mangled, char out[WIRE_KERNEL_NAME_MAX + 1])
{
	int status = -1;
	char *d = NULL;
	if (demangler && mangled[0] == '_' && mangled[1] == 'Z')
		d = demangler(mangled, NULL, NULL, &status);
	wire_kernel_name_fit(out, (d && status == 0) ? d : mangled);
	free(d);
}

/* Demangled name for CUPTI's name pointer; under lib.mu. */
const char *kernel_name(const char *mangled)
{
	static char scratch[WIRE_KERNEL_NAME_MAX + 1];
	if (!mangled)
		return "(unnamed)";
	if (act.names) {
		uintptr_t h = ((uintptr_t)mangled >> 4) * 0x9e3779b97f4a7c15ull;
		unsigned i = (unsigned)(h >> 40) & (NAME_CACHE - 1);
		for (unsigned probe = 0; probe < 16; probe++, i = (i + 1) & (NAME_CACHE - 1)) {
			struct name_entry *e = &act.names[i];
			if (e->key == mangled)
				return e->name;
			if (!e->key) {
				demangle_into(mangled, scratch);
				e->name = strdup(scratch);
				if (!e->name)
					break;
				e->key = mangled;
				return e->name;
			}
		}
	}
	act.names_uncached++;
	demangle_into(mangled, scratch);
	return scratch;
}

/* ---- activity ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	*max_records = 0;
	*buffer = NULL;
	*size = 0;
	/* Past the cap CUPTI drops records and counts them; we read its
	 * count when the next buffer completes. */
	if (atomic_fetch_add(&act.buffers_out, 1) >= BUFFERS_MAX) {
		atomic_fetch_sub(&act.buffers_out, 1);
		return;
	}
	uint8_t *b = aligned_alloc(8, BUFFER_BYTES);
	if (!b) {
		atomic_fetch_sub(&act.buffers_out, 1);
		return;
	}
	*buffer = b;
	*size = BUFFER_BYTES;
}

static uint8_t copy_kind(uint8_t cupti_kind)
{
	switch (cupti_kind) {
	case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return WIRE_COPY_H2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return WIRE_COPY_D2H;
	case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return WIRE_COPY_D2D;
	case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return WIRE_COPY_PEER;
	default: return WIRE_COPY_OTHER;
	}
}

/* Host memory is pageable only when CUPTI says so; device memory on
 * both sides counts as pinned. */
static uint8_t copy_pinned(uint8_t kind, uint8_t src_kind, uint8_t dst_kind)
{
	uint8_t host = kind == WIRE_COPY_H2D ? src_kind : kind == WIRE_COPY_D2H ? dst_kind : 0;
	if (kind == WIRE_COPY_OTHER)
		host = src_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ? src_kind : dst_kind;
	return host != CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
}

/* Whether what happens now belongs to a capture (callbacks, which run
 * as it happens); under lib.mu. */
static int capturing(void)
{
	return atomic_load_explicit(&lib.capture_on, memory_order_relaxed) &&
	       capture_active(lib.cap, clock_mono_ns());
}

/* Whether an activity record that started at CUPTI time ts belongs to a
 * capture (records arrive up to a flush later); under lib.mu. */
static int captured(int cap, uint64_t ts)
{
	return cap && capture_active(lib.cap, (int64_t)ts + lib.cupti_to_wall_ns - lib.mono_to_wall_ns);
}

/* NVTX ranges from MARKER records (continuous and full modes): a start
 * record names the range, the end record with the same id closes it.
 * Under lib.mu. */
static void marker(uint32_t flags, uint32_t id, uint64_t ts, const char *name, int cap)
{
	if (!act.markers || id == 0)
		return;
	unsigned h = (id * 2654435761u) & (MARKERS_OPEN - 1);
	if (flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		for (unsigned p = 0; p < MARKERS_OPEN; p++, h = (h + 1) & (MARKERS_OPEN - 1)) {
			struct marker_open *m = &act.markers[h];
			if (m->id == 0) {
				m->id = id;
				m->start_ns = ts;
				str_copy(m->name, sizeof m->name, name ? name : "");
				return;
			}
		}
		atomic_fetch_add(&act.nvtx_dropped, 1); /* too many open ranges */
	} else if (flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		/* Linear probing: the run from the id's home slot ends at the
		 * first free slot (deletions re-seat what follows them). */
		for (unsigned p = 0; p < MARKERS_OPEN && act.markers[h].id;
		     p++, h = (h + 1) & (MARKERS_OPEN - 1)) {
			struct marker_open *m = &act.markers[h];
			if (m->id != id)
				continue;
			agg_add_range(lib.cur, m->name, ts > m->start_ns ? ts - m->start_ns : 0);
			if (captured(cap, m->start_ns))
				capture_add(lib.cap, WIRE_EV_RANGE, 0, 0, 0,
					    m->start_ns + (uint64_t)lib.cupti_to_wall_ns,
					    ts + (uint64_t)lib.cupti_to_wall_ns, 0, m->name);
			m->id = 0;
			/* Re-seat the entries after it in the probe run, so later
			 * lookups still find them. */
			unsigned j = (h + 1) & (MARKERS_OPEN - 1);
			while (act.markers[j].id) {
				struct marker_open t = act.markers[j];
				act.markers[j].id = 0;
				unsigned k = (t.id * 2654435761u) & (MARKERS_OPEN - 1);
				while (act.markers[k].id)
					k = (k + 1) & (MARKERS_OPEN - 1);
				act.markers[k] = t;
				j = (j + 1) & (MARKERS_OPEN - 1);
			}
			return;
		}
	}
}

static void process_record(CUpti_Activity *rec, int cap)
{
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
		struct agg_kernel_rec r = {
			.name = kernel_name(k->name), .device = k->deviceId, .context = k->contextId,
			.stream = k->streamId, .start_ns = k->start, .end_ns = k->end,
			.grid = { (uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ },
			.block = { (uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ },
			.registers = k->registersPerThread,
			.shared_bytes = (uint32_t)k->staticSharedMemory + (uint32_t)k->dynamicSharedMemory,
		};
		agg_add_kernel(lib.cur, &r);
		atomic_fetch_add_explicit(&act.launch_records, 1, memory_order_relaxed);
		if (captured(cap, k->start))
			capture_add(lib.cap, WIRE_EV_KERNEL, 0, k->deviceId, k->streamId,
				    k->start + (uint64_t)lib.cupti_to_wall_ns,
				    k->end + (uint64_t)lib.cupti_to_wall_ns, 0, r.name);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
		uint8_t kind = copy_kind(m->copyKind);
		struct agg_copy_rec r = {
			.kind = kind, .pinned = copy_pinned(kind, m->srcKind, m->dstKind),
			.device = m->deviceId, .context = m->contextId, .stream = m->streamId,
			.start_ns = m->start, .end_ns = m->end, .bytes = m->bytes,
		};
		agg_add_copy(lib.cur, &r);
		atomic_fetch_add_explicit(&act.launch_records, 1, memory_order_relaxed);
		if (captured(cap, m->start))
			capture_add(lib.cap, WIRE_EV_COPY, kind, m->deviceId, m->streamId,
				    m->start + (uint64_t)lib.cupti_to_wall_ns,
				    m->end + (uint64_t)lib.cupti_to_wall_ns, m->bytes,
				    agg_copy_kind_name(kind));
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)rec;
		struct agg_copy_rec r = {
			.kind = WIRE_COPY_PEER, .pinned = 1, .device = m->deviceId,
			.context = m->contextId, .stream = m->streamId, .start_ns = m->start,
			.end_ns = m->end, .bytes = m->bytes,
		};
		agg_add_copy(lib.cur, &r);
		atomic_fetch_add_explicit(&act.launch_records, 1, memory_order_relaxed);
		if (captured(cap, m->start))
			capture_add(lib.cap, WIRE_EV_COPY, WIRE_COPY_PEER, m->deviceId, m->streamId,
				    m->start + (uint64_t)lib.cupti_to_wall_ns,
				    m->end + (uint64_t)lib.cupti_to_wall_ns, m->bytes, "peer");
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
		struct agg_copy_rec r = {
			.kind = WIRE_COPY_MEMSET, .pinned = 1, .device = m->deviceId,
			.context = m->contextId, .stream = m->streamId, .start_ns = m->start,
			.end_ns = m->end, .bytes = m->bytes,
		};
		agg_add_copy(lib.cur, &r);
		atomic_fetch_add_explicit(&act.launch_records, 1, memory_order_relaxed);
		if (captured(cap, m->start))
			capture_add(lib.cap, WIRE_EV_MEMSET, WIRE_COPY_MEMSET, m->deviceId, m->streamId,
				    m->start + (uint64_t)lib.cupti_to_wall_ns,
				    m->end + (uint64_t)lib.cupti_to_wall_ns, m->bytes, "memset");
		break;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const CUpti_ActivitySynchronization2 *)rec;
		/* A stream waiting on an event is GPU-side ordering, not a
		 * host wait. */
		if (s->type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT)
			break;
		struct agg_sync_rec r = {
			.device = 0, .context = s->contextId,
			.stream = s->streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? AGG_STREAM_NONE
										    : s->streamId,
			.start_ns = s->start, .end_ns = s->end,
		};
		/* The record names no device; the context's kernels do. */
		for (unsigned i = 0; i < lib.cur->nscopes; i++)
			if (lib.cur->scopes[i].context == s->contextId)
				r.device = lib.cur->scopes[i].device;
		agg_add_sync(lib.cur, &r);
		break;
	}
	case CUPTI_ACTIVITY_KIND_MARKER: {
		const CUpti_ActivityMarker2 *mk = (const CUpti_ActivityMarker2 *)rec;
		marker(mk->flags, mk->id, mk->timestamp, mk->name, cap);
		break;
	}
	case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
		const CUpti_ActivityUnifiedMemoryCounter3 *u =
			(const CUpti_ActivityUnifiedMemoryCounter3 *)rec;
		enum agg_uvm_counter c;
		uint32_t dev = u->srcId;
		switch (u->counterKind) {
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
			c = AGG_UVM_BYTES_H2D;
			dev = u->dstId;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
			c = AGG_UVM_BYTES_D2H;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
			/* One record per CPU fault; its value is not a count
			 * (the H200 showed address-sized numbers there). */
			agg_add_uvm(lib.cur, 0, AGG_UVM_CPU_FAULTS, 1);
			return;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
			c = AGG_UVM_GPU_FAULTS;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING:
			c = AGG_UVM_THRASHING;
			break;
		case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING:
			c = AGG_UVM_THROTTLING;
			break;
		default:
			return;
		}
		if (dev >= 1024)
			dev = 0; /* a CPU id or "invalid" on the other side */
		agg_add_uvm(lib.cur, dev, c, u->value);
		break;
	}
	default:
		break;
	}
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
				      size_t size, size_t valid)
{
	(void)size;
	if (buffer && valid > 0 && lib.cur) {
		int64_t t0 = clock_mono_ns();
		uint64_t n = 0;
		pthread_mutex_lock(&lib.mu);
		int cap = atomic_load(&lib.capture_on);
		uint64_t dropped_before = lib.cur->dropped;
		CUpti_Activity *rec = NULL;
		while (lib.cupti.activity_get_next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
			process_record(rec, cap);
			n++;
		}
		uint64_t bound_drops = lib.cur->dropped - dropped_before;
		pthread_mutex_unlock(&lib.mu);
		atomic_fetch_add(&act.records_total, n);
		atomic_fetch_add(&act.records_dropped, bound_drops);
		atomic_fetch_add(&act.proc_ns, (uint64_t)(clock_mono_ns() - t0));
		atomic_fetch_add(&act.proc_records, n);
	}
	size_t dropped = 0;
	if (lib.cupti.activity_get_num_dropped_records &&
	    lib.cupti.activity_get_num_dropped_records(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
	    dropped)
		atomic_fetch_add(&act.records_dropped, dropped);
	if (buffer) {
		free(buffer);
		atomic_fetch_sub(&act.buffers_out, 1);
	}
}

/* ---- callbacks ---- */

/* A range opens: name it, and turn tracing on if it is the focus. */
static void range_begin(struct nvtx_frame *f, const char *name)
{
	str_copy(f->name, sizeof f->name, name ? name : "");
	f->focus = lib.mode == WIRE_MODE_FOCUSED_NVTX && strcmp(f->name, lib.nvtx_focus) == 0;
	if (f->focus && atomic_fetch_add(&tracing.focus_on, 1) == 0)
		set_tracing(1);
	f->start_mono_ns = clock_mono_ns();
}

static void range_end(const struct nvtx_frame *f, int64_t end);

void nvtx_push(const char *name)
{
	if (nvtx_stack.depth >= NVTX_DEPTH) {
		nvtx_stack.depth++; /* keep pops balanced; the range is not timed */
		atomic_fetch_add(&act.nvtx_dropped, 1);
		return;
	}
	range_begin(&nvtx_stack.frames[nvtx_stack.depth++], name);
}

void nvtx_pop(void)
{
	int64_t end = clock_mono_ns();
	if (nvtx_stack.depth == 0)
		return; /* a pop without a push seen (the range began before us) */
	if (nvtx_stack.depth > NVTX_DEPTH) {
		nvtx_stack.depth--;
		return;
	}
	range_end(&nvtx_stack.frames[--nvtx_stack.depth], end);
}

/* nvtxRangeStart*: CUPTI passes the new range's id as the call's return
 * value. A range whose id is not given cannot be matched to its end, so
 * it is not timed and never turns tracing on (counted). */
void nvtx_start(const char *name, const void *ret)
{
	uint64_t id = ret ? *(const nvtxRangeId_t *)ret : 0;
	if (id == 0) {
		atomic_fetch_add(&act.nvtx_dropped, 1);
		return;
	}
	struct nvtx_frame f;
	range_begin(&f, name);
	pthread_mutex_lock(&nvtx_ranges.mu);
	struct nvtx_open *slot = NULL;
	for (int i = 0; i < NVTX_OPEN_MAX && !slot; i++)
		if (nvtx_ranges.open[i].id == 0)
			slot = &nvtx_ranges.open[i];
	if (slot) {
		slot->id = id;
		slot->f = f;
	}
	pthread_mutex_unlock(&nvtx_ranges.mu);
	if (!slot) {
		/* Too many open: untimed, and its focus is given back now. */
		atomic_fetch_add(&act.nvtx_dropped, 1);
		if (f.focus && atomic_fetch_sub(&tracing.focus_on, 1) == 1)
			set_tracing(0);
	}
}

void nvtx_end(uint64_t id)
{
	int64_t end = clock_mono_ns();
	struct nvtx_frame f;
	int found = 0;
	pthread_mutex_lock(&nvtx_ranges.mu);
	for (int i = 0; i < NVTX_OPEN_MAX && !found; i++)
		if (id && nvtx_ranges.open[i].id == id) {
			f = nvtx_ranges.open[i].f;
			nvtx_ranges.open[i].id = 0;
			found = 1;
		}
	pthread_mutex_unlock(&nvtx_ranges.mu);
	if (found)
		range_end(&f, end); /* else it began before us, or was dropped */
}

static void range_end(const struct nvtx_frame *f, int64_t end)
{
	uint64_t dur = end > f->start_mono_ns ? (uint64_t)(end - f->start_mono_ns) : 0;
	if (f->focus && atomic_fetch_sub(&tracing.focus_on, 1) == 1)
		set_tracing(0);
	/* Never wait on an application thread: if the lock is busy (a
	 * flush is copying the tables), the range is counted as dropped. */
	if (pthread_mutex_trylock(&lib.mu) != 0) {
		atomic_fetch_add(&act.nvtx_dropped, 1);
		return;
	}
	if (lib.cur)
		agg_add_range(lib.cur, f->name, dur);
	if (capturing())
		capture_add(lib.cap, WIRE_EV_RANGE, 0, 0, 0,
			    (uint64_t)(f->start_mono_ns + lib.mono_to_wall_ns),
			    (uint64_t)(end + lib.mono_to_wall_ns), 0, f->name);
	pthread_mutex_unlock(&lib.mu);
}

/* Route CUPTI's activity buffers to this library. */
int register_buffers(char *err, size_t errlen)
{
	if ((lib.cfg.skip & INJECT_SKIP_PERTHREAD) && lib.cupti.activity_set_attribute) {
		/* Must come before the callbacks and any kind (cupti_activity.h). */
		uint8_t no = 0;
		size_t sz = sizeof no;
		CUptiResult a = lib.cupti.activity_set_attribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
							       &sz, &no);
		if (a != CUPTI_SUCCESS)
			say("cannot turn per-thread activity buffers off: %s; going on",
			    cupti_lib_strerror(&lib.cupti, a));
	}
	CUptiResult r = lib.cupti.activity_register_callbacks(buffer_requested, buffer_completed);
	if (r == CUPTI_SUCCESS)
		return GPULSE_OK;
	snprintf(err, errlen, "cuptiActivityRegisterCallbacks failed: %s", cupti_lib_strerror(&lib.cupti, r));
	return GPULSE_EVENDOR;
}

/* register_buffers once per attachment: the first context's callback
 * (continuous mode) and the first tick may both come to it. */
int register_buffers_once(char *err, size_t errlen)
{
	int rc = GPULSE_OK;
	pthread_mutex_lock(&act.buffers_mu);
	if (!atomic_load(&act.buffers_on)) {
		rc = register_buffers(err, errlen);
		if (rc == GPULSE_OK)
			atomic_store(&act.buffers_on, 1);
	}
	pthread_mutex_unlock(&act.buffers_mu);
	return rc;
}

