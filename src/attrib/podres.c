/* The pod-resources client (podres.h). */
#include "attrib/podres.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "attrib/cgroup.h"
#include "podresources.pb-c.h"
#include "common/status.h"

#define LIST_PATH "/v1.PodResourcesLister/List"

static void put_alloc(struct attrib_allocation *out, size_t max, size_t *n, size_t *dropped,
		      const char *pod, const char *ns, const char *ctr, const char *res,
		      const char *dev)
{
	if (*n >= max) {
		(*dropped)++;
		return;
	}
	struct attrib_allocation *a = &out[(*n)++];
	owner_copy_label(a->pod, sizeof a->pod, pod, strlen(pod));
	owner_copy_label(a->namespace_, sizeof a->namespace_, ns, strlen(ns));
	owner_copy_label(a->container, sizeof a->container, ctr, strlen(ctr));
	owner_copy_label(a->resource, sizeof a->resource, res, strlen(res));
	owner_copy_label(a->device_id, sizeof a->device_id, dev, strlen(dev));
}

int podres_decode(const uint8_t *msg, size_t len, struct attrib_allocation *out, size_t max,
		  size_t *n, size_t *dropped, char *err, size_t errlen)
{
	*n = *dropped = 0;
	V1__ListPodResourcesResponse *r = v1__list_pod_resources_response__unpack(NULL, len, msg);
	if (!r) {
		snprintf(err, errlen, "the List answer (%zu bytes) is not a ListPodResourcesResponse",
			 len);
		return GPULSE_EPARSE;
	}
	for (size_t p = 0; p < r->n_pod_resources; p++) {
		const V1__PodResources *pr = r->pod_resources[p];
		for (size_t c = 0; c < pr->n_containers; c++) {
			const V1__ContainerResources *cr = pr->containers[c];
			for (size_t d = 0; d < cr->n_devices; d++) {
				const V1__ContainerDevices *cd = cr->devices[d];
				for (size_t k = 0; k < cd->n_device_ids; k++)
					put_alloc(out, max, n, dropped, pr->name, pr->namespace_,
						  cr->name, cd->resource_name, cd->device_ids[k]);
			}
		}
	}
	v1__list_pod_resources_response__free_unpacked(r, NULL);
	return 0;
}

int podres_grpc_unframe(const uint8_t *body, size_t len, const uint8_t **msg, size_t *msglen,
			char *err, size_t errlen)
{
	if (len < 5) {
		snprintf(err, errlen, "the gRPC answer is %zu bytes, shorter than a message header",
			 len);
		return GPULSE_EPARSE;
	}
	if (body[0] != 0) {
		snprintf(err, errlen, "the gRPC answer is compressed (flag %u), which was not offered",
			 body[0]);
		return GPULSE_EPARSE;
	}
	uint32_t m = (uint32_t)body[1] << 24 | (uint32_t)body[2] << 16 | (uint32_t)body[3] << 8 |
		     body[4];
	if (m > len - 5) {
		snprintf(err, errlen, "the gRPC message says %u bytes but %zu came", m, len - 5);
		return GPULSE_EPARSE;
	}
	*msg = body + 5;
	*msglen = m;
	return 0;
}

/* ---- one call over HTTP/2 --------------------------------------------- */

