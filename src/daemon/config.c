/* The daemon's YAML configuration; see config.h and docs/CONFIG.md.
 *
 * libyaml's event API reads the file: it keeps the line and column of
 * every node, stops at the first problem, and never builds a tree, so a
 * hostile file costs no more than its size. One table (config_keys) says,
 * for every key, where its value lives in struct gpulse_config, its kind
 * and its range; the parser, config_validate and config_dump all walk it,
 * so a key added there is parsed, checked and printed.
 *
 * Why one file: config_keys and its three walks (parse, config_validate,
 * config_dump) are one table read three ways, and a key is added in one
 * place. The hand-written libyaml event walk (about 1,000 lines) is what
 * should shrink, onto rules/ytree.c's bounded tree (issue 35), not move to
 * another file. */
#include "daemon/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "common/clock.h"
#include "api/query.h"
#include "collect/collector.h"
#include "diagnose/diagnose.h"
#include "common/duration.h"
#include "http/http_server.h"
#include "alert/matcher.h"
#include "alert/notify.h"
#include "profile/profile_agg.h"
#include "profile/profile_server.h"
#include "wire/wire.h"
#include "common/redact.h"
#include "remote/relabel.h"
#include "remote/segq.h"
#include "common/status.h"
#include "common/str.h"
#include "common/token.h"
#include "attrib/tenants.h"
#include "daemon/evidence.h"

/* ---- the key table --------------------------------------------------- */

enum key_kind {
	KIND_SECTION,   /* a mapping of more keys */
	KIND_STRING,    /* char[size] */
	KIND_LISTEN,    /* char[size], "HOST:PORT" */
	KIND_DURATION,  /* int64_t nanoseconds */
	KIND_BOOL,      /* bool */
	KIND_UINT,      /* unsigned */
	KIND_DOUBLE,    /* double */
	KIND_LOG_LEVEL, /* enum log_level */
	KIND_PATH_LIST, /* char[n][CONFIG_PATH_LEN], a YAML list; "" ends it */
	KIND_STR_LIST,  /* char[size / elem][elem], a YAML list of strings; "" ends it */
	KIND_LABEL_MAP, /* char[n][2][elem], a mapping of label names to values */
	KIND_USER_MAP,  /* char[n][2][elem], HTTP Basic user names to bcrypt hashes */
	KIND_INHIBIT_RULES, /* struct config_inhibit_rule[n] (alerting.inhibit_rules) */
	KIND_REMOTE_WRITE,  /* struct config_remote_write[n] (remote_write) */
	KIND_RELABEL_LIST,  /* struct config_relabel[n] (write_relabel_configs) */
};

/* What the entries of a KIND_STR_LIST must be. */
enum item_check { ITEM_ANY, ITEM_LABEL_NAME, ITEM_GROUP_LABEL, ITEM_MATCHER, ITEM_HEADER,
		  ITEM_OWNER_FIELD,
		  ITEM_PATH /* a file path, resolved against the config file's folder */ };

/* What a string key that names a file asks of it. A relative value in the
 * file is resolved against the file's directory, made absolute, as
 * Prometheus resolves the files its configuration names (flags are the
 * caller's: they stay relative to the working directory). What must exist
 * is checked when a file is loaded (config_load_file), at the value's line,
 * so a typo is refused before anything starts; what gpulsed creates, or
 * others may create later, is only resolved. */
enum path_use {
	PATH_NONE,      /* not a path */
	PATH_READ,      /* read at start or reload: must be a readable file now */
	PATH_EXEC,      /* run without a shell: absolute (never resolved), executable now */
	PATH_PROGRAM,   /* a name PATH finds, or, holding a '/', a path: executable now */
	PATH_LIBRARY,   /* a name dlopen finds, or, holding a '/', a path; may come later */
	PATH_CREATED,   /* made by gpulsed (a store, a queue, a socket) */
	PATH_LATER,     /* made by others, maybe later (/proc, the kubelet's socket) */
};

/* Whether SIGHUP applies a key (docs/CONFIG.md's Reload column). A key
 * says nothing (INHERIT) to take its section's answer; the root is
 * RESTART, so a new key waits for a restart unless marked live. */
enum key_reload {
	RELOAD_INHERIT,
	RELOAD_RESTART,
	RELOAD_LIVE,
	RELOAD_RULES,   /* live for delivery, read by the rules only at start */
};

struct key_spec {
	const char *name;
	enum key_kind kind;
	enum key_reload reload;
	size_t offset;                  /* into struct gpulse_config */
	size_t size;                    /* of the member (string capacity) */
	double lo, hi;                  /* inclusive range; lo_open makes lo exclusive */
	bool lo_open;
	bool has_range;
	const struct key_spec *children; /* KIND_SECTION */
	int nchildren;
	size_t elem;                    /* KIND_STR_LIST, KIND_LABEL_MAP: one entry's capacity */
	enum item_check check;          /* KIND_STR_LIST */
	enum path_use path;             /* KIND_STRING that names a file */
};

