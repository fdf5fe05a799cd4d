/* The connection guard; see http_guard.h and docs/internals/http.md.
 *
 * libmicrohttpd's own defences do not stop slow clients: its idle timeout
 * restarts on every byte, so one byte a second holds a connection for
 * ever, and its per-IP limit refuses the newcomer (a scrape, say) rather
 * than the connection that has sent nothing useful for seconds. So MHD
 * tells us of every connection (MHD_OPTION_NOTIFY_CONNECTION: accepted,
 * closed), of every complete head (the access handler's first call) and of
 * every finished request (MHD_OPTION_NOTIFY_COMPLETED), and this file keeps
 * one entry per connection and closes, with shutdown(2), the ones that
 * break a rule: a head not complete by its deadline (a sweeper thread), or
 * the oldest connection still waiting for a head when a newer one needs its
 * room (one that has sent nothing at all first: oldest_waiting). Only
 * waiting connections are ever evicted; a connection whose head
 * is in is being served and is left alone, and so is one whose whole head
 * was already buffered when it was accepted (a scrape, accepted from a
 * backlog that a flood of reconnecting slow clients keeps full, would
 * otherwise be the oldest waiting connection by the time MHD, which
 * accepts up to ten at a time per thread, got round to reading it).
 *
 * Why shutdown(2) from another thread is safe here: MHD calls the "closed"
 * notice before it closes the socket, and the entry, with its fd, is
 * forgotten in that notice under the same mutex that every shutdown holds.
 * So while an entry is live its fd is that connection's open socket, never
 * a number the kernel has handed to something else. shutdown() does not
 * free anything: the owning MHD thread sees end-of-file (or a TLS error) on
 * its next read and closes the connection the ordinary way, on its own
 * thread. The alternative, accepting sockets ourselves and handing them to
 * MHD_add_connection once the head has arrived (MSG_PEEK), cannot see into
 * TLS, so it would still need this for HTTPS.
 *
 * Every scan is linear over the table, which holds at most MHD's
 * connection limit (max_connections plus a quarter): cheap next to an
 * accept at the sizes allowed (http.max_connections <= 10000). */
#include "http/http_guard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/tcp.h>        /* struct tcp_info with tcpi_bytes_received */
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "common/mono_cond.h"
#include "common/status.h"

enum cstate {
	C_FREE,
	C_WAITING,   /* for a request head: the first one, or the next one */
	C_BUSY,      /* head in: being served */
	C_SHUT,      /* shut down by the guard, MHD has not closed it yet */
};

#define KEY_LEN GUARD_KEY_LEN

struct guard_conn {
	enum cstate state;
	bool reserved;            /* busy on a reserved route */
	bool head_buffered;       /* waiting, but its head is already here */
	bool spoke;               /* a byte came since it began waiting */
	int fd;
	uint64_t rx_base;         /* the socket's bytes received then */
	int64_t since_ns;         /* when it began waiting (eviction order) */
	int64_t deadline_ns;      /* for its head, while waiting */
	unsigned char key[KEY_LEN];
	unsigned next_free;
};

#define NO_ENTRY ((unsigned)-1)

struct http_guard {
	struct guard_config cfg;
	pthread_mutex_t mu;       /* guards everything below */
	struct mono_cond wake;
	bool stopping;
	bool thread_started;
	pthread_t sweeper;
	int64_t sweep_at;         /* the sweeper's next wake; INT64_MAX: until told */
	atomic_uint_fast64_t sweeps; /* the sweeper's looks since start */
	struct guard_conn *conns; /* cfg.slots entries */
	unsigned free_head;
	unsigned held;            /* waiting or busy: what counts against N */
	unsigned busy_ordinary;   /* busy on routes that are not reserved */
	atomic_uint_fast64_t shed[HTTP_SHED_COUNT];
};

/* IPv4 addresses count one by one; IPv6 ones by /64, the block one host
 * or one customer is usually given (a per-/128 cap lets such a client
 * open as many connections as it likes). IPv4-mapped IPv6 is IPv4. */
