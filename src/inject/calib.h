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
 * through the same held path: offset = interval - the span inside the
 * kernel, median over the launches. It is kept as a number of floors
 * (the GPU's step from one event to the next, measured alongside), so
 * that it follows the GPU's clocks as the floor measured in the census
 * does. What the span inside the kernel cannot see (the few hundred
 * nanoseconds between a one-thread kernel's dispatch and its first
 * instruction, and after its last) counts into the offset: that is the
 * method's error, measured against an exact CUPTI trace by
 * `scripts/gpu-check.sh sample-offset`. */
#ifndef GPULSE_INJECT_CALIB_H
#define GPULSE_INJECT_CALIB_H

/* Spin lengths of the calibration kernel, ns (launched in turn), and how
 * many launches of each are kept after the warm-up. */
#define CALIB_SPINS       4
#define CALIB_PER_SPIN    12
#define CALIB_WARMUP      4
#define CALIB_LAUNCHES    (CALIB_WARMUP + CALIB_SPINS * CALIB_PER_SPIN)
extern const unsigned long long calib_spin_ns[CALIB_SPINS];

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
	double offset_ns;      /* median of interval - span */
	double floor_ns;       /* median floor */
	double floors;         /* offset_ns / floor_ns: what is taken off a sample */
	double spread_ns;      /* half the interquartile range of interval - span */
	double slope;          /* interval against span, least squares: 1 when the method holds */
	double timer_step_ns;  /* smallest %globaltimer step seen */
	unsigned samples;      /* launches used */
};

/* The offset from n samples (the warm-up already left out). It is
 * refused (r->ok 0, r->why says why) when fewer than half the planned
 * launches came back, when %globaltimer is coarser than
 * CALIB_TIMER_RES_MAX_NS, when the interval does not grow with the span
 * (slope outside 0.9-1.1) or when the offset or floor is not positive. */
void calib_fit(const struct calib_sample *s, unsigned n, struct calib_result *r);

/* Measure on CUDA device `ordinal` (its primary context must be active:
 * never made active here). Runs on the library's thread: about 60
 * launches of a one-thread kernel and as many stream synchronisations
 * (a few milliseconds), on a stream of its own; everything made is
 * released before it returns. Returns r->ok. */
int calib_measure(int ordinal, struct calib_result *r);

/* Whether the calling thread is inside calib_measure: the launch
 * callbacks leave its launches alone. */
int calib_this_thread(void);

#endif
