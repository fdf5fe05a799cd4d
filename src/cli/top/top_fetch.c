/* The fetcher of `gpulse top`; see top_fetch.h. Three top_data buffers
 * move by pointer: the thread fills `work`, then swaps it with `ready`
 * under the lock; the UI swaps `ready` with its own. Nothing is copied
 * and neither side ever waits for the other longer than a swap. */
#include "cli/top/top_fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/periodic.h"
#include "common/status.h"
#include "common/str.h"

#define USER_CACHE 64
#define DIAG_PERIOD_NS (2 * NS_PER_SEC)   /* windows are 5 s: no need for more */
#define KERNEL_ROWS 10000                 /* rows asked of /api/v1/kernels: one per process and GPU */
#define MAX_BODY (8u << 20)

struct user_entry {
	uid_t uid;
	char name[32];
};

struct top_fetch {
	struct periodic ticker;            /* refresh every period_ns, or when poked */
	struct buf body;                   /* the ticker's answer buffer */
	pthread_mutex_t lock;
	bool fresh;
	bool data_fresh;                   /* `ready` holds data not yet taken */
	int64_t period_ns;
	int wake_fd;
	bool local;
	struct client_opts co;
	struct top_data *work, *ready;
	struct top_fetch_status st;        /* the thread's; copied on take under lock */
	struct top_fetch_status shared;
	/* The thread's own state. */
	struct user_entry users[USER_CACHE];
	int nusers;
	int64_t next_diag_ns;
	struct top_data *diag_src;         /* the last diagnosis, to carry between fetches */
	bool backfill_tried;               /* once, at the first good refresh */
	struct top_backfill *backfill;     /* ready for the UI; it takes ownership */
};

bool top_url_is_local(const char *url)
{
	if (!url)
		return false;
	const char *p = strstr(url, "://");
	p = p ? p + 3 : url;
	const char *at = strchr(p, '@'), *slash = strchr(p, '/');
	if (at && (!slash || at < slash))
		p = at + 1;
	if (strncmp(p, "[::1]", 5) == 0)
		return true;
	size_t n = strcspn(p, ":/");
	if (n == 9 && strncasecmp(p, "localhost", 9) == 0)
		return true;
	return n >= 4 && strncmp(p, "127.", 4) == 0;
}

static const char *user_name(struct top_fetch *f, uid_t uid)
{
	for (int i = 0; i < f->nusers; i++)
		if (f->users[i].uid == uid)
			return f->users[i].name;
	struct user_entry *e = &f->users[f->nusers < USER_CACHE ? f->nusers++ : (int)(uid % USER_CACHE)];
	e->uid = uid;
	char buf[4096];
	struct passwd pw, *res = NULL;
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name)
		snprintf(e->name, sizeof e->name, "%s", res->pw_name);
	else
		snprintf(e->name, sizeof e->name, "%u", (unsigned)uid);
	return e->name;
}

