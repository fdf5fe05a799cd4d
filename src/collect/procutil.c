/* Per-process shares over a window from NVML's sample buffer; see
 * procutil.h for what the buffer holds and why the mean is weighted. */
#include "collect/procutil.h"

#include <stdlib.h>

#include "common/status.h"
#include "common/xalloc.h"

#define PERIOD_MIN_US 10000ULL     /* no driver samples faster than 100 Hz */
#define PERIOD_MAX_US 2000000ULL   /* nor slower than every 2 s */

static int cmp_u64(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
	return x < y ? -1 : x > y;
}

static bool sample_ok(const struct nvml_process_utilization_sample *s,
		      unsigned long long since_us, unsigned long long end_us)
{
	return s->timestamp_us > since_us && s->timestamp_us <= end_us && s->sm_util <= 100 &&
	       s->mem_util <= 100;
}

/* Sort the times of the valid samples, keep each once; returns how many. */
static unsigned distinct_times(const struct nvml_process_utilization_sample *s, unsigned ns,
			       unsigned long long since_us, unsigned long long end_us,
			       unsigned long long *t)
{
	unsigned n = 0;
	for (unsigned i = 0; i < ns; i++)
		if (sample_ok(&s[i], since_us, end_us))
			t[n++] = s[i].timestamp_us;
	qsort(t, n, sizeof t[0], cmp_u64);
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++)
		if (k == 0 || t[i] != t[k - 1])
			t[k++] = t[i];
	return k;
}

/* The median spacing of k sorted distinct times (k >= 2), in t's place. */
static unsigned long long median_spacing(unsigned long long *t, unsigned k)
{
	for (unsigned i = 0; i + 1 < k; i++)
		t[i] = t[i + 1] - t[i];
	qsort(t, k - 1, sizeof t[0], cmp_u64);
	return t[(k - 1) / 2];
}

/* Whether some pid has two or more valid samples in the window. */
static bool any_pid_twice(const struct nvml_process_utilization_sample *s, unsigned ns,
			  unsigned long long since_us, unsigned long long end_us)
{
	for (unsigned i = 0; i < ns; i++) {
		if (!sample_ok(&s[i], since_us, end_us))
			continue;
		for (unsigned j = i + 1; j < ns; j++)
			if (s[j].pid == s[i].pid && sample_ok(&s[j], since_us, end_us))
				return true;
	}
	return false;
}

int procutil_shares(struct procutil_state *st, const struct nvml_process_utilization_sample *s,
		    unsigned ns, const uint32_t *pids, unsigned npids,
		    unsigned long long since_us, unsigned long long end_us, double *sm, double *mem)
{
	if (end_us <= since_us)
		return GPULSE_EINVAL;
	unsigned long long *t = xmalloc((ns ? ns : 1) * sizeof *t);
	unsigned k = distinct_times(s, ns, since_us, end_us, t);
	if (k >= 2) {
		unsigned long long p = median_spacing(t, k);
		st->period_us = p < PERIOD_MIN_US ? PERIOD_MIN_US : p > PERIOD_MAX_US ? PERIOD_MAX_US : p;
	}
	free(t);
	if (any_pid_twice(s, ns, since_us, end_us))
		st->buffered = true;

	/* The periods the window holds: its length over the driver's period,
	 * and never fewer than the sample times seen in it. */
	unsigned long long period = st->period_us ? st->period_us : PROCUTIL_DEFAULT_PERIOD_US;
	unsigned long long w = end_us - since_us;
	double periods = (double)((w + period / 2) / period);
	if (periods < k)
		periods = k;
	if (periods < 1)
		periods = 1;

	for (unsigned i = 0; i < npids; i++) {
		double sum_sm = 0, sum_mem = 0;
		unsigned n = 0;
		for (unsigned j = 0; j < ns; j++) {
			if (s[j].pid != pids[i] || !sample_ok(&s[j], since_us, end_us))
				continue;
			sum_sm += s[j].sm_util;
			sum_mem += s[j].mem_util;
			n++;
		}
		double d = st->buffered ? periods : (n ? n : 1);
		sm[i] = sum_sm / d / 100.0;
		mem[i] = sum_mem / d / 100.0;
		if (sm[i] > 1)
			sm[i] = 1;
		if (mem[i] > 1)
			mem[i] = 1;
	}
	return GPULSE_OK;
}
