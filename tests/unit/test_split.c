/* The split of a device's activity across processes (src/attrib/split.c)
 * on synthetic truths: each tenant has a true busy share per kind of work
 * and a true activity per kind while it runs, the device's figure is
 * their sum, and the split, given only what gpulsed would see (kernel
 * time by kind, or NVML's per-process samples), must give each its true
 * part and conserve the device's figure. The truths' intensities differ
 * from the split's priors, so a split that only echoes its priors fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attrib/split.h"
#include "common/status.h"

/* This GPU's truth: what each kind of work does while it runs. Not the
 * priors (0.7/0.01/0.1 tensor, 0.1/0.8/0.3 DRAM). */
static const double true_tensor[SPLIT_KIND_COUNT] = {0.55, 0.0, 0.2};
static const double true_dram[SPLIT_KIND_COUNT] = {0.22, 0.62, 0.45};

struct tenant {
	double busy[SPLIT_KIND_COUNT];  /* true busy share by kind */
	bool library;                   /* kernels reported; else NVML only */
};

#define DT 1.0

/* The device's figures and each tenant's true parts. */
static void truth(const struct tenant *t, size_t n, struct split_device *dev,
		  double part[][SPLIT_METRIC_COUNT])
{
	memset(dev, 0, sizeof *dev);
	dev->interval_s = DT;
	dev->valid = 1u << SPLIT_SM | 1u << SPLIT_TENSOR | 1u << SPLIT_DRAM;
	for (size_t i = 0; i < n; i++) {
		double sm = 0, te = 0, dr = 0;
		for (int k = 0; k < SPLIT_KIND_COUNT; k++) {
			sm += t[i].busy[k];
			te += t[i].busy[k] * true_tensor[k];
			dr += t[i].busy[k] * true_dram[k];
		}
		part[i][SPLIT_SM] = sm * 0.95; /* SMs busy 95% of a busy cycle */
		part[i][SPLIT_TENSOR] = te;
		part[i][SPLIT_DRAM] = dr;
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
			dev->ratio[m] += part[i][m];
	}
}

/* What gpulsed sees of tenant t. NVML's memory share: the time the
 * memory controller was busy for it, which follows its DRAM activity
 * (a kernel streaming at 65% of the peak keeps the controller busy all
 * its time), within its SM time. */
static void evidence(const struct tenant *t, uint32_t pid, struct split_evidence *e)
{
	memset(e, 0, sizeof *e);
	e->pid = pid;
	double busy = 0, dram = 0;
	for (int k = 0; k < SPLIT_KIND_COUNT; k++) {
		busy += t->busy[k];
		dram += t->busy[k] * true_dram[k];
	}
	if (t->library) {
		e->kernels_valid = true;
		for (int k = 0; k < SPLIT_KIND_COUNT; k++)
			e->kernel_s[k] = t->busy[k] * DT;
		e->launches = 1000;
	}
	e->nvml_valid = true;
	e->nvml_sm = busy;
	e->nvml_mem = dram / 0.65 < busy ? dram / 0.65 : busy;
}

static void split(const struct tenant *t, size_t n, struct split_calib *c,
		  struct split_share *out, double part[][SPLIT_METRIC_COUNT],
		  struct split_device *dev)
{
	struct split_evidence ev[8];
	truth(t, n, dev, part);
	for (size_t i = 0; i < n; i++)
		evidence(&t[i], (uint32_t)(100 + i), &ev[i]);
	assert_int_equal(split_apportion(dev, ev, n, c, out), GPULSE_OK);
	/* Conservation, every time. */
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		double sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += out[i].ratio[m];
		assert_true(fabs(sum - dev->ratio[m]) < 1e-9);
	}
}

/* The calibration learns this GPU from intervals that vary: each tenant
 * alone for a while, then together at changing mixes. */
