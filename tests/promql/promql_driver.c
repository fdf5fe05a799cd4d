/* Conformance driver for the PromQL engine: loads series written in
 * promtool's notation into a memstore, evaluates expressions at given
 * times and prints the results, either as text or as a promtool rule
 * unit-test file whose exp_samples are gpulse's answers (so
 * `promtool test rules` passing proves that Prometheus agrees).
 *
 * Spec file, one directive a line ('#' starts a comment line):
 *   interval 1m
 *   series <series> <values>          e.g. series foo{a="1"} 0+10x20
 *   eval <time> <expr>                e.g. eval 10m rate(foo[5m])
 *   range <start> <end> <step> <expr> a range query, checked step by step
 *
 * Usage: promql_driver [--yaml] SPEC */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promql/eval.h"
#include "promql/lexer.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "promql/series.h"

static int64_t parse_time(const char *s)
{
	int64_t ms;
	if (promql_parse_duration(s, strlen(s), &ms) != 0) {
		fprintf(stderr, "bad time \"%s\"\n", s);
		exit(2);
	}
	return ms;
}

/* Double-quoted YAML scalar. */
static void yaml_quote(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if (*s == '\n') {
			fputs("\\n", f);
			continue;
		}
		fputc(*s, f);
	}
	fputc('"', f);
}

static void yaml_value(FILE *f, double v)
{
	if (isnan(v))
		fputs(".nan", f);
	else if (isinf(v))
		fputs(v > 0 ? ".inf" : "-.inf", f);
	else
		fprintf(f, "%.17g", v);
}

/* name{a="b", ...} as promtool's exp_samples labels want. */
static void series_text(struct buf *b, const struct promql_result_series *s)
{
	size_t shown = 0;
	for (size_t i = 0; i < s->nlabels; i++)
		if (strcmp(s->labels[i].name, "__name__") == 0)
			buf_puts(b, s->labels[i].value);
	buf_putc(b, '{');
	for (size_t i = 0; i < s->nlabels; i++) {
		if (strcmp(s->labels[i].name, "__name__") == 0)
			continue;
		if (shown++)
			buf_puts(b, ", ");
		buf_printf(b, "%s=", s->labels[i].name);
		promql_quote(b, s->labels[i].value);
	}
	buf_putc(b, '}');
}

/* "range START END STEP EXPR": a range query; in YAML each step becomes
 * one promql_expr_test at that time, so promtool checks every step. */
static int range_directive(char *rest, int lineno, struct memstore *ms, bool yaml, FILE *out)
{
	char *f[4];
	for (int i = 0; i < 3; i++) {
		f[i] = rest;
		rest = strchr(rest, ' ');
		if (!rest) {
			fprintf(stderr, "line %d: range START END STEP EXPR\n", lineno);
			exit(2);
		}
		*rest++ = '\0';
	}
	f[3] = rest;
	int64_t start = parse_time(f[0]), end = parse_time(f[1]), step = parse_time(f[2]);
	struct promql_expr *e;
	struct promql_result *r;
	char err[512];
	if (promql_parse(f[3], &e, err, sizeof err) != 0) {
		fprintf(stderr, "line %d: %s: %s\n", lineno, f[3], err);
		return 1;
	}
	int rc = promql_eval_range(e, &memstore_queryable, ms, NULL, start, end, step, &r, err, sizeof err);
	promql_expr_free(e);
	if (rc) {
		fprintf(stderr, "line %d: %s: %s\n", lineno, f[3], err);
		return 1;
	}
	struct buf b;
	buf_init(&b, 1 << 20);
	if (!yaml)
		printf("range %s %s %s %s\n", f[0], f[1], f[2], f[3]);
	for (int64_t t = start; t <= end; t += step) {
		bool any = false;
		if (yaml) {
			fprintf(out, "      - expr: ");
			yaml_quote(out, f[3]);
			fprintf(out, "\n        eval_time: %lldms\n", (long long)t);
		}
		for (size_t i = 0; i < r->nseries; i++) {
			const struct promql_result_series *s = &r->series[i];
			for (size_t j = 0; j < s->npoints; j++) {
				if (s->points[j].t_ms != t)
					continue;
				buf_reset(&b);
				series_text(&b, s);
				if (yaml) {
					if (!any)
						fprintf(out, "        exp_samples:\n");
					fprintf(out, "          - labels: ");
					yaml_quote(out, b.data);
					fprintf(out, "\n            value: ");
					yaml_value(out, s->points[j].v);
					fputc('\n', out);
				} else {
					buf_putc(&b, ' ');
					promql_format_value(&b, s->points[j].v);
					printf("  @%lld %s\n", (long long)t, b.data);
				}
				any = true;
			}
		}
	}
	buf_free(&b);
	promql_result_free(r);
	return 0;
}

