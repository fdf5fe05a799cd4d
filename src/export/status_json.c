/* The status document; see status_json.h. Written straight into the
 * buffer rather than built as a jansson tree: the shape is fixed, and the
 * daemon core does not otherwise need jansson. */
#include "export/status_json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collect/fields.h"
#include "export/prom.h"
#include "common/status.h"
#include "common/utf8.h"
#include "diagnose/diagnose.h"
#include "diagnose/health.h"

/* The writer works like prom.c's: straight into out->data with one
 * inlined capacity check per piece, buf_reserve only to grow, and the NUL
 * written at the end. */
struct jw {
	struct buf *b;
	int rc;
};

static char *room(struct jw *w, size_t n)
{
	struct buf *b = w->b;
	if (w->rc)
		return NULL;
	if (b->len + n >= b->cap) {
		int rc = buf_reserve(b, n);
		if (rc) {
			w->rc = rc;
			return NULL;
		}
	}
	return b->data + b->len;
}

static void put(struct jw *w, const char *s, size_t n)
{
	char *p = room(w, n);
	if (p) {
		memcpy(p, s, n);
		w->b->len += n;
	}
}

static void lit(struct jw *w, const char *s)
{
	put(w, s, strlen(s));
}

/* A JSON string from text that may not be UTF-8: cleaned, then escaped
 * as buf_put_json_string does. */
static void str(struct jw *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	char clean[512];
	size_t n = utf8_clean(clean, sizeof clean, s);
	char *p = room(w, 6 * n + 2);
	if (!p)
		return;
	char *o = p;
	*o++ = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)clean[i];
		switch (c) {
		case '"': *o++ = '\\'; *o++ = '"'; break;
		case '\\': *o++ = '\\'; *o++ = '\\'; break;
		case '\n': *o++ = '\\'; *o++ = 'n'; break;
		case '\r': *o++ = '\\'; *o++ = 'r'; break;
		case '\t': *o++ = '\\'; *o++ = 't'; break;
		default:
			if (c < 0x20) {
				memcpy(o, "\\u00", 4);
				o[4] = hex[c >> 4];
				o[5] = hex[c & 15];
				o += 6;
			} else {
				*o++ = (char)c;
			}
		}
	}
	*o++ = '"';
	w->b->len += (size_t)(o - p);
}

static void num(struct jw *w, double v)
{
	if (!isfinite(v)) {
		lit(w, "null");
		return;
	}
	/* Its forms ("1e-05", "0.25", "-3") are all valid JSON numbers. */
	char *p = room(w, PROM_DOUBLE_MAX);
	if (p)
		w->b->len += prom_format_double(p, v);
}

static void u64(struct jw *w, uint64_t v)
{
	char tmp[24];
	char *p = tmp + sizeof tmp;
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	put(w, p, (size_t)(tmp + sizeof tmp - p));
}

static void i64(struct jw *w, int64_t v)
{
	if (v < 0) {
		lit(w, "-");
		u64(w, (uint64_t)0 - (uint64_t)v);
	} else {
		u64(w, (uint64_t)v);
	}
}

/* "key": — keys are our own identifiers and need no escaping. */
static void key(struct jw *w, const char *k)
{
	lit(w, "\"");
	lit(w, k);
	lit(w, "\":");
}

static void key_str(struct jw *w, const char *k, const char *v)
{
	key(w, k);
	str(w, v);
	lit(w, ",");
}

static void key_num(struct jw *w, const char *k, double v)
{
	key(w, k);
	num(w, v);
	lit(w, ",");
}

static void key_u64(struct jw *w, const char *k, uint64_t v)
{
	key(w, k);
	u64(w, v);
	lit(w, ",");
}

/* "health_score": null before the first verdict, else {score, drain,
 * reason (the top one, null when none), window_s, reasons: [{reason,
 * penalty, drain, evidence}] for the reasons that saw something}. */
