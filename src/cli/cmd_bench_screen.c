/* `gpulse bench --screen`: silent-corruption screening of one GPU
 * (src/bench/screen.h, docs/internals/bench.md "Screening"): the run's
 * own checks (CPU reference, repetitions, the memory pattern), then the
 * card's earlier run (--reference) and other cards' runs (--compare).
 * Any mismatch is printed with its figures and makes the exit status 3:
 * never a silent pass. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "cli/commands.h"
#include "bench/screen.h"
#include "common/status.h"

#define SCREEN_MAX_FILES 64
#define SCREEN_FILE_MAX (64u << 20)
enum { CLI_MISMATCH = 3 };

static volatile sig_atomic_t screen_stop;

static void on_signal(int sig)
{
	(void)sig;
	screen_stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse bench --screen [--gpu N] [--quick|--full] [--json]\n"
		"                    [--reference FILE] [--compare FILE...]\n"
		"\n"
		"Silent-corruption screening of GPU N: integer, fp32 and fp64 matrix\n"
		"multiplies summed in one fixed order, a reduction, and a memory pattern over\n"
		"a share of the free memory (quick: 25%% up to 16 GiB; full: 85%%), each\n"
		"reduced to digests per tile. Checked against the CPU computing a subset the\n"
		"same way, across repetitions, against the card's own earlier run\n"
		"(--reference, same driver and kernels) and other cards of the model\n"
		"(--compare). Quick: under a minute; full: under ten.\n"
		"\n"
		"  --gpu N            the GPU (NVML index; default 0)\n"
		"  --quick, --full    the variant (default quick)\n"
		"  -j, --json         the result, with every tile digest (keep it as the\n"
		"                     next run's --reference)\n"
		"  --reference FILE   this card's earlier --screen --json result\n"
		"  --compare FILE...  other cards' --screen --json results\n"
		"  --cuda-library PATH, --nvml-library PATH   as for gpulse bench\n"
		"\n"
		"Exit status: 0 every check passed; 3 a mismatch (each printed with the\n"
		"test, tile, elements and difference); 1 not run (no driver, no GPU, no\n"
		"memory, a file unreadable); 2 usage.\n");
}

static int load(const char *path, struct screen_result *r)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "gpulse bench: %s: %s\n", path, strerror(errno));
		return CLI_FAIL;
	}
	char *text = malloc(SCREEN_FILE_MAX + 1);
	size_t n = text ? fread(text, 1, SCREEN_FILE_MAX + 1, f) : 0;
	fclose(f);
	if (!text || n > SCREEN_FILE_MAX) {
		fprintf(stderr, "gpulse bench: %s: %s\n", path, text ? "larger than 64 MiB" : "out of memory");
		free(text);
		return CLI_FAIL;
	}
	text[n] = '\0';
	char err[256];
	int rc = screen_result_from_json(text, r, err, sizeof err);
	free(text);
	if (rc) {
		fprintf(stderr, "gpulse bench: %s: %s\n", path, err);
		return CLI_FAIL;
	}
	return CLI_OK;
}

int cmd_bench_screen(int argc, char **argv)
{
	enum { OPT_SCREEN = 256, OPT_GPU, OPT_QUICK, OPT_FULL, OPT_REF, OPT_COMPARE, OPT_CUDA,
	       OPT_NVML };
	static const struct option longopts[] = {
		{"screen", no_argument, NULL, OPT_SCREEN},
		{"gpu", required_argument, NULL, OPT_GPU},
		{"quick", no_argument, NULL, OPT_QUICK},
		{"full", no_argument, NULL, OPT_FULL},
		{"json", no_argument, NULL, 'j'},
		{"reference", required_argument, NULL, OPT_REF},
		{"compare", no_argument, NULL, OPT_COMPARE},
		{"cuda-library", required_argument, NULL, OPT_CUDA},
		{"nvml-library", required_argument, NULL, OPT_NVML},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct screen_opts o = {.stop = &screen_stop};
	bool json = false, quick = false, compare = false;
	const char *ref = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+jh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SCREEN: break;
		case OPT_GPU:
			if (bench_gpu_arg(optarg, &o.gpu) != 0)
				return CLI_USAGE;
			break;
		case OPT_QUICK: quick = true; break;
		case OPT_FULL: o.full = true; break;
		case 'j': json = true; break;
		case OPT_REF: ref = optarg; break;
		case OPT_COMPARE: compare = true; break;
		case OPT_CUDA: o.cuda_path = optarg; break;
		case OPT_NVML: o.nvml_path = optarg; break;
		case 'h': usage(stdout); return CLI_OK;
		default: usage(stderr); return CLI_USAGE;
		}
	}
	if (quick && o.full) {
		fprintf(stderr, "gpulse bench: --quick and --full exclude each other\n");
		return CLI_USAGE;
	}
	int nfiles = argc - optind;
	if (nfiles > 0 && !compare) {
		fprintf(stderr, "gpulse bench: unexpected argument \"%s\"\n", argv[optind]);
		return CLI_USAGE;
	}
	if (compare && (nfiles == 0 || nfiles > SCREEN_MAX_FILES)) {
		fprintf(stderr, "gpulse bench: --compare needs 1 to %d FILEs (other cards' --screen "
			"--json results)\n", SCREEN_MAX_FILES);
		return CLI_USAGE;
	}
	/* Read every file first: a bad one fails before the GPU is used. */
	struct screen_result refr = {0}, *peers = calloc((size_t)nfiles + 1, sizeof *peers);
	int out = CLI_FAIL;
	if (!peers)
		return CLI_FAIL;
	if (ref && load(ref, &refr) != CLI_OK)
		goto done;
	for (int i = 0; i < nfiles; i++)
		if (load(argv[optind + i], &peers[i]) != CLI_OK)
			goto done;

	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct screen_result r;
	char err[512];
	if (getenv(SCREEN_TEST_HOOK_ENV))
		fprintf(stderr, "gpulse bench: %s is set: a result will be corrupted on purpose "
			"(a test hook; never set it in production)\n", SCREEN_TEST_HOOK_ENV);
	int rc = screen_run(&o, &r, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse bench: GPU %d not screened: %s\n", o.gpu, err);
		screen_result_free(&r);
		goto done;
	}
	if (ref) {
		if (strcmp(refr.uuid, r.uuid) != 0)
			fprintf(stderr, "gpulse bench: --reference %s is of %s, not this GPU (%s): "
				"compared as a peer\n", ref, refr.uuid, r.uuid);
		screen_compare(&r, &refr, strcmp(refr.uuid, r.uuid) == 0 ? "reference" : "peer");
	}
	for (int i = 0; i < nfiles; i++)
		screen_compare(&r, &peers[i], "peer");
	if (json) {
		struct buf b;
		buf_init(&b, 256u << 20);
		screen_result_to_json(&r, &b);
		if (!b.failed)
			printf("%.*s\n", (int)b.len, b.data);
		buf_free(&b);
	} else {
		printf("GPU %d  %s  %s  driver %s  screening (%s%s) in %.1f s\n", o.gpu, r.name, r.uuid,
		       r.driver, r.mode, r.test_sizes ? ", test sizes" : "", r.seconds);
		for (int t = 0; t < SCREEN_TEST_COUNT; t++) {
			const struct screen_test *st = &r.test[t];
			if (st->reps == 0 && st->ntiles == 0)
				printf("  %-9s not run (see the note)\n", st->name);
			else if (t == SCREEN_MEMORY)
				printf("  %-9s %.0f MiB in %zu tiles, %d pass%s  %.2f s\n", st->name,
				       (double)r.memory_bytes / 1048576.0, st->ntiles, st->reps,
				       st->reps == 1 ? "" : "es", st->seconds);
			else
				printf("  %-9s size %llu, %zu tiles, %d reps, %d on the CPU  digest %016llx  "
				       "%.2f s\n", st->name, (unsigned long long)st->size, st->ntiles,
				       st->reps, st->cpu_tiles, (unsigned long long)st->digest, st->seconds);
		}
		if (r.notes[0])
			printf("  note: %s\n", r.notes);
	}
	for (size_t i = 0; i < r.nmm; i++) {
		char text[512];
		screen_mismatch_text(&r.mm[i], text, sizeof text);
		fprintf(json ? stderr : stdout, "MISMATCH %s\n", text);
	}
	if (!json)
		printf("%s\n", r.nmm ? "SCREENING FAILED: this GPU computed or stored wrong data"
				    : "screening passed");
	out = r.nmm ? CLI_MISMATCH : CLI_OK;
	screen_result_free(&r);
done:
	screen_result_free(&refr);
	for (int i = 0; i < nfiles; i++)
		screen_result_free(&peers[i]);
	free(peers);
	return out;
}
