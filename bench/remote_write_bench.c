/* Remote write throughput (issue 18, item 6: at least 100k samples/s per
 * core to a loopback receiver): samples appended into a store with a
 * remote_write entry attached go through the whole path (the ring, the
 * batcher's relabelling and protobuf-c + snappy encoding, the queue on
 * disk with its fdatasync per request, the sender's HTTP POST over
 * loopback) to a sink in this process that reads and answers 204. The
 * figure is samples acknowledged per CPU-second of the process (every
 * thread, the sink's too), anchored against the store's own append rate
 * measured in the same run on the same samples without remote write.
 *
 *   build/bench/bench_remote_write [SAMPLES] [SERIES]
 *
 * The sink is hand-written (a socket and a loop): a benchmark needs a
 * receiver that costs next to nothing, not a server library. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "remote/remote_write.h"
#include "common/status.h"
#include "store/tsdb.h"

static atomic_uint_fast64_t sink_bytes, sink_requests;
static int listen_fd;

/* One connection: requests with Content-Length bodies, answered 204. */
static void *sink_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	static __thread char buf[1 << 16];
	size_t have = 0;
	for (;;) {
		char *end = memmem(buf, have, "\r\n\r\n", 4);
		if (!end) {
			if (have == sizeof buf)
				break;
			ssize_t n = read(fd, buf + have, sizeof buf - have);
			if (n <= 0)
				break;
			have += (size_t)n;
			continue;
		}
		size_t hlen = (size_t)(end - buf) + 4, clen = 0;
		for (char *p = buf; p < end; p++)
			if (strncasecmp(p, "\ncontent-length:", 16) == 0)
				clen = strtoul(p + 16, NULL, 10);
		size_t body_have = have - hlen < clen ? have - hlen : clen;
		size_t left = clen - body_have;
		while (left) {
			char tmp[1 << 16];
			ssize_t n = read(fd, tmp, left < sizeof tmp ? left : sizeof tmp);
			if (n <= 0)
				goto out;
			left -= (size_t)n;
		}
		size_t used = hlen + body_have;
		memmove(buf, buf + used, have - used);
		have -= used;
		atomic_fetch_add(&sink_bytes, clen);
		atomic_fetch_add(&sink_requests, 1);
		static const char resp[] = "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
		if (write(fd, resp, sizeof resp - 1) < 0)
			break;
	}
out:
	close(fd);
	return NULL;
}

static void *sink_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(listen_fd, NULL, NULL);
		if (fd < 0)
			return NULL;
		pthread_t t;
		pthread_create(&t, NULL, sink_conn, (void *)(intptr_t)fd);
		pthread_detach(t);
	}
}

static struct tsdb *open_store(const char *dir, const char *name, uint32_t *refs, size_t nseries)
{
	char path[512], err[256];
	snprintf(path, sizeof path, "%s/%s.db", dir, name);
	struct tsdb_opts o = {.path = path};
	struct tsdb *db = NULL;
	if (tsdb_open(&db, &o, err, sizeof err)) {
		fprintf(stderr, "tsdb_open: %s\n", err);
		exit(1);
	}
	for (size_t i = 0; i < nseries; i++) {
		char gpu[16], field[32];
		snprintf(gpu, sizeof gpu, "%zu", i % 8);
		snprintf(field, sizeof field, "field_%zu", i / 8);
		struct label l[] = {{"__name__", "gpulse_gpu_bench_ratio"}, {"gpu", gpu},
					 {"field", field}, {"uuid", "GPU-00000000-bench"}};
		if (tsdb_series(db, l, 4, &refs[i], err, sizeof err)) {
			fprintf(stderr, "tsdb_series: %s\n", err);
			exit(1);
		}
	}
	return db;
}

static void append_all(struct tsdb *db, const uint32_t *refs, size_t nseries, size_t nsamples,
		       int64_t t0)
{
	for (size_t k = 0; k < nsamples; k++) {
		size_t s = k % nseries;
		int64_t t = t0 + (int64_t)(k / nseries) * 100;
		tsdb_append(db, refs[s], t, (double)((k * 2654435761u) % 1000) / 1000.0);
	}
}

