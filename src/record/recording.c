/* Recordings: a strict parser and a writer for the CSV format of
 * recording.h. Hand-written rather than built on a CSV library because the
 * format is a plain numeric subset (no quoting, no embedded separators) and
 * the parser must report exact line and cell numbers, stay bounded on
 * hostile input and parse a whole file without an allocation per cell. */
#include "record/recording.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/gofloat.h"
#include "collect/sample.h"
#include "common/status.h"

/* What a header cell means for the cells below it. Non-negative values
 * are field ids. */
enum {
	COL_IGNORED = -1,
	COL_TIME = -2,
	COL_GPU = -3,
};

/* The largest file recording_load reads; far above RECORDING_MAX_ROWS of
 * real rows would need, but a bound nonetheless. */
#define RECORDING_MAX_FILE_BYTES ((size_t)1 << 32)

/* Cells shown in error messages are cut to this many characters, so a
 * garbage line cannot flood the log. */
#define ERR_CELL_CHARS 32

struct cell {
	const char *s;   /* NUL-terminated copy inside the line buffer */
	size_t len;      /* bytes before the separator; may hold a NUL */
};

struct parser {
	const char *name;
	char *err;
	size_t errlen;
	char *line;            /* RECORDING_MAX_LINE + 1 bytes, reused per line */
	struct cell *cells;    /* one per possible cell of a line */
	size_t ncols;
	int *colmap;           /* COL_* or a field id, per header cell */
	int time_col;
	int gpu_col;
	struct recording *rec;
	size_t cap;            /* rows allocated */
	bool seen[GPU_MAX];    /* a row of this GPU was read */
	double last_t[GPU_MAX];
};

/* Numbers are read and written in the C locale whatever the program set
 * (the terminal UI calls setlocale), so that "1.5" never becomes "1,5":
 * each entry point switches its own thread to it for the duration. */
