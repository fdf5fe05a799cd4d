/* Socket client of the injection library; see inject_client.h. Hand-written on
 * poll(2): the library must not pull an event-loop library into every
 * CUDA process, and one socket needs none. */
#include "inject/inject_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/mono_cond.h"
#include "common/status.h"
#include "common/str.h"

#define RX_MAX 8192                /* daemon → library frames are small */
#define FRAME_MAX (WIRE_HEADER_BYTES + WIRE_MAX_PAYLOAD)
#define POLL_MAX_MS 1000

struct client {
	pthread_mutex_t mu;
	struct mono_cond cond;      /* signalled when the ring drains */
	/* Under mu. */
	uint8_t *ring;
	size_t cap, head, used;     /* byte ring of [u32 len][frame] */
	uint64_t frames_in_ring;
	struct client_stats st;
	struct wire_hello hello;
	int hello_changed;
	int stop;
	int tx_busy;                /* the thread holds a frame not yet sent */
	int down;                   /* the last connection attempt failed */
	/* Fixed after create. */
	char paths[CLIENT_PATHS_MAX][sizeof(((struct sockaddr_un *)0)->sun_path)];
	unsigned npaths;
	int64_t backoff_min_ns, backoff_max_ns;
	client_msg_fn *on_msg;
	void *user;
	int wake[2];                /* pipe: push and destroy wake the thread */
	pthread_t thread;
	int thread_started;
	/* Owned by the thread. */
	int fd;
	uint8_t *hello_buf;
	size_t hello_len, hello_off;
	uint8_t *tx;
	size_t tx_len, tx_off;
	uint8_t rx[RX_MAX];
	size_t rx_len;
	int64_t next_connect_ns, backoff_ns;
};

static void ring_put(struct client *c, const void *p, size_t n)
{
	size_t tail = (c->head + c->used) % c->cap;
	size_t first = c->cap - tail < n ? c->cap - tail : n;
	memcpy(c->ring + tail, p, first);
	memcpy(c->ring, (const uint8_t *)p + first, n - first);
	c->used += n;
}

static void ring_get(struct client *c, void *p, size_t n)
{
	size_t first = c->cap - c->head < n ? c->cap - c->head : n;
	memcpy(p, c->ring + c->head, first);
	memcpy((uint8_t *)p + first, c->ring, n - first);
	c->head = (c->head + n) % c->cap;
	c->used -= n;
}

int client_push(struct client *c, const uint8_t *frame, size_t len)
{
	uint32_t n = (uint32_t)len;
	int rc = GPULSE_OK;
	pthread_mutex_lock(&c->mu);
	if (len == 0 || len > FRAME_MAX || c->cap - c->used < len + sizeof n) {
		c->st.frames_dropped++;
		rc = GPULSE_ELIMIT;
	} else {
		ring_put(c, &n, sizeof n);
		ring_put(c, frame, len);
		c->frames_in_ring++;
		c->st.frames_queued++;
	}
	pthread_mutex_unlock(&c->mu);
	if (rc == GPULSE_OK) {
		char b = 1;
		/* A full pipe already means "wake up"; nothing to do then. */
		if (write(c->wake[1], &b, 1) < 0 && errno != EAGAIN)
			return rc;
	}
	return rc;
}

static void close_fd(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->rx_len = 0;
	c->hello_len = c->hello_off = 0;
	c->tx_off = 0; /* a frame cut by the break is sent again, whole, after HELLO */
	pthread_mutex_lock(&c->mu);
	c->st.connected = 0;
	c->down = 1;
	mono_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

static int try_connect(struct client *c)
{
	for (unsigned i = 0; i < c->npaths; i++) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -1;
		struct sockaddr_un sa;
		memset(&sa, 0, sizeof sa);
		sa.sun_family = AF_UNIX;
		memcpy(sa.sun_path, c->paths[i], sizeof sa.sun_path);
		if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			return fd;
		/* EAGAIN: the daemon's backlog is full; EINPROGRESS does not
		 * happen on Unix sockets. Either way, try later. */
		close(fd);
	}
	return -1;
}