static void render_health_score(struct jw *w, const struct gpu_health_score *h)
{
	key(w, "health_score");
	if (!h->valid) {
		lit(w, "null,");
		return;
	}
	lit(w, "{");
	key_num(w, "score", h->score);
	key(w, "drain");
	lit(w, h->drain ? "true," : "false,");
	key(w, "reason");
	if (h->top_reason >= 0)
		str(w, health_reason_name(h->top_reason));
	else
		lit(w, "null");
	lit(w, ",");
	key_num(w, "window_s", h->window_s);
	key(w, "reasons");
	lit(w, "[");
	bool first = true;
	for (int k = 0; k < HEALTH_REASON_COUNT; k++) {
		if (!h->evidence[k][0])
			continue;
		lit(w, first ? "{" : ",{");
		first = false;
		key_str(w, "reason", health_reason_name(k));
		key_num(w, "penalty", h->penalty[k]);
		key(w, "drain");
		lit(w, h->drains[k] ? "true," : "false,");
		key(w, "evidence");
		str(w, h->evidence[k]);
		lit(w, "}");
	}
	lit(w, "]},");
}

static void unix_seconds(struct jw *w, int64_t wall_ns)
{
	if (wall_ns <= 0)
		lit(w, "null");
	else
		num(w, (double)wall_ns / 1e9);
}

static const char *health_name(enum gpu_health h)
{
	return h == GPU_HEALTH_UP ? "up" : h == GPU_HEALTH_STALE ? "stale" : "lost";
}

static void render_allocations(struct jw *w, const struct gpu_snapshot *s,
			       const struct attrib_allocation *al, size_t nal);

/* Activity per process and per owner on this GPU (src/attrib/tenants.h):
 * "tenants" [{pid (0: the "other" row), comm, gpu_instance, source, busy,
 * sm_active, tensor_active, dram_bandwidth (parts of the GPU's figures,
 * null where the GPU's was not read), gpu_time_s, launches_per_s, bound,
 * bound_detail, owner (summary)}], the current rows only; "workloads" the
 * same per owner ({owner: {labelled fields}, summary, processes}); and
 * "bottleneck_owner": the process with the largest part of what the
 * live diagnosis says bounds the GPU ({pid, comm, share}), or null. */
struct tenant_view {
	struct tenants_row *rows;
	size_t nrows;
	struct tenants_group *groups;
	size_t ngroups;
	struct tenants_holder *holders;
	size_t nholders;
};

/* Who holds the GPU and whether each is idle by the split (tenants_hold):
 * "holders": [{pod, namespace, job, job_user, allocated, processes,
 * sm_active (null: not judged), idle_for_s, idle}]. */
static void render_holders(struct jw *w, const struct gpu_snapshot *s, const struct tenant_view *tv,
			   bool fresh)
{
	key(w, "holders");
	lit(w, "[");
	bool first = true;
	for (size_t k = 0; tv && fresh && k < tv->nholders; k++) {
		const struct tenants_holder *h = &tv->holders[k];
		if (h->gpu != s->id.index || !h->current)
			continue;
		lit(w, first ? "{" : ",{");
		first = false;
		key_str(w, "pod", h->pod);
		key_str(w, "namespace", h->namespace_);
		key_str(w, "job", h->job);
		key_str(w, "job_user", h->job_user);
		key(w, "allocated");
		lit(w, h->allocated ? "true," : "false,");
		key_u64(w, "processes", h->processes);
		key_num(w, "sm_active", h->judged ? h->sm_active : NAN);
		key_num(w, "idle_for_s", h->judged ? h->low_s : NAN);
		key(w, "idle");
		lit(w, !h->judged ? "null}" : h->idle ? "true}" : "false}");
	}
	lit(w, "],");
}

static void tenant_parts(struct jw *w, uint32_t valid, const double ratio[SPLIT_METRIC_COUNT])
{
	static const char *const keys[SPLIT_METRIC_COUNT] = {"sm_active", "tensor_active",
							     "dram_bandwidth"};
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
		key_num(w, keys[m], valid & 1u << m ? ratio[m] : NAN);
}

