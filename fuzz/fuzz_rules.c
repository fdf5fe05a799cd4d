/* libFuzzer target for the rule-file parser (src/rules/rules_file.c) and
 * the rule unit-test file parser (rules_test.c): any bytes must parse or
 * be refused with FILE:LINE:COL messages, never crash, leak or recurse
 * without bound. A rule file that parses has its recording rules
 * evaluated once against a small store (errors are fine). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "promql/eval.h"
#include "promql/memstore.h"
#include "rules/rules_file.h"
#include "rules/rules_test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256 * 1024)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	struct buf errs;
	buf_init(&errs, 1 << 16);
	struct rules_file *f = NULL;
	if (rules_file_parse("fuzz.yml", text, size, &f, &errs) == 0) {
		if (errs.len)
			abort(); /* success leaves no complaint */
		struct memstore *ms = memstore_new(100, 10000);
		struct label l[2] = {{"__name__", "x"}, {"job", "a"}};
		for (int i = 0; i < 5; i++)
			memstore_add(ms, l, 2, (int64_t)i * 60000, i);
		struct promql_opts o;
		promql_opts_default(&o);
		o.max_samples = 100000;
		for (size_t g = 0; g < f->ngroups && g < 8; g++) {
			struct rules_group_state *st = rules_group_state_new(&f->groups[g]);
			for (int64_t t = 0; t <= 120000; t += 60000)
				rules_group_eval(&f->groups[g], st, ms, &o, t, &errs);
			rules_group_state_free(st);
		}
		memstore_free(ms);
	} else if (f != NULL || errs.len == 0) {
		abort(); /* a failure always says why and hands out nothing */
	}
	rules_file_free(f);

	buf_reset(&errs);
	struct rules_test_file *t = NULL;
	if (rules_test_parse("fuzz.yml", text, size, &t, &errs) != 0 && (t != NULL || errs.len == 0))
		abort();
	rules_test_file_free(t);
	buf_free(&errs);
	free(text);
	return 0;
}
