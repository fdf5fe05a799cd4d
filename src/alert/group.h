/* Grouping, de-duplication and inhibition for the receivers that get
 * Alertmanager's webhook document (webhook URLs, the exec hook), with
 * Alertmanager's semantics (docs/internals/alerting.md):
 *
 * - Alerts with the same values of the group_by labels form one group
 *   (group_by_all: every label). A new group is notified group_wait after
 *   its first alert (at once when that alert started longer ago than
 *   group_wait), then checked every group_interval.
 * - A check notifies when the group has a firing alert that the last
 *   notification did not list as firing, an alert resolved since, or all
 *   alerts resolved after a notification with firing ones; otherwise only
 *   when repeat_interval has passed since the last notification. So an
 *   identical notice is never sent twice within repeat_interval.
 * - Alerts muted by an inhibit rule (matcher.h) against a firing alert
 *   are left out at each check and counted.
 * - Resolved alerts leave their group after the check that saw them; an
 *   empty group is dropped.
 *
 * A pure state machine over explicit times (ms), so tests drive it
 * without sleeping: wall times for the alerts (startsAt, endsAt: whether
 * an alert is resolved), monotonic ones for the schedule (group_wait,
 * group_interval, repeat_interval), so that a wall clock stepped back
 * delays no notification and one stepped ahead sends none early. Not
 * thread-safe: one owner (the delivery thread). */
#ifndef GPULSE_ALERT_GROUP_H
#define GPULSE_ALERT_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alert/item.h"
#include "alert/matcher.h"

#define ALERT_GROUPS_MAX_ALERTS 10000        /* default bound on held alerts */
#define ALERT_GROUPS_MAX_PER_NOTIFICATION 1000 /* more are cut (truncatedAlerts) */

struct alert_groups_config {
	const char *const *group_by;   /* label names; copied */
	size_t ngroup_by;
	bool group_by_all;             /* group_by: ['...'] */
	int64_t group_wait_ms;
	int64_t group_interval_ms;
	int64_t repeat_interval_ms;
	const struct alert_inhibit_rule *inhibit; /* borrowed; must outlive use */
	size_t ninhibit;
	size_t max_alerts;             /* 0: ALERT_GROUPS_MAX_ALERTS */
};

/* One notification, valid during the callback only. */
struct alert_group_notification {
	const char *group_key;                 /* Alertmanager's form: {}:{a="b", c="d"} */
	const struct label *group_labels;
	size_t ngroup_labels;
	const struct alert_item *const *alerts; /* firing first, then resolved */
	const bool *resolved;                  /* per alert */
	size_t nalerts;
	size_t truncated;                      /* alerts left out over the bound */
	bool firing;                           /* any alert firing: status "firing" */
};
typedef void alert_group_notify_fn(void *ctx, const struct alert_group_notification *gn);

struct alert_groups_stats {
	uint64_t alerts;                /* held now */
	uint64_t groups;
	uint64_t inhibited_total;       /* alert instances left out of notifications */
	uint64_t dropped_total;         /* alerts refused over max_alerts */
	uint64_t notifications_total;
	uint64_t deduplicated_total;    /* checks that found nothing new to send */
};

struct alert_groups;

/* 0 or GPULSE_ENOMEM. Free with alert_groups_free. */
int alert_groups_new(struct alert_groups **out, const struct alert_groups_config *c);
void alert_groups_free(struct alert_groups *g);

/* Take a new configuration at wall time wall_ms, monotonic time mono_ms.
 * When the grouping labels changed, every alert is regrouped and the new
 * groups wait group_wait. */
void alert_groups_set_config(struct alert_groups *g, const struct alert_groups_config *c,
			     int64_t wall_ms, int64_t mono_ms);

/* Add or refresh one alert (copied) at wall_ms / mono_ms. 0, GPULSE_ELIMIT
 * (over max_alerts, counted) or GPULSE_ENOMEM. */
int alert_groups_update(struct alert_groups *g, const struct alert_item *it, int64_t wall_ms,
			int64_t mono_ms);

/* True when a firing alert held now mutes `it` under the inhibit rules. */
bool alert_groups_inhibited(struct alert_groups *g, const struct alert_item *it, int64_t now_ms);

/* Check every group that is due at monotonic time mono_ms (its alerts
 * judged resolved or not at wall time wall_ms), calling `fn` for each
 * notification. Returns the monotonic time (ms) of the next check
 * (INT64_MAX when no group is held). */
int64_t alert_groups_flush(struct alert_groups *g, int64_t wall_ms, int64_t mono_ms,
			   alert_group_notify_fn *fn, void *ctx);

void alert_groups_get_stats(const struct alert_groups *g, struct alert_groups_stats *out);

#endif
