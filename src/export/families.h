/* The registry of gpulsed's own families (the daemon, the collector, NVML
 * calls, HTTP, configuration, storage, queries, rule groups, alerts and
 * their delivery, the process): each declared once
 * here, with its name, type, help and label names, and emitted through a
 * metric sink (common/metric.h) by export/prom.c, so /metrics and the
 * store take them from the same calls: the per-GPU ones (identity, state,
 * topology, health, events, processes, attribution, tenants, MIG) and
 * the daemon's. The per-GPU fields have their own table
 * (collect/fields.h) and are stored by ingest, not the self-scrape; the
 * modules outside prom.c (profiling, remote write, systemd, benchmarks,
 * evidence) declare theirs and emit to the same sink
 * (selfstats.h, profile_metrics).
 *
 * X(ID, name, KIND, help, LABELS): KIND one of GAUGE, COUNTER, HISTOGRAM,
 * INFO; LABELS one of MF_L0, MF_L1(a), MF_L2(a, b), MF_GPU, MF_GPUL(...).
 * A sample may leave a label out (its value NULL): a label list names
 * every label a sample may carry, in the order samples carry them. */
#ifndef GPULSE_FAMILIES_H
#define GPULSE_FAMILIES_H

#include "common/metric.h"

#define MF_L0 ((const char *const[]){NULL})
#define MF_L1(a) ((const char *const[]){a, NULL})
#define MF_L2(a, b) ((const char *const[]){a, b, NULL})
/* A per-GPU family: the GPU's labels (gpu, uuid, model, and source for a
 * replayed GPU: collect/sample.h, gpu_source_label), then its own. */
#define MF_GPU_BASE "gpu", "uuid", "model", "source"
#define MF_GPU ((const char *const[]){MF_GPU_BASE, NULL})
#define MF_GPUL(...) ((const char *const[]){MF_GPU_BASE, __VA_ARGS__, NULL})
#define MF_GPU_BASE_LABELS 4
/* A process's owner (attrib/owner.h, enum owner_field's order and names);
 * each only where known and chosen. */
#define MF_OWNER "cgroup", "runtime", "container_id", "pod_uid", "pod", "namespace", \
	"container", "job", "job_user", "user"
/* An allocation's holder: a Slurm job or a pod (attrib/attrib.h). */
#define MF_HOLDER "job", "job_user", "pod", "namespace"
#define MF_MIG "gpu_instance", "compute_instance", "profile", "mig_uuid"

