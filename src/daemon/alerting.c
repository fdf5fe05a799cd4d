/* Alert delivery glue; see alerting.h. */
#include "daemon/alerting.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "alert/matcher.h"
#include "alert/notify.h"
#include "common/redact.h"
#include "common/status.h"
#include "common/str.h"
#include "common/token.h"
#include "common/xalloc.h"

struct alerting {
	struct notify *n;
};

void config_alerting_defaults(struct gpulse_config *c)
{
	memset(&c->alerting, 0, sizeof c->alerting);
	c->alerting.resend_delay_ns = 60 * NS_PER_SEC;
	c->alerting.alertmanagers.timeout_ns = 10 * NS_PER_SEC;
	c->alerting.webhooks.timeout_ns = 10 * NS_PER_SEC;
	c->alerting.exec.timeout_ns = 10 * NS_PER_SEC;
	c->alerting.queue.max_bytes = NOTIFY_DEFAULT_MAX_BYTES;
	c->alerting.queue.max_batches = NOTIFY_DEFAULT_MAX_FILES;
	c->alerting.retry_backoff_ns = 500 * NS_PER_MS;
	c->alerting.max_retry_backoff_ns = 60 * NS_PER_SEC;
	snprintf(c->alerting.group_by[0], sizeof c->alerting.group_by[0], "alertname");
	c->alerting.group_wait_ns = 30 * NS_PER_SEC;
	c->alerting.group_interval_ns = 300 * NS_PER_SEC;
	c->alerting.repeat_interval_ns = 4 * 3600 * NS_PER_SEC;
	/* The rule pack (deploy/rules/gpulse.rules.yml) names these three:
	 * a GPU that is gone makes its other alerts noise. */
	struct config_inhibit_rule *r = &c->alerting.inhibit_rules[0];
	snprintf(r->source_matchers[0], sizeof r->source_matchers[0],
		 "alertname=~\"GPUDown|GPULost|GPUFallenOffBus\"");
	snprintf(r->equal[0], sizeof r->equal[0], "gpu");
	c->alerting.ninhibit_rules = 1;
}

static size_t count_list(const char *base, size_t n, size_t elem)
{
	size_t k = 0;
	while (k < n && base[k * elem])
		k++;
	return k;
}

#define COUNT(arr) count_list((const char *)(arr), sizeof(arr) / sizeof((arr)[0]), sizeof((arr)[0]))

size_t alerting_receiver_count(const struct gpulse_config *c)
{
	return COUNT(c->alerting.alertmanagers.urls) + COUNT(c->alerting.webhooks.urls) +
	       (c->alerting.exec.path[0] ? 1 : 0);
}

static bool good_url(const char *u)
{
	if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
		return false;
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return false;
	return strlen(u) > (u[4] == 's' ? 8u : 7u);
}