static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_make(void)
{
	c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

static locale_t use_c_locale(void)
{
	pthread_once(&c_locale_once, c_locale_make);
	return c_locale ? uselocale(c_locale) : (locale_t)0;
}

static void restore_locale(locale_t old)
{
	if (old)
		uselocale(old);
}

static int fail(struct parser *p, int status, size_t line, size_t col, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Write "NAME:LINE:COL: problem" and return `status`. */
static int fail(struct parser *p, int status, size_t line, size_t col, const char *fmt, ...)
{
	if (p->err && p->errlen) {
		int n = snprintf(p->err, p->errlen, "%s:%zu:%zu: ", p->name, line, col);
		if (n >= 0 && (size_t)n < p->errlen) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
	return status;
}

/* A cell made safe to quote in a message: printable ASCII only, cut short. */
static void quote_cell(const struct cell *c, char *out, size_t outlen)
{
	size_t n = 0;
	for (size_t i = 0; i < c->len && n + 4 < outlen; i++) {
		if (i == ERR_CELL_CHARS) {
			memcpy(out + n, "...", 3);
			n += 3;
			break;
		}
		unsigned char ch = (unsigned char)c->s[i];
		out[n++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	out[n] = '\0';
}

/* The column's name for messages; header names are checked printable. */
static const char *col_name(const struct parser *p, size_t col)
{
	int m = p->colmap[col];
	if (m == COL_TIME)
		return "t_s";
	if (m == COL_GPU)
		return "gpu";
	return m >= 0 ? field_table[m].column : "?";
}

/* Split the line in p->line (len bytes, no line ending) at commas, in
 * place. Returns the number of cells; never more than the line allows. */
static size_t split(struct parser *p, size_t len)
{
	size_t n = 0;
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || p->line[i] == ',') {
			p->line[i] = '\0';
			p->cells[n].s = p->line + start;
			p->cells[n].len = i - start;
			n++;
			start = i + 1;
		}
	}
	return n;
}

/* Strictly parse a decimal number: optional sign, digits with an optional
 * point and exponent, nothing else. strtod alone would also take leading
 * blanks, hex, "inf" and "nan", which a recording never holds. */
static bool parse_number(const struct cell *c, double *out)
{
	const char *s = c->s;
	if (c->len == 0)
		return false;
	size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
	if (!((s[i] >= '0' && s[i] <= '9') || s[i] == '.'))
		return false;
	if (s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X'))
		return false;
	char *end;
	double v = strtod(s, &end);
	if (end != s + c->len || !isfinite(v))
		return false;
	*out = v;
	return true;
}

/* "nan" is what a recorder writes when a GPM counter had no value for the
 * interval (the real H200 file holds a few): the value was unreadable, so
 * it loads as absent, like an empty cell, and is counted (nnan), but it is
 * no fault of the file: nobody is warned. */
static bool is_nan_token(const struct cell *c)
{
	const char *s = c->s;
	size_t i = (c->len == 4 && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
	return c->len == i + 3 && strncasecmp(s + i, "nan", 3) == 0;
}

static void note_invalid(struct parser *p, size_t line, size_t col, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A cell read as absent because no GPU reports such a value: count it, and
 * keep the first one's place and words for the reader's warning. */
static void note_invalid(struct parser *p, size_t line, size_t col, const char *fmt, ...)
{
	struct recording *r = p->rec;
	if (r->ninvalid++ == 0) {
		int n = snprintf(r->invalid_note, sizeof r->invalid_note, "%s:%zu:%zu: ", p->name,
				 line, col);
		if (n >= 0 && (size_t)n < sizeof r->invalid_note) {
			va_list ap;
			va_start(ap, fmt);
			vsnprintf(r->invalid_note + n, sizeof r->invalid_note - (size_t)n, fmt, ap);
			va_end(ap);
		}
	}
}

static int parse_header(struct parser *p, size_t len)
{
	size_t n = split(p, len);
	p->ncols = n;
	p->colmap = malloc(n * sizeof *p->colmap);
	if (!p->colmap)
		return fail(p, GPULSE_ENOMEM, 1, 1, "out of memory");
	p->time_col = p->gpu_col = -1;
	for (size_t i = 0; i < n; i++) {
		const struct cell *c = &p->cells[i];
		if (c->len == 0)
			return fail(p, GPULSE_EPARSE, 1, i + 1, "empty column name");
		for (size_t k = 0; k < c->len; k++) {
			unsigned char ch = (unsigned char)c->s[k];
			if (ch < 0x20 || ch == 0x7f)
				return fail(p, GPULSE_EPARSE, 1, i + 1,
					    "control character in column name");
		}
		for (size_t j = 0; j < i; j++) {
			if (p->cells[j].len == c->len && memcmp(p->cells[j].s, c->s, c->len) == 0) {
				char q[ERR_CELL_CHARS + 8];
				quote_cell(c, q, sizeof q);
				return fail(p, GPULSE_EPARSE, 1, i + 1,
					    "duplicate column \"%s\" (also column %zu)", q, j + 1);
			}
		}
		if (strcmp(c->s, "t_s") == 0) {
			p->colmap[i] = COL_TIME;
			p->time_col = (int)i;
		} else if (strcmp(c->s, "gpu") == 0) {
			p->colmap[i] = COL_GPU;
			p->gpu_col = (int)i;
		} else {
			int f = field_by_column(c->s);
			p->colmap[i] = f >= 0 ? f : COL_IGNORED;
			if (f >= 0)
				p->rec->columns |= FIELD_BIT(f);
		}
	}
	if (p->time_col < 0)
		return fail(p, GPULSE_EPARSE, 1, 1, "missing required column t_s");
	p->rec->has_gpu_column = p->gpu_col >= 0;
	return 0;
}

/* Parse one data line already in p->line into a new row. */
static int parse_row(struct parser *p, size_t lineno, size_t len)
{
	size_t n = split(p, len);
	if (n != p->ncols)
		return fail(p, GPULSE_EPARSE, lineno, (n < p->ncols ? n : p->ncols) + 1,
			    "row has %zu cells, header has %zu", n, p->ncols);
	struct recording *r = p->rec;
	if (r->nrows == RECORDING_MAX_ROWS)
		return fail(p, GPULSE_ELIMIT, lineno, 1, "more than %d rows", RECORDING_MAX_ROWS);
	if (r->nrows == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 1024;
		if (cap > RECORDING_MAX_ROWS)
			cap = RECORDING_MAX_ROWS;
		struct rec_row *rows = realloc(r->rows, cap * sizeof *rows);
		if (!rows)
			return fail(p, GPULSE_ENOMEM, lineno, 1, "out of memory");
		r->rows = rows;
		p->cap = cap;
	}
	struct rec_row *row = &r->rows[r->nrows];
	memset(row, 0, sizeof *row);
	char q[ERR_CELL_CHARS + 8];

	for (size_t i = 0; i < n; i++) {
		const struct cell *c = &p->cells[i];
		int m = p->colmap[i];
		double v;
		if (m == COL_IGNORED)
			continue;
		if (m == COL_GPU) {
			long g = 0;
			size_t k;
			for (k = 0; k < c->len && c->s[k] >= '0' && c->s[k] <= '9' && g < GPU_MAX; k++)
				g = g * 10 + (c->s[k] - '0');
			quote_cell(c, q, sizeof q);
			if (c->len == 0)
				return fail(p, GPULSE_EPARSE, lineno, i + 1, "missing gpu index in column gpu");
			if (k < c->len && c->s[k] >= '0' && c->s[k] <= '9')
				g = GPU_MAX;
			else if (k != c->len)
				return fail(p, GPULSE_EPARSE, lineno, i + 1,
					    "bad gpu index \"%s\" in column gpu", q);
			if (g >= GPU_MAX)
				return fail(p, GPULSE_EPARSE, lineno, i + 1,
					    "gpu index %s out of range 0..%d in column gpu", q, GPU_MAX - 1);
			row->gpu = (int)g;
			continue;
		}
		if (m == COL_TIME) {
			if (c->len == 0)
				return fail(p, GPULSE_EPARSE, lineno, i + 1, "missing time in column t_s");
			if (!parse_number(c, &v)) {
				quote_cell(c, q, sizeof q);
				return fail(p, GPULSE_EPARSE, lineno, i + 1,
					    "bad number \"%s\" in column t_s", q);
			}
			/* Unix seconds before 1970 come from no clock a
			 * recorder reads; the time cannot be absent. */
			if (v < 0) {
				quote_cell(c, q, sizeof q);
				return fail(p, GPULSE_EPARSE, lineno, i + 1,
					    "negative time \"%s\" in column t_s", q);
			}
			row->t_s = v;
			continue;
		}
		if (c->len == 0)
			continue;
		if (is_nan_token(c)) {
			p->rec->nnan++;
			continue;
		}
		if (!parse_number(c, &v)) {
			quote_cell(c, q, sizeof q);
			return fail(p, GPULSE_EPARSE, lineno, i + 1, "bad number \"%s\" in column %s",
				    q, col_name(p, i));
		}
		if (v < 0) {
			quote_cell(c, q, sizeof q);
			note_invalid(p, lineno, i + 1, "negative value %s in column %s", q,
				     col_name(p, i));
			continue;
		}
		row->v[m] = field_to_base((enum field_id)m, v);
		row->valid |= FIELD_BIT(m);
	}

	if (p->seen[row->gpu] && row->t_s < p->last_t[row->gpu]) {
		/* Milliseconds, as recorders write them ("%.17g" showed
		 * 1795965295.2479999 for 1795965295.248); more digits only
		 * when the two times differ below a millisecond. */
		int prec = 3;
		char a[64], b[64];
		do {
			snprintf(a, sizeof a, "%.*f", prec, row->t_s);
			snprintf(b, sizeof b, "%.*f", prec, p->last_t[row->gpu]);
			prec += 3;
		} while (strcmp(a, b) == 0 && prec <= 9);
		return fail(p, GPULSE_EPARSE, lineno, (size_t)p->time_col + 1,
			    "unsorted time %s after %s for gpu %d in column t_s", a, b, row->gpu);
	}
	p->seen[row->gpu] = true;
	p->last_t[row->gpu] = row->t_s;
	if (row->gpu + 1 > r->ngpus)
		r->ngpus = row->gpu + 1;
	r->nrows++;
	return 0;
}

/* True when only line endings remain from `off` on. */
static bool only_blank_lines(const char *data, size_t len, size_t off)
{
	for (size_t i = off; i < len; i++)
		if (data[i] != '\n' && data[i] != '\r')
			return false;
	return true;
}

int recording_parse(const char *data, size_t len, const char *name,
		    struct recording **out, char *err, size_t errlen)
{
	struct parser p = {.name = name ? name : "recording", .err = err, .errlen = errlen};
	locale_t old_locale = use_c_locale();
	int rc = 0;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	p.rec = calloc(1, sizeof *p.rec);
	p.line = malloc(RECORDING_MAX_LINE + 1);
	/* A line of L bytes has at most L + 1 cells (all commas). */
	p.cells = malloc((RECORDING_MAX_LINE + 1) * sizeof *p.cells);
	if (!p.rec || !p.line || !p.cells) {
		rc = fail(&p, GPULSE_ENOMEM, 1, 1, "out of memory");
		goto out;
	}

	/* Tolerate a UTF-8 byte order mark, as spreadsheets write one. */
	size_t off = 0;
	if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0)
		off = 3;
	if (off == len) {
		rc = fail(&p, GPULSE_EPARSE, 1, 1, "empty file, expected a header line");
		goto out;
	}

	for (size_t lineno = 1; off < len; lineno++) {
		/* A line ends at LF, CRLF, a lone CR (old Mac editors) or CR CR
		 * LF (a CRLF writer behind a text-mode file on Windows, as
		 * Python's csv module without newline=''): any run of CRs,
		 * then an optional LF, is one line ending. */
		size_t end = off;
		while (end < len && data[end] != '\n' && data[end] != '\r')
			end++;
		size_t next = end;
		while (next < len && data[next] == '\r')
			next++;
		if (next < len && data[next] == '\n')
			next++;
		size_t l = end - off;
		if (l > RECORDING_MAX_LINE) {
			size_t col = 1;
			for (size_t i = 0; i < RECORDING_MAX_LINE; i++)
				col += data[off + i] == ',';
			rc = fail(&p, GPULSE_EPARSE, lineno, col, "line longer than %d bytes",
				  RECORDING_MAX_LINE);
			goto out;
		}
		if (l == 0 && lineno > 1) {
			if (only_blank_lines(data, len, next))
				break;
			rc = fail(&p, GPULSE_EPARSE, lineno, 1, "blank line before the end of the data");
			goto out;
		}
		memcpy(p.line, data + off, l);
		p.line[l] = '\0';
		rc = lineno == 1 ? parse_header(&p, l) : parse_row(&p, lineno, l);
		if (rc)
			goto out;
		off = next;
	}
	/* A header alone describes no GPU at any time: nothing to replay or
	 * diagnose. Refused here, so every reader says the same. */
	if (p.rec->nrows == 0) {
		rc = fail(&p, GPULSE_EPARSE, 2, 1, "no samples after the header");
		goto out;
	}
	if (p.rec->ninvalid) {
		size_t n = strlen(p.rec->invalid_note);
		if (p.rec->ninvalid > 1)
			snprintf(p.rec->invalid_note + n, sizeof p.rec->invalid_note - n,
				 ", read as absent (and %zu more such cell%s)", p.rec->ninvalid - 1,
				 p.rec->ninvalid > 2 ? "s" : "");
		else
			snprintf(p.rec->invalid_note + n, sizeof p.rec->invalid_note - n,
				 ", read as absent");
	}
	*out = p.rec;
	p.rec = NULL;
out:
	free(p.colmap);
	free(p.cells);
	free(p.line);
	recording_free(p.rec);
	restore_locale(old_locale);
	return rc;
}

int recording_load(const char *path, struct recording **out, char *err, size_t errlen)
{
	char *data = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;
	FILE *f = fopen(path, "rb");

	*out = NULL;
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	/* Size the buffer from fstat when it can; pipes grow as they come. */
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
		cap = (size_t)st.st_size + 1;
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			if (cap >= RECORDING_MAX_FILE_BYTES) {
				snprintf(err, errlen, "%s: file larger than %zu bytes", path,
					 RECORDING_MAX_FILE_BYTES);
				rc = GPULSE_ELIMIT;
				goto out;
			}
			char *nd = realloc(data, ncap);
			if (!nd) {
				snprintf(err, errlen, "%s: out of memory", path);
				rc = GPULSE_ENOMEM;
				goto out;
			}
			data = nd;
			cap = ncap;
		} else if (!data) {
			data = malloc(cap);
			if (!data) {
				snprintf(err, errlen, "%s: out of memory", path);
				rc = GPULSE_ENOMEM;
				goto out;
			}
		}
		size_t n = fread(data + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		rc = GPULSE_EIO;
		goto out;
	}
	rc = recording_parse(data ? data : "", len, path, out, err, errlen);
out:
	free(data);
	fclose(f);
	return rc;
}

void recording_free(struct recording *r)
{
	if (!r)
		return;
	free(r->rows);
	free(r);
}

/* Put `col` (a value in the column's unit) into `out` with the fewest
 * digits that still give back `base` when read and scaled as the parser
 * does. col = base / scale may be an ulp or two away from the text the
 * value was read from, so the neighbours are tried too; when nothing
 * reads back exactly (a value that never came from a file), the 17-digit
 * form is the closest there is. */
static void format_value(double base, enum field_id f, char *out, size_t outlen)
{
	double col = field_from_base(f, base);
	double cand[5] = {col, nextafter(col, INFINITY), nextafter(col, -INFINITY), 0, 0};
	cand[3] = nextafter(cand[1], INFINITY);
	cand[4] = nextafter(cand[2], -INFINITY);
	for (int prec = 15; prec <= 17; prec++) {
		for (int k = 0; k < 5; k++) {
			snprintf(out, outlen, "%.*g", prec, cand[k]);
			if (field_to_base(f, strtod(out, NULL)) == base)
				return;
		}
	}
	snprintf(out, outlen, "%.17g", col);
}

/* The order columns are written in: the contract's
 * (docs/RECORDING.md), so files gpulse writes match the bundled
 * recordings column for column. Fields with a column that the
 * contract does not list follow in field-table order. */
static const char *const contract_order[] = {
	"gpu_util", "mem_util", "mem_used_mib", "mem_total_mib", "power_w", "temp_c",
	"sm_clock_mhz", "mem_clock_mhz", "clocks_event_reasons", "pstate", "proc_count",
	"sm_util", "sm_occupancy", "tensor_util", "dram_bw_util", "fp64_util", "fp32_util",
	"fp16_util", "integer_util", "graphics_util", "pcie_tx_mbps", "pcie_rx_mbps",
};
#define CONTRACT_COLUMNS ((int)(sizeof contract_order / sizeof contract_order[0]))

/* Fill `order` with the fields to write, in writing order; returns how many. */
static int write_order(int order[FIELD_COUNT])
{
	int n = 0;
	uint64_t taken = 0;
	for (int i = 0; i < CONTRACT_COLUMNS; i++) {
		int f = field_by_column(contract_order[i]);
		if (f >= 0) {
			order[n++] = f;
			taken |= FIELD_BIT(f);
		}
	}
	for (int f = 0; f < FIELD_COUNT; f++)
		if (field_table[f].column && !(taken & FIELD_BIT(f)))
			order[n++] = f;
	return n;
}

int recording_write_header(FILE *f, bool with_gpu_column)
{
	int order[FIELD_COUNT];
	int n = write_order(order);
	int bad = fputs(with_gpu_column ? "t_s,gpu" : "t_s", f) == EOF;
	for (int k = 0; k < n && !bad; k++)
		bad = putc(',', f) == EOF || fputs(field_table[order[k]].column, f) == EOF;
	if (!bad)
		bad = putc('\n', f) == EOF;
	return bad || ferror(f) ? GPULSE_EIO : 0;
}

int recording_write_row(FILE *f, const struct rec_row *row, bool with_gpu_column)
{
	char num[64];
	int order[FIELD_COUNT];
	int n = write_order(order);
	locale_t old_locale = use_c_locale();
	int bad;

	_Static_assert(sizeof num >= GOFLOAT_CG_MAX, "room for a time");
	gofloat_format_cg(num, row->t_s); /* the shortest text that reads back */
	bad = fputs(num, f) == EOF;
	if (with_gpu_column && !bad)
		bad = fprintf(f, ",%d", row->gpu) < 0;
	for (int k = 0; k < n && !bad; k++) {
		int i = order[k];
		bad = putc(',', f) == EOF;
		/* Non-finite values cannot be written in the format; they
		 * are as good as unreadable. */
		if (bad || !(row->valid & FIELD_BIT(i)) || !isfinite(row->v[i]))
			continue;
		format_value(row->v[i], (enum field_id)i, num, sizeof num);
		bad = fputs(num, f) == EOF;
	}
	if (!bad)
		bad = putc('\n', f) == EOF;
	restore_locale(old_locale);
	return bad || ferror(f) ? GPULSE_EIO : 0;
}
