/* gpulsed's alert delivery glue: the `alerting:` section of the
 * configuration (docs/CONFIG.md) turned into src/alert's notify_config,
 * the notifier's lifetime (start, SIGHUP reload, stop), the sink the rule
 * engine calls, and the self-metrics callback. Nothing below the daemon
 * sees the configuration file (DESIGN.md, layering). */
#ifndef GPULSE_DAEMON_ALERTING_H
#define GPULSE_DAEMON_ALERTING_H

#include <stddef.h>

#include "daemon/config.h"
#include "alert/notice.h"

struct alerting;
struct notify_stats;

/* The queue directory `c` asks for: alerting.queue.path, else
 * "<storage.path>.alert-queue", else "" (memory only). */
void alerting_queue_dir(const struct gpulse_config *c, char *out, size_t outlen);

/* Start delivery for `c` (validated). Always succeeds in making an object
 * when the queue directory is usable, even with no receivers, so a reload
 * can add some. 0, GPULSE_EIO or GPULSE_EINVAL with the reason in `err`. */
int alerting_start(struct alerting **out, const struct gpulse_config *c, char *err, size_t errlen);

/* Apply the alerting section of `c` (SIGHUP). On error the running
 * delivery stays. */
int alerting_reload(struct alerting *a, const struct gpulse_config *c, char *err, size_t errlen);

/* Stop delivery, writing pending batches to the queue. Accepts NULL. */
void alerting_stop(struct alerting *a);

/* The sink for the rule engine and its context. */
alert_sink_fn *alerting_sink(void);
void *alerting_sink_ctx(struct alerting *a);

/* The self-stats callback (selfstats.h notify_stats_fn); ctx is
 * alerting_sink_ctx(a). */
void alerting_stats(void *ctx, struct notify_stats *out);

#endif
