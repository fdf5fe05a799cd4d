/* Prometheus's rule and alert documents: /api/v1/rules (alerting and
 * recording rules with their alerts, filtered by type=alert|record,
 * rule_name[], rule_group[], file[]) and /api/v1/alerts (the pending and
 * firing alerts), over the rule engine (rules/engine.h). */
#ifndef GPULSE_API_RULES_H
#define GPULSE_API_RULES_H

#include "http/http_server.h"
#include "rules/engine.h"

/* Route both on `s` over `e`, which must outlive the server; NULL (no
 * rule files) answers empty lists. 0 or the server's error. */
int api_rules_register(struct http_server *s, struct rules_engine *e);

#endif
