/* Recordings: the real H200 file loads whole and exactly (values checked
 * against the CSV text itself), a written file reads back bit for bit, and
 * every kind of malformed input is refused with "NAME:LINE:COL: ...". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "collect/fields.h"
#include "record/recording.h"
#include "collect/sample.h"
#include "common/status.h"

#define REAL_FILE "/recordings/h200-phases-10hz.csv"

static char *real_path(void)
{
	const char *dir = getenv("GPULSE_TEST_DATA");
	static char path[4096];
	snprintf(path, sizeof path, "%s%s", dir ? dir : GPULSE_SOURCE_DATADIR, REAL_FILE);
	return path;
}

/* The whole file as a NUL-terminated string; the caller frees it. */
static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *data = malloc((size_t)n + 1);
	assert_non_null(data);
	assert_int_equal(fread(data, 1, (size_t)n, f), (size_t)n);
	data[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return data;
}

/* Line `lineno` (1-based) of `text` without its line ending, split at
 * commas into `cells`. Returns the cell count. Modifies `text`. */
static int split_line(char *text, int lineno, char **cells, int max)
{
	char *p = text;
	for (int i = 1; i < lineno; i++) {
		p = strchr(p, '\n');
		assert_non_null(p);
		p++;
	}
	char *end = p + strcspn(p, "\r\n");
	*end = '\0';
	int n = 0;
	for (char *c = p; n < max;) {
		cells[n++] = c;
		c = strchr(c, ',');
		if (!c)
			break;
		*c++ = '\0';
	}
	return n;
}

/* Check row `r` against line `lineno` of the file's text: every known
 * column converted with the field table's scale, empty or "nan" absent. */
static void check_row_against_text(const char *text, const struct rec_row *r, int lineno)
{
	char *hdr_copy = strdup(text), *row_copy = strdup(text);
	char *names[64], *cells[64];
	int nh = split_line(hdr_copy, 1, names, 64);
	int nc = split_line(row_copy, lineno, cells, 64);
	assert_int_equal(nh, nc);
	uint64_t seen = 0;
	for (int i = 0; i < nh; i++) {
		if (strcmp(names[i], "t_s") == 0) {
			assert_true(r->t_s == strtod(cells[i], NULL));
			continue;
		}
		int f = field_by_column(names[i]);
		if (f < 0)
			continue;
		seen |= FIELD_BIT(f);
		if (cells[i][0] == '\0' || strcasecmp(cells[i], "nan") == 0) {
			assert_false(r->valid & FIELD_BIT(f));
			continue;
		}
		assert_true(r->valid & FIELD_BIT(f));
		/* Percent columns divide by 100 (exactly 0.57 for "57"); the
		 * others multiply by their scale. */
		double x = strtod(cells[i], NULL);
		double want = field_table[f].scale == 0.01 ? x / 100 : x * field_table[f].scale;
		if (r->v[f] != want)
			fail_msg("line %d column %s: got %.17g want %.17g", lineno, names[i],
				 r->v[f], want);
	}
	assert_true((r->valid & ~seen) == 0);
	free(hdr_copy);
	free(row_copy);
}

static void test_real_file_loads(void **state)
{
	(void)state;
	size_t len;
	char *text = slurp(real_path(), &len);
	size_t lines = 0;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	if (len && text[len - 1] != '\n')
		lines++;

	struct recording *rec;
	char err[256];
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = recording_load(real_path(), &rec, err, sizeof err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc)
		fail_msg("%s", err);
	double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	print_message("loaded %zu rows in %.2f ms\n", rec->nrows, ms);
	/* Generous: under sanitizers too it takes a few milliseconds. */
	assert_true(ms < 1000);

	assert_int_equal(rec->nrows, lines - 1);
	assert_int_equal(rec->ngpus, 1);
	assert_false(rec->has_gpu_column);
	/* The file names every column of the format. */
	for (int f = 0; f < FIELD_COUNT; f++)
		assert_int_equal(!!(rec->columns & FIELD_BIT(f)), field_table[f].column != NULL);

	/* The first data row, spelled out from the file's text:
	 * 1795965289.352,0,0,615,143771,92.752,36,360,3201,1,0,0,... */
	const struct rec_row *r0 = &rec->rows[0];
	assert_true(r0->t_s == 1795965289.352);
	assert_true(r0->v[F_MEM_USED] == 615.0 * 1048576.0);
	assert_true(r0->v[F_MEM_TOTAL] == 143771.0 * 1048576.0);
	assert_true(r0->v[F_POWER] == 92.752);
	assert_true(r0->v[F_SM_CLOCK] == 360e6);
	assert_true(r0->v[F_MEM_CLOCK] == 3201e6);
	assert_true(r0->v[F_TEMP] == 36.0);
	assert_true(r0->v[F_CLOCK_REASONS] == 1.0);
	assert_true(r0->v[F_GPM_PCIE_TX] == 0.15 * MIB);

	/* Rows from every phase, and one holding "nan", against the text. */
	const int lines_to_check[] = {2, 71, 300, 335, 700, 1000, 1400, (int)lines};
	for (size_t i = 0; i < sizeof lines_to_check / sizeof lines_to_check[0]; i++)
		check_row_against_text(text, &rec->rows[lines_to_check[i] - 2], lines_to_check[i]);
	/* Line 71 says dram_bw_util=nan: unreadable, so absent. */
	assert_false(rec->rows[69].valid & FIELD_BIT(F_GPM_DRAM));
	assert_true(rec->rows[69].valid & FIELD_BIT(F_GPM_SM));

	recording_free(rec);
	free(text);
}

