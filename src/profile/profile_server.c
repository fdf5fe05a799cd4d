/* The injection library's socket in gpulsed; see profile_server.h.
 *
 * One thread owns every socket: it polls the listener, an eventfd (stop
 * and capture requests from HTTP threads) and the clients, with a tick of
 * at most a second for timeouts, expiry and store appends. Reads are
 * non-blocking and resumable (a frame may arrive a byte at a time); sends
 * are non-blocking into a small per-client buffer, and a frame that does
 * not fit is dropped and counted rather than waited for. */
#include "profile/profile_server.h"
#include "profile/profile_timeline.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/mono_cond.h"
#include "common/status.h"
#include "common/str.h"

#define READ_BUDGET (512u * 1024u) /* bytes read from one client per wake */
#define KEEP_BUFFER (64u * 1024u)  /* larger per-client buffers are freed after a frame */

static const unsigned frame_types[PROFILE_FRAME_KINDS - 1] = {
	WIRE_HELLO, WIRE_STATUS, WIRE_KERNELS, WIRE_COPIES, WIRE_UVM, WIRE_STREAMS,
	WIRE_RANGES, WIRE_TRACE_EVENTS, WIRE_TRACE_END, WIRE_CAPTURE, WIRE_CONFIG,
};

static const char *const refuse_names[] = {
#define PROFILE_NAME(n, s) s,
	PROFILE_REFUSE_TABLE(PROFILE_NAME)
#undef PROFILE_NAME
};

static const char *const bad_names[] = {
#define PROFILE_NAME(n, s) s,
	PROFILE_BAD_TABLE(PROFILE_NAME)
#undef PROFILE_NAME
};

const char *profile_frame_kind_name(unsigned i)
{
	return i < PROFILE_FRAME_KINDS - 1 ? wire_type_name(frame_types[i]) : "unknown";
}

static unsigned frame_kind(unsigned type)
{
	for (unsigned i = 0; i < PROFILE_FRAME_KINDS - 1; i++)
		if (frame_types[i] == type)
			return i;
	return PROFILE_FRAME_KINDS - 1;
}

struct client {
	int fd;
	uint32_t pid, uid, gid;           /* SO_PEERCRED */
	bool hello;
	int64_t connected_ns;             /* monotonic */
	int64_t last_frame_ns;            /* monotonic: connected, or the last whole frame */
	uint8_t hdr[WIRE_HEADER_BYTES];
	size_t hdr_got;
	bool in_payload;
	unsigned type;
	uint32_t payload_len;
	size_t payload_got;
	uint8_t *payload;                 /* grown to the largest frame seen */
	size_t payload_cap;
	uint8_t wbuf[PROFILE_SEND_BUFFER];
	size_t wlen;
	struct wire_msg msg;
};

struct capture_slot {
	bool used;
	bool sent;                        /* CAPTURE went out */
	bool done;
	int rc;                           /* when done without events: ENOENT */
	uint32_t pid;
	uint32_t seconds;
	uint64_t id;
	struct wire_event *events;        /* names point into names[] */
	size_t n, cap;
	size_t max_events;
	uint64_t received, dropped_daemon, dropped_library;
	bool complete;
	/* The capture's distinct names, each once (malloc'd): events hold a
	 * pointer, so 50000 events cost 56 bytes each, not a 4 KiB name. */
	char **names;                     /* CAPTURE_NAMES_MAX */
	uint32_t *index;                  /* CAPTURE_NAME_SLOTS: 1 + names index, 0 free */
	uint32_t nnames;
	size_t name_bytes;                /* sum of their lengths + NULs */
};

/* Distinct event names kept per capture (the library sends at most 1024);
 * past that, or out of memory, an event is named "other". */
#define CAPTURE_NAMES_MAX  4096u
#define CAPTURE_NAME_SLOTS 8192u

static void capture_names_free(struct capture_slot *cs)
{
	for (uint32_t i = 0; i < cs->nnames; i++)
		free(cs->names[i]);
	free(cs->names);
	free(cs->index);
	cs->names = NULL;
	cs->index = NULL;
	cs->nnames = 0;
	cs->name_bytes = 0;
}

/* The slot's copy of `name` (open addressing on its hash), added when
 * new; "other" when the table is full or memory is out. */
static const char *capture_intern(struct capture_slot *cs, const char *name)
{
	if (!name)
		name = "";
	if (!cs->names) {
		cs->names = calloc(CAPTURE_NAMES_MAX, sizeof *cs->names);
		cs->index = calloc(CAPTURE_NAME_SLOTS, sizeof *cs->index);
		if (!cs->names || !cs->index) {
			capture_names_free(cs);
			return "other";
		}
	}
	uint32_t i = (uint32_t)wire_name_hash(name) & (CAPTURE_NAME_SLOTS - 1);
	for (; cs->index[i]; i = (i + 1) & (CAPTURE_NAME_SLOTS - 1))
		if (strcmp(cs->names[cs->index[i] - 1], name) == 0)
			return cs->names[cs->index[i] - 1];
	char *copy = cs->nnames < CAPTURE_NAMES_MAX ? strdup(name) : NULL;
	if (!copy)
		return "other";
	cs->names[cs->nnames++] = copy;
	cs->index[i] = cs->nnames;
	cs->name_bytes += strlen(copy) + 1;
	return copy;
}

