/* See bench_compare.h. The noise band is robust (the median absolute
 * deviation, scaled to a standard deviation) so that one odd run in the
 * history neither hides a regression nor invents one. */
#include "bench/bench_compare.h"

#include <math.h>
#include <string.h>

#include "bench/bench_math.h"
#include "common/str.h"

#define MAX_WINDOW 64

static double deficit(double value, double ref, bool higher_is_better)
{
	if (!(ref > 0))
		return 0;
	return higher_is_better ? 1.0 - value / ref : value / ref - 1.0;
}

static const char *method_or_legacy(const char *m)
{
	return m && *m ? m : BENCH_METHOD_LEGACY;
}

bool bench_same_method(const char *a, const char *b)
{
	return strcmp(method_or_legacy(a), method_or_legacy(b)) == 0;
}

void bench_compare(const struct bench_point *hist, size_t n, const char *driver,
		   const char *method, double value, bool higher_is_better, const double *peers,
		   size_t npeers, const struct bench_compare_opts *o, struct bench_verdict *v)
{
	size_t window = o && o->window ? o->window : 8;
	size_t min_points = o && o->min_points ? o->min_points : 3;
	double min_noise = o && o->min_noise > 0 ? o->min_noise : 0.02;
	double max_noise = o && o->max_noise > 0 ? o->max_noise : 0.05;
	double k = o && o->noise_k > 0 ? o->noise_k : 3.0;
	double fleet_tol = o && o->fleet_tolerance > 0 ? o->fleet_tolerance : 0.05;
	size_t fleet_min = o && o->fleet_min ? o->fleet_min : 2;
	if (window > MAX_WINDOW)
		window = MAX_WINDOW;
	memset(v, 0, sizeof *v);
	if (!driver)
		driver = "";

	/* A driver change starts a new baseline: only the runs since the
	 * last change (on this driver) count. So does a change of method
	 * (a new gpulse that makes the figure another way: the fast decile
	 * of a host-bound figure reads several percent above its old
	 * median, and judged against it would hide a loss of as much). */
	if (n > 0 && strcmp(hist[n - 1].driver, driver) != 0) {
		v->new_baseline = true;
		str_copy(v->previous_driver, sizeof v->previous_driver, hist[n - 1].driver);
	}
	if (n > 0 && !bench_same_method(hist[n - 1].method, method)) {
		v->new_baseline = true;
		str_copy(v->previous_method, sizeof v->previous_method,
			 method_or_legacy(hist[n - 1].method));
	}
	double w[MAX_WINDOW];
	size_t nw = 0;
	for (size_t i = n; i-- > 0 && nw < window;) {
		if (strcmp(hist[i].driver, driver) != 0 || !bench_same_method(hist[i].method, method))
			break;
		if (hist[i].baseline && isfinite(hist[i].value) && hist[i].value > 0)
			w[nw++] = hist[i].value;
	}
	v->own_points = nw;
	if (nw >= min_points) {
		double med = bench_quantile(w, nw, 0.5);
		double dev[MAX_WINDOW];
		for (size_t i = 0; i < nw; i++)
			dev[i] = fabs(w[i] - med);
		double mad = bench_quantile(dev, nw, 0.5);
		double band = med > 0 ? k * 1.4826 * mad / med : max_noise;
		if (band < min_noise)
			band = min_noise;
		/* Not cut to the ceiling: on the H200 pageable copies and
		 * the host-timed launch figures spread 20-52% over five
		 * --quick runs, and judging them within 5% would call every
		 * other run a regression. Such a figure is said to be too
		 * noisy instead, and only a loss past its own band counts. */
		v->too_noisy = band > max_noise;
		v->have_own = true;
		v->own_median = med;
		v->noise_ratio = band;
		v->own_deficit = deficit(value, med, higher_is_better);
		v->own_regression = v->own_deficit > band;
	}

	if (peers && npeers >= fleet_min) {
		double p[MAX_WINDOW * 4];
		size_t np = 0;
		for (size_t i = 0; i < npeers && np < sizeof p / sizeof p[0]; i++)
			if (isfinite(peers[i]) && peers[i] > 0)
				p[np++] = peers[i];
		if (np >= fleet_min) {
			double tol = v->have_own && v->noise_ratio > fleet_tol ? v->noise_ratio
									       : fleet_tol;
			v->have_fleet = true;
			v->fleet_points = np;
			v->fleet_median = bench_quantile(p, np, 0.5);
			v->fleet_deficit = deficit(value, v->fleet_median, higher_is_better);
			v->fleet_tolerance = tol;
			v->fleet_regression = v->fleet_deficit > tol;
		}
	}
}

/* ,"key":v */
static void put_number(struct buf *b, const char *key, double v)
{
	buf_printf(b, ",\"%s\":", key);
	buf_put_double(b, v);
}

struct basis_field {
	const char *key;
	double v;
};

/* ,"basis":{"points":N[,fields...][,"flag":bool],"regression":bool} with
 * the fields and the flag only when the basis had a reference. */
static void put_basis(struct buf *b, const char *basis, size_t points, bool have,
		      const struct basis_field *f, size_t nf, const char *flag, bool flag_v,
		      bool regression)
{
	buf_printf(b, ",\"%s\":{\"points\":%zu", basis, points);
	for (size_t i = 0; have && i < nf; i++)
		put_number(b, f[i].key, f[i].v);
	if (have && flag)
		buf_printf(b, ",\"%s\":%s", flag, flag_v ? "true" : "false");
	buf_printf(b, ",\"regression\":%s}", regression ? "true" : "false");
}

void bench_verdict_to_json(const struct bench_figure *f, const struct bench_verdict *v,
			   struct buf *b)
{
	buf_puts(b, "{\"figure\":");
	buf_put_json_string(b, f->name);
	buf_puts(b, ",\"variant\":");
	buf_put_json_string(b, f->variant);
	put_number(b, "value", f->value);
	buf_puts(b, ",\"method\":");
	buf_put_json_string(b, method_or_legacy(f->method));
	buf_printf(b, ",\"new_baseline\":%s", v->new_baseline ? "true" : "false");
	if (v->new_baseline && v->previous_driver[0]) {
		buf_puts(b, ",\"previous_driver\":");
		buf_put_json_string(b, v->previous_driver);
	}
	if (v->new_baseline && v->previous_method[0]) {
		buf_puts(b, ",\"previous_method\":");
		buf_put_json_string(b, v->previous_method);
	}
	const struct basis_field own[] = {
		{"median", v->own_median}, {"noise_ratio", v->noise_ratio}, {"deficit_ratio", v->own_deficit}};
	put_basis(b, "own", v->own_points, v->have_own, own, 3, "too_noisy", v->too_noisy,
		  v->own_regression);
	const struct basis_field fleet[] = {{"median", v->fleet_median},
					    {"deficit_ratio", v->fleet_deficit},
					    {"tolerance_ratio", v->fleet_tolerance}};
	put_basis(b, "fleet", v->fleet_points, v->have_fleet, fleet, 3, NULL, false,
		  v->fleet_regression);
	buf_putc(b, '}');
}
