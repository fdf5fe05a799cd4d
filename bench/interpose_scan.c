/* What src/inject/interpose.c costs the application at CUDA's start: the
 * first scan of every loaded object (InitializeInjection runs it on the
 * thread that initialises CUDA), and the rescan the library's thread
 * makes each second when nothing was loaded. Loads every shared library
 * in DIR it can (a process with many large objects, as PyTorch's is),
 * then times the scans; the anchor is one dl_iterate_phdr pass over the
 * same objects that reads only their program headers.
 *   bench_interpose_scan DIR [MAX_LIBS]
 * Prints objects, entries rewritten, first scan, rescan and the anchor
 * (median of 9 each; a first scan is timed on a fresh interpose state, so
 * every pass looks at every object). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "inject/interpose.h"

static int ours(void)
{
	return 0;
}

/* The functions the library redirects, and one every object imports. */
static const struct interpose_entry entries[] = {
	{ "cuptiSubscribe", (void *)ours },
	{ "cuptiSubscribe_v2", (void *)ours },
};

static int count_phdrs(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(size_t *)arg += (size_t)info->dlpi_phnum;
	return 0;
}

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static double median_us(int64_t *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return (double)v[n / 2] / 1e3;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: bench_interpose_scan DIR [MAX_LIBS]\n");
		return 2;
	}
	int max = argc > 2 ? atoi(argv[2]) : 100000;
	DIR *d = opendir(argv[1]);
	if (!d) {
		perror(argv[1]);
		return 1;
	}
	int loaded = 0;
	struct dirent *e;
	char path[4096];
	while ((e = readdir(d)) && loaded < max) {
		if (!strstr(e->d_name, ".so"))
			continue;
		snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
		/* RTLD_LAZY: nothing of theirs runs but their constructors. */
		if (dlopen(path, RTLD_LAZY | RTLD_LOCAL))
			loaded++;
	}
	closedir(d);
	enum { N = 9 };
	int64_t first[N], again[N], anchor[N];
	struct interpose ip;
	int patched = 0;
	for (int i = 0; i < N; i++) {
		interpose_init(&ip, entries, 2, NULL, 0);
		int64_t t0 = clock_mono_ns();
		patched = interpose_scan(&ip);
		int64_t t1 = clock_mono_ns();
		interpose_scan(&ip);
		int64_t t2 = clock_mono_ns();
		size_t ph = 0;
		dl_iterate_phdr(count_phdrs, &ph);
		int64_t t3 = clock_mono_ns();
		first[i] = t1 - t0;
		again[i] = t2 - t1;
		anchor[i] = t3 - t2;
	}
	printf("libraries loaded %d, objects %llu, entries rewritten %d\n", loaded,
	       (unsigned long long)(ip.objects), patched);
	printf("first scan %.1f us, rescan (nothing loaded) %.2f us, anchor (phdr pass) %.1f us\n",
	       median_us(first, N), median_us(again, N), median_us(anchor, N));
	return 0;
}
