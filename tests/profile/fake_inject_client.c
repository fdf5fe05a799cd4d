/* A stand-in for libgpulse-inject.so that speaks the wire protocol
 * (src/wire/wire.h) to gpulsed, for tests/integration/test_profiling.sh.
 * It sends frames with known values (listed in the script), answers
 * CAPTURE with known trace events, and can misbehave on purpose.
 *
 *   fake_inject_client SOCKET MODE [N]
 *
 * MODE:
 *   basic     HELLO, then one interval of every statistic twice, STATUS;
 *             answers CAPTURE; stays until EOF or SIGTERM
 *   kernels   HELLO, one KERNELS frame with N distinct kernel names
 *             ("k_0" ... with launches i+1 and (i+1) us), then stays
 *   hold      HELLO, then stays
 *   mute      HELLO, then stays, and never answers a CAPTURE (a capture
 *             that waits its whole length and grace: test_trace_captures)
 *   launchy   HELLO, then every 250 ms a KERNELS frame for the 250 ms
 *             just past (wall clock, all of it traced): 10 000 launches
 *             of a 8 us kernel (40 000/s, GPU busy 32%), like an eager
 *             loop of tiny kernels; runs until SIGTERM
 *   tenant K P  HELLO, then every 250 ms a KERNELS frame for the 250 ms
 *             just past, traced whole: kernels of kind K ("tensor": a
 *             cuBLAS bf16 GEMM's name, "memory": PyTorch's elementwise
 *             kernel, "other") busy for P percent of it; until SIGTERM
 *             (a tenant of a shared GPU: tests/integration/test_tenants.sh)
 *   silent    connect, say nothing, wait for EOF
 *   lie       HELLO with another pid: gpulsed must close the connection
 *   bad       HELLO, then an invalid payload, an unknown type, a
 *             daemon-only type and a frame before... (see below), then a
 *             bad magic: gpulsed must close the connection
 *
 * Prints "config mode=M budget_ppm=B" when the daemon's CONFIG arrives,
 * "ready" once its frames are sent, "capture ID SECONDS" per capture,
 * "eof" when the daemon closes. Exit status 0, or 1 on an unexpected
 * event (3 when a refusal did not come within 5 s). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wire/wire.h"

static uint8_t frame[WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD];
static int fd = -1;

static void die(const char *what)
{
	fprintf(stderr, "fake_inject_client: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void send_all(const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			die("send");
		}
		p += w;
		n -= (size_t)w;
	}
}

static void send_msg(const struct wire_msg *m)
{
	size_t n = wire_encode(m, frame, sizeof frame);
	if (!n) {
		fprintf(stderr, "fake_inject_client: cannot encode %s\n", wire_type_name(m->type));
		exit(1);
	}
	send_all(frame, n);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void hello(uint32_t pid)
{
	struct wire_msg m = {.type = WIRE_HELLO};
	m.u.hello.pid = pid;
	m.u.hello.ppid = (uint32_t)getppid();
	m.u.hello.uid = (uint32_t)getuid();
	m.u.hello.cupti_version = 24;
	m.u.hello.cuda_driver_version = 12080;
	m.u.hello.mode = WIRE_MODE_CONTINUOUS;
	m.u.hello.budget_ppm = 5000;
	m.u.hello.start_wall_ns = 1764400000000000000ull;
	snprintf(m.u.hello.cmdline, sizeof m.u.hello.cmdline, "fake_inject_client --test");
	snprintf(m.u.hello.lib_version, sizeof m.u.hello.lib_version, "test-1");
	send_msg(&m);
}

static const struct wire_scope scope0 = {
	.device = 0, .context = 1, .interval_start_ns = 1764400001000000000ull,
	.interval_end_ns = 1764400002000000000ull, .traced_ns = 1000000000ull,
};

static void send_statistics(void)
{
	static struct wire_kernel k[2];
	memset(k, 0, sizeof k);
	snprintf(k[0].name, sizeof k[0].name, "gemm_kernel");
	k[0].launches = 100;
	k[0].total_ns = 2000000;
	k[0].min_ns = 10000;
	k[0].max_ns = 50000;
	k[0].hist[13] = 40;
	k[0].hist[14] = 50;
	k[0].hist[15] = 10;
	k[0].grid[0] = 128; k[0].grid[1] = 1; k[0].grid[2] = 1;
	k[0].block[0] = 256; k[0].block[1] = 1; k[0].block[2] = 1;
	k[0].registers = 32;
	k[0].shared_bytes = 4096;
	snprintf(k[1].name, sizeof k[1].name, "softmax<float, \"fast\">");
	k[1].launches = 300;
	k[1].total_ns = 600000;
	k[1].min_ns = 1500;
	k[1].max_ns = 3000;
	k[1].hist[10] = 300;
	struct wire_msg m = {.type = WIRE_KERNELS};
	m.u.kernels.scope = scope0;
	m.u.kernels.count = 2;
	m.u.kernels.kernels = k;
	send_msg(&m);

	static struct wire_copy c[3] = {
		{.kind = WIRE_COPY_H2D, .pinned = 1, .count = 10, .bytes = 10485760, .total_ns = 1000000},
		{.kind = WIRE_COPY_D2H, .pinned = 0, .count = 4, .bytes = 4096, .total_ns = 20000},
		{.kind = WIRE_COPY_MEMSET, .pinned = 0, .count = 2, .bytes = 1024, .total_ns = 3000},
	};
	m = (struct wire_msg){.type = WIRE_COPIES};
	m.u.copies.scope = scope0;
	m.u.copies.count = 3;
	m.u.copies.copies = c;
	send_msg(&m);

	m = (struct wire_msg){.type = WIRE_UVM};
	m.u.uvm = (struct wire_uvm){.scope = scope0, .cpu_page_faults = 7, .gpu_page_faults = 3,
				    .bytes_h2d = 65536, .bytes_d2h = 4096, .thrashing = 1};
	send_msg(&m);

	static struct wire_stream st[2] = {
		{.stream = 7, .busy_ns = 500000000, .gap_ns = 20000000, .sync_wait_ns = 1000000, .syncs = 5},
		{.stream = 8, .busy_ns = 100000000, .gap_ns = 30000000, .sync_wait_ns = 2000000, .syncs = 6},
	};
	m = (struct wire_msg){.type = WIRE_STREAMS};
	m.u.streams.scope = scope0;
	m.u.streams.count = 2;
	m.u.streams.streams = st;
	send_msg(&m);

	static struct wire_range r[1];
	memset(r, 0, sizeof r);
	snprintf(r[0].name, sizeof r[0].name, "train_step");
	r[0].count = 3;
	r[0].total_ns = 300000000;
	r[0].max_ns = 120000000;
	m = (struct wire_msg){.type = WIRE_RANGES};
	m.u.ranges.scope = scope0;
	m.u.ranges.count = 1;
	m.u.ranges.ranges = r;
	send_msg(&m);
}

static void send_status(void)
{
	struct wire_msg m = {.type = WIRE_STATUS};
	m.u.status = (struct wire_status){
		.t_wall_ns = now_ns(), .mode = WIRE_MODE_CONTINUOUS, .active = 1,
		.budget_ppm = 5000, .overhead_est_ppm = 1234, .duty_ppm = 250000,
		.window_ns = 50000000, .launch_rate_hz = 1000.5, .records_total = 12345,
		.records_dropped_total = 6, .frames_dropped_total = 2, .kernels_other_total = 0,
		.source = WIRE_SOURCE_CENSUS, .lasting_cost_ppm = 0,
	};
	send_msg(&m);
}

static void send_many_kernels(unsigned n)
{
	struct wire_kernel *k = calloc(n ? n : 1, sizeof *k);
	if (!k)
		die("calloc");
	for (unsigned i = 0; i < n; i++) {
		snprintf(k[i].name, sizeof k[i].name, "k_%u", i);
		k[i].launches = i + 1;
		k[i].total_ns = (i + 1) * 1000ull;
		k[i].min_ns = k[i].max_ns = 1000;
		k[i].hist[9] = (uint32_t)(i + 1);
	}
	struct wire_msg m = {.type = WIRE_KERNELS};
	m.u.kernels.scope = scope0;
	m.u.kernels.count = n;
	m.u.kernels.kernels = k;
	send_msg(&m);
	free(k);
}

/* Tiny kernels at a high rate, interval after interval, until killed. */
static void send_launchy(void)
{
	struct wire_kernel k = {.launches = 10000, .total_ns = 80000000ull, .min_ns = 8000,
				.max_ns = 8000, .grid = {1, 1, 1}, .block = {32, 1, 1}};
	snprintf(k.name, sizeof k.name, "tiny_elementwise_kernel");
	k.hist[12] = 10000;  /* [4096, 8192) ns */
	uint64_t prev = now_ns();
	for (;;) {
		struct timespec ts = {0, 250000000L};
		nanosleep(&ts, NULL);
		uint64_t t = now_ns();
		struct wire_msg m = {.type = WIRE_KERNELS};
		m.u.kernels.scope = (struct wire_scope){.device = 0, .context = 1,
							.interval_start_ns = prev,
							.interval_end_ns = t, .traced_ns = t - prev};
		m.u.kernels.count = 1;
		m.u.kernels.kernels = &k;
		send_msg(&m);
		prev = t;
	}
}