/* Encode the current HELLO into hello_buf for a new connection. */
static void prepare_hello(struct client *c)
{
	struct wire_msg m;
	memset(&m, 0, sizeof m);
	m.type = WIRE_HELLO;
	pthread_mutex_lock(&c->mu);
	m.u.hello = c->hello;
	pthread_mutex_unlock(&c->mu);
	c->hello_len = wire_encode(&m, c->hello_buf, FRAME_MAX);
	c->hello_off = 0;
}

/* Move the next queued frame into tx, if there is none in flight. */
static int take_frame(struct client *c)
{
	if (c->tx_len)
		return 1;
	int have = 0;
	pthread_mutex_lock(&c->mu);
	if (c->frames_in_ring) {
		uint32_t n;
		ring_get(c, &n, sizeof n);
		ring_get(c, c->tx, n);
		c->frames_in_ring--;
		c->tx_len = n;
		c->tx_off = 0;
		c->tx_busy = 1;
		have = 1;
	}
	pthread_mutex_unlock(&c->mu);
	return have;
}

/* Write what can be written now. -1 when the connection broke. */
static int pump_out(struct client *c)
{
	while (c->fd >= 0) {
		const uint8_t *p;
		size_t left;
		int is_hello = c->hello_off < c->hello_len;
		if (is_hello) {
			p = c->hello_buf + c->hello_off;
			left = c->hello_len - c->hello_off;
		} else if (take_frame(c)) {
			p = c->tx + c->tx_off;
			left = c->tx_len - c->tx_off;
		} else {
			return 0;
		}
		ssize_t w = send(c->fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (is_hello) {
			c->hello_off += (size_t)w;
			continue;
		}
		c->tx_off += (size_t)w;
		if (c->tx_off == c->tx_len) {
			pthread_mutex_lock(&c->mu);
			c->st.frames_sent++;
			c->st.bytes_sent += c->tx_len;
			c->tx_busy = 0;
			if (c->frames_in_ring == 0)
				mono_cond_broadcast(&c->cond);
			pthread_mutex_unlock(&c->mu);
			c->tx_len = c->tx_off = 0;
		}
	}
	return 0;
}

/* Read and dispatch the daemon's frames. -1 when the connection is over
 * or the stream is unusable. */
static int pump_in(struct client *c)
{
	for (;;) {
		ssize_t r = recv(c->fd, c->rx + c->rx_len, sizeof c->rx - c->rx_len, MSG_DONTWAIT);
		if (r == 0)
			return -1;
		if (r < 0)
			return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -1;
		c->rx_len += (size_t)r;
		size_t off = 0;
		while (c->rx_len - off >= WIRE_HEADER_BYTES) {
			unsigned type;
			uint32_t plen;
			if (wire_header_parse(c->rx + off, &type, &plen) != 0 ||
			    plen > sizeof c->rx - WIRE_HEADER_BYTES)
				return -1;
			if (c->rx_len - off < WIRE_HEADER_BYTES + plen)
				break;
			struct wire_msg m;
			memset(&m, 0, sizeof m);
			int rc = wire_decode(&m, type, c->rx + off + WIRE_HEADER_BYTES, plen, NULL, 0);
			pthread_mutex_lock(&c->mu);
			if (rc == 0)
				c->st.frames_received++;
			else
				c->st.frames_rejected++;
			pthread_mutex_unlock(&c->mu);
			if (rc == 0 && c->on_msg)
				c->on_msg(&m, c->user);
			wire_msg_free(&m);
			off += WIRE_HEADER_BYTES + plen;
		}
		memmove(c->rx, c->rx + off, c->rx_len - off);
		c->rx_len -= off;
	}
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	for (;;) {
		pthread_mutex_lock(&c->mu);
		int stop = c->stop;
		int hello_changed = c->hello_changed;
		c->hello_changed = 0;
		pthread_mutex_unlock(&c->mu);
		if (stop)
			break;
		int64_t now = clock_mono_ns();
		if (hello_changed && c->fd >= 0)
			close_fd(c); /* reconnect so the daemon sees the new HELLO */
		if (c->fd < 0 && now >= c->next_connect_ns) {
			c->fd = try_connect(c);
			pthread_mutex_lock(&c->mu);
			if (c->fd >= 0) {
				c->st.connects++;
				c->st.connected = 1;
			} else {
				c->st.connect_failures++;
			}
			c->down = c->fd < 0;
			mono_cond_broadcast(&c->cond);
			pthread_mutex_unlock(&c->mu);
			if (c->fd >= 0) {
				c->backoff_ns = c->backoff_min_ns;
				prepare_hello(c);
			} else {
				c->next_connect_ns = now + c->backoff_ns;
				c->backoff_ns *= 2;
				if (c->backoff_ns > c->backoff_max_ns)
					c->backoff_ns = c->backoff_max_ns;
			}
		}
		if (c->fd >= 0 && pump_out(c) < 0) {
			close_fd(c);
			c->next_connect_ns = clock_mono_ns() + c->backoff_ns;
		}
		struct pollfd pf[2] = { { .fd = c->wake[0], .events = POLLIN } };
		int n = 1;
		if (c->fd >= 0) {
			pf[1].fd = c->fd;
			pf[1].events = POLLIN;
			if (c->hello_off < c->hello_len || c->tx_len)
				pf[1].events |= POLLOUT;
			n = 2;
		}
		int timeout = POLL_MAX_MS;
		if (c->fd < 0) {
			int64_t wait_ms = (c->next_connect_ns - clock_mono_ns()) / NS_PER_MS + 1;
			if (wait_ms < timeout)
				timeout = wait_ms < 0 ? 0 : (int)wait_ms;
		}
		if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR)
			continue;
		if (pf[0].revents & POLLIN) {
			char drain[64];
			while (read(c->wake[0], drain, sizeof drain) > 0)
				;
		}
		if (n == 2 && c->fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			if (pump_in(c) < 0) {
				close_fd(c);
				c->next_connect_ns = clock_mono_ns() + c->backoff_ns;
			}
		}
	}
	if (c->fd >= 0)
		close_fd(c);
	return NULL;
}

