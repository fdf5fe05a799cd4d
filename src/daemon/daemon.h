/* gpulsed's glue: picks the source (NVML, a replay, or none yet), wires
 * the bus to the HTTP endpoints, and handles reload and shutdown. */
#ifndef GPULSE_DAEMON_H
#define GPULSE_DAEMON_H

#include <stdbool.h>

#include "daemon/config.h"

/* Command-line overrides, applied over the config file at start and again
 * at every reload. NULL / negative means "not given". */
struct daemon_overrides {
	const char *listen;
	const char *replay_file;
	double replay_speed;         /* < 0: not given */
	const char *nvml_library;
	const char *log_level;
	const char *storage_path;    /* "" turns storage off */
	bool allow_insecure_remote;  /* true: http.allow_insecure_remote on */
};

struct daemon_options {
	const char *config_path;     /* NULL: built-in defaults only */
	struct daemon_overrides ov;
	bool demo;                   /* try-it mode: without a driver replay the bundled
	                                recording; a temporary store unless storage.path
	                                is set; the rule pack unless rule_files is */
};

/* Load the configuration (file, then overrides), validate it. 0, or
 * GPULSE_EPARSE / GPULSE_EINVAL / GPULSE_EIO with one line in err. */
int daemon_load_config(const struct daemon_options *opt, struct gpulse_config *out,
		       char *err, size_t errlen);

/* Path of the bundled H200 recording, or NULL when it cannot be found.
 * Looked for in $GPULSE_DATA_DIR, BIN/../share/gpulse (as installed), the
 * source tree of the build, the install prefix and /usr/share/gpulse.
 * Static storage, overwritten by the next call. */
const char *daemon_bundled_recording(void);

/* Path of the rule pack (deploy/rules/gpulse.rules.yml, installed as
 * share/gpulse/rules/gpulse.rules.yml), looked for in the same places
 * (their rules/ folder; the source tree's deploy/rules), or NULL. Static
 * storage. */
const char *daemon_rule_pack(void);

/* Run until SIGTERM or SIGINT. Returns the process exit status. */
int daemon_run(const struct daemon_options *opt, const struct gpulse_config *cfg);

#endif
