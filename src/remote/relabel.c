/* Relabelling as Prometheus does it (relabel.h). Written here rather than
 * taken from a library: the semantics are Prometheus's Go code
 * (model/relabel/relabel.go), which no C library carries; the regex
 * engine underneath is PCRE2 in RE2's dialect (src/common/rx.c). */
#include "remote/relabel.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include "common/buf.h"
#include "common/rx.h"
#include "common/status.h"
#include "common/str.h"

struct rule {
	enum relabel_action action;
	char *sources[RELABEL_MAX_SOURCES];
	size_t nsource;
	char *separator;
	char *target;
	char *replacement;
	struct rx *re;
	size_t nspan;
	uint64_t modulus;
};

struct relabel {
	size_t n;
	struct rule rules[];
};

static const char *const action_names[] = {
	[RELABEL_REPLACE] = "replace", [RELABEL_KEEP] = "keep", [RELABEL_DROP] = "drop",
	[RELABEL_HASHMOD] = "hashmod", [RELABEL_LABELMAP] = "labelmap",
	[RELABEL_LABELDROP] = "labeldrop", [RELABEL_LABELKEEP] = "labelkeep",
	[RELABEL_LOWERCASE] = "lowercase", [RELABEL_UPPERCASE] = "uppercase",
	[RELABEL_KEEPEQUAL] = "keepequal", [RELABEL_DROPEQUAL] = "dropequal",
};

void relabel_free(struct relabel *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		struct rule *u = &r->rules[i];
		for (size_t j = 0; j < u->nsource; j++)
			free(u->sources[j]);
		free(u->separator);
		free(u->target);
		free(u->replacement);
		rx_free(u->re);
	}
	free(r);
}

static char *dup_or(const char *s, const char *dflt)
{
	return strdup(s ? s : dflt);
}

/* Prometheus accepts a target_label that is a label name, or for replace
 * (and only there) one holding $-expansions: then it is checked after
 * expansion. */
static bool target_ok(enum relabel_action a, const char *t)
{
	if (a == RELABEL_REPLACE && strchr(t, '$'))
		return true;
	return str_is_label_name(t);
}

int relabel_compile(const struct relabel_spec *specs, size_t n, struct relabel **out, char *err,
		    size_t errlen)
{
	*out = NULL;
	if (n > RELABEL_MAX_RULES) {
		str_errf(err, errlen, "%zu relabel rules; the limit is %d", n, RELABEL_MAX_RULES);
		return GPULSE_EINVAL;
	}
	struct relabel *r = calloc(1, sizeof *r + n * sizeof r->rules[0]);
	if (!r)
		return GPULSE_ENOMEM;
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		const struct relabel_spec *s = &specs[i];
		struct rule *u = &r->rules[i];
		r->n = i + 1;
		const char *an = s->action && s->action[0] ? s->action : "replace";
		int a = -1;
		for (size_t k = 0; k < sizeof action_names / sizeof action_names[0]; k++)
			if (strcmp(an, action_names[k]) == 0)
				a = (int)k;
		if (a < 0) {
			str_errf(err, errlen, "relabel rule %zu: unknown relabel action \"%.64s\" (known: "
				 "replace, keep, drop, hashmod, labelmap, labeldrop, labelkeep, "
				 "lowercase, uppercase, keepequal, dropequal)", i, an);
			rc = GPULSE_EINVAL;
			goto out;
		}
		u->action = (enum relabel_action)a;
		if (s->nsource > RELABEL_MAX_SOURCES) {
			str_errf(err, errlen, "relabel rule %zu: more than %d source_labels", i,
				 RELABEL_MAX_SOURCES);
			rc = GPULSE_EINVAL;
			goto out;
		}
		for (size_t j = 0; j < s->nsource; j++) {
			if (!str_is_label_name(s->source_labels[j])) {
				str_errf(err, errlen, "relabel rule %zu: \"%.64s\" is not a valid label name",
					 i, s->source_labels[j]);
				rc = GPULSE_EINVAL;
				goto out;
			}
			u->sources[j] = strdup(s->source_labels[j]);
			u->nsource = j + 1;
			if (!u->sources[j]) {
				rc = GPULSE_ENOMEM;
				goto out;
			}
		}
		bool dflt_regex = !s->regex || strcmp(s->regex, "(.*)") == 0;
		bool dflt_repl = !s->replacement || strcmp(s->replacement, "$1") == 0;
		u->separator = dup_or(s->separator, ";");
		u->target = dup_or(s->target_label, "");
		u->replacement = dup_or(s->replacement, "$1");
		if (!u->separator || !u->target || !u->replacement) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		u->modulus = s->modulus;
		char rxerr[256];
		int xrc = rx_compile(s->regex ? s->regex : "(.*)", RX_ANCHORED, &u->re, rxerr,
				     sizeof rxerr);
		if (xrc) {
			str_errf(err, errlen, "relabel rule %zu: regex: %s", i, rxerr);
			rc = xrc == GPULSE_ENOMEM ? xrc : GPULSE_EINVAL;
			goto out;
		}
		u->nspan = rx_groups(u->re) + 1;
		/* The checks of Prometheus's relabel.Config.Validate. */
		const char *why = NULL;
		switch (u->action) {
		case RELABEL_REPLACE:
		case RELABEL_HASHMOD:
		case RELABEL_LOWERCASE:
		case RELABEL_UPPERCASE:
		case RELABEL_KEEPEQUAL:
		case RELABEL_DROPEQUAL:
			if (!u->target[0])
				why = "needs a target_label";
			else if (!target_ok(u->action, u->target))
				why = "target_label is not a valid label name";
			break;
		default:
			break;
		}
		if (!why && u->action == RELABEL_HASHMOD && u->modulus == 0)
			why = "needs a modulus above 0";
		if (!why && (u->action == RELABEL_LOWERCASE || u->action == RELABEL_UPPERCASE ||
			     u->action == RELABEL_KEEPEQUAL || u->action == RELABEL_DROPEQUAL) &&
		    !dflt_repl)
			why = "takes no replacement";
		if (!why && (u->action == RELABEL_KEEPEQUAL || u->action == RELABEL_DROPEQUAL) &&
		    !dflt_regex)
			why = "takes no regex";
		if (!why && (u->action == RELABEL_LABELDROP || u->action == RELABEL_LABELKEEP) &&
		    (s->nsource || (s->target_label && s->target_label[0]) || !dflt_repl))
			why = "takes only a regex (no source_labels, target_label or replacement)";
		if (!why && u->action == RELABEL_LABELMAP && !strchr(u->replacement, '$') &&
		    !str_is_label_name(u->replacement))
			why = "replacement is not a valid label name";
		if (why) {
			str_errf(err, errlen, "relabel rule %zu: action %s %s", i, action_names[a], why);
			rc = GPULSE_EINVAL;
			goto out;
		}
	}