static int start_thread(struct client *c)
{
	/* The thread takes no signals: the application's handlers must
	 * never run on it. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&c->thread, NULL, client_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	c->thread_started = rc == 0;
	return rc == 0 ? GPULSE_OK : GPULSE_EIO;
}

static int make_pipe(int p[2])
{
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
		p[0] = p[1] = -1;
		return GPULSE_EIO;
	}
	return GPULSE_OK;
}

int client_create(struct client **out, const struct client_config *cfg,
		  const struct wire_hello *hello)
{
	*out = NULL;
	struct client *c = calloc(1, sizeof *c);
	if (!c)
		return GPULSE_ENOMEM;
	c->fd = -1;
	c->wake[0] = c->wake[1] = -1;
	for (unsigned i = 0; i < CLIENT_PATHS_MAX && cfg->paths[i]; i++) {
		if (!*cfg->paths[i] || !str_copy(c->paths[c->npaths], sizeof c->paths[0], cfg->paths[i]))
			continue; /* a path too long for sun_path cannot be reached */
		c->npaths++;
	}
	if (c->npaths == 0) {
		free(c);
		return GPULSE_EINVAL;
	}
	c->cap = cfg->ring_bytes ? cfg->ring_bytes : 4u << 20;
	c->backoff_min_ns = cfg->backoff_min_ns > 0 ? cfg->backoff_min_ns : 50 * NS_PER_MS;
	c->backoff_max_ns = cfg->backoff_max_ns > 0 ? cfg->backoff_max_ns : 5 * NS_PER_SEC;
	c->backoff_ns = c->backoff_min_ns;
	c->on_msg = cfg->on_msg;
	c->user = cfg->user;
	c->hello = *hello;
	c->ring = malloc(c->cap);
	c->tx = malloc(FRAME_MAX);
	c->hello_buf = malloc(FRAME_MAX);
	if (!c->ring || !c->tx || !c->hello_buf) {
		client_destroy(c);
		return GPULSE_ENOMEM;
	}
	pthread_mutex_init(&c->mu, NULL);
	mono_cond_init(&c->cond);
	if (make_pipe(c->wake) != GPULSE_OK || start_thread(c) != GPULSE_OK) {
		client_destroy(c);
		return GPULSE_EIO;
	}
	*out = c;
	return GPULSE_OK;
}