#define GPULSE_DAEMON_FAMILIES(X)                                                                  \
	X(BUILD_INFO, "gpulse_build_info", INFO, "Build of gpulsed; value 1.", MF_L1("version"))     \
	X(MODE_INFO, "gpulse_mode_info", INFO,                                                     \
	  "Where the GPU data comes from (nvml, replay or none) and why; value 1.",                 \
	  MF_L2("mode", "detail"))                                                                  \
	X(START_TIME, "gpulse_start_time_seconds", GAUGE,                                          \
	  "Time gpulsed started, in seconds since the Unix epoch.", MF_L0)                          \
	X(GPUS, "gpulse_gpus", GAUGE, "GPUs attached to the daemon.", MF_L0)                       \
	X(GPUS_STALE, "gpulse_gpus_stale", GAUGE, "GPUs whose values are late or stuck.", MF_L0)   \
	X(LANES, "gpulse_collector_lanes", GAUGE, "Collector lanes (sampling threads) alive.", MF_L0) \
	X(LANES_STARTED, "gpulse_collector_lanes_started_total", COUNTER,                          \
	  "Collector lanes started, one more after each stall.", MF_L0)                             \
	X(STALLS, "gpulse_collector_stalls_total", COUNTER,                                        \
	  "NVML calls seen stuck past their deadline.", MF_L0)                                      \
	X(HANDOFFS, "gpulse_collector_handoffs_total", COUNTER,                                    \
	  "NVML calls that ran past half a fast period, so the other GPUs moved to a new lane.",   \
	  MF_L0)                                                                                    \
	X(REDISCOVERIES, "gpulse_collector_rediscoveries_total", COUNTER,                          \
	  "GPUs found again after being lost.", MF_L0)                                              \
	X(SWEEPS, "gpulse_collector_sweeps_total", COUNTER, "Tier sweeps over all GPUs completed.", \
	  MF_L1("tier"))                                                                            \
	X(ADAPTIVE_READS, "gpulse_collector_adaptive_reads_total", COUNTER,                        \
	  "Sweeps that made an adaptive group's read (at its floor or, while the GPU moves, its "  \
	  "ceiling), over all GPUs.",                                                               \
	  MF_L1("group"))                                                                           \
	X(ADAPTIVE_SKIPS, "gpulse_collector_adaptive_skips_total", COUNTER,                        \
	  "Sweeps that left an adaptive group unread (steady GPU, floor not reached), over all "   \
	  "GPUs.",                                                                                  \
	  MF_L1("group"))                                                                           \
	X(MOVES, "gpulse_collector_moves_total", COUNTER,                                          \
	  "Times a GPU's reads went to their ceiling, by cause.", MF_L1("cause"))                   \
	X(GPUS_MOVING, "gpulse_collector_gpus_moving", GAUGE,                                      \
	  "GPUs whose reads are at their ceiling now (moving, or raised by an alert).", MF_L0)      \
	X(EVENTS, "gpulse_events_total", COUNTER, "XID and ECC events received from NVML.", MF_L0) \
	X(EVENT_ERRORS, "gpulse_event_errors_total", COUNTER, "NVML event waits that failed.",     \
	  MF_L0)                                                                                    \
	X(NVML_CALLS, "gpulse_nvml_calls_total", COUNTER, "NVML calls made, by function.",         \
	  MF_L1("call"))                                                                            \
	X(NVML_ERRORS, "gpulse_nvml_errors_total", COUNTER,                                        \
	  "NVML calls that failed, by function and NVML return code.", MF_L2("call", "error"))      \
	X(NVML_DURATION, "gpulse_nvml_call_duration_seconds", HISTOGRAM,                           \
	  "Time NVML calls took, by function.", MF_L1("call"))                                      \
	X(SCRAPES, "gpulse_scrapes_total", COUNTER, "Renders of /metrics.", MF_L0)                 \
	X(SCRAPE_DURATION, "gpulse_scrape_duration_seconds", GAUGE,                                \
	  "Time the previous render of /metrics took.", MF_L0)                                      \
	X(HTTP_REQUESTS, "gpulse_http_requests_total", COUNTER, "HTTP requests received.", MF_L0)  \
	X(HTTP_REJECTED, "gpulse_http_rejected_total", COUNTER,                                    \
	  "HTTP requests refused (over a limit, not allowed, or unauthorized).", MF_L0)             \
	X(HTTP_SHED, "gpulse_http_shed_connections_total", COUNTER,                                \
	  "HTTP connections closed or refused to keep /metrics answering, by reason.",              \
	  MF_L1("reason"))                                                                          \
	X(HTTP_DENIED, "gpulse_http_denied_total", COUNTER,                                        \
	  "HTTP requests refused by authentication, authorization, client certificates or rate "  \
	  "limits, by reason.",                                                                     \
	  MF_L1("reason"))                                                                          \
	X(RELOADS, "gpulse_config_reloads_total", COUNTER, "Configuration reloads, by result.",    \
	  MF_L1("result"))                                                                          \
	X(RELOAD_OK, "gpulse_config_last_reload_successful", GAUGE,                                \
	  "1 if the last configuration reload succeeded.", MF_L0)                                   \
	X(RELOAD_TIME, "gpulse_config_last_reload_timestamp_seconds", GAUGE,                       \
	  "Time of the last configuration reload, in seconds since the Unix epoch.", MF_L0)         \
	X(STORAGE_AVAILABLE, "gpulse_storage_available", GAUGE,                                    \
	  "1 when the store is open and writable; 0 while a disk failure keeps it shut or its "    \
	  "file cannot be written (retried).",                                                      \
	  MF_L0)                                                                                    \
	X(STORAGE_OPEN_ATTEMPTS, "gpulse_storage_open_attempts_total", COUNTER,                    \
	  "Attempts to open the store, the first at start included.", MF_L0)                        \
	X(STORAGE_OPEN_FAILURES, "gpulse_storage_open_failures_total", COUNTER,                    \
	  "Attempts to open the store that failed.", MF_L0)                                         \
	X(STORAGE_ERRORS, "gpulse_storage_errors_total", COUNTER,                                  \
	  "Store operations that failed (flushes, record writes).", MF_L0)                          \
	X(STORAGE_APPENDED, "gpulse_storage_samples_appended_total", COUNTER,                      \
	  "Samples appended to the store.", MF_L0)                                                  \
	X(STORAGE_DROPPED, "gpulse_storage_samples_dropped_total", COUNTER,                        \
	  "Samples the store dropped (out of order, or over the head memory bound).", MF_L0)        \
	X(STORAGE_SERIES, "gpulse_storage_series", GAUGE, "Series in the store.", MF_L0)           \
	X(STORAGE_HEAD_BYTES, "gpulse_storage_head_bytes", GAUGE,                                  \
	  "Memory held by the store's in-memory head.", MF_L0)                                      \
	X(STORAGE_DB_BYTES, "gpulse_storage_db_bytes", GAUGE,                                      \
	  "Size of the database file and its write-ahead log.", MF_L0)                              \
	X(STORAGE_CORRUPT, "gpulse_storage_corrupt_chunks_total", COUNTER,                         \
	  "Damaged chunks and rollup blocks (checksum mismatch, undecodable) that reads skipped, " \
	  "each counted once.",                                                                     \
	  MF_L0)                                                                                    \
	X(STORAGE_OOO, "gpulse_storage_samples_out_of_order_total", COUNTER,                       \
	  "Samples stored though older than their series' newest (the wall clock stepped back), " \
	  "within the store's window.",                                                             \
	  MF_L0)                                                                                    \
	X(CLOCK_STEPS, "gpulse_clock_steps_total", COUNTER,                                        \
	  "Steps of the wall clock (over 1 s) seen by the store, each also logged.", MF_L0)         \
	X(STORAGE_FILE_LOST, "gpulse_storage_file_lost_total", COUNTER,                            \
	  "Times the store's file, -wal or -shm was found deleted or replaced under the running "  \
	  "store.",                                                                                 \
	  MF_L0)                                                                                    \
	X(SELF_SCRAPE_SERIES, "gpulse_storage_self_scrape_series", GAUGE,                          \
	  "Series of /metrics that only the store's own scrape stores (info, per-process, "        \
	  "self-metrics).",                                                                         \
	  MF_L0)                                                                                    \
	X(SELF_SCRAPE_SAMPLES, "gpulse_storage_self_scrape_samples_total", COUNTER,                \
	  "Samples the store's scrape of /metrics appended.", MF_L0)                                \
	X(SELF_SCRAPE_REFUSED, "gpulse_storage_self_scrape_series_refused_total", COUNTER,         \
	  "Series the store's scrape of /metrics refused (over its bound of 20000, or a label "    \
	  "set the store refused), each time seen.",                                                \
	  MF_L0)                                                                                    \
	X(QUERIES_RUNNING, "gpulse_queries_running", GAUGE,                                        \
	  "API queries being evaluated now (at most query.max_concurrency).", MF_L0)                \
	X(QUERIES_QUEUED, "gpulse_queries_queued", GAUGE,                                          \
	  "API queries waiting for a free query thread.", MF_L0)                                    \
	X(QUERIES_STARTED, "gpulse_queries_total", COUNTER, "API queries started on a query thread.", \
	  MF_L0)                                                                                    \
	X(QUERIES_REJECTED, "gpulse_queries_rejected_total", COUNTER,                              \
	  "API queries refused with 503 unavailable: every query thread busy, the queue full.",    \
	  MF_L0)                                                                                    \
	X(QUERIES_TIMED_OUT, "gpulse_queries_timed_out_total", COUNTER,                            \
	  "API queries stopped at query.timeout (503 timeout).", MF_L0)                             \
	X(QUERIES_CANCELLED, "gpulse_queries_cancelled_total", COUNTER,                            \
	  "API queries stopped, or dropped before they ran, because the client hung up.", MF_L0)    \
	X(RULE_DURATION, "gpulse_rule_group_last_duration_seconds", GAUGE,                         \
	  "How long the last evaluation of the rule group took.", MF_L1("rule_group"))              \
	X(RULE_EVALUATIONS, "gpulse_rule_evaluations_total", COUNTER, "Rule evaluations, by group.", \
	  MF_L1("rule_group"))                                                                      \
	X(RULE_FAILURES, "gpulse_rule_evaluation_failures_total", COUNTER,                         \
	  "Rule evaluations that failed, by group.", MF_L1("rule_group"))                           \
	X(ALERTS, "gpulse_alerts", GAUGE, "Alerts by state (held: firing, held by flap detection).", \
	  MF_L1("state"))                                                                           \
	X(ALERT_NOTIFICATIONS, "gpulse_alert_notifications_total", COUNTER,                        \
	  "Alert notices (firing and resolved) handed to delivery.", MF_L0)                         \
	X(ALERT_FLAPS_HELD, "gpulse_alert_flaps_held_total", COUNTER,                              \
	  "Times flap detection held a toggling alert firing.", MF_L0)                              \
	X(ALERTS_RESTORED, "gpulse_alerts_restored_total", COUNTER,                                \
	  "Alerts restored from the store when the rule engine started.", MF_L0)                    \
	X(ALERT_PERSIST_ERRORS, "gpulse_alert_persist_errors_total", COUNTER,                      \
	  "Alert states that could not be written to the store.", MF_L0)                           \
	X(NOTIFY_SENT, "gpulse_notifications_sent_total", COUNTER, "Alerts delivered, by receiver.", \
	  MF_L2("receiver", "type"))                                                                \
	X(NOTIFY_ERRORS, "gpulse_notifications_errors_total", COUNTER,                             \
	  "Alerts in delivery attempts that failed, by receiver.", MF_L2("receiver", "type"))       \
	X(NOTIFY_DROPPED, "gpulse_notifications_dropped_total", COUNTER,                           \
	  "Alerts given up, by receiver: refused by it, or dropped over the queue bound.",          \
	  MF_L2("receiver", "type"))                                                                \
	X(NOTIFY_PENDING_BATCHES, "gpulse_notifications_pending_batches", GAUGE,                   \
	  "Batches waiting for the receiver.", MF_L2("receiver", "type"))                           \
	X(NOTIFY_PENDING_BYTES, "gpulse_notifications_pending_bytes", GAUGE,                       \
	  "Bytes of batches waiting for the receiver.", MF_L2("receiver", "type"))                  \
	X(NOTIFY_LATENCY, "gpulse_notifications_latency_seconds", HISTOGRAM,                       \
	  "Time from the rule engine handing an alert over to the receiver accepting it.",          \
	  MF_L2("receiver", "type"))                                                                \
	X(NOTIFY_QUEUE_LENGTH, "gpulse_notifications_queue_length", GAUGE,                         \
	  "Alert notices waiting for the dispatcher.", MF_L0)                                       \
	X(NOTIFY_QUEUE_CAPACITY, "gpulse_notifications_queue_capacity", GAUGE,                     \
	  "Alert notices the dispatcher's queue holds.", MF_L0)                                     \
	X(NOTIFY_QUEUE_DROPPED, "gpulse_notifications_queue_dropped_total", COUNTER,               \
	  "Alert notices dropped because the dispatcher's queue was full.", MF_L0)                  \
	X(NOTIFY_BACKLOG_BATCHES, "gpulse_notifications_backlog_batches", GAUGE,                   \
	  "Batches waiting for any receiver (memory and disk).", MF_L0)                             \
	X(NOTIFY_BACKLOG_BYTES, "gpulse_notifications_backlog_bytes", GAUGE,                       \
	  "Bytes of batches waiting for any receiver.", MF_L0)                                      \
	X(NOTIFY_BACKLOG_MAX_BATCHES, "gpulse_notifications_backlog_max_batches", GAUGE,           \
	  "The bound on waiting batches.", MF_L0)                                                   \
	X(NOTIFY_BACKLOG_MAX_BYTES, "gpulse_notifications_backlog_max_bytes", GAUGE,               \
	  "The bound on bytes of waiting batches.", MF_L0)                                          \
	X(NOTIFY_DISK_ERRORS, "gpulse_notifications_queue_disk_errors_total", COUNTER,             \
	  "Queue files that could not be written, read or removed.", MF_L0)                         \
	X(NOTIFY_INHIBITED, "gpulse_notifications_inhibited_total", COUNTER,                       \
	  "Alerts left out of notifications by inhibit rules.", MF_L0)                              \
	X(NOTIFY_ALERTMANAGERS, "gpulse_notifications_alertmanagers_discovered", GAUGE,            \
	  "Alertmanagers gpulsed sends to.", MF_L0)                                                 \
	X(PROCESS_CPU, "process_cpu_seconds_total", COUNTER,                                       \
	  "Total user and system CPU time spent in seconds.", MF_L0)                                \
	X(PROCESS_RSS, "process_resident_memory_bytes", GAUGE, "Resident memory size in bytes.",  \
	  MF_L0)                                                                                    \
	X(PROCESS_VSZ, "process_virtual_memory_bytes", GAUGE, "Virtual memory size in bytes.",    \
	  MF_L0)                                                                                    \
	X(PROCESS_START, "process_start_time_seconds", GAUGE,                                      \
	  "Start time of the process since unix epoch in seconds.", MF_L0)

