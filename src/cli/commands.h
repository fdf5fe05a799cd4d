/* The subcommands of `gpulse`. Each lives in its own src/cli/cmd_NAME.c
 * and is listed once in main.c's registry; adding one is a declaration
 * here, a line there, and its file. */
#ifndef GPULSE_COMMANDS_H
#define GPULSE_COMMANDS_H

/* Exit status of every subcommand. */
enum cli_exit {
	CLI_OK = 0,      /* done */
	CLI_FAIL = 1,    /* runtime failure: daemon unreachable, file unreadable */
	CLI_USAGE = 2,   /* bad command line */
};

/* A subcommand's entry point: argv[0] is the subcommand's name, getopt
 * may be used from optind = 1 (main resets it). "--help" prints the
 * subcommand's usage to stdout and returns CLI_OK. Returns an enum
 * cli_exit value. */
typedef int cli_command_fn(int argc, char **argv);

struct cli_command {
	const char *name;
	cli_command_fn *run;
	const char *summary;  /* one line for `gpulse --help` */
};

int cmd_status(int argc, char **argv);  /* cmd_status.c */
int cmd_record(int argc, char **argv);  /* cmd_record.c */
int cmd_diagnose(int argc, char **argv);  /* cmd_diagnose.c */
int cmd_rules(int argc, char **argv);  /* cmd_rules.c */
int cmd_query(int argc, char **argv);  /* cmd_query.c */
int cmd_alerts(int argc, char **argv);  /* cmd_alerts.c */
int cmd_kernels(int argc, char **argv);  /* cmd_kernels.c */
int cmd_run(int argc, char **argv);  /* cmd_run.c */
int cmd_trace(int argc, char **argv);  /* cmd_trace.c */
int cmd_bench(int argc, char **argv);  /* cmd_bench.c */
int cmd_bench_screen(int argc, char **argv);  /* cmd_bench_screen.c: bench --screen */
/* bench's --gpu argument into *gpu (0-1023); otherwise says why on
 * stderr and returns -1 (cmd_bench.c). */
int bench_gpu_arg(const char *arg, int *gpu);
int cmd_top(int argc, char **argv);  /* cmd_top.c */
int cmd_report(int argc, char **argv);  /* cmd_report.c */
int cmd_fleet(int argc, char **argv);  /* cmd_fleet.c */

#endif
