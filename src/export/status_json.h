/* The daemon's status as JSON, in the Prometheus HTTP API envelope
 * ({"status":"success","data":{...}}): mode, and for every GPU its
 * identity, health, latest valid values, throttle reasons, processes and
 * event counts. Served at /api/v1/status and read by `gpulse status` and
 * `gpulse top`. */
#ifndef GPULSE_STATUS_JSON_H
#define GPULSE_STATUS_JSON_H

#include "common/buf.h"
#include "collect/bus.h"
#include "export/selfstats.h"

/* Append the status document to `out`. `self` may be NULL (mode "none").
 *
 * data: mode, detail, replay_speed, start_time (Unix seconds), gpus[].
 * Each GPU: gpu, uuid, model, pci_bus_id, serial, driver_version,
 * cuda_version, architecture, compute_capability ("9.0", "" unknown),
 * mig_mode (enabled|disabled|unknown), source, health (up|stale|lost),
 * health_reason, health_since, max_sm_clock_hz, max_mem_clock_hz,
 * pcie_max_gen, pcie_max_width, gpm_supported, sample_time {fast, normal,
 * slow} (Unix seconds, null before the tier's first sample), fields
 * {field_key: value} with valid fields only, stale_fields [key...],
 * throttle_reasons [label...] (null when unreadable), processes [{pid,
 * comm, used_bytes, sm_ratio, mem_ratio}] (null for what was not read),
 * processes_dropped, xid [{code, count}], xid_other, ecc_events
 * {single_bit, double_bit}, lost_total, health_score (null before the
 * first verdict, else {score, drain, reason, window_s, reasons [{reason,
 * penalty, drain, evidence}]}: src/diagnose/health.h); tenants [...],
 * workloads [...] and bottleneck_owner, the activity split per process
 * and per owner (render_tenants in status_json.c,
 * docs/internals/attribution.md).
 *
 * Numbers that JSON cannot hold (NaN, infinities) are written as null;
 * strings are made valid UTF-8. Returns 0, or GPULSE_ELIMIT /
 * GPULSE_ENOMEM when `out` could not hold it all. */
int status_json_render(struct buf *out, struct bus *bus, const struct self_stats *self);

#endif
