/* CPU per tick of the store's scrape of gpulsed's own /metrics
 * (src/daemon/selfscrape.c: every family as samples through the metric
 * sink, prom_emit) and of one /metrics render (prom_render, the whole
 * text, nothing stored), on the same inputs: 8 GPUs filled from the real
 * H200 recording, NPROC processes each (default 8: 64 in all), each
 * attributed to a pod's container (default labels and
 * gpulse_process_info), every NVML function called (its histogram), the
 * collector's and the store's counters; the scrape into a store of its
 * own, one tick a simulated second, in blocks. WAY "render" or "store"
 * runs that one alone (for instruction counts,
 * bench/selfscrape_instructions.sh).
 *   build/bench/bench_selfscrape [recording.csv] [ticks] [WAY|all] [NPROC]  */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect/bus.h"
#include "collect/collector.h"
#include "common/clock.h"
#include "daemon/selfscrape.h"
#include "export/prom.h"
#include "nvml/nvml_shim.h"
#include "record/recording.h"
#include "store/ingest.h"
#include "store/tsdb.h"

#define NGPU 8
#define BLOCK 50

struct world {
	struct bus *bus;
	struct nvml_lib *nv;
	struct collector_stats cs;
	struct self_stats self;
};

static struct world w;
static int nproc = 8;

static void storage_stats(void *ctx, struct storage_self_stats *out)
{
	(void)ctx;
	memset(out, 0, sizeof *out);
	out->open = out->available = true;
	out->series = 5000;
}