#define MS (1e6)
#define SEC (1e9)
#define OFF(member) offsetof(struct gpulse_config, member)
#define SZ(member) sizeof(((struct gpulse_config *)0)->member)
#define LEAF_R(nm, kd, member, r) \
	{.name = nm, .kind = KIND_##kd, .offset = OFF(member), .size = SZ(member), .reload = r}
#define LEAF(nm, kd, member) LEAF_R(nm, kd, member, RELOAD_INHERIT)
#define RANGED_R(nm, kd, member, l, h, r) \
	{.name = nm, .kind = KIND_##kd, .offset = OFF(member), .size = SZ(member), \
	 .lo = (l), .hi = (h), .has_range = true, .reload = r}
#define RANGED(nm, kd, member, l, h) RANGED_R(nm, kd, member, l, h, RELOAD_INHERIT)
#define SECTION_R(nm, kids, r) \
	{.name = nm, .kind = KIND_SECTION, .children = kids, \
	 .nchildren = (int)(sizeof kids / sizeof kids[0]), .reload = r}
#define SECTION(nm, kids) SECTION_R(nm, kids, RELOAD_INHERIT)
#define PATHLEAF(nm, member, use) \
	{.name = nm, .kind = KIND_STRING, .offset = OFF(member), .size = SZ(member), .path = use}
#define STRLIST(nm, member, chk) \
	{.name = nm, .kind = KIND_STR_LIST, .offset = OFF(member), .size = SZ(member), \
	 .elem = SZ(member[0]), .check = chk}

static const struct key_spec sampling_keys[] = {
	RANGED_R("fast", DURATION, sampling.fast_ns, 10 * MS, 60 * SEC, RELOAD_LIVE),
	RANGED_R("normal", DURATION, sampling.normal_ns, 10 * MS, 3600 * SEC, RELOAD_LIVE),
	RANGED_R("slow", DURATION, sampling.slow_ns, 10 * MS, 86400 * SEC, RELOAD_LIVE),
	RANGED("call_deadline", DURATION, sampling.call_deadline_ns, 10 * MS, 60 * SEC),
	RANGED("rediscover", DURATION, sampling.rediscover_ns, 1 * SEC, 3600 * SEC),
	LEAF("per_process_utilization", BOOL, sampling.per_process_utilization),
	LEAF("gpm", BOOL, sampling.gpm),
	LEAF("events", BOOL, sampling.events),
	LEAF_R("adaptive", BOOL, sampling.adaptive, RELOAD_LIVE),
	RANGED_R("fast_floor", DURATION, sampling.fast_floor_ns, 10 * MS, 3600 * SEC, RELOAD_LIVE),
	RANGED_R("normal_floor", DURATION, sampling.normal_floor_ns, 10 * MS, 86400 * SEC, RELOAD_LIVE),
	RANGED_R("quiet", DURATION, sampling.quiet_ns, 0, 86400 * SEC, RELOAD_LIVE),
};

static const struct key_spec replay_keys[] = {
	PATHLEAF("file", replay.file, PATH_READ),
	{.name = "speed", .kind = KIND_DOUBLE, .offset = OFF(replay.speed), .size = SZ(replay.speed),
	 .lo = 0, .hi = 1000, .lo_open = true, .has_range = true},
	LEAF("loop", BOOL, replay.loop),
};

static const struct key_spec http_keys[] = {
	RANGED("max_connections", UINT, http.max_connections, 1, 10000),
	RANGED("threads", UINT, http.threads, 1, 64),
	RANGED("timeout", DURATION, http.timeout_ns, 1 * SEC, 3600 * SEC),
	RANGED("header_timeout", DURATION, http.header_timeout_ns, 100 * MS, 3600 * SEC),
	RANGED("max_connections_per_address", UINT, http.max_connections_per_address, 0, 10000),
	PATHLEAF("tls_cert_file", http.tls_cert_file, PATH_READ),
	PATHLEAF("tls_key_file", http.tls_key_file, PATH_READ),
	PATHLEAF("tls_client_ca_file", http.tls_client_ca_file, PATH_READ),
	PATHLEAF("auth_token_file", http.auth_token_file, PATH_READ),
	PATHLEAF("write_token_file", http.write_token_file, PATH_READ),
	RANGED("rate_limit", DOUBLE, http.rate_limit, 0, 1e6),
	RANGED("rate_limit_burst", UINT, http.rate_limit_burst, 0, 1000000),
	{.name = "basic_auth_users", .kind = KIND_USER_MAP, .offset = OFF(http.basic_auth_users),
	 .size = SZ(http.basic_auth_users), .elem = SZ(http.basic_auth_users[0][0])},
	LEAF("allow_insecure_remote", BOOL, http.allow_insecure_remote),
};

static const struct key_spec query_keys[] = {
	RANGED("timeout", DURATION, query.timeout_ns, 100 * MS, 86400 * SEC),
	RANGED("max_concurrency", UINT, query.max_concurrency, 1, 64),
};

static const struct key_spec diagnosis_keys[] = {
	RANGED("window", DURATION, diagnosis.window_ns, 1 * SEC, 3600 * SEC),
	RANGED("history", DURATION, diagnosis.history_ns, 10 * SEC, 86400 * SEC),
	{.name = "memory_pressure", .kind = KIND_DOUBLE, .offset = OFF(diagnosis.memory_pressure),
	 .size = SZ(diagnosis.memory_pressure), .lo = 0, .hi = 1, .lo_open = true, .has_range = true},
};

static const struct key_spec anomaly_keys[] = {
	LEAF("enabled", BOOL, anomaly.enabled),
	RANGED("step", DURATION, anomaly.step_ns, 100 * MS, 60 * SEC),
	RANGED("halflife", DURATION, anomaly.halflife_ns, 1 * SEC, 30 * 86400 * SEC),
	RANGED("season_halflife", DURATION, anomaly.season_halflife_ns, 3600 * SEC, 365 * 86400 * SEC),
	RANGED("warmup", DURATION, anomaly.warmup_ns, 0, 86400 * SEC),
	RANGED("season_buckets", UINT, anomaly.season_buckets, 0, 96),
};

static const struct key_spec evidence_keys[] = {
	LEAF("enabled", BOOL, evidence.enabled),
	STRLIST("alerts", evidence.alerts, ITEM_ANY),
	{.name = "anomaly_score", .kind = KIND_DOUBLE, .offset = OFF(evidence.anomaly_score),
	 .size = SZ(evidence.anomaly_score), .lo = 0, .hi = 1000, .has_range = true},
	RANGED("raise_for", DURATION, evidence.raise_for_ns, 1 * SEC, 86400 * SEC),
	RANGED("settle", DURATION, evidence.settle_ns, 0, 600 * SEC),
	RANGED("capture_seconds", UINT, evidence.capture_seconds, 0, 60),
	RANGED("per_gpu_per_hour", UINT, evidence.per_gpu_per_hour, 0, 64),
	RANGED("per_hour", UINT, evidence.per_hour, 0, 36000),
	RANGED("max_records", UINT, evidence.max_records, 1, 1024),
	RANGED("max_bytes_mib", UINT, evidence.max_bytes_mib, 1, 4096),
	RANGED("retention", DURATION, evidence.retention_ns, 60 * SEC, 3650 * 86400 * SEC),
	PATHLEAF("path", evidence.path, PATH_CREATED),
};

static const struct key_spec storage_keys[] = {
	PATHLEAF("path", storage.path, PATH_CREATED),
	RANGED("flush_interval", DURATION, storage.flush_interval_ns, 100 * MS, 3600 * SEC),
	RANGED("retention", DURATION, storage.retention_ns, 60 * SEC, 3650 * 86400 * SEC),
	RANGED("rollup_retention", DURATION, storage.rollup_retention_ns, 60 * SEC, 3650 * 86400 * SEC),
	RANGED("retry_interval", DURATION, storage.retry_interval_ns, 1 * SEC, 3600 * SEC),
};

static const struct key_spec alertmanagers_keys[] = {
	STRLIST("urls", alerting.alertmanagers.urls, ITEM_ANY),
	RANGED("timeout", DURATION, alerting.alertmanagers.timeout_ns, 100 * MS, 600 * SEC),
	PATHLEAF("bearer_token_file", alerting.alertmanagers.bearer_token_file, PATH_READ),
	LEAF("inhibit", BOOL, alerting.alertmanagers.inhibit),
};

static const struct key_spec webhooks_keys[] = {
	STRLIST("urls", alerting.webhooks.urls, ITEM_ANY),
	RANGED("timeout", DURATION, alerting.webhooks.timeout_ns, 100 * MS, 600 * SEC),
	PATHLEAF("bearer_token_file", alerting.webhooks.bearer_token_file, PATH_READ),
};

static const struct key_spec exec_keys[] = {
	PATHLEAF("path", alerting.exec.path, PATH_EXEC),
	STRLIST("args", alerting.exec.args, ITEM_ANY),
	RANGED("timeout", DURATION, alerting.exec.timeout_ns, 100 * MS, 600 * SEC),
};

static const struct key_spec queue_keys[] = {
	PATHLEAF("path", alerting.queue.path, PATH_CREATED),
	RANGED("max_bytes", UINT, alerting.queue.max_bytes, 65536, 4294967295.0),
	RANGED("max_batches", UINT, alerting.queue.max_batches, 1, 1000000),
};

static const struct key_spec alerting_keys[] = {
	LEAF_R("external_url", STRING, alerting.external_url, RELOAD_RULES),
	{.name = "external_labels", .kind = KIND_LABEL_MAP, .offset = OFF(alerting.external_labels),
	 .size = SZ(alerting.external_labels), .elem = SZ(alerting.external_labels[0][0]),
	 .reload = RELOAD_RULES},
	RANGED_R("resend_delay", DURATION, alerting.resend_delay_ns, 1 * SEC, 86400 * SEC,
		 RELOAD_RESTART),
	SECTION("alertmanagers", alertmanagers_keys),
	SECTION("webhooks", webhooks_keys),
	SECTION("exec", exec_keys),
	SECTION("queue", queue_keys),
	RANGED("retry_backoff", DURATION, alerting.retry_backoff_ns, 10 * MS, 3600 * SEC),
	RANGED("max_retry_backoff", DURATION, alerting.max_retry_backoff_ns, 10 * MS, 86400 * SEC),
	STRLIST("group_by", alerting.group_by, ITEM_GROUP_LABEL),
	RANGED("group_wait", DURATION, alerting.group_wait_ns, 0, 86400 * SEC),
	RANGED("group_interval", DURATION, alerting.group_interval_ns, 1 * SEC, 86400 * SEC),
	RANGED("repeat_interval", DURATION, alerting.repeat_interval_ns, 1 * SEC, 30 * 86400 * SEC),
	{.name = "inhibit_rules", .kind = KIND_INHIBIT_RULES, .offset = OFF(alerting.inhibit_rules),
	 .size = SZ(alerting.inhibit_rules)},
};

static const struct key_spec profiling_keys[] = {
	LEAF("enabled", BOOL, profiling.enabled),
	PATHLEAF("socket", profiling.socket, PATH_CREATED),
	RANGED("max_clients", UINT, profiling.max_clients, 1, 4096),
	RANGED("max_clients_per_uid", UINT, profiling.max_clients_per_uid, 0, 4096),
	RANGED("idle_timeout", DURATION, profiling.idle_timeout_ns, 1 * SEC, 86400 * SEC),
	LEAF("allowed_uids", STRING, profiling.allowed_uids),
	LEAF("allowed_gids", STRING, profiling.allowed_gids),
	RANGED("max_processes", UINT, profiling.max_processes, 1, 65536),
	RANGED("kernels_per_process", UINT, profiling.kernels_per_process, 1, 256),
	RANGED("max_kernel_series", UINT, profiling.max_kernel_series, 1, 100000),
	RANGED("process_expiry", DURATION, profiling.process_expiry_ns, 1 * SEC, 7 * 86400 * SEC),
	LEAF("mode", STRING, profiling.mode),
	{.name = "budget_percent", .kind = KIND_DOUBLE, .offset = OFF(profiling.budget_percent),
	 .size = SZ(profiling.budget_percent), .lo = 0, .hi = 100, .lo_open = true, .has_range = true},
	LEAF("nvtx_range", STRING, profiling.nvtx_range),
	RANGED("trace_max_events", UINT, profiling.trace_max_events, 1, 200000),
	RANGED("store_interval", DURATION, profiling.store_interval_ns, 1 * SEC, 3600 * SEC),
};

static const struct key_spec screen_keys[] = {
	LEAF("enabled", BOOL, screen.enabled),
	RANGED("interval", DURATION, screen.interval_ns, 60 * SEC, 366 * 86400 * SEC),
	LEAF("variant", STRING, screen.variant),
};

static const struct key_spec bench_keys[] = {
	LEAF("enabled", BOOL, bench.enabled),
	LEAF("schedule", STRING, bench.schedule),
	RANGED("idle_for", DURATION, bench.idle_for_ns, 0, 7 * 86400 * SEC),
	RANGED("idle_utilization_percent", UINT, bench.idle_utilization_percent, 0, 100),
	RANGED("retry_interval", DURATION, bench.retry_interval_ns, 1 * SEC, 7 * 86400 * SEC),
	LEAF("mode", STRING, bench.mode),
	PATHLEAF("command", bench.command, PATH_PROGRAM),
	PATHLEAF("cublaslt", bench.cublaslt, PATH_LIBRARY),
	RANGED("run_timeout", DURATION, bench.run_timeout_ns, 10 * SEC, 86400 * SEC),
	RANGED("retention", DURATION, bench.retention_ns, 86400 * SEC, 3650 * 86400 * SEC),
	RANGED("baseline_runs", UINT, bench.baseline_runs, 1, 64),
	RANGED("min_runs", UINT, bench.min_runs, 1, 64),
	RANGED("noise_floor", DOUBLE, bench.noise_floor, 0, 0.5),
	RANGED("noise_ceiling", DOUBLE, bench.noise_ceiling, 0, 0.5),
	RANGED("fleet_tolerance", DOUBLE, bench.fleet_tolerance, 0, 0.5),
	LEAF("fleet_prometheus_url", STRING, bench.fleet_prometheus_url),
};

/* remote_write entries: offsets are into struct config_remote_write (and
 * struct config_relabel), which parse_section takes as its base. */
#define RWOFF(m) offsetof(struct config_remote_write, m)
#define RWSZ(m) sizeof(((struct config_remote_write *)0)->m)
#define RWLEAF(nm, kd, m) {.name = nm, .kind = KIND_##kd, .offset = RWOFF(m), .size = RWSZ(m)}
#define RWPATH(nm, m, use) \
	{.name = nm, .kind = KIND_STRING, .offset = RWOFF(m), .size = RWSZ(m), .path = use}
#define RWRANGED(nm, kd, m, l, h) \
	{.name = nm, .kind = KIND_##kd, .offset = RWOFF(m), .size = RWSZ(m), .lo = (l), .hi = (h), \
	 .has_range = true}
#define RLOFF(m) offsetof(struct config_relabel, m)
#define RLSZ(m) sizeof(((struct config_relabel *)0)->m)
static const struct key_spec relabel_keys[] = {
	{.name = "source_labels", .kind = KIND_STR_LIST, .offset = RLOFF(source_labels),
	 .size = RLSZ(source_labels), .elem = RLSZ(source_labels[0]), .check = ITEM_LABEL_NAME},
	{.name = "separator", .kind = KIND_STRING, .offset = RLOFF(separator), .size = RLSZ(separator)},
	{.name = "regex", .kind = KIND_STRING, .offset = RLOFF(regex), .size = RLSZ(regex)},
	{.name = "target_label", .kind = KIND_STRING, .offset = RLOFF(target_label),
	 .size = RLSZ(target_label)},
	{.name = "replacement", .kind = KIND_STRING, .offset = RLOFF(replacement),
	 .size = RLSZ(replacement)},
	{.name = "action", .kind = KIND_STRING, .offset = RLOFF(action), .size = RLSZ(action)},
	{.name = "modulus", .kind = KIND_UINT, .offset = RLOFF(modulus), .size = RLSZ(modulus),
	 .lo = 0, .hi = 4294967295.0, .has_range = true},
};
static const struct key_spec relabel_section = SECTION("", relabel_keys);
static const struct key_spec rw_basic_keys[] = {
	RWLEAF("username", STRING, basic_auth.username),
	RWLEAF("password", STRING, basic_auth.password),
	RWPATH("password_file", basic_auth.password_file, PATH_READ),
};
static const struct key_spec rw_authz_keys[] = {
	RWLEAF("type", STRING, authorization.type),
	RWLEAF("credentials", STRING, authorization.credentials),
	RWPATH("credentials_file", authorization.credentials_file, PATH_READ),
};
static const struct key_spec rw_tls_keys[] = {
	RWPATH("ca_file", tls_config.ca_file, PATH_READ),
	RWPATH("cert_file", tls_config.cert_file, PATH_READ),
	RWPATH("key_file", tls_config.key_file, PATH_READ),
	RWLEAF("server_name", STRING, tls_config.server_name),
	RWLEAF("insecure_skip_verify", BOOL, tls_config.insecure_skip_verify),
};
static const struct key_spec rw_queue_keys[] = {
	RWRANGED("capacity", UINT, queue_config.capacity, 1, 10000000),
	RWRANGED("max_shards", UINT, queue_config.max_shards, 1, 100000),
	RWRANGED("min_shards", UINT, queue_config.min_shards, 1, 100000),
	RWRANGED("max_samples_per_send", UINT, queue_config.max_samples_per_send, 1, 1000000),
	RWRANGED("batch_send_deadline", DURATION, queue_config.batch_send_deadline_ns, 1 * MS,
		 3600 * SEC),
	RWRANGED("min_backoff", DURATION, queue_config.min_backoff_ns, 1 * MS, 3600 * SEC),
	RWRANGED("max_backoff", DURATION, queue_config.max_backoff_ns, 1 * MS, 3600 * SEC),
	RWLEAF("retry_on_http_429", BOOL, queue_config.retry_on_http_429),
};
static const struct key_spec rw_summary_keys[] = {
	RWRANGED("interval", DURATION, summary.interval_ns, 1 * SEC, 86400 * SEC),
	{.name = "quantile", .kind = KIND_DOUBLE, .offset = RWOFF(summary.quantile),
	 .size = RWSZ(summary.quantile), .lo = 0, .hi = 1, .lo_open = true, .has_range = true},
	{.name = "anomaly_threshold", .kind = KIND_DOUBLE, .offset = RWOFF(summary.anomaly_threshold),
	 .size = RWSZ(summary.anomaly_threshold), .lo = 0, .hi = 1000, .lo_open = true,
	 .has_range = true},
};
static const struct key_spec rw_keys[] = {
	RWLEAF("url", STRING, url),
	RWLEAF("name", STRING, name),
	RWRANGED("remote_timeout", DURATION, remote_timeout_ns, 1 * MS, 3600 * SEC),
	{.name = "headers", .kind = KIND_LABEL_MAP, .offset = RWOFF(headers), .size = RWSZ(headers),
	 .elem = RWSZ(headers[0][0]), .check = ITEM_HEADER},
	{.name = "basic_auth", .kind = KIND_SECTION, .children = rw_basic_keys,
	 .nchildren = (int)(sizeof rw_basic_keys / sizeof rw_basic_keys[0])},
	{.name = "authorization", .kind = KIND_SECTION, .children = rw_authz_keys,
	 .nchildren = (int)(sizeof rw_authz_keys / sizeof rw_authz_keys[0])},
	{.name = "tls_config", .kind = KIND_SECTION, .children = rw_tls_keys,
	 .nchildren = (int)(sizeof rw_tls_keys / sizeof rw_tls_keys[0])},
	{.name = "write_relabel_configs", .kind = KIND_RELABEL_LIST},
	{.name = "queue_config", .kind = KIND_SECTION, .children = rw_queue_keys,
	 .nchildren = (int)(sizeof rw_queue_keys / sizeof rw_queue_keys[0])},
	RWPATH("queue_dir", queue_dir, PATH_CREATED),
	RWRANGED("queue_max_bytes", UINT, queue_max_bytes, SEGQ_MIN_MAX_BYTES, 4294967295.0),
	RWLEAF("mode", STRING, mode),
	{.name = "summary", .kind = KIND_SECTION, .children = rw_summary_keys,
	 .nchildren = (int)(sizeof rw_summary_keys / sizeof rw_summary_keys[0])},
};
static const struct key_spec rw_section = SECTION("", rw_keys);
static const struct key_spec attribution_keys[] = {
	{.name = "labels", .kind = KIND_STR_LIST, .offset = OFF(attribution.labels),
	 .size = SZ(attribution.labels), .elem = SZ(attribution.labels[0]),
	 .check = ITEM_OWNER_FIELD, .reload = RELOAD_LIVE},
	PATHLEAF("proc_root", attribution.proc_root, PATH_LATER),
	PATHLEAF("cgroup_root", attribution.cgroup_root, PATH_LATER),
	PATHLEAF("pod_resources_socket", attribution.pod_resources_socket, PATH_LATER),
	RANGED("pod_resources_refresh", DURATION, attribution.pod_resources_refresh_ns, 1 * SEC,
	       3600 * SEC),
	RANGED("pod_resources_timeout", DURATION, attribution.pod_resources_timeout_ns, 100 * MS,
	       60 * SEC),
	{.name = "idle_sm_ratio", .kind = KIND_DOUBLE, .offset = OFF(attribution.idle_sm_ratio),
	 .size = SZ(attribution.idle_sm_ratio), .lo = 0, .hi = 1, .lo_open = true, .has_range = true},
	RANGED("idle_window", DURATION, attribution.idle_window_ns, 1 * SEC, 7 * 86400 * SEC),
};

static const struct key_spec top_keys[] = {
	LEAF("listen", LISTEN, listen),
	PATHLEAF("nvml_library", nvml_library, PATH_LIBRARY),
	SECTION("sampling", sampling_keys),
	SECTION("replay", replay_keys),
	SECTION("diagnosis", diagnosis_keys),
	SECTION("anomaly", anomaly_keys),
	SECTION("evidence", evidence_keys),
	SECTION("storage", storage_keys),
	SECTION("http", http_keys),
	SECTION("query", query_keys),
	LEAF_R("log_level", LOG_LEVEL, log_level, RELOAD_LIVE),
	LEAF_R("rule_files", PATH_LIST, rule_files, RELOAD_LIVE),
	SECTION_R("alerting", alerting_keys, RELOAD_LIVE),
	SECTION("profiling", profiling_keys),
	SECTION("attribution", attribution_keys),
	SECTION("bench", bench_keys),
	SECTION("screen", screen_keys),
	RANGED("rule_evaluation_interval", DURATION, rule_evaluation_interval_ns, 1 * SEC, 86400 * SEC),
	RANGED("rule_evaluation_delay", DURATION, rule_evaluation_delay_ns, 0, 60 * SEC),
	{.name = "remote_write", .kind = KIND_REMOTE_WRITE, .offset = OFF(remote_write),
	 .size = SZ(remote_write)},
};

static const struct key_spec config_root = SECTION_R("", top_keys, RELOAD_RESTART);

#define SECTION_MAX 32 /* most keys in one section (duplicate tracking) */

void config_defaults(struct gpulse_config *c)
{
	memset(c, 0, sizeof *c);
	snprintf(c->listen, sizeof c->listen, "%s", "127.0.0.1:9401");
	c->sampling.fast_ns = 100 * NS_PER_MS;
	c->sampling.normal_ns = 1 * NS_PER_SEC;
	c->sampling.slow_ns = 30 * NS_PER_SEC;
	c->sampling.call_deadline_ns = 2 * NS_PER_SEC;
	c->sampling.rediscover_ns = 10 * NS_PER_SEC;
	c->sampling.per_process_utilization = true;
	c->sampling.gpm = true;
	c->sampling.events = true;
	c->sampling.adaptive = true;
	c->sampling.fast_floor_ns = 1 * NS_PER_SEC;
	c->sampling.normal_floor_ns = 2 * NS_PER_SEC;
	c->sampling.quiet_ns = 10 * NS_PER_SEC;
	c->replay.speed = 1.0;
	c->replay.loop = true;
	c->diagnosis.window_ns = 5 * NS_PER_SEC;
	c->diagnosis.history_ns = 300 * NS_PER_SEC;
	c->diagnosis.memory_pressure = DIAG_MEMORY_PRESSURE_DEFAULT;
	c->anomaly.enabled = true;
	c->anomaly.step_ns = 1 * NS_PER_SEC;
	c->anomaly.halflife_ns = 600 * NS_PER_SEC;
	c->anomaly.season_halflife_ns = 7LL * 86400 * NS_PER_SEC;
	c->anomaly.warmup_ns = 60 * NS_PER_SEC;
	c->anomaly.season_buckets = 24;
	c->storage.flush_interval_ns = 1 * NS_PER_SEC;
	c->storage.retention_ns = 48LL * 3600 * NS_PER_SEC;
	c->storage.rollup_retention_ns = 30LL * 86400 * NS_PER_SEC;
	c->storage.retry_interval_ns = 30 * NS_PER_SEC;
	c->http.max_connections = 64;
	c->http.threads = 2;
	c->http.timeout_ns = 10 * NS_PER_SEC;
	c->http.header_timeout_ns = (int64_t)HTTP_DEFAULT_HEADER_TIMEOUT_MS * NS_PER_MS;
	c->query.timeout_ns = API_DEFAULT_TIMEOUT_NS;
	c->query.max_concurrency = API_DEFAULT_MAX_CONCURRENCY;
	c->log_level = LOG_INFO;
	/* Rules at the edge run every second (alerts seconds after the
	 * hardware shows a problem), 50 ms after their evaluation time so
	 * the samples stamped up to it are in. */
	c->rule_evaluation_interval_ns = 1 * NS_PER_SEC;
	c->rule_evaluation_delay_ns = 50 * NS_PER_MS;
	config_alerting_defaults(c);
	profiling_config_defaults(c);
	evidence_config_into(c);
	for (int f = 0, n = 0; f < OWNER_FIELD_COUNT; f++)
		if (OWNER_DEFAULT_LABELS & 1u << f)
			str_copy(c->attribution.labels[n++], sizeof c->attribution.labels[0],
				 owner_field_name((enum owner_field)f));
	str_copy(c->attribution.proc_root, sizeof c->attribution.proc_root, "/proc");
	str_copy(c->attribution.cgroup_root, sizeof c->attribution.cgroup_root, "/sys/fs/cgroup");
	str_copy(c->attribution.pod_resources_socket, sizeof c->attribution.pod_resources_socket,
		 "/var/lib/kubelet/pod-resources/kubelet.sock");
	c->attribution.pod_resources_refresh_ns = 10 * NS_PER_SEC;
	c->attribution.pod_resources_timeout_ns = 2 * NS_PER_SEC;
	c->attribution.idle_sm_ratio = TENANTS_DEFAULT_IDLE_SM;
	c->attribution.idle_window_ns = TENANTS_DEFAULT_IDLE_WINDOW_NS;
	benchd_config_defaults(c);
}

/* ---- the sections of alerting.c, benchd.c and profiling.c ------------- */

void config_alerting_defaults(struct gpulse_config *c)
{
	memset(&c->alerting, 0, sizeof c->alerting);
	c->alerting.resend_delay_ns = 60 * NS_PER_SEC;
	c->alerting.alertmanagers.timeout_ns = 10 * NS_PER_SEC;
	c->alerting.webhooks.timeout_ns = 10 * NS_PER_SEC;
	c->alerting.exec.timeout_ns = 10 * NS_PER_SEC;
	c->alerting.queue.max_bytes = NOTIFY_DEFAULT_MAX_BYTES;
	c->alerting.queue.max_batches = NOTIFY_DEFAULT_MAX_FILES;
	c->alerting.retry_backoff_ns = 500 * NS_PER_MS;
	c->alerting.max_retry_backoff_ns = 60 * NS_PER_SEC;
	snprintf(c->alerting.group_by[0], sizeof c->alerting.group_by[0], "alertname");
	c->alerting.group_wait_ns = 30 * NS_PER_SEC;
	c->alerting.group_interval_ns = 300 * NS_PER_SEC;
	c->alerting.repeat_interval_ns = 4 * 3600 * NS_PER_SEC;
	/* The rule pack (deploy/rules/gpulse.rules.yml) names these three:
	 * a GPU that is gone makes its other alerts noise. */
	struct config_inhibit_rule *r = &c->alerting.inhibit_rules[0];
	snprintf(r->source_matchers[0], sizeof r->source_matchers[0],
		 "alertname=~\"GPUDown|GPULost|GPUFallenOffBus\"");
	snprintf(r->equal[0], sizeof r->equal[0], "gpu");
	c->alerting.ninhibit_rules = 1;
}

size_t config_list_len(const char *base, size_t n, size_t elem)
{
	size_t k = 0;
	while (k < n && base[k * elem])
		k++;
	return k;
}

size_t alerting_receiver_count(const struct gpulse_config *c)
{
	return CONFIG_LIST_LEN(c->alerting.alertmanagers.urls) + CONFIG_LIST_LEN(c->alerting.webhooks.urls) +
	       (c->alerting.exec.path[0] ? 1 : 0);
}

static bool good_url(const char *u)
{
	if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
		return false;
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return false;
	return strlen(u) > (u[4] == 's' ? 8u : 7u);
}

int alerting_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen)
{
	const struct {
		const char (*urls)[CONFIG_URL_LEN];
		const char *key;
	} lists[] = {
		{c->alerting.alertmanagers.urls, "alerting.alertmanagers.urls"},
		{c->alerting.webhooks.urls, "alerting.webhooks.urls"},
	};
	for (size_t l = 0; l < 2; l++)
		for (size_t i = 0; i < CONFIG_MAX_URLS && lists[l].urls[i][0]; i++)
			if (!good_url(lists[l].urls[i])) {
				char shown[256];
				redact_url(shown, sizeof shown, lists[l].urls[i]);
				str_errf(err, errlen, "%s: %s[%zu]: \"%s\" is not an http:// or https:// URL",
					 name, lists[l].key, i, shown);
				return GPULSE_EINVAL;
			}
	if (c->alerting.external_url[0] && !good_url(c->alerting.external_url)) {
		char shown[256];
		redact_url(shown, sizeof shown, c->alerting.external_url);
		str_errf(err, errlen, "%s: alerting.external_url: \"%s\" is not an http:// or https:// URL",
			 name, shown);
		return GPULSE_EINVAL;
	}
	const char *exec = c->alerting.exec.path;
	if (exec[0] && (exec[0] != '/' || access(exec, X_OK) != 0)) {
		str_errf(err, errlen, "%s: alerting.exec.path: %s %s", name, exec,
			 exec[0] != '/' ? "must be an absolute path (it runs without a shell)"
					: "is not an executable file");
		return GPULSE_EINVAL;
	}
	if (!exec[0] && c->alerting.exec.args[0][0]) {
		str_errf(err, errlen, "%s: alerting.exec.args given without alerting.exec.path", name);
		return GPULSE_EINVAL;
	}
	const struct {
		const char *path, *key;
	} tokens[] = {
		{c->alerting.alertmanagers.bearer_token_file, "alerting.alertmanagers.bearer_token_file"},
		{c->alerting.webhooks.bearer_token_file, "alerting.webhooks.bearer_token_file"},
	};
	for (size_t i = 0; i < 2; i++) {
		if (!tokens[i].path[0])
			continue;
		char tok[CONFIG_TOKEN_MAX], why[CONFIG_PATH_LEN + 128];
		int rc = token_file_read(tokens[i].path, true, tok, sizeof tok, why, sizeof why);
		memset(tok, 0, sizeof tok);
		if (rc) {
			str_errf(err, errlen, "%s: %s: %s", name, tokens[i].key, why);
			return GPULSE_EINVAL;
		}
	}
	size_t ngb = CONFIG_LIST_LEN(c->alerting.group_by);
	for (size_t i = 0; i < ngb; i++)
		if (strcmp(c->alerting.group_by[i], "...") == 0 && ngb > 1) {
			str_errf(err, errlen, "%s: alerting.group_by: \"...\" (every label) must be alone",
				 name);
			return GPULSE_EINVAL;
		}
	if (c->alerting.max_retry_backoff_ns < c->alerting.retry_backoff_ns) {
		char a[32], b[32];
		duration_format(c->alerting.max_retry_backoff_ns, a, sizeof a);
		duration_format(c->alerting.retry_backoff_ns, b, sizeof b);
		str_errf(err, errlen, "%s: alerting.max_retry_backoff (%s) must not be shorter than "
			 "alerting.retry_backoff (%s)", name, a, b);
		return GPULSE_EINVAL;
	}
	if (c->alerting.ninhibit_rules > CONFIG_MAX_INHIBIT_RULES) {
		str_errf(err, errlen, "%s: alerting.inhibit_rules: more than %d rules", name,
			 CONFIG_MAX_INHIBIT_RULES);
		return GPULSE_EINVAL;
	}
	for (unsigned r = 0; r < c->alerting.ninhibit_rules; r++) {
		const struct config_inhibit_rule *ir = &c->alerting.inhibit_rules[r];
		const char *src[CONFIG_MAX_MATCHERS], *tgt[CONFIG_MAX_MATCHERS], *eq[CONFIG_MAX_LABELS];
		size_t ns = CONFIG_LIST_LEN(ir->source_matchers), nt = CONFIG_LIST_LEN(ir->target_matchers), ne = CONFIG_LIST_LEN(ir->equal);
		for (size_t i = 0; i < ns; i++)
			src[i] = ir->source_matchers[i];
		for (size_t i = 0; i < nt; i++)
			tgt[i] = ir->target_matchers[i];
		for (size_t i = 0; i < ne; i++)
			eq[i] = ir->equal[i];
		struct alert_inhibit_rule rule;
		char why[600];
		if (ns == 0 || alert_inhibit_rule_init(&rule, src, ns, tgt, nt, eq, ne, why, sizeof why)) {
			str_errf(err, errlen, "%s: alerting.inhibit_rules[%u]: %s", name, r,
				 ns == 0 ? "source_matchers must name at least one matcher" : why);
			return GPULSE_EINVAL;
		}
		alert_inhibit_rule_free(&rule);
	}
	return 0;
}

