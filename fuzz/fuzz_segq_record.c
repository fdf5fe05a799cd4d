/* libFuzzer target for the remote-write queue's segment records
 * (segq.h), which gpulsed reads back from disk: any bytes must decode as a
 * run of whole records and then stop at a torn or damaged one, never
 * crash or read past the end; a decoded record encodes back to the same
 * bytes. Also the request decoder (rw_codec.h) on the payloads. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "remote/rw_codec.h"
#include "remote/segq.h"
#include "common/status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	while (off < size) {
		struct segq_hdr h;
		int rc = segq_record_decode(data + off, size - off, &h);
		if (rc == GPULSE_ERANGE || rc == GPULSE_EPARSE)
			break;
		if (rc != 0 || SEGQ_HDR_BYTES + (size_t)h.len > size - off)
			__builtin_trap();
		struct buf b;
		buf_init(&b, SEGQ_MAX_RECORD + SEGQ_HDR_BYTES);
		if (segq_record_encode(&b, data + off + SEGQ_HDR_BYTES, h.len, h.nsamples, h.max_t_ms) ||
		    b.len != SEGQ_HDR_BYTES + h.len || memcmp(b.data, data + off, b.len) != 0)
			__builtin_trap();
		buf_free(&b);
		Prometheus__WriteRequest *wr = NULL;
		char err[256];
		if (rw_decode(data + off + SEGQ_HDR_BYTES, h.len, &wr, err, sizeof err) == 0)
			prometheus__write_request__free_unpacked(wr, NULL);
		else if (!err[0])
			__builtin_trap();
		off += SEGQ_HDR_BYTES + h.len;
	}
	return 0;
}
