/* The daemon's one configuration file (YAML, etc/gpulse.yml), its safe
 * defaults, the checks that keep a bad file from starting or reloading the
 * daemon, and the translation into the plain structs the subsystems take
 * (DESIGN.md, layering: nothing below the daemon knows about this file).
 * docs/CONFIG.md documents every key. */
#ifndef GPULSE_CONFIG_H
#define GPULSE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attrib/attrib.h"
#include "common/buf.h"
#include "http/http_basic.h"
#include "common/log.h"
#include "attrib/owner.h"

struct collector_config;
struct adapt_config;
struct http_config;

#define CONFIG_MAX_FILE_BYTES (1024 * 1024) /* config_load_file refuses larger */
#define CONFIG_LISTEN_LEN 256
#define CONFIG_PATH_LEN 1024
#define CONFIG_TOKEN_MAX 4096               /* largest auth token file accepted */
#define CONFIG_BASIC_LEN 72                 /* a Basic user name or hash, NUL included */
#define CONFIG_HTTP_MAX_BODY (16u << 20)    /* largest response; matches the CLI's bound */
#define CONFIG_MAX_RULE_FILES 16            /* entries of rule_files */
/* alerting: (src/daemon/alerting.h, docs/CONFIG.md) */
#define CONFIG_URL_LEN 512
#define CONFIG_MAX_URLS 8                   /* per receiver kind */
#define CONFIG_MAX_ARGS 16                  /* alerting.exec.args */
#define CONFIG_ARG_LEN 256
#define CONFIG_MAX_LABELS 16                /* external_labels, group_by, equal */
#define CONFIG_LABEL_NAME_LEN 128
#define CONFIG_LABEL_VALUE_LEN 256
#define CONFIG_MAX_INHIBIT_RULES 8
#define CONFIG_MAX_MATCHERS 4               /* per side of an inhibit rule */
#define CONFIG_MATCHER_LEN 256

/* One Alertmanager-style inhibit rule; lists end at the first "". */
struct config_inhibit_rule {
	char source_matchers[CONFIG_MAX_MATCHERS][CONFIG_MATCHER_LEN];
	char target_matchers[CONFIG_MAX_MATCHERS][CONFIG_MATCHER_LEN];
	char equal[CONFIG_MAX_LABELS][CONFIG_LABEL_NAME_LEN];
};

/* Every value is plain data: strings are fixed arrays, so a config may be
 * copied with `=` and needs no freeing. An empty string means "not set". */
/* One remote_write entry (as Prometheus spells it; src/remote/). */
#define CONFIG_MAX_REMOTE_WRITE 4
#define CONFIG_MAX_RELABEL 16
#define CONFIG_MAX_HEADERS 16
struct config_relabel {
	char source_labels[8][128];
	char separator[64];
	char regex[512];
	char target_label[128];
	char replacement[256];
	char action[16];
	unsigned modulus;
};
struct config_remote_write {
	char url[CONFIG_URL_LEN];
	char name[128];
	int64_t remote_timeout_ns;
	char headers[CONFIG_MAX_HEADERS][2][256];
	struct {
		char username[128];
		char password[256];
		char password_file[CONFIG_PATH_LEN];
	} basic_auth;
	struct {
		char type[32];
		char credentials[1024];
		char credentials_file[CONFIG_PATH_LEN];
	} authorization;
	struct {
		char ca_file[CONFIG_PATH_LEN];
		char cert_file[CONFIG_PATH_LEN];
		char key_file[CONFIG_PATH_LEN];
		char server_name[256];
		bool insecure_skip_verify;
	} tls_config;
	struct config_relabel write_relabel_configs[CONFIG_MAX_RELABEL];
	unsigned nrelabel;
	struct {
		unsigned capacity;
		unsigned max_shards, min_shards;   /* accepted; gpulse sends with one (ordered) */
		unsigned max_samples_per_send;
		int64_t batch_send_deadline_ns;
		int64_t min_backoff_ns, max_backoff_ns;
		bool retry_on_http_429;
	} queue_config;
	char queue_dir[CONFIG_PATH_LEN];     /* "": STORE.remote-write-NAME beside the store */
	unsigned queue_max_bytes;
	char mode[16];                       /* "raw" or "summary" (edge aggregation) */
	struct {
		int64_t interval_ns;
		double quantile;
		double anomaly_threshold;
	} summary;
};