struct call {
	int fd;
	uint8_t *body;
	size_t body_len, body_cap;
	bool too_big;
	int http_status;
	int grpc_status;            /* -1 until the trailer says */
	char grpc_message[96];
	bool closed;
	uint32_t close_code;
	int32_t stream;
	uint8_t req[5];             /* an empty gRPC message */
	size_t req_sent;
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags,
			     void *ud)
{
	(void)s, (void)flags;
	struct call *c = ud;
	ssize_t w = send(c->fd, data, len, MSG_NOSIGNAL);
	if (w < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			       ? NGHTTP2_ERR_WOULDBLOCK
			       : NGHTTP2_ERR_CALLBACK_FAILURE;
	return w;
}

static ssize_t recv_cb(nghttp2_session *s, uint8_t *buf, size_t len, int flags, void *ud)
{
	(void)s, (void)flags;
	struct call *c = ud;
	ssize_t r = recv(c->fd, buf, len, 0);
	if (r < 0)
		return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
			       ? NGHTTP2_ERR_WOULDBLOCK
			       : NGHTTP2_ERR_CALLBACK_FAILURE;
	if (r == 0)
		return NGHTTP2_ERR_EOF;
	return r;
}

static int data_cb(nghttp2_session *s, uint8_t flags, int32_t stream, const uint8_t *data,
		   size_t len, void *ud)
{
	(void)s, (void)flags;
	struct call *c = ud;
	if (stream != c->stream)
		return 0;
	if (c->body_len + len > PODRES_RESPONSE_MAX) {
		c->too_big = true;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	if (c->body_len + len > c->body_cap) {
		size_t cap = c->body_cap ? c->body_cap : 16384;
		while (cap < c->body_len + len)
			cap *= 2;
		uint8_t *nb = realloc(c->body, cap);
		if (!nb)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		c->body = nb;
		c->body_cap = cap;
	}
	memcpy(c->body + c->body_len, data, len);
	c->body_len += len;
	return 0;
}

static int header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	(void)s, (void)flags;
	struct call *c = ud;
	if (f->hd.stream_id != c->stream)
		return 0;
	char v[96];
	size_t n = valuelen < sizeof v - 1 ? valuelen : sizeof v - 1;
	memcpy(v, value, n);
	v[n] = '\0';
	if (namelen == 7 && memcmp(name, ":status", 7) == 0)
		c->http_status = atoi(v);
	else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0)
		c->grpc_status = atoi(v);
	else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0)
		owner_copy_label(c->grpc_message, sizeof c->grpc_message, v, n);
	return 0;
}

static int close_cb(nghttp2_session *s, int32_t stream, uint32_t code, void *ud)
{
	(void)s;
	struct call *c = ud;
	if (stream == c->stream) {
		c->closed = true;
		c->close_code = code;
	}
	return 0;
}

static ssize_t req_read_cb(nghttp2_session *s, int32_t stream, uint8_t *buf, size_t len,
				 uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	(void)s, (void)stream, (void)src;
	struct call *c = ud;
	size_t left = sizeof c->req - c->req_sent;
	size_t k = left < len ? left : len;
	memcpy(buf, c->req + c->req_sent, k);
	c->req_sent += k;
	if (c->req_sent == sizeof c->req)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)k;
}

#define NV(n, v)                                                                          \
	{(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE}

/* Connect without blocking past the deadline. */
static int connect_unix(const char *path, int64_t deadline, int *fd_out, char *err, size_t errlen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path) {
		snprintf(err, errlen, "pod-resources socket %s: path too long", path);
		return GPULSE_EINVAL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "pod-resources socket %s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		if (errno != EINPROGRESS && errno != EAGAIN) {
			int e = errno;
			snprintf(err, errlen, "pod-resources socket %s: %s", path, strerror(e));
			close(fd);
			return e == ENOENT ? GPULSE_ENOENT : GPULSE_EIO;
		}
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		int64_t left = deadline - mono_ns();
		int pr = left > 0 ? poll(&p, 1, (int)(left / 1000000) + 1) : 0;
		int soerr = 0;
		socklen_t sl = sizeof soerr;
		if (pr <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr) {
			snprintf(err, errlen, "pod-resources socket %s: %s", path,
				 pr <= 0 ? "connect timed out" : strerror(soerr));
			close(fd);
			return pr <= 0 ? GPULSE_ETIMEDOUT : GPULSE_EIO;
		}
	}
	*fd_out = fd;
	return 0;
}