/* The slot's events and names as one block for the caller to free():
 * the events, then the names they point to. NULL when out of memory. */
static struct wire_event *capture_take(struct capture_slot *cs)
{
	size_t ev_bytes = cs->n * sizeof *cs->events;
	struct wire_event *out = malloc(ev_bytes + cs->name_bytes + 1);
	if (!out)
		return NULL;
	memcpy(out, cs->events, ev_bytes);
	char *blob = (char *)out + ev_bytes;
	char **moved = cs->nnames ? malloc(cs->nnames * sizeof *moved) : NULL;
	if (cs->nnames && !moved) {
		free(out);
		return NULL;
	}
	for (uint32_t k = 0; k < cs->nnames; k++) {
		size_t len = strlen(cs->names[k]) + 1;
		memcpy(blob, cs->names[k], len);
		moved[k] = blob;
		blob += len;
	}
	for (size_t e = 0; e < cs->n; e++) {
		const char *name = out[e].name;
		uint32_t i = (uint32_t)wire_name_hash(name) & (CAPTURE_NAME_SLOTS - 1);
		out[e].name = "other";
		for (; cs->index && cs->index[i]; i = (i + 1) & (CAPTURE_NAME_SLOTS - 1))
			if (cs->names[cs->index[i] - 1] == name) {
				out[e].name = moved[cs->index[i] - 1];
				break;
			}
	}
	free(moved);
	return out;
}

struct profile_server {
	struct profile_server_config cfg;   /* cfg.db: see db */
	struct tsdb *_Atomic db;            /* cfg.db or, once, profile_server_set_store's */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd;
	int lock_fd;
	int wake_fd;
	pthread_t thread;
	bool thread_started;
	atomic_bool stop;
	struct client **clients;
	unsigned nclients;
	int64_t next_store_ns;
	int64_t next_expire_ns;
	/* Lying HELLOs: any local user can connect, so the warning is rate
	 * limited (server thread only). */
	struct complaint lie_complaint;

	pthread_mutex_t lock;             /* stats and captures */
	struct mono_cond cond;            /* a capture finished */
	struct profile_server_stats st;
	struct capture_slot caps[PROFILE_MAX_CAPTURES];
	uint64_t next_capture_id;
};

int profile_parse_ids(const char *s, uint32_t *ids, size_t max, size_t *n, char *err,
		      size_t errlen)
{
	*n = 0;
	const char *p = s;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || errno || v > UINT32_MAX || (*end && *end != ',' && *end != ' ') ||
		    *p == '-' || *p == '+') {
			str_errf(err, errlen, "\"%.*s\" is not a numeric id", (int)strcspn(p, ", "), p);
			return GPULSE_EINVAL;
		}
		if (*n == max) {
			str_errf(err, errlen, "more than %zu ids", max);
			return GPULSE_EINVAL;
		}
		ids[(*n)++] = (uint32_t)v;
		p = end;
	}
	return 0;
}

static void count_bad(struct profile_server *s, enum profile_bad why)
{
	pthread_mutex_lock(&s->lock);
	s->st.bad_frames_total[why]++;
	pthread_mutex_unlock(&s->lock);
}

static void count_refused(struct profile_server *s, enum profile_refuse why)
{
	pthread_mutex_lock(&s->lock);
	s->st.refused_total[why]++;
	pthread_mutex_unlock(&s->lock);
}

/* ---- the socket ------------------------------------------------------------- */

/* The socket's directory: created 0755 when missing; an existing one must
 * be a directory that others cannot write to (or sticky, like /tmp),
 * owned by us or root, so nobody else can replace the socket. */
static int prepare_dir(const char *path, char *err, size_t errlen)
{
	char tmp[sizeof(((struct sockaddr_un *)0)->sun_path)];
	str_copy(tmp, sizeof tmp, path);
	const char *dir = dirname(tmp);
	struct stat st;
	if (lstat(dir, &st) != 0) {
		if (errno != ENOENT || mkdir(dir, 0755) != 0 || lstat(dir, &st) != 0) {
			str_errf(err, errlen, "profiling.socket: cannot create the directory %s: %s", dir,
				 strerror(errno));
			return GPULSE_EIO;
		}
	}
	if (!S_ISDIR(st.st_mode)) {
		str_errf(err, errlen, "profiling.socket: %s is not a directory", dir);
		return GPULSE_EINVAL;
	}
	if ((st.st_mode & (S_IWOTH | S_IWGRP)) && !(st.st_mode & S_ISVTX)) {
		str_errf(err, errlen, "profiling.socket: the directory %s is writable by other users "
			 "(mode %o): anyone could replace the socket", dir, st.st_mode & 07777);
		return GPULSE_EINVAL;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		str_errf(err, errlen, "profiling.socket: the directory %s belongs to uid %u, not to "
			 "gpulsed or root", dir, (unsigned)st.st_uid);
		return GPULSE_EINVAL;
	}
	return 0;
}