static void learn(struct split_calib *c, const struct tenant *t, size_t n, int rounds)
{
	struct split_share out[8];
	double part[8][SPLIT_METRIC_COUNT];
	struct split_device dev;
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++) {
			struct tenant one = t[i];
			for (int k = 0; k < SPLIT_KIND_COUNT; k++)
				one.busy[k] *= 0.5 + 0.5 * (double)((r + (int)i) % 3) / 2;
			split(&one, 1, c, out, part, &dev);
			split_calib_update(c, &dev, out, 1);
		}
		struct tenant mix[8];
		for (size_t i = 0; i < n; i++) {
			mix[i] = t[i];
			for (int k = 0; k < SPLIT_KIND_COUNT; k++)
				mix[i].busy[k] *= 0.3 + 0.7 * (double)((r * 7 + (int)i * 3) % 5) / 4;
		}
		split(mix, n, c, out, part, &dev);
		split_calib_update(c, &dev, out, n);
	}
}

static void expect_parts(const struct split_share *out, double part[][SPLIT_METRIC_COUNT],
			 size_t n, double tol)
{
	for (size_t i = 0; i < n; i++)
		for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
			if (fabs(out[i].ratio[m] - part[i][m]) > tol)
				fail_msg("tenant %zu %s: %.4f, truth %.4f", i, split_metric_name(m),
					 out[i].ratio[m], part[i][m]);
		}
}

/* Share of the device's figure m that tenant i got. */
static double frac(const struct split_share *out, const struct split_device *dev, size_t i,
		   int m)
{
	return out[i].ratio[m] / dev->ratio[m];
}

static void test_kernel_kinds(void **state)
{
	(void)state;
	assert_int_equal(split_kernel_kind("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas"), SPLIT_KIND_TENSOR);
	assert_int_equal(split_kernel_kind("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn"), SPLIT_KIND_TENSOR);
	assert_int_equal(split_kernel_kind("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)"), SPLIT_KIND_TENSOR);
	assert_int_equal(split_kernel_kind("void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)"), SPLIT_KIND_TENSOR);
	assert_int_equal(split_kernel_kind("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"), SPLIT_KIND_MEMORY);
	assert_int_equal(split_kernel_kind("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()>, unsigned int, float, 4> >"), SPLIT_KIND_MEMORY);
	assert_int_equal(split_kernel_kind("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_T1_"), SPLIT_KIND_MEMORY);
	assert_int_equal(split_kernel_kind("my_custom_kernel"), SPLIT_KIND_OTHER);
	assert_int_equal(split_kernel_kind("other"), SPLIT_KIND_OTHER);
}

/* One process alone: all of every figure is its, whatever its evidence. */
static void test_sole(void **state)
{
	(void)state;
	struct tenant t = {.busy = {0.3, 0.2, 0.1}, .library = true};
	struct split_share out[1];
	double part[1][SPLIT_METRIC_COUNT];
	struct split_device dev;
	split(&t, 1, NULL, out, part, &dev);
	assert_int_equal(out[0].source, SPLIT_SOURCE_SOLE);
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++)
		assert_true(fabs(out[0].ratio[m] - dev.ratio[m]) < 1e-12);
	assert_true(fabs(out[0].busy_s - 0.6) < 1e-12);

	/* Alone with no evidence: its busy time is the GPU's utilization. */
	struct split_evidence none = {.pid = 7};
	dev.busy_valid = true;
	dev.busy = 0.4;
	assert_int_equal(split_apportion(&dev, &none, 1, NULL, out), GPULSE_OK);
	assert_int_equal(out[0].source, SPLIT_SOURCE_SOLE);
	assert_true(fabs(out[0].busy_s - 0.4) < 1e-12);
	assert_true(fabs(out[0].ratio[SPLIT_TENSOR] - dev.ratio[SPLIT_TENSOR]) < 1e-12);
}

/* The scenario with the library in both: A's bf16 GEMMs, B's
 * large elementwise kernels, time-sliced. Priors alone already put the
 * tensor work on A and the bandwidth on B; after calibration each part is
 * within a point of the truth. */
