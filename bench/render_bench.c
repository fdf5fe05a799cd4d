/* Server-side cost of /metrics: prom_render for 8 GPUs filled with rows of
 * the real H200 recording (every field valid, processes and XIDs present),
 * timed over many renders. Also the status JSON. Prints µs per render.
 *   build/bench/bench_render [recording.csv] [iterations]  */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/bus.h"
#include "common/clock.h"
#include "export/prom.h"
#include "record/recording.h"
#include "export/status_json.h"

#define NGPU 8

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : GPULSE_SOURCE_DATADIR "/recordings/h200-phases-10hz.csv";
	int iters = argc > 2 ? atoi(argv[2]) : 20000;
	char err[512];
	struct recording *rec;
	if (recording_load(path, &rec, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct bus *bus;
	bus_create(&bus);
	static struct gpu_update u;
	for (int g = 0; g < NGPU; g++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = g;
		snprintf(id.uuid, sizeof id.uuid, "GPU-bench-%d", g);
		snprintf(id.name, sizeof id.name, "NVIDIA H200");
		snprintf(id.source, sizeof id.source, "nvml");
		int slot;
		bus_attach_gpu(bus, &id, &slot);
		const struct rec_row *row = &rec->rows[(size_t)(200 + 97 * g) % rec->nrows];
		for (int t = 0; t < TIER_COUNT; t++) {
			memset(&u, 0, sizeof u);
			u.gpu = slot;
			u.tier = (enum tier)t;
			u.wall_ns = clock_wall_ns();
			u.mask = fields_of_tier((enum tier)t);
			for (int f = 0; f < FIELD_COUNT; f++) {
				if (!(u.mask & FIELD_BIT(f)))
					continue;
				u.v[f] = (row->valid & FIELD_BIT(f)) ? row->v[f] : 1.0;
				u.valid |= FIELD_BIT(f);
			}
			if (t == TIER_NORMAL) {
				u.has_procs = true;
				u.nprocs = 2;
				for (int p = 0; p < 2; p++) {
					u.procs[p].pid = 1000 + (uint32_t)p;
					snprintf(u.procs[p].comm, sizeof u.procs[p].comm, "python3");
					u.procs[p].mem_valid = u.procs[p].util_valid = true;
					u.procs[p].used_bytes = 1ULL << 34;
					u.procs[p].sm_ratio = 0.5;
				}
			}
			bus_publish(bus, &u);
		}
		bus_note_xid(bus, slot, 79, clock_wall_ns());
	}
	struct self_stats self;
	memset(&self, 0, sizeof self);
	self.mode = MODE_NVML;
	/* NVML call statistics as a busy daemon has them: every function
	 * called, some with errors, latencies spread over the buckets. */
	struct nvml_lib *nv = calloc(1, sizeof *nv);
	for (int f = 0; f < NVML_FN_COUNT; f++) {
		atomic_store(&nv->stats[f].calls, 1000 + (uint64_t)f);
		atomic_store(&nv->stats[f].latency_ns_sum, 5000000);
		for (int k = 0; k < NVML_LATENCY_BUCKET_COUNT; k++)
			atomic_store(&nv->stats[f].bucket[k], (uint64_t)(k * f));
		atomic_store(&nv->stats[f].errors[NVML_ABI_ERROR_NOT_SUPPORTED], (uint64_t)f);
	}
	struct collector_stats cs;
	memset(&cs, 0, sizeof cs);
	struct buf b;
	buf_init(&b, 16 << 20);
	for (int om = 0; om < 2; om++) {
		int64_t t0 = clock_mono_ns();
		for (int i = 0; i < iters; i++) {
			buf_reset(&b);
			prom_render(&b, bus, nv, &cs, &self, om);
		}
		double us = (double)(clock_mono_ns() - t0) / iters / 1e3;
		printf("prom_render %s, %d GPUs + NVML call stats: %.1f us per render, %zu bytes\n",
		       om ? "OpenMetrics" : "text 0.0.4", NGPU, us, b.len);
	}
	int64_t t0 = clock_mono_ns();
	for (int i = 0; i < iters / 4; i++) {
		buf_reset(&b);
		status_json_render(&b, bus, &self);
	}
	printf("status_json_render, %d GPUs: %.1f us per render, %zu bytes\n", NGPU,
	       (double)(clock_mono_ns() - t0) / (iters / 4) / 1e3, b.len);
	buf_free(&b);
	free(nv);
	bus_destroy(bus);
	recording_free(rec);
	return 0;
}