/* Write `rec` to memory and parse it back. */
static struct recording *round_trip(const struct recording *rec, bool with_gpu, char **text_out)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_non_null(f);
	assert_int_equal(recording_write_header(f, with_gpu), 0);
	for (size_t i = 0; i < rec->nrows; i++)
		assert_int_equal(recording_write_row(f, &rec->rows[i], with_gpu), 0);
	fclose(f);
	struct recording *back;
	char err[256];
	int rc = recording_parse(text, len, "mem.csv", &back, err, sizeof err);
	if (rc)
		fail_msg("%s", err);
	*text_out = text;
	return back;
}

static void assert_same_rows(const struct recording *a, const struct recording *b)
{
	assert_int_equal(a->nrows, b->nrows);
	for (size_t i = 0; i < a->nrows; i++) {
		const struct rec_row *x = &a->rows[i], *y = &b->rows[i];
		assert_true(x->t_s == y->t_s);
		assert_int_equal(x->gpu, y->gpu);
		assert_int_equal(x->valid, y->valid);
		for (int f = 0; f < FIELD_COUNT; f++)
			if (x->valid & FIELD_BIT(f) && x->v[f] != y->v[f])
				fail_msg("row %zu field %s: %.17g became %.17g", i,
					 field_key((enum field_id)f), x->v[f], y->v[f]);
	}
}

static void test_round_trip(void **state)
{
	(void)state;
	struct recording *rec;
	char err[256], *text;
	assert_int_equal(recording_load(real_path(), &rec, err, sizeof err), 0);

	struct recording *back = round_trip(rec, false, &text);
	assert_same_rows(rec, back);
	assert_int_equal(back->columns, rec->columns);
	assert_false(back->has_gpu_column);

	/* The written header holds the same set of columns as the real file. */
	size_t len;
	char *orig = slurp(real_path(), &len);
	char *a[64], *b[64];
	int na = split_line(orig, 1, a, 64), nb = split_line(text, 1, b, 64);
	assert_int_equal(na, nb);
	for (int i = 0; i < na; i++) {
		int found = 0;
		for (int j = 0; j < nb; j++)
			found += strcmp(a[i], b[j]) == 0;
		if (found != 1)
			fail_msg("column %s written %d times", a[i], found);
	}
	free(orig);
	free(text);
	recording_free(back);

	/* With a gpu column, spread over three GPUs (time stays sorted per GPU). */
	for (size_t i = 0; i < rec->nrows; i++)
		rec->rows[i].gpu = (int)(i % 3);
	back = round_trip(rec, true, &text);
	assert_same_rows(rec, back);
	assert_true(back->has_gpu_column);
	assert_int_equal(back->ngpus, 3);
	free(text);
	recording_free(back);
	recording_free(rec);
}

static void test_writer_shortest(void **state)
{
	(void)state;
	struct rec_row row = {.t_s = 1795965289.352};
	row.valid = FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_POWER) | FIELD_BIT(F_MEM_USED);
	row.v[F_GPU_UTIL] = 37 * 0.01;
	row.v[F_POWER] = 92.752;
	row.v[F_MEM_USED] = 615 * MIB;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	assert_int_equal(recording_write_row(f, &row, false), 0);
	fclose(f);
	/* Shortest forms, and empty cells for everything not valid. */
	assert_non_null(strstr(text, "1795965289.352,37,,615,,92.752,"));
	free(text);
}