/* Per GPU (export/prom.c), in /metrics order; the fields' families
 * (collect/fields.h) come between the topology and the throttle. */
#define GPULSE_GPU_FAMILIES(X)                                                                     \
	X(GPU_UP, "gpulse_gpu_up", GAUGE,                                                          \
	  "1 while the GPU answers; 0 when it is lost or a call to it is stuck.", MF_GPU)           \
	X(GPU_STALE, "gpulse_gpu_stale", GAUGE,                                                    \
	  "1 while the GPU's values are late (a stuck call or a late tier) and left out.", MF_GPU)  \
	/* source: after mig_mode for a GPU whose labels do not carry it */                         \
	X(GPU_INFO, "gpulse_gpu_info", INFO, "Identity of the GPU; value 1.",                      \
	  MF_GPUL("pci_bus_id", "serial", "driver_version", "cuda_version", "architecture",         \
		  "compute_capability", "mig_mode", "source", "hostname"))                          \
	X(GPU_MAX_SM_CLOCK, "gpulse_gpu_max_sm_clock_hertz", GAUGE,                                \
	  "Highest SM clock the GPU supports.", MF_GPU)                                             \
	X(GPU_MAX_MEM_CLOCK, "gpulse_gpu_max_memory_clock_hertz", GAUGE,                           \
	  "Highest memory clock the GPU supports.", MF_GPU)                                         \
	X(GPU_PCIE_MAX_GEN, "gpulse_gpu_pcie_link_max_generation", GAUGE,                          \
	  "Highest PCIe generation of the link.", MF_GPU)                                           \
	X(GPU_PCIE_MAX_WIDTH, "gpulse_gpu_pcie_link_max_width", GAUGE,                             \
	  "Widest PCIe link the GPU supports (lanes).", MF_GPU)                                     \
	X(GPU_NVLINKS, "gpulse_gpu_nvlinks", GAUGE,                                                \
	  "NVLinks the GPU has (NVML's link count; absent when NVML knows none).", MF_GPU)          \
	X(GPU_TOPOLOGY, "gpulse_gpu_topology_info", INFO,                                          \
	  "How the GPU reaches peer_gpu over PCIe: their closest common ancestor (level: "         \
	  "internal, single or multiple PCIe switches, hostbridge, node, system); value 1.",        \
	  MF_GPUL("peer_gpu", "level"))                                                             \
	X(GPU_NVLINK_PEER, "gpulse_gpu_nvlink_peer_links", GAUGE,                                  \
	  "NVLinks that go straight from the GPU to peer_gpu (not through an NVSwitch).",          \
	  MF_GPUL("peer_gpu"))                                                                      \
	X(GPU_THROTTLE, "gpulse_gpu_throttle_active", GAUGE,                                       \
	  "1 while the clocks are held down for this reason (NVML clock event reasons).",          \
	  MF_GPUL("reason"))                                                                        \
	X(GPU_BOTTLENECK, "gpulse_gpu_bottleneck", GAUGE,                                          \
	  "1 for what limits the GPU in the last complete diagnosis window, 0 for the other "      \
	  "classes (docs/DIAGNOSIS.md).",                                                           \
	  MF_GPUL("class"))                                                                         \
	X(GPU_FINDING, "gpulse_gpu_diagnosis_finding", GAUGE,                                      \
	  "1 while the last complete diagnosis window carries this finding, 0 otherwise.",         \
	  MF_GPUL("finding"))                                                                       \
	X(GPU_HEALTH_SCORE, "gpulse_gpu_health_score", GAUGE,                                      \
	  "Health score from the GPU's own error history: 100 healthy, 0 worst "                   \
	  "(docs/internals/health.md).",                                                            \
	  MF_GPU)                                                                                   \
	X(GPU_HEALTH_PENALTY, "gpulse_gpu_health_penalty", GAUGE,                                  \
	  "Points of the health score each reason takes off (0 when it saw nothing).",             \
	  MF_GPUL("reason"))                                                                        \
	X(GPU_HEALTH_DRAIN, "gpulse_gpu_health_drain", GAUGE,                                      \
	  "1 while the health score says to take the GPU out of service, with the reason "         \
	  "that weighs most; 0 with reason=\"none\" otherwise.",                                    \
	  MF_GPUL("reason"))                                                                        \
	X(ANOMALY_SCORE, "gpulse_anomaly_score", GAUGE,                                            \
	  "How far the metric's last second is from its learned normal (robust z-score; "         \
	  "docs/internals/anomaly.md).",                                                            \
	  MF_GPUL("metric"))                                                                        \
	X(ANOMALY_TICKS, "gpulse_anomaly_ticks_total", COUNTER,                                    \
	  "Values the anomaly detector judged (one per GPU, metric and step).", MF_L0)              \
	X(ANOMALY_STORED, "gpulse_anomaly_scores_stored_total", COUNTER,                           \
	  "Anomaly scores appended to the store.", MF_L0)                                           \
	X(ANOMALY_STORE_ERRORS, "gpulse_anomaly_store_errors_total", COUNTER,                      \
	  "Anomaly score series the store refused, or appends it dropped.", MF_L0)                  \
	X(ANOMALY_MODEL_BYTES, "gpulse_anomaly_model_bytes", GAUGE,                                \
	  "Memory held by the anomaly detector's baselines.", MF_L0)                                \
	X(GPU_XID, "gpulse_gpu_xid_errors_total", COUNTER,                                         \
	  "XID errors the driver reported, by code (\"other\" once the codes kept are full).",     \
	  MF_GPUL("xid"))                                                                           \
	X(GPU_LAST_XID, "gpulse_gpu_last_xid", GAUGE,                                              \
	  "Code of the last XID error the driver reported since gpulsed started; 0 while none.",   \
	  MF_GPU)                                                                                   \
	X(GPU_ECC_EVENTS, "gpulse_gpu_ecc_events_total", COUNTER,                                  \
	  "ECC error events received from the driver, by kind.", MF_GPUL("type"))                   \
	X(GPU_LOST, "gpulse_gpu_lost_total", COUNTER, "Times the GPU was found lost.", MF_GPU)     \
	X(PROC_MEMORY, "gpulse_process_gpu_memory_bytes", GAUGE, "Device memory a process uses.", \
	  MF_GPUL("pid", "comm", "gpu_instance", MF_OWNER))                                         \
	X(PROC_SM, "gpulse_process_sm_utilization_ratio", GAUGE,                                   \
	  "Fraction of time a process's kernels ran on the SMs.",                                  \
	  MF_GPUL("pid", "comm", "gpu_instance", MF_OWNER))                                         \
	X(PROC_MEMUTIL, "gpulse_process_memory_utilization_ratio", GAUGE,                          \
	  "Fraction of time a process read or wrote device memory.",                               \
	  MF_GPUL("pid", "comm", "gpu_instance", MF_OWNER))                                         \
	X(GPU_PROCS_DROPPED, "gpulse_gpu_processes_dropped", GAUGE,                                \
	  "Processes beyond the per-GPU limit, left out of the process metrics.", MF_GPU)           \
	X(GPU_SAMPLES, "gpulse_samples_total", COUNTER,                                            \
	  "Tier updates received from the collector for the GPU.", MF_GPUL("tier"))                 \
	X(PROC_INFO, "gpulse_process_info", INFO,                                                  \
	  "Who a GPU process belongs to: cgroup, container, pod, Slurm job, user.",                \
	  MF_GPUL("pid", MF_OWNER))                                                                 \
	X(GPU_ALLOCATION, "gpulse_gpu_allocation_info", INFO,                                      \
	  "A GPU (or a time-slice of it) that the kubelet's pod-resources API says a pod's "       \
	  "container holds.",                                                                       \
	  MF_GPUL(MF_HOLDER, "container", "resource", "device_id"))                                \
	X(GPU_ALLOCATED_IDLE, "gpulse_gpu_allocated_idle", GAUGE,                                  \
	  "1 while a pod holds the GPU and none of its processes runs on it (allocated but "       \
	  "idle), else 0.",                                                                         \
	  MF_GPUL(MF_HOLDER, "container"))                                                          \
	X(ATTRIB_RESOLVED, "gpulse_attribution_processes_resolved_total", COUNTER,                 \
	  "Processes whose owner was read from /proc (once each: later lookups hit the cache).",   \
	  MF_L0)                                                                                    \
	X(ATTRIB_HITS, "gpulse_attribution_cache_hits_total", COUNTER,                             \
	  "Owner lookups answered from the cache.", MF_L0)                                          \
	X(ATTRIB_EVICTIONS, "gpulse_attribution_cache_evictions_total", COUNTER,                   \
	  "Cached owners pushed out by the cache's bound.", MF_L0)                                  \
	X(ATTRIB_ERRORS, "gpulse_attribution_errors_total", COUNTER,                               \
	  "Processes whose owner could not be read, by what failed.", MF_L1("what"))                \
	X(ATTRIB_TRUNCATED, "gpulse_attribution_truncated_total", COUNTER,                         \
	  "Attribution values cut to their bound, by what.", MF_L1("what"))                         \
	X(SLURM_JOBS, "gpulse_slurm_jobs_with_gpus", GAUGE,                                        \
	  "Slurm jobs whose cgroup device rules allow some GPU (cgroup v1), at the last scan.",    \
	  MF_L0)                                                                                    \
	X(SLURM_SCAN_ERRORS, "gpulse_slurm_scan_errors_total", COUNTER,                            \
	  "Slurm job devices.list files that could not be read.", MF_L0)                            \
	X(PODRES_UP, "gpulse_pod_resources_up", GAUGE,                                             \
	  "1 when the last List call to the kubelet's pod-resources socket answered.", MF_L0)       \
	X(PODRES_REFRESHES, "gpulse_pod_resources_refreshes_total", COUNTER,                       \
	  "List calls to the kubelet's pod-resources socket, by result.", MF_L1("result"))          \
	X(PODRES_ALLOCATIONS, "gpulse_pod_resources_allocations", GAUGE,                           \
	  "Device allocations the last List answer held.", MF_L0)                                   \
	X(PODRES_DROPPED, "gpulse_pod_resources_allocations_dropped_total", COUNTER,               \
	  "Device allocations beyond the bound kept, left out.", MF_L0)                             \
	X(PROC_SM_ACTIVE, "gpulse_process_sm_active_ratio", GAUGE, MF_HELP_SPLIT_SM,               \
	  MF_GPUL("pid", "comm", "gpu_instance", "source", MF_OWNER))                               \
	X(PROC_TENSOR_ACTIVE, "gpulse_process_tensor_active_ratio", GAUGE, MF_HELP_SPLIT_TENSOR,   \
	  MF_GPUL("pid", "comm", "gpu_instance", "source", MF_OWNER))                               \
	X(PROC_DRAM, "gpulse_process_dram_bandwidth_ratio", GAUGE, MF_HELP_SPLIT_DRAM,             \
	  MF_GPUL("pid", "comm", "gpu_instance", "source", MF_OWNER))                               \
	X(PROC_GPU_TIME, "gpulse_process_gpu_time_seconds_total", COUNTER,                         \
	  "GPU time of a process's kernels on this GPU while gpulsed watched (the library's "      \
	  "kernel time, else NVML's per-process SM samples).",                                     \
	  MF_GPUL("pid", "comm", "gpu_instance", MF_OWNER))                                         \
	X(WORKLOAD_SM_ACTIVE, "gpulse_workload_sm_active_ratio", GAUGE, MF_HELP_SPLIT_SM,          \
	  MF_GPUL("gpu_instance", "source", MF_OWNER))                                              \
	X(WORKLOAD_TENSOR_ACTIVE, "gpulse_workload_tensor_active_ratio", GAUGE,                    \
	  MF_HELP_SPLIT_TENSOR, MF_GPUL("gpu_instance", "source", MF_OWNER))                        \
	X(WORKLOAD_DRAM, "gpulse_workload_dram_bandwidth_ratio", GAUGE, MF_HELP_SPLIT_DRAM,        \
	  MF_GPUL("gpu_instance", "source", MF_OWNER))                                              \
	X(WORKLOAD_GPU_TIME, "gpulse_workload_gpu_time_seconds_total", COUNTER,                    \
	  "GPU time of the processes of one owner (the attribution labels) on this GPU.",          \
	  MF_GPUL("gpu_instance", MF_OWNER))                                                        \
	X(WORKLOAD_IDLE, "gpulse_workload_allocated_idle", GAUGE,                                  \
	  "1 while a pod or job holds the GPU (an allocation, or a process of its on it) and its " \
	  "part of the GPU's SM activity has stayed under attribution.idle_sm_ratio for "          \
	  "attribution.idle_window, else 0.",                                                       \
	  MF_GPUL(MF_HOLDER))                                                                       \
	X(WORKLOAD_IDLE_FOR, "gpulse_workload_idle_for_seconds", GAUGE,                            \
	  "How long the workload's part of the GPU's SM activity has stayed under "                \
	  "attribution.idle_sm_ratio (0 while over it).",                                           \
	  MF_GPUL(MF_HOLDER))                                                                       \
	X(WORKLOAD_HOLDERS_DROPPED, "gpulse_workload_holders_dropped_total", COUNTER,              \
	  "Judgements of allocated-but-idle left out by the bound on (GPU, workload) rows.", MF_L0) \
	X(PROC_ACTIVITY_ROWS, "gpulse_process_activity_rows", GAUGE,                               \
	  "Process rows of the per-process activity split (bounded; the rest fold into "           \
	  "\"other\").",                                                                            \
	  MF_L0)                                                                                    \
	X(PROC_ACTIVITY_FOLDED, "gpulse_process_activity_folded_total", COUNTER,                   \
	  "Process-intervals folded into their GPU's \"other\" row by the row bound.", MF_L0)      \
	X(PROC_ACTIVITY_SPLIT, "gpulse_process_activity_split_seconds_total", COUNTER,             \
	  "Time gpulsed spent splitting GPU activity across processes.", MF_L0)                     \
	X(MIG_INFO, "gpulse_mig_info", INFO,                                                       \
	  "A MIG instance of the GPU: its GPU and compute instance IDs, profile and UUID.",        \
	  MF_GPUL(MF_MIG))                                                                          \
	X(MIG_MEM_USED, "gpulse_mig_memory_used_bytes", GAUGE,                                     \
	  "Device memory in use in the MIG instance.", MF_GPUL(MF_MIG))                             \
	X(MIG_MEM_TOTAL, "gpulse_mig_memory_total_bytes", GAUGE, "Device memory of the MIG instance.", \
	  MF_GPUL(MF_MIG))                                                                          \
	X(MIG_SM_ACTIVE, "gpulse_mig_sm_active_ratio", GAUGE,                                      \
	  "Fraction of the MIG instance's SMs' time with a warp resident (GPM).", MF_GPUL(MF_MIG))  \
	X(MIG_SM_OCCUPANCY, "gpulse_mig_sm_occupancy_ratio", GAUGE,                                \
	  "Warps resident on the MIG instance's SMs, of the most possible (GPM).",                 \
	  MF_GPUL(MF_MIG))                                                                          \
	X(MIG_TENSOR, "gpulse_mig_tensor_active_ratio", GAUGE,                                     \
	  "Fraction of the MIG instance's time its tensor cores were busy (GPM).", MF_GPUL(MF_MIG)) \
	X(MIG_DRAM, "gpulse_mig_dram_active_ratio", GAUGE,                                         \
	  "Fraction of the MIG instance's memory bandwidth in use (GPM).", MF_GPUL(MF_MIG))

/* The activity split's help, one per metric for the process and the
 * workload family alike. */
#define MF_HELP_SPLIT_SM                                                                           \
	"Its part of the GPU's SM activity (GPM SM active), apportioned by GPU time; the parts "   \
	"sum to the GPU's figure (an estimate: source says from what)."
#define MF_HELP_SPLIT_TENSOR                                                                       \
	"Its part of the GPU's tensor activity (GPM), apportioned by GPU time and kind of work; "  \
	"the parts sum to the GPU's figure (an estimate)."
#define MF_HELP_SPLIT_DRAM                                                                         \
	"Its part of the GPU's DRAM bandwidth (GPM), apportioned by GPU time and kind of work; "   \
	"the parts sum to the GPU's figure (an estimate)."

#define MF_ENUM(id, name, kind, help, labels) MF_##id,
enum metric_family_id {
	GPULSE_GPU_FAMILIES(MF_ENUM) GPULSE_DAEMON_FAMILIES(MF_ENUM) MF_COUNT
};
#undef MF_ENUM

/* The table, indexed by enum metric_family_id (export/prom.c). */
extern const struct metric_family metric_families[MF_COUNT];

#endif