struct relabel_spec;
/* The relabel rule as relabel.h takes it; its strings point into c. */
void config_relabel_spec(const struct config_relabel *c, struct relabel_spec *out);

struct gpulse_config {
	char listen[CONFIG_LISTEN_LEN];         /* "127.0.0.1:9401", "[::1]:9401", ":9401" */
	char nvml_library[CONFIG_PATH_LEN];     /* "": libnvidia-ml.so.1 */
	struct {
		int64_t fast_ns;
		int64_t normal_ns;
		int64_t slow_ns;
		int64_t call_deadline_ns;
		int64_t rediscover_ns;
		bool per_process_utilization;
		bool gpm;
		bool events;
		/* Adaptive sampling (src/collect/adapt.h): the periods above
		 * are the ceilings; the dear reads (memory, GPM) go to these
		 * floors while their GPU is steady. */
		bool adaptive;
		int64_t fast_floor_ns;
		int64_t normal_floor_ns;
		int64_t quiet_ns;
	} sampling;
	struct {
		char file[CONFIG_PATH_LEN];     /* "": read the GPUs through NVML */
		double speed;
		bool loop;
	} replay;
	struct {
		char path[CONFIG_PATH_LEN];     /* "": no storage (no /api/v1/query) */
		int64_t flush_interval_ns;      /* head -> SQLite */
		int64_t retention_ns;           /* raw samples kept */
		int64_t rollup_retention_ns;    /* 1-minute rollups kept */
		int64_t retry_interval_ns;      /* reopening a store a disk failure kept shut */
	} storage;
	struct {
		int64_t window_ns;      /* live diagnosis window */
		int64_t history_ns;     /* held in memory for /api/v1/diagnosis */
		double memory_pressure; /* (0, 1]: share of device memory that is pressure */
	} diagnosis;
	struct {
		bool enabled;                   /* gpulse_anomaly_score (src/anomaly) */
		int64_t step_ns;                /* samples averaged per judged value */
		int64_t halflife_ns;            /* short-term baseline's memory */
		int64_t season_halflife_ns;     /* time-of-day baselines' memory */
		int64_t warmup_ns;              /* history before a baseline scores */
		unsigned season_buckets;        /* time-of-day buckets; 0: none */
	} anomaly;
	struct {                                /* a closer look on trouble (evidence.h) */
		bool enabled;
		char alerts[64][128];           /* alert names that trigger evidence */
		double anomaly_score;           /* 0: scores do not trigger */
		int64_t raise_for_ns;
		int64_t settle_ns;
		unsigned capture_seconds;       /* 0: no capture */
		unsigned per_gpu_per_hour;
		unsigned per_hour;
		unsigned max_records;
		unsigned max_bytes_mib;
		int64_t retention_ns;
		char path[CONFIG_PATH_LEN];     /* "": STORAGE_PATH.evidence, or memory only */
	} evidence;
	struct {
		unsigned max_connections;
		unsigned threads;
		int64_t timeout_ns;
		int64_t header_timeout_ns;      /* a whole first request head */
		unsigned max_connections_per_address; /* 0: the server's default */
		char tls_cert_file[CONFIG_PATH_LEN];
		char tls_key_file[CONFIG_PATH_LEN];
		char tls_client_ca_file[CONFIG_PATH_LEN]; /* mTLS: clients' CA */
		char auth_token_file[CONFIG_PATH_LEN];
		char write_token_file[CONFIG_PATH_LEN]; /* state-changing routes */
		double rate_limit;              /* requests/s per address; 0: none */
		unsigned rate_limit_burst;      /* 0: the server's default */
		/* Basic users: name, bcrypt hash; a name "" ends the list. */
		char basic_auth_users[HTTP_BASIC_MAX_USERS][2][CONFIG_BASIC_LEN];
		bool allow_insecure_remote;
	} http;
	/* The query API's limits (src/api/query.h). */
	struct {
		int64_t timeout_ns;             /* a query stops past this (503 timeout) */
		unsigned max_concurrency;       /* queries evaluated at once */
	} query;
	/* Prometheus rule files, relative paths already resolved against the
	 * config file's directory; the list ends at the first empty string. */
	char rule_files[CONFIG_MAX_RULE_FILES][CONFIG_PATH_LEN];
	int64_t rule_evaluation_interval_ns;    /* groups without their own interval */
	int64_t rule_evaluation_delay_ns;       /* a group due at t runs at t + this */
	/* Alert delivery; every list ends at its first empty string. */
	struct {
		char external_url[CONFIG_URL_LEN];
		char external_labels[CONFIG_MAX_LABELS][2][CONFIG_LABEL_VALUE_LEN]; /* name, value */
		int64_t resend_delay_ns;
		struct {
			char urls[CONFIG_MAX_URLS][CONFIG_URL_LEN];
			int64_t timeout_ns;
			char bearer_token_file[CONFIG_PATH_LEN];
			bool inhibit;           /* apply inhibit_rules before Alertmanager too */
		} alertmanagers;
		struct {
			char urls[CONFIG_MAX_URLS][CONFIG_URL_LEN];
			int64_t timeout_ns;
			char bearer_token_file[CONFIG_PATH_LEN];
		} webhooks;
		struct {
			char path[CONFIG_PATH_LEN];
			char args[CONFIG_MAX_ARGS][CONFIG_ARG_LEN];
			int64_t timeout_ns;
		} exec;
		struct {
			char path[CONFIG_PATH_LEN];     /* "": STORAGE/alert-queue, or memory only */
			unsigned max_bytes;
			unsigned max_batches;
		} queue;
		int64_t retry_backoff_ns;
		int64_t max_retry_backoff_ns;
		char group_by[CONFIG_MAX_LABELS][CONFIG_LABEL_NAME_LEN]; /* "...": every label */
		int64_t group_wait_ns;
		int64_t group_interval_ns;
		int64_t repeat_interval_ns;
		struct config_inhibit_rule inhibit_rules[CONFIG_MAX_INHIBIT_RULES];
		unsigned ninhibit_rules;
	} alerting;
	/* The injection library's socket (src/daemon/profiling.h). */
	struct {
		bool enabled;
		char socket[CONFIG_PATH_LEN];
		unsigned max_clients;
		unsigned max_clients_per_uid;           /* 0: max_clients / 4, at least 1 */
		int64_t idle_timeout_ns;                /* silence after HELLO before a close */
		char allowed_uids[CONFIG_LISTEN_LEN];   /* "": any user; "0,1000" */
		char allowed_gids[CONFIG_LISTEN_LEN];
		unsigned max_processes;
		unsigned kernels_per_process;
		unsigned max_kernel_series;
		int64_t process_expiry_ns;
		char mode[32];                          /* continuous, profiler-api, nvtx, full, off */
		double budget_percent;
		char nvtx_range[CONFIG_LISTEN_LEN];
		unsigned trace_max_events;
		int64_t store_interval_ns;
	} profiling;
	/* Who each GPU process belongs to (src/attrib/attrib.h). */
	struct {
		char labels[OWNER_FIELD_COUNT][24];     /* owner fields shown as labels */
		char proc_root[CONFIG_PATH_LEN];        /* "/proc" */
		char cgroup_root[CONFIG_PATH_LEN];      /* "/sys/fs/cgroup"; "": not read */
		char pod_resources_socket[CONFIG_PATH_LEN]; /* "": not used */
		int64_t pod_resources_refresh_ns;
		int64_t pod_resources_timeout_ns;
		double idle_sm_ratio;                   /* allocated but idle: SM part under this */
		int64_t idle_window_ns;                 /* for this long */
	} attribution;
	/* Baseline benchmarks in quiet windows (src/daemon/benchd.h). */
	struct {
		bool enabled;
		char schedule[32];                      /* weekly, daily, off, or a duration */
		int64_t idle_for_ns;                    /* idle this long with no process first */
		unsigned idle_utilization_percent;      /* at or below: idle */
		int64_t retry_interval_ns;              /* after an abort, a refusal or a failure */
		char mode[8];                           /* quick, full */
		char command[CONFIG_PATH_LEN];          /* "": gpulse beside gpulsed, else on PATH */
		char cublaslt[CONFIG_PATH_LEN];         /* "": the command's own search */
		int64_t run_timeout_ns;                 /* a run longer than this is killed */
		int64_t retention_ns;                   /* results kept in the store */
		unsigned baseline_runs;                 /* runs the rolling median takes */
		unsigned min_runs;                      /* runs needed before judging */
		double noise_floor;                     /* noise band floor, ratio */
		double noise_ceiling;                   /* noise band ceiling */
		double fleet_tolerance;                 /* below the fleet median by more */
		char fleet_prometheus_url[CONFIG_PATH_LEN]; /* "": no fleet from Prometheus */
	} bench;
	/* Silent-corruption screening in the same quiet windows
	 * (src/daemon/screend.h); bench's idle_*, retry_interval, command,
	 * run_timeout and retention apply to it too. */
	struct {
		bool enabled;
		int64_t interval_ns;                    /* a run this long after the last */
		char variant[8];                        /* quick, full */
	} screen;
	enum log_level log_level;
	/* remote_write: (src/remote/remote_write.h); nremote_write in use. */
	struct config_remote_write remote_write[CONFIG_MAX_REMOTE_WRITE];
	unsigned nremote_write;
};

