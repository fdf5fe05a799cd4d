/* `gpulse record`: sample every GPU through NVML and write the recording
 * format of DESIGN.md (one row per GPU per tick), for replay, tests and
 * diagnosis. It runs the daemon's own collector with the fast and normal
 * tiers at the requested rate, so a recording holds exactly what gpulsed
 * would have seen, GPM counters included. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/bus.h"
#include "common/clock.h"
#include "collect/collector.h"
#include "cli/commands.h"
#include "common/log.h"
#include "record/recording.h"
#include "common/status.h"

struct recorder {
	pthread_mutex_t lock;
	FILE *out;
	bool gpu_column;
	bool failed;
	uint64_t rows;
	struct rec_row pending[GPU_MAX];  /* fast fields wait for the normal tier */
	bool have_fast[GPU_MAX];
};

static volatile sig_atomic_t record_stop;

static void record_on_signal(int sig)
{
	(void)sig;
	record_stop = 1;
}

/* Bus subscriber: fast updates fill a pending row, the normal and slow
 * updates of the same sweep complete it (the slow tier reads
 * graphics_util from the GPM samples the normal tier just took). All
 * tiers share one period, so they come in lockstep, fast, normal, slow. */
static void record_update(void *ctx, const struct gpu_update *u)
{
	struct recorder *r = ctx;
	if (u->gpu < 0 || u->gpu >= GPU_MAX)
		return;
	pthread_mutex_lock(&r->lock);
	if (!r->out) {
		/* Discovery failed or found no GPU: nothing is written. */
		pthread_mutex_unlock(&r->lock);
		return;
	}
	struct rec_row *row = &r->pending[u->gpu];
	if (u->tier == TIER_FAST) {
		memset(row, 0, sizeof *row);
		row->t_s = (double)u->wall_ns / 1e9;
		row->gpu = u->gpu;
		row->valid = u->valid & u->mask;
		memcpy(row->v, u->v, sizeof row->v);
		r->have_fast[u->gpu] = true;
	} else if (r->have_fast[u->gpu]) {
		uint64_t read = u->valid & u->mask;
		for (int f = 0; f < FIELD_COUNT; f++)
			if (read & FIELD_BIT(f))
				row->v[f] = u->v[f];
		row->valid |= read;
		if (u->tier == TIER_SLOW) {
			if (!r->failed && recording_write_row(r->out, row, r->gpu_column) != 0)
				r->failed = true;
			r->rows++;
			r->have_fast[u->gpu] = false;
		}
	}
	pthread_mutex_unlock(&r->lock);
}

static void record_usage(FILE *f)
{
	fprintf(f, "usage: gpulse record -o FILE.csv [--hz N] [--seconds S] [--nvml-library PATH]\n"
		   "  Sample every GPU through NVML (GPM counters included) and write the\n"
		   "  recording format that gpulsed --replay and the diagnosis read.\n"
		   "  --hz N         samples per second, 0.1 to 50 (default 10)\n"
		   "  --seconds S    stop after S seconds (default: until Ctrl-C)\n"
		   "  -o, --output   the CSV file to write ('-' for standard output)\n");
}

