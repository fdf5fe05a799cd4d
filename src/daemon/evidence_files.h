/* Evidence kept on disk (issue 37): one file per piece of evidence in
 * evidence.path (default STORAGE_PATH.evidence, beside the store), so
 * what was gathered survives a restart of gpulsed, and the URL an alert
 * carried still answers. A file is
 *
 *   gpulse-evidence 1 {"id":…,"gpu":…,"cause":…,"detail":…,"created_ms":…,
 *                      "ready_ms":…,"links":[{"fp":"HEX","starts_ms":…,"alert":…}],
 *                      "length":N,"crc32":"XXXXXXXX"}\n
 *   DOCUMENT (length bytes: what /api/v1/evidence/ID serves)
 *
 * written whole or not at all (common/atomic_file.h); the length and CRC
 * catch what the disk damages later. The links are the alerts (their
 * fingerprint and start) that carry its URL, so an alert still firing
 * after a restart links the same evidence rather than spending budget on
 * a new one. */
#ifndef GPULSE_DAEMON_EVIDENCE_FILES_H
#define GPULSE_DAEMON_EVIDENCE_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define EVIDENCE_FILE_SUFFIX ".evidence"
#define EVIDENCE_FILE_LINKS 8        /* alerts remembered per piece of evidence */
#define EVIDENCE_FILE_HEADER_MAX 4096

struct evidence_file_link {
	uint64_t fingerprint;
	int64_t starts_at_ms;
	char alert[128];
};

struct evidence_file_meta {
	char id[40];
	int gpu;
	char cause[16];
	char detail[128];
	int64_t created_ms, ready_ms;    /* wall clock */
	struct evidence_file_link links[EVIDENCE_FILE_LINKS];
	unsigned nlinks;
};

/* Append the file's bytes (header and document) to out. 0 or the buf's
 * error. */
int evidence_file_encode(struct buf *out, const struct evidence_file_meta *m, const char *doc,
			 size_t len);
/* Parse a whole file. On success the document is data[*doc_off ..
 * *doc_off + *doc_len). GPULSE_EPARSE with the reason in err. */
int evidence_file_decode(const char *data, size_t len, struct evidence_file_meta *m,
			 size_t *doc_off, size_t *doc_len, char *err, size_t errlen);

/* Write DIR/ID.evidence, making DIR (0700) when it is missing. 0, GPULSE_EIO (the reason, with strerror's
 * words: "No space left on device", "Read-only file system", in err) or
 * GPULSE_ENOMEM. */
int evidence_file_write(const char *dir, const struct evidence_file_meta *m, const char *doc,
			size_t len, char *err, size_t errlen);
/* Remove DIR/ID.evidence; one that is not there is removed. 0 or
 * GPULSE_EIO with the reason in err. */
int evidence_file_remove(const char *dir, const char *id, char *err, size_t errlen);

/* Called for each intact file; `doc` (NUL-terminated, malloc'd) passes
 * to the callee, which frees it. */
typedef void evidence_file_fn(void *ctx, const struct evidence_file_meta *m, char *doc,
			      size_t len);
/* Create DIR (0700) when missing and read every NAME.evidence in DIR of at
 * most max_doc bytes through fn. A damaged file is renamed NAME.bad
 * (kept for a person to look at, never read again) and counted in
 * *damaged. 0, or GPULSE_EIO when DIR cannot be made or listed, with
 * the reason in err. */
int evidence_file_load(const char *dir, size_t max_doc, evidence_file_fn *fn, void *ctx,
		       unsigned *damaged, char *err, size_t errlen);

#endif