/* One tenant's kernels of one kind, busy `pct` percent of each interval. */
static void send_tenant(const char *kind, double pct)
{
	struct wire_kernel k = {.launches = 100, .grid = {132, 1, 1}, .block = {256, 1, 1}};
	const char *name = strcmp(kind, "tensor") == 0
		? "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cublas"
		: strcmp(kind, "memory") == 0
		? "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >"
		: "my_custom_kernel";
	snprintf(k.name, sizeof k.name, "%s", name);
	uint64_t prev = now_ns();
	for (;;) {
		struct timespec ts = {0, 250000000L};
		nanosleep(&ts, NULL);
		uint64_t t = now_ns();
		k.total_ns = (uint64_t)((double)(t - prev) * pct / 100.0);
		k.min_ns = k.max_ns = k.total_ns / k.launches;
		struct wire_msg m = {.type = WIRE_KERNELS};
		m.u.kernels.scope = (struct wire_scope){.device = 0, .context = 1,
							.interval_start_ns = prev,
							.interval_end_ns = t, .traced_ns = t - prev};
		m.u.kernels.count = 1;
		m.u.kernels.kernels = &k;
		send_msg(&m);
		prev = t;
	}
}

/* The trace events of every capture: two kernels on stream 7, a copy on
 * stream 8, a memset, an NVTX range around them. */
