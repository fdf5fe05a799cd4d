/* The wire format between libgpulse-inject.so (inside CUDA applications)
 * and gpulsed: versioned, length-prefixed frames on a Unix stream socket.
 * This header is the only thing the injection library and the daemon
 * share (DESIGN.md, "Layering"). Both ends are built from the same tree,
 * but a frame is still treated as hostile input by the daemon: every
 * length, count and string is checked by wire_decode (fuzz/fuzz_wire.c).
 *
 * Encoding: little-endian, fixed-width integers, no padding on the wire
 * (the encoder writes field by field, so struct layout never leaks).
 * Strings are a u16 length followed by that many bytes (no NUL), capped
 * per field below. A frame is
 *
 *     u32 magic "GPLW" | u16 version | u16 type | u32 payload_len | payload
 *
 * with payload_len <= WIRE_MAX_PAYLOAD. A receiver that sees a bad magic,
 * an unknown version or an oversized length drops the connection (it can
 * no longer find frame boundaries); an unknown type or a payload that
 * fails validation is skipped and counted, and the connection stays.
 *
 * WIRE_VERSION changes with any payload's layout (a field added, removed
 * or resized): the decoder is strict (no bytes left over, none missing),
 * so a library and a daemon of two layouts would otherwise skip each
 * other's frames one by one; with the version they refuse the connection
 * at its first header, counted as a bad header. New frame types need no
 * new version (an unknown type is skipped). Version 2: STATUS gained
 * source and lasting_cost_ppm. Version 3: kernel names (KERNELS and
 * TRACE_EVENTS) up to WIRE_KERNEL_NAME_MAX bytes, payloads up to 1 MiB. */
#ifndef GPULSE_WIRE_H
#define GPULSE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC        0x574c5047u /* "GPLW" little-endian */
#define WIRE_VERSION      3
#define WIRE_HEADER_BYTES 12
/* A KERNELS frame holds a scope's top K (GPULSE_TOPK, 64 by default) and
 * its "other" whole: 64 names at WIRE_KERNEL_NAME_MAX take 275 KiB. */
#define WIRE_MAX_PAYLOAD  (1024 * 1024)

/* Where gpulsed listens and the injection library connects unless
 * GPULSE_SOCKET says otherwise. Without access to /run/gpulse the
 * library falls back to $XDG_RUNTIME_DIR/gpulse/inject.sock, then
 * /tmp/gpulse-<uid>/inject.sock. */
#define WIRE_DEFAULT_SOCKET "/run/gpulse/inject.sock"

/* Bounds (DESIGN.md decision 8). */
#define WIRE_NAME_MAX       256   /* NVTX range name bytes */
/* Kernel name bytes (demangled, as torch.profiler and Nsight Systems show
 * them). Of the kernels in CUDA 13.0's cuBLAS and cuBLASLt (12103) and
 * cuDNN's precompiled engines (6437), 31% and 55% have names over 256
 * bytes, 57 and 110 over 1 KiB, 45 and 92 over 4 KiB (xmma kernels, up to
 * 9225 bytes); so 4096 keeps 99.3% whole. A longer name is cut and ends
 * in WIRE_KERNEL_HASH_SUFFIX and 16 hex digits of the whole name's hash
 * (wire_kernel_name_fit), so a cut never merges two kernels. */
#define WIRE_KERNEL_NAME_MAX 4096
#define WIRE_KERNEL_HASH_SUFFIX "...#"
#define WIRE_CMD_MAX        512   /* process command line bytes */
#define WIRE_REASON_MAX     200   /* step-aside / error text bytes */
#define WIRE_MAX_KERNELS    512   /* kernel entries in one KERNELS frame */
#define WIRE_MAX_COPIES     64    /* copy entries in one COPIES frame */
#define WIRE_MAX_STREAMS    256   /* stream entries in one STREAMS frame */
#define WIRE_MAX_RANGES     256   /* NVTX range entries in one RANGES frame */
#define WIRE_MAX_EVENTS     1024  /* trace events in one TRACE_EVENTS frame */
#define WIRE_HIST_BUCKETS   32    /* duration histogram: bucket i counts
				     durations in [2^i, 2^(i+1)) ns; bucket 0
				     also holds 0 ns, the last holds the rest */

