/* gpulsed: the gpulse node daemon. Flags override the config file; a bad
 * flag or file exits with status 2 and a message naming the problem. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/config.h"
#include "daemon/daemon.h"
#include "common/log.h"
#include "common/status.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpulsed [options]\n"
		"  Watch every NVIDIA GPU through NVML and serve Prometheus metrics.\n"
		"\n"
		"  -c, --config FILE        YAML configuration (default: built-in defaults)\n"
		"  -l, --listen ADDR:PORT   HTTP address (default 127.0.0.1:9401)\n"
		"      --replay FILE.csv    serve a recording as live GPUs instead of NVML\n"
		"      --replay-speed X     replay X times faster than recorded (default 1)\n"
		"      --nvml-library PATH  NVML to load (default libnvidia-ml.so.1)\n"
		"      --demo               try it: with no NVIDIA driver replay the bundled H200\n"
		"                           recording; a temporary store and the rule pack unless\n"
		"                           storage.path and rule_files are set\n"
		"      --log-level LEVEL    error, warn, info (default) or debug\n"
		"      --storage-path PATH  keep samples in this database (\"\": none) and serve\n"
		"                           the Prometheus query API (/api/v1/query...)\n"
		"      --allow-insecure-remote\n"
		"                           serve a non-loopback --listen without TLS and a token\n"
		"                           (http.allow_insecure_remote; trusted networks only)\n"
		"      --print-config       print the effective configuration and exit\n"
		"  -V, --version            print the version and exit\n"
		"  -h, --help               this text\n"
		"Signals: SIGHUP reloads the config file, SIGTERM and SIGINT stop.\n");
}

int main(int argc, char **argv)
{
	/* SIGHUP's default action ends the process, and the reload loop
	 * (daemon_run) takes it over only once the configuration is read and
	 * everything is started: a SIGHUP in between (a logrotate postrotate
	 * racing a restart) killed the daemon. Blocked from here on, it waits
	 * and the loop answers it with a reload. SIGTERM and SIGINT keep
	 * their default until daemon_run blocks them, so they still stop a
	 * daemon that is starting. The mask is inherited by every thread;
	 * the bench child is spawned with an empty one. */
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	sigprocmask(SIG_BLOCK, &hup, NULL);

	enum { OPT_REPLAY = 256, OPT_SPEED, OPT_NVML, OPT_LOG, OPT_PRINT, OPT_DEMO, OPT_STORAGE,
	       OPT_INSECURE };
	static const struct option opts[] = {
		{"config", required_argument, NULL, 'c'},
		{"listen", required_argument, NULL, 'l'},
		{"replay", required_argument, NULL, OPT_REPLAY},
		{"replay-speed", required_argument, NULL, OPT_SPEED},
		{"nvml-library", required_argument, NULL, OPT_NVML},
		{"log-level", required_argument, NULL, OPT_LOG},
		{"storage-path", required_argument, NULL, OPT_STORAGE},
		{"allow-insecure-remote", no_argument, NULL, OPT_INSECURE},
		{"print-config", no_argument, NULL, OPT_PRINT},
		{"demo", no_argument, NULL, OPT_DEMO},
		{"version", no_argument, NULL, 'V'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct daemon_options opt;
	memset(&opt, 0, sizeof opt);
	opt.ov.replay_speed = -1;
	bool print = false;
	log_set_ident("gpulsed");
	int c;
	opterr = 0; /* our messages, with the program's name rather than argv[0] */
	while ((c = getopt_long(argc, argv, ":c:l:Vh", opts, NULL)) != -1) {
		char *end;
		if (c == '?' || c == ':') {
			/* The word getopt stopped at: the unknown option, or the
			 * option that lacks its value at the end of the line. */
			const char *word = argv[optind - 1];
			if (c == '?' && optopt)
				fprintf(stderr, "gpulsed: unrecognized option '-%c'\n", optopt);
			else if (c == '?')
				fprintf(stderr, "gpulsed: unrecognized option '%s'\n", word);
			else
				fprintf(stderr, "gpulsed: %s needs a value\n", word);
			fprintf(stderr, "(gpulsed --help lists the options)\n");
			return 2;
		}
		/* getopt takes the word after an option that needs a value as
		 * that value, even "--print-config": such a value means the real
		 * one was forgotten. --listen=--x still passes it on purpose. */
		if (optarg && optarg == argv[optind - 1] && strncmp(optarg, "--", 2) == 0) {
			fprintf(stderr, "gpulsed: %s needs a value, got the option \"%s\" (write %s=VALUE "
				"for a value that starts with \"--\")\n", argv[optind - 2], optarg,
				argv[optind - 2]);
			return 2;
		}
		switch (c) {
		case 'c': opt.config_path = optarg; break;
		case 'l': opt.ov.listen = optarg; break;
		case OPT_REPLAY: opt.ov.replay_file = optarg; break;
		case OPT_SPEED:
			opt.ov.replay_speed = strtod(optarg, &end);
			if (*end || !(opt.ov.replay_speed > 0 && opt.ov.replay_speed <= 1000)) {
				fprintf(stderr, "gpulsed: --replay-speed: \"%s\" is not a number in (0, 1000]\n",
					optarg);
				return 2;
			}
			break;
		case OPT_NVML: opt.ov.nvml_library = optarg; break;
		case OPT_LOG: opt.ov.log_level = optarg; break;
		case OPT_STORAGE: opt.ov.storage_path = optarg; break;
		case OPT_INSECURE: opt.ov.allow_insecure_remote = true; break;
		case OPT_PRINT: print = true; break;
		case OPT_DEMO: opt.demo = true; break;
		case 'V': printf("gpulsed %s\n", GPULSE_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: return 2; /* an option of opts[] without a case: not reached */
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpulsed: unexpected argument \"%s\"\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	struct gpulse_config cfg;
	char err[512];
	if (daemon_load_config(&opt, &cfg, err, sizeof err) != 0) {
		fprintf(stderr, "gpulsed: %s\n", err);
		return 2;
	}
	if (print) {
		struct buf b;
		buf_init(&b, 1 << 20);
		int rc = config_dump(&cfg, &b);
		if (rc == 0)
			fputs(b.data ? b.data : "", stdout);
		buf_free(&b);
		return rc ? 1 : 0;
	}
	return daemon_run(&opt, &cfg);
}
