/* One alert as the rule engine hands it to delivery: what Alertmanager's
 * API v2 `postableAlert` carries. The rule engine (src/rules) produces
 * notices after each group evaluation, with Prometheus's semantics (firing
 * alerts resent every resend delay, resolved ones sent with endsAt for 15
 * minutes); delivery (src/alert/notify.h) queues, de-duplicates, groups,
 * inhibits and sends them. This header is the whole contract between the
 * two. */
#ifndef GPULSE_ALERT_NOTICE_H
#define GPULSE_ALERT_NOTICE_H

#include <stddef.h>
#include <stdint.h>

#include "common/label.h"

struct alert_notice {
	const struct label *labels;      /* incl. alertname; sorted by name */
	size_t nlabels;
	const struct label *annotations; /* templates already expanded */
	size_t nannotations;
	int64_t starts_at_ms;   /* when the alert became active (pending) */
	int64_t ends_at_ms;     /* resolved: when; firing: now + 4 × max(resend, interval), as Prometheus */
	int resolved;           /* 1: this notice resolves the alert */
	const char *generator_url; /* may be NULL */
	uint64_t fingerprint;   /* stable hash of the label set */
};

/* Called by the rule engine with the notices of one evaluation, on the
 * engine's thread. Must not block: copy what is needed and return. The
 * notices and their strings are valid only during the call. */
typedef void alert_sink_fn(void *ctx, const struct alert_notice *notices, size_t n);

#endif
