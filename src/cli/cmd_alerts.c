/* `gpulse alerts`: the firing and pending alerts of gpulsed's rule engine
 * (its /api/v1/alerts, Prometheus's shape), one row per alert: state,
 * alert name, how long it has been active, its value, its other labels
 * and its summary annotation; firing ones first. With no alert to show it
 * tells "none now" from "no alerting rule loaded" (/api/v1/rules). --json
 * prints the daemon's answer as it came, re-indented. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "common/buf.h"
#include "cli/client.h"
#include "common/clock.h"
#include "cli/commands.h"
#include "common/status.h"

#define ALERTS_MAX 100000 /* rows shown; the daemon bounds them too */
#define LABELS_WIDTH_MAX 60 /* longer label lists push the summary right */

struct row {
	const char *state;
	const char *name;
	double since_s;     /* active for; < 0 when unknown */
	double value;
	char labels[1024];  /* the other labels, k=v,... (cut when longer) */
	const char *summary; /* the summary annotation, or "-" */
};

/* RFC 3339 ("2026-11-29T18:00:00.5Z") to Unix seconds; NAN when not. */
static double parse_rfc3339(const char *s)
{
	int64_t ms;
	return s && clock_parse_rfc3339(s, &ms) == 0 ? (double)ms / 1000 : NAN;
}

/* "3d 4h", "2h 5m", "4m 10s", "12s". */
static void fmt_since(char *out, size_t n, double s)
{
	if (!(s >= 0)) {
		snprintf(out, n, "?");
		return;
	}
	long long t = (long long)s;
	if (t >= 86400)
		snprintf(out, n, "%lldd %lldh", t / 86400, t % 86400 / 3600);
	else if (t >= 3600)
		snprintf(out, n, "%lldh %lldm", t / 3600, t % 3600 / 60);
	else if (t >= 60)
		snprintf(out, n, "%lldm %llds", t / 60, t % 60);
	else
		snprintf(out, n, "%llds", t);
}

static int row_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	int fx = strcmp(x->state, "firing") == 0, fy = strcmp(y->state, "firing") == 0;
	if (fx != fy)
		return fy - fx;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	c = strcmp(x->labels, y->labels);
	return c ? c : (x->since_s < y->since_s) - (x->since_s > y->since_s);
}

/* Print the table of `alerts` (the API's data.alerts) as seen at now_s;
 * nothing when no alert is to be shown. *shown gets the number of rows.
 * 0, or GPULSE_EPARSE when the document is not of the expected shape. */
static int render(json_t *alerts, const char *want_state, double now_s, FILE *out, size_t *shown)
{
	*shown = 0;
	if (!json_is_array(alerts))
		return GPULSE_EPARSE;
	size_t n = json_array_size(alerts);
	if (n > ALERTS_MAX)
		n = ALERTS_MAX;
	struct row *rows = calloc(n ? n : 1, sizeof *rows);
	if (!rows)
		return GPULSE_ENOMEM;
	size_t k = 0;
	size_t wname = strlen("ALERT"), wlabels = strlen("LABELS");
	for (size_t i = 0; i < n; i++) {
		json_t *a = json_array_get(alerts, i);
		json_t *labels = json_object_get(a, "labels");
		const char *state = json_string_value(json_object_get(a, "state"));
		const char *name = json_string_value(json_object_get(labels, "alertname"));
		if (!json_is_object(labels) || !state || !name) {
			free(rows);
			return GPULSE_EPARSE;
		}
		if (want_state && strcmp(state, want_state) != 0)
			continue;
		struct row *r = &rows[k++];
		r->state = state;
		r->name = name;
		double at = parse_rfc3339(json_string_value(json_object_get(a, "activeAt")));
		r->since_s = isnan(at) ? -1 : now_s - at;
		const char *v = json_string_value(json_object_get(a, "value"));
		r->value = v ? strtod(v, NULL) : NAN;
		struct buf lb;
		buf_init(&lb, sizeof r->labels - 1);
		const char *key;
		json_t *val;
		/* jansson keeps insertion order; the daemon writes them sorted. */
		json_object_foreach(labels, key, val) {
			if (strcmp(key, "alertname") == 0 || !json_is_string(val))
				continue;
			buf_printf(&lb, "%s%s=%s", lb.len ? "," : "", key, json_string_value(val));
		}
		snprintf(r->labels, sizeof r->labels, "%s", lb.data ? lb.data : "");
		if (lb.failed)
			snprintf(r->labels + sizeof r->labels - 4, 4, "...");
		buf_free(&lb);
		if (!r->labels[0])
			snprintf(r->labels, sizeof r->labels, "-");
		const char *sum = json_string_value(
			json_object_get(json_object_get(a, "annotations"), "summary"));
		r->summary = sum && sum[0] ? sum : "-";
		if (strlen(name) > wname)
			wname = strlen(name);
		if (strlen(r->labels) > wlabels)
			wlabels = strlen(r->labels);
	}
	*shown = k;
	if (k == 0) {
		free(rows);
		return 0;
	}
	qsort(rows, k, sizeof *rows, row_cmp);
	if (wname > 60)
		wname = 60;
	if (wlabels > LABELS_WIDTH_MAX)
		wlabels = LABELS_WIDTH_MAX;
	fprintf(out, "%-8s %-*s %-10s %-12s %-*s %s\n", "STATE", (int)wname, "ALERT", "SINCE", "VALUE",
		(int)wlabels, "LABELS", "SUMMARY");
	for (size_t i = 0; i < k; i++) {
		char since[32];
		fmt_since(since, sizeof since, rows[i].since_s);
		fprintf(out, "%-8s %-*.*s %-10s %-12.6g %-*s %s\n", rows[i].state, (int)wname,
			(int)wname, rows[i].name, since, rows[i].value, (int)wlabels, rows[i].labels,
			rows[i].summary);
	}
	free(rows);
	return 0;
}

