/* Another profiler in the application (as PyTorch's Kineto): a library
 * linked against CUPTI (here the stand-in, libfake_cupti.so) that calls
 * cuptiSubscribe through its own PLT when the user starts profiling
 * (tests/unit/test_inject_fake_cupti.c). */
#include <cupti.h>

__attribute__((visibility("default"))) int fake_profiler_start(void);
__attribute__((visibility("default"))) int fake_profiler_heard(void);

static int heard;

static void CUPTIAPI on_callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
				 const void *data)
{
	(void)user;
	(void)domain;
	(void)cbid;
	if (((const CUpti_CallbackData *)data)->callbackSite == CUPTI_API_ENTER)
		__atomic_add_fetch(&heard, 1, __ATOMIC_RELAXED);
}

/* Subscribe and ask for the driver's kernel launches; CUPTI's result. */
int fake_profiler_start(void)
{
	CUpti_SubscriberHandle sub;
	CUptiResult r = cuptiSubscribe(&sub, on_callback, NULL);
	if (r == CUPTI_SUCCESS)
		cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
	return (int)r;
}

/* Launches its callback heard. */
int fake_profiler_heard(void)
{
	return __atomic_load_n(&heard, __ATOMIC_RELAXED);
}