int main(int argc, char **argv)
{
	size_t nsamples = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
	size_t nseries = argc > 2 ? strtoul(argv[2], NULL, 10) : 160;
	char dir[] = "/tmp/gpulse-rwbench.XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	listen_fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof a;
	if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) || listen(listen_fd, 16) ||
	    getsockname(listen_fd, (struct sockaddr *)&a, &alen))
		return 1;
	pthread_t st;
	pthread_create(&st, NULL, sink_main, NULL);
	uint32_t *refs = calloc(nseries, sizeof *refs);
	int64_t t0 = clock_wall_ns() / 1000000 - (int64_t)(nsamples / nseries) * 100;

	/* The anchor: the store alone. */
	struct tsdb *db0 = open_store(dir, "anchor", refs, nseries);
	int64_t c0 = clock_process_cpu_ns(), w0 = clock_mono_ns();
	append_all(db0, refs, nseries, nsamples, t0);
	double anchor_cpu = (double)(clock_process_cpu_ns() - c0) / 1e9;
	double anchor_wall = (double)(clock_mono_ns() - w0) / 1e9;
	tsdb_close(db0);

	/* The store with remote write to the sink. */
	struct tsdb *db = open_store(dir, "rw", refs, nseries);
	char url[128], qdir[600], err[512];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/api/v1/write", ntohs(a.sin_port));
	snprintf(qdir, sizeof qdir, "%s/queue", dir);
	struct remote_write_opts o = {.name = "bench", .url = url, .queue_dir = qdir,
				      .capacity = 200000, .max_samples_per_send = 5000,
				      .batch_send_deadline_ms = 50,
				      .queue_max_bytes = 1u << 30};
	o.external[0] = (struct label){"instance", "bench-host"};
	o.nexternal = 1;
	struct remote_write *rw = NULL;
	if (remote_write_create(&rw, &o, err, sizeof err)) {
		fprintf(stderr, "remote_write_create: %s\n", err);
		return 1;
	}
	remote_write_set_store(rw, db);
	tsdb_set_append_hook(db, remote_write_on_append, rw);
	remote_write_start(rw);
	c0 = clock_process_cpu_ns();
	w0 = clock_mono_ns();
	/* Append in slices the ring can hold, as collectors do over time. */
	size_t slice = 100000;
	struct remote_write_stats s;
	for (size_t done = 0; done < nsamples; done += slice) {
		size_t n = nsamples - done < slice ? nsamples - done : slice;
		for (size_t k = done; k < done + n; k++)
			tsdb_append(db, refs[k % nseries], t0 + (int64_t)(k / nseries) * 100,
				    (double)((k * 2654435761u) % 1000) / 1000.0);
		/* The next slice when the ring has room for it. */
		do {
			remote_write_get_stats(rw, &s);
			if (s.samples_total + s.samples_lost_ring_total + s.samples_lost_queue_total +
				    100000 < done + n)
				usleep(200);
			else
				break;
		} while (1);
	}
	do {
		remote_write_get_stats(rw, &s);
		usleep(1000);
	} while (s.samples_total + s.samples_lost_ring_total + s.samples_lost_queue_total < nsamples);
	double cpu = (double)(clock_process_cpu_ns() - c0) / 1e9;
	double wall = (double)(clock_mono_ns() - w0) / 1e9;
	tsdb_set_append_hook(db, NULL, NULL);
	remote_write_destroy(rw);
	tsdb_close(db);

	double per_core = (double)s.samples_total / cpu;
	double anchor_per_core = (double)nsamples / anchor_cpu;
	printf("samples %zu, series %zu, requests %llu, bytes sent %llu (%.2f bytes/sample)\n",
	       nsamples, nseries, (unsigned long long)atomic_load(&sink_requests),
	       (unsigned long long)atomic_load(&sink_bytes),
	       (double)atomic_load(&sink_bytes) / (double)s.samples_total);
	printf("lost: ring %llu, queue %llu\n", (unsigned long long)s.samples_lost_ring_total,
	       (unsigned long long)s.samples_lost_queue_total);
	printf("anchor (store append alone): %.0f samples/s per CPU-second (%.3f s CPU, %.3f s wall)\n",
	       anchor_per_core, anchor_cpu, anchor_wall);
	printf("remote write end to end:     %.0f samples/s per CPU-second (%.3f s CPU, %.3f s wall, "
	       "%.0f samples/s wall)\n", per_core, cpu, wall, (double)s.samples_total / wall);
	printf("ratio remote write / anchor: %.3f\n", per_core / anchor_per_core);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 && s.samples_total == nsamples ? 0 : 1;
}