/* Frame types. Library → daemon unless marked. */
#define WIRE_TYPE_TABLE(X)                                                     \
	X(HELLO, 1)         /* first frame: who the process is */                \
	X(STATUS, 2)        /* state of the library: mode, governor, drops */    \
	X(KERNELS, 3)       /* per-kernel statistics of one interval */          \
	X(COPIES, 4)        /* memcpy/memset statistics of one interval */       \
	X(UVM, 5)           /* unified-memory counters of one interval */        \
	X(STREAMS, 6)       /* per-stream busy/gap/sync time of one interval */  \
	X(RANGES, 7)        /* NVTX range statistics of one interval */          \
	X(TRACE_EVENTS, 8)  /* capture mode: timeline events */                  \
	X(TRACE_END, 9)     /* capture mode: the capture is complete */          \
	X(CAPTURE, 64)      /* daemon → library: start a capture */              \
	X(CONFIG, 65)       /* daemon → library: mode and budget */

enum wire_type {
#define WIRE_TYPE_ENUM(name, val) WIRE_##name = val,
	WIRE_TYPE_TABLE(WIRE_TYPE_ENUM)
#undef WIRE_TYPE_ENUM
};

/* The short name of a frame type ("KERNELS"), or "unknown". */
const char *wire_type_name(unsigned type);

enum wire_mode {
	WIRE_MODE_CONTINUOUS = 0, /* duty-cycled windows under the budget */
	WIRE_MODE_FOCUSED_PROFILER = 1, /* only inside cudaProfilerStart/Stop */
	WIRE_MODE_FOCUSED_NVTX = 2, /* only inside the named NVTX ranges */
	WIRE_MODE_FULL = 3,       /* always on (for overhead comparisons) */
	WIRE_MODE_OFF = 4,        /* stepped aside: no tracing at all */
};

/* What a process's statistics are built from (STATUS's source). */
enum wire_source {
	WIRE_SOURCE_TRACE = 0,    /* exact: kernel activity records */
	WIRE_SOURCE_CENSUS = 1,   /* estimates: launch callbacks in census windows,
				     scaled to the interval, GPU time from
				     event-timed samples (continuous mode) */
};

enum wire_copy_kind {
	WIRE_COPY_H2D = 0,
	WIRE_COPY_D2H = 1,
	WIRE_COPY_D2D = 2,
	WIRE_COPY_PEER = 3,
	WIRE_COPY_OTHER = 4,      /* H2H, arrays, unknown */
	WIRE_COPY_MEMSET = 5,     /* memsets, counted like copies */
	WIRE_COPY_KIND_COUNT
};

struct wire_hello {
	uint32_t pid, ppid, uid;
	uint32_t cupti_version;   /* 0: CUPTI not loaded */
	uint32_t cuda_driver_version;
	uint8_t mode;             /* enum wire_mode */
	uint32_t budget_ppm;      /* overhead budget in parts per million (5000 = 0.5%) */
	uint64_t start_wall_ns;   /* process start as the library saw it */
	char cmdline[WIRE_CMD_MAX + 1]; /* decoded strings are NUL-terminated */
	char lib_version[32 + 1];
};

