/* Prometheus's /api/v1/rules and /api/v1/alerts over the rule engine; see
 * rules.h. */
#include "api/rules.h"

#include <stdio.h>
#include <strings.h>

#include "common/buf.h"

/* /api/v1/alerts: Prometheus's document, the pending and firing alerts. */
static int handle_alerts(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct rules_engine *e = ctx;
	(void)req;
	struct buf *b = &resp->body;
	resp->content_type = "application/json";
	buf_puts(b, "{\"status\":\"success\",\"data\":{\"alerts\":");
	int rc = e ? rules_engine_write_alerts_json(e, b) : buf_puts(b, "[]");
	if (rc)
		return rc;
	return buf_puts(b, "}}\n");
}

/* /api/v1/rules: Prometheus's document, alerting rules with their alerts. */
#define RULES_MAX_FILTER 64 /* values of one of rule_name[], rule_group[], file[] */

/* Prometheus's filters of /api/v1/rules: type=alert|record, rule_name[],
 * rule_group[], file[] (each repeatable). */
static int handle_rules(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct rules_engine *e = ctx;
	const char *names[RULES_MAX_FILTER], *groups[RULES_MAX_FILTER], *files[RULES_MAX_FILTER];
	struct rules_filter f = {.alerting = true, .recording = true, .names = names,
				 .groups = groups, .files = files};
	const char *type = http_request_arg(req, "type");
	if (type && *type) {
		if (strcasecmp(type, "alert") == 0) {
			f.recording = false;
		} else if (strcasecmp(type, "record") == 0) {
			f.alerting = false;
		} else {
			char msg[300];
			snprintf(msg, sizeof msg, "invalid parameter \"type\": not supported value \"%.200s\"",
				 type);
			return http_api_error(resp, 400, "bad_data", msg);
		}
	}
	f.nnames = http_request_args(req, "rule_name[]", names, RULES_MAX_FILTER);
	f.ngroups = http_request_args(req, "rule_group[]", groups, RULES_MAX_FILTER);
	f.nfiles = http_request_args(req, "file[]", files, RULES_MAX_FILTER);
	if (f.nnames > RULES_MAX_FILTER || f.ngroups > RULES_MAX_FILTER || f.nfiles > RULES_MAX_FILTER) {
		char msg[120];
		snprintf(msg, sizeof msg, "more than %d values of rule_name[], rule_group[] or file[]",
			 RULES_MAX_FILTER);
		return http_api_error(resp, 400, "bad_data", msg);
	}
	struct buf *b = &resp->body;
	resp->content_type = "application/json";
	buf_puts(b, "{\"status\":\"success\",\"data\":{\"groups\":");
	int rc = e ? rules_engine_write_json(e, &f, b) : buf_puts(b, "[]");
	if (rc)
		return rc;
	return buf_puts(b, "}}\n");
}

int api_rules_register(struct http_server *s, struct rules_engine *e)
{
	int rc = http_route(s, "/api/v1/rules", handle_rules, e);
	return rc ? rc : http_route(s, "/api/v1/alerts", handle_alerts, e);
}
