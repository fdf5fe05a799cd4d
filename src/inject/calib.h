/* Calibration of continuous mode's timed samples, measured in the process
 * on the GPU at hand (docs/internals/inject.md, "Calibration").
 *
 * A timed sample is the interval between two events around a kernel on a
 * held stream (inject.c, census_time_start): the GPU meets the start
 * event, the kernel and the end event back to back, so the interval is
 * the kernel plus the GPU's own steps for the launch and the end event.
 * How long those steps take depends on the GPU, its driver and its
 * clocks; it is measured here, once per device, by launching a kernel of
 * the library's own that reads %globaltimer as it starts and as it ends,
 * through the same held path, and two of them back to back:
 *   excess E = median(held interval - span inside the kernel)
 *            = offset + head + tail
 *   gap G    = median(second's first stamp - first's last stamp)
 *            = tail + the GPU's step from one kernel to the next + head
 * where head and tail are what an exact trace counts as a kernel's besides
 * the span its threads see (dispatch before the first instruction,
 * completion after the last). With every term >= 0 the offset lies in
 * [E - G, E]; the library takes the middle, E - G/2, within G/2 of the
 * truth whatever the split: exact when the kernel-to-kernel step equals
 * head + tail. On the H200 (2026-12-07, bench/sample_offset.cu against
 * CUPTI): E 2822 ns, G 1408 ns, the traced offset 2150 ns, head + tail
 * 672 ns; E - G/2 = 2118 ns, 32 ns short. The bracket, not the middle's
 * accuracy, is what holds on any GPU; the measured error is in
 * docs/internals/inject.md. Kept as a number of floors (the GPU's step
 * from one event to the next, measured alongside), so that it follows
 * the GPU's clocks as the floor measured in the census does. */
#ifndef GPULSE_INJECT_CALIB_H
#define GPULSE_INJECT_CALIB_H

#include <stddef.h>

/* Spin lengths of the calibration kernel, ns (launched in turn), and how
 * many launches of each are kept after the warm-up. */
#define CALIB_SPINS       4
#define CALIB_PER_SPIN    12
#define CALIB_WARMUP      4
#define CALIB_LAUNCHES    (CALIB_WARMUP + CALIB_SPINS * CALIB_PER_SPIN)
/* Back-to-back pairs (a kernel of CALIB_PAIR_SPIN_NS, then one of 0). */
#define CALIB_PAIRS       16
#define CALIB_PAIR_SPIN_NS 2000ull
extern const unsigned long long calib_spin_ns[CALIB_SPINS];

/* How long the library's thread waits for the GPU to run one calibration
 * launch (or pair) before it gives the calibration up: a GPU full of the
 * application's work may not run a one-thread kernel for seconds. */
#define CALIB_WAIT_NS 20000000ll

/* At most this many tries per device, CALIB_RETRY_NS apart, when the GPU
 * was too busy or the samples spread too wide. */
#define CALIB_TRIES    3
#define CALIB_RETRY_NS 10000000000ll

/* Other work on the GPU only ever delays a calibration launch (it waits
 * for an SM): calib_fit takes the median of the launches within a quarter
 * of a floor (at least 250 ns) of the fastest (their 5th percentile), and
 * wants at least this share of them undelayed. */
#define CALIB_UNDELAYED_MIN 0.25

/* %globaltimer steps coarser than this make the span inside the kernel
 * too coarse to measure a step of about a microsecond. */
#define CALIB_TIMER_RES_MAX_NS 256.0

/* One calibration launch, in ns: the held interval (start to end event),
 * the floor (the event before the start to the start), the span inside
 * the kernel and the smallest step of %globaltimer the kernel saw (0:
 * none seen). */
struct calib_sample {
	double ab_ns, fa_ns, span_ns, timer_step_ns;
};

