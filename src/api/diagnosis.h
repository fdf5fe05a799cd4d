/* /api/v1/diagnosis?gpu=N&since=10m&window=5s: the bottleneck diagnosis
 * of the last `since`, in the document `gpulse diagnose --json` prints,
 * inside the API's envelope, with who held each GPU in each window
 * (tenants) and who owns each GPU's bottleneck now (owners). Within the
 * live history it classifies the held samples (diagnose/live.h); past it,
 * with storage on, it reads the stored verdicts (diagnose/history.h). */
#ifndef GPULSE_API_DIAGNOSIS_H
#define GPULSE_API_DIAGNOSIS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "collect/bus.h"
#include "common/buf.h"
#include "diagnose/history.h"
#include "diagnose/live.h"
#include "http/http_server.h"
#include "profile/profile_timeline.h"

/* What traced processes did on GPU `gpu` over [a_s, b_s); false when
 * nothing was traced there (profiling_window in gpulsed). */
typedef bool api_trace_window_fn(void *ctx, int gpu, double a_s, double b_s,
				 struct profile_window_sum *out);
/* Append one window's tenants as a JSON object to b (tenantsd_window_json
 * in gpulsed); `bottleneck` is the window's enum diag_class. */
typedef int api_window_tenants_fn(void *ctx, struct buf *b, int gpu, double start_s,
				  double end_s, int bottleneck);

struct api_diagnosis {
	struct bus *bus;
	struct diag_live *diag;
	/* The stored history: *hist is NULL until the store opens, then set
	 * once (release) by its owner while HTTP threads read it. */
	struct diag_history *_Atomic *hist;
	api_trace_window_fn *trace_window;     /* NULL: no traced owners */
	void *trace_ctx;
	api_window_tenants_fn *window_tenants; /* NULL: no "tenants" entries */
	void *tenants_ctx;
	size_t max_body_bytes;                 /* the bound of each part of an answer */
};

/* Route the endpoint on `s` (d must outlive the server). 0 or the
 * server's error. */
int api_diagnosis_register(struct http_server *s, struct api_diagnosis *d);

#endif