static void render_tenants(struct jw *w, const struct gpu_snapshot *s, const struct tenant_view *tv)
{
	bool first = true;
	const struct tenants_row *top = NULL;
	int metric = s->diag_class == DIAG_COMPUTE_BOUND ? SPLIT_TENSOR
		     : s->diag_class == DIAG_MEMORY_BOUND ? SPLIT_DRAM : SPLIT_SM;
	double total = 0;
	/* Only while the GPU's state is fresh (as /metrics). */
	bool fresh = s->health == GPU_HEALTH_UP && s->procs_valid && !gpu_snapshot_is_stale(s);
	/* Each tenant held against the device: its class beside the GPU's,
	 * and its share of the activity that bounds the GPU. */
	bool device_known = s->diag_class >= 0 && s->diag_class != DIAG_IDLE;
	double bound_total = 0;
	for (size_t k = 0; tv && fresh && k < tv->nrows; k++)
		if (tv->rows[k].gpu == s->id.index && tv->rows[k].current &&
		    (tv->rows[k].valid & 1u << metric))
			bound_total += tv->rows[k].ratio[metric];
	key(w, "device_bound");
	if (s->diag_class >= 0)
		str(w, diag_class_name((enum diag_class)s->diag_class));
	else
		lit(w, "null");
	lit(w, ",");
	render_holders(w, s, tv, fresh);
	key(w, "tenants");
	lit(w, "[");
	for (size_t k = 0; tv && fresh && k < tv->nrows; k++) {
		const struct tenants_row *r = &tv->rows[k];
		if (r->gpu != s->id.index || !r->current)
			continue;
		lit(w, first ? "{" : ",{");
		first = false;
		key_u64(w, "pid", r->pid);
		key_str(w, "comm", r->comm);
		key(w, "gpu_instance");
		if (r->in_mig)
			u64(w, r->gpu_instance);
		else
			lit(w, "null");
		lit(w, ",");
		key_str(w, "source", split_source_name(r->source));
		key_num(w, "busy", r->busy);
		tenant_parts(w, r->valid, r->ratio);
		key_num(w, "gpu_time_s", r->gpu_time_s);
		key_num(w, "launches_per_s", r->launches_per_s);
		key_str(w, "bound", tenants_bound_name(r->bound));
		key_str(w, "bound_detail", tenants_bound_detail(r->bound));
		key_num(w, "bottleneck_share", device_known && bound_total > 0 &&
						       (r->valid & 1u << metric)
						   ? r->ratio[metric] / bound_total
						   : NAN);
		char sum[160] = "";
		if (r->pid)
			owner_summary(&r->owner, sum, sizeof sum);
		key(w, "owner");
		str(w, sum);
		lit(w, "}");
		if (r->pid && (r->valid & 1u << metric)) {
			total += r->ratio[metric];
			if (!top || r->ratio[metric] > top->ratio[metric])
				top = r;
		}
	}
	lit(w, "],");
	key(w, "workloads");
	lit(w, "[");
	first = true;
	for (size_t k = 0; tv && fresh && k < tv->ngroups; k++) {
		const struct tenants_group *g = &tv->groups[k];
		if (g->gpu != s->id.index || !g->current)
			continue;
		lit(w, first ? "{" : ",{");
		first = false;
		key(w, "owner");
		lit(w, "{");
		bool any = false;
		for (int f = 0; f < OWNER_FIELD_COUNT; f++) {
			const char *v = owner_field_value(&g->owner, (enum owner_field)f);
			if (!(g->owner.labels & 1u << f) || !v[0])
				continue;
			if (any)
				lit(w, ",");
			any = true;
			key(w, owner_field_name((enum owner_field)f));
			str(w, v);
		}
		lit(w, "},");
		char sum[160];
		owner_summary(&g->owner, sum, sizeof sum);
		key_str(w, "summary", sum);
		key(w, "gpu_instance");
		if (g->in_mig)
			u64(w, g->gpu_instance);
		else
			lit(w, "null");
		lit(w, ",");
		key_u64(w, "processes", g->processes);
		key_str(w, "source", split_source_name(g->source));
		key_num(w, "busy", g->busy);
		tenant_parts(w, g->valid, g->ratio);
		key_num(w, "gpu_time_s", g->gpu_time_s);
		key_str(w, "bound", tenants_bound_name(g->bound));
		key_str(w, "bound_detail", tenants_bound_detail(g->bound));
		key_num(w, "bottleneck_share", device_known && bound_total > 0 &&
						       (g->valid & 1u << metric)
						   ? g->ratio[metric] / bound_total
						   : NAN);
		key(w, "other");
		lit(w, g->other ? "true}" : "false}");
	}
	lit(w, "],");
	key(w, "bottleneck_owner");
	if (top && total > 0 && s->diag_class >= 0 && s->diag_class != DIAG_IDLE) {
		lit(w, "{");
		key_u64(w, "pid", top->pid);
		key_str(w, "comm", top->comm);
		key_str(w, "activity", split_metric_name((enum split_metric)metric));
		key(w, "share");
		num(w, top->ratio[metric] / total);
		lit(w, "}");
	} else {
		lit(w, "null");
	}
	lit(w, ",");
}