int main(int argc, char **argv)
{
	bool yaml = argc == 3 && strcmp(argv[1], "--yaml") == 0;
	if (argc != 2 && !yaml) {
		fprintf(stderr, "usage: promql_driver [--yaml] SPEC\n");
		return 2;
	}
	FILE *f = fopen(argv[argc - 1], "r");
	if (!f) {
		perror(argv[argc - 1]);
		return 2;
	}
	struct memstore *ms = memstore_new(10000, 10000000);
	int64_t interval = 60000;
	char line[8192];
	int lineno = 0, failures = 0, series_seen = 0, evals = 0;
	FILE *out = stdout;
	if (yaml)
		fprintf(out, "evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n");
	/* First pass: series; second pass: evals (promtool's order). */
	for (int pass = 0; pass < 2; pass++) {
		rewind(f);
		lineno = 0;
		if (yaml && pass == 1)
			fprintf(out, "    promql_expr_test:\n");
		while (fgets(line, sizeof line, f)) {
			lineno++;
			line[strcspn(line, "\n")] = '\0';
			char *p = line;
			while (*p == ' ' || *p == '\t')
				p++;
			if (*p == '#' || *p == '\0')
				continue;
			char *rest = strchr(p, ' ');
			if (!rest) {
				fprintf(stderr, "line %d: bad directive\n", lineno);
				return 2;
			}
			*rest++ = '\0';
			if (strcmp(p, "interval") == 0) {
				interval = parse_time(rest);
			} else if (strcmp(p, "series") == 0 && pass == 0) {
				/* the series text ends at the first space outside quotes */
				char *v = rest;
				bool inq = false, inb = false;
				for (; *v && (inq || inb || *v != ' '); v++) {
					if (*v == '"' && (v == rest || v[-1] != '\\'))
						inq = !inq;
					else if (!inq && (*v == '{' || *v == '}'))
						inb = *v == '{';
				}
				if (!*v) {
					fprintf(stderr, "line %d: series without values\n", lineno);
					return 2;
				}
				*v++ = '\0';
				struct label *labels;
				size_t nl, nv;
				struct promql_series_value *vals;
				char err[512];
				if (promql_parse_series_labels(rest, &labels, &nl, err, sizeof err) ||
				    promql_parse_series_values(v, &vals, &nv, err, sizeof err)) {
					fprintf(stderr, "line %d: %s\n", lineno, err);
					return 2;
				}
				for (size_t i = 0; i < nv; i++)
					if (!vals[i].omitted && memstore_add(ms, labels, nl, (int64_t)i * interval, vals[i].v)) {
						fprintf(stderr, "line %d: cannot store sample\n", lineno);
						return 2;
					}
				free(labels);
				free(vals);
				series_seen++;
				if (yaml) {
					fprintf(out, "      - series: ");
					yaml_quote(out, rest);
					fprintf(out, "\n        values: ");
					yaml_quote(out, v);
					fputc('\n', out);
				}
			} else if (strcmp(p, "range") == 0 && pass == 1) {
				if (range_directive(rest, lineno, ms, yaml, out) != 0)
					failures++;
				else
					evals++;
			} else if (strcmp(p, "eval") == 0 && pass == 1) {
				char *expr = strchr(rest, ' ');
				if (!expr) {
					fprintf(stderr, "line %d: eval without expression\n", lineno);
					return 2;
				}
				*expr++ = '\0';
				int64_t t = parse_time(rest);
				struct promql_expr *e;
				struct promql_result *r;
				char err[512];
				if (promql_parse(expr, &e, err, sizeof err) != 0 ||
				    promql_eval_instant(e, &memstore_queryable, ms, NULL, t, &r, err, sizeof err) != 0) {
					if (!yaml)
						printf("eval %s %s\n  error: %s\n", rest, expr, err);
					else
						fprintf(stderr, "line %d: %s: %s\n", lineno, expr, err);
					failures++;
					if (e)
						promql_expr_free(e);
					e = NULL;
					continue;
				}
				promql_expr_free(e);
				evals++;
				struct buf b;
				buf_init(&b, 1 << 20);
				if (yaml) {
					fprintf(out, "      - expr: ");
					yaml_quote(out, expr);
					fprintf(out, "\n        eval_time: %s\n", rest);
					if (r->type == PROMQL_TYPE_SCALAR) {
						fprintf(out, "        exp_samples:\n          - labels: \"{}\"\n            value: ");
						yaml_value(out, r->scalar);
						fputc('\n', out);
					} else if (r->nseries > 0) {
						fprintf(out, "        exp_samples:\n");
						for (size_t i = 0; i < r->nseries; i++) {
							buf_reset(&b);
							series_text(&b, &r->series[i]);
							fprintf(out, "          - labels: ");
							yaml_quote(out, b.data);
							fprintf(out, "\n            value: ");
							yaml_value(out, r->series[i].points[0].v);
							fputc('\n', out);
						}
					}
				} else {
					printf("eval %s %s\n", rest, expr);
					if (r->type == PROMQL_TYPE_SCALAR) {
						promql_format_value(&b, r->scalar);
						printf("  scalar %s\n", b.data);
					}
					for (size_t i = 0; i < r->nseries; i++) {
						buf_reset(&b);
						series_text(&b, &r->series[i]);
						for (size_t j = 0; j < r->series[i].npoints; j++) {
							buf_puts(&b, j ? ", " : " ");
							promql_format_value(&b, r->series[i].points[j].v);
						}
						printf("  %s\n", b.data);
					}
				}
				buf_free(&b);
				promql_result_free(r);
			}
		}
	}
	fclose(f);
	memstore_free(ms);
	if (yaml)
		fprintf(stderr, "%d series, %d expressions evaluated, %d errors\n", series_seen, evals, failures);
	return 0;
}
