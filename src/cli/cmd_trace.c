/* gpulse trace: ask gpulsed for a capture of one process (its
 * libgpulse-inject.so traces everything for S seconds) and write the
 * Chrome trace-event JSON it returns to a file that ui.perfetto.dev and
 * chrome://tracing open. The file is written whole or not at all
 * (FILE.tmp, then rename). Before it asks, it says what a capture costs
 * the process for the rest of its life (a warning: nothing to confirm,
 * the exit codes are those of the capture). */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/status.h"

#define TRACE_MAX_SECONDS 600

static void trace_usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse trace --pid N [--seconds S] -o FILE.json\n"
		"\n"
		"Capture every kernel, copy, memset and NVTX range of process N for S seconds\n"
		"(default 5, at most %d) from its libgpulse-inject.so, through gpulsed, and\n"
		"write a Chrome trace-event file: open it in https://ui.perfetto.dev.\n"
		"A capture is a write action: gpulsed asks for its token when one is set.\n"
		"It traces kernels exactly: on CUPTI 13.0 the process's kernel launches then\n"
		"stay about 15%% dearer until it exits.\n"
		"\n"
		"  --pid N          the process (see 'gpulse kernels' or /api/v1/processes)\n"
		"  --seconds S      how long to trace\n"
		"  -o, --output F   where to write the JSON (\"-\": standard output)\n"
		"  --url URL, --token-file FILE   as for every command\n", TRACE_MAX_SECONDS);
}

static int write_file(const char *path, const char *data, size_t len)
{
	if (strcmp(path, "-") == 0)
		return fwrite(data, 1, len, stdout) == len && fflush(stdout) == 0 ? 0 : -1;
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
		errno = ENAMETOOLONG;
		return -1;
	}
	FILE *f = fopen(tmp, "wb");
	if (!f)
		return -1;
	bool ok = fwrite(data, 1, len, f) == len;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		int e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

int cmd_trace(int argc, char **argv)
{
	enum { OPT_URL = 256, OPT_TOKEN, OPT_PID, OPT_SECONDS };
	static const struct option longopts[] = {
		{"pid", required_argument, NULL, OPT_PID},
		{"seconds", required_argument, NULL, OPT_SECONDS},
		{"output", required_argument, NULL, 'o'},
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_opts co = {0};
	unsigned long pid = 0, seconds = 5;
	const char *out = NULL;
	int ch;
	char *end;
	while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1) {
		switch (ch) {
		case OPT_PID:
			pid = strtoul(optarg, &end, 10);
			if (!*optarg || *end || *optarg == '-' || pid == 0 || pid > 0xffffffffUL) {
				fprintf(stderr, "gpulse trace: --pid \"%s\" is not a process id\n", optarg);
				return CLI_USAGE;
			}
			break;
		case OPT_SECONDS:
			seconds = strtoul(optarg, &end, 10);
			if (!*optarg || *end || *optarg == '-' || seconds == 0 || seconds > TRACE_MAX_SECONDS) {
				fprintf(stderr, "gpulse trace: --seconds \"%s\" is not 1 to %d\n", optarg,
					TRACE_MAX_SECONDS);
				return CLI_USAGE;
			}
			break;
		case 'o': out = optarg; break;
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case 'h': trace_usage(stdout); return CLI_OK;
		default: trace_usage(stderr); return CLI_USAGE;
		}
	}
	if (!pid || !out || optind < argc) {
		if (optind < argc)
			fprintf(stderr, "gpulse trace: unexpected argument \"%s\"\n", argv[optind]);
		else
			fprintf(stderr, "gpulse trace: --pid and -o are required\n");
		trace_usage(stderr);
		return CLI_USAGE;
	}
	/* The daemon answers after the capture: S seconds, plus its grace. */
	co.timeout_ms = (long)(seconds + 30) * 1000;
	char path[128], err[1024];
	snprintf(path, sizeof path, "/api/v1/trace?pid=%lu&seconds=%lu", pid, seconds);
	struct buf body;
	buf_init(&body, CLIENT_MAX_RESPONSE);
	long status = 0;
	int exit_code = CLI_FAIL;
	json_t *doc = NULL;
	int rc;
	/* Ask first whether gpulsed knows the process, so a wrong pid is told
	 * as such, before any word of cost or tracing. */
	json_t *procs = NULL;
	rc = client_get_json(&co, "/api/v1/processes", &procs, NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse trace: %s\n", err);
		exit_code = client_exit_code(rc);
		goto out;
	}
	bool known = false;
	size_t i;
	json_t *pr;
	json_array_foreach(json_object_get(json_object_get(procs, "data"), "processes"), i, pr)
		if (json_integer_value(json_object_get(pr, "pid")) == (json_int_t)pid)
			known = true;
	json_decref(procs);
	if (!known) {
		fprintf(stderr, "gpulse trace: gpulsed at %s knows no process %lu running "
			"libgpulse-inject.so (see 'gpulse kernels' or /api/v1/processes)\n",
			client_base_url(&co), pid);
		goto out;
	}
	fprintf(stderr, "gpulse trace: a capture traces kernels exactly: on CUPTI 13.0 pid %lu's "
		"kernel launches then stay about 15%% dearer until it exits\n", pid);
	fprintf(stderr, "gpulse trace: tracing pid %lu for %lu s...\n", pid, seconds);
	rc = client_get(&co, path, &body, &status, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse trace: %s\n", err);
		exit_code = client_exit_code(rc);
		goto out;
	}
	json_error_t je;
	doc = body.data ? json_loadb(body.data, body.len, 0, &je) : NULL;
	if (status != 200) {
		const char *msg = json_string_value(json_object_get(doc, "error"));
		fprintf(stderr, "gpulse trace: gpulsed answered %ld: %s\n", status,
			msg ? msg : "(no message)");
		goto out;
	}
	if (!doc) {
		fprintf(stderr, "gpulse trace: gpulsed's answer is not JSON\n");
		goto out;
	}
	if (write_file(out, body.data, body.len) != 0) {
		fprintf(stderr, "gpulse trace: cannot write %s: %s\n", out, strerror(errno));
		goto out;
	}
	json_t *meta = json_object_get(doc, "otherData");
	json_int_t events = json_integer_value(json_object_get(meta, "events"));
	json_int_t dropped = json_integer_value(json_object_get(meta, "events_dropped_by_gpulsed")) +
			     json_integer_value(json_object_get(meta, "events_dropped_by_library"));
	fprintf(stderr, "gpulse trace: %lld events written to %s%s%s; open it in "
		"https://ui.perfetto.dev\n", (long long)events, strcmp(out, "-") ? out : "standard output",
		json_is_true(json_object_get(meta, "complete")) ? "" : " (the capture did not finish in time)",
		dropped ? " (events over the cap were left out; see otherData)" : "");
	exit_code = CLI_OK;
out:
	json_decref(doc);
	buf_free(&body);
	return exit_code;
}