static int render_store(void *ctx, struct metric_sink *sink)
{
	(void)ctx;
	return prom_emit(sink, w.bus, w.nv, &w.cs, &w.self);
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void fill(const struct recording *rec)
{
	bus_create(&w.bus);
	static struct gpu_update u;
	for (int g = 0; g < NGPU; g++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = g;
		snprintf(id.uuid, sizeof id.uuid, "GPU-bench-%d", g);
		snprintf(id.name, sizeof id.name, "NVIDIA H200");
		snprintf(id.source, sizeof id.source, "nvml");
		int slot;
		bus_attach_gpu(w.bus, &id, &slot);
		const struct rec_row *row = &rec->rows[(size_t)(200 + 97 * g) % rec->nrows];
		for (int t = 0; t < TIER_COUNT; t++) {
			memset(&u, 0, sizeof u);
			u.gpu = slot;
			u.tier = (enum tier)t;
			u.wall_ns = clock_wall_ns();
			u.mask = fields_of_tier((enum tier)t);
			for (int f = 0; f < FIELD_COUNT; f++)
				if (u.mask & FIELD_BIT(f)) {
					u.v[f] = (row->valid & FIELD_BIT(f)) ? row->v[f] : 1.0;
					u.valid |= FIELD_BIT(f);
				}
			if (t == TIER_NORMAL) {
				u.has_procs = true;
				u.nprocs = nproc;
				for (int p = 0; p < nproc; p++) {
					struct gpu_process *q = &u.procs[p];
					q->pid = 1000 + (uint32_t)(100 * g + p);
					snprintf(q->comm, sizeof q->comm, "python3");
					q->mem_valid = q->util_valid = true;
					q->used_bytes = 1ULL << 34;
					q->sm_ratio = 0.5;
					q->owner.resolved = true;
					q->owner.labels = OWNER_DEFAULT_LABELS;
					snprintf(q->owner.cgroup, sizeof q->owner.cgroup,
						 "/kubepods.slice/kubepods-pod%d.slice/cri-containerd-%d.scope", g, p);
					snprintf(q->owner.pod, sizeof q->owner.pod, "train-%d-%d", g, p / 2);
					snprintf(q->owner.namespace_, sizeof q->owner.namespace_, "ml");
					snprintf(q->owner.container, sizeof q->owner.container, "worker");
					snprintf(q->owner.user, sizeof q->owner.user, "alice");
				}
			}
			bus_publish(w.bus, &u);
		}
	}
	pthread_mutex_init(&w.self.mode_lock, NULL);
	self_stats_set_mode(&w.self, MODE_NVML, "", 0);
	w.self.storage_stats = storage_stats;
	w.nv = calloc(1, sizeof *w.nv);
	for (int f = 0; f < NVML_FN_COUNT; f++) {
		atomic_store(&w.nv->stats[f].calls, 1000 + (uint64_t)f);
		atomic_store(&w.nv->stats[f].latency_ns_sum, 5000000);
		for (int k = 0; k < NVML_LATENCY_BUCKET_COUNT; k++)
			atomic_store(&w.nv->stats[f].bucket[k], (uint64_t)(k * f));
		atomic_store(&w.nv->stats[f].errors[NVML_ABI_ERROR_NOT_SUPPORTED], (uint64_t)f);
	}
	w.cs.lanes_alive = 8;
}

int main(int argc, char **argv)
{
	const char *path = argc > 1 ? argv[1] : GPULSE_SOURCE_DATADIR "/recordings/h200-phases-10hz.csv";
	int ticks = argc > 2 ? atoi(argv[2]) : 2000;
	const char *only = argc > 3 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL;
	if (argc > 4)
		nproc = atoi(argv[4]);
	if (nproc < 0 || nproc > GPU_PROC_MAX) {
		fprintf(stderr, "NPROC: 0 to %d\n", GPU_PROC_MAX);
		return 2;
	}
	char err[512];
	struct recording *rec;
	if (recording_load(path, &rec, err, sizeof err)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	fill(rec);
	const char *foreign[INGEST_METRIC_NAMES_MAX + 1];
	size_t nf = 0;
	ingest_metric_names(foreign, INGEST_METRIC_NAMES_MAX, &nf);
	foreign[nf] = NULL;
	struct selfscrape_opts so = {.foreign_names = foreign};

	char dir[] = "/tmp/gpulse-scrbenchXXXXXX";
	if (!mkdtemp(dir))
		return 1;
	char p[128];
	snprintf(p, sizeof p, "%s/store.db", dir);
	struct tsdb_opts o = {.path = p};
	struct tsdb *db;
	struct selfscrape *s;
	if (tsdb_open(&db, &o, err, sizeof err) || selfscrape_create(&s, db, &so, render_store, NULL)) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	int64_t t_ms = clock_wall_ns() / 1000000;
	int nt = (ticks + BLOCK - 1) / BLOCK * BLOCK;
	bool run_render = !only || strcmp(only, "render") == 0;
	bool run_store = !only || strcmp(only, "store") == 0;
	int64_t cpu_render = 0, cpu_store = 0;
	size_t render_bytes = 0;
	struct buf b;
	buf_init(&b, 64u << 20);
	/* Blocks of each in turn, so the machine's load falls on both. */
	for (int done = 0; done < nt; done += BLOCK) {
		if (run_render) {
			int64_t c0 = thread_cpu_ns();
			for (int i = 0; i < BLOCK; i++) {
				buf_reset(&b);
				prom_render(&b, w.bus, w.nv, &w.cs, &w.self, false);
			}
			cpu_render += thread_cpu_ns() - c0;
			render_bytes = b.len;
		}
		if (run_store) {
			int64_t c0 = thread_cpu_ns();
			for (int i = 0; i < BLOCK; i++)
				selfscrape_scrape_at(s, t_ms + (int64_t)(done + i) * 1000);
			cpu_store += thread_cpu_ns() - c0;
		}
	}
	buf_free(&b);
	if (run_render)
		printf("%-24s %8.1f us CPU per render, %zu bytes\n", "render (/metrics text)",
		       (double)cpu_render / nt / 1e3, render_bytes);
	if (run_store) {
		struct selfscrape_stats st;
		selfscrape_get_stats(s, &st);
		printf("%-24s %8.1f us CPU per tick, %llu series, %.0f samples per tick\n",
		       "store (self-scrape)", (double)cpu_store / nt / 1e3,
		       (unsigned long long)st.series, (double)st.samples_appended_total / nt);
	}
	printf("(%d GPUs, %d processes each, %d ticks)\n", NGPU, nproc, nt);
	selfscrape_destroy(s);
	tsdb_close(db);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return 1;
	free(w.nv);
	bus_destroy(w.bus);
	recording_free(rec);
	return 0;
}