static void render_gpu(struct jw *w, const struct gpu_snapshot *s,
		       const struct attrib_allocation *al, size_t nal, const struct tenant_view *tv)
{
	const struct gpu_identity *id = &s->id;
	lit(w, "{");
	key(w, "gpu");
	i64(w, id->index);
	lit(w, ",");
	key_str(w, "uuid", id->uuid);
	key_str(w, "model", id->name);
	key_str(w, "pci_bus_id", id->pci_bus_id);
	key_str(w, "serial", id->serial);
	key_str(w, "driver_version", id->driver_version);
	key_str(w, "cuda_version", id->cuda_version);
	key_str(w, "architecture", id->architecture);
	key(w, "compute_capability");
	lit(w, "\"");
	if (id->cc_major > 0) {
		u64(w, (uint64_t)id->cc_major);
		lit(w, ".");
		u64(w, id->cc_minor > 0 ? (uint64_t)id->cc_minor : 0);
	}
	lit(w, "\",");
	key_str(w, "mig_mode", id->mig_mode == 1 ? "enabled" : id->mig_mode == 0 ? "disabled"
										  : "unknown");
	key_str(w, "source", id->source);
	key_str(w, "health", health_name(s->health));
	key_str(w, "health_reason", s->health_reason);
	key(w, "health_since");
	unix_seconds(w, s->health_since_wall_ns);
	lit(w, ",");
	key_num(w, "max_sm_clock_hz", id->max_sm_clock_hz);
	key_num(w, "max_mem_clock_hz", id->max_mem_clock_hz);
	key_u64(w, "pcie_max_gen", id->pcie_max_gen);
	key_u64(w, "pcie_max_width", id->pcie_max_width);
	key(w, "gpm_supported");
	lit(w, id->gpm_supported ? "true," : "false,");

	key(w, "sample_time");
	lit(w, "{");
	for (int t = 0; t < TIER_COUNT; t++) {
		if (t)
			lit(w, ",");
		key(w, tier_name((enum tier)t));
		unix_seconds(w, s->tier_wall_ns[t]);
	}
	lit(w, "},");

	key(w, "fields");
	lit(w, "{");
	bool first = true;
	for (int f = 0; f < FIELD_COUNT; f++) {
		if (!(s->valid & FIELD_BIT(f)))
			continue;
		if (!first)
			lit(w, ",");
		first = false;
		key(w, field_key((enum field_id)f));
		num(w, s->v[f]);
	}
	lit(w, "},");

	key(w, "stale_fields");
	lit(w, "[");
	first = true;
	for (int f = 0; f < FIELD_COUNT; f++) {
		if (!(s->stale & FIELD_BIT(f)))
			continue;
		if (!first)
			lit(w, ",");
		first = false;
		str(w, field_key((enum field_id)f));
	}
	lit(w, "],");

	key(w, "throttle_reasons");
	if (s->valid & FIELD_BIT(F_CLOCK_REASONS)) {
		double v = s->v[F_CLOCK_REASONS];
		uint64_t mask = (v >= 0 && v < 18446744073709551616.0) ? (uint64_t)v : 0;
		lit(w, "[");
		first = true;
		for (int k = 0; k < clock_reason_count; k++) {
			if (!(mask & clock_reason_table[k].bit))
				continue;
			if (!first)
				lit(w, ",");
			first = false;
			str(w, clock_reason_table[k].label);
		}
		lit(w, "],");
	} else {
		lit(w, "null,");
	}

	key(w, "processes");
	lit(w, "[");
	for (int k = 0; s->procs_valid && k < s->nprocs && k < GPU_PROC_MAX; k++) {
		const struct gpu_process *p = &s->procs[k];
		char comm[GPU_COMM_LEN + 1];
		memcpy(comm, p->comm, GPU_COMM_LEN);
		comm[GPU_COMM_LEN] = '\0';
		lit(w, k ? ",{" : "{");
		key_u64(w, "pid", p->pid);
		key_str(w, "comm", comm);
		key(w, "uid");
		if (p->uid_valid)
			u64(w, p->uid);
		else
			lit(w, "null");
		lit(w, ",");
		key(w, "used_bytes");
		if (p->mem_valid)
			u64(w, p->used_bytes);
		else
			lit(w, "null");
		lit(w, ",");
		key(w, "sm_ratio");
		num(w, p->util_valid ? p->sm_ratio : NAN);
		lit(w, ",");
		key(w, "mem_ratio");
		num(w, p->util_valid ? p->mem_ratio : NAN);
		lit(w, ",");
		key(w, "gpu_instance");   /* its MIG instance, null outside MIG mode */
		if (p->in_mig)
			u64(w, (uint64_t)p->gpu_instance);
		else
			lit(w, "null");
		lit(w, ",");
		/* Who the process belongs to (src/attrib): every field, "" where
		 * unknown, and the one-line summary status and top show. */
		key(w, "owner");
		if (p->owner.resolved) {
			lit(w, "{");
			for (int f = 0; f < OWNER_FIELD_COUNT; f++)
				key_str(w, owner_field_name((enum owner_field)f),
					owner_field_value(&p->owner, (enum owner_field)f));
			char sum[160];
			owner_summary(&p->owner, sum, sizeof sum);
			key(w, "summary");
			str(w, sum);
			lit(w, "}");
		} else {
			lit(w, "null");
		}
		lit(w, "}");
	}
	lit(w, "],");
	key_u64(w, "processes_dropped", s->procs_valid ? s->procs_dropped : 0);
	render_tenants(w, s, tv);

	key(w, "xid");
	lit(w, "[");
	for (int k = 0; k < s->nxid && k < GPU_XID_MAX; k++) {
		lit(w, k ? ",{" : "{");
		key_u64(w, "code", s->xid[k].code);
		key(w, "count");
		u64(w, s->xid[k].count);
		lit(w, "}");
	}
	lit(w, "],");
	key_u64(w, "xid_other", s->xid_other);
	key(w, "ecc_events");
	lit(w, "{");
	key_u64(w, "single_bit", s->ecc_events[0]);
	key(w, "double_bit");
	u64(w, s->ecc_events[1]);
	lit(w, "},");
	key(w, "lost_total");
	u64(w, s->lost_total);
	lit(w, ",");
	render_health_score(w, &s->health_score);
	render_allocations(w, s, al, nal);
	/* MIG instances (null when the GPU is not in MIG mode). */
	lit(w, ",");
	key(w, "mig");
	if (!s->mig_valid) {
		lit(w, "null");
	} else {
		lit(w, "[");
		for (int k = 0; k < s->nmig && k < GPU_MIG_MAX; k++) {
			const struct gpu_mig *m = &s->mig[k];
			lit(w, k ? ",{" : "{");
			key_str(w, "uuid", m->uuid);
			key_str(w, "profile", m->profile);
			key_u64(w, "gpu_instance", m->gpu_instance);
			key_u64(w, "compute_instance", m->compute_instance);
			key(w, "memory_used_bytes");
			if (m->mem_valid)
				u64(w, m->mem_used_bytes);
			else
				lit(w, "null");
			lit(w, ",");
			key(w, "memory_total_bytes");
			if (m->mem_valid)
				u64(w, m->mem_total_bytes);
			else
				lit(w, "null");
			lit(w, ",");
			key(w, "sm_active_ratio");
			num(w, m->gpm_valid & 1u << MIG_GPM_SM_ACTIVE ? m->gpm[MIG_GPM_SM_ACTIVE] : NAN);
			lit(w, "}");
		}
		lit(w, "]");
	}
	lit(w, "}");
}


