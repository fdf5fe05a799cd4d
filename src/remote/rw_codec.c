/* Remote-write request encoding: protobuf-c packs the message, snappy's C
 * binding compresses it (rw_codec.h). The message is built in three
 * arrays sized for the whole request, so a request of any size costs a
 * handful of allocations, not one per sample. */
#include "remote/rw_codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <snappy-c.h>

#include "common/status.h"
#include "common/str.h"

static int pack(const struct rw_series *series, size_t n, struct buf *out, bool compress)
{
	size_t nl = 0, ns = 0;
	for (size_t i = 0; i < n; i++) {
		nl += series[i].nlabels;
		ns += series[i].nsamples;
	}
	Prometheus__TimeSeries *ts = calloc(n ? n : 1, sizeof *ts);
	Prometheus__TimeSeries **tsp = calloc(n ? n : 1, sizeof *tsp);
	Prometheus__Label *lb = calloc(nl ? nl : 1, sizeof *lb);
	Prometheus__Label **lbp = calloc(nl ? nl : 1, sizeof *lbp);
	Prometheus__Sample *sm = calloc(ns ? ns : 1, sizeof *sm);
	Prometheus__Sample **smp = calloc(ns ? ns : 1, sizeof *smp);
	uint8_t *raw = NULL;
	int rc = GPULSE_ENOMEM;
	if (!ts || !tsp || !lb || !lbp || !sm || !smp)
		goto out;
	size_t li = 0, si = 0;
	for (size_t i = 0; i < n; i++) {
		prometheus__time_series__init(&ts[i]);
		tsp[i] = &ts[i];
		ts[i].n_labels = series[i].nlabels;
		ts[i].labels = &lbp[li];
		for (size_t j = 0; j < series[i].nlabels; j++, li++) {
			prometheus__label__init(&lb[li]);
			/* protobuf-c's strings are not const; packing only reads them. */
			lb[li].name = (char *)(uintptr_t)series[i].labels[j].name;
			lb[li].value = (char *)(uintptr_t)series[i].labels[j].value;
			lbp[li] = &lb[li];
		}
		ts[i].n_samples = series[i].nsamples;
		ts[i].samples = &smp[si];
		for (size_t j = 0; j < series[i].nsamples; j++, si++) {
			prometheus__sample__init(&sm[si]);
			sm[si].value = series[i].samples[j].v;
			sm[si].timestamp = series[i].samples[j].t_ms;
			smp[si] = &sm[si];
		}
	}
	Prometheus__WriteRequest wr = PROMETHEUS__WRITE_REQUEST__INIT;
	wr.n_timeseries = n;
	wr.timeseries = tsp;
	size_t len = prometheus__write_request__get_packed_size(&wr);
	if (!compress) {
		if ((rc = buf_reserve(out, len)))
			goto out;
		prometheus__write_request__pack(&wr, (uint8_t *)out->data + out->len);
		out->len += len;
		out->data[out->len] = '\0';
		rc = 0;
		goto out;
	}
	raw = malloc(len ? len : 1);
	if (!raw)
		goto out;
	prometheus__write_request__pack(&wr, raw);
	rc = rw_snappy_compress(raw, len, out);
out:
	free(raw);
	free(ts);
	free(tsp);
	free(lb);
	free(lbp);
	free(sm);
	free(smp);
	return rc;
}

int rw_encode(const struct rw_series *series, size_t n, struct buf *out)
{
	return pack(series, n, out, true);
}

int rw_encode_raw(const struct rw_series *series, size_t n, struct buf *out)
{
	return pack(series, n, out, false);
}

int rw_snappy_compress(const void *in, size_t len, struct buf *out)
{
	size_t max = snappy_max_compressed_length(len);
	int rc = buf_reserve(out, max);
	if (rc)
		return rc;
	size_t clen = max;
	if (snappy_compress(in, len, out->data + out->len, &clen) != SNAPPY_OK)
		return GPULSE_ENOMEM;
	out->len += clen;
	out->data[out->len] = '\0';
	return 0;
}

int rw_snappy_uncompress(const void *in, size_t len, size_t max, struct buf *out, char *err,
			 size_t errlen)
{
	size_t ulen = 0;
	if (snappy_uncompressed_length(in, len, &ulen) != SNAPPY_OK) {
		str_errf(err, errlen, "not snappy block data (bad length preamble)");
		return GPULSE_EPARSE;
	}
	if (ulen > max) {
		str_errf(err, errlen, "snappy data decodes to %zu bytes; the limit is %zu", ulen, max);
		return GPULSE_ELIMIT;
	}
	if (snappy_validate_compressed_buffer(in, len) != SNAPPY_OK) {
		str_errf(err, errlen, "damaged snappy block data");
		return GPULSE_EPARSE;
	}
	int rc = buf_reserve(out, ulen);
	if (rc)
		return rc;
	size_t got = ulen;
	if (snappy_uncompress(in, len, out->data + out->len, &got) != SNAPPY_OK || got != ulen) {
		str_errf(err, errlen, "damaged snappy block data");
		return GPULSE_EPARSE;
	}
	out->len += got;
	out->data[out->len] = '\0';
	return 0;
}

int rw_decode(const void *body, size_t len, Prometheus__WriteRequest **out, char *err,
	      size_t errlen)
{
	struct buf b;
	buf_init(&b, RW_MAX_BODY + 1);
	int rc = rw_snappy_uncompress(body, len, RW_MAX_BODY, &b, err, errlen);
	if (rc)
		goto out;
	*out = prometheus__write_request__unpack(NULL, b.len, (const uint8_t *)b.data);
	if (!*out) {
		str_errf(err, errlen, "not a prometheus.WriteRequest (%zu bytes after snappy)", b.len);
		rc = GPULSE_EPARSE;
	}
out:
	buf_free(&b);
	return rc;
}
