/* An alert as delivery keeps it: an owned copy of one struct
 * alert_notice (notice.h) with the external labels merged in, packed in
 * one allocation, and its JSON forms (Alertmanager's API v2
 * postableAlert, the webhook's alert object) with RFC 3339 times. */
#ifndef GPULSE_ALERT_ITEM_H
#define GPULSE_ALERT_ITEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "alert/notice.h"

#define ALERT_ITEM_MAX_BYTES (64 * 1024) /* a larger notice is refused */

struct alert_item {
	struct label *labels;      /* sorted by name; points into the item */
	size_t nlabels;
	struct label *annotations;
	size_t nannotations;
	int64_t starts_at_ms;
	int64_t ends_at_ms;
	bool resolved;
	const char *generator_url;       /* "" when none */
	uint64_t fingerprint;
	int64_t received_mono_ns;        /* when the sink took it (latency) */
	size_t bytes;                    /* size of the allocation */
};

/* Copy `n` into one new allocation (free with free()). `ext[next]` are
 * external labels added where the alert lacks the label (Prometheus's
 * rule); `default_generator` replaces a NULL generator_url (may be NULL).
 * 0, GPULSE_ELIMIT (larger than ALERT_ITEM_MAX_BYTES) or GPULSE_EINVAL (a
 * NULL string). */
int alert_item_new(struct alert_item **out, const struct alert_notice *n,
		   const struct label *ext, size_t next, const char *default_generator);

/* A deep copy, or NULL on out of memory. Free with free(). */
struct alert_item *alert_item_dup(const struct alert_item *it);

/* True when the alert is resolved at wall time now_ms: resolved, or its
 * endsAt has passed (Alertmanager's rule). */
bool alert_item_is_resolved(const struct alert_item *it, int64_t now_ms);

/* Append ms since the epoch as RFC 3339 UTC with milliseconds
 * ("2026-11-29T18:20:58.123Z"), quoted. */
int alert_put_time(struct buf *b, int64_t ms);

/* Append a JSON object of labels {"a":"b",...}. */
int alert_put_labels(struct buf *b, const struct label *l, size_t n);

/* Append an Alertmanager API v2 postableAlert. */
int alert_put_postable(struct buf *b, const struct alert_item *it);

/* Append a webhook alert object: status, labels, annotations, startsAt,
 * endsAt (the zero time while firing, as Alertmanager sends it),
 * generatorURL, fingerprint. `resolved` is the status to write. */
int alert_put_webhook_alert(struct buf *b, const struct alert_item *it, bool resolved);

#endif