/* The pod-resources allocations of GPU s: who holds it, and whether that
 * pod runs anything on it (as gpulse_gpu_allocated_idle on /metrics). */
static void render_allocations(struct jw *w, const struct gpu_snapshot *s,
			       const struct attrib_allocation *al, size_t nal)
{
	key(w, "allocations");
	lit(w, "[");
	bool first = true;
	for (size_t k = 0; k < nal; k++) {
		if (!gpu_snapshot_holds(s, &al[k]))
			continue;
		bool busy = false;
		for (int p = 0; p < s->nprocs && p < GPU_PROC_MAX; p++) {
			const struct proc_owner *o = &s->procs[p].owner;
			if (al[k].job[0])
				busy |= strcmp(o->job, al[k].job) == 0;
			else if (o->pod_uid[0] && (!o->pod[0] || (strcmp(o->pod, al[k].pod) == 0 &&
								  strcmp(o->namespace_, al[k].namespace_) == 0)))
				busy = true;
		}
		lit(w, first ? "{" : ",{");
		first = false;
		key_str(w, "job", al[k].job);
		key_str(w, "job_user", al[k].job_user);
		key_str(w, "pod", al[k].pod);
		key_str(w, "namespace", al[k].namespace_);
		key_str(w, "container", al[k].container);
		key_str(w, "resource", al[k].resource);
		key_str(w, "device_id", al[k].device_id);
		key(w, "idle");
		lit(w, !s->procs_valid ? "null" : busy ? "false" : "true");
		lit(w, "}");
	}
	lit(w, "]");
}

