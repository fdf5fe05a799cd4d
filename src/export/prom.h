/* Prometheus exposition of everything the bus holds, plus the daemon's own
 * health, in the text format (0.0.4) or OpenMetrics 1.0. Families come
 * from the field table (fields.h) and a few hand-written ones; every name
 * passes `promtool check metrics`. A value the bus marks absent produces
 * no sample at all (DESIGN.md, decision 2), and a family with no samples
 * produces no lines. */
#ifndef GPULSE_PROM_H
#define GPULSE_PROM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/metric.h"
#include "collect/bus.h"
#include "collect/collector.h"
#include "nvml/nvml_shim.h"
#include "export/selfstats.h"

#define PROM_CONTENT_TYPE_TEXT "text/plain; version=0.0.4; charset=utf-8"
#define PROM_CONTENT_TYPE_OPENMETRICS \
	"application/openmetrics-text; version=1.0.0; charset=utf-8"

extern const char prom_content_type_text[];        /* PROM_CONTENT_TYPE_TEXT */
extern const char prom_content_type_openmetrics[]; /* ..._OPENMETRICS */

/* Append the exposition of every GPU on `bus` and of the daemon to `out`.
 * `nvml` (call statistics), `cs` (collector statistics) and `self` (daemon
 * statistics) may each be NULL; their families are then left out.
 * OpenMetrics when `openmetrics`, ending in "# EOF".
 *
 * Per-GPU samples carry gpu="INDEX",uuid="...",model="...". A lost GPU
 * keeps gpulse_gpu_up 0, its identity and its event counters, and loses
 * every value. gpulse_gpu_stale is 1 while the GPU's health is stale, or
 * it is up and some field is late; a lost GPU is not "stale".
 *
 * The caller counts the scrape (self->scrapes_total) and stores the time
 * the render took (self->last_scrape_ns); this function only reads them.
 * Reserves `out` once and allocates nothing per sample. Thread-safe for
 * distinct `out` buffers. Returns 0, or GPULSE_ELIMIT / GPULSE_ENOMEM when
 * `out` could not hold everything (its contents are then incomplete). */
int prom_render(struct buf *out, struct bus *bus, struct nvml_lib *nvml,
		const struct collector_stats *cs, const struct self_stats *self,
		bool openmetrics);

/* prom_render's families as samples to `s` (common/metric.h), nothing
 * rendered: the store's pass (daemon/selfscrape.h). All of them but the
 * fields' (collect/fields.h), which the store takes from the bus
 * (store/ingest.c). 0 or GPULSE_ENOMEM. */
int prom_emit(struct metric_sink *s, struct bus *bus, struct nvml_lib *nvml,
	      const struct collector_stats *cs, const struct self_stats *self);

/* A function that emits families to a metric sink (common/metric.h). */
typedef void prom_emit_fn(void *ctx, struct metric_sink *s);

/* What emit(ctx) emits, appended to `out` as /metrics writes it (text
 * format 0.0.4, or OpenMetrics without its # EOF): for the emitters
 * outside this module, their tests and tools. 0 or a status. */
int prom_emit_text(struct buf *out, bool openmetrics, prom_emit_fn *emit, void *ctx);

/* Content negotiation on an Accept header (NULL: none): true when it
 * lists application/openmetrics-text (version absent, 1.0.0 or 0.0.1)
 * with q > 0 and prefers it to text/plain, by q value and then by
 * specificity and order. Any input is safe; junk means text. */
bool prom_wants_openmetrics(const char *accept_header);

/* Write `v` to out[PROM_DOUBLE_MAX], NUL-terminated, as exactly the text
 * buf_put_double writes (shortest round-trip, "NaN", "+Inf", "-Inf"), but
 * without printf for integers and for decimals of up to 15 significant
 * digits in [1e-4, 1e15). Returns the length. Thread-safe. */
#define PROM_DOUBLE_MAX 32
size_t prom_format_double(char *out, double v);

#endif
