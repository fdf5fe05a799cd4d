/* The remote-write queue on disk: an append-only log of records in
 * numbered segment files under one folder, each record one request body
 * as it will be sent, with a CRC; and a committed read offset, written
 * (fdatasync'd) after each acknowledged send. docs/internals/remote.md
 * has the design and the exact guarantee.
 *
 *   DIR/<16 hex digits>.seg   records, back to back:
 *       u32 magic "GPRW" | u32 payload length | u32 samples | u32 crc32
 *       | i64 newest sample's time (ms) | payload
 *     (little-endian; the CRC covers samples, the time and the payload)
 *   DIR/offset                two 32-byte slots, each
 *       u64 sequence | u64 segment | u64 byte offset | u32 crc32 | u32 0
 *     written in turn; the valid slot with the higher sequence counts.
 *
 * Durability: each record is fdatasync'd before segq_append returns, so a
 * record the sender may read is on disk; the offset is fdatasync'd before
 * segq_ack returns. A torn or damaged tail of a segment (a crash in the
 * middle of an append) is cut off at open and counted, never fatal.
 * Bound: past max_bytes the oldest segment goes, counted as dropped.
 *
 * Threads: every call takes the queue's lock; one appender and one
 * reader may run at once. */
#ifndef GPULSE_SEGQ_H
#define GPULSE_SEGQ_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define SEGQ_MAGIC 0x57525047u     /* "GPRW" little-endian */
#define SEGQ_HDR_BYTES 24
#define SEGQ_MAX_RECORD (32u << 20) /* a payload larger than this is refused */
#define SEGQ_MIN_MAX_BYTES (1u << 20)

struct segq;

struct segq_hdr {
	uint32_t len;          /* payload bytes */
	uint32_t nsamples;
	uint32_t crc;
	int64_t max_t_ms;
};

/* Decode the record at p[0..avail): 0 with *h filled when a whole, intact
 * record is there (it spans SEGQ_HDR_BYTES + h->len bytes); GPULSE_ERANGE
 * when the bytes end inside it (a torn tail); GPULSE_EPARSE when it is
 * damaged (bad magic, length over SEGQ_MAX_RECORD, CRC mismatch). */
int segq_record_decode(const uint8_t *p, size_t avail, struct segq_hdr *h);

/* Encode one record into out (appended). 0 or the buffer's status. */
int segq_record_encode(struct buf *out, const void *payload, uint32_t len, uint32_t nsamples,
		       int64_t max_t_ms);

struct segq_stats {
	uint64_t bytes;                  /* segment files on disk */
	uint64_t segments;
	uint64_t pending_records;        /* appended, not acknowledged */
	uint64_t pending_samples;
	uint64_t appended_records_total;
	uint64_t acked_records_total;
	uint64_t dropped_records_total;  /* the oldest, dropped over max_bytes */
	uint64_t dropped_samples_total;
	uint64_t corrupt_records_total;  /* torn or damaged records cut off */
	uint64_t corrupt_samples_total;  /* samples of records skipped when damaged after open */
	uint64_t io_errors_total;
	int64_t newest_acked_t_ms;       /* newest sample time acknowledged (0: none) */
};

/* Open (creating the folder, mode 0700, when missing) and recover the
 * queue in `dir`. max_bytes bounds the segment files (at least
 * SEGQ_MIN_MAX_BYTES); a segment is cut at max_bytes / 8. 0, or
 * GPULSE_EIO / ENOMEM with a sentence naming the path in err. */
int segq_open(struct segq **out, const char *dir, uint64_t max_bytes, char *err, size_t errlen);
/* Close; accepts NULL. */
void segq_close(struct segq *q);

/* Append one record, durably. 0; GPULSE_ELIMIT for a payload over
 * SEGQ_MAX_RECORD; GPULSE_EIO (counted; err says what). */
int segq_append(struct segq *q, const void *payload, size_t len, uint32_t nsamples,
		int64_t max_t_ms, char *err, size_t errlen);

/* Where a peeked record lies, for segq_ack. */
struct segq_pos {
	uint64_t seg, off;
};

/* Copy the oldest unacknowledged record's payload into `out` (reset
 * first). 0 with *pos and *h; GPULSE_ENOENT when the queue is empty;
 * GPULSE_EIO. A record damaged since open is skipped with the rest of its
 * segment and counted. */
int segq_peek(struct segq *q, struct buf *out, struct segq_hdr *h, struct segq_pos *pos);

/* The record at pos was delivered (or given up on): move the committed
 * offset past it and write it down. A pos that is no longer the oldest
 * (dropped over the bound meanwhile) is ignored. 0 or GPULSE_EIO. */
int segq_ack(struct segq *q, const struct segq_pos *pos, const struct segq_hdr *h);

void segq_get_stats(struct segq *q, struct segq_stats *out);

#endif
