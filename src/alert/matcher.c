/* Alertmanager matchers and inhibit rules; see matcher.h.
 *
 * A matcher's text is rewritten as the PromQL selector
 * `m{NAME OP "VALUE"}` and handed to the PromQL parser, which already
 * reads Go string escapes and compiles regular expressions in RE2's
 * dialect, anchored (rx.h), as Alertmanager does: one implementation of
 * label matching for rules and for alert routing. */
#include "alert/matcher.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "promql/ast.h"
#include "common/buf.h"
#include "promql/parser.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

static bool is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

int alert_matcher_parse(const char *text, struct alert_matcher *out, char *err, size_t errlen)
{
	int rc = GPULSE_EPARSE;
	struct buf sel;
	buf_init(&sel, 4 * ALERT_MATCHER_MAX_LEN + 64);
	memset(out, 0, sizeof *out);
	size_t len = strlen(text);
	if (len > ALERT_MATCHER_MAX_LEN) {
		str_errf(err, errlen, "matcher is longer than %d bytes", ALERT_MATCHER_MAX_LEN);
		goto out;
	}
	const char *p = text;
	while (is_space(*p))
		p++;
	const char *name = p;
	if (!is_name_start(*p)) {
		str_errf(err, errlen, "matcher \"%.60s\" must start with a label name", text);
		goto out;
	}
	while (is_name_char(*p))
		p++;
	size_t name_len = (size_t)(p - name);
	while (is_space(*p))
		p++;
	const char *op;
	if (p[0] == '=' && p[1] == '~')
		op = "=~";
	else if (p[0] == '!' && p[1] == '~')
		op = "!~";
	else if (p[0] == '!' && p[1] == '=')
		op = "!=";
	else if (p[0] == '=')
		op = "=";
	else {
		str_errf(err, errlen, "matcher \"%.60s\": expected =, !=, =~ or !~ after the label name",
			 text);
		goto out;
	}
	p += strlen(op);
	while (is_space(*p))
		p++;
	buf_printf(&sel, "m{%.*s%s", (int)name_len, name, op);
	if (*p == '"') {
		/* Quoted: the PromQL lexer reads it, escapes and all, and
		 * refuses anything after the closing quote but the brace. */
		buf_puts(&sel, p);
	} else {
		size_t vlen = strlen(p);
		while (vlen && is_space(p[vlen - 1]))
			vlen--;
		char *bare = xmalloc(vlen + 1);
		memcpy(bare, p, vlen);
		bare[vlen] = '\0';
		if (strchr(bare, '"') || strchr(bare, '\\')) {
			str_errf(err, errlen, "matcher \"%.60s\": a value with quotes or backslashes "
				 "must be double-quoted", text);
			free(bare);
			goto out;
		}
		promql_quote(&sel, bare);
		free(bare);
	}
	buf_putc(&sel, '}');
	if (sel.failed) {
		str_errf(err, errlen, "matcher is too long");
		goto out;
	}
	char perr[256];
	if (promql_parse(sel.data, &out->sel, perr, sizeof perr) != 0) {
		str_errf(err, errlen, "matcher \"%.60s\": %s", text, perr);
		goto out;
	}
	if (out->sel->kind != PROMQL_NODE_VECTOR_SEL || out->sel->nmatchers != 2 ||
	    out->sel->offset_ms != 0) {
		str_errf(err, errlen, "matcher \"%.60s\" is not one label matcher", text);
		promql_expr_free(out->sel);
		out->sel = NULL;
		goto out;
	}
	/* The first matcher is the metric name "m". */
	out->m = &out->sel->matchers[1];
	rc = 0;
out:
	buf_free(&sel);
	return rc;
}

void alert_matcher_free(struct alert_matcher *m)
{
	if (!m)
		return;
	promql_expr_free(m->sel);
	m->sel = NULL;
	m->m = NULL;
}

const char *alert_label_get(const struct label *labels, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(labels[i].name, name) == 0)
			return labels[i].value;
	return "";
}