void guard_peer_key(const struct sockaddr *sa, unsigned char key[GUARD_KEY_LEN])
{
	memset(key, 0, KEY_LEN);
	if (!sa)
		return;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in a4;
		memcpy(&a4, sa, sizeof a4);
		key[0] = 4;
		memcpy(key + 1, &a4.sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 a6;
		memcpy(&a6, sa, sizeof a6);
		if (IN6_IS_ADDR_V4MAPPED(&a6.sin6_addr)) {
			key[0] = 4;
			memcpy(key + 1, a6.sin6_addr.s6_addr + 12, 4);
		} else {
			key[0] = 6;
			memcpy(key + 1, a6.sin6_addr.s6_addr, 8);
		}
	}
}

static bool counts(const struct guard_conn *c)
{
	return c->state == C_WAITING || c->state == C_BUSY;
}

/* Close `c` (caller holds mu): the owning thread sees EOF and closes it. */
static void count(struct http_guard *g, enum http_shed why)
{
	atomic_fetch_add_explicit(&g->shed[why], 1, memory_order_relaxed);
	if (g->cfg.shed_total)
		atomic_fetch_add_explicit(&g->cfg.shed_total[why], 1, memory_order_relaxed);
}

static void shut(struct http_guard *g, struct guard_conn *c, enum http_shed why)
{
	if (c->state == C_BUSY && !c->reserved)
		g->busy_ordinary--;
	if (counts(c))
		g->held--;
	c->state = C_SHUT;
	count(g, why); /* before the client can see the close */
	shutdown(c->fd, SHUT_RDWR);
}

/* What the kernel has received on `fd` since accept, read by MHD or not
 * (TCP_INFO, Linux 4.1 and later); false when it cannot say. */
