/* /metrics byte for byte against an earlier prom.c: the old one built
 * with its entry points renamed old_* (bench/prom_compare.sh does it from
 * a git revision) renders the same inputs as this tree's: 3 GPUs (one
 * replayed, one lost; identities, peers, throttle reasons, XIDs, ECC
 * events, diagnoses, health scores, processes with owners, MIG
 * instances, with text to escape and invalid UTF-8), every
 * self-stats callback, NVML calls with errors and latencies, a mode
 * detail with quotes, a newline and invalid UTF-8, rule groups past the
 * 255-byte label cut, receivers with escapes; text and OpenMetrics, with
 * and without the collector. The process's CPU and memory values, which
 * move between two renders, are cut from both. Exit 0 when all four are
 * identical; else the first differing pair is left in $TMPDIR (or /tmp)
 * as prom_old.txt and prom_new.txt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collect/bus.h"
#include "common/clock.h"
#include "export/prom.h"
#include "alert/notify.h"

static size_t rules_fill(void *ctx, struct rule_group_self_stats *out, size_t max)
{
	(void)ctx; (void)max;
	snprintf(out[0].name, sizeof out[0].name, "/etc/r.yml;grp \"q\"\nx");
	out[0].last_duration_s = 0.0123; out[0].evaluations_total = 5; out[0].failures_total = 1;
	memset(out[1].name, 'a', 600); out[1].name[600] = 0;
	out[1].last_duration_s = 1e-7; out[1].evaluations_total = 1ULL << 55;
	return 2;
}
static void ra_fill(void *ctx, struct rule_alert_self_stats *o)
{
	(void)ctx; memset(o, 0, sizeof *o); o->firing = 3; o->held = 1; o->restored_total = 2;
}
static void q_fill(void *ctx, struct query_self_stats *o)
{
	(void)ctx; memset(o, 0, sizeof *o); o->running = 1; o->rejected_total = 9;
}
static void n_fill(void *ctx, struct notify_stats *o)
{
	(void)ctx; memset(o, 0, sizeof *o);
	o->nreceivers = 2;
	o->receivers[0].kind = NOTIFY_ALERTMANAGER;
	snprintf(o->receivers[0].target, sizeof o->receivers[0].target, "http://am:9093/\"x\"");
	o->receivers[0].sent_total = 4; o->receivers[0].latency_bucket[3] = 2; o->receivers[0].latency_count = 3;
	o->receivers[0].latency_sum_s = 0.75;
	o->receivers[1].kind = NOTIFY_WEBHOOK;
	snprintf(o->receivers[1].target, sizeof o->receivers[1].target, "http://hook");
	o->ring_capacity = 10000; o->inhibited_total = 6;
}

int old_prom_render(struct buf *out, struct bus *bus, struct nvml_lib *nvml,
		const struct collector_stats *cs, const struct self_stats *self, bool openmetrics);

static void st_fill(void *ctx, struct storage_self_stats *o)
{
	(void)ctx;
	memset(o, 0, sizeof *o);
	o->open = true; o->available = true; o->samples_appended_total = 123456789012345678ULL;
	o->series = 42; o->head_bytes = 1u << 30; o->db_bytes = 77; o->self_scrape_series = 9;
	o->clock_steps_total = 3;
}

static void strip(struct buf *b)
{
	/* process_* values differ between two renders: blank them. */
	char *p = b->data;
	while ((p = strstr(p, "\nprocess_"))) {
		p++;
		if (*p == '#') continue;
		char *sp = strchr(p, ' '), *nl = strchr(p, '\n');
		if (sp && nl && sp < nl && (!strncmp(p, "process_cpu", 11) || !strncmp(p, "process_res", 11) || !strncmp(p, "process_vir", 11)))
		{
			memmove(sp + 1, nl, strlen(nl) + 1);
			b->len -= (size_t)(nl - sp - 1);
		}
	}
}

