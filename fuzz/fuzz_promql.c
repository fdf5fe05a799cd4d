/* libFuzzer target for the PromQL parser and evaluator: any bytes must
 * parse or be refused with "parse error at char N: ..." (N within the
 * input), never crash, leak or overflow the stack. What parses must print
 * back to text that parses to the same text, and must evaluate against a
 * small store without crashing (errors are fine). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promql/eval.h"
#include "promql/memstore.h"
#include "promql/parser.h"
#include "common/stale.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct memstore *store(void)
{
	static struct memstore *ms;
	if (ms)
		return ms;
	ms = memstore_new(100, 100000);
	static const char *const jobs[] = {"a", "b", "c"};
	for (int s = 0; s < 3; s++) {
		struct label l[3] = {{"__name__", "foo"}, {"job", jobs[s]}, {"gpu", s ? "1" : "0"}};
		struct label m[2] = {{"__name__", "bar"}, {"job", jobs[s]}};
		for (int i = 0; i < 30; i++) {
			memstore_add(ms, l, 3, (int64_t)i * 60000, i * (s + 1) + (i == 20 ? -50 : 0));
			if (i != 10)
				memstore_add(ms, m, 2, (int64_t)i * 60000 + 7000, s == 1 && i == 15 ? stale_nan() : 0.5 * i);
		}
	}
	return ms;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > PROMQL_MAX_EXPR_LEN + 16)
		return 0;
	char *text = malloc(size + 1);
	memcpy(text, data, size);
	text[size] = '\0';
	struct promql_expr *e = (struct promql_expr *)1;
	char err[512];
	int rc = promql_parse(text, &e, err, sizeof err);
	if (rc != 0) {
		int pos = 0;
		if (e != NULL || sscanf(err, "parse error at char %d: ", &pos) != 1 || pos < 1 ||
		    (size_t)pos > strlen(text) + 1)
			__builtin_trap();
		free(text);
		return 0;
	}
	struct buf b1, b2;
	buf_init(&b1, 1 << 22);
	buf_init(&b2, 1 << 22);
	if (promql_expr_format(e, &b1) != 0)
		__builtin_trap();
	struct promql_expr *again;
	if (promql_parse(b1.data, &again, err, sizeof err) != 0 || promql_expr_format(again, &b2) != 0 ||
	    strcmp(b1.data, b2.data) != 0)
		__builtin_trap();
	promql_expr_free(again);
	struct promql_result *r;
	if (promql_eval_instant(e, &memstore_queryable, store(), NULL, 20 * 60000, &r, err, sizeof err) == 0)
		promql_result_free(r);
	if (e->type == PROMQL_TYPE_SCALAR || e->type == PROMQL_TYPE_VECTOR) {
		if (promql_eval_range(e, &memstore_queryable, store(), NULL, 0, 30 * 60000, 90000, &r, err, sizeof err) == 0)
			promql_result_free(r);
	}
	promql_expr_free(e);
	buf_free(&b1);
	buf_free(&b2);
	free(text);
	return 0;
}