int alert_matcher_matches(const struct alert_matcher *m, const struct label *labels,
			  size_t n, bool *matched)
{
	return promql_matcher_matches(m->m, alert_label_get(labels, n, m->m->name), matched, NULL, 0);
}

static int parse_list(const char *what, const char *const *texts, size_t n,
		      struct alert_matcher **out, char *err, size_t errlen)
{
	*out = n ? xcalloc(n, sizeof **out) : NULL;
	for (size_t i = 0; i < n; i++) {
		char why[512];
		if (alert_matcher_parse(texts[i], &(*out)[i], why, sizeof why) != 0) {
			str_errf(err, errlen, "%s[%zu]: %s", what, i, why);
			for (size_t j = 0; j < i; j++)
				alert_matcher_free(&(*out)[j]);
			free(*out);
			*out = NULL;
			return GPULSE_EPARSE;
		}
	}
	return 0;
}

int alert_inhibit_rule_init(struct alert_inhibit_rule *r, const char *const *source,
			    size_t nsource, const char *const *target, size_t ntarget,
			    const char *const *equal, size_t nequal, char *err, size_t errlen)
{
	memset(r, 0, sizeof *r);
	if (parse_list("source_matchers", source, nsource, &r->source, err, errlen))
		return GPULSE_EPARSE;
	r->nsource = nsource;
	if (parse_list("target_matchers", target, ntarget, &r->target, err, errlen)) {
		alert_inhibit_rule_free(r);
		return GPULSE_EPARSE;
	}
	r->ntarget = ntarget;
	for (size_t i = 0; i < nequal; i++) {
		const char *s = equal[i];
		bool ok = is_name_start(*s);
		for (const char *c = s; ok && *c; c++)
			ok = is_name_char(*c);
		if (!ok) {
			str_errf(err, errlen, "equal[%zu]: \"%.60s\" is not a label name", i, s);
			alert_inhibit_rule_free(r);
			return GPULSE_EPARSE;
		}
	}
	r->equal = nequal ? xcalloc(nequal, sizeof *r->equal) : NULL;
	for (size_t i = 0; i < nequal; i++)
		r->equal[i] = xstrdup(equal[i]);
	r->nequal = nequal;
	return 0;
}

void alert_inhibit_rule_free(struct alert_inhibit_rule *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nsource; i++)
		alert_matcher_free(&r->source[i]);
	for (size_t i = 0; i < r->ntarget; i++)
		alert_matcher_free(&r->target[i]);
	for (size_t i = 0; i < r->nequal; i++)
		free(r->equal[i]);
	free(r->source);
	free(r->target);
	free(r->equal);
	memset(r, 0, sizeof *r);
}

/* Whether l satisfies every matcher, in *ok: 0 or the first matcher's
 * status. */
static int all_match(const struct alert_matcher *ms, size_t nm, const struct label *l,
		     size_t n, bool *ok)
{
	*ok = true;
	for (size_t i = 0; i < nm && *ok; i++) {
		int rc = alert_matcher_matches(&ms[i], l, n, ok);
		if (rc)
			return rc;
	}
	return 0;
}

bool alert_inhibit_rule_mutes(const struct alert_inhibit_rule *r, const struct label *sl,
			      size_t sn, const struct label *tl, size_t tn)
{
	bool target, source;
	if (all_match(r->target, r->ntarget, tl, tn, &target) || !target ||
	    all_match(r->source, r->nsource, sl, sn, &source) || !source)
		return false;
	for (size_t i = 0; i < r->nequal; i++)
		if (strcmp(alert_label_get(sl, sn, r->equal[i]), alert_label_get(tl, tn, r->equal[i])))
			return false;
	/* An alert on both sides is muted only by a source that is not. */
	bool both_t, both_s;
	if (all_match(r->source, r->nsource, tl, tn, &both_t) ||
	    all_match(r->target, r->ntarget, sl, sn, &both_s))
		return false;
	return !(both_t && both_s);
}
