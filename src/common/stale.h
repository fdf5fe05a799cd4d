/* Prometheus's staleness marker: the NaN with one exact bit pattern that
 * ends a series (the ingest writes it when a GPU or field goes away, the
 * rule engine when an alert or recorded series stops, the evaluator skips
 * it). Here, below both the store and PromQL, since both speak it. */
#ifndef GPULSE_STALE_H
#define GPULSE_STALE_H

#define STALE_NAN_BITS 0x7ff0000000000002ULL

/* True when v is the staleness marker (not any other NaN). */
int stale_nan_is(double v);
/* The staleness marker value. */
double stale_nan(void);

#endif
