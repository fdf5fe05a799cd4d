/* The fetcher of `gpulse top`: one thread that asks gpulsed for
 * /api/v1/gpus, /api/v1/processes, /api/v1/kernels, /api/v1/alerts and
 * /api/v1/diagnosis every period, parses the answers into a top_data
 * (top_model.h) and hands it over by swapping buffers, so the terminal
 * never waits on the network: a slow or vanished gpulsed only makes the
 * data older, and the screen says so. */
#ifndef GPULSE_TOP_FETCH_H
#define GPULSE_TOP_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/client.h"
#include "cli/top/top_model.h"

/* How the last refresh went. */
struct top_fetch_status {
	bool have_data;           /* some refresh ever succeeded */
	bool connected;           /* the last refresh reached /api/v1/gpus */
	char error[512];          /* why not, when !connected */
	int64_t last_ok_mono_ns;  /* when the last good refresh ended; 0 none */
	int64_t since_mono_ns;    /* when the current state (up or down) began */
	int64_t latency_ns;       /* the last refresh's length */
	unsigned long refreshes;  /* refreshes finished, good or not */
};

struct top_fetch;

/* Start the thread. `co` is copied (its strings must outlive the
 * fetcher); `period_ns` is the refresh period; after each refresh one
 * byte is written to `wake_fd` (a pipe the caller polls; -1: none).
 * `local` says that gpulsed runs on this host: then the thread also reads
 * the owner and command line of each listed process from /proc and
 * resolves user names (which may wait on NSS: hence here, not in the
 * UI). 0, or GPULSE_ENOMEM / GPULSE_EIO. *out is freed with
 * top_fetch_stop. */
int top_fetch_start(struct top_fetch **out, const struct client_opts *co, int64_t period_ns,
		    int wake_fd, bool local);

/* When a refresh finished since the last call: swap its data into *data
 * (the caller's buffer goes back to the fetcher), copy the status into
 * *st and return true. Otherwise leave both and return false. */
bool top_fetch_take(struct top_fetch *f, struct top_data **data, struct top_fetch_status *st);

/* The graphs' past from gpulsed's store, fetched once at the first good
 * refresh and handed over before that refresh's data: the caller seeds
 * its history with it (top_history_seed) and frees it with free().
 * NULL when none (no storage, or already taken). */
struct top_backfill *top_fetch_take_backfill(struct top_fetch *f);

/* Refresh now rather than at the end of the period. */
void top_fetch_poke(struct top_fetch *f);

/* Change the period (the next wait uses it). */
void top_fetch_set_period(struct top_fetch *f, int64_t period_ns);

/* Stop the thread (a request in flight ends within its timeout), and free
 * everything. NULL is fine. */
void top_fetch_stop(struct top_fetch *f);

/* Whether a gpulsed URL names this host (127.0.0.0/8, ::1, localhost). */
bool top_url_is_local(const char *url);

#endif