/* Fill `c` with the built-in defaults (safe: loopback only, all
 * collection on). Every byte of `c` is written. */
void config_defaults(struct gpulse_config *c);

/* Parse YAML `data` (`len` bytes, need not be NUL-terminated) over the
 * values already in `c`: keys the file leaves out keep their value. `name`
 * (the file name) prefixes every message. Each value is checked alone
 * (type, syntax, range); the rules that join several values, the security
 * rule among them, are config_validate's, which the caller must run after
 * applying command-line overrides. A relative path a key names is stored
 * resolved against NAME's directory, absolute (docs/CONFIG.md, "Paths"),
 * except names a search finds; no file is looked at.
 * Returns 0, or GPULSE_EPARSE with one line "NAME:LINE:COL: problem"
 * (1-based) in `err`; `c` is then unchanged. */
int config_parse(struct gpulse_config *c, const char *data, size_t len, const char *name,
		 char *err, size_t errlen);

/* Read `path` (at most CONFIG_MAX_FILE_BYTES) and config_parse it over
 * `c`, checking also that each file it names for gpulsed to read or run
 * (replay.file, rule_files, TLS, token and secret files, exec programs)
 * is there and readable: "PATH:LINE:COL: KEY: FILE: No such file or
 * directory". GPULSE_EIO, GPULSE_ELIMIT or GPULSE_EPARSE with one line in
 * `err`; `c` is unchanged on error. Does not validate. */