int client_flush(struct client *c, int64_t deadline_ns)
{
	char b = 1;
	if (write(c->wake[1], &b, 1) < 0 && errno != EAGAIN)
		return GPULSE_EIO;
	int rc = GPULSE_OK;
	pthread_mutex_lock(&c->mu);
	while (c->frames_in_ring || c->tx_busy) {
		/* With no daemon there is nobody to drain to: do not wait.
		 * (Before the first attempt, wait for it, within the deadline.) */
		if (c->down || clock_mono_ns() >= deadline_ns) {
			rc = GPULSE_ETIMEDOUT;
			break;
		}
		mono_cond_wait_until(&c->cond, &c->mu, deadline_ns);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void client_get_stats(struct client *c, struct client_stats *out)
{
	pthread_mutex_lock(&c->mu);
	*out = c->st;
	pthread_mutex_unlock(&c->mu);
}

void client_set_hello(struct client *c, const struct wire_hello *hello)
{
	pthread_mutex_lock(&c->mu);
	c->hello = *hello;
	c->hello_changed = 1;
	pthread_mutex_unlock(&c->mu);
	char b = 1;
	if (write(c->wake[1], &b, 1) < 0)
		return;
}

void client_destroy(struct client *c)
{
	if (!c)
		return;
	if (c->thread_started) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_mutex_unlock(&c->mu);
		char b = 1;
		if (write(c->wake[1], &b, 1) < 0 && errno != EAGAIN)
			b = 0; /* the thread still sees stop within a poll interval */
		pthread_join(c->thread, NULL);
		pthread_mutex_destroy(&c->mu);
		mono_cond_destroy(&c->cond);
	}
	if (c->fd >= 0)
		close(c->fd);
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	free(c->ring);
	free(c->tx);
	free(c->hello_buf);
	free(c);
}

void client_fork_prepare(struct client *c)
{
	pthread_mutex_lock(&c->mu);
}

void client_fork_parent(struct client *c)
{
	pthread_mutex_unlock(&c->mu);
}

void client_fork_child(struct client *c, const struct wire_hello *hello)
{
	/* Only this thread survived the fork: the parent's client thread is
	 * gone, and its connection belongs to the parent. Start over. */
	pthread_mutex_init(&c->mu, NULL);
	mono_cond_init(&c->cond);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->wake[0] >= 0)
		close(c->wake[0]);
	if (c->wake[1] >= 0)
		close(c->wake[1]);
	c->head = c->used = 0;
	c->frames_in_ring = 0;
	memset(&c->st, 0, sizeof c->st);
	c->hello = *hello;
	c->hello_changed = 0;
	c->stop = 0;
	c->tx_busy = 0;
	c->down = 0;
	c->tx_len = c->tx_off = 0;
	c->hello_len = c->hello_off = 0;
	c->rx_len = 0;
	c->next_connect_ns = 0;
	c->backoff_ns = c->backoff_min_ns;
	c->thread_started = 0;
	if (make_pipe(c->wake) == GPULSE_OK)
		start_thread(c);
}
