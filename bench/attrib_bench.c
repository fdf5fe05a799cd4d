/* What attribution costs (src/attrib): a process resolved from /proc (a
 * cache miss: stat, cgroup, status, environ), one served from the cache
 * (a hit: one read of /proc/PID/stat), against an anchor measured in the
 * same run, a bare open+read+close of the same stat file; and /metrics
 * for 8 GPUs x 8 processes with every process attributed (default labels
 * and gpulse_process_info) against the same render with none (anchor).
 *   build/bench/bench_attrib [proc_root] [iterations]
 * proc_root defaults to the fixtures of tests/data/attrib/proc. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attrib/attrib.h"
#include "collect/bus.h"
#include "common/clock.h"
#include "export/prom.h"

#define NGPU 8
#define NPROC 8

static const uint32_t pids[NPROC] = {1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008};

static double render_us(struct bus *bus, struct self_stats *self, int iters)
{
	struct buf b;
	buf_init(&b, 16 << 20);
	int64_t t0 = clock_mono_ns();
	for (int i = 0; i < iters; i++) {
		buf_reset(&b);
		prom_render(&b, bus, NULL, NULL, self, false);
	}
	double us = (double)(clock_mono_ns() - t0) / iters / 1e3;
	buf_free(&b);
	return us;
}

static struct bus *make_bus(struct attrib *a)
{
	struct bus *bus;
	bus_create(&bus);
	static struct gpu_update u;
	for (int g = 0; g < NGPU; g++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = g;
		snprintf(id.uuid, sizeof id.uuid, "GPU-bench-%d", g);
		snprintf(id.name, sizeof id.name, "NVIDIA H200");
		int slot;
		bus_attach_gpu(bus, &id, &slot);
		memset(&u, 0, sizeof u);
		u.gpu = slot;
		u.tier = TIER_NORMAL;
		u.wall_ns = clock_wall_ns();
		u.has_procs = true;
		u.nprocs = NPROC;
		for (int p = 0; p < NPROC; p++) {
			u.procs[p].pid = pids[p];
			snprintf(u.procs[p].comm, sizeof u.procs[p].comm, "python3");
			u.procs[p].mem_valid = u.procs[p].util_valid = true;
			u.procs[p].used_bytes = 1ULL << 34;
			u.procs[p].sm_ratio = 0.5;
			if (a) {
				attrib_resolve(a, pids[p], &u.procs[p].owner);
				snprintf(u.procs[p].owner.pod, sizeof u.procs[p].owner.pod, "trainer-%d", p);
				snprintf(u.procs[p].owner.namespace_, sizeof u.procs[p].owner.namespace_, "ml");
				snprintf(u.procs[p].owner.container, sizeof u.procs[p].owner.container, "main");
			}
		}
		bus_publish(bus, &u);
	}
	return bus;
}

int main(int argc, char **argv)
{
	const char *root = argc > 1 ? argv[1] : GPULSE_SOURCE_DIR "/tests/data/attrib/proc";
	int iters = argc > 2 ? atoi(argv[2]) : 20000;
	struct attrib_config cfg = {.proc_root = root, .labels = OWNER_DEFAULT_LABELS};

	/* Anchor: the one file a cache hit reads. */
	char path[512], buf[1024];
	snprintf(path, sizeof path, "%s/1001/stat", root);
	int64_t t0 = clock_mono_ns();
	for (int i = 0; i < iters; i++) {
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || read(fd, buf, sizeof buf) <= 0) {
			fprintf(stderr, "%s: cannot read\n", path);
			return 1;
		}
		close(fd);
	}
	double anchor = (double)(clock_mono_ns() - t0) / iters / 1e3;

	struct proc_owner o;
	int rounds = iters / NPROC;
	t0 = clock_mono_ns();
	for (int i = 0; i < rounds; i++) {
		struct attrib *a;
		attrib_open(&a, &cfg);
		for (int p = 0; p < NPROC; p++)
			attrib_resolve(a, pids[p], &o);
		attrib_close(a);
	}
	int64_t with_open = clock_mono_ns() - t0;
	/* The open and close of each round (the cache's allocation) are not
	 * the miss: timed alone, and taken off. */
	t0 = clock_mono_ns();
	for (int i = 0; i < rounds; i++) {
		struct attrib *a;
		attrib_open(&a, &cfg);
		attrib_close(a);
	}
	int64_t opens = clock_mono_ns() - t0;
	double miss = (double)(with_open - opens) / (rounds * NPROC) / 1e3;

	struct attrib *a;
	attrib_open(&a, &cfg);
	for (int p = 0; p < NPROC; p++)
		attrib_resolve(a, pids[p], &o);
	t0 = clock_mono_ns();
	for (int i = 0; i < rounds; i++)
		for (int p = 0; p < NPROC; p++)
			attrib_resolve(a, pids[p], &o);
	double hit = (double)(clock_mono_ns() - t0) / (rounds * NPROC) / 1e3;
	printf("anchor: open+read+close of /proc/PID/stat   %.2f us  1.00\n", anchor);
	printf("attrib_resolve, miss (stat, cgroup, status, environ)  %.2f us  %.2f\n", miss,
	       miss / anchor);
	printf("attrib_resolve, cache hit                    %.2f us  %.2f\n", hit, hit / anchor);

	struct self_stats self;
	memset(&self, 0, sizeof self);
	self.mode = MODE_NVML;
	struct bus *plain = make_bus(NULL), *owned = make_bus(a);
	double r0 = render_us(plain, &self, iters / 4);
	self.attrib = a;
	double r1 = render_us(owned, &self, iters / 4);
	printf("prom_render, %d GPUs x %d processes, no attribution (anchor)  %.1f us  1.00\n", NGPU,
	       NPROC, r0);
	printf("prom_render, %d GPUs x %d processes, attributed            %.1f us  %.2f\n", NGPU,
	       NPROC, r1, r1 / r0);
	bus_destroy(plain);
	bus_destroy(owned);
	attrib_close(a);
	return 0;
}
