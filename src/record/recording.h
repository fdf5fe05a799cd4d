/* Recordings: the CSV format of DESIGN.md's contract
 * (docs/RECORDING.md): a header naming columns, then one row
 * per sample. `t_s` (Unix seconds) is required; `gpu` (index) is optional,
 * for several GPUs in one file; every other known column maps to a field
 * of fields.h and is converted to base units on load. An empty cell means
 * the value was not readable. A value no GPU reports (negative: every
 * column is a count, a percentage, a unit of a non-negative quantity or a
 * bit mask) or "nan" (what a recorder writes for a GPM counter without a
 * value) is read as absent too, and counted with the first one's place
 * (struct recording's invalid_note), for the reader to warn about. Unknown
 * columns are ignored, so newer files still load. Lines end in LF, CRLF, CR or CR CR LF (files edited or
 * written on Windows); a UTF-8 byte order mark is skipped.
 *
 * A malformed file (a row with the wrong number of cells, a bad number,
 * time going backwards for a GPU, a duplicate or missing required column,
 * a header with no rows) is refused with "FILE:LINE:COLUMN: problem". */
#ifndef GPULSE_RECORDING_H
#define GPULSE_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "collect/fields.h"

#define RECORDING_MAX_ROWS 20000000   /* about 23 days of one GPU at 10 Hz */
#define RECORDING_MAX_LINE 8192

struct rec_row {
	double t_s;                /* Unix seconds */
	int gpu;                   /* 0 when the file has no gpu column */
	uint64_t valid;            /* fields present in this row */
	double v[FIELD_COUNT];     /* base units */
};

struct recording {
	size_t nrows;
	struct rec_row *rows;      /* in file order: time-sorted per GPU */
	int ngpus;                 /* 1 + highest gpu index */
	uint64_t columns;          /* fields the header names */
	bool has_gpu_column;
	size_t ninvalid;           /* cells read as absent for a value no GPU
				    * reports: negative */
	size_t nnan;               /* "nan" cells: a recorder's word for a
				    * counter with no value, read as absent
				    * like an empty cell (not a fault) */
	char invalid_note[512];    /* "NAME:LINE:COL: ... read as absent (N more)"
				    * for the first of them; "" when none */
};

/* Parse `len` bytes; `name` is used in error messages. On success *out is
 * the caller's, freed with recording_free, and holds at least one row. On
 * failure returns
 * GPULSE_EPARSE (or GPULSE_ELIMIT, GPULSE_ENOMEM) and writes
 * "NAME:LINE:COL: problem" into err. */
int recording_parse(const char *data, size_t len, const char *name,
		    struct recording **out, char *err, size_t errlen);
/* Read and parse a file. GPULSE_EIO with the reason when it can't be read. */
int recording_load(const char *path, struct recording **out, char *err, size_t errlen);
/* Accepts NULL. */
void recording_free(struct recording *r);

/* Writing: the header (with a gpu column when asked), then rows. Values
 * are written in the column's unit with enough digits to read back the
 * same; invalid fields are written as empty cells. 0 or GPULSE_EIO. */
int recording_write_header(FILE *f, bool with_gpu_column);
int recording_write_row(FILE *f, const struct rec_row *row, bool with_gpu_column);

#endif
