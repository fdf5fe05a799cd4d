/* Silent-corruption screening; see screen.h and docs/internals/bench.md.
 *
 * Why hand-written kernels and not cuBLASLt: cuBLASLt picks its algorithm
 * by heuristic per driver, library version and free workspace, and its
 * split-K and atomics-based reductions may sum in a different order from
 * one call to the next; NVIDIA documents bitwise reproducibility only for
 * one algorithm on one architecture and version, with atomics off. A
 * digest that may move by itself catches nothing. The kernels here sum in
 * one fixed order (k = 0..n-1, a fused multiply-add per step), so the
 * result is defined bit for bit and a CPU doing the same steps gets the
 * same bits. cuBLASLt would be worth using for a screening of the tensor
 * cores' paths (bf16, fp16, tf32), pinned to one algorithm
 * (CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK none, a fixed algo id, no
 * split-K), and compared only against the same card and its peers on the
 * same library version: not done yet. The tensor cores are screened by
 * hand-written mma.sync kernels instead (screen_mma.ptx: bf16, fp16 and
 * tf32 inputs, fp32 accumulation, k in a fixed order), on inputs chosen so
 * that no step rounds: the order inside one mma.sync is not documented,
 * and exact arithmetic makes it not matter, so a CPU summing in k order
 * gets the same bits. */
#include "bench/screen.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "bench_ptx.h"
#include "screen_mma_ptx.h"
#include "common/clock.h"
#include "common/hash.h"
#include "bench/cuda_lib.h"
#include "nvml/nvml_shim.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

#define MIB (1024.0 * 1024.0)
#define CPU_TILES 8                 /* tiles of each test checked against the CPU */
#define SEED_A 0x5eed0001U
#define SEED_B 0x5eed0002U
#define SEED_SUM 0x5eed0003U

static const char *const test_names[] = {
#define SCREEN_TEST_NAME(id, name) name,
	SCREEN_TESTS(SCREEN_TEST_NAME)
#undef SCREEN_TEST_NAME
};

static void note(struct screen_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct scr {
	const struct screen_opts *o;
	struct screen_result *r;
	char *err;
	size_t errlen;
	struct cuda_lib *cu;
	cu_device_t dev;
	cu_ctx_t ctx;
	bool ctx_retained;
	cu_stream_t stream;
	cu_module_t mod, mod_mma;   /* mod_mma: the tensor-core GEMMs (sm_80 on); 0 when older */
	cu_function_t k_gemm[SCREEN_GEMM_TF32 - SCREEN_GEMM_U32 + 1], k_fill, k_check, k_sum;
	int sm_count;
	/* the test hook: corrupt one element of a test's first repetition */
	int hook_test;
	long hook_tile, hook_elem;
};

#define CU(s, call, what)                                                                     \
	do {                                                                                  \
		cu_result_t cu_r_ = (call);                                                   \
		if (cu_r_ != CU_ABI_SUCCESS) {                                                \
			snprintf((s)->err, (s)->errlen, "%s failed: %s", what,                \
				 cuda_lib_strerror((s)->cu, cu_r_));                          \
			return cu_r_ == CU_ABI_ERROR_OUT_OF_MEMORY ? GPULSE_ENOMEM : GPULSE_EVENDOR; \
		}                                                                             \
	} while (0)

/* ---- the arithmetic both sides share ---- */

/* The word gpulse_fill writes at index i with all-ones masks (PTX). */
static uint32_t fmix(uint64_t i, uint32_t seed)
{
	uint32_t h = (uint32_t)i ^ seed ^ ((uint32_t)(i >> 32) * 0x27d4eb2fU);
	h *= 0x9e3779b1U;
	h ^= h >> 16;
	h *= 0x85ebca6bU;
	h ^= h >> 13;
	h *= 0xc2b2ae35U;
	h ^= h >> 16;
	return h;
}


static bool is_mma(int t)
{
	return t >= SCREEN_GEMM_BF16 && t <= SCREEN_GEMM_TF32;
}

/* The tensor-core tests' inputs: integers in [-MMA_MAX, MMA_MAX], so that
 * with n <= 256 every product (< 2^16) and every partial sum (< 2^24)
 * is exact in fp32 whatever order the tensor core sums in; 255 is the
 * most bf16 holds exactly (8 significant bits). Larger n take fewer
 * bits: mma_max(n). */
#define MMA_MAX 255

static int mma_max(uint64_t n)
{
	int m = MMA_MAX;
	while ((uint64_t)m * (uint64_t)m * n >= (1u << 24))
		m /= 2;
	return m;
}

static int mma_value(uint32_t x, int max)
{
	return (int)(x % (uint32_t)(2 * max + 1)) - max;
}

/* v (|v| <= 2047, an integer) as IEEE half and bfloat16 bits. */
static uint16_t half_bits(int v)
{
	if (v == 0)
		return 0;
	uint16_t sign = v < 0 ? 0x8000 : 0;
	unsigned m = (unsigned)(v < 0 ? -v : v);
	int e = 0;
	while ((m >> e) > 1)
		e++;
	return (uint16_t)(sign | (unsigned)(e + 15) << 10 | ((m << (10 - e)) & 0x3ff));
}

static uint16_t bf16_bits(int v)
{
	float f = (float)v;
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16);   /* exact: at most 8 significant bits */
}

static float half_value(uint16_t h)
{
	if ((h & 0x7fff) == 0)
		return 0;
	int e = (h >> 10 & 0x1f) - 15;
	float m = (float)(0x400 | (h & 0x3ff)) / 1024.0f;
	return ldexpf(h & 0x8000 ? -m : m, e);
}