static int open_socket(struct profile_server *s, char *err, size_t errlen)
{
	const char *path = s->cfg.socket_path;
	if (!path || !*path || strlen(path) >= sizeof s->path) {
		str_errf(err, errlen, "profiling.socket: the path must have 1 to %zu bytes",
			 sizeof s->path - 1);
		return GPULSE_EINVAL;
	}
	str_copy(s->path, sizeof s->path, path);
	int rc = prepare_dir(path, err, errlen);
	if (rc)
		return rc;
	/* One gpulsed per socket: a lock beside it, held while serving. */
	char lock[sizeof s->path + 8];
	snprintf(lock, sizeof lock, "%s.lock", path);
	s->lock_fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->lock_fd < 0) {
		str_errf(err, errlen, "profiling.socket: cannot open %s: %s", lock, strerror(errno));
		return GPULSE_EIO;
	}
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		str_errf(err, errlen, "profiling.socket: another gpulsed serves %s", path);
		return GPULSE_EBUSY;
	}
	struct stat st;
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			str_errf(err, errlen, "profiling.socket: %s exists and is not a socket; not "
				 "removing it", path);
			return GPULSE_EINVAL;
		}
		unlink(path); /* left by a gpulsed that did not stop cleanly */
	}
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0) {
		str_errf(err, errlen, "profiling.socket: socket: %s", strerror(errno));
		return GPULSE_EIO;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
	/* Applications run as many users: the socket is open to all, and the
	 * peer credentials decide. */
	mode_t old = umask(0);
	int b = bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (b != 0 || chmod(path, 0666) != 0 || listen(s->listen_fd, 64) != 0) {
		str_errf(err, errlen, "profiling.socket: cannot listen on %s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	return 0;
}

/* ---- clients ---------------------------------------------------------------- */

static bool id_in(const uint32_t *ids, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static void client_close(struct profile_server *s, unsigned i)
{
	struct client *c = s->clients[i];
	if (c->hello) {
		/* The process stays connected while another of its connections is. */
		bool other = false;
		for (unsigned j = 0; j < s->nclients; j++)
			if (j != i && s->clients[j]->hello && s->clients[j]->pid == c->pid)
				other = true;
		if (!other) {
			profile_agg_disconnect(s->cfg.agg, c->pid, clock_mono_ns());
			if (s->cfg.timeline)
				profile_timeline_forget(s->cfg.timeline, c->pid);
		}
		/* A capture waiting on this process ends now. */
		pthread_mutex_lock(&s->lock);
		for (int k = 0; k < PROFILE_MAX_CAPTURES; k++)
			if (s->caps[k].used && !s->caps[k].done && s->caps[k].sent &&
			    s->caps[k].pid == c->pid && !other) {
				s->caps[k].done = true;
				mono_cond_broadcast(&s->cond);
			}
		pthread_mutex_unlock(&s->lock);
	}
	/* Counted before the close, so a peer that sees EOF sees it counted. */
	s->clients[i] = s->clients[--s->nclients];
	pthread_mutex_lock(&s->lock);
	s->st.clients = s->nclients;
	pthread_mutex_unlock(&s->lock);
	close(c->fd);
	free(c->payload);
	wire_msg_free(&c->msg);
	free(c);
}

static void accept_clients(struct profile_server *s)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t len = sizeof cr;
		enum profile_refuse why = PROFILE_REFUSE_COUNT;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) {
			why = PROFILE_REFUSE_NO_CREDENTIALS;
		} else if ((s->cfg.n_allowed_uids || s->cfg.n_allowed_gids) &&
			   !id_in(s->cfg.allowed_uids, s->cfg.n_allowed_uids, cr.uid) &&
			   !id_in(s->cfg.allowed_gids, s->cfg.n_allowed_gids, cr.gid)) {
			why = PROFILE_REFUSE_NOT_ALLOWED;
		} else if (s->nclients >= s->cfg.max_clients) {
			why = PROFILE_REFUSE_MAX_CLIENTS;
		} else {
			unsigned same = 0;
			for (unsigned i = 0; i < s->nclients; i++)
				same += s->clients[i]->uid == cr.uid;
			if (same >= s->cfg.max_clients_per_uid)
				why = PROFILE_REFUSE_MAX_PER_UID;
		}
		struct client *c = why == PROFILE_REFUSE_COUNT ? calloc(1, sizeof *c) : NULL;
		if (!c) {
			if (why != PROFILE_REFUSE_COUNT) {
				count_refused(s, why);
				log_debug("profiling: refused a connection from pid %d uid %u: %s",
					  (int)cr.pid, (unsigned)cr.uid, refuse_names[why]);
			}
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = (uint32_t)cr.pid;
		c->uid = cr.uid;
		c->gid = cr.gid;
		c->connected_ns = clock_mono_ns();
		c->last_frame_ns = c->connected_ns;
		s->clients[s->nclients++] = c;
		pthread_mutex_lock(&s->lock);
		s->st.accepted_total++;
		s->st.clients = s->nclients;
		pthread_mutex_unlock(&s->lock);
	}
}

/* Queue a frame for the client; dropped (and counted) when its buffer is
 * full. Sends what the socket takes now. */
static void client_send(struct profile_server *s, struct client *c, const struct wire_msg *m)
{
	uint8_t frame[WIRE_HEADER_BYTES + 2 + WIRE_NAME_MAX + 64];
	size_t n = wire_encode(m, frame, sizeof frame);
	pthread_mutex_lock(&s->lock);
	if (n == 0 || n > sizeof c->wbuf - c->wlen) {
		s->st.frames_send_dropped_total++;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	s->st.frames_sent_total++;
	pthread_mutex_unlock(&s->lock);
	memcpy(c->wbuf + c->wlen, frame, n);
	c->wlen += n;
	ssize_t w = send(c->fd, c->wbuf, c->wlen, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w > 0) {
		memmove(c->wbuf, c->wbuf + w, c->wlen - (size_t)w);
		c->wlen -= (size_t)w;
	}
}

static void read_comm(uint32_t pid, char *out, size_t len)
{
	char path[64];
	out[0] = '\0';
	snprintf(path, sizeof path, "/proc/%u/comm", (unsigned)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0) {
		out[0] = '\0';
		return;
	}
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* A process in another pid namespace (a container) knows itself by the
 * pid of its innermost namespace: the last field of the NSpid line in
 * /proc/PID/status, where PID is the pid this daemon sees. Returns that
 * pid (0 when unreadable, or when the process is in this daemon's own
 * namespace only) and the parent's pid as this daemon sees it. */
static uint32_t inner_ns_pid(uint32_t pid, uint32_t *ppid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%u/status", (unsigned)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	uint32_t inner = 0;
	unsigned fields = 0;
	for (char *line = buf, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "PPid:", 5) == 0) {
			*ppid = (uint32_t)strtoul(line + 5, NULL, 10);
		} else if (strncmp(line, "NSpid:", 6) == 0) {
			char *p = line + 6, *end;
			for (;;) {
				unsigned long v = strtoul(p, &end, 10);
				if (end == p)
					break;
				inner = (uint32_t)v;
				fields++;
				p = end;
			}
		}
	}
	return fields > 1 ? inner : 0;
}

static struct capture_slot *capture_of(struct profile_server *s, uint32_t pid, uint64_t id)
{
	for (int k = 0; k < PROFILE_MAX_CAPTURES; k++)
		if (s->caps[k].used && !s->caps[k].done && s->caps[k].sent && s->caps[k].pid == pid &&
		    s->caps[k].id == id)
			return &s->caps[k];
	return NULL;
}

static void on_trace_events(struct profile_server *s, struct client *c, const struct wire_msg *m)
{
	pthread_mutex_lock(&s->lock);
	struct capture_slot *cs = capture_of(s, c->pid, m->u.trace_events.capture_id);
	if (!cs) {
		s->st.bad_frames_total[PROFILE_BAD_UNKNOWN_CAPTURE]++;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	const struct wire_trace_events *t = &m->u.trace_events;
	cs->received += t->count;
	size_t take = t->count;
	if (cs->n + take > cs->max_events)
		take = cs->max_events - cs->n;
	if (take && cs->n + take > cs->cap) {
		size_t ncap = cs->cap ? cs->cap : 1024;
		while (ncap < cs->n + take)
			ncap *= 2;
		if (ncap > cs->max_events)
			ncap = cs->max_events;
		struct wire_event *p = realloc(cs->events, ncap * sizeof *p);
		if (!p) {
			take = 0;
			s->st.bad_frames_total[PROFILE_BAD_NO_MEMORY]++;
		} else {
			cs->events = p;
			cs->cap = ncap;
		}
	}
	for (size_t i = 0; i < take; i++) {
		cs->events[cs->n + i] = t->events[i];
		cs->events[cs->n + i].name = capture_intern(cs, t->events[i].name);
	}
	cs->n += take;
	cs->dropped_daemon += t->count - take;
	s->st.capture_events_dropped_total += t->count - take;
	pthread_mutex_unlock(&s->lock);
}

static void on_trace_end(struct profile_server *s, struct client *c, const struct wire_msg *m)
{
	pthread_mutex_lock(&s->lock);
	struct capture_slot *cs = capture_of(s, c->pid, m->u.trace_end.capture_id);
	if (!cs) {
		s->st.bad_frames_total[PROFILE_BAD_UNKNOWN_CAPTURE]++;
	} else {
		cs->dropped_library = m->u.trace_end.events_dropped;
		cs->complete = true;
		cs->done = true;
		mono_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
}

/* One whole frame from client i. Returns false when the client must go. */
static bool on_frame(struct profile_server *s, unsigned i)
{
	struct client *c = s->clients[i];
	char err[256];
	c->last_frame_ns = clock_mono_ns();
	pthread_mutex_lock(&s->lock);
	s->st.frames_total[frame_kind(c->type)]++;
	s->st.bytes_total += WIRE_HEADER_BYTES + c->payload_len;
	pthread_mutex_unlock(&s->lock);
	if (c->type == WIRE_CAPTURE || c->type == WIRE_CONFIG) {
		count_bad(s, PROFILE_BAD_WRONG_DIRECTION);
		return true;
	}
	int rc = wire_decode(&c->msg, c->type, c->payload, c->payload_len, err, sizeof err);
	if (rc) {
		count_bad(s, rc == GPULSE_ENOTSUP ? PROFILE_BAD_UNKNOWN_TYPE
			  : rc == GPULSE_ENOMEM ? PROFILE_BAD_NO_MEMORY : PROFILE_BAD_INVALID);
		log_debug("profiling: pid %u: %s", (unsigned)c->pid, err);
		return true;
	}
	const struct wire_msg *m = &c->msg;
	if (m->type == WIRE_HELLO) {
		if (c->hello) {
			count_bad(s, PROFILE_BAD_DUPLICATE_HELLO);
			return true;
		}
		/* The pid and uid a library claims must be its own: the pid as
		 * this daemon sees it, or, for a process in a container's pid
		 * namespace, as it sees itself there. Series carry the pid this
		 * daemon sees, the one NVML reports. */
		struct wire_hello hello = m->u.hello;
		uint32_t host_ppid = 0;
		if (hello.pid != c->pid && hello.pid != 0 &&
		    inner_ns_pid(c->pid, &host_ppid) == hello.pid) {
			log_debug("profiling: pid %u is pid %u in its own namespace", (unsigned)c->pid,
				  (unsigned)hello.pid);
			hello.pid = c->pid;
			hello.ppid = host_ppid;
		}
		if (hello.pid != c->pid || hello.uid != c->uid) {
			bool pid_bad = hello.pid != c->pid;
			count_refused(s, pid_bad ? PROFILE_REFUSE_PID_MISMATCH : PROFILE_REFUSE_UID_MISMATCH);
			complain(&s->lie_complaint, "profiling: refused a library whose HELLO says "
				 "%s %u but whose connection is from %s %u", pid_bad ? "pid" : "uid",
				 (unsigned)(pid_bad ? m->u.hello.pid : m->u.hello.uid),
				 pid_bad ? "pid" : "uid", (unsigned)(pid_bad ? c->pid : c->uid));
			return false;
		}
		char comm[PROFILE_COMM_MAX];
		read_comm(c->pid, comm, sizeof comm);
		rc = profile_agg_hello(s->cfg.agg, &hello, comm, clock_mono_ns());
		if (rc) {
			count_refused(s, PROFILE_REFUSE_MAX_PROCESSES);
			return false;
		}
		c->hello = true;
		struct wire_msg cfg = {.type = WIRE_CONFIG};
		cfg.u.config = s->cfg.defaults;
		client_send(s, c, &cfg);
		log_debug("profiling: pid %u (%s) connected, library %s", (unsigned)c->pid, comm,
			  m->u.hello.lib_version);
		return true;
	}
	if (!c->hello) {
		count_bad(s, PROFILE_BAD_BEFORE_HELLO);
		return true;
	}
	if (m->type == WIRE_TRACE_EVENTS)
		on_trace_events(s, c, m);
	else if (m->type == WIRE_TRACE_END)
		on_trace_end(s, c, m);
	else
		profile_agg_frame(s->cfg.agg, c->pid, m);
	if (s->cfg.timeline)
		profile_timeline_add(s->cfg.timeline, c->pid, m);
	return true;
}

/* Read what client i has sent. Returns false when it must go (EOF, an
 * error, a bad header, a refused HELLO). */
static bool client_read(struct profile_server *s, unsigned i)
{
	struct client *c = s->clients[i];
	size_t budget = READ_BUDGET;
	while (budget > 0) {
		ssize_t n;
		if (!c->in_payload) {
			n = recv(c->fd, c->hdr + c->hdr_got, WIRE_HEADER_BYTES - c->hdr_got, 0);
			if (n == 0)
				return false;
			if (n < 0)
				return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
			c->hdr_got += (size_t)n;
			budget -= (size_t)n < budget ? (size_t)n : budget;
			if (c->hdr_got < WIRE_HEADER_BYTES)
				continue;
			int rc = wire_header_parse(c->hdr, &c->type, &c->payload_len);
			if (rc) {
				count_bad(s, rc == GPULSE_ELIMIT ? PROFILE_BAD_OVERSIZED
					  : PROFILE_BAD_BAD_HEADER);
				return false;
			}
			c->hdr_got = 0;
			c->payload_got = 0;
			c->in_payload = true;
			if (c->payload_len > c->payload_cap) {
				uint8_t *p = realloc(c->payload, c->payload_len);
				if (!p) {
					count_bad(s, PROFILE_BAD_NO_MEMORY);
					return false;
				}
				c->payload = p;
				c->payload_cap = c->payload_len;
			}
		}
		if (c->payload_got < c->payload_len) {
			n = recv(c->fd, c->payload + c->payload_got, c->payload_len - c->payload_got, 0);
			if (n == 0)
				return false;
			if (n < 0)
				return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
			c->payload_got += (size_t)n;
			budget -= (size_t)n < budget ? (size_t)n : budget;
			if (c->payload_got < c->payload_len)
				continue;
		}
		c->in_payload = false;
		if (!on_frame(s, i))
			return false;
		/* Big buffers are given back after use: an idle client then
		 * holds a few KiB, and only frames in flight hold more. */
		if (c->payload_cap > KEEP_BUFFER) {
			free(c->payload);
			c->payload = NULL;
			c->payload_cap = 0;
		}
		if (c->msg.storage_bytes > KEEP_BUFFER)
			wire_msg_free(&c->msg);
	}
	return true;
}

static void client_flush(struct client *c)
{
	if (!c->wlen)
		return;
	ssize_t w = send(c->fd, c->wbuf, c->wlen, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w > 0) {
		memmove(c->wbuf, c->wbuf + w, c->wlen - (size_t)w);
		c->wlen -= (size_t)w;
	}
}

/* ---- captures --------------------------------------------------------------- */

/* Send CAPTURE for every new request, and end those whose process is not
 * connected or whose time is up. */
static void run_captures(struct profile_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (int k = 0; k < PROFILE_MAX_CAPTURES; k++) {
		struct capture_slot *cs = &s->caps[k];
		if (!cs->used || cs->sent || cs->done)
			continue;
		struct client *c = NULL;
		for (unsigned i = 0; i < s->nclients && !c; i++)
			if (s->clients[i]->hello && s->clients[i]->pid == cs->pid)
				c = s->clients[i];
		if (!c) {
			cs->done = true;
			cs->rc = GPULSE_ENOENT;
			s->st.captures_failed_total++;
			mono_cond_broadcast(&s->cond);
			continue;
		}
		cs->sent = true;
		s->st.captures_total++;
		struct wire_msg m = {.type = WIRE_CAPTURE};
		m.u.capture = (struct wire_capture){.capture_id = cs->id, .seconds = cs->seconds,
						    .max_events = (uint32_t)cs->max_events};
		pthread_mutex_unlock(&s->lock);
		client_send(s, c, &m);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
}

int profile_server_capture(struct profile_server *s, struct profile_capture *c, char *err,
			   size_t errlen)
{
	pthread_mutex_lock(&s->lock);
	struct capture_slot *cs = NULL;
	for (int k = 0; k < PROFILE_MAX_CAPTURES; k++) {
		if (s->caps[k].used && s->caps[k].pid == c->pid) {
			pthread_mutex_unlock(&s->lock);
			str_errf(err, errlen, "a capture of pid %u is already running", (unsigned)c->pid);
			return GPULSE_EBUSY;
		}
		if (!s->caps[k].used && !cs)
			cs = &s->caps[k];
	}
	if (!cs) {
		pthread_mutex_unlock(&s->lock);
		str_errf(err, errlen, "%d captures are already running", PROFILE_MAX_CAPTURES);
		return GPULSE_EBUSY;
	}
	memset(cs, 0, sizeof *cs);
	cs->used = true;
	cs->pid = c->pid;
	cs->seconds = c->seconds;
	cs->id = ++s->next_capture_id;
	cs->max_events = s->cfg.capture_max_events;
	pthread_mutex_unlock(&s->lock);

	uint64_t one = 1;
	if (write(s->wake_fd, &one, sizeof one) < 0)
		log_debug("profiling: wake: %s", strerror(errno));

	int64_t deadline = clock_mono_ns() + (int64_t)c->seconds * 1000000000LL +
			   s->cfg.capture_grace_ns;
	pthread_mutex_lock(&s->lock);
	while (!cs->done && !atomic_load(&s->stop) && clock_mono_ns() < deadline)
		mono_cond_wait_until(&s->cond, &s->lock, deadline);
	int rc = cs->rc;
	if (!rc && atomic_load(&s->stop) && !cs->done)
		rc = GPULSE_ESTATE;
	c->capture_id = cs->id;
	c->events = cs->n ? capture_take(cs) : NULL;
	c->n = c->events ? cs->n : 0;
	free(cs->events);
	capture_names_free(cs);
	c->received = cs->received;
	c->dropped_daemon = cs->dropped_daemon;
	c->dropped_library = cs->dropped_library;
	c->complete = cs->complete;
	c->max_events = cs->max_events;
	memset(cs, 0, sizeof *cs);       /* frees the slot; the events (one block) are the caller's */
	pthread_mutex_unlock(&s->lock);
	if (rc == GPULSE_ENOENT)
		str_errf(err, errlen, "no process with pid %u is connected to gpulsed's profiling "
			 "socket (start it with gpulse run, or CUDA_INJECTION64_PATH)", (unsigned)c->pid);
	else if (rc == GPULSE_ESTATE)
		str_errf(err, errlen, "gpulsed is stopping");
	if (rc) {
		free(c->events);
		c->events = NULL;
		c->n = 0;
	} else {
		profile_agg_has(s->cfg.agg, c->pid, c->comm, sizeof c->comm);
	}
	return rc;
}

/* ---- the thread ------------------------------------------------------------- */

static struct tsdb *server_store(struct profile_server *s)
{
	return atomic_load_explicit(&s->db, memory_order_acquire);
}

void profile_server_set_store(struct profile_server *s, struct tsdb *db)
{
	if (s)
		atomic_store_explicit(&s->db, db, memory_order_release);
}

static void store_append(struct profile_server *s)
{
	struct profile_store_emitter se;
	profile_store_emitter_init(&se, server_store(s), clock_wall_ns() / 1000000);
	profile_agg_emit(s->cfg.agg, &se.e);
	pthread_mutex_lock(&s->lock);
	s->st.store_appended_total += se.appended;
	s->st.store_refused_total += se.refused;
	pthread_mutex_unlock(&s->lock);
}

static void *server_main(void *arg)
{
	pthread_setname_np(pthread_self(), "gpulse-profile");
	struct profile_server *s = arg;
	struct pollfd *fds = calloc(s->cfg.max_clients + 2, sizeof *fds);
	if (!fds) {
		log_error("profiling: out of memory; the socket is not served");
		return NULL;
	}
	while (!atomic_load(&s->stop)) {
		fds[0] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
		fds[1] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
		unsigned n = s->nclients;
		for (unsigned i = 0; i < n; i++)
			fds[i + 2] = (struct pollfd){.fd = s->clients[i]->fd,
						     .events = (short)(POLLIN | (s->clients[i]->wlen ? POLLOUT : 0))};
		int r = poll(fds, n + 2, 1000);
		if (atomic_load(&s->stop))
			break;
		int64_t now = clock_mono_ns();
		if (r > 0) {
			/* Clients first, from the end, so closing one (which moves
			 * the last into its place) leaves the rest in step. */
			for (unsigned i = n; i-- > 0;) {
				short ev = fds[i + 2].revents;
				if (!ev)
					continue;
				bool keep = true;
				if (ev & POLLOUT)
					client_flush(s->clients[i]);
				if (ev & (POLLIN | POLLHUP | POLLERR))
					keep = client_read(s, i);
				if (!keep)
					client_close(s, i);
			}
			if (fds[1].revents & POLLIN) {
				uint64_t v;
				if (read(s->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN)
					log_debug("profiling: eventfd: %s", strerror(errno));
			}
			if (fds[0].revents & POLLIN)
				accept_clients(s);
		}
		run_captures(s);
		/* Connections that never said HELLO, or went silent after it
		 * (a live library sends STATUS every second), give their slot
		 * back: otherwise connections that said HELLO once would hold
		 * max_clients for ever. */
		for (unsigned i = s->nclients; i-- > 0;) {
			const struct client *c = s->clients[i];
			if (!c->hello && now - c->connected_ns > s->cfg.hello_timeout_ns) {
				count_refused(s, PROFILE_REFUSE_HELLO_TIMEOUT);
				client_close(s, i);
			} else if (c->hello && now - c->last_frame_ns > s->cfg.idle_timeout_ns) {
				log_debug("profiling: pid %u sent nothing for %lld ms; closing it",
					  (unsigned)c->pid, (long long)((now - c->last_frame_ns) / 1000000));
				count_refused(s, PROFILE_REFUSE_IDLE_TIMEOUT);
				client_close(s, i);
			}
		}
		if (now >= s->next_expire_ns) {
			profile_agg_expire(s->cfg.agg, now);
			s->next_expire_ns = now + 1000000000LL;
		}
		if (server_store(s) && now >= s->next_store_ns) {
			store_append(s);
			s->next_store_ns = now + s->cfg.store_interval_ns;
		}
	}
	free(fds);
	return NULL;
}

int profile_server_start(struct profile_server **out, const struct profile_server_config *c,
			 char *err, size_t errlen)
{
	struct profile_server *s = calloc(1, sizeof *s);
	if (!s) {
		str_errf(err, errlen, "out of memory");
		return GPULSE_ENOMEM;
	}
	s->cfg = *c;
	atomic_init(&s->db, c->db);
	if (!s->cfg.max_clients)
		s->cfg.max_clients = 128;
	/* A quarter by default: one user (or a runaway launcher) cannot
	 * take every slot from the others. */
	if (!s->cfg.max_clients_per_uid)
		s->cfg.max_clients_per_uid = s->cfg.max_clients >= 4 ? s->cfg.max_clients / 4 : 1;
	if (!s->cfg.capture_max_events)
		s->cfg.capture_max_events = 50000;
	if (!s->cfg.store_interval_ns)
		s->cfg.store_interval_ns = 15LL * 1000000000LL;
	if (!s->cfg.hello_timeout_ns)
		s->cfg.hello_timeout_ns = PROFILE_HELLO_TIMEOUT_NS;
	if (!s->cfg.idle_timeout_ns)
		s->cfg.idle_timeout_ns = PROFILE_IDLE_TIMEOUT_NS;
	if (!s->cfg.capture_grace_ns)
		s->cfg.capture_grace_ns = PROFILE_CAPTURE_GRACE_NS;
	s->listen_fd = s->lock_fd = s->wake_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	mono_cond_init(&s->cond);
	/* Capture ids differ across daemon restarts, so a late TRACE_EVENTS
	 * of an old capture is never taken for a new one; they stay below
	 * 2^63 for JSON readers that hold integers in int64. */
	s->next_capture_id = ((uint64_t)clock_wall_ns() / 1000) << 8;
	int rc = GPULSE_ENOMEM;
	s->clients = calloc(s->cfg.max_clients, sizeof *s->clients);
	if (!s->clients) {
		str_errf(err, errlen, "out of memory");
		goto fail;
	}
	if ((rc = open_socket(s, err, errlen)) != 0)
		goto fail;
	s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->wake_fd < 0) {
		rc = GPULSE_EIO;
		str_errf(err, errlen, "profiling: eventfd: %s", strerror(errno));
		goto fail;
	}
	s->next_store_ns = clock_mono_ns() + s->cfg.store_interval_ns;
	if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
		rc = GPULSE_ENOMEM;
		str_errf(err, errlen, "profiling: cannot start the socket thread");
		goto fail;
	}
	s->thread_started = true;
	*out = s;
	return 0;
fail:
	profile_server_stop(s);
	return rc;
}

void profile_server_interrupt(struct profile_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, true);
	uint64_t one = 1;
	if (s->wake_fd >= 0 && write(s->wake_fd, &one, sizeof one) < 0)
		log_debug("profiling: wake: %s", strerror(errno));
	pthread_mutex_lock(&s->lock);
	mono_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

void profile_server_stop(struct profile_server *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, true);
	if (s->thread_started) {
		uint64_t one = 1;
		if (write(s->wake_fd, &one, sizeof one) < 0)
			log_debug("profiling: wake: %s", strerror(errno));
		pthread_join(s->thread, NULL);
	}
	/* Wake captures still waiting (their HTTP threads end them). */
	pthread_mutex_lock(&s->lock);
	mono_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	while (s->nclients)
		client_close(s, s->nclients - 1);
	if (s->listen_fd >= 0) {
		close(s->listen_fd);
		unlink(s->path);
	}
	if (s->wake_fd >= 0)
		close(s->wake_fd);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	for (int k = 0; k < PROFILE_MAX_CAPTURES; k++) {
		free(s->caps[k].events);
		capture_names_free(&s->caps[k]);
	}
	free(s->clients);
	mono_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void profile_server_stats(struct profile_server *s, struct profile_server_stats *out)
{
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	pthread_mutex_unlock(&s->lock);
}

void profile_server_emit(struct profile_server *s, struct profile_emitter *e)
{
	struct profile_server_stats st;
	profile_server_stats(s, &st);
	struct profile_agg_stats as;
	profile_agg_stats(s->cfg.agg, &as);
	static const char *const reason[] = {"reason"};
	static const char *const type[] = {"type"};
	static const char *const kind[] = {"kind"};
	profile_family(e, "gpulse_profile_clients", PROFILE_GAUGE,
		       "Injection libraries connected to the profiling socket.");
	e->sample(e, NULL, NULL, 0, (double)st.clients);
	profile_family(e, "gpulse_profile_processes", PROFILE_GAUGE,
		       "CUDA processes tracked (connected, or disconnected and not yet expired).");
	e->sample(e, NULL, NULL, 0, (double)as.processes);
	profile_family(e, "gpulse_profile_connections_total", PROFILE_COUNTER,
		       "Connections to the profiling socket: accepted, or refused or closed "
		       "(hello_timeout, idle_timeout) with why.");
	{
		const char *v[] = {"accepted"};
		static const char *const res[] = {"result"};
		e->sample(e, res, v, 1, (double)st.accepted_total);
		for (int i = 0; i < PROFILE_REFUSE_COUNT; i++) {
			const char *rv[] = {refuse_names[i]};
			e->sample(e, res, rv, 1, (double)st.refused_total[i]);
		}
	}
	profile_family(e, "gpulse_profile_frames_total", PROFILE_COUNTER,
		       "Frames received from injection libraries, by type.");
	for (unsigned i = 0; i < PROFILE_FRAME_KINDS; i++) {
		const char *v[] = {profile_frame_kind_name(i)};
		e->sample(e, type, v, 1, (double)st.frames_total[i]);
	}
	profile_family(e, "gpulse_profile_bad_frames_total", PROFILE_COUNTER,
		       "Frames refused, by reason (bad_header and oversized also end the connection).");
	for (int i = 0; i < PROFILE_BAD_COUNT; i++) {
		const char *v[] = {bad_names[i]};
		e->sample(e, reason, v, 1, (double)st.bad_frames_total[i]);
	}
	profile_family(e, "gpulse_profile_received_bytes_total", PROFILE_COUNTER,
		       "Bytes of frames received.");
	e->sample(e, NULL, NULL, 0, (double)st.bytes_total);
	profile_family(e, "gpulse_profile_frames_sent_total", PROFILE_COUNTER,
		       "Frames sent to injection libraries (CONFIG, CAPTURE).");
	e->sample(e, NULL, NULL, 0, (double)st.frames_sent_total);
	profile_family(e, "gpulse_profile_frames_send_dropped_total", PROFILE_COUNTER,
		       "Frames not sent because the library's send buffer was full.");
	e->sample(e, NULL, NULL, 0, (double)st.frames_send_dropped_total);
	profile_family(e, "gpulse_profile_kernel_series", PROFILE_GAUGE,
		       "Named kernel entries held (bounded by profiling.max_kernel_series).");
	e->sample(e, NULL, NULL, 0, (double)as.kernel_series);
	profile_family(e, "gpulse_profile_series_folded_total", PROFILE_COUNTER,
		       "Entries folded into \"other\" or dropped by a cardinality bound, by kind.");
	{
		const char *k1[] = {"kernel"}, *k2[] = {"nvtx_range"}, *k3[] = {"device"};
		e->sample(e, kind, k1, 1, (double)as.kernels_folded_total);
		e->sample(e, kind, k2, 1, (double)as.ranges_folded_total);
		e->sample(e, kind, k3, 1, (double)as.devices_folded_total);
	}
	profile_family(e, "gpulse_profile_processes_expired_total", PROFILE_COUNTER,
		       "Processes forgotten after their library disconnected (or to make room).");
	e->sample(e, NULL, NULL, 0, (double)as.processes_expired_total);
	profile_family(e, "gpulse_profile_captures_total", PROFILE_COUNTER,
		       "Trace captures, by result.");
	{
		static const char *const res[] = {"result"};
		const char *ok[] = {"started"}, *no[] = {"no_such_process"};
		e->sample(e, res, ok, 1, (double)st.captures_total);
		e->sample(e, res, no, 1, (double)st.captures_failed_total);
	}
	profile_family(e, "gpulse_profile_capture_events_dropped_total", PROFILE_COUNTER,
		       "Trace events received over a capture's event cap.");
	e->sample(e, NULL, NULL, 0, (double)st.capture_events_dropped_total);
	if (server_store(s)) {
		profile_family(e, "gpulse_profile_store_samples_total", PROFILE_COUNTER,
			       "Profiling samples appended into the store, or refused by it.");
		static const char *const res[] = {"result"};
		const char *ok[] = {"appended"}, *no[] = {"refused"};
		e->sample(e, res, ok, 1, (double)st.store_appended_total);
		e->sample(e, res, no, 1, (double)st.store_refused_total);
	}
}
