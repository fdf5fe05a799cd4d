/* The alert state machine of one alerting rule, with Prometheus's
 * semantics (rules/alerting.go): each evaluation's result vector makes
 * alerts pending (active since then), pending ones fire once they have
 * been active for `for`, a firing alert whose series disappears resolves
 * (or stays firing for `keep_firing_for`), resolved alerts are kept for
 * 15 minutes so they are re-sent as resolved, and a series that comes
 * back after resolving starts a new alert. Labels are the series' labels
 * without __name__, then the rule's (templated; an empty value removes
 * the label), then alertname; annotations are templated (template.h).
 *
 * gpulse adds flap holding: an alert whose firing state toggled more than
 * `flap_max_toggles` times within `flap_window_ms` is held firing instead
 * of resolving, until its condition has not changed for the window.
 *
 * Used by the daemon's engine (engine.c, over the store) and by the rule
 * unit tests (rules_file.c / rules_test.c, over a memstore). Knows nothing
 * of storage, delivery or HTTP. Not thread-safe: the caller serializes. */
#ifndef GPULSE_RULES_ALERT_STATE_H
#define GPULSE_RULES_ALERT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "promql/eval.h"
#include "rules/rules_file.h"

#define ALERT_RESOLVED_RETENTION_MS (15 * 60 * 1000) /* Prometheus's resolvedRetention */
#define ALERT_MAX_PER_RULE 10000     /* active alerts of one rule; more: the evaluation fails */
#define ALERT_FLAP_RING 64           /* toggle times remembered per alert */
#define ALERT_DEFAULT_FLAP_TOGGLES 4 /* more toggles than this within the window: held */
#define ALERT_DEFAULT_FLAP_WINDOW_MS (10 * 60 * 1000)

enum alert_state { ALERT_INACTIVE, ALERT_PENDING, ALERT_FIRING };

/* "inactive", "pending", "firing". */
const char *alert_state_name(enum alert_state s);

struct alert {
	struct label *labels;      /* sorted by name, alertname included; owned */
	size_t nlabels;
	struct label *annotations; /* sorted by name; owned */
	size_t nannotations;
	uint64_t fp;                      /* alert_fingerprint(labels) */
	enum alert_state state;
	double value;
	int64_t active_at_ms;
	int64_t fired_at_ms;              /* 0: never fired */
	int64_t resolved_at_ms;           /* 0: not resolved */
	int64_t last_sent_ms;             /* 0: never sent */
	int64_t valid_until_ms;
	int64_t keep_firing_since_ms;     /* 0: not kept firing */
	/* flap holding */
	int64_t flips[ALERT_FLAP_RING];   /* times the firing state toggled, a ring */
	size_t nflips;                    /* total recorded (ring holds the last ALERT_FLAP_RING) */
	bool held;                        /* held firing by flap detection */
	bool last_cond;                   /* the series was in the last result */
	/* set by the owner (the engine caches store references here) */
	uint32_t ref_alerts, ref_for_state;
	enum alert_state ref_state;       /* the state ref_alerts was made for */
	bool refs_valid;
	bool dirty;                       /* changed since the owner last persisted it */
};

struct alert_opts {
	const struct label *ext_labels; /* $externalLabels */
	size_t next_labels;
	const char *external_url;              /* $externalURL; NULL: "" */
	/* Templates see, in $labels, the external labels the sample lacks:
	 * the labels the alert will carry when it leaves (at the edge a
	 * series has no `instance`; its alert gets the host's). Prometheus
	 * keeps $labels to the sample's, so promtool-compatible rule tests
	 * leave this off. The alert's own labels are never changed. */
	bool ext_in_template_labels;
	int flap_max_toggles;                  /* <= 0: flap holding off */
	int64_t flap_window_ms;
};

/* The alerts of one rule. */
struct alert_rule_state {
	struct alert *alerts;  /* active (pending, firing) and resolved-retained */
	size_t n, cap;
	uint64_t flaps_held_total;  /* times an alert was held by flap detection */
};

/* FNV-1a over name 0xff value 0xff ..., of labels sorted by name. */
uint64_t alert_fingerprint(const struct label *l, size_t n);

/* Apply the result of evaluating r's expression at t_ms to s: Prometheus's
 * AlertingRule.Eval. `res` is a vector or scalar (a scalar is one sample
 * with no labels). 0; GPULSE_EINVAL with err set when two samples give
 * the same label set ("vector contains metrics with the same labelset
 * after applying alert labels"); GPULSE_ELIMIT past ALERT_MAX_PER_RULE.
 * On error the state is left as it was. */
int alert_rule_eval(struct alert_rule_state *s, const struct rules_rule *r,
		    const struct promql_result *res, int64_t t_ms, const struct alert_opts *o,
		    char *err, size_t errlen);

/* Free every alert; the state may be reused (empty). */
void alert_rule_state_clear(struct alert_rule_state *s);

/* Add a restored alert (taken: its strings become the state's). Pending
 * and firing ones only; 0 or GPULSE_ELIMIT. */
int alert_rule_state_adopt(struct alert_rule_state *s, struct alert *a);

/* Prometheus's Alert.needsSending: not pending; resolved since last sent,
 * or last sent more than resend_ms ago. */
bool alert_needs_sending(const struct alert *a, int64_t t_ms, int64_t resend_ms);

/* The labels of the ALERTS (for_state false: with alertstate) or
 * ALERTS_FOR_STATE series of a, sorted, into out[max] (pointing into
 * a's strings and static names). Returns the count, or 0 if max is too
 * small. */
size_t alert_series_labels(const struct alert *a, bool for_state, struct label *out,
			   size_t max);

/* The state the rule shows in /api/v1/rules: its highest alert state. */
enum alert_state alert_rule_state_max(const struct alert_rule_state *s);

/* Append Go's strconv.FormatFloat(v, 'e', -1, 64) ("9e+01"), the form
 * of alert values in Prometheus's API. */
void alert_format_value(struct buf *b, double v);

/* Append RFC 3339 with nanosecond-style precision as Prometheus writes
 * activeAt ("2026-11-29T18:00:00.123Z"; Go's zero time for 0). */
void alert_format_time(struct buf *b, int64_t t_ms);

/* Append one alert as Prometheus's API object {"labels", "annotations",
 * "state", "activeAt", "value"[, "keepFiringSince"]}. */
void alert_write_json(struct buf *b, const struct alert *a);

/* Serialize a (for the store's "alert" records) and read it back. Load:
 * 0 and *out filled (free with alert_free), or GPULSE_EPARSE. */
int alert_to_json(const struct alert *a, struct buf *b);
int alert_from_json(const char *json, struct alert *out);
void alert_free(struct alert *a);

#endif
