/* One walk, several outputs: the profiling series (per process, kernel,
 * copy kind, ...) are produced once, by walkers that call an emitter, and
 * the emitter hands them to a metric sink (common/metric.h: /metrics'
 * text writer, or the self-scrape's store sink), writes them as text, or
 * appends them to the store. So /metrics and the store always carry the
 * same names and labels. */
#ifndef GPULSE_PROFILE_EMIT_H
#define GPULSE_PROFILE_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/metric.h"
#include "store/tsdb.h"

enum profile_mtype { PROFILE_GAUGE, PROFILE_COUNTER };

#define PROFILE_EMIT_MAX_LABELS 8

struct profile_emitter {
	/* Start a family; its HELP/TYPE lines are written with its first
	 * sample (a family without samples writes nothing). */
	void (*family)(struct profile_emitter *e, const char *name, enum profile_mtype type,
		       const char *help);
	/* One sample of the current family: n labels (names and values;
	 * values are UTF-8 already), and the value. */
	void (*sample)(struct profile_emitter *e, const char *const *names,
		       const char *const *values, size_t n, double v);
};

/* The /metrics writer: appends to `out` (its bound applies). */
struct profile_prom_emitter {
	struct profile_emitter e;
	struct buf *out;
	bool om;
	bool pending;
	const char *name;
	enum profile_mtype type;
	const char *help;
};
void profile_prom_emitter_init(struct profile_prom_emitter *p, struct buf *out, bool om);

/* The metric-sink writer: each sample to `sink` as one of a family
 * declared by the walker's profile_family call (its labels those the
 * sample names). The way /metrics takes the profiling and bench
 * families (daemon/profiling.h, daemon/benchd.h). */
struct profile_sink_emitter {
	struct profile_emitter e;
	struct metric_sink *sink;
	struct metric_family f;   /* the current family, labels per sample */
};
void profile_sink_emitter_init(struct profile_sink_emitter *p, struct metric_sink *sink);

/* The store writer: every sample becomes tsdb_series + tsdb_append at
 * t_ms. Series the store refuses (its max_series, a bad label) and
 * appends it refuses are counted, never fatal. */
struct profile_store_emitter {
	struct profile_emitter e;
	struct tsdb *db;
	int64_t t_ms;
	const char *name;
	uint64_t appended, refused;
};
void profile_store_emitter_init(struct profile_store_emitter *s, struct tsdb *db, int64_t t_ms);

/* Shorthand for the walkers. */
static inline void profile_family(struct profile_emitter *e, const char *name,
				  enum profile_mtype type, const char *help)
{
	e->family(e, name, type, help);
}

#endif
