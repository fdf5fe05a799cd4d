/* A stand-in libcublasLt.so.13 for `gpulse bench` without a GPU: the
 * entry points of src/bench/cuda_lib.h's CUBLASLT_FUNCS under their real
 * names, checking their arguments as cuBLASLt documents them (a layout's
 * leading dimension, fp8's transposed A, the matmul's shapes agreeing),
 * and charging each matrix multiply 2mnk / rate to the stream's virtual
 * clock in fake_cuda.c (fakeCudaAdvance, found in the libcuda.so.1 that
 * $GPULSE_CUDA_LIBRARY names).
 *
 * Environment:
 *   GPULSE_FAKE_BENCH_TFLOPS="bf16=700,fp16=690,fp8=1300,tf32=350,fp32=50,fp64=55"
 *       the rates (any subset; these are the defaults)
 *   GPULSE_FAKE_BENCH_NO_ALGO=PREC[,PREC]  the heuristic finds no kernel */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/cuda_abi.h"

#define API __attribute__((visibility("default")))
#define ST_INVALID 7
#define ST_NOT_SUPPORTED CUBLAS_ABI_STATUS_NOT_SUPPORTED

struct culib_handle_st {
	void (*advance)(cu_stream_t, double);
};
struct culib_desc_st {
	int compute, scale;
	int32_t transa, transb;
};
struct culib_layout_st {
	int type;
	uint64_t rows, cols;
	int64_t ld;
};
struct culib_pref_st {
	uint64_t workspace;
};

static const char *precision_of(const struct culib_desc_st *d, const struct culib_layout_st *a)
{
	switch (a->type) {
	case CUDA_ABI_R_16BF: return "bf16";
	case CUDA_ABI_R_16F: return "fp16";
	case CUDA_ABI_R_8F_E4M3: return "fp8";
	case CUDA_ABI_R_64F: return d->compute == CUBLAS_ABI_COMPUTE_64F ? "fp64" : NULL;
	case CUDA_ABI_R_32F:
		return d->compute == CUBLAS_ABI_COMPUTE_32F_FAST_TF32 ? "tf32"
		       : d->compute == CUBLAS_ABI_COMPUTE_32F ? "fp32" : NULL;
	default: return NULL;
	}
}

static double rate_of(const char *prec)
{
	static const struct { const char *p; double tf; } defaults[] = {
		{"bf16", 700}, {"fp16", 690}, {"fp8", 1300}, {"tf32", 350}, {"fp32", 50}, {"fp64", 55}};
	double tf = 0;
	for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
		if (strcmp(defaults[i].p, prec) == 0)
			tf = defaults[i].tf;
	const char *env = getenv("GPULSE_FAKE_BENCH_TFLOPS");
	size_t n = strlen(prec);
	for (const char *s = env; s && *s;) {
		if (strncmp(s, prec, n) == 0 && s[n] == '=')
			tf = atof(s + n + 1);
		s = strchr(s, ',');
		if (s)
			s++;
	}
	return tf * 1e12;
}

static int listed(const char *env, const char *prec)
{
	const char *s = getenv(env);
	size_t n = strlen(prec);
	for (; s && *s;) {
		if (strncmp(s, prec, n) == 0 && (s[n] == ',' || s[n] == '\0'))
			return 1;
		s = strchr(s, ',');
		if (s)
			s++;
	}
	return 0;
}

API size_t cublasLtGetVersion(void);
API size_t cublasLtGetVersion(void)
{
	return 130000;
}