static const char *mode_name(enum daemon_mode m)
{
	return m == MODE_NVML ? "nvml" : m == MODE_REPLAY ? "replay" : "none";
}

int status_json_render(struct buf *out, struct bus *bus, const struct self_stats *self)
{
	struct jw w = {.b = out};
	if (out->failed)
		return GPULSE_ELIMIT;
	struct gpu_snapshot *snap = malloc(sizeof *snap);
	if (!snap)
		return GPULSE_ENOMEM;
	int n = bus ? bus_gpu_count(bus) : 0;
	size_t est = 1024 + (size_t)(n > 0 ? n : 0) * 3072;
	if (out->max > out->len)
		buf_reserve(out, est < out->max - out->len ? est : out->max - out->len);
	lit(&w, "{\"status\":\"success\",\"data\":{");
	char detail[sizeof self->mode_detail] = "";
	double speed = NAN;
	enum daemon_mode mode = self ? self_stats_get_mode(self, detail, sizeof detail, &speed) : MODE_NONE;
	key_str(&w, "mode", mode_name(mode));
	key_str(&w, "detail", detail);
	key_num(&w, "replay_speed", speed);
	key(&w, "start_time");
	unix_seconds(&w, self ? self->start_wall_ns : 0);
	lit(&w, ",");
	struct attrib_stats ast;
	attrib_get_stats(self ? self->attrib : NULL, &ast);
	struct attrib_allocation *al = NULL;
	size_t nal = 0;
	if (ast.podres_allocations > 0 && (al = malloc(ast.podres_allocations * sizeof *al)))
		nal = attrib_allocations(self->attrib, al, ast.podres_allocations);
	key(&w, "attribution");
	lit(&w, "{");
	key(&w, "pod_resources");
	lit(&w, ast.podres_configured ? "{\"configured\":true," : "{\"configured\":false,");
	lit(&w, ast.podres_available ? "\"available\":true," : "\"available\":false,");
	key_u64(&w, "allocations", ast.podres_allocations);
	key_u64(&w, "refreshes_total", ast.podres_refreshes_total);
	key_u64(&w, "failures_total", ast.podres_failures_total);
	key(&w, "last_error");
	str(&w, ast.podres_last_error);
	lit(&w, "},");
	key_u64(&w, "processes_resolved_total", ast.resolved_total);
	key(&w, "errors_total");
	u64(&w, ast.proc_errors_total + ast.cgroup_errors_total);
	lit(&w, "},");
	struct tenant_view tv = {0};
	struct tenants_stats tst;
	if (self && self->tenants) {
		tenants_get_stats(self->tenants, &tst);
		if (tst.rows && (tv.rows = malloc(tst.rows * sizeof *tv.rows)))
			tv.nrows = tenants_rows(self->tenants, tv.rows, tst.rows);
		if (tst.groups && (tv.groups = malloc(tst.groups * sizeof *tv.groups)))
			tv.ngroups = tenants_groups(self->tenants, tv.groups, tst.groups);
		if (tst.holders && (tv.holders = malloc(tst.holders * sizeof *tv.holders)))
			tv.nholders = tenants_holders(self->tenants, tv.holders, tst.holders);
		tv.nholders = tv.nholders < tst.holders ? tv.nholders : tst.holders;
		tv.nrows = tv.nrows < tst.rows ? tv.nrows : tst.rows;
		tv.ngroups = tv.ngroups < tst.groups ? tv.ngroups : tst.groups;
	}
	key(&w, "gpus");
	lit(&w, "[");
	bool first = true;
	for (int i = 0; i < n; i++) {
		if (bus_read(bus, i, snap) != 0)
			continue;
		if (!first)
			lit(&w, ",");
		first = false;
		render_gpu(&w, snap, al, nal, &tv);
	}
	lit(&w, "]}}\n");
	free(tv.rows);
	free(tv.groups);
	free(tv.holders);
	free(al);
	free(snap);
	if (out->data)
		out->data[out->len] = '\0';
	if (!w.rc && out->failed)
		w.rc = GPULSE_ELIMIT;
	return w.rc;
}