void benchd_config_defaults(struct gpulse_config *c)
{
	c->bench.enabled = true;
	str_copy(c->bench.schedule, sizeof c->bench.schedule, "weekly");
	c->bench.idle_for_ns = 30LL * 60 * NS_PER_SEC;
	c->bench.idle_utilization_percent = 5;
	c->bench.retry_interval_ns = 3600LL * NS_PER_SEC;
	str_copy(c->bench.mode, sizeof c->bench.mode, "quick");
	c->bench.run_timeout_ns = 900LL * NS_PER_SEC;
	c->bench.retention_ns = 400LL * 86400 * NS_PER_SEC;
	c->bench.baseline_runs = 8;
	c->bench.min_runs = 3;
	c->bench.noise_floor = 0.02;
	c->bench.noise_ceiling = 0.05;
	c->bench.fleet_tolerance = 0.05;
	c->screen.enabled = true;
	c->screen.interval_ns = 86400LL * NS_PER_SEC;
	str_copy(c->screen.variant, sizeof c->screen.variant, "quick");
}

int screend_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen)
{
	if (strcmp(c->screen.variant, "quick") != 0 && strcmp(c->screen.variant, "full") != 0) {
		str_errf(err, errlen, "%s: screen.variant: \"%s\" is not quick or full", name,
			 c->screen.variant);
		return GPULSE_EINVAL;
	}
	return 0;
}

int64_t benchd_schedule_ns(const char *s)
{
	if (strcmp(s, "weekly") == 0)
		return 7LL * 86400 * NS_PER_SEC;
	if (strcmp(s, "daily") == 0)
		return 86400LL * NS_PER_SEC;
	if (strcmp(s, "off") == 0)
		return 0;
	int64_t ns;
	if (duration_parse_arg(s, &ns) != 0 || ns < 60 * NS_PER_SEC)
		return -1;
	return ns;
}

int benchd_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen)
{
	if (benchd_schedule_ns(c->bench.schedule) < 0) {
		str_errf(err, errlen, "%s: bench.schedule: \"%s\" is not weekly, daily, off or a "
			 "duration of at least 1m", name, c->bench.schedule);
		return GPULSE_EINVAL;
	}
	if (strcmp(c->bench.mode, "quick") != 0 && strcmp(c->bench.mode, "full") != 0) {
		str_errf(err, errlen, "%s: bench.mode: \"%s\" is not quick or full", name,
			 c->bench.mode);
		return GPULSE_EINVAL;
	}
	if (c->bench.noise_floor > c->bench.noise_ceiling) {
		str_errf(err, errlen, "%s: bench.noise_floor (%g) is above bench.noise_ceiling (%g)",
			 name, c->bench.noise_floor, c->bench.noise_ceiling);
		return GPULSE_EINVAL;
	}
	if (c->bench.min_runs > c->bench.baseline_runs) {
		str_errf(err, errlen, "%s: bench.min_runs (%u) is above bench.baseline_runs (%u)",
			 name, c->bench.min_runs, c->bench.baseline_runs);
		return GPULSE_EINVAL;
	}
	const char *u = c->bench.fleet_prometheus_url;
	if (u[0] && strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
		char shown[256];
		redact_url(shown, sizeof shown, u);
		str_errf(err, errlen, "%s: bench.fleet_prometheus_url: \"%s\" is not an http:// or "
			 "https:// URL", name, shown);
		return GPULSE_EINVAL;
	}
	return 0;
}

bool benchd_config_equal(const struct gpulse_config *a, const struct gpulse_config *b)
{
	const typeof(a->bench) *x = &a->bench, *y = &b->bench;
	return x->enabled == y->enabled && strcmp(x->schedule, y->schedule) == 0 &&
	       x->idle_for_ns == y->idle_for_ns &&
	       x->idle_utilization_percent == y->idle_utilization_percent &&
	       x->retry_interval_ns == y->retry_interval_ns && strcmp(x->mode, y->mode) == 0 &&
	       strcmp(x->command, y->command) == 0 && strcmp(x->cublaslt, y->cublaslt) == 0 &&
	       x->run_timeout_ns == y->run_timeout_ns && x->retention_ns == y->retention_ns &&
	       x->baseline_runs == y->baseline_runs && x->min_runs == y->min_runs &&
	       x->noise_floor == y->noise_floor && x->noise_ceiling == y->noise_ceiling &&
	       x->fleet_tolerance == y->fleet_tolerance &&
	       strcmp(x->fleet_prometheus_url, y->fleet_prometheus_url) == 0 &&
	       a->screen.enabled == b->screen.enabled && a->screen.interval_ns == b->screen.interval_ns &&
	       strcmp(a->screen.variant, b->screen.variant) == 0;
}

void profiling_config_defaults(struct gpulse_config *c)
{
	c->profiling.enabled = true;
	str_copy(c->profiling.socket, sizeof c->profiling.socket, WIRE_DEFAULT_SOCKET);
	c->profiling.max_clients = 128;
	c->profiling.max_clients_per_uid = 0;   /* a quarter of max_clients */
	c->profiling.idle_timeout_ns = 30LL * 1000000000LL;
	c->profiling.max_processes = 512;
	c->profiling.kernels_per_process = 32;
	c->profiling.max_kernel_series = 4096;
	c->profiling.process_expiry_ns = 300LL * 1000000000LL;
	str_copy(c->profiling.mode, sizeof c->profiling.mode, "continuous");
	c->profiling.budget_percent = 0.5;
	c->profiling.trace_max_events = 50000;
	c->profiling.store_interval_ns = 15LL * 1000000000LL;
}

int profiling_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen)
{
	int mode = profile_mode_parse(c->profiling.mode);
	if (mode < 0) {
		str_errf(err, errlen, "%s: profiling.mode: \"%s\" is not one of continuous, "
			 "profiler-api, nvtx, full, off", name, c->profiling.mode);
		return GPULSE_EINVAL;
	}
	if (mode == WIRE_MODE_FOCUSED_NVTX && !c->profiling.nvtx_range[0]) {
		str_errf(err, errlen, "%s: profiling.mode nvtx needs profiling.nvtx_range", name);
		return GPULSE_EINVAL;
	}
	if (strlen(c->profiling.nvtx_range) > WIRE_NAME_MAX) {
		str_errf(err, errlen, "%s: profiling.nvtx_range is longer than %d bytes", name,
			 WIRE_NAME_MAX);
		return GPULSE_EINVAL;
	}
	if (c->profiling.enabled && !c->profiling.socket[0]) {
		str_errf(err, errlen, "%s: profiling.socket is empty (set profiling.enabled: false "
			 "to turn profiling off)", name);
		return GPULSE_EINVAL;
	}
	/* A per-user bound at max_clients or above protects nobody: one user
	 * could still take every slot. */
	if (c->profiling.max_clients_per_uid > c->profiling.max_clients) {
		str_errf(err, errlen, "%s: profiling.max_clients_per_uid (%u) is over "
			 "profiling.max_clients (%u)", name, c->profiling.max_clients_per_uid,
			 c->profiling.max_clients);
		return GPULSE_EINVAL;
	}
	uint32_t ids[PROFILE_MAX_ALLOWED_IDS];
	size_t n;
	char why[128];
	const char *lists[2] = {c->profiling.allowed_uids, c->profiling.allowed_gids};
	const char *keys[2] = {"allowed_uids", "allowed_gids"};
	for (int i = 0; i < 2; i++)
		if (profile_parse_ids(lists[i], ids, PROFILE_MAX_ALLOWED_IDS, &n, why, sizeof why)) {
			str_errf(err, errlen, "%s: profiling.%s: %s", name, keys[i], why);
			return GPULSE_EINVAL;
		}
	return 0;
}