int cmd_record(int argc, char **argv)
{
	static const struct option opts[] = {
		{"output", required_argument, NULL, 'o'},
		{"hz", required_argument, NULL, 'z'},
		{"seconds", required_argument, NULL, 's'},
		{"nvml-library", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *path = NULL, *lib = NULL;
	double hz = 10, seconds = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'o': path = optarg; break;
		case 'l': lib = optarg; break;
		case 'z':
			hz = strtod(optarg, &end);
			if (*end || !(hz >= 0.1 && hz <= 50)) {
				fprintf(stderr, "gpulse record: --hz must be a number from 0.1 to 50, not \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 's':
			seconds = strtod(optarg, &end);
			if (*end || !(seconds > 0)) {
				fprintf(stderr, "gpulse record: --seconds must be a positive number, not \"%s\"\n", optarg);
				return 2;
			}
			break;
		case 'h': record_usage(stdout); return 0;
		default: record_usage(stderr); return 2;
		}
	}
	if (!path || optind < argc) {
		record_usage(stderr);
		return 2;
	}

	int rc = 1;
	struct bus *bus = NULL;
	struct collector *col = NULL;
	struct recorder rec;
	bool to_stdout = strcmp(path, "-") == 0, created = false;
	memset(&rec, 0, sizeof rec);
	pthread_mutex_init(&rec.lock, NULL);
	if (bus_create(&bus) != GPULSE_OK)
		goto out;
	bus_subscribe(bus, record_update, &rec);

	struct collector_config cfg;
	collector_config_defaults(&cfg);
	cfg.nvml_path = lib ? lib : getenv("GPULSE_NVML_LIBRARY");
	/* Every tier at the requested rate: a recording wants every column
	 * in every row (graphics_util is a slow-tier read in the daemon). */
	cfg.period_ns[TIER_FAST] = cfg.period_ns[TIER_NORMAL] = cfg.period_ns[TIER_SLOW] =
		(int64_t)(1e9 / hz);
	cfg.per_process_util = false;
	cfg.events = false;
	/* ... and every read at it: no adaptive floors (a recording is the
	 * reference replays and tests read, steady stretches included). */
	cfg.adapt.enabled = false;
	char err[512];
	/* The header is written before collection starts, so the number of
	 * GPUs decides the gpu column: discover first with the collector
	 * paused behind the lock. The file is created only once there is a
	 * GPU to record, so a host without a driver or a GPU is left no
	 * empty file that looks like a recording. */
	pthread_mutex_lock(&rec.lock);
	if (collector_start(&col, bus, &cfg, err, sizeof err) != GPULSE_OK) {
		pthread_mutex_unlock(&rec.lock);
		fprintf(stderr, "gpulse record: %s; %s not written\n", err, path);
		goto out;
	}
	int ngpus = bus_gpu_count(bus);
	if (ngpus == 0) {
		pthread_mutex_unlock(&rec.lock);
		fprintf(stderr, "gpulse record: NVML found no GPUs; %s not written\n", path);
		goto out;
	}
	rec.out = to_stdout ? stdout : fopen(path, "w");
	if (!rec.out) {
		pthread_mutex_unlock(&rec.lock);
		fprintf(stderr, "gpulse record: cannot write %s: %m\n", path);
		goto out;
	}
	created = !to_stdout;
	rec.gpu_column = ngpus > 1;
	if (recording_write_header(rec.out, rec.gpu_column) != 0)
		rec.failed = true;
	pthread_mutex_unlock(&rec.lock);
	fprintf(stderr, "gpulse record: %d GPU(s) at %g Hz to %s%s\n", ngpus, hz, path,
		seconds > 0 ? "" : " (Ctrl-C to stop)");

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = record_on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	int64_t end = seconds > 0 ? clock_mono_ns() + (int64_t)(seconds * 1e9) : INT64_MAX;
	while (!record_stop && clock_mono_ns() < end) {
		int64_t next = clock_mono_ns() + 50 * NS_PER_MS;
		clock_sleep_until(next < end ? next : end);
	}
	collector_stop(col);
	col = NULL;
	pthread_mutex_lock(&rec.lock);
	bool failed = rec.failed || fflush(rec.out) != 0;
	uint64_t rows = rec.rows;
	pthread_mutex_unlock(&rec.lock);
	if (failed) {
		fprintf(stderr, "gpulse record: writing %s failed\n", path);
		goto out;
	}
	if (rows == 0) {
		/* A header alone is not a recording (the parser refuses it). */
		fprintf(stderr, "gpulse record: no sample was taken; %s not written\n", path);
		goto out;
	}
	fprintf(stderr, "gpulse record: wrote %llu rows to %s\n", (unsigned long long)rows, path);
	rc = 0;
out:
	collector_stop(col);
	bus_destroy(bus);
	if (rec.out && rec.out != stdout && fclose(rec.out) != 0 && rc == 0) {
		fprintf(stderr, "gpulse record: closing %s failed\n", path);
		rc = 1;
	}
	/* A file this run created and did not complete is removed. */
	if (rc != 0 && created)
		unlink(path);
	pthread_mutex_destroy(&rec.lock);
	return rc;
}