struct wire_status {
	uint64_t t_wall_ns;
	uint8_t mode;             /* enum wire_mode actually in force */
	uint8_t active;           /* tracing right now */
	uint8_t stepped_aside;    /* 1: CUPTI missing/incompatible/taken */
	char reason[WIRE_REASON_MAX + 1]; /* why it stepped aside, or "" */
	uint32_t budget_ppm;
	uint32_t overhead_est_ppm; /* the governor's estimate of added time */
	uint32_t duty_ppm;        /* share of time tracing is on */
	uint64_t window_ns;       /* current tracing window length */
	double launch_rate_hz;    /* measured kernel launches per second */
	uint64_t records_total;   /* activity records processed */
	uint64_t records_dropped_total; /* CUPTI said dropped, or our buffers were full */
	uint64_t frames_dropped_total;  /* frames the library could not send */
	uint64_t kernels_other_total;   /* launches folded into "other" (top-K cap) */
	uint8_t source;           /* enum wire_source of this interval's statistics */
	uint32_t lasting_cost_ppm; /* 0 until exact kernel tracing ran in the process;
				      then what it leaves every later launch
				      costing more, as measured on this stack */
};

/* Ids a statistic is keyed by (all intervals carry them). */
struct wire_scope {
	uint32_t device;          /* CUDA device ordinal */
	uint32_t context;         /* CUPTI context id */
	uint64_t interval_start_ns; /* wall clock, ns since the epoch */
	uint64_t interval_end_ns;
	uint64_t traced_ns;       /* time within the interval that tracing was on */
};

struct wire_kernel {
	char name[WIRE_KERNEL_NAME_MAX + 1]; /* "other" for the folded remainder */
	uint64_t launches;
	uint64_t total_ns;
	uint64_t min_ns, max_ns;
	uint32_t hist[WIRE_HIST_BUCKETS]; /* for p50/p99, mergeable */
	uint32_t grid[3], block[3];       /* of the last launch */
	uint32_t registers;               /* per thread */
	uint32_t shared_bytes;            /* static + dynamic */
};

struct wire_kernels {
	struct wire_scope scope;
	uint32_t count;
	struct wire_kernel *kernels; /* decoded: points into the decoder's storage */
};

struct wire_copy {
	uint8_t kind;             /* enum wire_copy_kind */
	uint8_t pinned;           /* 1: pinned/device host memory, 0: pageable */
	uint64_t count;
	uint64_t bytes;
	uint64_t total_ns;
};

struct wire_copies {
	struct wire_scope scope;
	uint32_t count;
	struct wire_copy *copies;
};

struct wire_uvm {
	struct wire_scope scope;
	uint64_t cpu_page_faults;
	uint64_t gpu_page_faults;
	uint64_t bytes_h2d;
	uint64_t bytes_d2h;
	uint64_t thrashing;
	uint64_t throttling;
};

struct wire_stream {
	uint32_t stream;          /* CUPTI stream id */
	uint64_t busy_ns;         /* union of kernel/copy time on the stream */
	uint64_t gap_ns;          /* idle time between its operations */
	uint64_t sync_wait_ns;    /* host time in synchronize calls on it */
	uint64_t syncs;
};

struct wire_streams {
	struct wire_scope scope;
	uint32_t count;
	struct wire_stream *streams;
};

struct wire_range {
	char name[WIRE_NAME_MAX + 1];
	uint64_t count;
	uint64_t total_ns;
	uint64_t max_ns;
};

struct wire_ranges {
	struct wire_scope scope;
	uint32_t count;
	struct wire_range *ranges;
};

enum wire_event_kind {
	WIRE_EV_KERNEL = 0, WIRE_EV_COPY = 1, WIRE_EV_MEMSET = 2, WIRE_EV_RANGE = 3,
	WIRE_EV_KIND_COUNT
};

struct wire_event {
	uint8_t kind;             /* enum wire_event_kind */
	uint8_t copy_kind;        /* for copies */
	uint32_t device, stream;
	uint64_t start_ns, end_ns; /* wall clock ns since the epoch */
	uint64_t bytes;           /* copies and memsets */
	/* A kernel's name (up to WIRE_KERNEL_NAME_MAX bytes) or an NVTX
	 * range's (WIRE_NAME_MAX), NUL-terminated; NULL is sent as "". A
	 * pointer, not an array: a capture holds tens of thousands of
	 * events and few distinct names. Decoded: into the decoder's
	 * storage. */
	const char *name;
};

struct wire_trace_events {
	uint64_t capture_id;
	uint32_t count;
	struct wire_event *events;
};