/* Parse `csv` as file `name` and expect a refusal starting with `where`. */
static void expect_error(const char *csv, int want_rc, const char *where, const char *words)
{
	struct recording *rec = (struct recording *)(uintptr_t)1;
	char err[512];
	int rc = recording_parse(csv, strlen(csv), "h.csv", &rec, err, sizeof err);
	if (rc != want_rc)
		fail_msg("%s: rc %d (%s), want %d", where, rc, err, want_rc);
	assert_null(rec);
	if (strncmp(err, where, strlen(where)) != 0 || (words && !strstr(err, words)))
		fail_msg("error \"%s\", want \"%s ...%s\"", err, where, words ? words : "");
}

static void test_malformed(void **state)
{
	(void)state;
	expect_error("gpu_util,power_w\n1,2\n", GPULSE_EPARSE, "h.csv:1:1: ", "t_s");
	expect_error("t_s,power_w,temp_c,power_w\n1,2,3,4\n", GPULSE_EPARSE, "h.csv:1:4: ",
		     "duplicate column \"power_w\"");
	expect_error("t_s,junk,junk\n", GPULSE_EPARSE, "h.csv:1:3: ", "duplicate");
	expect_error("t_s,power_w\n1,2\n3\n", GPULSE_EPARSE, "h.csv:3:2: ", "1 cells");
	expect_error("t_s,power_w\n1,2\n3,4,5\n", GPULSE_EPARSE, "h.csv:3:3: ", "3 cells");
	expect_error("t_s,gpu_util,mem_util,a,b,power_w\n1,2,3,4,5,12x\n", GPULSE_EPARSE,
		     "h.csv:2:6: ", "bad number \"12x\" in column power_w");
	expect_error("t_s,power_w\n2,1\n1,1\n", GPULSE_EPARSE, "h.csv:3:1: ",
		     "unsorted time 1.000 after 2.000 for gpu 0");
	/* Times are printed to the millisecond, not as the double nearest
	 * the text ("1795965295.2479999"); finer only when they need it. */
	expect_error("t_s,power_w\n1795965295.248,1\n1795965295.148,1\n", GPULSE_EPARSE,
		     "h.csv:3:1: ", "unsorted time 1795965295.148 after 1795965295.248 for");
	expect_error("t_s,power_w\n5.0002,1\n5.0001,1\n", GPULSE_EPARSE, "h.csv:3:1: ",
		     "unsorted time 5.000100 after 5.000200 for");
	expect_error("power_w,t_s,gpu\n1,5,0\n1,6,1\n1,4,1\n", GPULSE_EPARSE, "h.csv:4:2: ",
		     "unsorted time");
	expect_error("t_s,gpu\n1,64\n", GPULSE_EPARSE, "h.csv:2:2: ", "out of range");
	expect_error("t_s,gpu\n1,99999999999999999999\n", GPULSE_EPARSE, "h.csv:2:2: ",
		     "out of range");
	expect_error("t_s,gpu\n1,-1\n", GPULSE_EPARSE, "h.csv:2:2: ", "gpu");
	expect_error("t_s,gpu\n1,\n", GPULSE_EPARSE, "h.csv:2:2: ", "gpu");

	/* Numbers strtod would take but a recording never holds. */
	expect_error("t_s,power_w\n1,inf\n", GPULSE_EPARSE, "h.csv:2:2: ", "bad number");
	expect_error("t_s,power_w\n1,0x10\n", GPULSE_EPARSE, "h.csv:2:2: ", "bad number");
	expect_error("t_s,power_w\n1, 5\n", GPULSE_EPARSE, "h.csv:2:2: ", "bad number");
	expect_error("t_s,power_w\n1,5 \n", GPULSE_EPARSE, "h.csv:2:2: ", "bad number");
	expect_error("t_s,power_w\n1,1e999\n", GPULSE_EPARSE, "h.csv:2:2: ", "bad number");
	expect_error("t_s,power_w\nnan,5\n", GPULSE_EPARSE, "h.csv:2:1: ", "t_s");
	expect_error("t_s,power_w\n-1,5\n", GPULSE_EPARSE, "h.csv:2:1: ", "negative time \"-1\"");
	expect_error("t_s,power_w\n,5\n", GPULSE_EPARSE, "h.csv:2:1: ", "missing time");
	expect_error("t_s,power_w\n1,\"5\"\n", GPULSE_EPARSE, "h.csv:2:2: ", "bad number");

	/* Structure. */
	expect_error("", GPULSE_EPARSE, "h.csv:1:1: ", "empty");
	expect_error("t_s,,power_w\n", GPULSE_EPARSE, "h.csv:1:2: ", "empty column name");
	expect_error("t_s,power_w\n1,2\n\n3,4\n", GPULSE_EPARSE, "h.csv:3:1: ", "blank line");
	/* A header alone, whatever follows it, is no recording. */
	expect_error("t_s,power_w\n", GPULSE_EPARSE, "h.csv:2:1: ", "no samples after the header");
	expect_error("t_s,power_w", GPULSE_EPARSE, "h.csv:2:1: ", "no samples after the header");
	expect_error("t_s,power_w\r\n\r\n\n", GPULSE_EPARSE, "h.csv:2:1: ",
		     "no samples after the header");

	/* Over-long line: the column is the cell in which the limit falls. */
	size_t big = RECORDING_MAX_LINE + 64;
	char *csv = malloc(big + 64);
	int n = snprintf(csv, big + 64, "t_s,power_w,junk\n1,2,");
	memset(csv + n, '7', big);
	strcpy(csv + n + big, "\n");
	expect_error(csv, GPULSE_EPARSE, "h.csv:2:3: ", "longer than");
	free(csv);

	/* A NUL byte inside a number is junk, not the end of it. */
	struct recording *rec;
	char err[256];
	static const char with_nul[] = "t_s,power_w\n1,5\0" "0\n";
	assert_int_equal(recording_parse(with_nul, sizeof with_nul - 1, "h.csv", &rec, err, sizeof err),
			 GPULSE_EPARSE);
	assert_non_null(strstr(err, "h.csv:2:2: bad number"));
}

