/* gpulse run: start a program with libgpulse-inject.so loaded into it
 * (CUDA loads the library named by CUDA_INJECTION64_PATH into every
 * process that initialises CUDA), so gpulsed sees its kernels, copies and
 * waits with no change to the program. The settings go to the library
 * through its environment (GPULSE_MODE, GPULSE_BUDGET, GPULSE_SOCKET);
 * then this process becomes the program (execvp), so signals, exit
 * status and the terminal are the program's own. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/status.h"
#include "common/str.h"

#define INJECT_LIB "libgpulse-inject.so"

static void run_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse run [--focus profiler-api|nvtx:NAME] [--budget 0.5%%] [--mode MODE]\n"
		"                  [--socket PATH] -- CMD [ARGS...]\n"
		"\n"
		"Run CMD with libgpulse-inject.so loaded (CUDA_INJECTION64_PATH), so gpulsed\n"
		"profiles its CUDA work continuously; see 'gpulse kernels' and 'gpulse trace'.\n"
		"\n"
		"  --focus profiler-api   trace only between cudaProfilerStart and cudaProfilerStop\n"
		"  --focus nvtx:NAME      trace only inside NVTX ranges named NAME\n"
		"  --budget SHARE         overhead budget: 0.5%% (default), 2000ppm or 0.005\n"
		"  --mode MODE            continuous (default), full (always on) or off\n"
		"  --socket PATH          gpulsed's profiling socket (default: asked from gpulsed,\n"
		"                         else the library's default)\n"
		"\n"
		"The library is found through GPULSE_INJECT_LIB, next to the gpulse binary, in\n"
		"../lib or ../lib/gpulse, or in a build tree's src/inject/.\n");
}

/* The same grammar as the library's: "0.5%", "5000ppm", "0.005"; in (0, 100%]. */
static bool budget_ok(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return false;
	double ppm = strcmp(end, "%") == 0 ? v * 1e4 : strcmp(end, "ppm") == 0 ? v
		   : *end == '\0' ? v * 1e6 : -1;
	return ppm > 0 && ppm <= 1e6;
}

static bool readable(const char *path)
{
	return access(path, R_OK) == 0;
}

/* Where the library is: 0 with its path in out, or GPULSE_ENOENT with
 * the places tried in `tried`. */
static int find_library(char *out, size_t len, char *tried, size_t tlen)
{
	tried[0] = '\0';
	const char *env = getenv("GPULSE_INJECT_LIB");
	if (env && *env) {
		snprintf(tried, tlen, "GPULSE_INJECT_LIB=%s", env);
		if (!readable(env))
			return GPULSE_ENOENT;
		/* The dynamic loader wants an absolute path here. */
		if (!realpath(env, out))
			return GPULSE_ENOENT;
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return GPULSE_ENOENT;
	exe[n] = '\0';
	const char *dir = dirname(exe);
	const char *rel[] = {"", "/../lib", "/../lib/gpulse", "/../lib64", "/src/inject"};
	size_t used = 0;
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		char cand[PATH_MAX + 64];
		snprintf(cand, sizeof cand, "%s%s/%s", dir, rel[i], INJECT_LIB);
		if (used < tlen)
			used += (size_t)snprintf(tried + used, tlen - used, "%s%s", used ? ", " : "", cand);
		if (readable(cand) && realpath(cand, out) && strlen(out) < len)
			return 0;
	}
	return GPULSE_ENOENT;
}

/* The socket gpulsed serves, asked over HTTP; "" when it cannot say. */
static void daemon_socket(char *out, size_t len)
{
	out[0] = '\0';
	struct client_opts co = {.timeout_ms = 2000};
	json_t *root = NULL;
	char err[512];
	if (client_get_json(&co, "/api/v1/processes", &root, NULL, err, sizeof err) != 0)
		return;
	json_t *prof = json_object_get(json_object_get(root, "data"), "profiling");
	const char *s = json_string_value(json_object_get(prof, "socket"));
	if (s && json_is_true(json_object_get(prof, "serving")))
		str_copy(out, len, s);
	json_decref(root);
}