struct calib_result {
	int ok;                /* measured and within the checks below */
	char why[160];         /* why not, when !ok */
	double offset_ns;      /* excess_ns - gap_ns / 2 */
	double excess_ns;      /* median of interval - span (undelayed launches) */
	double gap_ns;         /* median of second's start - first's end of a pair (undelayed) */
	double bound_ns;       /* the offset is within this of the truth: gap_ns / 2 */
	double floor_ns;       /* median floor */
	double floors;         /* offset_ns / floor_ns: what is taken off a sample */
	double spread_ns;      /* half the interquartile range of the undelayed interval - span */
	double delayed;        /* share of launches or pairs other work delayed (the larger) */
	double slope;          /* interval against span, least squares: 1 when the method holds */
	double timer_step_ns;  /* smallest %globaltimer step seen */
	unsigned samples;      /* launches used */
	int retry;             /* refused for a cause that may pass (a busy GPU) */
};

/* The offset from n samples (the warm-up already left out) and npairs
 * gaps of back-to-back pairs (ns). It is refused (r->ok 0, r->why says
 * why) when fewer than half the planned launches or pairs came back, when
 * %globaltimer is coarser than CALIB_TIMER_RES_MAX_NS, when the interval
 * does not grow with the span (slope outside 0.9-1.1), when a gap is
 * negative, when the offset or floor is not positive, or when fewer
 * than CALIB_UNDELAYED_MIN of the launches or pairs were undelayed
 * (within a quarter of the floor, at least 250 ns, of the fastest):
 * other work on the GPU delayed the rest (r->retry is then set: another
 * try may find it quieter). Each figure, and each spin length's point of
 * the slope's fit, is the median of the undelayed launches: on a quiet
 * GPU, of all of them. */
void calib_fit(const struct calib_sample *s, unsigned n, const double *gaps, unsigned npairs,
	       struct calib_result *r);

/* Measure on CUDA device `ordinal` (its primary context must be active:
 * never made active here). Runs on the library's thread: about 80
 * launches of a one-thread kernel and 70 stream synchronisations (a few
 * milliseconds), on a stream of its own; everything made is
 * released before it returns. Returns r->ok. */
int calib_measure(int ordinal, struct calib_result *r);

/* Whether the calling thread is inside calib_measure: the launch
 * callbacks leave its launches alone. */
int calib_this_thread(void);

/* Kept calibrations (calib_keep.c). A GPU kept busy by the application
 * refuses every try (resnet50 inference on the H100, 2026-12-07: both
 * processes, the samples spread 1.7-2.1 us), and the model's two floors
 * then took 0.3-0.4 us too much off every sample. So a calibration that
 * succeeded is kept in a file per device and driver, and a process whose
 * own is refused, or not yet made, takes the kept one before the model.
 * The device's figure does not depend on the process that measured it
 * (the same kernel on the same GPU and driver); it is kept in floors, so
 * that it follows the clocks as a fresh one does. The directory:
 * GPULSE_CALIB_DIR ("off" or empty: none), else $XDG_CACHE_HOME/gpulse,
 * else $HOME/.cache/gpulse; made 0700, files 0600, written whole
 * (rename); only a file of this user's or root's that nobody else may
 * write is read. */
struct calib_kept {
	double floors, offset_ns, bound_ns, floor_ns;
	long long at_s; /* when it was measured, CLOCK_REALTIME seconds */
};
/* Larger than any fit passes: a file saying more is not one of ours. */
#define CALIB_KEEP_FLOORS_MAX 16.0

/* The directory into buf; 0 when there is none (turned off, no home). */
int calib_keep_dir(char *buf, size_t n);
/* Read the calibration kept for `key` (calib_device_key) in `dir`: 1 and
 * *k, or 0 with why. */
int calib_keep_load(const char *dir, const char *key, struct calib_kept *k, char *why, size_t nwhy);
/* Keep r (r->ok only) for `key` in `dir`, measured at now_s: 1, or 0 with
 * why. */
int calib_keep_store(const char *dir, const char *key, const struct calib_result *r, long long now_s, char *why,
		     size_t nwhy);
/* Device `ordinal`'s key (calib_cuda.c): its UUID and the driver's
 * version ("GPU-<32 hex>-<version>"): a new driver starts anew. 0 when
 * either cannot be read. */
int calib_device_key(int ordinal, char *key, size_t n);

#endif