int alerting_validate(const struct gpulse_config *c, const char *name, char *err, size_t errlen)
{
	const struct {
		const char (*urls)[CONFIG_URL_LEN];
		const char *key;
	} lists[] = {
		{c->alerting.alertmanagers.urls, "alerting.alertmanagers.urls"},
		{c->alerting.webhooks.urls, "alerting.webhooks.urls"},
	};
	for (size_t l = 0; l < 2; l++)
		for (size_t i = 0; i < CONFIG_MAX_URLS && lists[l].urls[i][0]; i++)
			if (!good_url(lists[l].urls[i])) {
				char shown[256];
				redact_url(shown, sizeof shown, lists[l].urls[i]);
				str_errf(err, errlen, "%s: %s[%zu]: \"%s\" is not an http:// or https:// URL",
					 name, lists[l].key, i, shown);
				return GPULSE_EINVAL;
			}
	if (c->alerting.external_url[0] && !good_url(c->alerting.external_url)) {
		char shown[256];
		redact_url(shown, sizeof shown, c->alerting.external_url);
		str_errf(err, errlen, "%s: alerting.external_url: \"%s\" is not an http:// or https:// URL",
			 name, shown);
		return GPULSE_EINVAL;
	}
	const char *exec = c->alerting.exec.path;
	if (exec[0] && (exec[0] != '/' || access(exec, X_OK) != 0)) {
		str_errf(err, errlen, "%s: alerting.exec.path: %s %s", name, exec,
			 exec[0] != '/' ? "must be an absolute path (it runs without a shell)"
					: "is not an executable file");
		return GPULSE_EINVAL;
	}
	if (!exec[0] && c->alerting.exec.args[0][0]) {
		str_errf(err, errlen, "%s: alerting.exec.args given without alerting.exec.path", name);
		return GPULSE_EINVAL;
	}
	const struct {
		const char *path, *key;
	} tokens[] = {
		{c->alerting.alertmanagers.bearer_token_file, "alerting.alertmanagers.bearer_token_file"},
		{c->alerting.webhooks.bearer_token_file, "alerting.webhooks.bearer_token_file"},
	};
	for (size_t i = 0; i < 2; i++) {
		if (!tokens[i].path[0])
			continue;
		char tok[CONFIG_TOKEN_MAX], why[CONFIG_PATH_LEN + 128];
		int rc = token_file_read(tokens[i].path, true, tok, sizeof tok, why, sizeof why);
		memset(tok, 0, sizeof tok);
		if (rc) {
			str_errf(err, errlen, "%s: %s: %s", name, tokens[i].key, why);
			return GPULSE_EINVAL;
		}
	}
	size_t ngb = COUNT(c->alerting.group_by);
	for (size_t i = 0; i < ngb; i++)
		if (strcmp(c->alerting.group_by[i], "...") == 0 && ngb > 1) {
			str_errf(err, errlen, "%s: alerting.group_by: \"...\" (every label) must be alone",
				 name);
			return GPULSE_EINVAL;
		}
	if (c->alerting.max_retry_backoff_ns < c->alerting.retry_backoff_ns) {
		char a[32], b[32];
		config_format_duration(c->alerting.max_retry_backoff_ns, a, sizeof a);
		config_format_duration(c->alerting.retry_backoff_ns, b, sizeof b);
		str_errf(err, errlen, "%s: alerting.max_retry_backoff (%s) must not be shorter than "
			 "alerting.retry_backoff (%s)", name, a, b);
		return GPULSE_EINVAL;
	}
	if (c->alerting.ninhibit_rules > CONFIG_MAX_INHIBIT_RULES) {
		str_errf(err, errlen, "%s: alerting.inhibit_rules: more than %d rules", name,
			 CONFIG_MAX_INHIBIT_RULES);
		return GPULSE_EINVAL;
	}
	for (unsigned r = 0; r < c->alerting.ninhibit_rules; r++) {
		const struct config_inhibit_rule *ir = &c->alerting.inhibit_rules[r];
		const char *src[CONFIG_MAX_MATCHERS], *tgt[CONFIG_MAX_MATCHERS], *eq[CONFIG_MAX_LABELS];
		size_t ns = COUNT(ir->source_matchers), nt = COUNT(ir->target_matchers), ne = COUNT(ir->equal);
		for (size_t i = 0; i < ns; i++)
			src[i] = ir->source_matchers[i];
		for (size_t i = 0; i < nt; i++)
			tgt[i] = ir->target_matchers[i];
		for (size_t i = 0; i < ne; i++)
			eq[i] = ir->equal[i];
		struct alert_inhibit_rule rule;
		char why[600];
		if (ns == 0 || alert_inhibit_rule_init(&rule, src, ns, tgt, nt, eq, ne, why, sizeof why)) {
			str_errf(err, errlen, "%s: alerting.inhibit_rules[%u]: %s", name, r,
				 ns == 0 ? "source_matchers must name at least one matcher" : why);
			return GPULSE_EINVAL;
		}
		alert_inhibit_rule_free(&rule);
	}
	return 0;
}

void alerting_queue_dir(const struct gpulse_config *c, char *out, size_t outlen)
{
	if (c->alerting.queue.path[0])
		snprintf(out, outlen, "%s", c->alerting.queue.path);
	else if (c->storage.path[0])
		snprintf(out, outlen, "%s.alert-queue", c->storage.path);
	else if (outlen)
		out[0] = '\0';
}