static void answer_capture(uint64_t id)
{
	static struct wire_event ev[5];
	memset(ev, 0, sizeof ev);
	uint64_t t = 1764400010000000000ull;
	ev[0] = (struct wire_event){.kind = WIRE_EV_RANGE, .stream = 1, .start_ns = t, .end_ns = t + 1000000};
	ev[0].name = "train_step";
	ev[1] = (struct wire_event){.kind = WIRE_EV_KERNEL, .stream = 7, .start_ns = t + 1000, .end_ns = t + 21000};
	ev[1].name = "gemm_kernel";
	ev[2] = (struct wire_event){.kind = WIRE_EV_KERNEL, .stream = 7, .start_ns = t + 30000, .end_ns = t + 32500};
	ev[2].name = "softmax<float, \"fast\"> \\ tab\t";
	ev[3] = (struct wire_event){.kind = WIRE_EV_COPY, .copy_kind = WIRE_COPY_H2D, .stream = 8,
				    .start_ns = t + 40000, .end_ns = t + 140000, .bytes = 1048576};
	ev[4] = (struct wire_event){.kind = WIRE_EV_MEMSET, .stream = 8, .start_ns = t + 150000,
				    .end_ns = t + 151000, .bytes = 4096};
	struct wire_msg m = {.type = WIRE_TRACE_EVENTS};
	m.u.trace_events.capture_id = id;
	m.u.trace_events.count = 5;
	m.u.trace_events.events = ev;
	send_msg(&m);
	m = (struct wire_msg){.type = WIRE_TRACE_END};
	m.u.trace_end = (struct wire_trace_end){.capture_id = id, .events_total = 5, .events_dropped = 0};
	send_msg(&m);
}

/* Read frames from the daemon until EOF (returns 0) or, with a timeout,
 * until it passes (returns 3). */