static struct recording *parse_ok(const char *csv)
{
	struct recording *rec;
	char err[256];
	int rc = recording_parse(csv, strlen(csv), "ok.csv", &rec, err, sizeof err);
	if (rc)
		fail_msg("%s", err);
	return rec;
}

static void test_accepted_forms(void **state)
{
	(void)state;
	/* CRLF, a byte order mark, unknown columns, empty and "nan" cells,
	 * a negative value (read as absent), blank lines at the end. */
	struct recording *rec = parse_ok("\xEF\xBB\xBFt_s,future_col,power_w,gpu_util\r\n"
					 "10.5,whatever,250.5,\r\n"
					 "10.5,,nan,40\r\n"
					 "11,,-0.5,1e2\r\n\r\n\n");
	assert_int_equal(rec->nrows, 3);
	assert_int_equal(rec->ngpus, 1);
	assert_int_equal(rec->columns, FIELD_BIT(F_POWER) | FIELD_BIT(F_GPU_UTIL));
	assert_int_equal(rec->rows[0].valid, FIELD_BIT(F_POWER));
	assert_true(rec->rows[0].v[F_POWER] == 250.5);
	assert_int_equal(rec->rows[1].valid, FIELD_BIT(F_GPU_UTIL));
	assert_true(rec->rows[1].v[F_GPU_UTIL] == 40 * 0.01);
	assert_true(rec->rows[2].v[F_GPU_UTIL] == 1e2 * 0.01);
	assert_int_equal(rec->rows[2].valid, FIELD_BIT(F_GPU_UTIL));
	assert_int_equal(rec->ninvalid, 1);
	assert_int_equal(rec->nnan, 1);
	recording_free(rec);

	/* Several GPUs: time is sorted per GPU only. */
	rec = parse_ok("t_s,gpu,temp_c\n5,2,40\n3,0,41\n6,2,42\n3,0,43");
	assert_int_equal(rec->nrows, 4);
	assert_int_equal(rec->ngpus, 3);
	assert_true(rec->has_gpu_column);
	assert_int_equal(rec->rows[1].gpu, 0);
	assert_true(rec->rows[3].v[F_TEMP] == 43);
	recording_free(rec);

	/* Exactly the longest line is fine. */
	char *csv = malloc(RECORDING_MAX_LINE + 64);
	int n = snprintf(csv, 64, "t_s,junk\n1,");
	memset(csv + n, 'x', RECORDING_MAX_LINE - 2);
	strcpy(csv + n + RECORDING_MAX_LINE - 2, "\n");
	rec = parse_ok(csv);
	assert_int_equal(rec->nrows, 1);
	recording_free(rec);
	free(csv);
}

