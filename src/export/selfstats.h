/* The daemon's own health, kept by the daemon and rendered by the
 * exporters: what mode it runs in, how scrapes and reloads go. Counters are
 * atomics so any thread may bump them. */
#ifndef GPULSE_SELFSTATS_H
#define GPULSE_SELFSTATS_H

#include <stdatomic.h>
#include <stdint.h>

enum daemon_mode { MODE_NVML, MODE_REPLAY, MODE_NONE };

struct self_stats {
	int64_t start_wall_ns;
	enum daemon_mode mode;
	char mode_detail[256];   /* why there is no NVML, or the replay file */
	double replay_speed;
	atomic_uint_fast64_t scrapes_total;
	atomic_uint_fast64_t last_scrape_ns;         /* render time of the last /metrics */
	atomic_uint_fast64_t http_requests_total;
	atomic_uint_fast64_t http_rejected_total;    /* over a limit or refused */
	atomic_uint_fast64_t reloads_ok_total;
	atomic_uint_fast64_t reloads_failed_total;
	atomic_int last_reload_ok;                   /* 1 or 0 */
	int64_t last_reload_wall_ns;
};

#endif