int config_load_file(struct gpulse_config *c, const char *path, char *err, size_t errlen);

/* Check every range again (command-line overrides bypass the parser),
 * that replay.file (--replay's) is a readable file, and
 * the rules that join values: normal >= fast, slow >= normal, TLS cert
 * and key given together, and the security rule: a listen address that is
 * not loopback needs tls_cert_file, tls_key_file and auth_token_file unless
 * allow_insecure_remote is true. A numeric address is judged here; a host
 * name ("localhost" too) only when http_server_start resolves it, by every
 * address it resolves to, so this passes it. A configured auth_token_file
 * or write_token_file must be a regular, non-empty file that is not
 * world-readable, and the two must hold different tokens. `name` prefixes the
 * message ("gpulse.yml: ..."). 0 or GPULSE_EINVAL with one line in `err`. */
int config_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen);

/* True when `listen` is a numeric loopback address (127.0.0.0/8, ::1,
 * ::ffff:127.x.x.x). ":9401" (all interfaces) is not loopback, and neither
 * is any host name, "localhost" included: a name is judged when the HTTP
 * server resolves and binds it (config_to_http). */
bool config_listen_is_loopback(const char *listen);

/* Append to `out` the dotted names of the keys, ", " between them, whose
 * values differ between `running` and `next` and that a reload does not
 * apply: the keys docs/CONFIG.md marks restart, and, when `rules` (rules
 * are evaluated), alerting.external_url and alerting.external_labels,
 * which the rules read only at start. Returns how many. */
size_t config_restart_changes(const struct gpulse_config *running, const struct gpulse_config *next,
			      bool rules, struct buf *out);

/* Field-by-field equality (for "reload: nothing changed"). */
bool config_equal(const struct gpulse_config *a, const struct gpulse_config *b);

/* Fill the collector's struct. Its strings point into `c`, which must
 * outlive `out`. */
