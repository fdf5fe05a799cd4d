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
#include "common/status.h"
#include "common/str.h"
#include "common/token.h"
#include "common/xalloc.h"

struct alerting {
	struct notify *n;
};

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
	struct label ext[CONFIG_MAX_LABELS];
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
		size_t na = CONFIG_LIST_LEN(a->exec.args);
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
	size_t ngb = CONFIG_LIST_LEN(a->group_by);
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
		ic->nsource = CONFIG_LIST_LEN(ir->source_matchers);
		ic->ntarget = CONFIG_LIST_LEN(ir->target_matchers);
		ic->nequal = CONFIG_LIST_LEN(ir->equal);
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