out:
	if (rc) {
		relabel_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void relabel_set_clear(struct relabel_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->name[i]);
		free(s->value[i]);
	}
	s->n = 0;
}

static ssize_t set_find(const struct relabel_set *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

static const char *set_get(const struct relabel_set *s, const char *name)
{
	ssize_t i = set_find(s, name);
	return i < 0 ? "" : s->value[i];
}

static void set_del(struct relabel_set *s, size_t i)
{
	free(s->name[i]);
	free(s->value[i]);
	memmove(&s->name[i], &s->name[i + 1], (s->n - i - 1) * sizeof s->name[0]);
	memmove(&s->value[i], &s->value[i + 1], (s->n - i - 1) * sizeof s->value[0]);
	s->n--;
}

/* Set name=value (an empty value removes the label, as in Prometheus). */
static int set_put(struct relabel_set *s, const char *name, const char *value)
{
	ssize_t i = set_find(s, name);
	if (!value[0]) {
		if (i >= 0)
			set_del(s, (size_t)i);
		return 0;
	}
	char *v = strdup(value);
	if (!v)
		return GPULSE_ENOMEM;
	if (i >= 0) {
		free(s->value[i]);
		s->value[i] = v;
		return 0;
	}
	if (s->n >= RELABEL_MAX_LABELS) {
		free(v);
		return GPULSE_ELIMIT;
	}
	char *nm = strdup(name);
	if (!nm) {
		free(v);
		return GPULSE_ENOMEM;
	}
	s->name[s->n] = nm;
	s->value[s->n] = v;
	s->n++;
	return 0;
}

/* Prometheus's sum64(md5(value)): the digest's last eight bytes, big-endian
 * (Go drops the shifts of the first eight past 64 bits). */
static uint64_t hash_mod(const char *v, uint64_t modulus)
{
	unsigned char d[16];
	gnutls_hash_fast(GNUTLS_DIG_MD5, v, strlen(v), d);
	uint64_t s = 0;
	for (int i = 8; i < 16; i++)
		s = s << 8 | d[i];
	return s % modulus;
}

static int label_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void set_sort(struct relabel_set *s)
{
	/* Sort name and value together: pair them in one array of indexes. */
	struct { char *n, *v; } tmp[RELABEL_MAX_LABELS];
	for (size_t i = 0; i < s->n; i++) {
		tmp[i].n = s->name[i];
		tmp[i].v = s->value[i];
	}
	qsort(tmp, s->n, sizeof tmp[0], label_cmp);
	for (size_t i = 0; i < s->n; i++) {
		s->name[i] = tmp[i].n;
		s->value[i] = tmp[i].v;
	}
}

/* One rule; *keep false when it drops the series. */
static int apply_rule(const struct rule *u, struct relabel_set *s, bool *keep)
{
	struct buf val, tmp;
	buf_init(&val, 1 << 20);
	buf_init(&tmp, 1 << 20);
	struct rx_span spstack[8];
	struct rx_span *sp = u->nspan <= 8 ? spstack : calloc(u->nspan, sizeof *sp);
	int rc = 0;
	if (!sp)
		return GPULSE_ENOMEM;
	for (size_t j = 0; j < u->nsource; j++) {
		if (j)
			buf_puts(&val, u->separator);
		buf_puts(&val, set_get(s, u->sources[j]));
	}
	if ((rc = buf_reserve(&val, 0)))
		goto out;
	bool found = false;
	switch (u->action) {
	case RELABEL_KEEP:
	case RELABEL_DROP:
		if ((rc = rx_match(u->re, val.data, val.len, &found)))
			goto out;
		if (found == (u->action == RELABEL_DROP))
			*keep = false;
		break;
	case RELABEL_KEEPEQUAL:
	case RELABEL_DROPEQUAL: {
		bool eq = strcmp(val.data, set_get(s, u->target)) == 0;
		if (eq == (u->action == RELABEL_DROPEQUAL))
			*keep = false;
		break;
	}
	case RELABEL_REPLACE: {
		if ((rc = rx_exec(u->re, val.data, val.len, 0, sp, u->nspan, &found)))
			goto out;
		if (!found)
			break;
		if ((rc = rx_expand(u->re, &tmp, u->target, val.data, sp, u->nspan)) ||
		    (rc = buf_reserve(&tmp, 0)))
			goto out;
		if (!str_is_label_name(tmp.data))
			break;   /* Prometheus skips a target that expands to no label name */
		size_t tlen = tmp.len;
		if ((rc = rx_expand(u->re, &tmp, u->replacement, val.data, sp, u->nspan)) ||
		    (rc = buf_reserve(&tmp, 0)))
			goto out;
		char *target = strndup(tmp.data, tlen);
		if (!target) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		rc = set_put(s, target, tmp.data + tlen);
		free(target);
		break;
	}
	case RELABEL_LOWERCASE:
	case RELABEL_UPPERCASE:
		for (size_t i = 0; i < val.len; i++)
			val.data[i] = (char)(u->action == RELABEL_LOWERCASE
					     ? tolower((unsigned char)val.data[i])
					     : toupper((unsigned char)val.data[i]));
		rc = set_put(s, u->target, val.data);
		break;
	case RELABEL_HASHMOD: {
		char num[32];
		snprintf(num, sizeof num, "%llu", (unsigned long long)hash_mod(val.data, u->modulus));
		rc = set_put(s, u->target, num);
		break;
	}
	case RELABEL_LABELMAP: {
		/* Names are matched against the set as it was before the rule. */
		size_t n0 = s->n;
		char *names[RELABEL_MAX_LABELS], *values[RELABEL_MAX_LABELS];
		for (size_t i = 0; i < n0; i++) {
			names[i] = s->name[i];
			values[i] = s->value[i];
		}
		char **dup_n = calloc(n0 ? n0 : 1, sizeof *dup_n);
		char **dup_v = calloc(n0 ? n0 : 1, sizeof *dup_v);
		if (!dup_n || !dup_v) {
			free(dup_n);
			free(dup_v);
			rc = GPULSE_ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < n0; i++) {
			dup_n[i] = strdup(names[i]);
			dup_v[i] = strdup(values[i]);
		}
		for (size_t i = 0; i < n0 && !rc; i++) {
			if (!dup_n[i] || !dup_v[i]) {
				rc = GPULSE_ENOMEM;
				break;
			}
			if ((rc = rx_exec(u->re, dup_n[i], strlen(dup_n[i]), 0, sp, u->nspan, &found)) ||
			    !found)
				continue;
			buf_reset(&tmp);
			if ((rc = rx_expand(u->re, &tmp, u->replacement, dup_n[i], sp, u->nspan)) ||
			    (rc = buf_reserve(&tmp, 0)))
				break;
			rc = set_put(s, tmp.data, dup_v[i]);
		}
		for (size_t i = 0; i < n0; i++) {
			free(dup_n[i]);
			free(dup_v[i]);
		}
		free(dup_n);
		free(dup_v);
		break;
	}
	case RELABEL_LABELDROP:
	case RELABEL_LABELKEEP:
		for (size_t i = 0; i < s->n;) {
			if ((rc = rx_match(u->re, s->name[i], strlen(s->name[i]), &found)))
				goto out;
			if (found == (u->action == RELABEL_LABELDROP))
				set_del(s, i);
			else
				i++;
		}
		break;
	}
out:
	buf_free(&val);
	buf_free(&tmp);
	if (sp != spstack)
		free(sp);
	return rc;
}

int relabel_apply(const struct relabel *r, const struct label *in, size_t n,
		  struct relabel_set *out, bool *keep)
{
	relabel_set_clear(out);
	*keep = false;
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		rc = set_put(out, in[i].name, in[i].value);
	bool k = true;
	for (size_t i = 0; r && i < r->n && k && !rc; i++)
		rc = apply_rule(&r->rules[i], out, &k);
	if (rc) {
		relabel_set_clear(out);
		return rc;
	}
	set_sort(out);
	*keep = k && set_find(out, "__name__") >= 0;
	return 0;
}
