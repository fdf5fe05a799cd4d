/* Bytes per GPU-hour of remote write's summary mode against 10 Hz raw
 * scraping (issue 18, item 7: at most a tenth). bench/edge_bytes.sh
 * measures a gpulsed replaying the bundled recording (one GPU): the size
 * of one /metrics response and every stored series with its sample rate;
 * this program then sends one simulated hour of those series, at those
 * rates, through the same summary engine and encoder gpulsed uses
 * (rw_summary.c, rw_codec.c: protobuf-c + snappy, requests of 2000
 * samples), with the GPU hot (every raw sample sent) for HOT_MINUTES of
 * the hour, and prints the request bytes.
 *
 *   edge_bytes SERIES_FILE HOT_MINUTES [INTERVAL_S]
 *
 * SERIES_FILE: one series a line, "RATE_HZ<TAB>name=value<US>name=value..."
 * (US: the unit separator, 0x1f). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remote/rw_codec.h"
#include "remote/rw_summary.h"

#define MAXS 4096

struct ser {
	double hz;
	struct label l[TSDB_MAX_LABELS];
	size_t n;
	double v;
};

struct pend {
	const void *key;
	const struct label *l;
	size_t n;
	int64_t t;
	double v;
};

static struct pend pend[2000];
static size_t npend;
static unsigned long long bytes, samples, requests;

static void flush(void)
{
	if (!npend)
		return;
	struct rw_series s[2000];
	struct rw_sample sm[2000];
	size_t ns = 0;
	for (size_t i = 0; i < npend; i++) {
		sm[i] = (struct rw_sample){pend[i].t, pend[i].v};
		if (ns && s[ns - 1].labels == pend[i].l) {
			s[ns - 1].nsamples++;
		} else {
			s[ns++] = (struct rw_series){pend[i].l, pend[i].n, &sm[i], 1};
		}
	}
	struct buf b;
	buf_init(&b, 64u << 20);
	if (rw_encode(s, ns, &b) == 0)
		bytes += b.len;
	buf_free(&b);
	samples += npend;
	requests++;
	npend = 0;
}

static void emit(void *ctx, const void *key, const struct label *l, size_t n, int64_t t,
		 double v)
{
	(void)ctx;
	pend[npend++] = (struct pend){key, l, n, t, v};
	if (npend == 2000)
		flush();
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: edge_bytes SERIES_FILE HOT_MINUTES [INTERVAL_S]\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	if (!f)
		return 1;
	double hot_min = atof(argv[2]);
	int64_t interval_ms = argc > 3 ? (int64_t)(atof(argv[3]) * 1000) : 60000;
	static struct ser ser[MAXS];
	size_t nser = 0;
	char line[16384];
	while (nser < MAXS && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *tab = strchr(line, '\t');
		if (!tab)
			continue;
		*tab = '\0';
		struct ser *s = &ser[nser];
		s->hz = atof(line);
		char *save = NULL;
		for (char *tok = strtok_r(tab + 1, "\x1f", &save); tok && s->n < TSDB_MAX_LABELS;
		     tok = strtok_r(NULL, "\x1f", &save)) {
			char *eq = strchr(tok, '=');
			if (!eq)
				continue;
			*eq = '\0';
			s->l[s->n].name = strdup(tok);
			s->l[s->n].value = strdup(eq + 1);
			s->n++;
		}
		if (s->n && s->hz > 0)
			nser++;
	}
	fclose(f);
	struct rw_summary *sum = NULL;
	struct rw_summary_opts o = {.interval_ms = interval_ms, .hold_ms = 1000};
	rw_summary_create(&sum, &o);
	struct label alerts[] = {{"__name__", "ALERTS"}, {"alertname", "GPUFallenOffBus"},
				      {"alertstate", "firing"}, {"gpu", "0"}};
	const int64_t t0 = 3600LL * 1000 * 24 * 1000, hour = 3600LL * 1000;
	/* Walk the hour in 10 ms steps; a series of rate R samples every
	 * round(1000/R) ms. The GPU is hot (an alert firing, an ALERTS sample
	 * a second) for the first HOT_MINUTES. */
	srand(1);
	for (int64_t dt = 0; dt < hour; dt += 10) {
		int64_t t = t0 + dt;
		if (dt < (int64_t)(hot_min * 60000) && dt % 1000 == 0) {
			rw_summary_observe(sum, alerts, 4, t, 1);
			rw_summary_add(sum, (uint32_t)nser + 1, alerts, 4, t, 1, emit, NULL);
		}
		for (size_t i = 0; i < nser; i++) {
			int64_t step = (int64_t)llround(1000.0 / ser[i].hz);
			if (step < 10)
				step = 10;
			if (dt % step != 0)
				continue;
			/* A bounded random walk, like utilization or power. */
			ser[i].v += ((double)rand() / RAND_MAX - 0.5) * 0.02;
			ser[i].v = ser[i].v < 0 ? 0 : ser[i].v > 1 ? 1 : ser[i].v;
			rw_summary_add(sum, (uint32_t)i + 1, ser[i].l, ser[i].n, t, ser[i].v * 700, emit,
				       NULL);
		}
		if (dt % 5000 == 0) {
			rw_summary_sweep(sum, t, emit, NULL);
			flush();  /* batch_send_deadline: a request every 5 s at most */
		}
	}
	rw_summary_sweep(sum, t0 + hour, emit, NULL);
	flush();
	printf("series %zu, hot %.1f min, interval %lld s: %llu samples in %llu requests, %llu bytes "
	       "per GPU-hour\n", nser, hot_min, (long long)(interval_ms / 1000), samples, requests,
	       bytes);
	rw_summary_destroy(sum);
	return 0;
}