/* Line endings from other systems load as the LF file does: CR CR LF (a
 * CRLF writer behind a Windows text-mode file) and lone CRs, which used to
 * leave a carriage return in the last column name. */
static void test_line_endings(void **state)
{
	(void)state;
	size_t len;
	char *lf = slurp(real_path(), &len);
	struct recording *want = parse_ok(lf);
	static const char *const endings[] = {"\n", "\r\n", "\r\r\n", "\r"};
	for (size_t e = 0; e < sizeof endings / sizeof endings[0]; e++) {
		/* The real file with each of its line endings replaced. */
		size_t cap = len * 3 + 1, n = 0;
		char *conv = malloc(cap);
		assert_non_null(conv);
		for (size_t i = 0; i < len; i++) {
			if (lf[i] == '\r')
				continue;
			if (lf[i] == '\n') {
				memcpy(conv + n, endings[e], strlen(endings[e]));
				n += strlen(endings[e]);
			} else {
				conv[n++] = lf[i];
			}
		}
		conv[n] = '\0';
		struct recording *got;
		char err[256];
		if (recording_parse(conv, n, "h.csv", &got, err, sizeof err) != 0)
			fail_msg("ending %zu: %s", e, err);
		assert_int_equal(got->nrows, want->nrows);
		assert_int_equal(got->columns, want->columns);
		assert_memory_equal(got->rows, want->rows, want->nrows * sizeof *want->rows);
		recording_free(got);
		free(conv);
	}
	recording_free(want);
	free(lf);
	/* One line ending is one, whatever its form: no blank line between. */
	struct recording *rec = parse_ok("t_s,power_w\r\r\n1,2\r\r\n3,4\r5,6\n");
	assert_int_equal(rec->nrows, 3);
	recording_free(rec);
	expect_error("t_s,power_w\r\n1,2\r\n\r\n3,4\r\n", GPULSE_EPARSE, "h.csv:3:1: ", "blank line");
}

/* Values no GPU reports, negative ones and "nan", are read as absent (the
 * format's unreadable value) and counted, with the first one's place for
 * the reader's warning; the other cells of their rows stand. */
static void test_invalid_values(void **state)
{
	(void)state;
	struct recording *rec = parse_ok("t_s,power_w,gpu_util,temp_c\n"
					 "1,250,40,50\n"
					 "2,-5,41,51\n"
					 "3,251,NaN,-0\n"
					 "4,252,-1e-3,52\n");
	assert_int_equal(rec->nrows, 4);
	assert_int_equal(rec->ninvalid, 2);
	assert_int_equal(rec->nnan, 1);
	assert_int_equal(rec->rows[0].valid, rec->columns);
	assert_int_equal(rec->rows[1].valid, FIELD_BIT(F_GPU_UTIL) | FIELD_BIT(F_TEMP));
	assert_int_equal(rec->rows[2].valid, FIELD_BIT(F_POWER) | FIELD_BIT(F_TEMP));
	assert_true(rec->rows[2].v[F_TEMP] == 0);  /* -0 is zero, not negative */
	assert_int_equal(rec->rows[3].valid, FIELD_BIT(F_POWER) | FIELD_BIT(F_TEMP));
	assert_string_equal(rec->invalid_note, "ok.csv:3:2: negative value -5 in column power_w, "
					       "read as absent (and 1 more such cell)");
	recording_free(rec);

	/* nan is a recorder's word for no value: absent, counted, no warning. */
	rec = parse_ok("t_s,sm_util\n1,nan\n2,5\n");
	assert_int_equal(rec->ninvalid, 0);
	assert_int_equal(rec->nnan, 1);
	assert_int_equal(rec->rows[0].valid, 0);
	assert_string_equal(rec->invalid_note, "");
	recording_free(rec);

	rec = parse_ok("t_s,sm_util\n1,4\n");
	assert_int_equal(rec->ninvalid, 0);
	assert_string_equal(rec->invalid_note, "");
	recording_free(rec);
}

static void test_load_missing_file(void **state)
{
	(void)state;
	struct recording *rec;
	char err[256];
	assert_int_equal(recording_load("/nonexistent/x.csv", &rec, err, sizeof err), GPULSE_EIO);
	assert_null(rec);
	assert_non_null(strstr(err, "/nonexistent/x.csv"));
	recording_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_real_file_loads),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_writer_shortest),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_accepted_forms),
		cmocka_unit_test(test_line_endings),
		cmocka_unit_test(test_invalid_values),
		cmocka_unit_test(test_load_missing_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