static float bf16_value(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* Bytes of one input element and of one result element. */
static size_t in_size(int t)
{
	return t == SCREEN_GEMM_F64 ? 8 : t == SCREEN_GEMM_BF16 || t == SCREEN_GEMM_F16 ? 2 : 4;
}

/* Input element i of a tensor-core test as a float. */
static float mma_in(int t, const void *m, uint64_t i)
{
	if (t == SCREEN_GEMM_TF32)
		return ((const float *)m)[i];
	uint16_t h = ((const uint16_t *)m)[i];
	return t == SCREEN_GEMM_BF16 ? bf16_value(h) : half_value(h);
}

/* GEMM inputs: every bit of u32; for f32 and f64 a sign and a full
 * mantissa in [1, 2), so that every step rounds; for the tensor-core
 * tests small integers (mma_max). */
static void gemm_inputs(int t, void *a, void *b, uint64_t n)
{
	int max = mma_max(n);
	for (uint64_t i = 0; i < n * n; i++) {
		uint32_t x = fmix(i, SEED_A), y = fmix(i, SEED_B);
		if (is_mma(t)) {
			int va = mma_value(x, max), vb = mma_value(y, max);
			if (t == SCREEN_GEMM_TF32) {
				((float *)a)[i] = (float)va;
				((float *)b)[i] = (float)vb;
			} else if (t == SCREEN_GEMM_BF16) {
				((uint16_t *)a)[i] = bf16_bits(va);
				((uint16_t *)b)[i] = bf16_bits(vb);
			} else {
				((uint16_t *)a)[i] = half_bits(va);
				((uint16_t *)b)[i] = half_bits(vb);
			}
		} else if (t == SCREEN_GEMM_U32) {
			((uint32_t *)a)[i] = x;
			((uint32_t *)b)[i] = y;
		} else if (t == SCREEN_GEMM_F32) {
			uint32_t fa = (x & 0x807fffffU) | 0x3f800000U, fb = (y & 0x807fffffU) | 0x3f800000U;
			memcpy((float *)a + i, &fa, 4);
			memcpy((float *)b + i, &fb, 4);
		} else {
			uint64_t da = ((uint64_t)((x & 0x800fffffU) | 0x3ff00000U) << 32) | fmix(i, ~SEED_A);
			uint64_t db = ((uint64_t)((y & 0x800fffffU) | 0x3ff00000U) << 32) | fmix(i, ~SEED_B);
			memcpy((double *)a + i, &da, 8);
			memcpy((double *)b + i, &db, 8);
		}
	}
}

/* Bytes of one element of the result C. */
static size_t elem_size(int t)
{
	return t == SCREEN_GEMM_F64 ? 8 : 4;
}

/* Element (row, col) of A x B as the kernel computes it. */
static void gemm_cpu(int t, const void *a, const void *b, uint64_t n, uint64_t row, uint64_t col,
		     void *out)
{
	if (t == SCREEN_GEMM_U32) {
		uint32_t acc = 0;
		for (uint64_t k = 0; k < n; k++)
			acc += ((const uint32_t *)a)[row * n + k] * ((const uint32_t *)b)[k * n + col];
		memcpy(out, &acc, 4);
	} else if (t == SCREEN_GEMM_F32) {
		float acc = 0;
		for (uint64_t k = 0; k < n; k++)
			acc = fmaf(((const float *)a)[row * n + k], ((const float *)b)[k * n + col], acc);
		memcpy(out, &acc, 4);
	} else if (is_mma(t)) {
		/* fp32 accumulation in k order, as the kernel steps (exact). */
		float acc = 0;
		for (uint64_t k = 0; k < n; k++)
			acc = fmaf(mma_in(t, a, row * n + k), mma_in(t, b, k * n + col), acc);
		memcpy(out, &acc, 4);
	} else {
		double acc = 0;
		for (uint64_t k = 0; k < n; k++)
			acc = fma(((const double *)a)[row * n + k], ((const double *)b)[k * n + col], acc);
		memcpy(out, &acc, 8);
	}
}

static double as_number(int t, const void *p)
{
	if (t == SCREEN_GEMM_U32) {
		uint32_t v;
		memcpy(&v, p, 4);
		return v;
	}
	if (t != SCREEN_GEMM_F64) {   /* f32, and the tensor-core tests' fp32 results */
		float v;
		memcpy(&v, p, 4);
		return v;
	}
	double v;
	memcpy(&v, p, 8);
	return v;
}

/* The digest of GEMM tile `tile` of C (n x n, row-major). */
static uint64_t tile_digest(const unsigned char *c, uint64_t n, size_t es, size_t tile)
{
	uint64_t per = n / SCREEN_GEMM_TILE, r0 = tile / per * SCREEN_GEMM_TILE,
		 c0 = tile % per * SCREEN_GEMM_TILE;
	uint64_t h = FNV1A64_OFFSET;
	for (uint64_t r = r0; r < r0 + SCREEN_GEMM_TILE; r++)
		h = fnv1a64_add(h, c + (r * n + c0) * es, SCREEN_GEMM_TILE * es);
	return h;
}

static uint64_t digest_of(const uint64_t *d, size_t n)
{
	return fnv1a64_add(FNV1A64_OFFSET, d, n * sizeof *d);
}

/* The CPU-checked tiles: the first, the last and CPU_TILES - 2 spread
 * evenly between (all of them when there are fewer). */
static size_t cpu_tile(size_t k, size_t ntiles, size_t nk)
{
	if (nk <= 1)
		return 0;
	return k * (ntiles - 1) / (nk - 1);
}

/* ---- mismatches ---- */

static struct screen_mismatch *add_mm(struct screen_result *r)
{
	if (r->nmm == r->capmm) {
		r->capmm = r->capmm ? 2 * r->capmm : 8;
		r->mm = xrealloc(r->mm, r->capmm * sizeof *r->mm);
	}
	struct screen_mismatch *m = &r->mm[r->nmm++];
	memset(m, 0, sizeof *m);
	m->at_row = m->at_col = -1;
	return m;
}

void screen_mismatch_text(const struct screen_mismatch *m, char *out, size_t len)
{
	char where[96] = "";
	bool gemm = strncmp(m->test, "gemm", 4) == 0;
	if (gemm && m->at_row >= 0)
		snprintf(where, sizeof where, " (first at (%ld,%ld): got %.17g want %.17g)", m->at_row,
			 m->at_col, m->got, m->want);
	else if (!gemm && m->at_col >= 0)
		snprintf(where, sizeof where, " (first at word %ld: got %.0f want %.0f)", m->at_col,
			 m->got, m->want);
	const char *against = strcmp(m->basis, "cpu") == 0      ? "the CPU's"
			      : strcmp(m->basis, "repeat") == 0   ? "the first repetition's"
			      : strcmp(m->basis, "pattern") == 0  ? "the pattern written"
			      : strcmp(m->basis, "reference") == 0 ? "this card's reference"
								   : "a peer's";
	if (strcmp(m->basis, "pattern") == 0)
		snprintf(out, len, "%s tile %ld: %" PRIu64 " of %" PRIu64 " words differ from %s%s%s",
			 m->test, m->tile, m->elements, m->of, against, m->detail[0] ? "; " : "",
			 m->detail);
	else if (m->elements > 0)
		snprintf(out, len, "%s tile %ld: %" PRIu64 " of %" PRIu64 " elements differ from %s, by "
			 "up to %.6g%s%s%s", m->test, m->tile, m->elements, m->of, against, m->max_diff,
			 where, m->detail[0] ? "; " : "", m->detail);
	else
		snprintf(out, len, "%s tile %ld: its digest differs from %s%s%s", m->test, m->tile,
			 against, m->detail[0] ? " " : "", m->detail);
}

/* Compare tile `tile` of got and want element by element into a mismatch
 * (when any differ). */
static void compare_tile(struct screen_result *r, int t, const char *basis, const unsigned char *got,
			 const unsigned char *want, uint64_t n, size_t tile, bool want_is_tile)
{
	size_t es = elem_size(t);
	uint64_t per = n / SCREEN_GEMM_TILE, r0 = tile / per * SCREEN_GEMM_TILE,
		 c0 = tile % per * SCREEN_GEMM_TILE;
	struct screen_mismatch m = {.at_row = -1, .at_col = -1};
	for (uint64_t i = 0; i < SCREEN_GEMM_TILE; i++) {
		for (uint64_t j = 0; j < SCREEN_GEMM_TILE; j++) {
			const unsigned char *g = got + ((r0 + i) * n + c0 + j) * es;
			const unsigned char *w = want_is_tile ? want + (i * SCREEN_GEMM_TILE + j) * es
							      : want + ((r0 + i) * n + c0 + j) * es;
			if (memcmp(g, w, es) == 0)
				continue;
			double gv = as_number(t, g), wv = as_number(t, w);
			double d = fabs(gv - wv);
			if (isnan(d))
				d = INFINITY;
			if (m.elements++ == 0) {
				m.at_row = (long)(r0 + i);
				m.at_col = (long)(c0 + j);
				m.got = gv;
				m.want = wv;
			}
			if (d > m.max_diff)
				m.max_diff = d;
		}
	}
	if (!m.elements)
		return;
	struct screen_mismatch *x = add_mm(r);
	*x = m;
	str_copy(x->test, sizeof x->test, test_names[t]);
	str_copy(x->basis, sizeof x->basis, basis);
	x->tile = (long)tile;
	x->of = SCREEN_GEMM_TILE * SCREEN_GEMM_TILE;
}

/* ---- the device ---- */

static bool stopped(const struct scr *s)
{
	return s->o->stop && *s->o->stop;
}

static unsigned grid_1d(const struct scr *s)
{
	return (unsigned)(s->sm_count > 0 ? s->sm_count : 80) * 8;
}

static void uuid_text(const struct cu_uuid *u, char *out, size_t len)
{
	const unsigned char *b = (const unsigned char *)u->bytes;
	snprintf(out, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

static int identify(struct scr *s)
{
	struct nvml_lib *nv = NULL;
	int rc = nvml_lib_open(&nv, s->o->nvml_path ? s->o->nvml_path : getenv("GPULSE_NVML_LIBRARY"),
			       s->err, s->errlen);
	if (rc)
		return rc;
	nvml_device_t dev;
	if (NVML_CALL(nv, device_get_handle_by_index, (unsigned)s->o->gpu, &dev) != 0) {
		snprintf(s->err, s->errlen, "there is no GPU %d", s->o->gpu);
		nvml_lib_close(nv);
		return GPULSE_ENOENT;
	}
	if (nv->device_get_uuid)
		NVML_CALL(nv, device_get_uuid, dev, s->r->uuid, sizeof s->r->uuid);
	if (nv->device_get_name)
		NVML_CALL(nv, device_get_name, dev, s->r->name, sizeof s->r->name);
	if (nv->system_get_driver_version)
		NVML_CALL(nv, system_get_driver_version, s->r->driver, sizeof s->r->driver);
	nvml_lib_close(nv);
	return 0;
}

static int open_device(struct scr *s)
{
	int rc = cuda_lib_open(&s->cu, s->o->cuda_path, s->err, s->errlen);
	if (rc)
		return rc;
	int v = 0;
	if (s->cu->driver_get_version(&v) == CU_ABI_SUCCESS)
		s->r->cuda_driver_version = v;
	int count = 0;
	CU(s, s->cu->device_get_count(&count), "cuDeviceGetCount");
	bool found = false;
	for (int i = 0; i < count && !found; i++) {
		struct cu_uuid u;
		char text[80];
		if (s->cu->device_get(&s->dev, i) || s->cu->device_get_uuid(&u, s->dev))
			continue;
		uuid_text(&u, text, sizeof text);
		found = strcmp(text, s->r->uuid) == 0;
	}
	if (!found) {
		snprintf(s->err, s->errlen, "GPU %d (%s) is not among the %d GPUs CUDA sees "
			 "(CUDA_VISIBLE_DEVICES?)", s->o->gpu, s->r->uuid, count);
		return GPULSE_ENOENT;
	}
	s->cu->device_get_attribute(&s->sm_count, CU_ABI_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
				    s->dev);
	CU(s, s->cu->primary_ctx_retain(&s->ctx, s->dev), "cuDevicePrimaryCtxRetain");
	s->ctx_retained = true;
	CU(s, s->cu->ctx_set_current(s->ctx), "cuCtxSetCurrent");
	CU(s, s->cu->stream_create(&s->stream, CU_ABI_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU(s, s->cu->module_load_data(&s->mod, bench_ptx),
	   "loading the screening kernels (cuModuleLoadData)");
	for (int t = SCREEN_GEMM_U32; t <= SCREEN_GEMM_F64; t++) {
		char fn[64];
		snprintf(fn, sizeof fn, "gpulse_screen_%s", test_names[t]);
		CU(s, s->cu->module_get_function(&s->k_gemm[t - SCREEN_GEMM_U32], s->mod, fn),
		   "cuModuleGetFunction");
	}
	/* The tensor-core GEMMs need mma.sync's bf16/tf32 shapes: compute
	 * capability 8.0 on. An older card runs the rest and says so. */
	int major = 0;
	s->cu->device_get_attribute(&major, CU_ABI_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->dev);
	if (major >= 8) {
		CU(s, s->cu->module_load_data(&s->mod_mma, screen_mma_ptx),
		   "loading the tensor-core screening kernels (cuModuleLoadData)");
		for (int t = SCREEN_GEMM_BF16; t <= SCREEN_GEMM_TF32; t++) {
			char fn[64];
			snprintf(fn, sizeof fn, "gpulse_screen_%s", test_names[t]);
			CU(s, s->cu->module_get_function(&s->k_gemm[t - SCREEN_GEMM_U32], s->mod_mma, fn),
			   "cuModuleGetFunction");
		}
	}
	CU(s, s->cu->module_get_function(&s->k_fill, s->mod, "gpulse_fill"), "cuModuleGetFunction");
	CU(s, s->cu->module_get_function(&s->k_check, s->mod, "gpulse_screen_check"),
	   "cuModuleGetFunction");
	CU(s, s->cu->module_get_function(&s->k_sum, s->mod, "gpulse_screen_sum"),
	   "cuModuleGetFunction");
	return 0;
}

static void close_device(struct scr *s)
{
	if (!s->cu)
		return;
	if (s->ctx_retained) {
		s->cu->ctx_synchronize();
		if (s->mod)
			s->cu->module_unload(s->mod);
		if (s->mod_mma)
			s->cu->module_unload(s->mod_mma);
		if (s->stream)
			s->cu->stream_destroy(s->stream);
		s->cu->primary_ctx_release(s->dev);
	}
	cuda_lib_close(s->cu);
}

static int dalloc(struct scr *s, cu_deviceptr_t *p, size_t bytes, const char *what)
{
	cu_result_t rc = s->cu->mem_alloc(p, bytes);
	if (rc != CU_ABI_SUCCESS) {
		*p = 0;
		snprintf(s->err, s->errlen, "cannot allocate %.0f MiB of device memory for %s (%s)",
			 (double)bytes / MIB, what, cuda_lib_strerror(s->cu, rc));
		return rc == CU_ABI_ERROR_OUT_OF_MEMORY ? GPULSE_ENOMEM : GPULSE_EVENDOR;
	}
	return 0;
}

static void dfree(struct scr *s, cu_deviceptr_t *p)
{
	if (*p)
		s->cu->mem_free(*p);
	*p = 0;
}

static int sync_stream(struct scr *s, const char *what)
{
	CU(s, s->cu->stream_synchronize(s->stream), what);
	return 0;
}

/* The test hook (GPULSE_SCREEN_CORRUPT=TEST[:TILE[:ELEMENT]]): flip the
 * lowest bit of one element of the test's first repetition, after it is
 * read back, to show that every path reports it. For tests only; the
 * result says it was used. */
static void hook_parse(struct scr *s)
{
	s->hook_test = -1;
	const char *h = getenv(SCREEN_TEST_HOOK_ENV);
	if (!h || !*h)
		return;
	char name[32];
	long tile = 0, elem = 0;
	if (sscanf(h, "%31[^:]:%ld:%ld", name, &tile, &elem) < 1)
		return;
	for (int t = 0; t < SCREEN_TEST_COUNT; t++)
		if (strcmp(name, test_names[t]) == 0)
			s->hook_test = t;
	s->hook_tile = tile;
	s->hook_elem = elem;
	s->r->hook = s->hook_test >= 0;
}

/* ---- the tests ---- */

static int gemm_test(struct scr *s, int t, uint64_t n, int reps)
{
	struct screen_test *st = &s->r->test[t];
	size_t es = elem_size(t), bytes = (size_t)(n * n) * es, in_bytes = (size_t)(n * n) * in_size(t);
	int64_t t0 = clock_mono_ns();
	unsigned char *a = xmalloc(in_bytes), *b = xmalloc(in_bytes), *c0 = xmalloc(bytes),
		      *c = xmalloc(bytes);
	cu_deviceptr_t da = 0, db = 0, dc = 0;
	int rc;
	gemm_inputs(t, a, b, n);
	st->size = n;
	st->tile = SCREEN_GEMM_TILE;
	st->ntiles = (size_t)((n / SCREEN_GEMM_TILE) * (n / SCREEN_GEMM_TILE));
	st->tile_digest = xcalloc(st->ntiles, sizeof *st->tile_digest);
	uint64_t *dg = xcalloc(st->ntiles, sizeof *dg);
	if ((rc = dalloc(s, &da, in_bytes, "a screening matrix")) ||
	    (rc = dalloc(s, &db, in_bytes, "a screening matrix")) ||
	    (rc = dalloc(s, &dc, bytes, "a screening matrix")))
		goto out;
	if (s->cu->memcpy_htod_async(da, a, in_bytes, s->stream) ||
	    s->cu->memcpy_htod_async(db, b, in_bytes, s->stream)) {
		snprintf(s->err, s->errlen, "copying the screening inputs (cuMemcpyHtoDAsync) failed");
		rc = GPULSE_EVENDOR;
		goto out;
	}
	unsigned n32 = (unsigned)n;
	void *params[] = {&da, &db, &dc, &n32};
	for (int rep = 0; rep < reps && !stopped(s); rep++) {
		unsigned g = (unsigned)((n + 15) / 16);
		/* The tensor-core kernels: one warp per 16 x 8 tile of C. */
		cu_result_t cr = is_mma(t) ? s->cu->launch_kernel(s->k_gemm[t - SCREEN_GEMM_U32],
								 (unsigned)(n / 8), (unsigned)(n / 16), 1,
								 32, 1, 1, 0, s->stream, params, NULL)
					   : s->cu->launch_kernel(s->k_gemm[t - SCREEN_GEMM_U32], g, g, 1,
								 16, 16, 1, 0, s->stream, params, NULL);
		if (cr == CU_ABI_SUCCESS)
			cr = s->cu->memcpy_dtoh_async(rep ? c : c0, dc, bytes, s->stream);
		if (cr != CU_ABI_SUCCESS || (rc = sync_stream(s, "a screening GEMM (cuStreamSynchronize)"))) {
			if (cr != CU_ABI_SUCCESS)
				snprintf(s->err, s->errlen, "a screening GEMM failed: %s",
					 cuda_lib_strerror(s->cu, cr));
			rc = rc ? rc : GPULSE_EVENDOR;
			goto out;
		}
		unsigned char *cur = rep ? c : c0;
		if (rep == 0 && s->hook_test == t && s->hook_tile >= 0 &&
		    (size_t)s->hook_tile < st->ntiles && s->hook_elem >= 0 &&
		    s->hook_elem < SCREEN_GEMM_TILE * SCREEN_GEMM_TILE) {
			uint64_t per = n / SCREEN_GEMM_TILE;
			uint64_t row = (uint64_t)s->hook_tile / per * SCREEN_GEMM_TILE +
				       (uint64_t)s->hook_elem / SCREEN_GEMM_TILE;
			uint64_t col = (uint64_t)s->hook_tile % per * SCREEN_GEMM_TILE +
				       (uint64_t)s->hook_elem % SCREEN_GEMM_TILE;
			cur[(row * n + col) * es] ^= 1;
		}
		for (size_t k = 0; k < st->ntiles; k++)
			dg[k] = tile_digest(cur, n, es, k);
		if (rep == 0) {
			memcpy(st->tile_digest, dg, st->ntiles * sizeof *dg);
		} else {
			for (size_t k = 0; k < st->ntiles; k++)
				if (dg[k] != st->tile_digest[k]) {
					size_t before = s->r->nmm;
					compare_tile(s->r, t, "repeat", c, c0, n, k, false);
					if (s->r->nmm > before)
						snprintf(s->r->mm[before].detail, sizeof s->r->mm[before].detail,
							 "repetition %d of %d", rep + 1, reps);
				}
		}
		st->reps = rep + 1;
	}
	st->digest = digest_of(st->tile_digest, st->ntiles);
	/* The CPU, the same way, on a few tiles of the first repetition. */
	size_t nk = st->ntiles < CPU_TILES ? st->ntiles : CPU_TILES;
	unsigned char *want = xmalloc(SCREEN_GEMM_TILE * SCREEN_GEMM_TILE * es);
	uint64_t per = n / SCREEN_GEMM_TILE;
	for (size_t k = 0; k < nk && !stopped(s); k++) {
		size_t tile = cpu_tile(k, st->ntiles, nk);
		uint64_t r0 = tile / per * SCREEN_GEMM_TILE, col0 = tile % per * SCREEN_GEMM_TILE;
		for (uint64_t i = 0; i < SCREEN_GEMM_TILE; i++)
			for (uint64_t j = 0; j < SCREEN_GEMM_TILE; j++)
				gemm_cpu(t, a, b, n, r0 + i, col0 + j,
					 want + (i * SCREEN_GEMM_TILE + j) * es);
		compare_tile(s->r, t, "cpu", c0, want, n, tile, true);
		st->cpu_tiles++;
	}
	free(want);
	rc = stopped(s) ? GPULSE_ECANCELED : 0;
	if (rc)
		snprintf(s->err, s->errlen, "stopped");
out:
	dfree(s, &da);
	dfree(s, &db);
	dfree(s, &dc);
	free(a);
	free(b);
	free(c0);
	free(c);
	free(dg);
	st->seconds = (double)(clock_mono_ns() - t0) / 1e9;
	return rc;
}

static int launch1(struct scr *s, cu_function_t f, void **params, const char *what)
{
	CU(s, s->cu->launch_kernel(f, grid_1d(s), 1, 1, 256, 1, 1, 0, s->stream, params, NULL), what);
	return 0;
}

static int fill_words(struct scr *s, cu_deviceptr_t p, unsigned long long nwords, unsigned seed)
{
	unsigned a0 = 0xffffffffU, o0 = 0, a1 = 0xffffffffU, o1 = 0;
	void *params[] = {&p, &nwords, &seed, &a0, &o0, &a1, &o1};
	return launch1(s, s->k_fill, params, "the screening fill (cuLaunchKernel)");
}

/* The reduction: per-tile sums of a fixed region filled with a fixed
 * seed, so that its digest compares across runs and cards. */
static int sum_test(struct scr *s, uint64_t words, uint64_t tile_words, int reps)
{
	struct screen_test *st = &s->r->test[SCREEN_SUM];
	int64_t t0 = clock_mono_ns();
	st->size = words;
	st->tile = tile_words;
	st->ntiles = (size_t)(words / tile_words);
	st->tile_digest = xcalloc(st->ntiles, sizeof *st->tile_digest);
	uint64_t *sums = xcalloc(st->ntiles, sizeof *sums), *first = xcalloc(st->ntiles, sizeof *first);
	cu_deviceptr_t p = 0, dsum = 0;
	int rc;
	if ((rc = dalloc(s, &p, words * 4, "the screening reduction")) ||
	    (rc = dalloc(s, &dsum, st->ntiles * 8, "the screening reduction's sums")))
		goto out;
	if ((rc = fill_words(s, p, words, SEED_SUM)))
		goto out;
	unsigned long long nchunks = words / 256, tw = tile_words;
	void *params[] = {&p, &nchunks, &tw, &dsum};
	for (int rep = 0; rep < reps && !stopped(s); rep++) {
		memset(sums, 0, st->ntiles * 8);
		if (s->cu->memcpy_htod_async(dsum, sums, st->ntiles * 8, s->stream) ||
		    (rc = launch1(s, s->k_sum, params, "the screening reduction (cuLaunchKernel)")) ||
		    s->cu->memcpy_dtoh_async(sums, dsum, st->ntiles * 8, s->stream) ||
		    (rc = sync_stream(s, "the screening reduction (cuStreamSynchronize)"))) {
			if (!rc)
				snprintf(s->err, s->errlen, "the screening reduction's copies failed");
			rc = rc ? rc : GPULSE_EVENDOR;
			goto out;
		}
		if (rep == 0 && s->hook_test == SCREEN_SUM && s->hook_tile >= 0 &&
		    (size_t)s->hook_tile < st->ntiles)
			sums[s->hook_tile] ^= 1;
		for (size_t k = 0; k < st->ntiles; k++) {
			uint64_t d = fnv1a64_add(FNV1A64_OFFSET, &sums[k], 8);
			if (rep == 0) {
				st->tile_digest[k] = d;
				first[k] = sums[k];
			} else if (d != st->tile_digest[k]) {
				struct screen_mismatch *m = add_mm(s->r);
				str_copy(m->test, sizeof m->test, test_names[SCREEN_SUM]);
				str_copy(m->basis, sizeof m->basis, "repeat");
				m->tile = (long)k;
				m->elements = 1;
				m->of = 1;
				m->got = (double)sums[k];
				m->want = (double)first[k];
				m->max_diff = fabs(m->got - m->want);
				snprintf(m->detail, sizeof m->detail, "repetition %d of %d", rep + 1, reps);
			}
		}
		st->reps = rep + 1;
	}
	st->digest = digest_of(st->tile_digest, st->ntiles);
	size_t nk = st->ntiles < 4 ? st->ntiles : 4;
	for (size_t k = 0; k < nk && !stopped(s); k++) {
		size_t tile = cpu_tile(k, st->ntiles, nk);
		uint64_t want = 0;
		for (uint64_t i = tile * tile_words; i < (tile + 1) * tile_words; i++)
			want += fmix(i, SEED_SUM);
		st->cpu_tiles++;
		if (want == first[tile])
			continue;
		struct screen_mismatch *m = add_mm(s->r);
		str_copy(m->test, sizeof m->test, test_names[SCREEN_SUM]);
		str_copy(m->basis, sizeof m->basis, "cpu");
		m->tile = (long)tile;
		m->elements = 1;
		m->of = 1;
		m->got = (double)first[tile];
		m->want = (double)want;
		m->max_diff = fabs(m->got - m->want);
	}
out:
	dfree(s, &p);
	dfree(s, &dsum);
	free(sums);
	free(first);
	st->seconds = (double)(clock_mono_ns() - t0) / 1e9;
	return rc;
}

/* The memory pattern: `share` of the free memory in tiles of tile_words,
 * written and checked on the device with `passes` seeds. */
static int memory_test(struct scr *s, double share, uint64_t max_bytes, uint64_t tile_words,
		       int passes)
{
	struct screen_test *st = &s->r->test[SCREEN_MEMORY];
	int64_t t0 = clock_mono_ns();
	size_t free_b = 0, total_b = 0;
	CU(s, s->cu->mem_get_info(&free_b, &total_b), "cuMemGetInfo");
	uint64_t bytes = (uint64_t)((double)free_b * share);
	if (bytes > max_bytes)
		bytes = max_bytes;
	uint64_t tile_bytes = tile_words * 4;
	bytes = bytes / tile_bytes * tile_bytes;
	st->tile = tile_words;
	if (bytes == 0)
		return 0;
	st->size = bytes / 4;
	st->ntiles = (size_t)(bytes / tile_bytes);
	cu_deviceptr_t p = 0, dbad = 0;
	uint32_t *bad = xcalloc(st->ntiles, sizeof *bad);
	int rc = dalloc(s, &p, bytes, "the screening memory pattern");
	if (!rc)
		rc = dalloc(s, &dbad, st->ntiles * 4, "the memory pattern's counts");
	for (int pass = 0; !rc && pass < passes && !stopped(s); pass++) {
		unsigned seed = 0x9a77e000U + (unsigned)pass;
		unsigned long long nw = bytes / 4, tw = tile_words;
		void *params[] = {&p, &nw, &seed, &tw, &dbad};
		memset(bad, 0, st->ntiles * 4);
		if (s->cu->memcpy_htod_async(dbad, bad, st->ntiles * 4, s->stream) ||
		    (rc = fill_words(s, p, nw, seed)) ||
		    (rc = launch1(s, s->k_check, params, "the memory check (cuLaunchKernel)")) ||
		    s->cu->memcpy_dtoh_async(bad, dbad, st->ntiles * 4, s->stream) ||
		    (rc = sync_stream(s, "the memory pattern (cuStreamSynchronize)"))) {
			if (!rc)
				snprintf(s->err, s->errlen, "the memory pattern's copies failed");
			rc = rc ? rc : GPULSE_EVENDOR;
			break;
		}
		if (pass == 0 && s->hook_test == SCREEN_MEMORY && s->hook_tile >= 0 &&
		    (size_t)s->hook_tile < st->ntiles)
			bad[s->hook_tile]++;
		for (size_t k = 0; k < st->ntiles; k++) {
			if (!bad[k])
				continue;
			struct screen_mismatch *m = add_mm(s->r);
			str_copy(m->test, sizeof m->test, test_names[SCREEN_MEMORY]);
			str_copy(m->basis, sizeof m->basis, "pattern");
			m->tile = (long)k;
			m->elements = bad[k];
			m->of = tile_words;
			snprintf(m->detail, sizeof m->detail, "bytes %" PRIu64 "-%" PRIu64 " of the %.0f MiB "
				 "tested, pass %d", (uint64_t)k * tile_bytes, (uint64_t)(k + 1) * tile_bytes - 1,
				 (double)bytes / MIB, pass + 1);
		}
		st->reps = pass + 1;
	}
	s->r->memory_bytes = bytes;
	dfree(s, &p);
	dfree(s, &dbad);
	free(bad);
	st->seconds = (double)(clock_mono_ns() - t0) / 1e9;
	return rc;
}

static void kernels_hash(char *out, size_t len)
{
	uint64_t h = fnv1a64_add(FNV1A64_OFFSET, bench_ptx, strlen(bench_ptx));
	snprintf(out, len, "%016" PRIx64, fnv1a64_add(h, screen_mma_ptx, strlen(screen_mma_ptx)));
}

int screen_run(const struct screen_opts *o, struct screen_result *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	struct scr s = {.o = o, .r = r, .err = err, .errlen = errlen};
	int64_t t0 = clock_mono_ns();
	r->t_ms = clock_wall_ns() / 1000000;
	str_copy(r->mode, sizeof r->mode, o->full ? "full" : "quick");
	const char *ts = getenv(SCREEN_TEST_SIZES_ENV);
	r->test_sizes = ts && *ts && strcmp(ts, "0") != 0;
	for (int t = 0; t < SCREEN_TEST_COUNT; t++)
		str_copy(r->test[t].name, sizeof r->test[t].name, test_names[t]);
	kernels_hash(r->kernels, sizeof r->kernels);
	hook_parse(&s);
	int rc = identify(&s);
	if (!rc)
		rc = open_device(&s);
	/* Sizes: quick ~ a few seconds of kernels on an H100 and a second of
	 * CPU reference; full ~ minutes (docs/PERFORMANCE.md has the times). */
	uint64_t n = r->test_sizes ? 64 : o->full ? 4096 : 1024;
	int reps = o->full ? 5 : 3;
	uint64_t sum_words = r->test_sizes ? (1u << 20) : o->full ? (1ULL << 28) : (1ULL << 26);
	uint64_t sum_tile = r->test_sizes ? (1u << 16) : (1ULL << 22);
	double share = o->full ? 0.85 : 0.25;
	uint64_t mem_max = r->test_sizes ? (8ULL << 20) : o->full ? (1ULL << 50) : (16ULL << 30);
	uint64_t mem_tile = r->test_sizes ? (1u << 18) : (1ULL << 26);
	for (int t = SCREEN_GEMM_U32; !rc && t <= SCREEN_GEMM_TF32; t++) {
		if (is_mma(t) && !s.mod_mma) {
			note(r, "%s not run: the tensor-core GEMMs need compute capability 8.0 or later",
			     test_names[t]);
			continue;
		}
		rc = gemm_test(&s, t, n, reps);
	}
	if (!rc)
		rc = sum_test(&s, sum_words, sum_tile, reps);
	if (!rc)
		rc = memory_test(&s, share, mem_max, mem_tile, o->full ? 4 : 1);
	close_device(&s);
	r->seconds = (double)(clock_mono_ns() - t0) / 1e9;
	return rc;
}

void screen_result_free(struct screen_result *r)
{
	if (!r)
		return;
	for (int t = 0; t < SCREEN_TEST_COUNT; t++)
		free(r->test[t].tile_digest);
	free(r->mm);
	memset(r, 0, sizeof *r);
}

static void note(struct screen_result *r, const char *fmt, ...)
{
	size_t l = strlen(r->notes);
	if (l + 3 >= sizeof r->notes)
		return;
	if (l)
		l += (size_t)snprintf(r->notes + l, sizeof r->notes - l, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->notes + l, sizeof r->notes - l, fmt, ap);
	va_end(ap);
}

size_t screen_compare(struct screen_result *r, const struct screen_result *other, const char *basis)
{
	bool peer = strcmp(basis, "peer") == 0;
	const char *who = peer ? other->uuid : "reference";
	if (peer && strcmp(r->name, other->name) != 0) {
		note(r, "%s not compared: another model (%s)", other->uuid, other->name);
		return 0;
	}
	if (strcmp(r->driver, other->driver) != 0 || strcmp(r->kernels, other->kernels) != 0) {
		note(r, "%s not compared: driver %s, kernels %s (this run: %s, %s)%s", who,
		     other->driver, other->kernels, r->driver, r->kernels,
		     peer ? "" : ": this run starts a new reference");
		return 0;
	}
	size_t differ = 0;
	for (int t = 0; t < SCREEN_TEST_COUNT; t++) {
		const struct screen_test *a = &r->test[t], *b = &other->test[t];
		if (!a->tile_digest || !b->tile_digest || a->size != b->size || a->tile != b->tile ||
		    a->ntiles != b->ntiles)
			continue;
		if (a->digest == b->digest)
			continue;
		for (size_t k = 0; k < a->ntiles; k++) {
			if (a->tile_digest[k] == b->tile_digest[k])
				continue;
			differ++;
			struct screen_mismatch *m = add_mm(r);
			str_copy(m->test, sizeof m->test, a->name);
			str_copy(m->basis, sizeof m->basis, basis);
			m->tile = (long)k;
			snprintf(m->detail, sizeof m->detail, "(%s of %s)", peer ? other->uuid : "the run",
				 peer ? other->driver : "its reference time");
			if (!peer) {
				char when[32];
				time_t secs = (time_t)(other->t_ms / 1000);
				struct tm tmv;
				gmtime_r(&secs, &tmv);
				strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
				snprintf(m->detail, sizeof m->detail, "(the run of %s)", when);
			}
		}
	}
	return differ;
}

/* ---- JSON ---- */

void screen_result_to_json(const struct screen_result *r, struct buf *out)
{
	json_t *o = json_object(), *tests = json_array(), *mms = json_array();
	json_object_set_new(o, "kind", json_string("gpulse-screen"));
	json_object_set_new(o, "t_ms", json_integer(r->t_ms));
	json_object_set_new(o, "mode", json_string(r->mode));
	json_object_set_new(o, "test_sizes", json_boolean(r->test_sizes));
	json_object_set_new(o, "test_hook", json_boolean(r->hook));
	json_object_set_new(o, "uuid", json_string(r->uuid));
	json_object_set_new(o, "name", json_string(r->name));
	json_object_set_new(o, "driver", json_string(r->driver));
	json_object_set_new(o, "cuda_driver_version", json_integer(r->cuda_driver_version));
	json_object_set_new(o, "kernels", json_string(r->kernels));
	json_object_set_new(o, "seconds", json_real(r->seconds));
	json_object_set_new(o, "memory_bytes", json_integer((json_int_t)r->memory_bytes));
	json_object_set_new(o, "passed", json_boolean(r->nmm == 0));
	for (int t = 0; t < SCREEN_TEST_COUNT; t++) {
		const struct screen_test *st = &r->test[t];
		char hex[20];
		json_t *x = json_object(), *tiles = json_array();
		json_object_set_new(x, "name", json_string(st->name));
		json_object_set_new(x, "size", json_integer((json_int_t)st->size));
		json_object_set_new(x, "tile", json_integer((json_int_t)st->tile));
		json_object_set_new(x, "tiles", json_integer((json_int_t)st->ntiles));
		json_object_set_new(x, "reps", json_integer(st->reps));
		json_object_set_new(x, "cpu_tiles", json_integer(st->cpu_tiles));
		json_object_set_new(x, "seconds", json_real(st->seconds));
		snprintf(hex, sizeof hex, "%016" PRIx64, st->digest);
		json_object_set_new(x, "digest", st->tile_digest ? json_string(hex) : json_null());
		for (size_t k = 0; st->tile_digest && k < st->ntiles; k++) {
			snprintf(hex, sizeof hex, "%016" PRIx64, st->tile_digest[k]);
			json_array_append_new(tiles, json_string(hex));
		}
		json_object_set_new(x, "tile_digests", tiles);
		json_array_append_new(tests, x);
	}
	json_object_set_new(o, "tests", tests);
	for (size_t i = 0; i < r->nmm; i++) {
		const struct screen_mismatch *m = &r->mm[i];
		char text[512];
		screen_mismatch_text(m, text, sizeof text);
		json_array_append_new(
			mms, json_pack("{s:s, s:s, s:I, s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:s, s:s}",
				       "test", m->test, "basis", m->basis, "tile", (json_int_t)m->tile,
				       "elements", (json_int_t)m->elements, "of", (json_int_t)m->of,
				       "max_diff", isfinite(m->max_diff) ? m->max_diff : -1.0, "at_row",
				       (json_int_t)m->at_row, "at_col", (json_int_t)m->at_col, "got",
				       isfinite(m->got) ? m->got : 0.0, "want",
				       isfinite(m->want) ? m->want : 0.0, "detail", m->detail, "text",
				       text));
	}
	json_object_set_new(o, "mismatches", mms);
	json_object_set_new(o, "notes", json_string(r->notes));
	char *s = json_dumps(o, JSON_COMPACT);
	if (s)
		buf_puts(out, s);
	free(s);
	json_decref(o);
}

static void jstr(json_t *o, const char *k, char *out, size_t len)
{
	const char *v = json_string_value(json_object_get(o, k));
	str_copy(out, len, v ? v : "");
}

int screen_result_from_json(const char *text, struct screen_result *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	int rc = GPULSE_EINVAL;
	if (!o) {
		snprintf(err, errlen, "not JSON (line %d: %s)", je.line, je.text);
		return rc;
	}
	if (!json_is_object(o) || strcmp(json_string_value(json_object_get(o, "kind")) ?
				 json_string_value(json_object_get(o, "kind")) : "", "gpulse-screen") != 0) {
		snprintf(err, errlen, "not a 'gpulse bench --screen --json' result");
		goto out;
	}
	r->t_ms = json_integer_value(json_object_get(o, "t_ms"));
	jstr(o, "mode", r->mode, sizeof r->mode);
	jstr(o, "uuid", r->uuid, sizeof r->uuid);
	jstr(o, "name", r->name, sizeof r->name);
	jstr(o, "driver", r->driver, sizeof r->driver);
	jstr(o, "kernels", r->kernels, sizeof r->kernels);
	r->test_sizes = json_is_true(json_object_get(o, "test_sizes"));
	size_t i;
	json_t *x;
	json_array_foreach(json_object_get(o, "tests"), i, x) {
		const char *name = json_string_value(json_object_get(x, "name"));
		int t = -1;
		for (int k = 0; name && k < SCREEN_TEST_COUNT; k++)
			if (strcmp(name, test_names[k]) == 0)
				t = k;
		if (t < 0)
			continue;
		struct screen_test *st = &r->test[t];
		str_copy(st->name, sizeof st->name, name);
		st->size = (uint64_t)json_integer_value(json_object_get(x, "size"));
		st->tile = (uint64_t)json_integer_value(json_object_get(x, "tile"));
		json_t *tiles = json_object_get(x, "tile_digests");
		const char *dg = json_string_value(json_object_get(x, "digest"));
		size_t n = json_array_size(tiles);
		if (!dg || n == 0 || n > (1u << 22))
			continue;
		st->ntiles = n;
		st->digest = strtoull(dg, NULL, 16);
		st->tile_digest = xcalloc(n, sizeof *st->tile_digest);
		for (size_t k = 0; k < n; k++) {
			const char *h = json_string_value(json_array_get(tiles, k));
			if (!h) {
				snprintf(err, errlen, "test %s: tile digest %zu is not a string", name, k);
				screen_result_free(r);
				goto out;
			}
			st->tile_digest[k] = strtoull(h, NULL, 16);
		}
	}
	rc = 0;
out:
	json_decref(o);
	return rc;
}