/* How many alerting rules gpulsed has loaded (its /api/v1/rules), or -1
 * when it cannot be told. */
static long alerting_rules(const struct client_opts *co)
{
	json_t *root = NULL;
	char err[512];
	if (client_get_json(co, "/api/v1/rules", &root, NULL, err, sizeof err) != GPULSE_OK)
		return -1;
	json_t *groups = json_object_get(json_object_get(root, "data"), "groups");
	long n = json_is_array(groups) ? 0 : -1;
	json_t *g, *r;
	size_t i, j;
	json_array_foreach(groups, i, g) {
		json_array_foreach(json_object_get(g, "rules"), j, r) {
			const char *type = json_string_value(json_object_get(r, "type"));
			if (type && strcmp(type, "alerting") == 0)
				n++;
		}
	}
	json_decref(root);
	return n;
}

/* The evidence gpulsed holds (/api/v1/evidence), newest first, and the
 * triggers its budgets refused. 0, or -1 after saying why. */
static int show_evidence(struct client_opts *co)
{
	char err[1024];
	json_t *root = NULL;
	int rc = client_get_json(co, "/api/v1/evidence", &root, NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse: %s\n", err);
		return -1;
	}
	json_t *d = json_object_get(root, "data");
	json_t *list = json_object_get(d, "evidence");
	printf("\nevidence (budget: %lld per GPU, %lld in all, per hour)\n",
	       (long long)json_integer_value(json_object_get(d, "per_gpu_per_hour")),
	       (long long)json_integer_value(json_object_get(d, "per_hour")));
	if (!json_is_array(list) || json_array_size(list) == 0) {
		printf("none\n");
	} else {
		printf("%-28s %4s %-8s %-8s %-22s %s\n", "ID", "GPU", "CAUSE", "STATE", "DETAIL", "URL");
		size_t i;
		json_t *e;
		json_array_foreach(list, i, e) {
			const char *id = json_string_value(json_object_get(e, "id"));
			const char *cause = json_string_value(json_object_get(e, "cause"));
			const char *st = json_string_value(json_object_get(e, "state"));
			const char *detail = json_string_value(json_object_get(e, "detail"));
			const char *url = json_string_value(json_object_get(e, "url"));
			printf("%-28s %4lld %-8s %-8s %-22s %s%s\n", id ? id : "?",
			       (long long)json_integer_value(json_object_get(e, "gpu")), cause ? cause : "?",
			       st ? st : "?", detail ? detail : "", url && url[0] == '/' ? client_base_url(co) : "",
			       url ? url : "");
		}
	}
	json_t *hits = json_object_get(d, "budget_hits");
	size_t i;
	json_t *h;
	json_array_foreach(hits, i, h)
		printf("budget hit: GPU %lld, %lld trigger(s) refused since gpulsed started\n",
		       (long long)json_integer_value(json_object_get(h, "gpu")),
		       (long long)json_integer_value(json_object_get(h, "count")));
	/* Where it is kept; evidence held in memory only is said. */
	json_t *store = json_object_get(d, "store");
	const char *path = json_string_value(json_object_get(store, "path"));
	const char *why = json_string_value(json_object_get(store, "error"));
	long long unsaved = json_integer_value(json_object_get(store, "unsaved"));
	if (json_is_true(json_object_get(store, "available")))
		printf("kept in %s\n", path ? path : "?");
	else if (store && path && !path[0])
		printf("held in memory only (no storage.path or evidence.path): a restart forgets it\n");
	else if (store)
		printf("NOT KEPT on disk (%lld held in memory only, lost at a restart): %s\n", unsaved,
		       why ? why : "?");
	json_decref(root);
	return 0;
}

