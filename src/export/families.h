/* The registry of gpulsed's own families (the daemon, the collector, NVML
 * calls, HTTP, configuration, storage, queries, rule groups, alerts and
 * their delivery, the process): each declared once
 * here, with its name, type, help and label names, and emitted through a
 * metric sink (common/metric.h) by export/prom.c, so /metrics and the
 * store take them from the same calls. The per-GPU fields have their
 * own table (collect/fields.h); the families still rendered as text only
 * (per-GPU identity and state, processes, attribution, tenants, MIG,
 * and, outside prom.c, profiling, remote write, systemd, benchmarks,
 * evidence)
 * reach the store through the self-scrape's parse (daemon/selfscrape.h).
 *
 * X(ID, name, KIND, help, LABELS): KIND one of GAUGE, COUNTER, HISTOGRAM,
 * INFO; LABELS one of MF_L0, MF_L1(a), MF_L2(a, b). */
#ifndef GPULSE_FAMILIES_H
#define GPULSE_FAMILIES_H

#include "common/metric.h"

#define MF_L0 ((const char *const[]){NULL})
#define MF_L1(a) ((const char *const[]){a, NULL})
#define MF_L2(a, b) ((const char *const[]){a, b, NULL})

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

#define MF_ENUM(id, name, kind, help, labels) MF_##id,
enum metric_family_id { GPULSE_DAEMON_FAMILIES(MF_ENUM) MF_COUNT };
#undef MF_ENUM

/* The table, indexed by enum metric_family_id (export/prom.c). */
extern const struct metric_family metric_families[MF_COUNT];

#endif
