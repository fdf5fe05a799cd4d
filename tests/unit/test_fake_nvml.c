/* The fake libnvidia-ml.so.1, opened with dlopen and called through dlsym
 * alone (not the project's shim), so that what it serves is checked
 * against the recording independently: values of the current row in
 * NVML's units, GPM metrics, and each fault (hang, lost, notsup, XID,
 * nodriver). With GPULSE_FAKE_NVML_SPEED=0 time stands still at each GPU's
 * first row, which makes the expected values exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect/fields.h"
#include "nvml/nvml_abi.h"
#include "nvml/nvml_shim.h"
#include "record/recording.h"

typedef nvml_return_t (*dev_uint_fn)(nvml_device_t, unsigned int *);
typedef nvml_return_t (*dev_str_fn)(nvml_device_t, char *, unsigned int);

static struct {
	void *h;
	nvml_return_t (*init)(void);
	nvml_return_t (*shutdown)(void);
	nvml_return_t (*count)(unsigned int *);
	nvml_return_t (*by_index)(unsigned int, nvml_device_t *);
	nvml_return_t (*by_uuid)(const char *, nvml_device_t *);
	nvml_return_t (*driver_version)(char *, unsigned int);
	nvml_return_t (*cuda_version)(int *);
	dev_str_fn name, uuid, serial;
	nvml_return_t (*pci)(nvml_device_t, struct nvml_pci_info *);
	dev_uint_fn arch, power_limit, power, cores;
	nvml_return_t (*max_clock)(nvml_device_t, int, unsigned int *);
	nvml_return_t (*clock)(nvml_device_t, int, unsigned int *);
	nvml_return_t (*temp)(nvml_device_t, int, unsigned int *);
	nvml_return_t (*pstate)(nvml_device_t, int *);
	nvml_return_t (*reasons)(nvml_device_t, unsigned long long *);
	nvml_return_t (*util)(nvml_device_t, struct nvml_utilization *);
	nvml_return_t (*mem_v2)(nvml_device_t, struct nvml_memory_v2 *);
	nvml_return_t (*energy)(nvml_device_t, unsigned long long *);
	nvml_return_t (*procs)(nvml_device_t, unsigned int *, struct nvml_process_info *);
	nvml_return_t (*proc_util)(nvml_device_t, struct nvml_process_utilization_sample *,
				   unsigned int *, unsigned long long);
	nvml_return_t (*field_values)(nvml_device_t, int, struct nvml_field_value *);
	nvml_return_t (*gpm_support)(nvml_device_t, struct nvml_gpm_support *);
	nvml_return_t (*gpm_alloc)(nvml_gpm_sample_t *);
	nvml_return_t (*gpm_free)(nvml_gpm_sample_t);
	nvml_return_t (*gpm_get)(nvml_device_t, nvml_gpm_sample_t);
	nvml_return_t (*gpm_metrics)(struct nvml_gpm_metrics_get *);
	nvml_return_t (*set_create)(nvml_event_set_t *);
	nvml_return_t (*register_events)(nvml_device_t, unsigned long long, nvml_event_set_t);
	nvml_return_t (*set_wait)(nvml_event_set_t, struct nvml_event_data *, unsigned int);
	nvml_return_t (*set_free)(nvml_event_set_t);
	const char *(*error_string)(nvml_return_t);
	int (*call_count)(const char *);
} nv;

static struct recording *real;  /* the recording the fake serves */

