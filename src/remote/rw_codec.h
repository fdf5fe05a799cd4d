/* Prometheus remote-write 1.0 on the wire: a prometheus.WriteRequest
 * (src/remote/remote.proto) packed by protobuf-c and compressed with
 * snappy's block format, as a receiver expects behind
 * Content-Encoding: snappy and Content-Type: application/x-protobuf.
 * Pure functions: no I/O, no threads. */
#ifndef GPULSE_RW_CODEC_H
#define GPULSE_RW_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "remote.pb-c.h"
#include "store/tsdb.h"

#define RW_MAX_BODY (64u << 20)  /* a decoded request larger than this is refused */

struct rw_sample {
	int64_t t_ms;
	double v;
};

/* One series of a request: its labels (sorted by name, __name__ among
 * them, as the receiver requires) and its samples, oldest first. */
struct rw_series {
	const struct label *labels;
	size_t nlabels;
	const struct rw_sample *samples;
	size_t nsamples;
};

/* Append to `out` the snappy-compressed WriteRequest of the n series.
 * 0, GPULSE_ENOMEM, or the buffer's GPULSE_ELIMIT. */
int rw_encode(const struct rw_series *series, size_t n, struct buf *out);

/* The uncompressed WriteRequest of the n series, appended to `out`
 * (what rw_encode compresses; the benchmark's byte counts). */
int rw_encode_raw(const struct rw_series *series, size_t n, struct buf *out);

/* Snappy block format both ways. Uncompress refuses (GPULSE_EPARSE, the
 * reason in err) input that is not valid snappy or that would decode to
 * more than `max` bytes (GPULSE_ELIMIT). */
int rw_snappy_compress(const void *in, size_t len, struct buf *out);
int rw_snappy_uncompress(const void *in, size_t len, size_t max, struct buf *out, char *err,
			 size_t errlen);

/* Decode a request body (snappy, then protobuf) into *out, the caller's,
 * freed with prometheus__write_request__free_unpacked(*out, NULL).
 * 0, GPULSE_EPARSE or GPULSE_ELIMIT with the reason in err, ENOMEM. */
int rw_decode(const void *body, size_t len, Prometheus__WriteRequest **out, char *err,
	      size_t errlen);

#endif