static bool rx_bytes(int fd, uint64_t *out)
{
	struct tcp_info ti;
	socklen_t len = sizeof ti;
	memset(&ti, 0, sizeof ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
		return false;
	*out = ti.tcpi_bytes_received;
	return true;
}

/* True when `c` has had no byte from its client since it began waiting.
 * Once it has, that is remembered until its next wait, so the question
 * costs one getsockopt per connection that is still silent. A socket
 * that cannot say counts as having spoken: all such are equal, and age
 * alone decides, as it did before. */
static bool silent(struct guard_conn *c)
{
	uint64_t rx;
	if (c->spoke)
		return false;
	if (!rx_bytes(c->fd, &rx) || rx > c->rx_base)
		c->spoke = true;
	return !c->spoke;
}

/* The oldest waiting connection, other than `self`, from `key`'s address
 * when key is not NULL, among those that have sent nothing since they
 * began waiting when `only_silent`. NULL when none. */
static struct guard_conn *oldest_of(struct http_guard *g, const struct guard_conn *self,
				    const unsigned char *key, bool only_silent)
{
	struct guard_conn *best = NULL;
	for (unsigned i = 0; i < g->cfg.slots; i++) {
		struct guard_conn *c = &g->conns[i];
		if (c == self || c->state != C_WAITING || c->head_buffered)
			continue;
		if (only_silent && c->spoke)
			continue;
		if (key && memcmp(c->key, key, KEY_LEN) != 0)
			continue;
		if (!best || c->since_ns < best->since_ns)
			best = c;
	}
	return best;
}

/* The connection to close to make room: the oldest waiting one that has
 * sent nothing since it began waiting, else the oldest waiting one; other
 * than `self`, and from `key`'s address when key is not NULL. NULL when
 * none. Silent ones go first because a TLS scrape is a waiting connection
 * for the whole of its handshake (several round trips and the server's
 * signature, milliseconds): against a flood of connections that send
 * nothing, reopened as fast as they are closed, age alone made the scrape
 * the oldest before its head was in (28 scrapes in 150 lost). Its
 * ClientHello is its first flight, so it has spoken from then on. Each
 * pass that does not return marks one more connection as having spoken,
 * so the loop ends. */
static struct guard_conn *oldest_waiting(struct http_guard *g, const struct guard_conn *self,
					 const unsigned char *key)
{
	struct guard_conn *c;
	while ((c = oldest_of(g, self, key, true)))
		if (silent(c))
			return c;
	return oldest_of(g, self, key, false);
}

static unsigned from_address(const struct http_guard *g, const unsigned char *key)
{
	unsigned n = 0;
	for (unsigned i = 0; i < g->cfg.slots; i++)
		if (counts(&g->conns[i]) && memcmp(g->conns[i].key, key, KEY_LEN) == 0)
			n++;
	return n;
}

/* A waiting connection's deadline (under mu): the sweeper, asleep until
 * its next deadline or until told, is told when this one comes first. */
static void set_deadline(struct http_guard *g, struct guard_conn *c, int64_t deadline_ns)
{
	c->deadline_ns = deadline_ns;
	if (deadline_ns < g->sweep_at) {
		g->sweep_at = deadline_ns;
		mono_cond_signal(&g->wake);
	}
}

struct guard_conn *guard_open(struct http_guard *g, int fd, const struct sockaddr *peer,
			      bool head_buffered)
{
	int64_t now = clock_mono_ns();
	pthread_mutex_lock(&g->mu);
	if (g->free_head == NO_ENTRY) {
		/* Cannot happen while MHD's limit is the table's size; refuse
		 * rather than serve a connection no deadline watches. */
		pthread_mutex_unlock(&g->mu);
		shutdown(fd, SHUT_RDWR);
		return NULL;
	}
	struct guard_conn *c = &g->conns[g->free_head];
	g->free_head = c->next_free;
	c->state = C_WAITING;
	c->reserved = false;
	c->head_buffered = head_buffered;
	c->spoke = false;
	c->rx_base = 0;
	c->fd = fd;
	c->since_ns = now;
	set_deadline(g, c, now + g->cfg.head_timeout_ns);
	guard_peer_key(peer, c->key);
	g->held++;

	/* Over the cap for its address: the address's oldest waiting
	 * connection makes room, or, when all of them are being served, the
	 * newcomer is refused. */
	if (g->cfg.per_address < g->cfg.max_connections &&
	    from_address(g, c->key) > g->cfg.per_address) {
		struct guard_conn *victim = oldest_waiting(g, c, c->key);
		shut(g, victim ? victim : c, victim ? HTTP_SHED_EVICTED : HTTP_SHED_PER_ADDRESS);
	}
	/* Over N in all: the oldest waiting connection anywhere makes room.
	 * When every one is busy nothing is evicted, and MHD's limit (the
	 * table's size) is the bound. */
	if (g->held > g->cfg.max_connections) {
		struct guard_conn *victim = oldest_waiting(g, c, NULL);
		if (victim)
			shut(g, victim, HTTP_SHED_EVICTED);
	}
	pthread_mutex_unlock(&g->mu);
	return c;
}

bool guard_head(struct http_guard *g, struct guard_conn *c, bool reserved)
{
	if (!c)
		return true;
	bool ok = true;
	pthread_mutex_lock(&g->mu);
	if (c->state == C_WAITING) {
		/* Ordinary requests may keep at most N - reserved slots busy, so
		 * a scrape always finds one. A refused request is busy on no
		 * ordinary slot while its 503 goes out. */
		unsigned ordinary_max = g->cfg.max_connections - g->cfg.reserved;
		if (!reserved && g->busy_ordinary >= ordinary_max) {
			ok = false;
			reserved = true;
			count(g, HTTP_SHED_BUSY);
		}
		c->state = C_BUSY;
		c->reserved = reserved;
		if (!reserved)
			g->busy_ordinary++;
	}
	pthread_mutex_unlock(&g->mu);
	return ok;
}

void guard_done(struct http_guard *g, struct guard_conn *c)
{
	if (!c)
		return;
	int64_t now = clock_mono_ns();
	pthread_mutex_lock(&g->mu);
	if (c->state == C_BUSY) {
		if (!c->reserved)
			g->busy_ordinary--;
		c->state = C_WAITING;
		c->reserved = false;
		c->head_buffered = false;
		/* What the last request brought is no sign of life for the
		 * next wait: a kept-alive connection is counted afresh. */
		c->spoke = !rx_bytes(c->fd, &c->rx_base);
		c->since_ns = now;
		set_deadline(g, c, now + g->cfg.next_head_timeout_ns);
	}
	pthread_mutex_unlock(&g->mu);
}

void guard_close(struct http_guard *g, struct guard_conn *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->state == C_BUSY && !c->reserved)
		g->busy_ordinary--;
	if (counts(c))
		g->held--;
	c->state = C_FREE;
	c->fd = -1;
	c->next_free = g->free_head;
	g->free_head = (unsigned)(c - g->conns);
	pthread_mutex_unlock(&g->mu);
}

