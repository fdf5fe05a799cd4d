/* The on-disk form of one pending notification batch (one file per batch
 * in a receiver's queue directory, docs/internals/alerting.md): a one-line
 * header, then the body exactly as it is sent.
 *
 *   gpulse-alert-batch 1 created_ms=N alerts=N length=N crc32=XXXXXXXX\n
 *   BODY (length bytes)
 *
 * Files are written to a temporary name, fsync'd, renamed into place and
 * the directory fsync'd, so a crash leaves either the whole batch or none;
 * the length and CRC catch what the disk damages later. */
#ifndef GPULSE_ALERT_BATCHFILE_H
#define GPULSE_ALERT_BATCHFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define ALERT_BATCH_MAX_BODY (8u << 20) /* a larger batch is never written */
#define ALERT_BATCH_SUFFIX ".batch"

struct alert_batch_hdr {
	int64_t created_ms;   /* wall clock when the batch was made */
	unsigned nalerts;
};

/* CRC-32 (IEEE 802.3, as zlib's crc32). */
uint32_t alert_crc32(const void *data, size_t len);

/* Append the header and body to `out`. 0 or the buf's error;
 * GPULSE_ELIMIT for a body over ALERT_BATCH_MAX_BODY. */
int alert_batch_encode(struct buf *out, const struct alert_batch_hdr *h, const char *body,
		       size_t len);

/* Parse a whole file's bytes. On success the body is data[*body_off ..
 * *body_off + *body_len). GPULSE_EPARSE (with the reason in `err`) for a
 * file that is not a complete, intact batch. */
int alert_batch_decode(const char *data, size_t len, struct alert_batch_hdr *h, size_t *body_off,
		       size_t *body_len, char *err, size_t errlen);

/* Write batch `seq` into `dir` atomically and durably as
 * DIR/<seq as 16 hex digits>.batch. 0, GPULSE_EIO (reason in `err`) or
 * GPULSE_ELIMIT. */
int alert_batch_write(const char *dir, uint64_t seq, const struct alert_batch_hdr *h,
		      const char *body, size_t len, char *err, size_t errlen);

/* Read and decode DIR/NAME (at most ALERT_BATCH_MAX_BODY + 256 bytes).
 * On success *data is the file (free with free()) and the body lies at
 * *body_off. GPULSE_EIO or GPULSE_EPARSE with the reason in `err`. */
int alert_batch_read(const char *dir, const char *name, struct alert_batch_hdr *h, char **data,
		     size_t *body_off, size_t *body_len, char *err, size_t errlen);

/* Remove DIR/<seq>.batch. 0 or GPULSE_EIO. */
int alert_batch_remove(const char *dir, uint64_t seq);

/* The seq of a file name "<16 hex>.batch", or -1 when it is not one. */
int64_t alert_batch_name_seq(const char *name);

#endif