bool profiling_config_equal(const struct gpulse_config *a, const struct gpulse_config *b)
{
	const typeof(a->profiling) *x = &a->profiling, *y = &b->profiling;
	return x->enabled == y->enabled && strcmp(x->socket, y->socket) == 0 &&
	       x->max_clients == y->max_clients && x->max_clients_per_uid == y->max_clients_per_uid &&
	       x->idle_timeout_ns == y->idle_timeout_ns &&
	       strcmp(x->allowed_uids, y->allowed_uids) == 0 &&
	       strcmp(x->allowed_gids, y->allowed_gids) == 0 &&
	       x->max_processes == y->max_processes &&
	       x->kernels_per_process == y->kernels_per_process &&
	       x->max_kernel_series == y->max_kernel_series &&
	       x->process_expiry_ns == y->process_expiry_ns && strcmp(x->mode, y->mode) == 0 &&
	       x->budget_percent == y->budget_percent && strcmp(x->nvtx_range, y->nvtx_range) == 0 &&
	       x->trace_max_events == y->trace_max_events &&
	       x->store_interval_ns == y->store_interval_ns;
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

/* ---- listen addresses ------------------------------------------------- */

/* The HTTP server's own parser decides what a listen address means, so the
 * config never accepts an address the server would read differently. */
bool config_listen_is_loopback(const char *listen)
{
	return http_is_loopback_listen(listen);
}

/* True when the host of `listen` is a name, not an IP address nor all
 * interfaces: what it means is the resolver's answer at bind time. */
static bool listen_host_is_name(const char *listen)
{
	char host[HTTP_MAX_LISTEN + 1];
	int port;
	if (http_parse_listen(listen, host, sizeof host, &port, NULL, 0) != 0 || !host[0])
		return false;
	unsigned char a[sizeof(struct in6_addr)];
	char *pct = strchr(host, '%');
	if (pct)
		*pct = '\0';
	return inet_pton(AF_INET, host, a) != 1 && inet_pton(AF_INET6, host, a) != 1;
}

/* ---- messages ----------------------------------------------------------- */

/* Copy `n` bytes of `s` for a message: quoted, control bytes escaped,
 * long values cut, so a hostile value cannot garble the one-line error. */
static void quote_value(char *dst, size_t dstlen, const char *s, size_t n)
{
	size_t o = 0;
	if (dstlen < 8) {
		if (dstlen)
			dst[0] = '\0';
		return;
	}
	dst[o++] = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (o + 8 >= dstlen || i >= 64) {
			memcpy(dst + o, "...", 3);
			o += 3;
			break;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
			o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02x", ch);
		else
			dst[o++] = (char)ch;
	}
	dst[o++] = '"';
	dst[o] = '\0';
}

static void range_text(const struct key_spec *k, char *out, size_t outlen)
{
	if (k->kind == KIND_DURATION) {
		char lo[40], hi[40];
		duration_format((int64_t)k->lo, lo, sizeof lo);
		duration_format((int64_t)k->hi, hi, sizeof hi);
		snprintf(out, outlen, "%s..%s", lo, hi);
	} else if (k->lo_open) {
		snprintf(out, outlen, "above %g and at most %g", k->lo, k->hi);
	} else {
		snprintf(out, outlen, "%g..%g", k->lo, k->hi);
	}
}

/* Optimal string alignment distance (edits, with adjacent swaps counted
 * once), for "did you mean". Names are short; longer input is not a typo. */
static int edit_distance(const char *a, const char *b)
{
	enum { N = 40 };
	size_t la = strlen(a), lb = strlen(b);
	if (la >= N || lb >= N)
		return 99;
	int d[N][N];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			int cost = a[i - 1] == b[j - 1] ? 0 : 1;
			int v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	}
	return d[la][lb];
}

/* ---- the parser ---------------------------------------------------------- */

struct parse {
	yaml_parser_t yp;
	const char *name;
	const char *data;
	size_t len;
	char *err;
	size_t errlen;
	char dir[CONFIG_PATH_LEN];      /* the file's absolute directory; "": unknown */
	bool check_files;               /* config_load_file: files named must be there */
};