API int cublasLtCreate(culib_handle_t *h);
API int cublasLtCreate(culib_handle_t *h)
{
	const char *cuda = getenv("GPULSE_CUDA_LIBRARY");
	void *lib = dlopen(cuda && *cuda ? cuda : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (!lib)
		return 1; /* CUBLAS_STATUS_NOT_INITIALIZED */
	*h = calloc(1, sizeof **h);
	if (!*h)
		return 3;
	*(void **)&(*h)->advance = dlsym(lib, "fakeCudaAdvance");
	dlclose(lib);
	return (*h)->advance ? CUBLAS_ABI_STATUS_SUCCESS : 1;
}

API int cublasLtDestroy(culib_handle_t h);
API int cublasLtDestroy(culib_handle_t h)
{
	free(h);
	return 0;
}

API int cublasLtMatmulDescCreate(culib_desc_t *d, int compute, int scale);
API int cublasLtMatmulDescCreate(culib_desc_t *d, int compute, int scale)
{
	if (compute != CUBLAS_ABI_COMPUTE_32F && compute != CUBLAS_ABI_COMPUTE_32F_FAST_TF32 &&
	    compute != CUBLAS_ABI_COMPUTE_64F)
		return ST_INVALID;
	if (scale != (compute == CUBLAS_ABI_COMPUTE_64F ? CUDA_ABI_R_64F : CUDA_ABI_R_32F))
		return ST_INVALID;
	*d = calloc(1, sizeof **d);
	if (!*d)
		return 3;
	(*d)->compute = compute;
	(*d)->scale = scale;
	return 0;
}

API int cublasLtMatmulDescDestroy(culib_desc_t d);
API int cublasLtMatmulDescDestroy(culib_desc_t d)
{
	free(d);
	return 0;
}

API int cublasLtMatmulDescSetAttribute(culib_desc_t d, int attr, const void *buf, size_t n);
API int cublasLtMatmulDescSetAttribute(culib_desc_t d, int attr, const void *buf, size_t n)
{
	if (!buf || n != sizeof(int32_t))
		return ST_INVALID;
	int32_t v;
	memcpy(&v, buf, sizeof v);
	if (v != CUBLAS_ABI_OP_N && v != CUBLAS_ABI_OP_T)
		return ST_INVALID;
	if (attr == CUBLASLT_ABI_MATMUL_DESC_TRANSA)
		d->transa = v;
	else if (attr == CUBLASLT_ABI_MATMUL_DESC_TRANSB)
		d->transb = v;
	else
		return ST_INVALID;
	return 0;
}

API int cublasLtMatrixLayoutCreate(culib_layout_t *l, int type, uint64_t rows, uint64_t cols,
				   int64_t ld);
API int cublasLtMatrixLayoutCreate(culib_layout_t *l, int type, uint64_t rows, uint64_t cols,
				   int64_t ld)
{
	if (ld < (int64_t)rows || rows == 0 || cols == 0)
		return ST_INVALID;
	*l = calloc(1, sizeof **l);
	if (!*l)
		return 3;
	**l = (struct culib_layout_st){type, rows, cols, ld};
	return 0;
}

API int cublasLtMatrixLayoutDestroy(culib_layout_t l);
API int cublasLtMatrixLayoutDestroy(culib_layout_t l)
{
	free(l);
	return 0;
}

API int cublasLtMatmulPreferenceCreate(culib_pref_t *p);
API int cublasLtMatmulPreferenceCreate(culib_pref_t *p)
{
	*p = calloc(1, sizeof **p);
	return *p ? 0 : 3;
}

API int cublasLtMatmulPreferenceDestroy(culib_pref_t p);
API int cublasLtMatmulPreferenceDestroy(culib_pref_t p)
{
	free(p);
	return 0;
}

API int cublasLtMatmulPreferenceSetAttribute(culib_pref_t p, int attr, const void *buf, size_t n);
API int cublasLtMatmulPreferenceSetAttribute(culib_pref_t p, int attr, const void *buf, size_t n)
{
	if (attr != CUBLASLT_ABI_MATMUL_PREF_MAX_WORKSPACE_BYTES || n != sizeof(uint64_t) || !buf)
		return ST_INVALID;
	memcpy(&p->workspace, buf, sizeof p->workspace);
	return 0;
}

/* The shapes of op(A) (m x k), op(B) (k x n) and C, D (m x n) must agree. */
static int shapes(const struct culib_desc_st *d, const struct culib_layout_st *a,
		  const struct culib_layout_st *b, const struct culib_layout_st *c,
		  uint64_t *m, uint64_t *n, uint64_t *k)
{
	uint64_t am = d->transa == CUBLAS_ABI_OP_T ? a->cols : a->rows;
	uint64_t ak = d->transa == CUBLAS_ABI_OP_T ? a->rows : a->cols;
	uint64_t bk = d->transb == CUBLAS_ABI_OP_T ? b->cols : b->rows;
	uint64_t bn = d->transb == CUBLAS_ABI_OP_T ? b->rows : b->cols;
	if (ak != bk || c->rows != am || c->cols != bn || a->type != b->type)
		return ST_INVALID;
	*m = am, *n = bn, *k = ak;
	return 0;
}

API int cublasLtMatmulAlgoGetHeuristic(culib_handle_t h, culib_desc_t d, culib_layout_t a,
				       culib_layout_t b, culib_layout_t c, culib_layout_t dd,
				       culib_pref_t p, int want, struct culib_heuristic *res,
				       int *found);
API int cublasLtMatmulAlgoGetHeuristic(culib_handle_t h, culib_desc_t d, culib_layout_t a,
				       culib_layout_t b, culib_layout_t c, culib_layout_t dd,
				       culib_pref_t p, int want, struct culib_heuristic *res,
				       int *found)
{
	uint64_t m, n, k;
	(void)p;
	if (!h || want < 1 || !res || !found || shapes(d, a, b, c, &m, &n, &k) ||
	    dd->rows != c->rows || dd->cols != c->cols)
		return ST_INVALID;
	const char *prec = precision_of(d, a);
	*found = 0;
	if (!prec)
		return ST_NOT_SUPPORTED;
	/* As on Hopper: fp8 only as TN, with a 16-bit C. */
	if (strcmp(prec, "fp8") == 0 &&
	    (d->transa != CUBLAS_ABI_OP_T || d->transb != CUBLAS_ABI_OP_N ||
	     (c->type != CUDA_ABI_R_16BF && c->type != CUDA_ABI_R_16F)))
		return ST_NOT_SUPPORTED;
	if (listed("GPULSE_FAKE_BENCH_NO_ALGO", prec))
		return ST_NOT_SUPPORTED;
	memset(res, 0, sizeof *res);
	res->algo.data[0] = 0xfa4e;
	*found = 1;
	return 0;
}

API int cublasLtMatmul(culib_handle_t h, culib_desc_t d, const void *alpha, const void *A,
		       culib_layout_t la, const void *B, culib_layout_t lb, const void *beta,
		       const void *C, culib_layout_t lc, void *D, culib_layout_t ld,
		       const struct culib_algo *algo, void *ws, size_t wss, cu_stream_t s);
API int cublasLtMatmul(culib_handle_t h, culib_desc_t d, const void *alpha, const void *A,
		       culib_layout_t la, const void *B, culib_layout_t lb, const void *beta,
		       const void *C, culib_layout_t lc, void *D, culib_layout_t ld,
		       const struct culib_algo *algo, void *ws, size_t wss, cu_stream_t s)
{
	uint64_t m, n, k;
	if (!h || !alpha || !beta || !A || !B || !C || !D || !algo || algo->data[0] != 0xfa4e ||
	    (wss && !ws) || shapes(d, la, lb, lc, &m, &n, &k) || ld->rows != lc->rows)
		return ST_INVALID;
	const char *prec = precision_of(d, la);
	if (!prec)
		return ST_NOT_SUPPORTED;
	h->advance(s, 2.0 * (double)m * (double)n * (double)k / rate_of(prec));
	return 0;
}