static void *sym(const char *name)
{
	void *p = dlsym(nv.h, name);
	if (!p)
		fail_msg("fake NVML lacks %s", name);
	return p;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *real_path(void)
{
	static char path[4096];
	const char *dir = getenv("GPULSE_TEST_DATA");
	snprintf(path, sizeof path, "%s/recordings/h200-phases-10hz.csv",
		 dir ? dir : GPULSE_SOURCE_DATADIR);
	return path;
}

static int group_setup(void **state)
{
	(void)state;
	const char *lib = getenv("GPULSE_FAKE_NVML");
	nv.h = dlopen(lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!nv.h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return -1;
	}
	*(void **)&nv.init = sym("nvmlInit_v2");
	*(void **)&nv.shutdown = sym("nvmlShutdown");
	*(void **)&nv.count = sym("nvmlDeviceGetCount_v2");
	*(void **)&nv.by_index = sym("nvmlDeviceGetHandleByIndex_v2");
	*(void **)&nv.by_uuid = sym("nvmlDeviceGetHandleByUUID");
	*(void **)&nv.driver_version = sym("nvmlSystemGetDriverVersion");
	*(void **)&nv.cuda_version = sym("nvmlSystemGetCudaDriverVersion_v2");
	*(void **)&nv.name = sym("nvmlDeviceGetName");
	*(void **)&nv.uuid = sym("nvmlDeviceGetUUID");
	*(void **)&nv.serial = sym("nvmlDeviceGetSerial");
	*(void **)&nv.pci = sym("nvmlDeviceGetPciInfo_v3");
	*(void **)&nv.arch = sym("nvmlDeviceGetArchitecture");
	*(void **)&nv.power_limit = sym("nvmlDeviceGetEnforcedPowerLimit");
	*(void **)&nv.power = sym("nvmlDeviceGetPowerUsage");
	*(void **)&nv.cores = sym("nvmlDeviceGetNumGpuCores");
	*(void **)&nv.max_clock = sym("nvmlDeviceGetMaxClockInfo");
	*(void **)&nv.clock = sym("nvmlDeviceGetClockInfo");
	*(void **)&nv.temp = sym("nvmlDeviceGetTemperature");
	*(void **)&nv.pstate = sym("nvmlDeviceGetPerformanceState");
	*(void **)&nv.reasons = sym("nvmlDeviceGetCurrentClocksEventReasons");
	*(void **)&nv.util = sym("nvmlDeviceGetUtilizationRates");
	*(void **)&nv.mem_v2 = sym("nvmlDeviceGetMemoryInfo_v2");
	*(void **)&nv.energy = sym("nvmlDeviceGetTotalEnergyConsumption");
	*(void **)&nv.procs = sym("nvmlDeviceGetComputeRunningProcesses_v3");
	*(void **)&nv.proc_util = sym("nvmlDeviceGetProcessUtilization");
	*(void **)&nv.field_values = sym("nvmlDeviceGetFieldValues");
	*(void **)&nv.gpm_support = sym("nvmlGpmQueryDeviceSupport");
	*(void **)&nv.gpm_alloc = sym("nvmlGpmSampleAlloc");
	*(void **)&nv.gpm_free = sym("nvmlGpmSampleFree");
	*(void **)&nv.gpm_get = sym("nvmlGpmSampleGet");
	*(void **)&nv.gpm_metrics = sym("nvmlGpmMetricsGet");
	*(void **)&nv.set_create = sym("nvmlEventSetCreate");
	*(void **)&nv.register_events = sym("nvmlDeviceRegisterEvents");
	*(void **)&nv.set_wait = sym("nvmlEventSetWait_v2");
	*(void **)&nv.set_free = sym("nvmlEventSetFree");
	*(void **)&nv.error_string = sym("nvmlErrorString");
	*(void **)&nv.call_count = sym("fakeNvmlCallCount");
	char err[256];
	if (recording_load(real_path(), &real, err, sizeof err) != 0) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	recording_free(real);
	/* Not dlclosed: a thread of the hang test may still sleep inside. */
	return 0;
}

/* Each test starts from a clean environment, frozen time, the real file. */
static int test_setup(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_RECORDING", real_path(), 1);
	setenv("GPULSE_FAKE_NVML_SPEED", "0", 1);
	unsetenv("GPULSE_FAKE_NVML_GPUS");
	unsetenv("GPULSE_FAKE_NVML_FAULTS");
	unsetenv("GPULSE_FAKE_NVML_TOPOLOGY");
	unsetenv("GPULSE_FAKE_NVML_NVLINKS");
	return 0;
}

static void init_ok(void)
{
	nvml_return_t r = nv.init();
	if (r != NVML_ABI_SUCCESS)
		fail_msg("nvmlInit_v2: %d %s", r, nv.error_string(r));
}

static nvml_device_t handle(unsigned i)
{
	nvml_device_t d = NULL;
	assert_int_equal(nv.by_index(i, &d), NVML_ABI_SUCCESS);
	return d;
}

/* The row GPU k of an N-GPU replica sits on with time frozen: the copy
 * starts 37 rows later per GPU, at the last row of that time. */
static const struct rec_row *frozen_row(unsigned k)
{
	size_t start = ((size_t)k * 37) % real->nrows;
	size_t i = start;
	while (i + 1 < real->nrows && real->rows[i + 1].t_s <= real->rows[start].t_s)
		i++;
	return &real->rows[i];
}

static unsigned pct(const struct rec_row *r, enum field_id f)
{
	return (unsigned)lround(r->v[f] * 100);
}

static void test_every_shim_symbol_exported(void **state)
{
	(void)state;
#define CHECK_SYM(kind, member, symbol, alt, params) sym(symbol);
	NVML_FUNCS(CHECK_SYM)
#undef CHECK_SYM
}

static void test_identity(void **state)
{
	(void)state;
	unsigned n = 0;
	char buf[96];
	assert_int_equal(nv.count(&n), NVML_ABI_ERROR_UNINITIALIZED);

	setenv("GPULSE_FAKE_NVML_GPUS", "3", 1);
	init_ok();
	init_ok(); /* NVML counts inits; one shutdown leaves it working */
	assert_int_equal(nv.count(&n), NVML_ABI_SUCCESS);
	assert_int_equal(n, 3);
	nvml_device_t d2 = handle(2);
	nvml_device_t none;
	assert_int_equal(nv.by_index(3, &none), NVML_ABI_ERROR_INVALID_ARGUMENT);

	assert_int_equal(nv.name(d2, buf, sizeof buf), NVML_ABI_SUCCESS);
	assert_string_equal(buf, "NVIDIA H200");
	assert_int_equal(nv.name(d2, buf, 5), NVML_ABI_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(nv.uuid(d2, buf, sizeof buf), NVML_ABI_SUCCESS);
	assert_string_equal(buf, "GPU-fa4e0000-0000-4000-8000-000000000002");
	nvml_device_t by_uuid = NULL;
	assert_int_equal(nv.by_uuid(buf, &by_uuid), NVML_ABI_SUCCESS);
	assert_ptr_equal(by_uuid, d2);
	assert_int_equal(nv.serial(d2, buf, sizeof buf), NVML_ABI_SUCCESS);
	assert_string_equal(buf, "FAKE00002");
	struct nvml_pci_info pci;
	assert_int_equal(nv.pci(d2, &pci), NVML_ABI_SUCCESS);
	assert_string_equal(pci.bus_id, "00000000:1A:00.0");
	assert_int_equal(pci.bus, 0x1a);
	assert_int_equal(nv.driver_version(buf, sizeof buf), NVML_ABI_SUCCESS);
	assert_string_equal(buf, "580.159.04");
	int cuda = 0;
	assert_int_equal(nv.cuda_version(&cuda), NVML_ABI_SUCCESS);
	assert_int_equal(cuda, 13000);
	unsigned v = 0;
	assert_int_equal(nv.arch(d2, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, NVML_ABI_DEVICE_ARCH_HOPPER);
	assert_int_equal(nv.power_limit(d2, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, 700000);
	assert_int_equal(nv.cores(d2, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, 16896);
	assert_int_equal(nv.max_clock(d2, NVML_ABI_CLOCK_SM, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, 1980);
	assert_int_equal(nv.max_clock(d2, NVML_ABI_CLOCK_MEM, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, 3201);
	assert_string_equal(nv.error_string(NVML_ABI_ERROR_GPU_IS_LOST), "GPU is lost");

	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
	assert_int_equal(nv.count(&n), NVML_ABI_SUCCESS);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
	assert_int_equal(nv.count(&n), NVML_ABI_ERROR_UNINITIALIZED);
}

/* Every value function against the row, in NVML's units. */
static void check_values(nvml_device_t d, const struct rec_row *r)
{
	struct nvml_utilization u;
	assert_int_equal(nv.util(d, &u), NVML_ABI_SUCCESS);
	assert_int_equal(u.gpu, pct(r, F_GPU_UTIL));
	assert_int_equal(u.memory, pct(r, F_MEM_UTIL));

	struct nvml_memory_v2 m = {.version = NVML_ABI_MEMORY_V2_VERSION};
	assert_int_equal(nv.mem_v2(d, &m), NVML_ABI_SUCCESS);
	assert_int_equal(m.used, (unsigned long long)r->v[F_MEM_USED]);
	assert_int_equal(m.total, (unsigned long long)r->v[F_MEM_TOTAL]);
	assert_int_equal(m.free + m.used + m.reserved, m.total);
	struct nvml_memory_v2 bad = {.version = 1};
	assert_int_equal(nv.mem_v2(d, &bad), NVML_ABI_ERROR_ARGUMENT_VERSION_MISMATCH);

	unsigned v;
	assert_int_equal(nv.power(d, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, (unsigned)lround(r->v[F_POWER] * 1000));
	assert_int_equal(nv.clock(d, NVML_ABI_CLOCK_SM, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, (unsigned)lround(r->v[F_SM_CLOCK] / 1e6));
	assert_int_equal(nv.clock(d, NVML_ABI_CLOCK_MEM, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, (unsigned)lround(r->v[F_MEM_CLOCK] / 1e6));
	assert_int_equal(nv.temp(d, NVML_ABI_TEMPERATURE_GPU, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, (unsigned)lround(r->v[F_TEMP]));
	int ps;
	assert_int_equal(nv.pstate(d, &ps), NVML_ABI_SUCCESS);
	assert_int_equal(ps, (int)lround(r->v[F_PSTATE]));
	unsigned long long reasons;
	assert_int_equal(nv.reasons(d, &reasons), NVML_ABI_SUCCESS);
	assert_int_equal(reasons, (unsigned long long)r->v[F_CLOCK_REASONS]);
}

static void test_values_frozen(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_GPUS", "10", 1);
	init_ok();
	check_values(handle(0), frozen_row(0));
	/* GPU 9 starts 333 rows in, in the bf16 matmul phase. */
	const struct rec_row *busy = frozen_row(9);
	assert_true(busy->v[F_POWER] > 500);
	check_values(handle(9), busy);

	/* Frozen time: energy does not move. */
	unsigned long long e1, e2;
	assert_int_equal(nv.energy(handle(9), &e1), NVML_ABI_SUCCESS);
	usleep(20000);
	assert_int_equal(nv.energy(handle(9), &e2), NVML_ABI_SUCCESS);
	assert_int_equal(e1, e2);

	struct nvml_field_value fv[3] = {
		{.field_id = NVML_ABI_FI_DEV_MEMORY_TEMP},
		{.field_id = NVML_ABI_FI_DEV_POWER_INSTANT},
		{.field_id = NVML_ABI_FI_DEV_TOTAL_ENERGY_CONSUMPTION},
	};
	assert_int_equal(nv.field_values(handle(9), 3, fv), NVML_ABI_SUCCESS);
	assert_int_equal(fv[0].nvml_return, NVML_ABI_ERROR_NOT_SUPPORTED);
	assert_int_equal(fv[1].nvml_return, NVML_ABI_SUCCESS);
	assert_int_equal(fv[1].value.ui, (unsigned)lround(busy->v[F_POWER] * 1000));
	assert_int_equal(fv[2].nvml_return, NVML_ABI_SUCCESS);
	assert_int_equal(fv[2].value.ull, e1);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

static void test_time_moves(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_SPEED", "100", 1);
	init_ok();
	nvml_device_t d = handle(0);
	unsigned long long e1, e2;
	assert_int_equal(nv.energy(d, &e1), NVML_ABI_SUCCESS);
	usleep(200000);
	assert_int_equal(nv.energy(d, &e2), NVML_ABI_SUCCESS);
	/* About 20 recorded seconds of an idle GPU (80-130 W) passed. */
	double joules = (double)(e2 - e1) / 1000;
	print_message("energy over 0.2 s at speed 100: %.0f J\n", joules);
	assert_true(joules > 500 && joules < 700 * 40);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

/* A file of two GPUs with gaps, written for this test. */
static const char synthetic_csv[] =
	"t_s,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,power_w,proc_count,sm_util,"
	"dram_bw_util\n"
	"100.0,0,50,20,3000,8192,300.5,3,40,\n"
	"100.0,1,10,5,,8192,,0,,\n"
	"100.1,0,60,25,3000,8192,310,3,45,12\n"
	"100.1,1,11,6,,8192,,0,,\n";

static void test_processes_and_absent_values(void **state)
{
	(void)state;
	char path[] = "/tmp/fake-nvml-test-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, synthetic_csv, sizeof synthetic_csv - 1),
			 (ssize_t)(sizeof synthetic_csv - 1));
	close(fd);
	setenv("GPULSE_FAKE_NVML_RECORDING", path, 1);
	init_ok();
	unsigned n = 0;
	assert_int_equal(nv.count(&n), NVML_ABI_SUCCESS);
	assert_int_equal(n, 2);
	nvml_device_t d0 = handle(0), d1 = handle(1);

	/* Processes: NVML's two-call protocol, the caller first. */
	n = 0;
	assert_int_equal(nv.procs(d0, &n, NULL), NVML_ABI_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 3);
	struct nvml_process_info pi[4];
	n = 2;
	assert_int_equal(nv.procs(d0, &n, pi), NVML_ABI_ERROR_INSUFFICIENT_SIZE);
	n = 4;
	assert_int_equal(nv.procs(d0, &n, pi), NVML_ABI_SUCCESS);
	assert_int_equal(n, 3);
	assert_int_equal(pi[0].pid, (unsigned)getpid());
	assert_int_equal(pi[1].pid, 4000001);
	assert_int_equal(pi[0].used_gpu_memory, 1000ULL * 1048576);
	n = 0;
	assert_int_equal(nv.procs(d1, &n, NULL), NVML_ABI_SUCCESS);
	assert_int_equal(n, 0);

	/* Per-process utilization is a driver buffer: a sample per process
	 * per 1/6 s period since lastSeenTimeStamp, the three processes
	 * splitting the GPU's 50% and 20% as 3:2:1. */
	struct nvml_process_utilization_sample ps[64];
	struct timespec now_ts;
	clock_gettime(CLOCK_REALTIME, &now_ts);
	unsigned long long now_us = (unsigned long long)now_ts.tv_sec * 1000000ULL +
				    (unsigned long long)now_ts.tv_nsec / 1000;
	unsigned long long since = now_us - 1000000;
	n = 0;
	assert_int_equal(nv.proc_util(d0, NULL, &n, since), NVML_ABI_ERROR_INSUFFICIENT_SIZE);
	assert_true(n >= 15 && n <= 21);
	n = 64;
	assert_int_equal(nv.proc_util(d0, ps, &n, since), NVML_ABI_SUCCESS);
	assert_true(n >= 15 && n <= 21);
	unsigned per_pid[3] = {0};
	for (unsigned i = 0; i < n; i++) {
		assert_true(ps[i].timestamp_us > since && ps[i].timestamp_us <= now_us + 2000000);
		int k = ps[i].pid == (unsigned)getpid() ? 0 : (int)ps[i].pid - 4000000;
		assert_true(k >= 0 && k < 3);
		per_pid[k]++;
		static const unsigned want_sm[3] = {25, 17, 8}, want_mem[3] = {10, 7, 3};
		assert_int_equal(ps[i].sm_util, want_sm[k]);
		assert_int_equal(ps[i].mem_util, want_mem[k]);
	}
	for (int k = 0; k < 3; k++)
		assert_true(per_pid[k] >= 5);
	/* 0 is the whole buffer (100 s of periods); nothing after the future. */
	n = 64;
	assert_int_equal(nv.proc_util(d0, ps, &n, 0), NVML_ABI_ERROR_INSUFFICIENT_SIZE);
	assert_int_equal(n, 600 * 3);
	assert_int_equal(nv.proc_util(d0, ps, &n, ~0ULL), NVML_ABI_ERROR_NOT_FOUND);

	/* Empty cells and missing columns are NOT_SUPPORTED, nothing else. */
	unsigned v;
	struct nvml_memory_v2 m = {.version = NVML_ABI_MEMORY_V2_VERSION};
	assert_int_equal(nv.power(d0, &v), NVML_ABI_SUCCESS);
	assert_int_equal(v, 300500);
	assert_int_equal(nv.power(d1, &v), NVML_ABI_ERROR_NOT_SUPPORTED);
	assert_int_equal(nv.mem_v2(d1, &m), NVML_ABI_ERROR_NOT_SUPPORTED);
	assert_int_equal(nv.temp(d0, NVML_ABI_TEMPERATURE_GPU, &v), NVML_ABI_ERROR_NOT_SUPPORTED);

	struct nvml_gpm_metrics_get mg = {.version = NVML_ABI_GPM_METRICS_GET_VERSION, .num_metrics = 2};
	mg.metrics[0].metric_id = NVML_ABI_GPM_METRIC_SM_UTIL;
	mg.metrics[1].metric_id = NVML_ABI_GPM_METRIC_DRAM_BW_UTIL;
	assert_int_equal(nv.gpm_alloc(&mg.sample1), NVML_ABI_SUCCESS);
	assert_int_equal(nv.gpm_alloc(&mg.sample2), NVML_ABI_SUCCESS);
	assert_int_equal(nv.gpm_get(d0, mg.sample1), NVML_ABI_SUCCESS);
	assert_int_equal(nv.gpm_get(d0, mg.sample2), NVML_ABI_SUCCESS);
	assert_int_equal(nv.gpm_metrics(&mg), NVML_ABI_SUCCESS);
	assert_int_equal(mg.metrics[0].nvml_return, NVML_ABI_SUCCESS);
	assert_true(fabs(mg.metrics[0].value - 40) < 1e-9);
	assert_int_equal(mg.metrics[1].nvml_return, NVML_ABI_ERROR_NOT_SUPPORTED);
	nv.gpm_free(mg.sample1);
	nv.gpm_free(mg.sample2);

	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
	unlink(path);
}

static void test_gpm(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_GPUS", "10", 1);
	init_ok();
	static const struct {
		unsigned id;
		enum field_id f;
	} want[] = {
		{NVML_ABI_GPM_METRIC_GRAPHICS_UTIL, F_GPM_GRAPHICS},
		{NVML_ABI_GPM_METRIC_SM_UTIL, F_GPM_SM},
		{NVML_ABI_GPM_METRIC_SM_OCCUPANCY, F_GPM_OCCUPANCY},
		{NVML_ABI_GPM_METRIC_INTEGER_UTIL, F_GPM_INTEGER},
		{NVML_ABI_GPM_METRIC_ANY_TENSOR_UTIL, F_GPM_TENSOR},
		{NVML_ABI_GPM_METRIC_DRAM_BW_UTIL, F_GPM_DRAM},
		{NVML_ABI_GPM_METRIC_FP64_UTIL, F_GPM_FP64},
		{NVML_ABI_GPM_METRIC_FP32_UTIL, F_GPM_FP32},
		{NVML_ABI_GPM_METRIC_FP16_UTIL, F_GPM_FP16},
		{NVML_ABI_GPM_METRIC_PCIE_TX_PER_SEC, F_GPM_PCIE_TX},
		{NVML_ABI_GPM_METRIC_PCIE_RX_PER_SEC, F_GPM_PCIE_RX},
		{NVML_ABI_GPM_METRIC_DFMA_TENSOR_UTIL, F_GPM_DFMA},
		{NVML_ABI_GPM_METRIC_HMMA_TENSOR_UTIL, F_GPM_HMMA},
		{NVML_ABI_GPM_METRIC_IMMA_TENSOR_UTIL, F_GPM_IMMA},
		{NVML_ABI_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, F_GPM_NVLINK_TX},
	};
	const size_t nwant = sizeof want / sizeof want[0];
	const unsigned gpus[] = {0, 9};
	for (size_t g = 0; g < 2; g++) {
		nvml_device_t d = handle(gpus[g]);
		const struct rec_row *r = frozen_row(gpus[g]);
		struct nvml_gpm_support sup = {.version = NVML_ABI_GPM_SUPPORT_VERSION};
		assert_int_equal(nv.gpm_support(d, &sup), NVML_ABI_SUCCESS);
		assert_int_equal(sup.is_supported_device, 1);

		struct nvml_gpm_metrics_get mg = {.version = NVML_ABI_GPM_METRICS_GET_VERSION,
						  .num_metrics = (unsigned)nwant};
		for (size_t i = 0; i < nwant; i++)
			mg.metrics[i].metric_id = want[i].id;
		assert_int_equal(nv.gpm_alloc(&mg.sample1), NVML_ABI_SUCCESS);
		assert_int_equal(nv.gpm_alloc(&mg.sample2), NVML_ABI_SUCCESS);
		assert_int_equal(nv.gpm_get(d, mg.sample1), NVML_ABI_SUCCESS);
		assert_int_equal(nv.gpm_get(d, mg.sample2), NVML_ABI_SUCCESS);
		assert_int_equal(nv.gpm_metrics(&mg), NVML_ABI_SUCCESS);
		for (size_t i = 0; i < nwant; i++) {
			const struct nvml_gpm_metric *m = &mg.metrics[i];
			enum field_id f = want[i].f;
			if (!(r->valid & FIELD_BIT(f))) {
				assert_int_equal(m->nvml_return, NVML_ABI_ERROR_NOT_SUPPORTED);
				continue;
			}
			assert_int_equal(m->nvml_return, NVML_ABI_SUCCESS);
			/* In the recording's own unit: percent, MiB/s. */
			double col = r->v[f] / field_table[f].scale;
			if (fabs(m->value - col) > 1e-9 * (1 + fabs(col)))
				fail_msg("gpu %u metric %u: %.17g, want %.17g", gpus[g], want[i].id,
					 m->value, col);
		}
		/* Hopper's DFMA/HMMA/IMMA and NVLink are not in recordings. */
		assert_int_equal(mg.metrics[11].nvml_return, NVML_ABI_ERROR_NOT_SUPPORTED);
		assert_int_equal(mg.metrics[14].nvml_return, NVML_ABI_ERROR_NOT_SUPPORTED);
		if (gpus[g] == 9)
			assert_true(mg.metrics[1].value > 50);  /* the matmul phase */
		assert_int_equal(nv.gpm_free(mg.sample1), NVML_ABI_SUCCESS);
		assert_int_equal(nv.gpm_free(mg.sample2), NVML_ABI_SUCCESS);
	}
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

static double timed_power(nvml_device_t d, nvml_return_t *r)
{
	unsigned mw;
	double t0 = now_s();
	*r = nv.power(d, &mw);
	return now_s() - t0;
}

struct hang_arg {
	nvml_device_t dev;
	nvml_return_t r;
	double took_s;
};

static void *hang_thread(void *arg)
{
	struct hang_arg *a = arg;
	a->took_s = timed_power(a->dev, &a->r);
	return NULL;
}

static void test_hang(void **state)
{
	(void)state;
	nvml_return_t r;
	setenv("GPULSE_FAKE_NVML_GPUS", "2", 1);
	setenv("GPULSE_FAKE_NVML_FAULTS",
	       "hang:nvmlDeviceGetPowerUsage:gpu=1:for=0.3; hang:nvmlDeviceGetTemperature:after=30", 1);
	init_ok();
	/* GPU 0 is not named, and the temperature hang is not due yet. */
	assert_true(timed_power(handle(0), &r) < 0.1);
	assert_int_equal(r, NVML_ABI_SUCCESS);
	unsigned t;
	double t0 = now_s();
	assert_int_equal(nv.temp(handle(1), NVML_ABI_TEMPERATURE_GPU, &t), NVML_ABI_SUCCESS);
	assert_true(now_s() - t0 < 0.1);

	/* The hung call blocks ~0.3 s, and other calls go on meanwhile. */
	int before = nv.call_count("nvmlDeviceGetPowerUsage");
	struct hang_arg hung = {.dev = handle(1)};
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, hang_thread, &hung), 0);
	usleep(50000);
	assert_int_equal(nv.call_count("nvmlDeviceGetPowerUsage"), before + 1);
	double during = timed_power(handle(0), &r);
	assert_int_equal(r, NVML_ABI_SUCCESS);
	assert_true(during < 0.1);
	pthread_join(th, NULL);
	print_message("hung call took %.3f s\n", hung.took_s);
	assert_int_equal(hung.r, NVML_ABI_SUCCESS);
	assert_true(hung.took_s >= 0.28 && hung.took_s < 2.0);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

static void test_lost(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_GPUS", "2", 1);
	setenv("GPULSE_FAKE_NVML_FAULTS", "lost:gpu=1:at=0:until=0.4", 1);
	init_ok();
	nvml_device_t d0 = handle(0), d1;
	unsigned v, n;
	char uuid[96];
	assert_int_equal(nv.by_index(1, &d1), NVML_ABI_ERROR_GPU_IS_LOST);
	assert_int_equal(nv.count(&n), NVML_ABI_SUCCESS);
	assert_int_equal(n, 2);
	assert_int_equal(nv.power(d0, &v), NVML_ABI_SUCCESS);
	usleep(450000);
	d1 = handle(1);
	assert_int_equal(nv.power(d1, &v), NVML_ABI_SUCCESS);
	assert_int_equal(nv.uuid(d1, uuid, sizeof uuid), NVML_ABI_SUCCESS);
	assert_string_equal(uuid, "GPU-fa4e0000-0000-4000-8000-000000000001");
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);

	/* Lost later: the handle taken while healthy starts failing. */
	setenv("GPULSE_FAKE_NVML_FAULTS", "lost:gpu=0:at=0.1", 1);
	init_ok();
	nvml_device_t d = handle(0);
	assert_int_equal(nv.power(d, &v), NVML_ABI_SUCCESS);
	usleep(150000);
	assert_int_equal(nv.power(d, &v), NVML_ABI_ERROR_GPU_IS_LOST);
	struct nvml_utilization u;
	assert_int_equal(nv.util(d, &u), NVML_ABI_ERROR_GPU_IS_LOST);
	assert_int_equal(nv.power(handle(1), &v), NVML_ABI_SUCCESS);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

static void test_notsup(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_GPUS", "2", 1);
	setenv("GPULSE_FAKE_NVML_FAULTS", "notsup:nvmlDeviceGetPowerUsage:gpu=1;notsup:gpm", 1);
	init_ok();
	unsigned v;
	assert_int_equal(nv.power(handle(0), &v), NVML_ABI_SUCCESS);
	assert_int_equal(nv.power(handle(1), &v), NVML_ABI_ERROR_NOT_SUPPORTED);
	assert_int_equal(nv.temp(handle(1), NVML_ABI_TEMPERATURE_GPU, &v), NVML_ABI_SUCCESS);
	struct nvml_gpm_support sup = {.version = NVML_ABI_GPM_SUPPORT_VERSION};
	assert_int_equal(nv.gpm_support(handle(0), &sup), NVML_ABI_SUCCESS);
	assert_int_equal(sup.is_supported_device, 0);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

static void test_xid(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_FAULTS", "xid:gpu=0:at=0.3:code=79", 1);
	double t_init = now_s();
	init_ok();
	nvml_device_t d = handle(0);
	nvml_event_set_t set;
	assert_int_equal(nv.set_create(&set), NVML_ABI_SUCCESS);
	assert_int_equal(nv.register_events(d, NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR, set),
			 NVML_ABI_SUCCESS);
	struct nvml_event_data ev;
	double t0 = now_s();
	assert_int_equal(nv.set_wait(set, &ev, 50), NVML_ABI_ERROR_TIMEOUT);
	assert_true(now_s() - t0 >= 0.045);
	assert_int_equal(nv.set_wait(set, &ev, 3000), NVML_ABI_SUCCESS);
	assert_true(now_s() - t_init >= 0.3);
	assert_true(now_s() - t_init < 1.5);
	assert_int_equal(ev.event_type, NVML_ABI_EVENT_TYPE_XID_CRITICAL_ERROR);
	assert_int_equal(ev.event_data, 79);
	assert_ptr_equal(ev.device, d);
	/* Delivered once. */
	assert_int_equal(nv.set_wait(set, &ev, 100), NVML_ABI_ERROR_TIMEOUT);
	assert_int_equal(nv.set_free(set), NVML_ABI_SUCCESS);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

static void test_init_failures(void **state)
{
	(void)state;
	setenv("GPULSE_FAKE_NVML_FAULTS", "nodriver", 1);
	assert_int_equal(nv.init(), NVML_ABI_ERROR_DRIVER_NOT_LOADED);
	static const char *const bad[] = {
		"bogus", "hang", "hang:nvmlNoSuchFunction", "hang:nvmlDeviceGetPowerUsage:for=x",
		"lost:at=1", "xid:gpu=0:at=1", "notsup:nvmlDeviceGetPowerUsage:gpu=5",
		"lost:gpu=0:at=1:after=2",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		setenv("GPULSE_FAKE_NVML_FAULTS", bad[i], 1);
		if (nv.init() != NVML_ABI_ERROR_UNKNOWN)
			fail_msg("fault spec \"%s\" accepted", bad[i]);
	}
	setenv("GPULSE_FAKE_NVML_FAULTS", "notsup:field=x", 1);
	assert_int_equal(nv.init(), NVML_ABI_ERROR_UNKNOWN);
	unsetenv("GPULSE_FAKE_NVML_FAULTS");
	/* Topologies that name no pair, a GPU that is not there, an unknown
	 * level, or more NVLinks than a GPU has (8 GPUs, 18 links each). */
	setenv("GPULSE_FAKE_NVML_GPUS", "8", 1);
	static const char *const bad_topo[] = {
		"0-0:single", "0-8:single", "0:single", "0-1:pcie", "0-1", "0-1:single:nvlink=19",
		"0-1:single:nvlink=10,0-2:node:nvlink=9", "0-1:single:links=2",
	};
	for (size_t i = 0; i < sizeof bad_topo / sizeof bad_topo[0]; i++) {
		setenv("GPULSE_FAKE_NVML_TOPOLOGY", bad_topo[i], 1);
		if (nv.init() != NVML_ABI_ERROR_UNKNOWN)
			fail_msg("topology \"%s\" accepted", bad_topo[i]);
	}
	setenv("GPULSE_FAKE_NVML_TOPOLOGY", "0-1:single:nvlink=10,0-2:node:nvlink=8", 1);
	assert_int_equal(nv.init(), NVML_ABI_SUCCESS);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
	unsetenv("GPULSE_FAKE_NVML_TOPOLOGY");
	unsetenv("GPULSE_FAKE_NVML_GPUS");
	setenv("GPULSE_FAKE_NVML_NVLINKS", "19", 1);
	assert_int_equal(nv.init(), NVML_ABI_ERROR_UNKNOWN);
	unsetenv("GPULSE_FAKE_NVML_NVLINKS");
	setenv("GPULSE_FAKE_NVML_RECORDING", "/nonexistent.csv", 1);
	assert_int_equal(nv.init(), NVML_ABI_ERROR_UNKNOWN);
	unsigned n;
	assert_int_equal(nv.count(&n), NVML_ABI_ERROR_UNINITIALIZED);
}

static void test_call_counts(void **state)
{
	(void)state;
	init_ok();
	int before = nv.call_count("nvmlDeviceGetPerformanceState");
	int ps;
	for (int i = 0; i < 5; i++)
		nv.pstate(handle(0), &ps);
	assert_int_equal(nv.call_count("nvmlDeviceGetPerformanceState"), before + 5);
	assert_int_equal(nv.call_count("nvmlNoSuchFunction"), -1);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
}

/* The counters DCGM has that the fake serves by default: violation time
 * integrated from the recorded clock event reasons (a square wave here:
 * the power cap on for 1 s, off for 1 s), NVLink's 18 links up with
 * kind+1 errors each, no retired pages, idle video engines. */
static const char square_csv[] =
	"t_s,gpu_util,clocks_event_reasons\n"
	"0,90,4\n"
	"1,90,0\n"
	"2,90,4\n"
	"3,90,0\n";

static void test_dcgm_counters(void **state)
{
	(void)state;
	nvml_return_t (*viol)(nvml_device_t, int, struct nvml_violation_time *);
	nvml_return_t (*link_state)(nvml_device_t, unsigned, int *);
	nvml_return_t (*link_err)(nvml_device_t, unsigned, int, unsigned long long *);
	nvml_return_t (*retired)(nvml_device_t, int, unsigned *, unsigned long long *);
	nvml_return_t (*pending)(nvml_device_t, int *);
	nvml_return_t (*enc)(nvml_device_t, unsigned *, unsigned *);
	*(void **)&viol = sym("nvmlDeviceGetViolationStatus");
	*(void **)&link_state = sym("nvmlDeviceGetNvLinkState");
	*(void **)&link_err = sym("nvmlDeviceGetNvLinkErrorCounter");
	*(void **)&retired = sym("nvmlDeviceGetRetiredPages");
	*(void **)&pending = sym("nvmlDeviceGetRetiredPagesPendingStatus");
	*(void **)&enc = sym("nvmlDeviceGetEncoderUtilization");

	char path[] = "/tmp/fake-nvml-test-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, square_csv, sizeof square_csv - 1), (ssize_t)(sizeof square_csv - 1));
	close(fd);
	setenv("GPULSE_FAKE_NVML_RECORDING", path, 1);
	setenv("GPULSE_FAKE_NVML_SPEED", "100", 1);
	init_ok();
	nvml_device_t d = handle(0);

	/* Half of the fake time between two reads, within one on-segment
	 * (1 s) at either end; the wall clock brackets the fake time. */
	struct nvml_violation_time a, b, app, low;
	double t0 = now_s();
	assert_int_equal(viol(d, NVML_ABI_PERF_POLICY_POWER, &a), NVML_ABI_SUCCESS);
	double t1 = now_s();
	usleep(200000);
	double t2 = now_s();
	assert_int_equal(viol(d, NVML_ABI_PERF_POLICY_POWER, &b), NVML_ABI_SUCCESS);
	double t3 = now_s();
	double held = (double)(b.violation_time - a.violation_time) / 1e9;
	double lo = (t2 - t1) * 100, hi = (t3 - t0) * 100;
	print_message("power held %.2f s of %.1f-%.1f fake s\n", held, lo, hi);
	assert_true(b.violation_time >= a.violation_time);
	assert_true(held >= 0.5 * lo - 1 && held <= 0.5 * hi + 1);
	/* Any limiter holds at least as long as the power cap; idle never. */
	assert_int_equal(viol(d, NVML_ABI_PERF_POLICY_TOTAL_APP_CLOCKS, &app), NVML_ABI_SUCCESS);
	assert_true(app.violation_time >= b.violation_time);
	assert_int_equal(viol(d, NVML_ABI_PERF_POLICY_LOW_UTILIZATION, &low), NVML_ABI_SUCCESS);
	assert_true(low.violation_time == 0);
	assert_int_equal(viol(d, 7, &low), NVML_ABI_ERROR_INVALID_ARGUMENT);

	int st = -1;
	unsigned long long n = 1;
	assert_int_equal(link_state(d, 0, &st), NVML_ABI_SUCCESS);
	assert_int_equal(st, NVML_ABI_FEATURE_ENABLED);
	assert_int_equal(link_state(d, 17, &st), NVML_ABI_SUCCESS);
	assert_int_equal(link_state(d, NVML_ABI_NVLINK_MAX_LINKS, &st), NVML_ABI_ERROR_INVALID_ARGUMENT);
	/* An active link counts kind+1 errors of each kind. */
	assert_int_equal(link_err(d, 3, NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT, &n), NVML_ABI_SUCCESS);
	assert_true(n == NVML_ABI_NVLINK_ERROR_DL_CRC_FLIT + 1);
	unsigned pages = 9, util = 9, period = 0;
	assert_int_equal(retired(d, NVML_ABI_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &pages, NULL),
			 NVML_ABI_SUCCESS);
	assert_int_equal(pages, 0);
	assert_int_equal(pending(d, &st), NVML_ABI_SUCCESS);
	assert_int_equal(st, NVML_ABI_FEATURE_DISABLED);
	assert_int_equal(enc(d, &util, &period), NVML_ABI_SUCCESS);
	assert_int_equal(util, 0);
	assert_true(period > 0);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);

	/* A recording without clock event reasons has no violation time. */
	static const char plain_csv[] = "t_s,gpu_util\n0,10\n1,20\n";
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, plain_csv, sizeof plain_csv - 1), (ssize_t)(sizeof plain_csv - 1));
	close(fd);
	init_ok();
	assert_int_equal(viol(handle(0), NVML_ABI_PERF_POLICY_POWER, &a), NVML_ABI_ERROR_NOT_SUPPORTED);
	assert_int_equal(nv.shutdown(), NVML_ABI_SUCCESS);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_every_shim_symbol_exported, test_setup),
		cmocka_unit_test_setup(test_identity, test_setup),
		cmocka_unit_test_setup(test_values_frozen, test_setup),
		cmocka_unit_test_setup(test_time_moves, test_setup),
		cmocka_unit_test_setup(test_processes_and_absent_values, test_setup),
		cmocka_unit_test_setup(test_gpm, test_setup),
		cmocka_unit_test_setup(test_hang, test_setup),
		cmocka_unit_test_setup(test_lost, test_setup),
		cmocka_unit_test_setup(test_notsup, test_setup),
		cmocka_unit_test_setup(test_xid, test_setup),
		cmocka_unit_test_setup(test_init_failures, test_setup),
		cmocka_unit_test_setup(test_call_counts, test_setup),
		cmocka_unit_test_setup(test_dcgm_counters, test_setup),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