uint64_t guard_shed(const struct http_guard *g, enum http_shed why)
{
	return g ? atomic_load_explicit(&g->shed[why], memory_order_relaxed) : 0;
}

uint64_t guard_sweeps(const struct http_guard *g)
{
	return g ? atomic_load_explicit(&g->sweeps, memory_order_relaxed) : 0;
}

/* Close the waiting connections past their deadline. The sweeper sleeps
 * until the earliest one, at least sweep_ns after its last look (so a
 * deadline is kept within sweep_ns), and with no connection waiting until
 * one is (set_deadline tells it): an idle server's sweeper does not wake,
 * where it woke ten times a second (0.55 ms of CPU a second on the dev
 * VM, more than the collector's lane on the fake NVML). */
/* Not common/periodic: the sweep is due at the earliest connection's
 * deadline (no sooner than sweep_ns apart), and with no connection waiting
 * the thread sleeps until one comes, not every period. */
static void *sweep_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-httpgrd");
	struct http_guard *g = arg;
	pthread_mutex_lock(&g->mu);
	while (!g->stopping) {
		atomic_fetch_add_explicit(&g->sweeps, 1, memory_order_relaxed);
		int64_t now = clock_mono_ns(), earliest = INT64_MAX;
		for (unsigned i = 0; i < g->cfg.slots; i++) {
			struct guard_conn *c = &g->conns[i];
			if (c->state != C_WAITING)
				continue;
			if (c->deadline_ns <= now)
				shut(g, c, HTTP_SHED_HEAD_TIMEOUT);
			else if (c->deadline_ns < earliest)
				earliest = c->deadline_ns;
		}
		if (earliest == INT64_MAX) {
			g->sweep_at = INT64_MAX;
			mono_cond_wait(&g->wake, &g->mu);
			continue;
		}
		int64_t floor = now + g->cfg.sweep_ns;
		g->sweep_at = earliest > floor ? earliest : floor;
		mono_cond_wait_until(&g->wake, &g->mu, g->sweep_at);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

int guard_start(struct http_guard **out, const struct guard_config *cfg)
{
	struct http_guard *g = calloc(1, sizeof *g);
	if (!g)
		return GPULSE_ENOMEM;
	g->cfg = *cfg;
	pthread_mutex_init(&g->mu, NULL);
	mono_cond_init(&g->wake);
	g->conns = calloc(cfg->slots ? cfg->slots : 1, sizeof *g->conns);
	if (!g->conns) {
		guard_stop(g);
		return GPULSE_ENOMEM;
	}
	for (unsigned i = 0; i < cfg->slots; i++) {
		g->conns[i].fd = -1;
		g->conns[i].next_free = i + 1 < cfg->slots ? i + 1 : NO_ENTRY;
	}
	g->free_head = cfg->slots ? 0 : NO_ENTRY;
	g->sweep_at = INT64_MAX;
	if (pthread_create(&g->sweeper, NULL, sweep_main, g) != 0) {
		guard_stop(g);
		return GPULSE_EIO;
	}
	g->thread_started = true;
	*out = g;
	return GPULSE_OK;
}

void guard_stop(struct http_guard *g)
{
	if (!g)
		return;
	if (g->thread_started) {
		pthread_mutex_lock(&g->mu);
		g->stopping = true;
		mono_cond_signal(&g->wake);
		pthread_mutex_unlock(&g->mu);
		pthread_join(g->sweeper, NULL);
	}
	mono_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->mu);
	free(g->conns);
	free(g);
}
