/* libFuzzer target for the evidence files (daemon/evidence_files.h): any
 * bytes must decode or be refused with a reason, never crash or read out
 * of bounds; what decodes must encode back to bytes that decode to the
 * same header and document. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "daemon/evidence_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evidence_file_meta m, m2;
	size_t off, len, off2, len2;
	char err[256] = "";
	if (evidence_file_decode((const char *)data, size, &m, &off, &len, err, sizeof err) != 0) {
		if (!err[0])
			__builtin_trap();
		return 0;
	}
	if (off + len != size)
		__builtin_trap();
	struct buf b;
	buf_init(&b, size + EVIDENCE_FILE_HEADER_MAX);
	if (evidence_file_encode(&b, &m, (const char *)data + off, len) != 0)
		__builtin_trap();
	if (evidence_file_decode(b.data, b.len, &m2, &off2, &len2, err, sizeof err) != 0 ||
	    strcmp(m.id, m2.id) != 0 || m.gpu != m2.gpu || strcmp(m.cause, m2.cause) != 0 ||
	    strcmp(m.detail, m2.detail) != 0 || m.created_ms != m2.created_ms ||
	    m.ready_ms != m2.ready_ms || m.nlinks != m2.nlinks || len2 != len ||
	    memcmp(b.data + off2, data + off, len) != 0)
		__builtin_trap();
	for (unsigned i = 0; i < m.nlinks; i++)
		if (m.links[i].fingerprint != m2.links[i].fingerprint ||
		    m.links[i].starts_at_ms != m2.links[i].starts_at_ms ||
		    strcmp(m.links[i].alert, m2.links[i].alert) != 0)
			__builtin_trap();
	buf_free(&b);
	return 0;
}
