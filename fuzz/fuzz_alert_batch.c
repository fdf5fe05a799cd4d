/* libFuzzer target for the alert queue's batch files (batchfile.h): any
 * bytes must decode or be refused with a reason, never crash or read out
 * of bounds; what decodes must encode back to the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "alert/batchfile.h"
#include "common/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct alert_batch_hdr h;
	size_t off, len;
	char err[256];
	if (alert_batch_decode((const char *)data, size, &h, &off, &len, err, sizeof err) != 0) {
		if (!err[0])
			__builtin_trap();
		return 0;
	}
	if (off + len != size)
		__builtin_trap();
	struct buf b;
	buf_init(&b, ALERT_BATCH_MAX_BODY + 256);
	if (alert_batch_encode(&b, &h, (const char *)data + off, len) != 0)
		__builtin_trap();
	/* The header may have been written with leading zeros or other
	 * spellings; the re-encoding must decode to the same values. */
	struct alert_batch_hdr h2;
	size_t off2, len2;
	if (alert_batch_decode(b.data, b.len, &h2, &off2, &len2, err, sizeof err) != 0 ||
	    h2.created_ms != h.created_ms || h2.nalerts != h.nalerts || len2 != len ||
	    memcmp(b.data + off2, data + off, len) != 0)
		__builtin_trap();
	buf_free(&b);
	return 0;
}
