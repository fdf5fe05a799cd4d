/* gpulse: the command-line client. Finds the subcommand in one registry
 * array and hands it the rest of the command line; the subcommands live in
 * src/cli/cmd_*.c (commands.h).
 * Exit status: 0 ok, 1 runtime failure (gpulsed unreachable, ...), 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/log.h"

/* Adding a command: declare it in commands.h, add its line here, write
 * src/cli/cmd_NAME.c. Listed in the order `gpulse --help` shows. */
static const struct cli_command commands[] = {
	{"status", cmd_status, "one screen for all GPUs"},
	{"top", cmd_top, "live terminal view: GPU bars, graphs, bottleneck, alerts, processes"},
	{"record", cmd_record, "write a recording of every GPU (CSV)"},
	{"diagnose", cmd_diagnose, "why a GPU is slow or idle, with evidence (from a recording)"},
	{"report", cmd_report, "capacity report: used, idle and needed GPU, as text, JSON or HTML"},
	{"fleet", cmd_fleet, "every GPU of a Prometheus: health, bottleneck class and outliers among peers"},
	{"bench", cmd_bench, "benchmark a GPU against its datasheet, its own past and the fleet"},
	{"rules", cmd_rules, "check rule files and run their unit tests (promtool's format)"},
	{"query", cmd_query, "PromQL against gpulsed's history (a table, or sparklines for a range)"},
	{"alerts", cmd_alerts, "firing and pending alerts of gpulsed's rules, with since and value"},
	{"kernels", cmd_kernels, "top CUDA kernels by GPU time, per process (gpulse run)"},
	{"run", cmd_run, "run a program with continuous CUDA profiling (libgpulse-inject.so)"},
	{"trace", cmd_trace, "capture a process's CUDA timeline to a Perfetto/Chrome JSON file"},
};
#define COMMAND_COUNT ((int)(sizeof commands / sizeof commands[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpulse [--url URL] [--token-file FILE] COMMAND [ARGS...]\n"
		"\n"
		"Commands:\n");
	for (int i = 0; i < COMMAND_COUNT; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f,
		"\n"
		"Options (before COMMAND; they apply to every command that talks to gpulsed):\n"
		"  --url URL          gpulsed to talk to (env GPULSE_URL; default %s)\n"
		"  --token-file FILE  file holding the bearer token (env GPULSE_TOKEN_FILE)\n"
		"  -h, --help         this help; 'gpulse help COMMAND' for one command\n"
		"  -V, --version      print the version\n"
		"\n"
		"Environment: GPULSE_URL, GPULSE_TOKEN_FILE, GPULSE_CA_FILE (CA bundle for\n"
		"https), GPULSE_CERT_FILE and GPULSE_KEY_FILE (client certificate and key for\n"
		"a gpulsed that asks for one), NO_COLOR (plain output).\n"
		"Exit status: 0 ok, 1 runtime failure (e.g. gpulsed unreachable), 2 usage error.\n",
		CLIENT_DEFAULT_URL);
}

static const struct cli_command *find_command(const char *name)
{
	for (int i = 0; i < COMMAND_COUNT; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

/* The registered command nearest to a mistyped name, or NULL: a shared
 * prefix of three letters, or at most two single-letter edits. */
static const char *suggest(const char *name)
{
	const char *best = NULL;
	size_t best_d = 3;
	for (int i = 0; i < COMMAND_COUNT; i++) {
		const char *c = commands[i].name;
		if (strlen(name) >= 3 && strncmp(c, name, 3) == 0)
			return c;
		size_t la = strlen(name), lb = strlen(c);
		if (la > 32 || lb > 32)
			continue;
		size_t d[33][33];
		for (size_t a = 0; a <= la; a++)
			d[a][0] = a;
		for (size_t b = 0; b <= lb; b++)
			d[0][b] = b;
		for (size_t a = 1; a <= la; a++)
			for (size_t b = 1; b <= lb; b++) {
				size_t v = d[a - 1][b - 1] + (name[a - 1] != c[b - 1]);
				if (d[a - 1][b] + 1 < v)
					v = d[a - 1][b] + 1;
				if (d[a][b - 1] + 1 < v)
					v = d[a][b - 1] + 1;
				d[a][b] = v;
			}
		if (d[la][lb] < best_d) {
			best_d = d[la][lb];
			best = c;
		}
	}
	return best;
}

static int unknown_command(const char *name)
{
	const char *s = suggest(name);
	if (s)
		fprintf(stderr, "gpulse: unknown command \"%s\" (did you mean \"%s\"?)\n", name, s);
	else
		fprintf(stderr, "gpulse: unknown command \"%s\"; 'gpulse --help' lists them\n", name);
	return CLI_USAGE;
}

/* Value of "--opt VALUE" or "--opt=VALUE" at argv[*i], or NULL when argv[*i]
 * is not that option. Sets *missing when the value is absent. */
static const char *option_value(int argc, char **argv, int *i, const char *opt, int *missing)
{
	size_t n = strlen(opt);
	if (strncmp(argv[*i], opt, n) != 0)
		return NULL;
	if (argv[*i][n] == '=')
		return argv[*i] + n + 1;
	if (argv[*i][n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

static int run_command(const struct cli_command *cmd, int argc, char **argv)
{
	/* getopt names the program by argv[0] in its complaints:
	 * "gpulse status: unrecognized option". */
	char name[64];
	snprintf(name, sizeof name, "gpulse %s", cmd->name);
	argv[0] = name;
	optind = 1;
	int rc = cmd->run(argc, argv);
	client_global_cleanup();
	if (fflush(stdout) != 0 && rc == CLI_OK) {
		perror("gpulse: writing output");
		rc = CLI_FAIL;
	}
	return rc;
}

int main(int argc, char **argv)
{
	log_set_ident("gpulse");
	int i = 1;
	/* Global options come before the command; they reach every command
	 * through the environment, where client.c looks. */
	for (; i < argc && argv[i][0] == '-'; i++) {
		int missing = 0;
		const char *v;
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return CLI_OK;
		}
		if (strcmp(argv[i], "-V") == 0 || strcmp(argv[i], "--version") == 0) {
			printf("gpulse %s\n", GPULSE_VERSION);
			return CLI_OK;
		}
		if ((v = option_value(argc, argv, &i, "--url", &missing))) {
			setenv("GPULSE_URL", v, 1);
			continue;
		}
		if ((v = option_value(argc, argv, &i, "--token-file", &missing))) {
			setenv("GPULSE_TOKEN_FILE", v, 1);
			continue;
		}
		if (missing)
			fprintf(stderr, "gpulse: %s needs a value\n", argv[i]);
		else
			fprintf(stderr, "gpulse: unknown option \"%s\"\n", argv[i]);
		usage(stderr);
		return CLI_USAGE;
	}
	if (i >= argc) {
		usage(stderr);
		return CLI_USAGE;
	}

	if (strcmp(argv[i], "help") == 0) {
		/* `gpulse help` and `gpulse help help`: the command list. */
		if (i + 1 >= argc || strcmp(argv[i + 1], "help") == 0) {
			usage(stdout);
			return CLI_OK;
		}
		const struct cli_command *cmd = find_command(argv[i + 1]);
		if (!cmd)
			return unknown_command(argv[i + 1]);
		char help[] = "--help";
		char *hargv[] = {argv[i + 1], help, NULL};
		return run_command(cmd, 2, hargv);
	}
	const struct cli_command *cmd = find_command(argv[i]);
	if (!cmd)
		return unknown_command(argv[i]);
	return run_command(cmd, argc - i, argv + i);
}