void config_to_collector(const struct gpulse_config *c, struct collector_config *out);
/* The adaptive sampling part of the sampling section (floors, quiet). */
void config_to_adapt(const struct gpulse_config *c, struct adapt_config *out);
/* attribution: as attrib_open takes it (strings borrowed from c). */
void config_to_attrib(const struct gpulse_config *c, struct attrib_config *out);
/* attribution.labels as OWNER_* bits. */
uint16_t config_attrib_labels(const struct gpulse_config *c);

/* Fill the HTTP server's struct and read the auth token file into
 * `token_buf` and the write token file into `write_buf` (trailing
 * whitespace removed; each buffer may be NULL when its file is not set).
 * Strings point into `c` and the buffers, which must outlive `out`. Returns 0, or GPULSE_EIO /
 * GPULSE_EINVAL when a configured token file cannot be read (unreadable,
 * empty, too long for its buffer, world-readable): that token is then set
 * to a value no request can present (a control character, which HTTP
 * headers cannot carry), so a server started anyway fails closed. Unless
 * allow_insecure_remote, the server is told to refuse a listen that
 * resolves beyond loopback without TLS and a token (the security rule for
 * host names, which config_validate cannot judge). */
int config_to_http(const struct gpulse_config *c, struct http_config *out, char *token_buf,
		   size_t token_len, char *write_buf, size_t write_len);

/* Append the effective configuration as YAML that config_parse reads back
 * to the same values (gpulsed --print-config). 0 or the buf's error. */
int config_dump(const struct gpulse_config *c, struct buf *out);

/* Mask c's secrets in place, as /api/v1/status/config shows them (and as
 * Prometheus shows its own): passwords, credentials, the users' bcrypt
 * hashes and every remote_write header value become "<secret>"; every URL
 * is shown as redact_url writes it (its password and query values
 * "xxxxx"). For a copy of the configuration: a masked one no longer
 * works. */
void config_redact(struct gpulse_config *c);

/* ---- the sections whose programs live in other files -----------------
 * Their defaults, the checks the key table cannot make, and their
 * comparison for a reload, here with the rest of the configuration, so
 * that config.c calls nothing of the programs that read it (alerting.c,
 * benchd.c, profiling.c, which use this file). */

/* Entries of a fixed list of strings (char[n][elem]) before the first
 * empty one. CONFIG_LIST_LEN(c->alerting.group_by). */
size_t config_list_len(const char *base, size_t n, size_t elem);
#define CONFIG_LIST_LEN(arr) \
	config_list_len((const char *)(arr), sizeof(arr) / sizeof((arr)[0]), sizeof((arr)[0]))

/* The defaults of c->alerting: no receivers, resend_delay 1m, group_by
 * [alertname], group_wait 30s, group_interval 5m, repeat_interval 4h,
 * 64 MiB / 10000 batches of queue, back-off 500ms..1m, and the inhibit
 * rule that silences the other alerts of a GPU that is down or lost. */
void config_alerting_defaults(struct gpulse_config *c);
/* The checks of the alerting section that config_parse cannot make alone:
 * URL schemes, the exec path (absolute, executable), token files
 * (readable, not world-readable), "..." alone in group_by, back-off
 * order, matchers. 0 or GPULSE_EINVAL with "NAME: alerting.KEY: why". */
int alerting_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen);
/* Number of receivers configured in `c`. */
size_t alerting_receiver_count(const struct gpulse_config *c);

void benchd_config_defaults(struct gpulse_config *c);
/* schedule is weekly, daily, off or a duration of at least a minute;
 * mode is quick or full; noise_floor <= noise_ceiling. 0 or
 * GPULSE_EINVAL with "NAME: bench.KEY: ..." in err. */
int benchd_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen);
bool benchd_config_equal(const struct gpulse_config *a, const struct gpulse_config *b);
/* The schedule's period in ns (0: off). */
int64_t benchd_schedule_ns(const char *schedule);
/* The screen section: variant is quick or full. 0 or GPULSE_EINVAL with
 * "NAME: screen.KEY: ..." in err. */
int screend_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen);

/* The profiling section's defaults (config_defaults calls it). */
void profiling_config_defaults(struct gpulse_config *c);
/* The checks that the key table cannot make: mode is a known name, nvtx
 * mode has a range, allowed_uids/gids are id lists. 0 or GPULSE_EINVAL
 * with "NAME: profiling.KEY: ..." in err. */
int profiling_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen);
bool profiling_config_equal(const struct gpulse_config *a, const struct gpulse_config *b);

#endif