static void parse_err(struct parse *p, yaml_mark_t mark, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void parse_err(struct parse *p, yaml_mark_t mark, const char *fmt, ...)
{
	if (!p->err || p->errlen == 0)
		return;
	int n = snprintf(p->err, p->errlen, "%s:%zu:%zu: ", p->name, mark.line + 1,
			 mark.column + 1);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* libyaml's reader reports a byte offset, not a mark: count lines. */
static yaml_mark_t mark_at_offset(const struct parse *p, size_t offset)
{
	yaml_mark_t m = {0, 0, 0};
	for (size_t i = 0; i < offset && i < p->len; i++) {
		if (p->data[i] == '\n') {
			m.line++;
			m.column = 0;
		} else if (((unsigned char)p->data[i] & 0xc0) != 0x80) {
			m.column++; /* count characters, not UTF-8 continuation bytes */
		}
	}
	m.index = offset;
	return m;
}

/* Next event, or 0 with a syntax error written. */
static int next_event(struct parse *p, yaml_event_t *ev)
{
	if (yaml_parser_parse(&p->yp, ev))
		return 1;
	const yaml_parser_t *y = &p->yp;
	switch (y->error) {
	case YAML_MEMORY_ERROR:
		parse_err(p, mark_at_offset(p, 0), "out of memory while reading YAML");
		break;
	case YAML_READER_ERROR:
		parse_err(p, mark_at_offset(p, y->problem_offset),
			  "not valid YAML text: %s (0x%02x)",
			  y->problem ? y->problem : "unreadable input", (unsigned)y->problem_value);
		break;
	default:
		if (y->context)
			parse_err(p, y->problem_mark, "YAML syntax error: %s (%s at line %zu)",
				  y->problem ? y->problem : "unknown problem", y->context,
				  y->context_mark.line + 1);
		else
			parse_err(p, y->problem_mark, "YAML syntax error: %s",
				  y->problem ? y->problem : "unknown problem");
	}
	return 0;
}

static const char *event_what(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_MAPPING_START_EVENT: return "a mapping";
	case YAML_SEQUENCE_START_EVENT: return "a list";
	case YAML_ALIAS_EVENT: return "an alias";
	case YAML_SCALAR_EVENT: return "a single value";
	default: return "something else";
	}
}

static bool scalar_is_null(const yaml_event_t *ev)
{
	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = (const char *)ev->data.scalar.value;
	return ev->data.scalar.length == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 ||
	       strcmp(v, "Null") == 0 || strcmp(v, "NULL") == 0;
}

static const char *kind_what(enum key_kind kind)
{
	switch (kind) {
	case KIND_SECTION: return "a mapping of keys";
	case KIND_STRING: return "a string";
	case KIND_LISTEN: return "an address like 127.0.0.1:9401";
	case KIND_DURATION: return "a duration (e.g. 100ms, 1s, 5m)";
	case KIND_BOOL: return "true or false";
	case KIND_UINT: return "a whole number";
	case KIND_DOUBLE: return "a number";
	case KIND_LOG_LEVEL: return "a log level (error, warn, info, debug)";
	case KIND_PATH_LIST: return "a list of file paths";
	case KIND_STR_LIST: return "a list of strings";
	case KIND_LABEL_MAP: return "a mapping of label names to values";
	case KIND_USER_MAP: return "a mapping of user names to bcrypt hashes";
	case KIND_INHIBIT_RULES: return "a list of inhibit rules";
	case KIND_REMOTE_WRITE: return "a list of remote_write entries";
	case KIND_RELABEL_LIST: return "a list of relabel configs";
	}
	return "a value";
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on"};
	static const char *const no[] = {"false", "no", "off"};
	for (int i = 0; i < 3; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return GPULSE_EINVAL;
}

static int parse_uint(const char *s, unsigned long long *out)
{
	unsigned long long v = 0;
	if (!is_digit(*s))
		return GPULSE_EINVAL;
	for (; is_digit(*s); s++) {
		if (v > (ULLONG_MAX - 9) / 10)
			return GPULSE_ERANGE;
		v = v * 10 + (unsigned long long)(*s - '0');
	}
	if (*s)
		return GPULSE_EINVAL;
	*out = v;
	return 0;
}

/* Decimal numbers only: no hex, inf or nan, which strtod would take. */
static int parse_double(const char *s, double *out)
{
	/* A leading minus is read, so that a negative value is refused by
	 * its key's range ("is out of range (above 0 ...)"), not as text. */
	const char *p = s + (*s == '-');
	if (!is_digit(*p) && *p != '.')
		return GPULSE_EINVAL;
	for (; *p; p++)
		if (!is_digit(*p) && *p != '.' && *p != 'e' && *p != 'E' && *p != '+' && *p != '-')
			return GPULSE_EINVAL;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (*end || end == s)
		return GPULSE_EINVAL;
	if (errno == ERANGE || !isfinite(v))
		return GPULSE_ERANGE;
	*out = v;
	return 0;
}

static bool in_range(const struct key_spec *k, double v)
{
	if (!k->has_range)
		return true;
	if (k->lo_open ? !(v > k->lo) : !(v >= k->lo))
		return false;
	return v <= k->hi;
}

/* Store one scalar into the member `k` describes. Returns 0 or writes the
 * problem (without location) into `why`. */
static int store_scalar(const struct key_spec *k, void *member, const char *v, size_t vlen,
			bool is_null, char *why, size_t whylen)
{
	char q[96];
	quote_value(q, sizeof q, v, vlen);
	if (strlen(v) != vlen) {
		snprintf(why, whylen, "contains a NUL character");
		return GPULSE_EINVAL;
	}
	if (is_null && k->kind != KIND_STRING) {
		snprintf(why, whylen, "has no value (expected %s)", kind_what(k->kind));
		return GPULSE_EINVAL;
	}
	char range[96];
	range_text(k, range, sizeof range);
	switch (k->kind) {
	case KIND_STRING:
	case KIND_LISTEN: {
		const char *s = is_null ? "" : v;
		size_t n = is_null ? 0 : vlen;
		if (n >= k->size) {
			snprintf(why, whylen, "is too long (%zu bytes; at most %zu)", n, k->size - 1);
			return GPULSE_ERANGE;
		}
		if (k->kind == KIND_LISTEN) {
			char host[CONFIG_LISTEN_LEN];
			int port;
			/* Checked here first: the server's message quotes the value raw. */
			for (size_t i = 0; i < n; i++)
				if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
					snprintf(why, whylen, "%s holds a control character", q);
					return GPULSE_EINVAL;
				}
			if (http_parse_listen(s, host, sizeof host, &port, why, whylen))
				return GPULSE_EINVAL;
		}
		memcpy(member, s, n);
		memset((char *)member + n, 0, k->size - n); /* config_equal may memcmp */
		return 0;
	}
	case KIND_DURATION: {
		int64_t ns;
		int rc = duration_parse_arg(v, &ns);
		if (rc == GPULSE_ERANGE) {
			snprintf(why, whylen, "duration %s is too long", q);
			return rc;
		}
		if (rc) {
			snprintf(why, whylen, "bad duration %s (use e.g. 100ms, 1s, 5m)", q);
			return rc;
		}
		if (!in_range(k, (double)ns)) {
			snprintf(why, whylen, "%s is out of range (%s)", q, range);
			return GPULSE_ERANGE;
		}
		*(int64_t *)member = ns;
		return 0;
	}
	case KIND_BOOL:
		if (parse_bool(v, (bool *)member)) {
			snprintf(why, whylen, "expected true or false, got %s", q);
			return GPULSE_EINVAL;
		}
		return 0;
	case KIND_UINT: {
		unsigned long long n;
		int rc = parse_uint(v, &n);
		if (rc == GPULSE_EINVAL) {
			snprintf(why, whylen, "expected a whole number, got %s", q);
			return rc;
		}
		if (rc || !in_range(k, (double)n)) {
			snprintf(why, whylen, "%s is out of range (%s)", q, range);
			return GPULSE_ERANGE;
		}
		*(unsigned *)member = (unsigned)n;
		return 0;
	}
	case KIND_DOUBLE: {
		double d;
		int rc = parse_double(v, &d);
		if (rc == GPULSE_EINVAL) {
			snprintf(why, whylen, "expected a number, got %s", q);
			return rc;
		}
		if (rc || !in_range(k, d)) {
			snprintf(why, whylen, "%s is out of range (%s)", q, range);
			return GPULSE_ERANGE;
		}
		*(double *)member = d;
		return 0;
	}
	case KIND_LOG_LEVEL:
		if (log_level_parse(v, (enum log_level *)member)) {
			snprintf(why, whylen, "unknown level %s (use error, warn, info or debug)", q);
			return GPULSE_EINVAL;
		}
		return 0;
	case KIND_SECTION:
	case KIND_PATH_LIST:
	case KIND_STR_LIST:
	case KIND_LABEL_MAP:
	case KIND_USER_MAP:
	case KIND_INHIBIT_RULES:
	case KIND_REMOTE_WRITE:
	case KIND_RELABEL_LIST:
		break;
	}
	snprintf(why, whylen, "cannot hold a value");
	return GPULSE_EINVAL;
}

static void join_path(char *out, size_t outlen, const char *section, const char *key)
{
	if (section[0])
		snprintf(out, outlen, "%s.%s", section, key);
	else
		snprintf(out, outlen, "%s", key);
}

static void unknown_key(struct parse *p, yaml_mark_t mark, const struct key_spec *sec,
			const char *section, const char *key, size_t keylen)
{
	char q[96];
	quote_value(q, sizeof q, key, keylen);
	char where[80] = "";
	if (section[0])
		snprintf(where, sizeof where, " in %s", section);

	/* A key put in the wrong section: name the right one. */
	for (int i = 0; i < config_root.nchildren; i++) {
		const struct key_spec *s = &config_root.children[i];
		if (s->kind != KIND_SECTION || strcmp(s->name, section) == 0)
			continue;
		for (int j = 0; j < s->nchildren; j++)
			if (strcmp(s->children[j].name, key) == 0) {
				parse_err(p, mark, "unknown key %s%s (did you mean \"%s.%s\"? it belongs under %s:)",
					  q, where, s->name, key, s->name);
				return;
			}
	}
	int best = -1, best_d = 99;
	for (int i = 0; i < sec->nchildren; i++) {
		int d = edit_distance(key, sec->children[i].name);
		if (d < best_d) {
			best_d = d;
			best = i;
		}
	}
	if (best >= 0 && best_d <= 2 && (size_t)best_d < strlen(sec->children[best].name)) {
		parse_err(p, mark, "unknown key %s%s (did you mean \"%s\"?)", q, where,
			  sec->children[best].name);
		return;
	}
	char known[512];
	size_t o = 0;
	known[0] = '\0';
	for (int i = 0; i < sec->nchildren && o < sizeof known; i++) {
		int w = snprintf(known + o, sizeof known - o, "%s%s", i ? ", " : "",
				 sec->children[i].name);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	parse_err(p, mark, "unknown key %s%s (known keys: %s)", q, where, known);
}

/* Clean the absolute path `s` in place as Go's filepath.Clean does (and
 * so Prometheus's joined paths): no "." or empty components, ".." taking
 * the one before it (lexically; at the root it stays the root). */
static void clean_path(char *s)
{
	size_t o = 0, i = 0, n = strlen(s);
	while (i < n) {
		while (i < n && s[i] == '/')
			i++;
		size_t start = i;
		while (i < n && s[i] != '/')
			i++;
		size_t len = i - start;
		if (len == 0 || (len == 1 && s[start] == '.'))
			continue;
		if (len == 2 && s[start] == '.' && s[start + 1] == '.') {
			while (o > 0 && s[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* the '/' before the component taken back */
			continue;
		}
		s[o++] = '/';
		memmove(s + o, s + start, len);
		o += len;
	}
	if (o == 0)
		s[o++] = '/';
	s[o] = '\0';
}

/* The absolute directory of the file `name` into p->dir, which relative
 * paths in it resolve against: the working directory's when `name` has
 * none. Left "" when the working directory cannot be known (values then
 * stay relative to it, as they were written). */
static void parse_dir(struct parse *p)
{
	const char *slash = strrchr(p->name, '/');
	char cwd[CONFIG_PATH_LEN];
	int n;
	p->dir[0] = '\0';
	if (p->name[0] == '/')
		n = snprintf(p->dir, sizeof p->dir, "%.*s", (int)(slash - p->name), p->name);
	else if (!getcwd(cwd, sizeof cwd))
		return;
	else
		n = snprintf(p->dir, sizeof p->dir, "%s/%.*s", cwd,
			     slash ? (int)(slash - p->name) : 0, p->name);
	if (n < 0 || (size_t)n >= sizeof p->dir)
		p->dir[0] = '\0';
	else
		clean_path(p->dir);
}

/* Resolve `v` (vlen bytes) against the config file's directory (p->dir):
 * files named relatively follow the config file, as Prometheus's do.
 * 0 or -1 when the result does not fit. */
static int resolve_path(const struct parse *p, const char *v, size_t vlen, char *out, size_t outlen)
{
	if (v[0] == '/' || !p->dir[0]) {
		if (vlen >= outlen)
			return -1;
		memmove(out, v, vlen); /* v may be out itself */
		out[vlen] = '\0';
		return 0;
	}
	char tmp[CONFIG_PATH_LEN];
	int n = snprintf(tmp, sizeof tmp, "%s/%.*s", p->dir, (int)vlen, v);
	if (n < 0 || (size_t)n >= sizeof tmp)
		return -1;
	clean_path(tmp);
	if (strlen(tmp) >= outlen)
		return -1;
	memcpy(out, tmp, strlen(tmp) + 1);
	return 0;
}

/* Whether the file at `path` can serve as `use` says, now: 0, or the
 * reason (strerror's words, or what is wrong) in `why`. */
static int check_path(const char *path, enum path_use use, char *why, size_t whylen)
{
	struct stat st;
	if (use == PATH_READ) {
		int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0) {
			snprintf(why, whylen, "%s", strerror(errno));
			return GPULSE_EINVAL;
		}
		bool dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
		close(fd);
		if (dir) {
			snprintf(why, whylen, "is a directory, not a file");
			return GPULSE_EINVAL;
		}
		return 0;
	}
	if (use == PATH_EXEC || (use == PATH_PROGRAM && strchr(path, '/'))) {
		if (stat(path, &st) != 0) {
			snprintf(why, whylen, "%s", strerror(errno));
			return GPULSE_EINVAL;
		}
		if (S_ISDIR(st.st_mode) || access(path, X_OK) != 0) {
			snprintf(why, whylen, "is not an executable file");
			return GPULSE_EINVAL;
		}
	}
	return 0;
}

/* A path key's value just stored at `member`: resolved as its use says
 * (a name without '/' that a search finds stays a name; an exec path
 * must be absolute and is left for config_validate to refuse), then, when
 * the file is being loaded, checked. 0 or GPULSE_EPARSE with the error. */
static int take_path(struct parse *p, const struct key_spec *k, const char *key, char *member,
		     yaml_mark_t mark)
{
	size_t n = strlen(member);
	bool named = (k->path == PATH_PROGRAM || k->path == PATH_LIBRARY) && !strchr(member, '/');
	if (n && !named && k->path != PATH_EXEC) {
		if (resolve_path(p, member, n, member, k->size)) {
			parse_err(p, mark, "%s: path is too long once resolved against %s (at most %zu "
				  "bytes)", key, p->dir, k->size - 1);
			return GPULSE_EPARSE;
		}
		/* config_equal may memcmp */
		memset(member + strlen(member), 0, k->size - strlen(member));
	}
	char why[256];
	if (p->check_files && n && (k->path != PATH_EXEC || member[0] == '/') &&
	    check_path(member, k->path, why, sizeof why)) {
		parse_err(p, mark, "%s: %s: %s", key, member, why);
		return GPULSE_EPARSE;
	}
	return 0;
}

/* Read a list of strings (`val` is the event after the key) into
 * member[size / elem][elem], zero-filled past the last entry; each entry
 * checked as `check` says (ITEM_PATH: stored resolved against the config
 * file's folder). A null value is the empty list. */
static int parse_str_list(struct parse *p, const char *path, const yaml_event_t *val, char *member,
			  size_t size, size_t elem, enum item_check check)
{
	size_t cap = size / elem;
	char *tmp = calloc(1, size);
	int rc = GPULSE_EPARSE;
	if (!tmp) {
		parse_err(p, val->start_mark, "out of memory");
		return GPULSE_ENOMEM;
	}
	if (val->type == YAML_SCALAR_EVENT && scalar_is_null(val))
		goto done;
	bool paths = check == ITEM_PATH;
	if (val->type != YAML_SEQUENCE_START_EVENT) {
		parse_err(p, val->start_mark, "%s: expected %s, got %s", path,
			  kind_what(paths ? KIND_PATH_LIST : KIND_STR_LIST), event_what(val));
		goto out;
	}
	for (size_t n = 0;; n++) {
		yaml_event_t ev;
		if (!next_event(p, &ev))
			goto out;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		const char *v = ev.type == YAML_SCALAR_EVENT ? (const char *)ev.data.scalar.value : NULL;
		size_t vlen = v ? ev.data.scalar.length : 0;
		char why[512] = "";
		bool empty = !v || scalar_is_null(&ev) || vlen == 0 || strlen(v) != vlen;
		if (empty && paths)
			snprintf(why, sizeof why, "each entry must be a file path, not %s", event_what(&ev));
		else if (empty)
			snprintf(why, sizeof why, "each entry must be a non-empty string, not %s",
				 v ? "an empty value" : event_what(&ev));
		else if (n >= cap)
			snprintf(why, sizeof why, "more than %zu %s", cap, paths ? "files" : "entries");
		else if (paths) {
			char *e = tmp + n * elem, reason[160];
			if (resolve_path(p, v, vlen, e, elem))
				snprintf(why, sizeof why, "path is too long (at most %zu bytes)", elem - 1);
			else if (p->check_files && check_path(e, PATH_READ, reason, sizeof reason))
				snprintf(why, sizeof why, "%.340s: %s", e, reason);
		} else if (vlen >= elem)
			snprintf(why, sizeof why, "entry is too long (%zu bytes; at most %zu)", vlen,
				 elem - 1);
		else if (check == ITEM_LABEL_NAME && !str_is_label_name(v))
			snprintf(why, sizeof why, "\"%.60s\" is not a label name", v);
		else if (check == ITEM_OWNER_FIELD && owner_field_by_name(v) < 0)
			snprintf(why, sizeof why,
				 "\"%.60s\" is not an attribution field (cgroup, runtime, container_id, "
				 "pod_uid, pod, namespace, container, job, job_user, user)", v);
		else if (check == ITEM_GROUP_LABEL && !str_is_label_name(v) && strcmp(v, "...") != 0)
			snprintf(why, sizeof why, "\"%.60s\" is not a label name (or \"...\" for all)", v);
		else if (check == ITEM_MATCHER) {
			struct alert_matcher m;
			char merr[400];
			if (alert_matcher_parse(v, &m, merr, sizeof merr) != 0)
				snprintf(why, sizeof why, "%s", merr);
			alert_matcher_free(&m);
		}
		if (why[0]) {
			parse_err(p, ev.start_mark, "%s: %s", path, why);
			yaml_event_delete(&ev);
			goto out;
		}
		if (!paths)
			memcpy(tmp + n * elem, v, vlen);
		yaml_event_delete(&ev);
	}
done:
	memcpy(member, tmp, size);
	rc = 0;
out:
	free(tmp);
	return rc;
}

/* A mapping of label names to values into member[n][2][elem]. */
/* An HTTP header name: RFC 9110's token. */
static bool header_name_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

static int parse_label_map(struct parse *p, const struct key_spec *k, const char *path,
			   const yaml_event_t *val, char *member)
{
	size_t cap = k->size / (2 * k->elem);
	char *tmp = calloc(1, k->size);
	int rc = GPULSE_EPARSE;
	if (!tmp)
		return GPULSE_ENOMEM;
	if (val->type == YAML_SCALAR_EVENT && scalar_is_null(val))
		goto done;
	if (val->type != YAML_MAPPING_START_EVENT) {
		parse_err(p, val->start_mark, "%s: expected %s, got %s", path, kind_what(k->kind),
			  event_what(val));
		goto out;
	}
	for (size_t n = 0;; n++) {
		yaml_event_t key, v;
		if (!next_event(p, &key))
			goto out;
		if (key.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&key);
			break;
		}
		const char *name = key.type == YAML_SCALAR_EVENT ? (const char *)key.data.scalar.value : "";
		size_t nlen = key.type == YAML_SCALAR_EVENT ? key.data.scalar.length : 0;
		char why[256] = "";
		bool users = k->kind == KIND_USER_MAP;
		const char *what = users ? "user" : "label";
		if (key.type != YAML_SCALAR_EVENT || strlen(name) != nlen)
			snprintf(why, sizeof why, "%s names must be strings", what);
		else if (users && !http_basic_name_ok(name))
			snprintf(why, sizeof why, "user name \"%.60s\" must be 1 to %d bytes without "
				 "':' (Basic authentication splits there) or control characters", name,
				 HTTP_BASIC_MAX_NAME);
		else if (k->check == ITEM_HEADER && !header_name_ok(name))
			snprintf(why, sizeof why, "\"%.60s\" is not an HTTP header name (letters, "
				 "digits and !#$%%&'*+-.^_`|~)", name);
		else if (!users && k->check != ITEM_HEADER && !str_is_label_name(name))
			snprintf(why, sizeof why, "label names must match [a-zA-Z_][a-zA-Z0-9_]*");
		else if (nlen >= k->elem)
			snprintf(why, sizeof why, "%s name is too long", what);
		else if (n >= cap)
			snprintf(why, sizeof why, "more than %zu %ss", cap, what);
		for (size_t j = 0; !why[0] && j < n; j++)
			if (strcmp(tmp + (2 * j) * k->elem, name) == 0)
				snprintf(why, sizeof why, "%s \"%.60s\" is given twice", what, name);
		if (why[0]) {
			parse_err(p, key.start_mark, "%s: %s", path, why);
			yaml_event_delete(&key);
			goto out;
		}
		memcpy(tmp + (2 * n) * k->elem, name, nlen);
		if (!next_event(p, &v)) {
			yaml_event_delete(&key);
			goto out;
		}
		const char *value = v.type == YAML_SCALAR_EVENT ? (const char *)v.data.scalar.value : NULL;
		size_t vlen = value ? v.data.scalar.length : 0;
		if (!value || strlen(value) != vlen || vlen >= k->elem) {
			parse_err(p, v.start_mark, "%s.%s: the value must be a string of at most %zu bytes",
				  path, name, k->elem - 1);
			yaml_event_delete(&key);
			yaml_event_delete(&v);
			goto out;
		}
		if (users && !http_basic_hash_ok(value)) {
			char q[96];
			quote_value(q, sizeof q, value, vlen);
			parse_err(p, v.start_mark, "%s.%s: %s is not a bcrypt hash (60 characters "
				  "starting $2y$, $2b$ or $2a$ and a cost of 04 to 31, as htpasswd -nBC 10 "
				  "USER prints after the colon)", path, name, q);
			yaml_event_delete(&key);
			yaml_event_delete(&v);
			goto out;
		}
		memcpy(tmp + (2 * n + 1) * k->elem, value, vlen);
		yaml_event_delete(&key);
		yaml_event_delete(&v);
	}
done:
	memcpy(member, tmp, k->size);
	rc = 0;
out:
	free(tmp);
	return rc;
}

/* alerting.inhibit_rules: a list of mappings with source_matchers,
 * target_matchers and equal, each a list; matchers are checked here so a
 * bad one is reported at its line. */
static int parse_inhibit_rules(struct parse *p, const char *path, const yaml_event_t *val,
			       struct gpulse_config *cfg)
{
	struct config_inhibit_rule *tmp = calloc(CONFIG_MAX_INHIBIT_RULES, sizeof *tmp);
	unsigned n = 0;
	int rc = GPULSE_EPARSE;
	if (!tmp)
		return GPULSE_ENOMEM;
	if (val->type == YAML_SCALAR_EVENT && scalar_is_null(val))
		goto done;
	if (val->type != YAML_SEQUENCE_START_EVENT) {
		parse_err(p, val->start_mark, "%s: expected a list of inhibit rules, got %s", path,
			  event_what(val));
		goto out;
	}
	for (;;) {
		yaml_event_t ev;
		if (!next_event(p, &ev))
			goto out;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ev.type != YAML_MAPPING_START_EVENT || n >= CONFIG_MAX_INHIBIT_RULES) {
			parse_err(p, ev.start_mark, "%s: %s", path,
				  n >= CONFIG_MAX_INHIBIT_RULES ? "more than 8 inhibit rules"
								: "each rule must be a mapping (source_matchers, target_matchers, equal)");
			yaml_event_delete(&ev);
			goto out;
		}
		yaml_mark_t rule_mark = ev.start_mark;
		yaml_event_delete(&ev);
		char rpath[128];
		snprintf(rpath, sizeof rpath, "%s[%u]", path, n);
		bool seen[3] = {false, false, false};
		for (;;) {
			yaml_event_t key;
			if (!next_event(p, &key))
				goto out;
			if (key.type == YAML_MAPPING_END_EVENT) {
				yaml_event_delete(&key);
				break;
			}
			static const char *const names[3] = {"source_matchers", "target_matchers", "equal"};
			int which = -1;
			for (int i = 0; i < 3 && key.type == YAML_SCALAR_EVENT; i++)
				if (strcmp((const char *)key.data.scalar.value, names[i]) == 0)
					which = i;
			if (which < 0 || seen[which]) {
				char q[96] = "";
				if (key.type == YAML_SCALAR_EVENT)
					quote_value(q, sizeof q, (const char *)key.data.scalar.value,
						    key.data.scalar.length);
				parse_err(p, key.start_mark, which < 0
					  ? "%s: unknown key %s (known keys: source_matchers, target_matchers, equal)"
					  : "%s: duplicate key %s", rpath, q);
				yaml_event_delete(&key);
				goto out;
			}
			seen[which] = true;
			yaml_event_delete(&key);
			yaml_event_t v;
			if (!next_event(p, &v))
				goto out;
			char kpath[160];
			snprintf(kpath, sizeof kpath, "%s.%s", rpath, names[which]);
			struct config_inhibit_rule *r = &tmp[n];
			int lrc = which == 0 ? parse_str_list(p, kpath, &v, (char *)r->source_matchers,
							     sizeof r->source_matchers,
							     sizeof r->source_matchers[0], ITEM_MATCHER)
				: which == 1 ? parse_str_list(p, kpath, &v, (char *)r->target_matchers,
							      sizeof r->target_matchers,
							      sizeof r->target_matchers[0], ITEM_MATCHER)
					     : parse_str_list(p, kpath, &v, (char *)r->equal, sizeof r->equal,
							      sizeof r->equal[0], ITEM_LABEL_NAME);
			yaml_event_delete(&v);
			if (lrc)
				goto out;
		}
		if (!tmp[n].source_matchers[0][0]) {
			parse_err(p, rule_mark, "%s: source_matchers must name at least one matcher", rpath);
			goto out;
		}
		n++;
	}
done:
	memcpy(cfg->alerting.inhibit_rules, tmp, sizeof cfg->alerting.inhibit_rules);
	cfg->alerting.ninhibit_rules = n;
	rc = 0;
out:
	free(tmp);
	return rc;
}

static int parse_remote_write(struct parse *p, const char *path, const yaml_event_t *val,
			      struct gpulse_config *cfg);
static int parse_relabel_list(struct parse *p, const char *path, const yaml_event_t *val,
			      struct config_remote_write *rw);

/* Read the keys of a mapping whose MAPPING_START was just consumed, up to
 * and including its MAPPING_END, into `base` (the config, or a list
 * entry whose key table's offsets are relative to it). */
static int parse_section_at(struct parse *p, const struct key_spec *sec, const char *section,
			    struct gpulse_config *cfg, char *base)
{
	size_t first_line[SECTION_MAX] = {0}; /* 1-based line of each key seen */
	for (;;) {
		yaml_event_t key;
		if (!next_event(p, &key))
			return GPULSE_EPARSE;
		if (key.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&key);
			return 0;
		}
		if (key.type != YAML_SCALAR_EVENT) {
			parse_err(p, key.start_mark, "%s%skeys must be plain names, not %s",
				  section, section[0] ? ": " : "", event_what(&key));
			yaml_event_delete(&key);
			return GPULSE_EPARSE;
		}
		const char *kname = (const char *)key.data.scalar.value;
		size_t klen = key.data.scalar.length;
		int idx = -1;
		if (strlen(kname) == klen)
			for (int i = 0; i < sec->nchildren; i++)
				if (strcmp(sec->children[i].name, kname) == 0)
					idx = i;
		if (idx < 0) {
			unknown_key(p, key.start_mark, sec, section, kname, klen);
			yaml_event_delete(&key);
			return GPULSE_EPARSE;
		}
		const struct key_spec *k = &sec->children[idx];
		char path[96];
		join_path(path, sizeof path, section, k->name);
		if (first_line[idx]) {
			parse_err(p, key.start_mark, "duplicate key \"%s\" (first given at line %zu)",
				  path, first_line[idx]);
			yaml_event_delete(&key);
			return GPULSE_EPARSE;
		}
		first_line[idx] = key.start_mark.line + 1;
		yaml_event_delete(&key);

		yaml_event_t val;
		if (!next_event(p, &val))
			return GPULSE_EPARSE;
		int rc = 0;
		if (val.type == YAML_ALIAS_EVENT) {
			parse_err(p, val.start_mark, "%s: aliases (*name) are not supported here", path);
			rc = GPULSE_EPARSE;
		} else if (k->kind == KIND_SECTION) {
			if (val.type == YAML_MAPPING_START_EVENT) {
				rc = parse_section_at(p, k, path, cfg, base);
			} else if (val.type == YAML_SCALAR_EVENT && scalar_is_null(&val)) {
				rc = 0; /* "sampling:" with every key commented out */
			} else {
				char q[96] = "";
				if (val.type == YAML_SCALAR_EVENT)
					quote_value(q, sizeof q, (const char *)val.data.scalar.value,
						    val.data.scalar.length);
				parse_err(p, val.start_mark, "%s: expected a mapping of keys, got %s%s%s",
					  path, event_what(&val), q[0] ? " " : "", q);
				rc = GPULSE_EPARSE;
			}
		} else if (k->kind == KIND_PATH_LIST) {
			rc = parse_str_list(p, path, &val, base + k->offset, k->size,
					    CONFIG_PATH_LEN, ITEM_PATH);
		} else if (k->kind == KIND_STR_LIST) {
			rc = parse_str_list(p, path, &val, base + k->offset, k->size, k->elem,
					    k->check);
		} else if (k->kind == KIND_LABEL_MAP || k->kind == KIND_USER_MAP) {
			rc = parse_label_map(p, k, path, &val, base + k->offset);
		} else if (k->kind == KIND_INHIBIT_RULES) {
			rc = parse_inhibit_rules(p, path, &val, cfg);
		} else if (k->kind == KIND_REMOTE_WRITE) {
			rc = parse_remote_write(p, path, &val, cfg);
		} else if (k->kind == KIND_RELABEL_LIST) {
			rc = parse_relabel_list(p, path, &val, (struct config_remote_write *)(void *)base);
		} else if (val.type != YAML_SCALAR_EVENT) {
			parse_err(p, val.start_mark, "%s: expected %s, got %s", path,
				  kind_what(k->kind), event_what(&val));
			rc = GPULSE_EPARSE;
		} else {
			char why[256];
			if (store_scalar(k, base + k->offset, (const char *)val.data.scalar.value,
					 val.data.scalar.length, scalar_is_null(&val), why, sizeof why)) {
				parse_err(p, val.start_mark, "%s: %s", path, why);
				rc = GPULSE_EPARSE;
			} else if (k->path != PATH_NONE) {
				rc = take_path(p, k, path, base + k->offset, val.start_mark);
			}
		}
		yaml_event_delete(&val);
		if (rc)
			return rc;
	}
}

