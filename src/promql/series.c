/* promtool's series notation; see series.h. */
#include "promql/series.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "promql/parser.h"
#include "common/label.h"
#include "common/stale.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

/* A number as promtool reads one: optional sign, then a Go float, hex
 * integer excepted (the notation forbids it), or Inf / NaN. */
static bool parse_num(const char *s, size_t len, double *out)
{
	char tmp[64];
	if (len == 0 || len >= sizeof tmp)
		return false;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	const char *p = tmp;
	double sign = 1;
	if (*p == '+' || *p == '-') {
		sign = *p == '-' ? -1 : 1;
		p++;
	}
	if (strcasecmp(p, "inf") == 0) {
		*out = sign * INFINITY;
		return true;
	}
	if (strcasecmp(p, "nan") == 0) {
		*out = NAN;
		return true;
	}
	if (!isdigit((unsigned char)*p) && *p != '.')
		return false;
	for (const char *c = p; *c; c++)
		if (!isdigit((unsigned char)*c) && *c != '.' && *c != 'e' && *c != 'E' && *c != '+' && *c != '-')
			return false;
	char *end;
	errno = 0;
	double d = strtod(p, &end);
	if (*end != '\0' || end == p || (errno == ERANGE && isinf(d)))
		return false;
	*out = sign * d;
	return true;
}

struct vals {
	struct promql_series_value *v;
	size_t n, cap;
};

static int push(struct vals *vs, bool omitted, double v)
{
	if (vs->n >= PROMQL_MAX_SERIES_VALUES)
		return GPULSE_ELIMIT;
	if (vs->n == vs->cap) {
		vs->cap = vs->cap ? vs->cap * 2 : 64;
		vs->v = xrealloc(vs->v, vs->cap * sizeof *vs->v);
	}
	vs->v[vs->n].omitted = omitted;
	vs->v[vs->n].v = v;
	vs->n++;
	return 0;
}

int promql_parse_series_values(const char *text, struct promql_series_value **out, size_t *n,
			       char *err, size_t errlen)
{
	struct vals vs = {0};
	const char *p = text;
	int rc = 0;
	*out = NULL;
	*n = 0;
	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (!*p)
			break;
		const char *start = p;
		while (*p && !isspace((unsigned char)*p))
			p++;
		size_t len = (size_t)(p - start);
		/* A trailing "xN" repeats. */
		uint64_t times = 0;
		bool has_times = false;
		size_t body = len;
		for (size_t i = len; i > 0; i--) {
			if (start[i - 1] == 'x' && i < len) {
				size_t j;
				for (j = i; j < len && isdigit((unsigned char)start[j]); j++)
					;
				if (j == len && len - i <= 9) {
					has_times = true;
					times = strtoull(start + i, NULL, 10);
					body = i - 1;
				}
				break;
			}
			if (!isdigit((unsigned char)start[i - 1]))
				break;
		}
		if (body == 1 && start[0] == '_') {
			uint64_t count = has_times ? times : 1;
			for (uint64_t i = 0; i < count && !rc; i++)
				rc = push(&vs, true, 0);
		} else if (body == 5 && strncmp(start, "stale", 5) == 0) {
			uint64_t count = has_times ? times + 1 : 1;
			for (uint64_t i = 0; i < count && !rc; i++)
				rc = push(&vs, false, stale_nan());
		} else {
			/* value, or value(+|-)increment before "xN" */
			size_t split = body;
			for (size_t i = 1; i < body && has_times; i++)
				if ((start[i] == '+' || start[i] == '-') && start[i - 1] != 'e' && start[i - 1] != 'E')
					split = i;
			double a, b = 0;
			if (!parse_num(start, split, &a) ||
			    (split < body && !parse_num(start + split, body - split, &b))) {
				str_errf(err, errlen, "bad series value \"%.*s\": expected a number, \"_\" or \"stale\", optionally as a+bxn",
					 (int)(len > 40 ? 40 : len), start);
				free(vs.v);
				return GPULSE_EPARSE;
			}
			if (has_times && times >= PROMQL_MAX_SERIES_VALUES)
				rc = GPULSE_ELIMIT;
			uint64_t count = has_times ? times + 1 : 1;
			for (uint64_t i = 0; i < count && !rc; i++) {
				rc = push(&vs, false, a);
				a += b;
			}
		}
		if (rc) {
			str_errf(err, errlen, "series expands to more than %d values", PROMQL_MAX_SERIES_VALUES);
			free(vs.v);
			return rc;
		}
	}
	*out = vs.v;
	*n = vs.n;
	return 0;
}

int promql_parse_series_labels(const char *text, struct label **labels, size_t *n,
			       char *err, size_t errlen)
{
	struct promql_expr *e;
	char perr[300];
	*labels = NULL;
	*n = 0;
	int rc = promql_parse(text, &e, perr, sizeof perr);
	if (rc) {
		str_errf(err, errlen, "bad series \"%.60s\": %s", text, perr);
		return rc;
	}
	if (e->kind != PROMQL_NODE_VECTOR_SEL || e->offset_ms != 0) {
		str_errf(err, errlen, "bad series \"%.60s\": expected a metric name and labels", text);
		promql_expr_free(e);
		return GPULSE_EPARSE;
	}
	size_t bytes = e->nmatchers * sizeof(struct label);
	for (size_t i = 0; i < e->nmatchers; i++) {
		if (e->matchers[i].op != PROMQL_MATCH_EQ) {
			str_errf(err, errlen, "bad series \"%.60s\": only \"=\" may give a label", text);
			promql_expr_free(e);
			return GPULSE_EPARSE;
		}
		bytes += strlen(e->matchers[i].name) + strlen(e->matchers[i].value) + 2;
	}
	struct label *l = xmalloc(bytes ? bytes : 1);
	char *s = (char *)(l + e->nmatchers);
	size_t k = 0;
	for (size_t i = 0; i < e->nmatchers; i++) {
		if (e->matchers[i].value[0] == '\0')
			continue; /* an empty value is no label */
		size_t a = strlen(e->matchers[i].name) + 1, b = strlen(e->matchers[i].value) + 1;
		memcpy(s, e->matchers[i].name, a);
		l[k].name = s;
		s += a;
		memcpy(s, e->matchers[i].value, b);
		l[k].value = s;
		s += b;
		k++;
	}
	qsort(l, k, sizeof *l, label_cmp_name);
	for (size_t i = 1; i < k; i++)
		if (strcmp(l[i - 1].name, l[i].name) == 0) {
			str_errf(err, errlen, "bad series \"%.60s\": label \"%s\" given twice", text, l[i].name);
			free(l);
			promql_expr_free(e);
			return GPULSE_EPARSE;
		}
	promql_expr_free(e);
	*labels = l;
	*n = k;
	return 0;
}