static int serve(int timeout_ms, int answer)
{
	static uint8_t buf[WIRE_HEADER_BYTES + 65536];
	size_t have = 0;
	struct wire_msg m = {0};
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, timeout_ms);
		if (r == 0)
			return 3;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			printf("eof\n");
			fflush(stdout);
			wire_msg_free(&m);
			return 0;
		}
		if (n < 0)
			die("recv");
		have += (size_t)n;
		while (have >= WIRE_HEADER_BYTES) {
			unsigned type;
			uint32_t len;
			if (wire_header_parse(buf, &type, &len) != 0) {
				fprintf(stderr, "fake_inject_client: bad header from gpulsed\n");
				exit(1);
			}
			if (have < WIRE_HEADER_BYTES + len)
				break;
			char err[256];
			if (wire_decode(&m, type, buf + WIRE_HEADER_BYTES, len, err, sizeof err) != 0) {
				fprintf(stderr, "fake_inject_client: bad frame from gpulsed: %s\n", err);
				exit(1);
			}
			if (type == WIRE_CONFIG)
				printf("config mode=%u budget_ppm=%u\n", m.u.config.mode,
				       (unsigned)m.u.config.budget_ppm);
			if (type == WIRE_CAPTURE) {
				printf("capture %llu %u\n", (unsigned long long)m.u.capture.capture_id,
				       (unsigned)m.u.capture.seconds);
				if (answer)
					answer_capture(m.u.capture.capture_id);
			}
			fflush(stdout);
			memmove(buf, buf + WIRE_HEADER_BYTES + len, have - WIRE_HEADER_BYTES - len);
			have -= WIRE_HEADER_BYTES + len;
		}
	}
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A frame with any header and payload, bypassing the encoder. */
static void send_raw(uint32_t magic, unsigned type, const uint8_t *payload, uint32_t len)
{
	/* One send: gpulsed may close the connection as soon as it has read
	 * a bad header. */
	static uint8_t f[WIRE_HEADER_BYTES + 256];
	if (len > sizeof f - WIRE_HEADER_BYTES)
		len = sizeof f - WIRE_HEADER_BYTES;
	put_le(f, magic, 4);
	put_le(f + 4, WIRE_VERSION, 2);
	put_le(f + 6, type, 2);
	put_le(f + 8, len, 4);
	memcpy(f + WIRE_HEADER_BYTES, payload, len);
	send_all(f, WIRE_HEADER_BYTES + len);
}

static void send_bad_frames(void)
{
	uint8_t p[64] = {0};
	/* KERNELS with a count over its bound: invalid_payload. */
	put_le(p + 32, WIRE_MAX_KERNELS + 1, 4);
	send_raw(WIRE_MAGIC, WIRE_KERNELS, p, 36);
	/* A type nobody knows: unknown_type. */
	send_raw(WIRE_MAGIC, 42, p, 8);
	/* A daemon-only type: wrong_direction. */
	struct wire_msg m = {.type = WIRE_CAPTURE};
	m.u.capture.capture_id = 1;
	send_msg(&m);
	/* A second HELLO: duplicate_hello. */
	hello((uint32_t)getpid());
	/* Trace events for a capture nobody started: unknown_capture. */
	m = (struct wire_msg){.type = WIRE_TRACE_END};
	m.u.trace_end.capture_id = 99;
	send_msg(&m);
	/* A bad magic: the connection ends. */
	send_raw(0x12345678u, WIRE_STATUS, p, 4);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fake_inject_client SOCKET basic|kernels N|hold|mute|silent|lie|bad\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", argv[1]);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
		die("connect");
	const char *mode = argv[2];
	if (strcmp(mode, "silent") == 0)
		return serve(-1, 0);
	if (strcmp(mode, "lie") == 0) {
		hello((uint32_t)getpid() + 100000);
		int rc = serve(5000, 0);
		if (rc == 0)
			printf("refused\n");
		return rc;
	}
	hello((uint32_t)getpid());
	if (strcmp(mode, "basic") == 0) {
		send_statistics();
		send_statistics();
		send_status();
	} else if (strcmp(mode, "kernels") == 0) {
		send_many_kernels(argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 10);
	} else if (strcmp(mode, "launchy") == 0) {
		printf("ready\n");
		send_launchy();
	} else if (strcmp(mode, "tenant") == 0 && argc > 4) {
		printf("ready\n");
		fflush(stdout);
		send_tenant(argv[3], strtod(argv[4], NULL));
	} else if (strcmp(mode, "bad") == 0) {
		send_bad_frames();
		int rc = serve(5000, 0);
		if (rc == 0)
			printf("refused\n");
		return rc;
	} else if (strcmp(mode, "hold") != 0 && strcmp(mode, "mute") != 0) {
		fprintf(stderr, "fake_inject_client: unknown mode %s\n", mode);
		return 2;
	}
	printf("ready\n");
	return serve(-1, strcmp(mode, "mute") != 0);
}