static void test_two_tenants_library(void **state)
{
	(void)state;
	struct tenant t[2] = {{.busy = {0.45, 0.03, 0}, .library = true},
			      {.busy = {0, 0.5, 0}, .library = true}};
	struct split_share out[2];
	double part[2][SPLIT_METRIC_COUNT];
	struct split_device dev;
	split(t, 2, NULL, out, part, &dev);
	assert_int_equal(out[0].source, SPLIT_SOURCE_KERNELS);
	assert_true(frac(out, &dev, 0, SPLIT_TENSOR) >= 0.9);
	assert_true(frac(out, &dev, 1, SPLIT_DRAM) >= 0.6);
	/* SM activity follows GPU time. */
	assert_true(fabs(frac(out, &dev, 0, SPLIT_SM) - 0.48 / 0.98) < 1e-9);
	assert_true(fabs(out[0].busy_s - 0.48) < 1e-12);

	struct split_calib c;
	split_calib_init(&c);
	learn(&c, t, 2, 60);
	split(t, 2, &c, out, part, &dev);
	expect_parts(out, part, 2, 0.01);
	assert_true(frac(out, &dev, 0, SPLIT_TENSOR) >= 0.9);
	assert_true(fabs(frac(out, &dev, 1, SPLIT_DRAM) - part[1][SPLIT_DRAM] / dev.ratio[SPLIT_DRAM]) < 0.01);
}

/* B without the library: NVML's samples only. */
static void test_two_tenants_nvml(void **state)
{
	(void)state;
	struct tenant t[2] = {{.busy = {0.45, 0.03, 0}, .library = true},
			      {.busy = {0, 0.5, 0}, .library = false}};
	struct split_share out[2];
	double part[2][SPLIT_METRIC_COUNT];
	struct split_device dev;
	split(t, 2, NULL, out, part, &dev);
	assert_int_equal(out[0].source, SPLIT_SOURCE_KERNELS);
	assert_int_equal(out[1].source, SPLIT_SOURCE_NVML);
	assert_true(frac(out, &dev, 0, SPLIT_TENSOR) >= 0.9);
	assert_true(frac(out, &dev, 1, SPLIT_DRAM) >= 0.6);

	struct split_calib c;
	split_calib_init(&c);
	learn(&c, t, 2, 60);
	split(t, 2, &c, out, part, &dev);
	expect_parts(out, part, 2, 0.02);
}

/* Three tenants that are never alone: the calibration learns from the
 * mixes alone, and every part ends within two points of the truth. */
static void test_three_tenants(void **state)
{
	(void)state;
	struct tenant t[3] = {{.busy = {0.3, 0.05, 0.02}, .library = true},
			      {.busy = {0, 0.25, 0.05}, .library = true},
			      {.busy = {0.02, 0.02, 0.2}, .library = true}};
	struct split_calib c;
	split_calib_init(&c);
	struct split_share out[3];
	double part[3][SPLIT_METRIC_COUNT];
	struct split_device dev;
	for (int r = 0; r < 400; r++) {
		struct tenant mix[3];
		for (size_t i = 0; i < 3; i++) {
			mix[i] = t[i];
			for (int k = 0; k < SPLIT_KIND_COUNT; k++)
				mix[i].busy[k] *= 0.2 + 0.8 * (double)((r * (3 + (int)i) + k) % 7) / 6;
		}
		split(mix, 3, &c, out, part, &dev);
		split_calib_update(&c, &dev, out, 3);
	}
	split(t, 3, &c, out, part, &dev);
	expect_parts(out, part, 3, 0.02);
	assert_true(fabs(c.theta[SPLIT_TENSOR][SPLIT_CLASS_TENSOR] - true_tensor[SPLIT_KIND_TENSOR]) < 0.03);
	assert_true(fabs(c.theta[SPLIT_DRAM][SPLIT_CLASS_MEMORY] - true_dram[SPLIT_KIND_MEMORY]) < 0.03);
}