static int parse_section(struct parse *p, const struct key_spec *sec, const char *section,
			 struct gpulse_config *cfg)
{
	return parse_section_at(p, sec, section, cfg, (char *)cfg);
}

/* A list of mappings, each read by `sec` into entries of `elem` bytes at
 * `first` (at most `max`; *n set to how many). `init` fills an entry's
 * defaults before its keys are read. */
static int parse_entry_list(struct parse *p, const char *path, const yaml_event_t *val,
			    const struct key_spec *sec, const char *what, char *first, size_t elem,
			    unsigned max, unsigned *n, void (*init)(void *),
			    struct gpulse_config *cfg, yaml_mark_t *marks)
{
	*n = 0;
	if (val->type == YAML_SCALAR_EVENT && scalar_is_null(val))
		return 0;
	if (val->type != YAML_SEQUENCE_START_EVENT) {
		parse_err(p, val->start_mark, "%s: expected a list of %s, got %s", path, what,
			  event_what(val));
		return GPULSE_EPARSE;
	}
	for (;;) {
		yaml_event_t ev;
		if (!next_event(p, &ev))
			return GPULSE_EPARSE;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return 0;
		}
		if (ev.type != YAML_MAPPING_START_EVENT || *n >= max) {
			if (*n >= max)
				parse_err(p, ev.start_mark, "%s: more than %u %s", path, max, what);
			else
				parse_err(p, ev.start_mark, "%s: each of the %s must be a mapping of keys",
					  path, what);
			yaml_event_delete(&ev);
			return GPULSE_EPARSE;
		}
		if (marks)
			marks[*n] = ev.start_mark;
		yaml_event_delete(&ev);
		char epath[112]; /* the path (under 96) and "[index]" */
		snprintf(epath, sizeof epath, "%s[%u]", path, *n);
		char *e = first + (size_t)*n * elem;
		init(e);
		int rc = parse_section_at(p, sec, epath, cfg, e);
		if (rc)
			return rc;
		(*n)++;
	}
}

static void relabel_init(void *e)
{
	struct config_relabel *r = e;
	memset(r, 0, sizeof *r);
	snprintf(r->separator, sizeof r->separator, ";");
	snprintf(r->regex, sizeof r->regex, "(.*)");
	snprintf(r->replacement, sizeof r->replacement, "$1");
	snprintf(r->action, sizeof r->action, "replace");
}

/* Prometheus's defaults for a remote_write entry. */
static void remote_write_init(void *e)
{
	struct config_remote_write *r = e;
	memset(r, 0, sizeof *r);
	r->remote_timeout_ns = 30 * NS_PER_SEC;
	r->queue_config.capacity = 10000;
	r->queue_config.max_shards = 200;
	r->queue_config.min_shards = 1;
	r->queue_config.max_samples_per_send = 2000;
	r->queue_config.batch_send_deadline_ns = 5 * NS_PER_SEC;
	r->queue_config.min_backoff_ns = 30 * NS_PER_MS;
	r->queue_config.max_backoff_ns = 5 * NS_PER_SEC;
	r->queue_max_bytes = 256u << 20;
	snprintf(r->mode, sizeof r->mode, "raw");
	r->summary.interval_ns = 60 * NS_PER_SEC;
	r->summary.quantile = 0.95;
	r->summary.anomaly_threshold = 4;
}

static int parse_relabel_list(struct parse *p, const char *path, const yaml_event_t *val,
			      struct config_remote_write *rw)
{
	yaml_mark_t marks[CONFIG_MAX_RELABEL];
	int rc = parse_entry_list(p, path, val, &relabel_section, "relabel configs",
				  (char *)rw->write_relabel_configs, sizeof rw->write_relabel_configs[0],
				  CONFIG_MAX_RELABEL, &rw->nrelabel, relabel_init, NULL, marks);
	for (unsigned j = 0; rc == 0 && j < rw->nrelabel; j++) {
		/* Compile each rule now so a bad one is refused at its line. */
		struct relabel_spec sp;
		config_relabel_spec(&rw->write_relabel_configs[j], &sp);
		struct relabel *rl = NULL;
		char why[400];
		int xrc = relabel_compile(&sp, 1, &rl, why, sizeof why);
		relabel_free(rl);
		if (xrc) {
			parse_err(p, marks[j], "%s[%u]: %s", path, j,
				  strstr(why, ": ") ? strstr(why, ": ") + 2 : why);
			rc = GPULSE_EPARSE;
		}
	}
	return rc;
}

static int parse_remote_write(struct parse *p, const char *path, const yaml_event_t *val,
			      struct gpulse_config *cfg)
{
	yaml_mark_t marks[CONFIG_MAX_REMOTE_WRITE];
	memset(cfg->remote_write, 0, sizeof cfg->remote_write);
	int rc = parse_entry_list(p, path, val, &rw_section, "remote_write entries",
				  (char *)cfg->remote_write, sizeof cfg->remote_write[0],
				  CONFIG_MAX_REMOTE_WRITE, &cfg->nremote_write, remote_write_init, cfg,
				  marks);
	for (unsigned i = 0; rc == 0 && i < cfg->nremote_write; i++) {
		const struct config_remote_write *r = &cfg->remote_write[i];
		yaml_mark_t mark = marks[i];
		if (strncmp(r->url, "http://", 7) != 0 && strncmp(r->url, "https://", 8) != 0) {
			parse_err(p, mark, "%s[%u].url: %s; it must start with http:// or https://",
				  path, i, r->url[0] ? "a URL" : "missing");
			rc = GPULSE_EPARSE;
		}
		for (unsigned j = 0; rc == 0 && j < i; j++)
			if (r->name[0] && strcmp(r->name, cfg->remote_write[j].name) == 0) {
				parse_err(p, mark, "%s[%u].name: \"%s\" is the name of entry %u too", path,
					  i, r->name, j);
				rc = GPULSE_EPARSE;
			}
		if (rc == 0 && r->basic_auth.password[0] && r->basic_auth.password_file[0]) {
			parse_err(p, mark, "%s[%u].basic_auth: password and password_file are mutually "
				  "exclusive", path, i);
			rc = GPULSE_EPARSE;
		}
		if (rc == 0 && r->authorization.credentials[0] && r->authorization.credentials_file[0]) {
			parse_err(p, mark, "%s[%u].authorization: credentials and credentials_file are "
				  "mutually exclusive", path, i);
			rc = GPULSE_EPARSE;
		}
		if (rc == 0 && r->basic_auth.username[0] &&
		    (r->authorization.credentials[0] || r->authorization.credentials_file[0])) {
			parse_err(p, mark, "%s[%u]: at most one of basic_auth and authorization", path, i);
			rc = GPULSE_EPARSE;
		}
		if (rc == 0 && strcmp(r->mode, "raw") != 0 && strcmp(r->mode, "summary") != 0) {
			parse_err(p, mark, "%s[%u].mode: \"%s\" is not raw or summary", path, i, r->mode);
			rc = GPULSE_EPARSE;
		}
		if (rc == 0 && r->summary.quantile >= 1) {
			parse_err(p, mark, "%s[%u].summary.quantile: must be below 1", path, i);
			rc = GPULSE_EPARSE;
		}
		if (rc == 0 && r->queue_config.min_backoff_ns > r->queue_config.max_backoff_ns) {
			parse_err(p, mark, "%s[%u].queue_config: min_backoff is above max_backoff", path, i);
			rc = GPULSE_EPARSE;
		}
	}
	return rc;
}

void config_relabel_spec(const struct config_relabel *c, struct relabel_spec *out)
{
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < sizeof c->source_labels / sizeof c->source_labels[0] &&
			   c->source_labels[i][0]; i++)
		out->source_labels[out->nsource++] = c->source_labels[i];
	out->separator = c->separator;
	out->regex = c->regex;
	out->target_label = c->target_label[0] ? c->target_label : NULL;
	out->replacement = c->replacement;
	out->action = c->action;
	out->modulus = c->modulus;
}

static int parse_stream(struct parse *p, struct gpulse_config *cfg)
{
	yaml_event_t ev;
	int rc = GPULSE_EPARSE;
	if (!next_event(p, &ev))
		return GPULSE_EPARSE;
	yaml_event_delete(&ev); /* STREAM_START */

	if (!next_event(p, &ev))
		return GPULSE_EPARSE;
	if (ev.type == YAML_STREAM_END_EVENT) { /* empty, or only comments */
		yaml_event_delete(&ev);
		return 0;
	}
	yaml_event_delete(&ev); /* DOCUMENT_START */

	if (!next_event(p, &ev))
		return GPULSE_EPARSE;
	if (ev.type == YAML_MAPPING_START_EVENT) {
		yaml_event_delete(&ev);
		if ((rc = parse_section(p, &config_root, "", cfg)))
			return rc;
	} else if (ev.type == YAML_SCALAR_EVENT && scalar_is_null(&ev)) {
		yaml_event_delete(&ev);
	} else {
		parse_err(p, ev.start_mark,
			  "the file must be a mapping of keys (like \"listen: 127.0.0.1:9401\"), not %s",
			  event_what(&ev));
		yaml_event_delete(&ev);
		return GPULSE_EPARSE;
	}

	if (!next_event(p, &ev))
		return GPULSE_EPARSE;
	yaml_event_delete(&ev); /* DOCUMENT_END */
	if (!next_event(p, &ev))
		return GPULSE_EPARSE;
	if (ev.type == YAML_DOCUMENT_START_EVENT) {
		parse_err(p, ev.start_mark,
			  "a second YAML document; gpulse reads one (remove this \"---\" and what follows)");
		rc = GPULSE_EPARSE;
	} else {
		rc = 0; /* STREAM_END */
	}
	yaml_event_delete(&ev);
	return rc;
}

/* The first pass: read every event, so that a YAML mistake is reported
 * where it is, even when libyaml has already handed out a value before it
 * (as with "key: a: b"), and a second document is refused before its
 * first is looked at. */
static int check_syntax(struct parse *p)
{
	int documents = 0;
	for (;;) {
		yaml_event_t ev;
		if (!next_event(p, &ev))
			return GPULSE_EPARSE;
		yaml_event_type_t type = ev.type;
		if (type == YAML_DOCUMENT_START_EVENT && ++documents > 1) {
			parse_err(p, ev.start_mark,
				  "a second YAML document; gpulse reads one (remove this \"---\" and what follows)");
			yaml_event_delete(&ev);
			return GPULSE_EPARSE;
		}
		yaml_event_delete(&ev);
		if (type == YAML_STREAM_END_EVENT)
			return 0;
	}
}

/* Run `pass` over a fresh libyaml parser on p's input. */
static int run_pass(struct parse *p, struct gpulse_config *cfg)
{
	if (!yaml_parser_initialize(&p->yp)) {
		str_errf(p->err, p->errlen, "%s: out of memory", p->name);
		return GPULSE_ENOMEM;
	}
	yaml_parser_set_input_string(&p->yp, (const unsigned char *)p->data, p->len);
	int rc = cfg ? parse_stream(p, cfg) : check_syntax(p);
	yaml_parser_delete(&p->yp);
	return rc;
}

/* config_parse, and with `check_files` the files the text names are
 * checked too (config_load_file). */
static int parse_text(struct gpulse_config *c, const char *data, size_t len, const char *name,
		      bool check_files, char *err, size_t errlen)
{
	struct parse p = {.name = name ? name : "config", .data = data ? data : "",
			  .len = data ? len : 0, .err = err, .errlen = errlen,
			  .check_files = check_files};
	parse_dir(&p);
	if (err && errlen)
		err[0] = '\0';
	int rc = run_pass(&p, NULL);
	if (rc)
		return rc;
	/* Parse into a copy so a file that fails halfway changes nothing. */
	struct gpulse_config tmp = *c;
	rc = run_pass(&p, &tmp);
	if (rc == 0)
		*c = tmp;
	return rc;
}

int config_parse(struct gpulse_config *c, const char *data, size_t len, const char *name,
		 char *err, size_t errlen)
{
	return parse_text(c, data, len, name, false, err, errlen);
}