struct wire_trace_end {
	uint64_t capture_id;
	uint64_t events_total;
	uint64_t events_dropped;  /* over the capture's cap, or lost buffers */
};

struct wire_capture {          /* daemon → library */
	uint64_t capture_id;
	uint32_t seconds;
	uint32_t max_events;
};

struct wire_config {           /* daemon → library */
	uint8_t mode;
	uint32_t budget_ppm;
	char nvtx_range[WIRE_NAME_MAX + 1]; /* for WIRE_MODE_FOCUSED_NVTX */
};

/* A decoded frame. Pointers inside refer to the decoder's storage and
 * stay valid until the next wire_decode on the same struct wire_msg or
 * wire_msg_free. */
struct wire_msg {
	unsigned type;
	union {
		struct wire_hello hello;
		struct wire_status status;
		struct wire_kernels kernels;
		struct wire_copies copies;
		struct wire_uvm uvm;
		struct wire_streams streams;
		struct wire_ranges ranges;
		struct wire_trace_events trace_events;
		struct wire_trace_end trace_end;
		struct wire_capture capture;
		struct wire_config config;
	} u;
	void *storage;            /* owned: entries of the last decode */
	size_t storage_bytes;
};

/* Parse a frame header from hdr[WIRE_HEADER_BYTES]. 0 with *type and
 * *payload_len, or GPULSE_EPARSE (bad magic or version: the stream is
 * unusable) / GPULSE_ELIMIT (payload_len over WIRE_MAX_PAYLOAD). */
int wire_header_parse(const uint8_t *hdr, unsigned *type, uint32_t *payload_len);

/* Decode and validate one payload of `type`. 0, GPULSE_ENOTSUP (unknown
 * type: skip it), GPULSE_EPARSE (short, trailing bytes, a string or count
 * over its bound, a bad enum), GPULSE_ENOMEM. On error `err` (if not
 * NULL) gets a sentence naming the field and byte offset. */
int wire_decode(struct wire_msg *m, unsigned type, const uint8_t *payload, size_t len,
		char *err, size_t errlen);

/* Free a message's storage. Accepts NULL; the struct may be reused. */
void wire_msg_free(struct wire_msg *m);

/* Encode a whole frame (header + payload) of m->type into out[cap].
 * Returns the frame's length, or 0 when it does not fit in cap or would
 * exceed WIRE_MAX_PAYLOAD (the caller splits entry arrays). Strings
 * longer than their bound are truncated at a UTF-8 boundary. Never
 * allocates: the injection library calls it from its own threads. */
size_t wire_encode(const struct wire_msg *m, uint8_t *out, size_t cap);

/* The encoded size of one entry, so senders can split arrays into frames
 * that fit: e.g. wire_entry_bytes(WIRE_KERNELS) is an upper bound per kernel. */
size_t wire_entry_bytes(unsigned type);
/* The encoded size of this kernel entry (its name as it is). */
size_t wire_kernel_bytes(const struct wire_kernel *k);
/* The encoded size of this trace event (its name as it is). */
size_t wire_event_bytes(const struct wire_event *e);

/* 64-bit FNV-1a of s: the stable id of a kernel's name (the same in every
 * process and build; /metrics' kernel_id is its 16 hex digits). */
uint64_t wire_name_hash(const char *s);

/* A kernel's name as it travels: `full` itself when it has at most
 * WIRE_KERNEL_NAME_MAX bytes, else its first bytes (cut on a UTF-8
 * boundary) + WIRE_KERNEL_HASH_SUFFIX + 16 hex digits of
 * wire_name_hash(full), WIRE_KERNEL_NAME_MAX bytes in all. out has
 * room for WIRE_KERNEL_NAME_MAX + 1. */
void wire_kernel_name_fit(char *out, const char *full);
/* The same for any bound of at least 21 bytes (out has room for bound + 1):
 * gpulsed fits kernel labels to its store's label bound with it. */
void wire_name_fit(char *out, size_t bound, const char *full);

#endif