/* A process measured alone keeps what it showed then. */
static void test_alone_intensity(void **state)
{
	(void)state;
	struct tenant t[2] = {{.busy = {0, 0, 0.4}, .library = true},
			      {.busy = {0, 0, 0.4}, .library = true}};
	struct split_share out[2];
	double part[2][SPLIT_METRIC_COUNT];
	struct split_device dev;
	truth(t, 2, &dev, part);
	/* Two "other" kernels, one tensor-heavy in truth: only their alone
	 * measurement can tell them apart. */
	dev.ratio[SPLIT_TENSOR] = 0.4 * 0.6 + 0.4 * 0.05;
	struct split_evidence ev[2];
	evidence(&t[0], 1, &ev[0]);
	evidence(&t[1], 2, &ev[1]);
	ev[0].alone_valid = ev[1].alone_valid = true;
	ev[0].alone[SPLIT_TENSOR] = 0.6;
	ev[1].alone[SPLIT_TENSOR] = 0.05;
	ev[0].alone[SPLIT_DRAM] = ev[1].alone[SPLIT_DRAM] = 0.4;
	assert_int_equal(split_apportion(&dev, ev, 2, NULL, out), GPULSE_OK);
	assert_true(fabs(out[0].ratio[SPLIT_TENSOR] - 0.24) < 1e-9);
	assert_true(fabs(out[1].ratio[SPLIT_TENSOR] - 0.02) < 1e-9);
	assert_true(fabs(out[0].intensity[SPLIT_TENSOR] - 0.6) < 1e-9);
}

/* A process that ended: its library's last interval reports no kernel
 * time, and the rest goes to those still running; NVML's old samples of
 * it do not count once the library speaks. */
static void test_process_ended(void **state)
{
	(void)state;
	struct tenant t[2] = {{.busy = {0.5, 0, 0}, .library = true},
			      {.busy = {0, 0, 0}, .library = true}};
	struct split_share out[2];
	double part[2][SPLIT_METRIC_COUNT];
	struct split_device dev;
	truth(t, 2, &dev, part);
	struct split_evidence ev[2];
	evidence(&t[0], 1, &ev[0]);
	evidence(&t[1], 2, &ev[1]);
	ev[1].nvml_sm = 0.3;  /* a stale sample from before it ended */
	assert_int_equal(split_apportion(&dev, ev, 2, NULL, out), GPULSE_OK);
	for (int m = 0; m < SPLIT_METRIC_COUNT; m++) {
		assert_true(fabs(out[0].ratio[m] - dev.ratio[m]) < 1e-12);
		assert_true(out[1].ratio[m] == 0);
	}
	assert_true(out[1].busy_s == 0);
}

/* No evidence for anyone while the device is active: even parts, said
 * to be unexplained; an interval of no length is refused. */
static void test_no_evidence(void **state)
{
	(void)state;
	struct split_device dev = {.interval_s = 1,
				   .valid = 1u << SPLIT_SM | 1u << SPLIT_TENSOR,
				   .ratio = {0.6, 0.3, 0.9}};
	struct split_evidence ev[3] = {{.pid = 1}, {.pid = 2}, {.pid = 3}};
	struct split_share out[3];
	assert_int_equal(split_apportion(&dev, ev, 3, NULL, out), GPULSE_OK);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(out[i].source, SPLIT_SOURCE_NONE);
		assert_true(fabs(out[i].ratio[SPLIT_SM] - 0.2) < 1e-12);
		assert_true(fabs(out[i].ratio[SPLIT_TENSOR] - 0.1) < 1e-12);
		assert_false(out[i].valid & 1u << SPLIT_DRAM);  /* absent stays absent */
	}
	dev.interval_s = 0;
	assert_int_equal(split_apportion(&dev, ev, 3, NULL, out), GPULSE_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_kinds),
		cmocka_unit_test(test_sole),
		cmocka_unit_test(test_two_tenants_library),
		cmocka_unit_test(test_two_tenants_nvml),
		cmocka_unit_test(test_three_tenants),
		cmocka_unit_test(test_alone_intensity),
		cmocka_unit_test(test_process_ended),
		cmocka_unit_test(test_no_evidence),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
