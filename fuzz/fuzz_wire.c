/* libFuzzer target for the wire codec (src/wire/wire.c), the daemon's
 * first contact with bytes from inside other users' processes. The input
 * is read twice: as a whole frame (header, then the payload it announces),
 * and as a type byte followed by a payload, so every frame type is reached
 * without the fuzzer first having to find the magic. Whatever wire_decode
 * accepts must re-encode to the same bytes exactly (strict decoding leaves
 * no two encodings of one message), and nothing may read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned types[] = {
	WIRE_HELLO, WIRE_STATUS, WIRE_KERNELS, WIRE_COPIES, WIRE_UVM, WIRE_STREAMS,
	WIRE_RANGES, WIRE_TRACE_EVENTS, WIRE_TRACE_END, WIRE_CAPTURE, WIRE_CONFIG,
	0, 10, 63,
};

static uint8_t out[WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD];

/* Decode one payload; if accepted, encode it and compare. */
static void check(struct wire_msg *m, unsigned type, const uint8_t *p, size_t len)
{
	char err[256];
	int rc = wire_decode(m, type, p, len, err, sizeof err);
	if (rc != 0) {
		/* Every refusal explains itself. */
		if (err[0] == '\0')
			__builtin_trap();
		return;
	}
	size_t n = wire_encode(m, out, sizeof out);
	if (n != WIRE_HEADER_BYTES + len || memcmp(out + WIRE_HEADER_BYTES, p, len) != 0)
		__builtin_trap();
	unsigned t2;
	uint32_t l2;
	if (wire_header_parse(out, &t2, &l2) != 0 || t2 != type || l2 != len)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_msg m = {0};
	unsigned type;
	uint32_t len;
	if (size >= WIRE_HEADER_BYTES && wire_header_parse(data, &type, &len) == 0 &&
	    len <= size - WIRE_HEADER_BYTES) {
		/* A private copy, so ASan sees reads one past the payload. */
		uint8_t *p = malloc(len ? len : 1);
		if (p) {
			memcpy(p, data + WIRE_HEADER_BYTES, len);
			check(&m, type, p, len);
			/* The header comes back too. */
			if (wire_decode(&m, type, p, len, NULL, 0) == 0 &&
			    memcmp(out, data, WIRE_HEADER_BYTES) != 0)
				__builtin_trap();
			free(p);
		}
	}
	if (size >= 1) {
		unsigned t = types[data[0] % (sizeof types / sizeof types[0])];
		uint8_t *p = malloc(size - 1 ? size - 1 : 1);
		if (p) {
			memcpy(p, data + 1, size - 1);
			check(&m, t, p, size - 1);
			free(p);
		}
	}
	wire_msg_free(&m);
	return 0;
}