int config_load_file(struct gpulse_config *c, const char *path, char *err, size_t errlen)
{
	int rc = 0;
	char *data = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		str_errf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
		str_errf(err, errlen, "cannot read config file %s: %s", path,
			S_ISDIR(st.st_mode) ? "it is a directory" : strerror(errno));
		rc = GPULSE_EIO;
		goto out;
	}
	/* Read one byte past the bound so a file that grows (or a pipe)
	 * cannot slip past the size check. */
	data = malloc(CONFIG_MAX_FILE_BYTES + 1);
	if (!data) {
		rc = GPULSE_ENOMEM;
		str_errf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	size_t len = 0;
	while (len < CONFIG_MAX_FILE_BYTES + 1) {
		ssize_t n = read(fd, data + len, CONFIG_MAX_FILE_BYTES + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			str_errf(err, errlen, "cannot read config file %s: %s", path, strerror(errno));
			rc = GPULSE_EIO;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > CONFIG_MAX_FILE_BYTES) {
		str_errf(err, errlen, "%s: config file is larger than %d bytes; refusing it", path,
			CONFIG_MAX_FILE_BYTES);
		rc = GPULSE_ELIMIT;
		goto out;
	}
	rc = parse_text(c, data, len, path, true, err, errlen);
out:
	free(data);
	close(fd);
	return rc;
}

/* ---- validation --------------------------------------------------------- */

/* Read the token file with the checks the security rule asks for. */
static int read_token(const char *path, char *tok, size_t toklen, char *why, size_t whylen)
{
	if (toklen > CONFIG_TOKEN_MAX)
		toklen = CONFIG_TOKEN_MAX;
	return token_file_read(path, true, tok, toklen, why, whylen);
}

/* Check every leaf of `sec` against its range again. */
static int validate_ranges(const struct gpulse_config *c, const struct key_spec *sec,
			   const char *section, const char *name, char *err, size_t errlen)
{
	for (int i = 0; i < sec->nchildren; i++) {
		const struct key_spec *k = &sec->children[i];
		const char *member = (const char *)c + k->offset;
		char path[96], range[96];
		join_path(path, sizeof path, section, k->name);
		range_text(k, range, sizeof range);
		switch (k->kind) {
		case KIND_SECTION: {
			int rc = validate_ranges(c, k, path, name, err, errlen);
			if (rc)
				return rc;
			break;
		}
		case KIND_DURATION: {
			int64_t ns;
			memcpy(&ns, member, sizeof ns);
			if (!in_range(k, (double)ns)) {
				char d[32];
				duration_format(ns, d, sizeof d);
				str_errf(err, errlen, "%s: %s: %s is out of range (%s)", name, path, d, range);
				return GPULSE_EINVAL;
			}
			break;
		}
		case KIND_UINT: {
			unsigned u;
			memcpy(&u, member, sizeof u);
			if (!in_range(k, u)) {
				str_errf(err, errlen, "%s: %s: %u is out of range (%s)", name, path, u, range);
				return GPULSE_EINVAL;
			}
			break;
		}
		case KIND_DOUBLE: {
			double d;
			memcpy(&d, member, sizeof d);
			if (!isfinite(d) || !in_range(k, d)) {
				str_errf(err, errlen, "%s: %s: %g is out of range (%s)", name, path, d, range);
				return GPULSE_EINVAL;
			}
			break;
		}
		case KIND_LISTEN: {
			char host[CONFIG_LISTEN_LEN], why[256] = "is not terminated";
			int port;
			if (!memchr(member, '\0', k->size) ||
			    http_parse_listen(member, host, sizeof host, &port, why, sizeof why)) {
				str_errf(err, errlen, "%s: %s: %s", name, path, why);
				return GPULSE_EINVAL;
			}
			break;
		}
		case KIND_STRING:
			if (!memchr(member, '\0', k->size)) {
				str_errf(err, errlen, "%s: %s: is not terminated", name, path);
				return GPULSE_EINVAL;
			}
			break;
		case KIND_LOG_LEVEL: {
			enum log_level l;
			memcpy(&l, member, sizeof l);
			if ((int)l < LOG_ERROR || (int)l > LOG_DEBUG) {
				str_errf(err, errlen, "%s: %s: not a log level", name, path);
				return GPULSE_EINVAL;
			}
			break;
		}
		case KIND_BOOL:
			break;
		case KIND_PATH_LIST:
			for (size_t j = 0; j < k->size / CONFIG_PATH_LEN; j++)
				if (!memchr(member + j * CONFIG_PATH_LEN, '\0', CONFIG_PATH_LEN)) {
					str_errf(err, errlen, "%s: %s: is not terminated", name, path);
					return GPULSE_EINVAL;
				}
			break;
		case KIND_STR_LIST:
		case KIND_LABEL_MAP:
		case KIND_USER_MAP:
			for (size_t j = 0; j < k->size / k->elem; j++)
				if (!memchr(member + j * k->elem, '\0', k->elem)) {
					str_errf(err, errlen, "%s: %s: is not terminated", name, path);
					return GPULSE_EINVAL;
				}
			break;
		case KIND_REMOTE_WRITE:
		case KIND_RELABEL_LIST:
		case KIND_INHIBIT_RULES:
			break; /* alerting_validate checks the rules */
		}
	}
	return 0;
}

/* storage.path must name a file in a directory that exists: the store
 * would otherwise fail on its lock file's name (PATH.lock), which is not
 * what the user wrote. The store creates the file, not its directory. */
static int check_storage_dir(const char *path, const char *name, char *err, size_t errlen)
{
	char dir[CONFIG_PATH_LEN];
	struct stat st;
	if (!path[0])
		return 0;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		str_errf(err, errlen, "%s: storage.path: %s is a directory; name the database file in it "
			 "(e.g. %s/gpulse.db)", name, path, path);
		return GPULSE_EINVAL;
	}
	str_copy(dir, sizeof dir, path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return 0; /* in the working directory, which exists */
	if (slash == dir)
		slash[1] = '\0'; /* "/g.db": the root */
	else
		*slash = '\0';
	if (stat(dir, &st) != 0) {
		if (errno == ENOENT)
			str_errf(err, errlen, "%s: storage.path: directory %s does not exist (create it, or "
				 "choose another path)", name, dir);
		else
			str_errf(err, errlen, "%s: storage.path: directory %s: %s", name, dir, strerror(errno));
		return GPULSE_EINVAL;
	}
	if (!S_ISDIR(st.st_mode)) {
		str_errf(err, errlen, "%s: storage.path: %s is not a directory", name, dir);
		return GPULSE_EINVAL;
	}
	return 0;
}

int config_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen)
{
	char a[32], b[32];
	if (!name)
		name = "config";
	int rc = validate_ranges(c, &config_root, "", name, err, errlen);
	if (rc)
		return rc;

	/* Durations that must not be shorter than another. */
	const struct {
		int64_t longer, shorter;
		const char *longer_key, *shorter_key;
	} order[] = {
		{c->sampling.normal_ns, c->sampling.fast_ns, "sampling.normal", "sampling.fast"},
		{c->sampling.slow_ns, c->sampling.normal_ns, "sampling.slow", "sampling.normal"},
		{c->diagnosis.history_ns, c->diagnosis.window_ns, "diagnosis.history", "diagnosis.window"},
		{c->anomaly.halflife_ns, c->anomaly.step_ns, "anomaly.halflife", "anomaly.step"},
	};
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		if (order[i].longer >= order[i].shorter)
			continue;
		duration_format(order[i].longer, a, sizeof a);
		duration_format(order[i].shorter, b, sizeof b);
		str_errf(err, errlen, "%s: %s (%s) must not be shorter than %s (%s)", name,
			 order[i].longer_key, a, order[i].shorter_key, b);
		return GPULSE_EINVAL;
	}

	bool cert = c->http.tls_cert_file[0] != '\0', key = c->http.tls_key_file[0] != '\0';
	bool token = c->http.auth_token_file[0] != '\0';
	bool users = c->http.basic_auth_users[0][0][0] != '\0';
	if (cert != key) {
		str_errf(err, errlen, "%s: http.tls_cert_file and http.tls_key_file go together: set both or neither",
			name);
		return GPULSE_EINVAL;
	}
	if (c->http.tls_client_ca_file[0] && !cert) {
		str_errf(err, errlen, "%s: http.tls_client_ca_file needs TLS: client certificates "
			 "are asked for in the TLS handshake, so set http.tls_cert_file and "
			 "http.tls_key_file too", name);
		return GPULSE_EINVAL;
	}
	const char *tls_files[3] = {c->http.tls_cert_file, c->http.tls_key_file,
				    c->http.tls_client_ca_file};
	const char *tls_keys[3] = {"http.tls_cert_file", "http.tls_key_file",
				   "http.tls_client_ca_file"};
	for (int i = 0; cert && i < 3 && tls_files[i][0]; i++)
		if (access(tls_files[i], R_OK) != 0) {
			str_errf(err, errlen, "%s: %s: cannot read %s: %s", name, tls_keys[i], tls_files[i],
				strerror(errno));
			return GPULSE_EINVAL;
		}

	/* A host name is judged by what it resolves to when it is bound
	 * (config_to_http asks the server to), never trusted by its name. */
	if (!config_listen_is_loopback(c->listen) && !listen_host_is_name(c->listen) &&
	    !c->http.allow_insecure_remote && !(cert && key && (token || users))) {
		char missing[160] = "";
		size_t o = 0;
		const char *names[3] = {"http.tls_cert_file", "http.tls_key_file",
					"http.auth_token_file or http.basic_auth_users"};
		bool have[3] = {cert, key, token || users};
		for (int i = 0; i < 3; i++)
			if (!have[i])
				o += (size_t)snprintf(missing + o, sizeof missing - o, "%s%s",
						      o ? ", " : "", names[i]);
		str_errf(err, errlen,
			"%s: listen \"%s\" is reachable from other machines, so it needs TLS and a token "
			"(missing: %s); or set http.allow_insecure_remote: true to serve without them",
			name, c->listen, missing);
		return GPULSE_EINVAL;
	}

	if ((rc = benchd_validate(c, name, err, errlen)) != 0)
		return rc;
	if ((rc = screend_validate(c, name, err, errlen)) != 0)
		return rc;
	if ((rc = profiling_validate(c, name, err, errlen)) != 0)
		return rc;
	if ((rc = check_storage_dir(c->storage.path, name, err, errlen)) != 0)
		return rc;
	/* The file's value was checked at its line; this is --replay's. */
	char reason[256];
	if (c->replay.file[0] && check_path(c->replay.file, PATH_READ, reason, sizeof reason)) {
		str_errf(err, errlen, "%s: replay.file: %s: %s", name, c->replay.file, reason);
		return GPULSE_EINVAL;
	}
	char tok[CONFIG_TOKEN_MAX] = "", wtok[CONFIG_TOKEN_MAX] = "", why[CONFIG_PATH_LEN + 128];
	if (token) {
		rc = read_token(c->http.auth_token_file, tok, sizeof tok, why, sizeof why);
		if (rc) {
			str_errf(err, errlen, "%s: http.auth_token_file: %s", name, why);
			goto tokens_out;
		}
	}
	if (c->http.write_token_file[0]) {
		rc = read_token(c->http.write_token_file, wtok, sizeof wtok, why, sizeof why);
		if (rc) {
			str_errf(err, errlen, "%s: http.write_token_file: %s", name, why);
			goto tokens_out;
		}
		/* One token for both would make every reader a writer. */
		if (token && strcmp(tok, wtok) == 0) {
			str_errf(err, errlen, "%s: http.write_token_file: %s holds the same token as "
				 "http.auth_token_file (%s); the write token must differ from the read "
				 "token", name, c->http.write_token_file, c->http.auth_token_file);
			rc = GPULSE_EINVAL;
			goto tokens_out;
		}
	}
tokens_out:
	explicit_bzero(tok, sizeof tok);
	explicit_bzero(wtok, sizeof wtok);
	if (rc)
		return GPULSE_EINVAL;
	return alerting_validate(c, name, err, errlen);
}

/* True when key k holds the same value in a and b. Strings compare up to
 * their end: the bytes after it may differ (a flag copied over a longer
 * value from the file). */
static bool key_value_equal(const struct key_spec *k, const struct gpulse_config *a,
			    const struct gpulse_config *b)
{
	const char *ma = (const char *)a + k->offset, *mb = (const char *)b + k->offset;
	size_t elem;
	switch (k->kind) {
	case KIND_STRING:
	case KIND_LISTEN:
		return strcmp(ma, mb) == 0;
	case KIND_PATH_LIST:
		elem = CONFIG_PATH_LEN;
		break;
	case KIND_STR_LIST:
	case KIND_LABEL_MAP:
	case KIND_USER_MAP:
		elem = k->elem;
		break;
	default:
		return memcmp(ma, mb, k->size) == 0;
	}
	for (size_t off = 0; off + elem <= k->size; off += elem)
		if (strcmp(ma + off, mb + off) != 0)
			return false;
	return true;
}

static size_t restart_changes(const struct key_spec *sec, const char *prefix, enum key_reload up,
			      const struct gpulse_config *a, const struct gpulse_config *b, bool rules,
			      struct buf *out, size_t n)
{
	for (int i = 0; i < sec->nchildren; i++) {
		const struct key_spec *k = &sec->children[i];
		enum key_reload r = k->reload == RELOAD_INHERIT ? up : k->reload;
		char path[128];
		snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", k->name);
		if (k->kind == KIND_SECTION) {
			n = restart_changes(k, path, r, a, b, rules, out, n);
			continue;
		}
		if (r == RELOAD_LIVE || (r == RELOAD_RULES && !rules) || key_value_equal(k, a, b))
			continue;
		buf_printf(out, "%s%s", n ? ", " : "", path);
		n++;
	}
	return n;
}

size_t config_restart_changes(const struct gpulse_config *running, const struct gpulse_config *next,
			      bool rules, struct buf *out)
{
	return restart_changes(&config_root, "", RELOAD_RESTART, running, next, rules, out, 0);
}

bool config_equal(const struct gpulse_config *a, const struct gpulse_config *b)
{
	return strcmp(a->listen, b->listen) == 0 &&
	       strcmp(a->nvml_library, b->nvml_library) == 0 &&
	       a->sampling.fast_ns == b->sampling.fast_ns &&
	       a->sampling.normal_ns == b->sampling.normal_ns &&
	       a->sampling.slow_ns == b->sampling.slow_ns &&
	       a->sampling.call_deadline_ns == b->sampling.call_deadline_ns &&
	       a->sampling.rediscover_ns == b->sampling.rediscover_ns &&
	       a->sampling.per_process_utilization == b->sampling.per_process_utilization &&
	       a->sampling.gpm == b->sampling.gpm && a->sampling.events == b->sampling.events &&
	       a->sampling.adaptive == b->sampling.adaptive &&
	       a->sampling.fast_floor_ns == b->sampling.fast_floor_ns &&
	       a->sampling.normal_floor_ns == b->sampling.normal_floor_ns &&
	       a->sampling.quiet_ns == b->sampling.quiet_ns &&
	       strcmp(a->replay.file, b->replay.file) == 0 && a->replay.speed == b->replay.speed &&
	       a->replay.loop == b->replay.loop &&
	       strcmp(a->storage.path, b->storage.path) == 0 &&
	       a->storage.flush_interval_ns == b->storage.flush_interval_ns &&
	       a->storage.retention_ns == b->storage.retention_ns &&
	       a->storage.rollup_retention_ns == b->storage.rollup_retention_ns &&
	       a->storage.retry_interval_ns == b->storage.retry_interval_ns &&
	       a->http.max_connections == b->http.max_connections &&
	       a->http.threads == b->http.threads && a->http.timeout_ns == b->http.timeout_ns &&
	       a->http.header_timeout_ns == b->http.header_timeout_ns &&
	       a->http.max_connections_per_address == b->http.max_connections_per_address &&
	       strcmp(a->http.tls_cert_file, b->http.tls_cert_file) == 0 &&
	       strcmp(a->http.tls_key_file, b->http.tls_key_file) == 0 &&
	       strcmp(a->http.tls_client_ca_file, b->http.tls_client_ca_file) == 0 &&
	       strcmp(a->http.auth_token_file, b->http.auth_token_file) == 0 &&
	       strcmp(a->http.write_token_file, b->http.write_token_file) == 0 &&
	       a->http.rate_limit == b->http.rate_limit &&
	       a->http.rate_limit_burst == b->http.rate_limit_burst &&
	       memcmp(a->http.basic_auth_users, b->http.basic_auth_users,
		      sizeof a->http.basic_auth_users) == 0 &&
	       a->http.allow_insecure_remote == b->http.allow_insecure_remote &&
	       a->query.timeout_ns == b->query.timeout_ns &&
	       a->query.max_concurrency == b->query.max_concurrency &&
	       memcmp(a->rule_files, b->rule_files, sizeof a->rule_files) == 0 &&
	       memcmp(&a->alerting, &b->alerting, sizeof a->alerting) == 0 &&
	       a->rule_evaluation_interval_ns == b->rule_evaluation_interval_ns &&
	       a->rule_evaluation_delay_ns == b->rule_evaluation_delay_ns &&
	       memcmp(&a->anomaly, &b->anomaly, sizeof a->anomaly) == 0 &&
	       memcmp(&a->evidence, &b->evidence, sizeof a->evidence) == 0 &&
	       profiling_config_equal(a, b) && benchd_config_equal(a, b) &&
	       a->log_level == b->log_level && a->nremote_write == b->nremote_write &&
	       memcmp(a->remote_write, b->remote_write, sizeof a->remote_write) == 0;
}