int main(void)
{
	struct bus *bus;
	bus_create(&bus);
	for (int g = 0; g < 3; g++) {
		struct gpu_identity id;
		memset(&id, 0, sizeof id);
		id.index = g;
		snprintf(id.uuid, sizeof id.uuid, "GPU-cmp-%d", g);
		snprintf(id.name, sizeof id.name, "NVIDIA H200");
		snprintf(id.source, sizeof id.source, g == 2 ? "replay" : "nvml");
		/* Identity, topology: GPU 1 with text to escape and cut. */
		snprintf(id.pci_bus_id, sizeof id.pci_bus_id, "00000000:%02X:00.0", 0x18 + g);
		snprintf(id.serial, sizeof id.serial, g == 1 ? "S\"N\\1\xff" : "1650%d", g);
		snprintf(id.driver_version, sizeof id.driver_version, "570.1%d", g);
		snprintf(id.cuda_version, sizeof id.cuda_version, "12.8");
		snprintf(id.architecture, sizeof id.architecture, "hopper");
		id.cc_major = g == 1 ? 0 : 9; id.cc_minor = 0; id.mig_mode = g - 1;
		id.max_sm_clock_hz = g ? 1.98e9 : 0; id.max_mem_clock_hz = 2.619e9;
		id.pcie_max_gen = 5; id.pcie_max_width = g == 1 ? 0 : 16;
		id.nvlink_count_valid = g != 1; id.nvlink_count = 18;
		int slot;
		bus_attach_gpu(bus, &id, &slot);
		struct gpu_peer peers[2] = {{(g + 1) % 3, 10 * g, g == 0 ? 18 : -1},
					    {(g + 2) % 3, g == 2 ? -1 : 50, 0}};
		bus_set_peers(bus, slot, peers, 2);
		static struct gpu_update u;
		for (int t = 0; t < TIER_COUNT; t++) {
			memset(&u, 0, sizeof u);
			u.gpu = slot; u.tier = (enum tier)t; u.wall_ns = clock_wall_ns();
			u.mask = fields_of_tier((enum tier)t);
			for (int f = 0; f < FIELD_COUNT; f++)
				if (u.mask & FIELD_BIT(f)) { u.v[f] = 0.25 * f + g; u.valid |= FIELD_BIT(f); }
			if (u.valid & FIELD_BIT(F_CLOCK_REASONS))
				u.v[F_CLOCK_REASONS] = 0x24;
			if (t == TIER_NORMAL) {
				/* Processes with owners (escapes, MIG, cut comm), and
				 * MIG instances on GPU 0. */
				u.has_procs = true; u.nprocs = 3; u.procs_dropped = g;
				for (int p = 0; p < 3; p++) {
					struct gpu_process *q = &u.procs[p];
					q->pid = 100 * (uint32_t)g + (uint32_t)p + 1;
					memcpy(q->comm, p == 1 ? "py\"th\xc3\n\xffxxxxxxxxxxx" : "python3",
					       p == 1 ? GPU_COMM_LEN : 8);
					q->mem_valid = p != 2; q->util_valid = p != 0;
					q->used_bytes = (1ULL << 33) + (uint64_t)p; q->sm_ratio = 0.125 * p;
					q->mem_ratio = 1.0 / 3; q->in_mig = g == 0 && p == 2; q->gpu_instance = 7;
					q->owner.resolved = p != 0;
					q->owner.labels = p == 2 ? 0x3ff : OWNER_DEFAULT_LABELS;
					snprintf(q->owner.cgroup, sizeof q->owner.cgroup, "/kubepods/pod%d/c\"%d", g, p);
					snprintf(q->owner.pod, sizeof q->owner.pod, "train-%d", g);
					snprintf(q->owner.namespace_, sizeof q->owner.namespace_, "ml");
					snprintf(q->owner.job, sizeof q->owner.job, p == 2 ? "4711" : "");
					snprintf(q->owner.user, sizeof q->owner.user, "al\\ice");
				}
				if (g == 0) {
					u.has_mig = true; u.nmig = 2;
					for (int k = 0; k < 2; k++) {
						struct gpu_mig *m = &u.mig[k];
						snprintf(m->uuid, sizeof m->uuid, "MIG-%d-%d", g, k);
						snprintf(m->profile, sizeof m->profile, k ? "3g.71gb" : "1g.18gb");
						m->gpu_instance = 1 + (unsigned)k; m->compute_instance = 0;
						m->mem_valid = k == 0; m->mem_used_bytes = 1ULL << 30;
						m->mem_total_bytes = 18ULL << 30; m->gpm_valid = k ? 0x5 : 0xf;
						for (int q = 0; q < MIG_GPM_COUNT; q++)
							m->gpm[q] = 0.1 * (q + 1);
					}
				}
			}
			bus_publish(bus, &u);
		}
		bus_note_xid(bus, slot, 79, clock_wall_ns());
		bus_note_xid(bus, slot, 13 + (uint32_t)g, clock_wall_ns());
		bus_note_ecc_event(bus, slot, g == 1);
		if (g != 1)
			bus_set_diagnosis(bus, slot, g, 0x5, 1795965289.0);
		struct gpu_health_score hs;
		memset(&hs, 0, sizeof hs);
		hs.valid = g != 2; hs.score = 87.5; hs.drain = g == 1; hs.top_reason = g == 1 ? 1 : -1;
		hs.penalty[1] = 12.5;
		bus_set_health_score(bus, slot, &hs);
		if (g == 1)
			bus_set_health(bus, slot, GPU_HEALTH_LOST, "lost");
	}
	static struct self_stats self;
	memset(&self, 0, sizeof self);
	pthread_mutex_init(&self.mode_lock, NULL);
	self_stats_set_mode(&self, MODE_REPLAY, "file \"a\\b\"\nc \xff\xfe end", 2.0);
	self.start_wall_ns = 1795965289123456789LL;
	atomic_store(&self.scrapes_total, 17);
	atomic_store(&self.last_scrape_ns, 1234567);
	atomic_store(&self.http_shed_total[2], 5);
	atomic_store(&self.http_denied_total[4], 99);
	atomic_store(&self.reloads_ok_total, 2);
	atomic_store(&self.last_reload_ok, 1);
	atomic_store(&self.last_reload_wall_ns, 1795965300500000000LL);
	self.storage_stats = st_fill;
	self.rule_stats = rules_fill; self.rule_alert_stats = ra_fill; self.query_stats = q_fill;
	self.notify_stats = n_fill;
	struct nvml_lib *nv = calloc(1, sizeof *nv);
	for (int f = 0; f < NVML_FN_COUNT; f += 2) {
		atomic_store(&nv->stats[f].calls, 1000 + (uint64_t)f);
		atomic_store(&nv->stats[f].latency_ns_sum, 5000000 + f);
		for (int k = 0; k < NVML_LATENCY_BUCKET_COUNT; k++)
			atomic_store(&nv->stats[f].bucket[k], (uint64_t)(k * f));
		atomic_store(&nv->stats[f].errors[1 + f % 5], (uint64_t)f);
		atomic_store(&nv->stats[f].errors[NVML_ERROR_CLASSES - 1], (uint64_t)(f % 3));
	}
	struct collector_stats cs;
	memset(&cs, 0, sizeof cs);
	cs.lanes_alive = 2; cs.lanes_started = 3; cs.stalls = 1; cs.sweeps[1] = 1ULL << 60;
	cs.adaptive_reads[0] = 5; cs.moves[0] = 2; cs.events = 7; cs.gpus_moving = 1;
	int bad = 0;
	for (int pass = 0; pass < 4; pass++) {
		bool om = pass & 1;
		const struct collector_stats *c = pass < 2 ? &cs : NULL;
		struct nvml_lib *n = pass < 2 ? nv : NULL;
		struct buf a, b;
		buf_init(&a, 16 << 20); buf_init(&b, 16 << 20);
		int ra = old_prom_render(&a, bus, n, c, &self, om);
		int rb = prom_render(&b, bus, n, c, &self, om);
		strip(&a); strip(&b);
		bool same = ra == rb && a.len == b.len && memcmp(a.data, b.data, a.len) == 0;
		printf("pass %d (%s, %s): %zu bytes old, %zu new: %s\n", pass, om ? "OpenMetrics" : "text",
		       c ? "collector+nvml" : "no collector", a.len, b.len, same ? "identical" : "DIFFERENT");
		if (!same) {
			bad = 1;
			const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
			char pa[512], pb[512];
			snprintf(pa, sizeof pa, "%s/prom_old.txt", tmp);
			snprintf(pb, sizeof pb, "%s/prom_new.txt", tmp);
			FILE *fa = fopen(pa, "w"), *fb = fopen(pb, "w");
			if (fa && fb) {
				fwrite(a.data, 1, a.len, fa);
				fwrite(b.data, 1, b.len, fb);
			}
			if (fa)
				fclose(fa);
			if (fb)
				fclose(fb);
		}
		buf_free(&a); buf_free(&b);
	}
	return bad;
}
