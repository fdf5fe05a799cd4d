/* A metric family as gpulsed exports it, declared once (name, type, help,
 * label names), and the sink its samples go to. One emitting function per
 * group of families writes each sample once, to whichever sink it is
 * given: the /metrics text writer (export/prom.c) or the store's direct
 * path (daemon/selfscrape.c), so the store takes these samples without
 * /metrics being rendered and parsed back. The tables of families live
 * with the code that emits them (export/families.h). */
#ifndef GPULSE_METRIC_H
#define GPULSE_METRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum metric_kind {
	METRIC_KIND_GAUGE,
	METRIC_KIND_COUNTER,
	METRIC_KIND_HISTOGRAM, /* samples _bucket (with le), _sum, _count */
	METRIC_KIND_INFO,      /* a gauge of value 1 in the text format */
};

#define METRIC_MAX_LABELS 24

/* One family. `labels` is NULL-terminated, in the order every sample
 * carries them (a histogram's _bucket adds le after them). */
struct metric_family {
	const char *name;
	enum metric_kind kind;
	const char *help;
	const char *const *labels;
};

struct metric_sink;

/* A sample of `f` named f->name with `suffix` ("", or a histogram's
 * "_bucket", "_sum", "_count"): values[i] is the value of f->labels[i]
 * (and, for "_bucket", values[nlabels] is le's), each UTF-8 and unescaped
 * (the sink escapes as its format wants); an empty value is written in
 * the text but is no label to the store, as in Prometheus; a NULL value
 * is no label anywhere (a label this sample does not carry). f64 and u64
 * are the same sample with its value as a double or an integer (the
 * text writes an integer's digits whole). */
struct metric_sink_ops {
	void (*f64)(struct metric_sink *s, const struct metric_family *f, const char *suffix,
		    const char *const *values, double v);
	void (*u64)(struct metric_sink *s, const struct metric_family *f, const char *suffix,
		    const char *const *values, uint64_t v);
	/* Whether the sink keeps the samples of the family named `name` (a
	 * histogram's by its _bucket name), so that an emitter may leave
	 * out the work of one it does not; NULL: it keeps all. */
	bool (*wants)(struct metric_sink *s, const char *name);
};

struct metric_sink {
	const struct metric_sink_ops *ops;
	bool openmetrics;  /* the text writer's format; false for the store */
};

static inline size_t metric_family_nlabels(const struct metric_family *f)
{
	size_t n = 0;
	while (f->labels && f->labels[n])
		n++;
	return n;
}

static inline void metric_f64(struct metric_sink *s, const struct metric_family *f,
			      const char *const *values, double v)
{
	s->ops->f64(s, f, "", values, v);
}

static inline void metric_u64(struct metric_sink *s, const struct metric_family *f,
			      const char *const *values, uint64_t v)
{
	s->ops->u64(s, f, "", values, v);
}

#endif
