/* Which CUDA API calls a program makes between its kernel launches, and
 * how many per launch: an injection library (CUDA_INJECTION64_PATH) that
 * counts every driver and runtime API call by callback ID and prints the
 * most frequent at exit, as lines "domain name count per_launch". It is
 * the measurement behind pricing a census window (src/inject/governor.c):
 * a subscriber may cost every call, not only the launches it listens to.
 * Run by hand or by scripts/gpu-check.sh (section cupti-states):
 *   CUDA_INJECTION64_PATH=./libcupti_callmix.so python3 bench/inject_torch.py train --seconds 2 */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXID 1024
static unsigned long counts[2][MAXID];
static CUpti_SubscriberHandle sub;

static void CUPTIAPI cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *x)
{
	(void)u;
	if (((const CUpti_CallbackData *)x)->callbackSite != CUPTI_API_ENTER || id >= MAXID)
		return;
	__atomic_fetch_add(&counts[d == CUPTI_CB_DOMAIN_RUNTIME_API][id], 1, __ATOMIC_RELAXED);
}

static int is_launch(const char *n)
{
	return strncmp(n, "cuLaunchKernel", 14) == 0 || strncmp(n, "cuLaunchCooperativeKernel", 25) == 0;
}

static void report(void)
{
	cuptiUnsubscribe(sub);
	unsigned long launches = 0, total[2] = {0, 0};
	for (int id = 0; id < MAXID; id++) {
		const char *n = NULL;
		total[0] += counts[0][id];
		total[1] += counts[1][id];
		if (counts[0][id] && cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, (uint32_t)id, &n) == CUPTI_SUCCESS &&
		    n && is_launch(n))
			launches += counts[0][id];
	}
	double per = launches ? (double)launches : 1;
	fprintf(stderr, "callmix: driver launches %lu, driver calls %lu (%.2f per launch), runtime calls %lu (%.2f per launch)\n",
		launches, total[0], total[0] / per, total[1], total[1] / per);
	for (int k = 0; k < 30; k++) {
		int bd = -1, bi = -1;
		unsigned long best = 0;
		for (int d = 0; d < 2; d++)
			for (int id = 0; id < MAXID; id++)
				if (counts[d][id] > best)
					best = counts[d][id], bd = d, bi = id;
		if (bd < 0)
			break;
		const char *n = "?";
		cuptiGetCallbackName(bd ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, (uint32_t)bi, &n);
		fprintf(stderr, "callmix: %-7s %-40s %10lu %8.3f\n", bd ? "runtime" : "driver", n, best, best / per);
		counts[bd][bi] = 0;
	}
}

int InitializeInjection(void)
{
	if (cuptiSubscribe(&sub, cb, NULL) != CUPTI_SUCCESS)
		return 0;
	cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
	cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	atexit(report);
	return 1;
}
