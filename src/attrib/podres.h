/* A client of the kubelet's pod-resources API (gRPC v1.PodResourcesLister/
 * List over a unix socket): which pod's container holds which devices.
 * gRPC is HTTP/2 (libnghttp2) carrying length-prefixed protobuf messages
 * (protobuf-c, generated from podresources.proto); the framing of
 * gRPC-over-HTTP/2 is small and written here (docs/internals/attribution.md
 * says why no gRPC C library is used: Debian's libgrpc is C++ core with an
 * unstable C surface and its own threads). */
#ifndef GPULSE_PODRES_H
#define GPULSE_PODRES_H

#include <stddef.h>
#include <stdint.h>

#include "attrib/attrib.h"

#define PODRES_RESPONSE_MAX (8u << 20)   /* bytes of one List answer accepted */

/* Call List on the socket at `path`, within `timeout_ns` in all (connect,
 * request, answer). Fills out[0..max) with one entry per (pod, container,
 * device ID) of the answer, *n of them; entries past max are counted in
 * *dropped. 0 on success; otherwise a status code and one sentence in err
 * naming the socket and what failed (absent socket, refused, timeout,
 * HTTP or gRPC status, a malformed answer). Blocks up to the timeout: call
 * it from a thread of its own. */
int podres_list(const char *path, int64_t timeout_ns, struct attrib_allocation *out, size_t max,
		size_t *n, size_t *dropped, char *err, size_t errlen);

/* Decode a ListPodResourcesResponse (the protobuf bytes of one gRPC
 * message) into out, as podres_list does. GPULSE_EPARSE (with err) when
 * the bytes are not such a message. Used by podres_list and the fuzz
 * target fuzz_podres.c. */
int podres_decode(const uint8_t *msg, size_t len, struct attrib_allocation *out, size_t max,
		  size_t *n, size_t *dropped, char *err, size_t errlen);

/* Split a gRPC response body (a sequence of 5-byte-prefixed messages) and
 * return the first message in *msg and *msglen. GPULSE_EPARSE when the framing
 * is cut short or the message is compressed (none was offered). */
int podres_grpc_unframe(const uint8_t *body, size_t len, const uint8_t **msg, size_t *msglen,
			char *err, size_t errlen);

#endif