int cmd_run(int argc, char **argv)
{
	enum { OPT_FOCUS = 256, OPT_BUDGET, OPT_MODE, OPT_SOCKET };
	static const struct option longopts[] = {
		{"focus", required_argument, NULL, OPT_FOCUS},
		{"budget", required_argument, NULL, OPT_BUDGET},
		{"mode", required_argument, NULL, OPT_MODE},
		{"socket", required_argument, NULL, OPT_SOCKET},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *focus = NULL, *budget = NULL, *mode = NULL, *sock = NULL;
	int ch;
	/* "+": stop at the program's name, its options are its own. */
	while ((ch = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (ch) {
		case OPT_FOCUS: focus = optarg; break;
		case OPT_BUDGET: budget = optarg; break;
		case OPT_MODE: mode = optarg; break;
		case OPT_SOCKET: sock = optarg; break;
		case 'h': run_usage(stdout); return CLI_OK;
		default: run_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gpulse run: no command given (gpulse run -- CMD ARGS...)\n");
		return CLI_USAGE;
	}
	char mode_env[300] = "";
	if (focus) {
		if (strcmp(focus, "profiler-api") == 0) {
			str_copy(mode_env, sizeof mode_env, focus);
		} else if (strncmp(focus, "nvtx:", 5) == 0 && focus[5] && strlen(focus + 5) <= 256) {
			str_copy(mode_env, sizeof mode_env, focus);
		} else {
			fprintf(stderr, "gpulse run: --focus \"%s\" is not profiler-api or nvtx:NAME\n", focus);
			return CLI_USAGE;
		}
	}
	if (mode) {
		if (focus) {
			fprintf(stderr, "gpulse run: give --focus or --mode, not both\n");
			return CLI_USAGE;
		}
		if (strcmp(mode, "continuous") && strcmp(mode, "full") && strcmp(mode, "off")) {
			fprintf(stderr, "gpulse run: --mode \"%s\" is not continuous, full or off\n", mode);
			return CLI_USAGE;
		}
		str_copy(mode_env, sizeof mode_env, mode);
	}
	if (budget && !budget_ok(budget)) {
		fprintf(stderr, "gpulse run: --budget \"%s\" is not a share like 0.5%%, 2000ppm or "
			"0.005 (more than 0, at most 100%%)\n", budget);
		return CLI_USAGE;
	}
	char lib[PATH_MAX], tried[4096];
	if (find_library(lib, sizeof lib, tried, sizeof tried) != 0) {
		fprintf(stderr, "gpulse run: %s not found (looked at %s). Build it (it needs the CUDA "
			"toolkit's cupti.h) or point GPULSE_INJECT_LIB at it.\n", INJECT_LIB, tried);
		return CLI_FAIL;
	}
	const char *prev = getenv("CUDA_INJECTION64_PATH");
	if (prev && *prev && strcmp(prev, lib) != 0) {
		fprintf(stderr, "gpulse run: CUDA_INJECTION64_PATH is already set to %s (another tool "
			"injects itself; CUDA loads only one); unset it to profile with gpulse\n", prev);
		return CLI_FAIL;
	}
	char sock_buf[1024];
	if (!sock) {
		daemon_socket(sock_buf, sizeof sock_buf);
		if (sock_buf[0])
			sock = sock_buf;
	}
	if (setenv("CUDA_INJECTION64_PATH", lib, 1) != 0 ||
	    (mode_env[0] && setenv("GPULSE_MODE", mode_env, 1) != 0) ||
	    (budget && setenv("GPULSE_BUDGET", budget, 1) != 0) ||
	    (sock && setenv("GPULSE_SOCKET", sock, 1) != 0)) {
		fprintf(stderr, "gpulse run: cannot set the environment: %s\n", strerror(errno));
		return CLI_FAIL;
	}
	client_global_cleanup();
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "gpulse run: cannot run %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
