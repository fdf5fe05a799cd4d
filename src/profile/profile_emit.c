/* The emitters of profile_emit.h: a metric sink, Prometheus text (both
 * formats) and the store. */
#include "profile/profile_emit.h"

#include <string.h>

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n > k && memcmp(s + n - k, suffix, k) == 0;
}

static void prom_family(struct profile_emitter *e, const char *name, enum profile_mtype type,
			const char *help)
{
	struct profile_prom_emitter *p = (struct profile_prom_emitter *)e;
	p->pending = true;
	p->name = name;
	p->type = type;
	p->help = help;
}

static void prom_sample(struct profile_emitter *e, const char *const *names,
			const char *const *values, size_t n, double v)
{
	struct profile_prom_emitter *p = (struct profile_prom_emitter *)e;
	struct buf *b = p->out;
	if (p->pending) {
		/* OpenMetrics names a counter family without its _total. */
		int len = (int)strlen(p->name);
		if (p->om && p->type == PROFILE_COUNTER && ends_with(p->name, "_total"))
			len -= 6;
		buf_printf(b, "# HELP %.*s %s\n# TYPE %.*s %s\n", len, p->name, p->help, len,
			   p->name, p->type == PROFILE_COUNTER ? "counter" : "gauge");
		p->pending = false;
	}
	buf_puts(b, p->name);
	for (size_t i = 0; i < n; i++) {
		buf_putc(b, i ? ',' : '{');
		buf_puts(b, names[i]);
		buf_puts(b, "=\"");
		buf_put_label_value(b, values[i]);
		buf_putc(b, '"');
	}
	if (n)
		buf_putc(b, '}');
	buf_putc(b, ' ');
	buf_put_double(b, v);
	buf_putc(b, '\n');
}

void profile_prom_emitter_init(struct profile_prom_emitter *p, struct buf *out, bool om)
{
	memset(p, 0, sizeof *p);
	p->e.family = prom_family;
	p->e.sample = prom_sample;
	p->out = out;
	p->om = om;
}

static void sink_family(struct profile_emitter *e, const char *name, enum profile_mtype type,
			const char *help)
{
	struct profile_sink_emitter *p = (struct profile_sink_emitter *)e;
	p->f = (struct metric_family){
		.name = name,
		.kind = type == PROFILE_COUNTER ? METRIC_KIND_COUNTER : METRIC_KIND_GAUGE,
		.help = help,
	};
}

static void sink_sample(struct profile_emitter *e, const char *const *names,
			const char *const *values, size_t n, double v)
{
	struct profile_sink_emitter *p = (struct profile_sink_emitter *)e;
	const char *labels[METRIC_MAX_LABELS + 1];
	if (n > METRIC_MAX_LABELS)
		n = METRIC_MAX_LABELS;
	if (n)
		memcpy(labels, names, n * sizeof *names);
	labels[n] = NULL;
	/* The family's name, kind and help stay the same pointers from one
	 * sample to the next: the text writer starts a family when they
	 * change. */
	p->f.labels = labels;
	p->sink->ops->f64(p->sink, &p->f, "", values, v);
	p->f.labels = NULL;
}

void profile_sink_emitter_init(struct profile_sink_emitter *p, struct metric_sink *sink)
{
	memset(p, 0, sizeof *p);
	p->e.family = sink_family;
	p->e.sample = sink_sample;
	p->sink = sink;
}

static void store_family(struct profile_emitter *e, const char *name, enum profile_mtype type,
			 const char *help)
{
	struct profile_store_emitter *s = (struct profile_store_emitter *)e;
	(void)type;
	(void)help;
	s->name = name;
}

static void store_sample(struct profile_emitter *e, const char *const *names,
			 const char *const *values, size_t n, double v)
{
	struct profile_store_emitter *s = (struct profile_store_emitter *)e;
	struct label l[PROFILE_EMIT_MAX_LABELS + 1];
	if (n > PROFILE_EMIT_MAX_LABELS) {
		s->refused++;
		return;
	}
	l[0] = (struct label){"__name__", s->name};
	for (size_t i = 0; i < n; i++)
		l[i + 1] = (struct label){names[i], values[i]};
	uint32_t ref;
	char err[256];
	if (tsdb_series(s->db, l, n + 1, &ref, err, sizeof err) != 0 ||
	    tsdb_append(s->db, ref, s->t_ms, v) != 0) {
		s->refused++;
		return;
	}
	s->appended++;
}

void profile_store_emitter_init(struct profile_store_emitter *s, struct tsdb *db, int64_t t_ms)
{
	memset(s, 0, sizeof *s);
	s->e.family = store_family;
	s->e.sample = store_sample;
	s->db = db;
	s->t_ms = t_ms;
}