/* Everything notify_config points to, kept for the duration of one
 * notify_new / notify_reconfigure call. */
struct translation {
	struct notify_receiver_config rc[2 * CONFIG_MAX_URLS + 1];
	const char *args[CONFIG_MAX_ARGS];
	struct alert_label ext[CONFIG_MAX_LABELS];
	const char *group_by[CONFIG_MAX_LABELS];
	const char *src[CONFIG_MAX_INHIBIT_RULES][CONFIG_MAX_MATCHERS];
	const char *tgt[CONFIG_MAX_INHIBIT_RULES][CONFIG_MAX_MATCHERS];
	const char *eq[CONFIG_MAX_INHIBIT_RULES][CONFIG_MAX_LABELS];
	struct notify_inhibit_config inhibit[CONFIG_MAX_INHIBIT_RULES];
	char am_token[CONFIG_TOKEN_MAX];
	char hook_token[CONFIG_TOKEN_MAX];
	char queue_dir[CONFIG_PATH_LEN + 32];
};

static int read_bearer(const char *path, char *tok, size_t len, const char *key, char *err,
		       size_t errlen)
{
	if (!path[0])
		return 0;
	char why[CONFIG_PATH_LEN + 128];
	if (token_file_read(path, true, tok, len, why, sizeof why) != 0) {
		str_errf(err, errlen, "%s: %s", key, why);
		return GPULSE_EINVAL;
	}
	return 0;
}

static int translate(const struct gpulse_config *c, struct translation *t, struct notify_config *nc,
		     char *err, size_t errlen)
{
	memset(nc, 0, sizeof *nc);
	const typeof(c->alerting) *a = &c->alerting;
	int rc = read_bearer(a->alertmanagers.bearer_token_file, t->am_token, sizeof t->am_token,
			     "alerting.alertmanagers.bearer_token_file", err, errlen);
	if (!rc)
		rc = read_bearer(a->webhooks.bearer_token_file, t->hook_token, sizeof t->hook_token,
				 "alerting.webhooks.bearer_token_file", err, errlen);
	if (rc)
		return rc;
	size_t n = 0;
	for (size_t i = 0; i < CONFIG_MAX_URLS && a->alertmanagers.urls[i][0]; i++)
		t->rc[n++] = (struct notify_receiver_config){
			.kind = NOTIFY_ALERTMANAGER, .target = a->alertmanagers.urls[i],
			.timeout_ms = a->alertmanagers.timeout_ns / NS_PER_MS,
			.bearer_token = t->am_token[0] ? t->am_token : NULL};
	for (size_t i = 0; i < CONFIG_MAX_URLS && a->webhooks.urls[i][0]; i++)
		t->rc[n++] = (struct notify_receiver_config){
			.kind = NOTIFY_WEBHOOK, .target = a->webhooks.urls[i],
			.timeout_ms = a->webhooks.timeout_ns / NS_PER_MS,
			.bearer_token = t->hook_token[0] ? t->hook_token : NULL};
	if (a->exec.path[0]) {
		size_t na = COUNT(a->exec.args);
		for (size_t i = 0; i < na; i++)
			t->args[i] = a->exec.args[i];
		t->rc[n++] = (struct notify_receiver_config){
			.kind = NOTIFY_EXEC, .target = a->exec.path, .args = t->args, .nargs = na,
			.timeout_ms = a->exec.timeout_ns / NS_PER_MS};
	}
	nc->receivers = t->rc;
	nc->nreceivers = n;
	size_t ne = 0;
	/* An empty value is no label: `instance: ""` turns the default off. */
	for (size_t i = 0; i < CONFIG_MAX_LABELS && a->external_labels[i][0][0]; i++) {
		if (!a->external_labels[i][1][0])
			continue;
		t->ext[ne].name = a->external_labels[i][0];
		t->ext[ne].value = a->external_labels[i][1];
		ne++;
	}
	nc->external_labels = t->ext;
	nc->nexternal_labels = ne;
	nc->external_url = a->external_url[0] ? a->external_url : NULL;
	alerting_queue_dir(c, t->queue_dir, sizeof t->queue_dir);
	nc->queue_dir = t->queue_dir[0] ? t->queue_dir : NULL;
	nc->queue_max_bytes = a->queue.max_bytes;
	nc->queue_max_files = a->queue.max_batches;
	size_t ngb = COUNT(a->group_by);
	nc->group_by_all = ngb == 1 && strcmp(a->group_by[0], "...") == 0;
	for (size_t i = 0; i < ngb && !nc->group_by_all; i++)
		t->group_by[i] = a->group_by[i];
	nc->group_by = t->group_by;
	nc->ngroup_by = nc->group_by_all ? 0 : ngb;
	nc->group_wait_ms = a->group_wait_ns / NS_PER_MS;
	nc->group_interval_ms = a->group_interval_ns / NS_PER_MS;
	nc->repeat_interval_ms = a->repeat_interval_ns / NS_PER_MS;
	for (unsigned r = 0; r < a->ninhibit_rules && r < CONFIG_MAX_INHIBIT_RULES; r++) {
		const struct config_inhibit_rule *ir = &a->inhibit_rules[r];
		struct notify_inhibit_config *ic = &t->inhibit[r];
		ic->nsource = COUNT(ir->source_matchers);
		ic->ntarget = COUNT(ir->target_matchers);
		ic->nequal = COUNT(ir->equal);
		for (size_t i = 0; i < ic->nsource; i++)
			t->src[r][i] = ir->source_matchers[i];
		for (size_t i = 0; i < ic->ntarget; i++)
			t->tgt[r][i] = ir->target_matchers[i];
		for (size_t i = 0; i < ic->nequal; i++)
			t->eq[r][i] = ir->equal[i];
		ic->source = t->src[r];
		ic->target = t->tgt[r];
		ic->equal = t->eq[r];
		nc->ninhibit++;
	}
	nc->inhibit = t->inhibit;
	nc->inhibit_alertmanager = a->alertmanagers.inhibit;
	nc->backoff_initial_ms = a->retry_backoff_ns / NS_PER_MS;
	nc->backoff_max_ms = a->max_retry_backoff_ns / NS_PER_MS;
	return 0;
}

