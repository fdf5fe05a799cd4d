/* Writes a schema-1 store with format-1 chunks, as gpulse before issue 14
 * did: series old_metric{gpu="0"} 3000 samples and old_metric{gpu="1"}
 * 2000, every 100 ms from T0, value i * 0.25 (+ 1000 for gpu 1), and one
 * record. */
#include <stdio.h>
#include <stdlib.h>
#include <sqlite3.h>
#include "tsdb.h"
#define T0 1795965289000LL
static int64_t now(void *c) { (void)c; return T0 + 3600 * 1000; }
int main(int argc, char **argv)
{
	struct tsdb_opts o = { .path = argv[1] };
	o.clock.now_ms = now;
	struct tsdb *db; char err[256];
	if (tsdb_open(&db, &o, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
	for (int g = 0; g < 2; g++) {
		char gv[2] = { (char)('0' + g), 0 };
		struct tsdb_label l[2] = { { "__name__", "old_metric" }, { "gpu", gv } };
		uint32_t ref;
		if (tsdb_series(db, l, 2, &ref, err, sizeof err)) return 1;
		for (int i = 0; i < (g ? 2000 : 3000); i++)
			if (tsdb_append(db, ref, T0 + i * 100LL, i * 0.25 + g * 1000)) return 1;
	}
	tsdb_record_put(db, "alert", "k", T0, "{\"old\":true}");
	tsdb_close(db);
	sqlite3 *s; sqlite3_open(argv[1], &s);
	sqlite3_exec(s, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE", 0, 0, 0);
	sqlite3_close(s);
	return 0;
}