int podres_list(const char *path, int64_t timeout_ns, struct attrib_allocation *out, size_t max,
		size_t *n, size_t *dropped, char *err, size_t errlen)
{
	*n = *dropped = 0;
	int64_t deadline = mono_ns() + timeout_ns;
	struct call c = {.fd = -1, .grpc_status = -1, .stream = -1};
	int rc = connect_unix(path, deadline, &c.fd, err, errlen);
	if (rc)
		return rc;
	nghttp2_session_callbacks *cbs = NULL;
	nghttp2_session *s = NULL;
	rc = GPULSE_ENOMEM;
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		goto out;
	nghttp2_session_callbacks_set_send_callback(cbs, send_cb);
	nghttp2_session_callbacks_set_recv_callback(cbs, recv_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, data_cb);
	nghttp2_session_callbacks_set_on_header_callback(cbs, header_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, close_cb);
	if (nghttp2_session_client_new(&s, cbs, &c) != 0)
		goto out;
	nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
				       {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1u << 20}};
	nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
	nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, 1 << 24);
	const nghttp2_nv hdrs[] = {
		NV(":method", "POST"), NV(":scheme", "http"), NV(":path", LIST_PATH),
		NV(":authority", "localhost"), NV("content-type", "application/grpc"),
		NV("te", "trailers"), NV("user-agent", "gpulse"),
	};
	nghttp2_data_provider dp = {.read_callback = req_read_cb};
	c.stream = nghttp2_submit_request(s, NULL, hdrs, sizeof hdrs / sizeof hdrs[0], &dp, &c);
	if (c.stream < 0)
		goto out;
	rc = 0;
	while (!c.closed) {
		int64_t left = deadline - mono_ns();
		if (left <= 0) {
			snprintf(err, errlen, "pod-resources socket %s: List timed out after %.1f s",
				 path, (double)timeout_ns / 1e9);
			rc = GPULSE_ETIMEDOUT;
			goto out;
		}
		struct pollfd p = {.fd = c.fd, .events = POLLIN};
		if (nghttp2_session_want_write(s))
			p.events |= POLLOUT;
		int pr = poll(&p, 1, (int)(left / 1000000) + 1);
		if (pr < 0 && errno != EINTR) {
			snprintf(err, errlen, "pod-resources socket %s: poll: %s", path, strerror(errno));
			rc = GPULSE_EIO;
			goto out;
		}
		if (pr <= 0)
			continue;
		int r = 0;
		if (p.revents & (POLLIN | POLLHUP | POLLERR))
			r = nghttp2_session_recv(s);
		if (r == 0 && (p.revents & POLLOUT))
			r = nghttp2_session_send(s);
		if (r == 0 && nghttp2_session_want_write(s))
			r = nghttp2_session_send(s);
		if (r != 0 && !c.closed) {
			snprintf(err, errlen, "pod-resources socket %s: %s", path,
				 c.too_big ? "the List answer is larger than 8 MiB"
					   : r == NGHTTP2_ERR_EOF ? "the kubelet closed the connection"
								  : nghttp2_strerror(r));
			rc = c.too_big ? GPULSE_ELIMIT : GPULSE_EIO;
			goto out;
		}
		if (!nghttp2_session_want_read(s) && !nghttp2_session_want_write(s) && !c.closed) {
			snprintf(err, errlen, "pod-resources socket %s: the session ended early", path);
			rc = GPULSE_EIO;
			goto out;
		}
	}
	if (c.http_status != 200) {
		snprintf(err, errlen, "pod-resources socket %s: HTTP status %d", path, c.http_status);
		rc = GPULSE_EIO;
		goto out;
	}
	if (c.grpc_status != 0) {
		snprintf(err, errlen, "pod-resources socket %s: gRPC status %d%s%s", path,
			 c.grpc_status, c.grpc_message[0] ? ": " : "", c.grpc_message);
		rc = GPULSE_EIO;
		goto out;
	}
	const uint8_t *msg;
	size_t msglen;
	char why[128];
	if (podres_grpc_unframe(c.body, c.body_len, &msg, &msglen, why, sizeof why) != 0 ||
	    podres_decode(msg, msglen, out, max, n, dropped, why, sizeof why) != 0) {
		snprintf(err, errlen, "pod-resources socket %s: %s", path, why);
		rc = GPULSE_EPARSE;
	}
out:
	if (rc == GPULSE_ENOMEM)
		snprintf(err, errlen, "pod-resources socket %s: out of memory", path);
	nghttp2_session_del(s);
	nghttp2_session_callbacks_del(cbs);
	free(c.body);
	if (c.fd >= 0)
		close(c.fd);
	return rc;
}