int alerting_start(struct alerting **out, const struct gpulse_config *c, char *err, size_t errlen)
{
	*out = NULL;
	struct translation *t = xcalloc(1, sizeof *t);
	struct notify_config nc;
	int rc = translate(c, t, &nc, err, errlen);
	struct notify *n = NULL;
	if (!rc)
		rc = notify_new(&n, &nc, err, errlen);
	if (!rc && nc.nreceivers)
		log_info("alerting: delivering to %zu receiver(s)%s%s", nc.nreceivers,
			 nc.queue_dir ? ", queue in " : " (no queue directory: memory only)",
			 nc.queue_dir ? nc.queue_dir : "");
	memset(t, 0, sizeof *t); /* the tokens */
	free(t);
	if (rc)
		return rc;
	struct alerting *a = xcalloc(1, sizeof *a);
	a->n = n;
	*out = a;
	return 0;
}

int alerting_reload(struct alerting *a, const struct gpulse_config *c, char *err, size_t errlen)
{
	struct translation *t = xcalloc(1, sizeof *t);
	struct notify_config nc;
	int rc = translate(c, t, &nc, err, errlen);
	if (!rc)
		rc = notify_reconfigure(a->n, &nc, err, errlen);
	memset(t, 0, sizeof *t);
	free(t);
	return rc;
}

void alerting_stop(struct alerting *a)
{
	if (!a)
		return;
	notify_free(a->n);
	free(a);
}

alert_sink_fn *alerting_sink(void)
{
	return notify_sink;
}

void *alerting_sink_ctx(struct alerting *a)
{
	return a ? a->n : NULL;
}

void alerting_stats(void *ctx, struct notify_stats *out)
{
	notify_get_stats(ctx, out);
}