/* The owner and command line of a local process, from /proc. */
static void read_proc(struct top_proc *p)
{
	char path[64];
	if (!p->have_uid) {
		struct stat sb;
		snprintf(path, sizeof path, "/proc/%u", p->pid);
		if (stat(path, &sb) == 0) {
			p->have_uid = true;
			p->uid = sb.st_uid;
		}
	}
	if (p->cmdline[0])
		return;
	snprintf(path, sizeof path, "/proc/%u/cmdline", p->pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char raw[TOP_CMDLINE];
	ssize_t n = read(fd, raw, sizeof raw - 1);
	close(fd);
	if (n <= 0)
		return;
	for (ssize_t i = 0; i < n; i++)
		if (raw[i] == '\0')
			raw[i] = ' ';
	while (n > 0 && raw[n - 1] == ' ')
		n--;
	raw[n] = '\0';
	/* Control bytes and bad UTF-8 are made safe by the drawing code. */
	snprintf(p->cmdline, sizeof p->cmdline, "%s", raw);
}

/* GET path; on success the body is in b (reset first). */
static int get(struct top_fetch *f, const char *path, struct buf *b, char *err, size_t errlen)
{
	long status = 0;
	buf_reset(b);
	int rc = client_get(&f->co, path, b, &status, err, errlen);
	if (rc)
		return rc;
	if (status < 200 || status > 299) {
		str_errf(err, errlen, "gpulsed at %s answered %s with HTTP %ld%s",
			 client_base_url(&f->co), path, status,
			 status == 401 ? " (give a token with --token-file or GPULSE_TOKEN_FILE)" : "");
		return GPULSE_EIO;
	}
	return 0;
}

/* Percent-encoding of a query parameter's value (RFC 3986 unreserved
 * characters stay). */
static void url_encode(char *out, size_t len, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (; *s && o + 4 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~') {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
}

/* The graphs' past from the store: one query_range of every series, one
 * step per refresh period, ending a step before now (the first live
 * sample is the next). Without storage gpulsed answers 503 and the
 * graphs start empty. */
static void backfill(struct top_fetch *f, const struct top_data *d, struct buf *b)
{
	char query[1024], enc[3200], path[4096], err[256];
	double step_s = (double)f->period_ns / 1e9;
	unsigned n = TOP_HIST_LEN;
	double end_s = floor((double)clock_wall_ns() / 1e9 / step_s) * step_s - step_s;
	double start_s = end_s - (n - 1) * step_s;
	top_backfill_query(query, sizeof query);
	url_encode(enc, sizeof enc, query);
	snprintf(path, sizeof path, "/api/v1/query_range?query=%s&start=%.3f&end=%.3f&step=%.3f", enc,
		 start_s, end_s, step_s);
	struct top_backfill *bf = calloc(1, sizeof *bf);
	if (!bf)
		return;
	if (get(f, path, b, err, sizeof err) != 0 ||
	    top_parse_backfill(bf, d, b->data, b->len, start_s, step_s, n, err, sizeof err) != 0) {
		free(bf);
		return;
	}
	pthread_mutex_lock(&f->lock);
	free(f->backfill);
	f->backfill = bf;
	pthread_mutex_unlock(&f->lock);
}

/* One refresh into f->work. Only /api/v1/gpus decides "connected"; the
 * other endpoints add what they can (an older gpulsed, profiling off). */
static void refresh(struct top_fetch *f, struct buf *b)
{
	char err[512] = "";
	struct top_data *d = f->work;
	int64_t t0 = clock_mono_ns();
	int rc = get(f, "/api/v1/gpus", b, err, sizeof err);
	if (!rc)
		rc = top_parse_gpus(d, b->data, b->len, err, sizeof err);
	bool ok = rc == 0;
	if (ok && !f->backfill_tried) {
		f->backfill_tried = true;
		backfill(f, d, b);
	}
	if (ok) {
		char ignore[256];
		if (get(f, "/api/v1/processes", b, ignore, sizeof ignore) == 0 &&
		    top_parse_processes(d, b->data, b->len, ignore, sizeof ignore) == 0 && d->profiling) {
			char path[64];
			snprintf(path, sizeof path, "/api/v1/kernels?per_process=1&limit=%d", KERNEL_ROWS);
			if (get(f, path, b, ignore, sizeof ignore) == 0)
				top_parse_kernels(d, b->data, b->len, ignore, sizeof ignore);
		}
		if (get(f, "/api/v1/alerts", b, ignore, sizeof ignore) == 0)
			top_parse_alerts(d, b->data, b->len, ignore, sizeof ignore);
		if (t0 >= f->next_diag_ns) {
			if (get(f, "/api/v1/diagnosis?since=15s", b, ignore, sizeof ignore) == 0 &&
			    top_parse_diagnosis(d, b->data, b->len, ignore, sizeof ignore) == 0) {
				f->next_diag_ns = t0 + DIAG_PERIOD_NS;
				for (int i = 0; i < d->ngpus; i++)
					f->diag_src->gpus[i] = d->gpus[i];
				f->diag_src->ngpus = d->ngpus;
			}
		} else {
			/* Between diagnoses, each GPU keeps its last verdict. */
			for (int i = 0; i < d->ngpus; i++)
				for (int k = 0; k < f->diag_src->ngpus; k++) {
					const struct top_gpu *o = &f->diag_src->gpus[k];
					struct top_gpu *g = &d->gpus[i];
					if (o->index != g->index || strcmp(o->uuid, g->uuid) != 0 || !o->have_diag)
						continue;
					g->have_diag = true;
					g->diag_end_s = o->diag_end_s;
					memcpy(g->bottleneck, o->bottleneck, sizeof g->bottleneck);
					memcpy(g->findings, o->findings, sizeof g->findings);
					memcpy(g->advice, o->advice, sizeof g->advice);
				}
		}
		for (int i = 0; i < d->nprocs; i++) {
			struct top_proc *p = &d->procs[i];
			if (f->local)
				read_proc(p);
			/* Names of this host mean nothing for a remote gpulsed. */
			if (p->have_uid && f->local)
				snprintf(p->user, sizeof p->user, "%s", user_name(f, p->uid));
			else if (p->have_uid)
				snprintf(p->user, sizeof p->user, "%u", (unsigned)p->uid);
		}
	}
	int64_t t1 = clock_mono_ns();
	struct top_fetch_status *st = &f->st;
	if (ok != st->connected || st->refreshes == 0)
		st->since_mono_ns = t1;
	st->connected = ok;
	st->latency_ns = t1 - t0;
	st->refreshes++;
	if (ok) {
		st->have_data = true;
		st->last_ok_mono_ns = t1;
		st->error[0] = '\0';
	} else {
		snprintf(st->error, sizeof st->error, "%s", err);
	}
}

/* One refresh, on the ticker's thread. */
static void run(void *arg)
{
	struct top_fetch *f = arg;
	refresh(f, &f->body);
	pthread_mutex_lock(&f->lock);
	/* A failed refresh hands over no data, only its status: the UI
	 * keeps the last good screen and says it is disconnected. */
	if (f->st.connected) {
		struct top_data *t = f->ready;
		f->ready = f->work;
		f->work = t;
		f->data_fresh = true;
	}
	f->shared = f->st;
	f->fresh = true;
	if (f->wake_fd >= 0) {
		char c = 1;
		ssize_t w = write(f->wake_fd, &c, 1); /* a full pipe already wakes */
		(void)w;
	}
	pthread_mutex_unlock(&f->lock);
}

int top_fetch_start(struct top_fetch **out, const struct client_opts *co, int64_t period_ns,
		    int wake_fd, bool local)
{
	struct top_fetch *f = calloc(1, sizeof *f);
	if (!f)
		return GPULSE_ENOMEM;
	f->work = calloc(1, sizeof *f->work);
	f->ready = calloc(1, sizeof *f->ready);
	f->diag_src = calloc(1, sizeof *f->diag_src);
	if (!f->work || !f->ready || !f->diag_src) {
		free(f->work);
		free(f->ready);
		free(f->diag_src);
		free(f);
		return GPULSE_ENOMEM;
	}
	f->co = *co;
	if (f->co.timeout_ms <= 0) {
		/* A refresh that cannot finish within its period is late
		 * anyway; a second is the least a loaded host deserves. */
		long ms = (long)(period_ns / NS_PER_MS);
		f->co.timeout_ms = ms < 1000 ? 1000 : ms > CLIENT_TIMEOUT_MS ? CLIENT_TIMEOUT_MS : ms;
	}
	f->period_ns = period_ns;
	f->wake_fd = wake_fd;
	f->local = local;
	pthread_mutex_init(&f->lock, NULL);
	buf_init(&f->body, MAX_BODY);
	periodic_init(&f->ticker, "gpulse-topfetch", false, run, f);
	if (periodic_start(&f->ticker, period_ns) != 0) {
		periodic_destroy(&f->ticker);
		buf_free(&f->body);
		pthread_mutex_destroy(&f->lock);
		free(f->work);
		free(f->ready);
		free(f->diag_src);
		free(f);
		return GPULSE_EIO;
	}
	*out = f;
	return 0;
}

bool top_fetch_take(struct top_fetch *f, struct top_data **data, struct top_fetch_status *st)
{
	bool got = false;
	pthread_mutex_lock(&f->lock);
	if (f->fresh) {
		f->fresh = false;
		got = true;
		if (f->data_fresh) {
			struct top_data *t = f->ready;
			f->ready = *data;
			*data = t;
			f->data_fresh = false;
		}
		*st = f->shared;
	}
	pthread_mutex_unlock(&f->lock);
	return got;
}

struct top_backfill *top_fetch_take_backfill(struct top_fetch *f)
{
	pthread_mutex_lock(&f->lock);
	struct top_backfill *b = f->backfill;
	f->backfill = NULL;
	pthread_mutex_unlock(&f->lock);
	return b;
}

void top_fetch_poke(struct top_fetch *f)
{
	periodic_kick(&f->ticker);
}

void top_fetch_set_period(struct top_fetch *f, int64_t period_ns)
{
	pthread_mutex_lock(&f->lock);
	f->period_ns = period_ns;
	pthread_mutex_unlock(&f->lock);
	periodic_set_period(&f->ticker, period_ns);
}

void top_fetch_stop(struct top_fetch *f)
{
	if (!f)
		return;
	periodic_destroy(&f->ticker);
	buf_free(&f->body);
	pthread_mutex_destroy(&f->lock);
	free(f->work);
	free(f->ready);
	free(f->diag_src);
	free(f->backfill);
	free(f);
}