/* ---- translation ---------------------------------------------------------- */

void config_to_collector(const struct gpulse_config *c, struct collector_config *out)
{
	memset(out, 0, sizeof *out);
	out->nvml_path = c->nvml_library[0] ? c->nvml_library : NULL;
	out->period_ns[TIER_FAST] = c->sampling.fast_ns;
	out->period_ns[TIER_NORMAL] = c->sampling.normal_ns;
	out->period_ns[TIER_SLOW] = c->sampling.slow_ns;
	out->call_deadline_ns = c->sampling.call_deadline_ns;
	out->rediscover_ns = c->sampling.rediscover_ns;
	out->per_process_util = c->sampling.per_process_utilization;
	out->gpm = c->sampling.gpm;
	out->events = c->sampling.events;
	config_to_adapt(c, &out->adapt);
}

void config_to_adapt(const struct gpulse_config *c, struct adapt_config *out)
{
	adapt_config_defaults(out);
	out->enabled = c->sampling.adaptive;
	out->floor_ns[TIER_FAST] = c->sampling.fast_floor_ns;
	/* The live diagnosis judges each window on GPM readings: at least
	 * two a window, so a steady GPU's windows keep their SM, tensor and
	 * DRAM evidence. */
	out->floor_ns[TIER_NORMAL] = c->sampling.normal_floor_ns;
	if (out->floor_ns[TIER_NORMAL] > c->diagnosis.window_ns / 2)
		out->floor_ns[TIER_NORMAL] = c->diagnosis.window_ns / 2;
	out->floor_ns[TIER_SLOW] = c->sampling.slow_ns;
	out->quiet_ns = c->sampling.quiet_ns;
}

uint16_t config_attrib_labels(const struct gpulse_config *c)
{
	uint16_t mask = 0;
	for (int k = 0; k < OWNER_FIELD_COUNT && c->attribution.labels[k][0]; k++) {
		int f = owner_field_by_name(c->attribution.labels[k]);
		if (f >= 0)
			mask |= (uint16_t)(1u << f);
	}
	return mask;
}

void config_to_attrib(const struct gpulse_config *c, struct attrib_config *out)
{
	memset(out, 0, sizeof *out);
	out->proc_root = c->attribution.proc_root;
	out->cgroup_root = c->attribution.cgroup_root;
	out->pod_resources_socket = c->attribution.pod_resources_socket;
	out->pod_resources_refresh_ns = c->attribution.pod_resources_refresh_ns;
	out->pod_resources_timeout_ns = c->attribution.pod_resources_timeout_ns;
	out->labels = config_attrib_labels(c);
}

/* Read one token file into buf for the server; on failure, log it and
 * leave a token no request can present, so a server started anyway fails
 * closed (no Authorization header can carry \x01). */
static int http_token(const char *key, const char *path, char *buf, size_t len,
		      const char **out)
{
	char why[CONFIG_PATH_LEN + 128] = "no room for the token";
	int rc = buf && len >= 2 ? read_token(path, buf, len, why, sizeof why) : GPULSE_EINVAL;
	if (rc) {
		log_error("%s: %s", key, why);
		static const char never[] = "\x01";
		*out = never;
		if (buf && len >= sizeof never)
			memcpy(buf, never, sizeof never);
		return rc;
	}
	*out = buf;
	return 0;
}

int config_to_http(const struct gpulse_config *c, struct http_config *out, char *token_buf,
		   size_t token_len, char *write_buf, size_t write_len)
{
	int rc = 0;
	memset(out, 0, sizeof *out);
	out->listen = c->listen;
	out->max_connections = c->http.max_connections;
	out->threads = c->http.threads;
	/* Round up: a 1.5 s timeout must not become 1 s. */
	out->timeout_s = (unsigned)((c->http.timeout_ns + NS_PER_SEC - 1) / NS_PER_SEC);
	out->header_timeout_ms = (unsigned)((c->http.header_timeout_ns + NS_PER_MS - 1) / NS_PER_MS);
	out->max_per_ip = c->http.max_connections_per_address;
	out->max_body_bytes = CONFIG_HTTP_MAX_BODY;
	out->tls_cert_file = c->http.tls_cert_file[0] ? c->http.tls_cert_file : NULL;
	out->tls_key_file = c->http.tls_key_file[0] ? c->http.tls_key_file : NULL;
	out->tls_client_ca_file = c->http.tls_client_ca_file[0] ? c->http.tls_client_ca_file : NULL;
	out->auth_token = NULL;
	out->refuse_insecure_remote = !c->http.allow_insecure_remote;
	out->insecure_remote_hint =
		"; set http.tls_cert_file, http.tls_key_file and http.auth_token_file, or set "
		"http.allow_insecure_remote: true to serve without them";
	out->write_hint = "; set http.write_token_file to allow them with its token";
	out->rate_limit = c->http.rate_limit;
	out->rate_limit_burst = c->http.rate_limit_burst;
	for (size_t i = 0; i < HTTP_BASIC_MAX_USERS && c->http.basic_auth_users[i][0][0]; i++) {
		out->basic_users[i].name = c->http.basic_auth_users[i][0];
		out->basic_users[i].hash = c->http.basic_auth_users[i][1];
		out->nbasic_users = i + 1;
	}
	if (c->http.auth_token_file[0])
		rc = http_token("http.auth_token_file", c->http.auth_token_file, token_buf, token_len,
				&out->auth_token);
	if (c->http.write_token_file[0]) {
		int wrc = http_token("http.write_token_file", c->http.write_token_file, write_buf,
				     write_len, &out->write_token);
		if (!rc)
			rc = wrc;
	}
	return rc;
}

/* ---- dump ------------------------------------------------------------------- */

/* A YAML double-quoted string. Escapes what YAML may not hold raw or would
 * fold as a line break: C0 and C1 controls, DEL, U+2028/9, U+FEFF,
 * U+FFFE/F; bytes that are not UTF-8 (possible from a command-line flag)
 * become \xNN. */
static int put_yaml_string(struct buf *b, const char *s)
{
	int rc = buf_putc(b, '"');
	const unsigned char *p = (const unsigned char *)s;
	while (!rc && *p) {
		unsigned char ch = *p;
		if (ch == '"' || ch == '\\') {
			rc = buf_printf(b, "\\%c", ch);
			p++;
		} else if (ch < 0x20 || ch == 0x7f) {
			rc = buf_printf(b, "\\x%02x", ch);
			p++;
		} else if (ch < 0x80) {
			rc = buf_putc(b, (char)ch);
			p++;
		} else {
			int n = ch >= 0xf0 && ch < 0xf5 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
			if (ch >= 0xf5)
				n = 0;
			unsigned cp = n == 2 ? ch & 0x1f : n == 3 ? ch & 0x0f : ch & 0x07;
			for (int i = 1; i < n; i++) {
				if ((p[i] & 0xc0) != 0x80) {
					n = 0;
					break;
				}
				cp = cp << 6 | (p[i] & 0x3f);
			}
			bool overlong = (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff));
			if (n == 0 || overlong || (cp >= 0xd800 && cp <= 0xdfff)) {
				rc = buf_printf(b, "\\x%02x", ch);
				p++;
			} else if ((cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
				   cp == 0xfeff || cp == 0xfffe || cp == 0xffff) {
				rc = buf_printf(b, "\\u%04x", cp);
				p += n;
			} else {
				rc = buf_append(b, p, (size_t)n);
				p += n;
			}
		}
	}
	return rc ? rc : buf_putc(b, '"');
}

/* A flow list of YAML strings: ["a", "b"]. */
static int dump_str_list(struct buf *out, const char *member, size_t size, size_t elem)
{
	int rc = buf_putc(out, '[');
	for (size_t j = 0; !rc && j < size / elem && member[j * elem]; j++) {
		if (j)
			rc = buf_puts(out, ", ");
		if (!rc)
			rc = put_yaml_string(out, member + j * elem);
	}
	return rc ? rc : buf_putc(out, ']');
}

static int dump_section(const struct gpulse_config *c, const struct key_spec *sec, int depth,
			struct buf *out);

/* A list of entries in block style, each "-" on its own line and its keys
 * below it. dump_section reads an entry through its key table, whose
 * offsets are relative to the entry (it is passed as the base). */
static int dump_entries(struct buf *out, const char *first, size_t elem, unsigned n,
			const struct key_spec *sec, int depth)
{
	int rc = buf_puts(out, n ? "\n" : " []\n");
	for (unsigned i = 0; !rc && i < n; i++) {
		rc = buf_printf(out, "%*s-\n", (depth + 1) * 2, "");
		if (!rc)
			rc = dump_section((const struct gpulse_config *)(const void *)(first + i * elem),
					  sec, depth + 2, out);
	}
	return rc;
}

static int dump_section(const struct gpulse_config *c, const struct key_spec *sec, int depth,
			struct buf *out)
{
	int rc = 0;
	for (int i = 0; !rc && i < sec->nchildren; i++) {
		const struct key_spec *k = &sec->children[i];
		const char *member = (const char *)c + k->offset;
		rc = buf_printf(out, "%*s%s:", depth * 2, "", k->name);
		if (rc)
			break;
		switch (k->kind) {
		case KIND_SECTION:
			rc = buf_putc(out, '\n');
			if (!rc)
				rc = dump_section(c, k, depth + 1, out);
			continue;
		case KIND_STRING:
		case KIND_LISTEN:
			rc = buf_putc(out, ' ');
			if (!rc)
				rc = put_yaml_string(out, member);
			break;
		case KIND_DURATION: {
			int64_t ns;
			char d[48];
			memcpy(&ns, member, sizeof ns);
			duration_format(ns, d, sizeof d);
			rc = buf_printf(out, " %s", d);
			break;
		}
		case KIND_BOOL: {
			bool v;
			memcpy(&v, member, sizeof v);
			rc = buf_puts(out, v ? " true" : " false");
			break;
		}
		case KIND_UINT: {
			unsigned v;
			memcpy(&v, member, sizeof v);
			rc = buf_printf(out, " %u", v);
			break;
		}
		case KIND_DOUBLE: {
			double v;
			memcpy(&v, member, sizeof v);
			rc = buf_putc(out, ' ');
			if (!rc)
				rc = buf_put_double(out, v);
			break;
		}
		case KIND_LOG_LEVEL: {
			static const char *const names[] = {"error", "warn", "info", "debug"};
			enum log_level l;
			memcpy(&l, member, sizeof l);
			rc = buf_printf(out, " %s", (unsigned)l < 4 ? names[l] : "info");
			break;
		}
		case KIND_PATH_LIST:
			rc = buf_puts(out, " [");
			for (size_t j = 0; !rc && j < k->size / CONFIG_PATH_LEN &&
					   member[j * CONFIG_PATH_LEN]; j++) {
				if (j)
					rc = buf_puts(out, ", ");
				if (!rc)
					rc = put_yaml_string(out, member + j * CONFIG_PATH_LEN);
			}
			if (!rc)
				rc = buf_putc(out, ']');
			break;
		case KIND_STR_LIST:
			rc = buf_putc(out, ' ');
			if (!rc)
				rc = dump_str_list(out, member, k->size, k->elem);
			break;
		case KIND_LABEL_MAP:
		case KIND_USER_MAP:
			rc = buf_puts(out, " {");
			for (size_t j = 0; !rc && j < k->size / (2 * k->elem) && member[2 * j * k->elem];
			     j++) {
				if (j)
					rc = buf_puts(out, ", ");
				if (!rc)
					rc = put_yaml_string(out, member + 2 * j * k->elem);
				if (!rc)
					rc = buf_puts(out, ": ");
				if (!rc)
					rc = put_yaml_string(out, member + (2 * j + 1) * k->elem);
			}
			if (!rc)
				rc = buf_putc(out, '}');
			break;
		case KIND_RELABEL_LIST: {
			/* c is a remote_write entry here (dump_entries). */
			const struct config_remote_write *r = (const void *)c;
			rc = dump_entries(out, (const char *)r->write_relabel_configs,
					  sizeof r->write_relabel_configs[0], r->nrelabel,
					  &relabel_section, depth);
			continue;
		}
		case KIND_REMOTE_WRITE:
			rc = dump_entries(out, (const char *)c->remote_write, sizeof c->remote_write[0],
					  c->nremote_write, &rw_section, depth);
			continue;
		case KIND_INHIBIT_RULES:
			rc = buf_puts(out, " [");
			for (unsigned j = 0; !rc && j < c->alerting.ninhibit_rules &&
					     j < CONFIG_MAX_INHIBIT_RULES; j++) {
				const struct config_inhibit_rule *r = &c->alerting.inhibit_rules[j];
				rc = buf_puts(out, j ? ", {source_matchers: " : "{source_matchers: ");
				if (!rc)
					rc = dump_str_list(out, (const char *)r->source_matchers,
							   sizeof r->source_matchers, sizeof r->source_matchers[0]);
				if (!rc)
					rc = buf_puts(out, ", target_matchers: ");
				if (!rc)
					rc = dump_str_list(out, (const char *)r->target_matchers,
							   sizeof r->target_matchers, sizeof r->target_matchers[0]);
				if (!rc)
					rc = buf_puts(out, ", equal: ");
				if (!rc)
					rc = dump_str_list(out, (const char *)r->equal, sizeof r->equal,
							   sizeof r->equal[0]);
				if (!rc)
					rc = buf_putc(out, '}');
			}
			if (!rc)
				rc = buf_putc(out, ']');
			break;
		}
		if (!rc)
			rc = buf_putc(out, '\n');
	}
	return rc;
}

int config_dump(const struct gpulse_config *c, struct buf *out)
{
	int rc = buf_puts(out, "# gpulse effective configuration (gpulsed --print-config)\n");
	return rc ? rc : dump_section(c, &config_root, 0, out);
}

/* ---- secrets as shown ---- */

static void redact_url_field(char *url, size_t size)
{
	char shown[CONFIG_PATH_LEN];
	redact_url(shown, sizeof shown, url);
	str_copy(url, size, shown);
}

static void redact_secret_field(char *s, size_t size)
{
	if (s[0])
		str_copy(s, size, REDACT_SECRET);
}

void config_redact(struct gpulse_config *c)
{
	for (size_t i = 0; i < HTTP_BASIC_MAX_USERS; i++)
		if (c->http.basic_auth_users[i][0][0])
			str_copy(c->http.basic_auth_users[i][1], CONFIG_BASIC_LEN, REDACT_SECRET);
	for (unsigned i = 0; i < c->nremote_write && i < CONFIG_MAX_REMOTE_WRITE; i++) {
		struct config_remote_write *r = &c->remote_write[i];
		redact_url_field(r->url, sizeof r->url);
		/* Header values: receivers take API keys and tenants' tokens
		 * there, and which header holds one is theirs to say. */
		for (size_t h = 0; h < CONFIG_MAX_HEADERS && r->headers[h][0][0]; h++)
			redact_secret_field(r->headers[h][1], sizeof r->headers[h][1]);
		redact_secret_field(r->basic_auth.password, sizeof r->basic_auth.password);
		redact_secret_field(r->authorization.credentials, sizeof r->authorization.credentials);
	}
	redact_url_field(c->alerting.external_url, sizeof c->alerting.external_url);
	for (size_t i = 0; i < CONFIG_MAX_URLS; i++) {
		redact_url_field(c->alerting.alertmanagers.urls[i],
				 sizeof c->alerting.alertmanagers.urls[i]);
		redact_url_field(c->alerting.webhooks.urls[i], sizeof c->alerting.webhooks.urls[i]);
	}
	redact_url_field(c->bench.fleet_prometheus_url, sizeof c->bench.fleet_prometheus_url);
}