static void alerts_usage(FILE *f)
{
	fputs("usage: gpulse alerts [--state firing|pending] [--evidence] [--json] [--url URL]\n"
	      "                     [--token-file FILE]\n"
	      "\n"
	      "The alerts gpulsed's rule engine has firing or pending (its /api/v1/alerts):\n"
	      "state, name, how long active (SINCE), the value of the rule's expression,\n"
	      "the alert's other labels and its summary annotation; firing alerts first.\n"
	      "Says so when gpulsed has no alerting rule loaded (rule_files).\n"
	      "\n"
	      "  --state S          only firing or only pending alerts\n"
	      "  --evidence         also the evidence gathered on trouble (/api/v1/evidence):\n"
	      "                     its ID, GPU, cause, state and URL, and the budget hits\n"
	      "  --json             print gpulsed's JSON answer\n"
	      "  --url URL          gpulsed to ask (env GPULSE_URL)\n"
	      "  --token-file FILE  file holding the bearer token (env GPULSE_TOKEN_FILE)\n"
	      "\n"
	      "Exit status: 0 ok (with or without alerts), 1 gpulsed unreachable or its\n"
	      "answer unusable, 2 usage.\n",
	      f);
}

int cmd_alerts(int argc, char **argv)
{
	enum { OPT_URL = 256, OPT_TOKEN, OPT_STATE };
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"state", required_argument, NULL, OPT_STATE},
		{"evidence", no_argument, NULL, 'e'},
		{"url", required_argument, NULL, OPT_URL},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct client_opts co = {0};
	bool json = false, evidence = false;
	const char *state = NULL;
	int ch;
	while ((ch = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j': json = true; break;
		case 'e': evidence = true; break;
		case OPT_STATE: state = optarg; break;
		case OPT_URL: co.url = optarg; break;
		case OPT_TOKEN: co.token_file = optarg; break;
		case 'h': alerts_usage(stdout); return CLI_OK;
		default: alerts_usage(stderr); return CLI_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpulse alerts: unexpected argument \"%s\"\n", argv[optind]);
		return CLI_USAGE;
	}
	if (state && strcmp(state, "firing") != 0 && strcmp(state, "pending") != 0) {
		fprintf(stderr, "gpulse alerts: bad --state \"%s\" (firing or pending)\n", state);
		return CLI_USAGE;
	}
	int exit_code = CLI_FAIL;
	char err[1024];
	struct buf body;
	json_t *root = NULL;
	buf_init(&body, CLIENT_MAX_RESPONSE);
	int rc = client_get_json(&co, "/api/v1/alerts", &root, json ? &body : NULL, err, sizeof err);
	if (rc) {
		fprintf(stderr, "gpulse: %s\n", err);
		exit_code = client_exit_code(rc);
		goto out;
	}
	if (json) {
		if (client_print_json(stdout, body.data, body.len) == 0)
			exit_code = CLI_OK;
		goto out;
	}
	struct timeval tv;
	gettimeofday(&tv, NULL);
	size_t shown = 0;
	rc = render(json_object_get(json_object_get(root, "data"), "alerts"), state,
		    (double)tv.tv_sec + tv.tv_usec / 1e6, stdout, &shown);
	if (rc) {
		fprintf(stderr, "gpulse: gpulsed at %s sent its alerts in an unexpected shape (is it the "
			"same version as this gpulse?)\n", client_base_url(&co));
		goto out;
	}
	/* No alert: none is firing, or there is no rule that could fire. */
	if (shown == 0) {
		if (alerting_rules(&co) == 0)
			printf("no alerting rules loaded (gpulsed's rule_files has none)\n");
		else
			printf("no %s alerts\n", state ? state : "firing or pending");
	}
	if (evidence && show_evidence(&co) != 0)
		goto out;
	exit_code = CLI_OK;
out:
	json_decref(root);
	buf_free(&body);
	return exit_code;
}
