/* RE2's dialect on PCRE2; see rx.h and docs/internals/regex.md.
 *
 * Why a translator and not PCRE2 alone: PCRE2 accepts far more than RE2
 * (backreferences, lookaround, recursion, verbs such as (*LIMIT_MATCH=)
 * that would lift the cost guard) and reads some of RE2's syntax
 * differently (\v is a class in PCRE2 and a character in RE2, \s
 * includes \v, \12 may be a backreference, {,n} changed meaning in
 * 10.43). So the pattern is parsed once here, as Go's regexp/syntax
 * parses it, refused with Go's message where Go refuses it, and written
 * out in a form that means the same to PCRE2: literals escaped, groups
 * either plain captures or (?:, names kept in our own table. PCRE2 then
 * only ever sees a small, regular subset of its syntax.
 *
 * Why one file: one translator: Go's regexp/syntax parser and the writer
 * of its tree as PCRE2 syntax share the private parse tree (struct frame,
 * rep, altgroup) and the cost guard's counters. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "common/rx.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "common/str.h"
#include "common/utf8.h"

/* The translation's bounds, never reached: a byte of pattern becomes at
 * most 23 of PCRE2's (\S in a class), so only memory can fail them. */
#define RX_OUT_MAX (48 * (size_t)RX_MAX_PATTERN + 64)
#define RX_BUF_MAX ((size_t)RX_MAX_PATTERN + 64)

struct rx_name {
	char *name;
	int index;
};

struct rx {
	pcre2_code *code;  /* for rx_match: whether it matches */
	pcre2_code *xcode; /* for rx_exec: Go's submatches (== code
				    * unless the pattern has a loop whose
				    * body can match empty) */
	pcre2_match_context *mctx;
	size_t ngroups;
	uint32_t *gmap;               /* user group i -> xcode's group; NULL: same */
	uint32_t xgroups;             /* xcode's capturing groups */
	const char *exec_unsupported; /* why rx_exec refuses, or NULL */
	struct rx_name *names;
	size_t nnames;
	bool jit;
};

static atomic_uint_fast64_t limit_hits;
/* rx_set_limits: the match limit of patterns compiled from now on, and
 * the DFA matcher's workspace in ints. */
static atomic_uint_fast32_t match_limit = RX_MATCH_LIMIT;
static atomic_size_t dfa_workspace = RX_DFA_WORKSPACE;

uint64_t rx_limit_hits(void)
{
	return atomic_load_explicit(&limit_hits, memory_order_relaxed);
}

void rx_set_limits(uint32_t limit, size_t workspace_ints)
{
	atomic_store_explicit(&match_limit, limit ? limit : RX_MATCH_LIMIT, memory_order_relaxed);
	atomic_store_explicit(&dfa_workspace, workspace_ints ? workspace_ints : RX_DFA_WORKSPACE,
			      memory_order_relaxed);
}

/* ---- the translator -------------------------------------------------------- */

enum last { L_NONE, L_ATOM, L_REPEAT, L_LAZY };

struct frame {
	long maxc; /* the largest counted-repetition product inside */
	bool capture;
	size_t out_open; /* where the group starts in out */
	size_t content;  /* where its content starts in out */
	bool cat_null;   /* the current alternative can match empty so far */
	bool alt_null;   /* a finished alternative can match empty */
	bool has_alt;
};

/* Where Go's compiled program has a choice point (regexp/syntax's
 * InstAlt), recorded while translating so that those inside a loop whose
 * body can match empty get a check (see "Submatches" below). */
enum rep_kind { R_NONE, R_QUEST, R_STAR, R_PLUS, R_COUNTED };

struct rep {
	enum rep_kind kind;
	bool nullable;     /* the operand can match empty */
	bool unbounded;    /* {n,} */
	bool group;        /* the operand is a group */
	size_t start, end; /* the operand in out */
	size_t cend;       /* a group's content end (its ')') */
	int depth;         /* the operand's nesting depth */
};

struct altgroup {
	size_t start, end; /* the content in out */
	int depth;
};

struct tr {
	const char *p;
	size_t n, i;
	size_t base; /* bytes before the caller's pattern in p */
	struct buf out;
	char *err;
	size_t errlen;
	enum last last;
	long last_cost;    /* the product of the atom just parsed */
	size_t last_start; /* where its text starts in the pattern, for the error */
	size_t last_out;   /* and in out */
	bool last_null;    /* it can match empty */
	bool last_group;
	size_t last_cend; /* a group's ')' in out */
	struct rep *reps;
	size_t nreps, capreps;
	struct altgroup *alts;
	size_t nalts, capalts;
	size_t *capopen; /* each capturing group's '(' in out */
	size_t capcap;
	struct frame st[RX_MAX_NESTING + 1];
	int depth;
	size_t ngroups;
	struct rx_name *names;
	size_t nnames, capnames;
	int rc;
};

static int fail(struct tr *t, size_t at, const char *what, const char *construct, size_t clen)
{
	if (t->rc)
		return t->rc;
	char quoted[80];
	size_t q = clen < 60 ? clen : 60;
	snprintf(quoted, sizeof quoted, "%.*s%s", (int)q, construct, clen > q ? "..." : "");
	str_errf(t->err, t->errlen, "error parsing regexp: %s: `%s` at byte %zu", what, quoted,
		 at >= t->base ? at - t->base + 1 : 1);
	t->rc = GPULSE_EINVAL;
	return t->rc;
}

static int failmsg(struct tr *t, size_t at, const char *msg)
{
	if (t->rc)
		return t->rc;
	str_errf(t->err, t->errlen, "error parsing regexp: %s at byte %zu", msg,
		 at >= t->base ? at - t->base + 1 : 1);
	t->rc = GPULSE_EINVAL;
	return t->rc;
}

static bool is_alnum(unsigned c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int hexval(unsigned c)
{
	if (c >= '0' && c <= '9')
		return (int)(c - '0');
	if (c >= 'a' && c <= 'f')
		return (int)(c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (int)(c - 'A' + 10);
	return -1;
}

static void emit(struct tr *t, const char *s)
{
	buf_puts(&t->out, s);
}

/* One code point as PCRE2 reads a literal in any context. */
static void emit_cp(struct tr *t, unsigned long cp)
{
	if (cp < 0x80 && is_alnum((unsigned)cp))
		buf_putc(&t->out, (char)cp);
	else if (cp > 0x20 && cp < 0x7f)
		buf_printf(&t->out, "\\%c", (char)cp);
	else
		buf_printf(&t->out, "\\x{%lx}", cp);
}

/* Decode the UTF-8 character at t->i into *cp; refuse a malformed one. */
static int next_utf8(struct tr *t, unsigned long *cp, size_t *len)
{
	const unsigned char *s = (const unsigned char *)t->p + t->i;
	size_t l = utf8_seq_len(s);
	if (l == 0)
		return failmsg(t, t->i, "invalid UTF-8");
	unsigned long c = s[0];
	if (l > 1) {
		c = s[0] & (0x7f >> l);
		for (size_t k = 1; k < l; k++)
			c = (c << 6) | (s[k] & 0x3f);
	}
	*cp = c;
	*len = l;
	return 0;
}

/* Names of the escapes PCRE2 knows and RE2 refuses, so the error says
 * what was asked for. */
static const char *escape_name(char c)
{
	switch (c) {
	case 'C': return "any byte";
	case 'K': return "match reset";
	case 'G': return "start of match";
	case 'Z': return "end or before final newline; RE2 has \\z";
	case 'R': return "newline sequence";
	case 'X': return "grapheme cluster";
	case 'h':
	case 'H': return "horizontal space";
	case 'V': return "vertical space";
	case 'N': return "not a newline";
	case 'g':
	case 'k': return "backreference";
	case 'e': return "escape character; use \\x1b";
	case 'c': return "control character; use \\x";
	case 'o': return "octal; use \\0nn";
	case 'u':
	case 'U':
	case 'l':
	case 'L': return "case conversion";
	case 'E': return "\\E without \\Q";
	default: return NULL;
	}
}

enum esc_kind { E_CHAR, E_CLASS, E_ASSERT };

/* Parse the escape at t->i (a '\\') as Go's parseEscape and
 * parsePerlClassEscape do. A single character goes to *cp (E_CHAR); a
 * class (\d, \pL, ...) is written to `cls` as PCRE2 text usable inside
 * or outside brackets depending on `in_class` (E_CLASS); an assertion
 * (\b, \A, ...) likewise (E_ASSERT, only outside classes). */
static int parse_escape(struct tr *t, bool in_class, enum esc_kind *kind, unsigned long *cp,
			struct buf *cls)
{
	size_t at = t->i;
	if (at + 1 >= t->n)
		return failmsg(t, at, "trailing backslash at end of expression");
	unsigned char c = (unsigned char)t->p[at + 1];
	t->i = at + 2;
	*kind = E_CHAR;
	switch (c) {
	case 'a': *cp = 7; return 0;
	case 'f': *cp = 12; return 0;
	case 't': *cp = 9; return 0;
	case 'n': *cp = 10; return 0;
	case 'r': *cp = 13; return 0;
	case 'v': *cp = 11; return 0;
	case '1':
	case '2':
	case '3':
	case '4':
	case '5':
	case '6':
	case '7':
		if (t->i >= t->n || t->p[t->i] < '0' || t->p[t->i] > '7')
			return fail(t, at,
				    "invalid escape sequence (backreferences are not supported)",
				    t->p + at, 2);
		/* An octal escape of two or three digits. */
		__attribute__((fallthrough));
	case '0': {
		unsigned long v = c - '0';
		for (int k = 1; k < 3 && t->i < t->n && t->p[t->i] >= '0' && t->p[t->i] <= '7'; k++)
			v = v * 8 + (unsigned long)(t->p[t->i++] - '0');
		*cp = v;
		return 0;
	}
	case 'x': {
		if (t->i >= t->n)
			return fail(t, at, "invalid escape sequence", t->p + at, 2);
		if (t->p[t->i] == '{') {
			size_t j = t->i + 1;
			unsigned long v = 0;
			int nd = 0;
			while (j < t->n && hexval((unsigned char)t->p[j]) >= 0) {
				v = v * 16 + (unsigned long)hexval((unsigned char)t->p[j]);
				if (v > 0x10FFFF)
					break;
				j++;
				nd++;
			}
			if (nd == 0 || j >= t->n || t->p[j] != '}' || v > 0x10FFFF)
				return fail(t, at, "invalid escape sequence", t->p + at,
					    (j < t->n ? j + 1 : t->n) - at);
			t->i = j + 1;
			*cp = v;
			return 0;
		}
		if (t->i + 1 >= t->n || hexval((unsigned char)t->p[t->i]) < 0 ||
		    hexval((unsigned char)t->p[t->i + 1]) < 0)
			return fail(t, at, "invalid escape sequence", t->p + at,
				    t->i + 2 <= t->n ? 4 : t->n - at);
		*cp = (unsigned long)(hexval((unsigned char)t->p[t->i]) * 16 +
				      hexval((unsigned char)t->p[t->i + 1]));
		t->i += 2;
		return 0;
	}
	case 'd':
	case 'D':
	case 'w':
	case 'W':
		*kind = E_CLASS;
		/* ASCII in both: PCRE2 runs without PCRE2_UCP. */
		buf_printf(cls, "\\%c", c);
		return 0;
	case 's':
		*kind = E_CLASS;
		buf_puts(cls, in_class ? "\\t\\n\\f\\r\\x{20}" : "[\\t\\n\\f\\r\\x{20}]");
		return 0;
	case 'S':
		*kind = E_CLASS;
		/* RE2's \S excludes \t\n\f\r and space, not \v as PCRE2's does. */
		buf_puts(cls, in_class ? "\\x{0}-\\x{8}\\x{b}\\x{e}-\\x{1f}\\x{21}-\\x{10ffff}"
				       : "[\\x{0}-\\x{8}\\x{b}\\x{e}-\\x{1f}\\x{21}-\\x{10ffff}]");
		return 0;
	case 'p':
	case 'P': {
		*kind = E_CLASS;
		size_t j = t->i;
		if (j >= t->n)
			return fail(t, at, "invalid character class range", t->p + at, 2);
		if (t->p[j] != '{') {
			unsigned char l = (unsigned char)t->p[j];
			if (!((l >= 'A' && l <= 'Z') || (l >= 'a' && l <= 'z')))
				return fail(t, at, "invalid character class range", t->p + at, 3);
			buf_printf(cls, "\\%c%c", c, l);
			t->i = j + 1;
			return 0;
		}
		size_t k = j + 1;
		bool neg = k < t->n && t->p[k] == '^';
		if (neg)
			k++;
		size_t name = k;
		while (k < t->n && (is_alnum((unsigned char)t->p[k]) || t->p[k] == '_'))
			k++;
		if (k >= t->n || t->p[k] != '}' || k == name)
			return fail(t, at, "invalid character class range", t->p + at,
				    (k < t->n ? k + 1 : t->n) - at);
		bool negate = (c == 'P') != neg;
		buf_printf(cls, "\\%c{%.*s}", negate ? 'P' : 'p', (int)(k - name), t->p + name);
		t->i = k + 1;
		return 0;
	}
	case 'b':
	case 'B':
	case 'A':
	case 'z':
		if (in_class)
			return fail(t, at, "invalid escape sequence", t->p + at, 2);
		*kind = E_ASSERT;
		buf_printf(cls, "\\%c", c);
		return 0;
	default: break;
	}
	if (c < 0x80 && !is_alnum(c)) {
		*cp = c;
		return 0;
	}
	const char *why = escape_name((char)c);
	char what[96];
	snprintf(what, sizeof what, "invalid escape sequence%s%s%s", why ? " (" : "",
		 why ? why : "", why ? ")" : "");
	return fail(t, at, what, t->p + at,
		    c < 0x80 ? 2 : 1 + utf8_seq_len((const unsigned char *)t->p + at + 1));
}

static const char *const posix_classes[] = {"alnum", "alpha", "ascii", "blank", "cntrl",
					    "digit", "graph", "lower", "print", "punct",
					    "space", "upper", "word",  "xdigit"};

/* One character of a class for a range end: a literal or a single-char
 * escape. Anything else (a class escape) goes to `cls` and *is_class. */
static int class_char(struct tr *t, unsigned long *cp, bool *is_class, struct buf *cls)
{
	*is_class = false;
	if (t->p[t->i] == '\\') {
		enum esc_kind k;
		if (parse_escape(t, true, &k, cp, cls))
			return t->rc;
		if (cls->failed)
			return t->rc = GPULSE_ENOMEM;
		*is_class = k != E_CHAR;
		return 0;
	}
	size_t l;
	if (next_utf8(t, cp, &l))
		return t->rc;
	t->i += l;
	return 0;
}

/* A bracketed class at t->i ('['), as Go's parseClass. */
static int parse_class(struct tr *t)
{
	size_t at = t->i;
	t->i++;
	emit(t, "[");
	if (t->i < t->n && t->p[t->i] == '^') {
		emit(t, "^");
		t->i++;
	}
	bool first = true;
	struct buf cls;
	buf_init(&cls, RX_BUF_MAX);
	while (t->i < t->n && (t->p[t->i] != ']' || first)) {
		first = false;
		/* [:alpha:] and [:^alpha:] */
		if (t->p[t->i] == '[' && t->i + 1 < t->n && t->p[t->i + 1] == ':') {
			const char *end = NULL;
			for (size_t k = t->i + 2; k + 1 < t->n; k++)
				if (t->p[k] == ':' && t->p[k + 1] == ']') {
					end = t->p + k;
					break;
				}
			if (end) {
				const char *name = t->p + t->i + 2;
				bool neg = *name == '^';
				if (neg)
					name++;
				size_t nl = (size_t)(end - name);
				bool known = false;
				for (size_t k = 0; k < sizeof posix_classes / sizeof *posix_classes;
				     k++)
					if (strlen(posix_classes[k]) == nl &&
					    !memcmp(posix_classes[k], name, nl))
						known = true;
				size_t clen = (size_t)(end + 2 - (t->p + t->i));
				if (!known) {
					buf_free(&cls);
					return fail(t, t->i, "invalid character class range",
						    t->p + t->i, clen);
				}
				buf_append(&t->out, t->p + t->i, clen);
				t->i += clen;
				continue;
			}
		}
		unsigned long lo, hi;
		bool lo_class, hi_class;
		size_t item = t->i;
		buf_reset(&cls);
		if (class_char(t, &lo, &lo_class, &cls)) {
			buf_free(&cls);
			return t->rc;
		}
		if (lo_class) {
			buf_append(&t->out, cls.data, cls.len);
			continue;
		}
		hi = lo;
		if (t->i + 1 < t->n && t->p[t->i] == '-' && t->p[t->i + 1] != ']') {
			t->i++;
			buf_reset(&cls);
			if (class_char(t, &hi, &hi_class, &cls)) {
				buf_free(&cls);
				return t->rc;
			}
			if (hi_class || hi < lo) {
				buf_free(&cls);
				return fail(t, item, "invalid character class range", t->p + item,
					    t->i - item);
			}
		}
		emit_cp(t, lo);
		if (hi != lo) {
			emit(t, "-");
			emit_cp(t, hi);
		}
	}
	buf_free(&cls);
	if (t->i >= t->n)
		return fail(t, at, "missing closing ]", t->p + at, t->n - at);
	t->i++;
	emit(t, "]");
	return 0;
}

static void fold_atom(struct tr *t)
{
	struct frame *f = &t->st[t->depth];
	if (t->last != L_NONE && t->last_cost > f->maxc)
		f->maxc = t->last_cost;
	if (t->last != L_NONE && !t->last_null)
		f->cat_null = false;
}

static void begin_atom(struct tr *t, long cost, bool nullable)
{
	fold_atom(t);
	t->last = L_ATOM;
	t->last_cost = cost;
	t->last_start = t->i;
	t->last_out = t->out.len;
	t->last_null = nullable;
	t->last_group = false;
}

/* Grow *v (of *cap elements of size sz) to hold one more. */
static int grow(void **v, size_t *cap, size_t n, size_t sz)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? 2 * *cap : 8;
	void *nv = realloc(*v, c * sz);
	if (!nv)
		return GPULSE_ENOMEM;
	*v = nv;
	*cap = c;
	return 0;
}

/* "{n}", "{n,}", "{n,m}" at t->i: true with the bounds (max -1: none)
 * and t->i past it; false (nothing consumed) when it is a literal '{'. */
static bool parse_count(struct tr *t, long *min, long *max, size_t *end)
{
	size_t j = t->i + 1;
	long lo = 0, hi;
	int nd = 0;
	while (j < t->n && t->p[j] >= '0' && t->p[j] <= '9') {
		if (lo < 100000)
			lo = lo * 10 + (t->p[j] - '0');
		j++;
		nd++;
	}
	if (nd == 0 || j >= t->n)
		return false;
	hi = lo;
	if (t->p[j] == ',') {
		j++;
		if (j < t->n && t->p[j] == '}') {
			hi = -1;
		} else {
			hi = 0;
			nd = 0;
			while (j < t->n && t->p[j] >= '0' && t->p[j] <= '9') {
				if (hi < 100000)
					hi = hi * 10 + (t->p[j] - '0');
				j++;
				nd++;
			}
			if (nd == 0)
				return false;
		}
	}
	if (j >= t->n || t->p[j] != '}')
		return false;
	*min = lo;
	*max = hi;
	*end = j + 1;
	return true;
}

static int repetition(struct tr *t, size_t at, size_t len, long min, long max)
{
	if (t->last == L_NONE)
		return fail(t, at, "missing argument to repetition operator", t->p + at, len);
	if (t->last == L_REPEAT || t->last == L_LAZY) {
		size_t from = t->last_start;
		return fail(t, from, "invalid nested repetition operator", t->p + from,
			    at + len - from);
	}
	if (min >= 0) {
		if (min > RX_MAX_REPEAT || max > RX_MAX_REPEAT || (max >= 0 && max < min))
			return fail(t, at, "invalid repeat count", t->p + at, len);
		long m = max < 0 ? min : max;
		if (m == 0)
			t->last_cost = 1;
		else if (t->last_cost * m > RX_MAX_REPEAT)
			return fail(t, at, "invalid repeat count", t->p + at, len);
		else
			t->last_cost *= m;
	}
	if (grow((void **)&t->reps, &t->capreps, t->nreps, sizeof *t->reps))
		return t->rc = GPULSE_ENOMEM;
	enum rep_kind kind;
	char op = t->p[at];
	long lo = min >= 0 ? min : op == '+' ? 1 : 0;
	long hi = min >= 0 ? max : op == '?' ? 1 : -1;
	if (lo == 0 && hi == 1)
		kind = R_QUEST;
	else if (lo == 0 && hi < 0)
		kind = R_STAR;
	else if (lo == 1 && hi < 0)
		kind = R_PLUS;
	else if (hi == lo && lo <= 1)
		kind = R_NONE;
	else
		kind = R_COUNTED;
	t->reps[t->nreps++] = (struct rep){.kind = kind,
					   .nullable = t->last_null,
					   .unbounded = hi < 0,
					   .group = t->last_group,
					   .start = t->last_out,
					   .end = t->out.len,
					   .cend = t->last_cend,
					   .depth = t->depth};
	if (lo == 0)
		t->last_null = true;
	t->last = L_REPEAT;
	t->last_start = at;
	buf_append(&t->out, t->p + at, len);
	return 0;
}

/* "(?" at t->i: flags, a non-capturing group, a named capture, or
 * something RE2 refuses. */
static int parse_perl_group(struct tr *t)
{
	size_t at = t->i;
	const char *s = t->p + at + 2;
	size_t left = t->n - at - 2;
	/* Named captures: (?P<name>re), and (?<name>re) as Go 1.22 and RE2 accept. */
	if ((left >= 2 && s[0] == 'P' && s[1] == '<') ||
	    (left >= 1 && s[0] == '<' && !(left >= 2 && (s[1] == '=' || s[1] == '!')))) {
		size_t k = s[0] == 'P' ? 2 : 1;
		size_t name = k;
		while (k < left && s[k] != '>')
			k++;
		if (k >= left)
			return fail(t, at, "invalid named capture", t->p + at, t->n - at);
		size_t nl = k - name;
		bool ok = nl > 0;
		for (size_t q = name; q < k; q++)
			if (!is_alnum((unsigned char)s[q]) && s[q] != '_')
				ok = false;
		if (!ok)
			return fail(t, at, "invalid named capture", t->p + at, k + 3);
		/* A name may repeat: Go before 1.22 (Prometheus 2.42's) accepts
		 * it, and $name gives the first such group that took part. */
		if (t->nnames == t->capnames) {
			size_t cap = t->capnames ? 2 * t->capnames : 4;
			struct rx_name *nn = realloc(t->names, cap * sizeof *nn);
			if (!nn)
				return t->rc = GPULSE_ENOMEM;
			t->names = nn;
			t->capnames = cap;
		}
		char *copy = strndup(s + name, nl);
		if (!copy)
			return t->rc = GPULSE_ENOMEM;
		t->names[t->nnames++] = (struct rx_name){copy, (int)t->ngroups + 1};
		t->i = at + 2 + k + 1;
		return 1; /* a capturing group opens */
	}
	if (left >= 1) {
		const char *what = NULL;
		switch (s[0]) {
		case '=': what = "lookahead"; break;
		case '!': what = "negative lookahead"; break;
		case '<': what = s[1] == '=' ? "lookbehind" : "negative lookbehind"; break;
		case '>': what = "atomic group"; break;
		case '#': what = "comment"; break;
		case '|': what = "branch reset"; break;
		case '(': what = "conditional"; break;
		case 'R':
		case '+':
		case '&': what = "recursion"; break;
		case 'C': what = "callout"; break;
		case 'P':
			what = left >= 2 && s[1] == '='   ? "backreference"
			       : left >= 2 && s[1] == '>' ? "recursion"
							  : NULL;
			break;
		default:
			if (s[0] >= '0' && s[0] <= '9')
				what = "recursion";
			else if (s[0] == '-' && left >= 2 && s[1] >= '0' && s[1] <= '9')
				what = "recursion";
			break;
		}
		if (what) {
			char msg[80];
			snprintf(msg, sizeof msg, "invalid or unsupported Perl syntax (%s)", what);
			return fail(t, at, msg, t->p + at, s[0] == '<' || s[0] == 'P' ? 4 : 3);
		}
	}
	if (left >= 1 && s[0] == ':') {
		emit(t, "(?:");
		t->i = at + 3;
		return 2;
	}
	/* Flags: (?imsU-imsU) or (?imsU-imsU:re), as Go's parsePerlFlags. */
	size_t k = 0;
	bool neg = false, any = false, after_neg = false;
	while (k < left) {
		char c = s[k];
		if (c == 'i' || c == 'm' || c == 's' || c == 'U') {
			any = true;
			after_neg = false;
			k++;
			continue;
		}
		if (c == '-' && !neg) {
			neg = true;
			after_neg = true;
			k++;
			continue;
		}
		if ((c == ')' || c == ':') && any && !after_neg) {
			buf_append(&t->out, t->p + at, k + 3);
			t->i = at + 2 + k + 1;
			return c == ':' ? 2 : 3; /* 2: a group opens; 3: flags only */
		}
		break;
	}
	return fail(t, at, "invalid or unsupported Perl syntax", t->p + at,
		    k + 3 <= t->n - at ? k + 3 : t->n - at);
}

/* A group opens; out_open is where its text starts in out (before
 * "(?i:" that parse_perl_group already wrote). */
static int open_group(struct tr *t, bool capture, bool already_emitted, size_t out_open)
{
	if (t->depth >= RX_MAX_NESTING)
		return failmsg(t, t->i, "expression nests too deeply");
	begin_atom(t, 1, false);
	t->depth++;
	t->st[t->depth] = (struct frame){
		.maxc = 1, .capture = capture, .out_open = out_open, .cat_null = true};
	if (capture) {
		if (++t->ngroups > RX_MAX_GROUPS)
			return failmsg(t, t->i, "too many capturing groups");
		if (grow((void **)&t->capopen, &t->capcap, t->ngroups - 1, sizeof *t->capopen))
			return t->rc = GPULSE_ENOMEM;
		t->capopen[t->ngroups - 1] = t->out.len;
		emit(t, "(");
	} else if (!already_emitted) {
		emit(t, "(?:");
	}
	t->st[t->depth].content = t->out.len;
	t->last = L_NONE;
	return 0;
}

static int translate(struct tr *t)
{
	while (t->i < t->n && !t->rc) {
		unsigned char c = (unsigned char)t->p[t->i];
		size_t at = t->i;
		switch (c) {
		case '(':
			if (t->i + 1 < t->n && t->p[t->i + 1] == '?') {
				size_t group_at = t->i, out_at = t->out.len;
				int r = parse_perl_group(t);
				if (t->rc)
					return t->rc;
				if (r == 3) { /* flags for the rest of the group */
					fold_atom(t);
					t->last = L_NONE;
					break;
				}
				size_t save = t->i;
				t->i = group_at;
				open_group(t, r == 1, r == 2, out_at);
				t->i = save;
				t->last_start = group_at;
				break;
			}
			open_group(t, true, false, t->out.len);
			t->i++;
			break;
		case ')': {
			if (t->depth == 0)
				return fail(t, at, "unexpected )", t->p + at,
					    t->n - at < 60 ? t->n - at : 1);
			fold_atom(t);
			struct frame *f = &t->st[t->depth];
			long cost = f->maxc;
			bool nullable = f->alt_null || f->cat_null;
			if (f->has_alt) {
				if (grow((void **)&t->alts, &t->capalts, t->nalts, sizeof *t->alts))
					return t->rc = GPULSE_ENOMEM;
				t->alts[t->nalts++] = (struct altgroup){f->content, t->out.len,
									t->depth};
			}
			size_t open_out = f->out_open;
			t->depth--;
			t->last_cend = t->out.len;
			emit(t, ")");
			t->i++;
			t->last = L_ATOM;
			t->last_cost = cost;
			t->last_null = nullable;
			t->last_group = true;
			t->last_out = open_out;
			/* last_start stays at the group's opening for the error */
			break;
		}
		case '|': {
			fold_atom(t);
			struct frame *f = &t->st[t->depth];
			f->alt_null = f->alt_null || f->cat_null;
			f->cat_null = true;
			f->has_alt = true;
			t->last = L_NONE;
			emit(t, "|");
			t->i++;
			break;
		}
		case '*':
		case '+':
		case '?':
			if (c == '?' && t->last == L_REPEAT) {
				t->last = L_LAZY;
				emit(t, "?");
				t->i++;
				break;
			}
			repetition(t, at, 1, -1, -1);
			t->i++;
			break;
		case '{': {
			long min, max;
			size_t end;
			if (parse_count(t, &min, &max, &end)) {
				repetition(t, at, end - at, min, max);
				t->i = end;
				break;
			}
			begin_atom(t, 1, false);
			emit(t, "\\{");
			t->i++;
			break;
		}
		case '[':
			begin_atom(t, 1, false);
			parse_class(t);
			break;
		case '.':
			begin_atom(t, 1, false);
			emit(t, ".");
			t->i++;
			break;
		case '^':
			begin_atom(t, 1, true);
			emit(t, "^");
			t->i++;
			break;
		case '$':
			begin_atom(t, 1, true);
			emit(t, "$");
			t->i++;
			break;
		case '\\': {
			if (t->i + 1 < t->n && t->p[t->i + 1] == 'Q') {
				/* \Q...\E: literal text up to \E or the end. */
				t->i += 2;
				while (t->i < t->n && !t->rc) {
					if (t->p[t->i] == '\\' && t->i + 1 < t->n &&
					    t->p[t->i + 1] == 'E') {
						t->i += 2;
						break;
					}
					unsigned long cp;
					size_t l;
					size_t lit = t->i;
					if (next_utf8(t, &cp, &l))
						return t->rc;
					begin_atom(t, 1, false);
					t->last_start = lit;
					emit_cp(t, cp);
					t->i += l;
				}
				break;
			}
			enum esc_kind k;
			unsigned long cp;
			struct buf cls;
			buf_init(&cls, RX_BUF_MAX);
			begin_atom(t, 1, false);
			if (parse_escape(t, false, &k, &cp, &cls) == 0 && cls.failed)
				t->rc = GPULSE_ENOMEM;
			else if (!t->rc) {
				t->last_null = k == E_ASSERT;
				if (k == E_CHAR)
					emit_cp(t, cp);
				else
					buf_append(&t->out, cls.data, cls.len);
			}
			buf_free(&cls);
			break;
		}
		default: {
			unsigned long cp;
			size_t l;
			if (next_utf8(t, &cp, &l))
				return t->rc;
			begin_atom(t, 1, false);
			if (l == 1)
				emit_cp(t, cp);
			else
				buf_append(&t->out, t->p + t->i, l);
			t->i += l;
			break;
		}
		}
	}
	if (!t->rc && t->depth > 0)
		return fail(t, 0, "missing closing )", t->p, t->n);
	if (!t->rc && t->out.failed)
		t->rc = GPULSE_ENOMEM;
	return t->rc;
}

/* ---- submatches as Go reports them ---------------------------------------
 *
 * Go runs a pattern as a program of instructions and never lets one
 * path visit the same instruction twice at the same position (the
 * backtracker's visited bitmap, the NFA's thread set): a loop iteration
 * that matches empty, or anything that returns to a choice point without
 * consuming, is cut there and the next choice is tried. Which strings
 * match is the same either way; the submatches are not. PCRE2 instead
 * keeps an empty iteration and stops the loop, so (a*)+ on "aa" gives
 * $1 = "" where Go gives "aa", and (a*?)* gives "" where Go gives "aa".
 *
 * An epsilon cycle needs a loop whose body can match empty, so only such
 * loops' bodies (the "regions") are instrumented: each of Go's choice
 * points in them (an alternation's entry, ?, a loop's entry and the end
 * of each iteration) gets a callout naming empty capturing groups that
 * record where that choice point was last visited on the current path
 * (PCRE2 restores captures when it backtracks), then such a group. The
 * callout fails the path when one of them is the current position. The
 * instrumented program is used by rx_exec only; rx_match runs the plain
 * one. A counted repetition {n,m} in or around a region is copied by
 * PCRE2 with shared group numbers, so its copies could not be told apart:
 * rx_exec refuses those patterns (exec_unsupported). */

struct ins {
	size_t off;
	int open; /* 0: closes something (inner first), 1: opens (outer first) */
	int ord;
	const char *pre;
	int state; /* the choice point recorded, or -1 */
	const char *post;
	uint32_t slot; /* its recording group in xcode */
};

static int ins_cmp(const void *a, const void *b)
{
	const struct ins *x = a, *y = b;
	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	if (x->open != y->open)
		return x->open - y->open;
	return x->open ? x->ord - y->ord : y->ord - x->ord;
}

static bool is_region(const struct rep *r)
{
	return r->nullable &&
	       (r->kind == R_STAR || r->kind == R_PLUS || (r->kind == R_COUNTED && r->unbounded));
}

/* Whether [a, b) lies in the body of a region other than rep `self`. */
static bool in_region(const struct tr *t, size_t a, size_t b, const struct rep *self)
{
	for (size_t i = 0; i < t->nreps; i++) {
		const struct rep *r = &t->reps[i];
		if (r != self && is_region(r) && r->start <= a && b <= r->end)
			return true;
	}
	return false;
}

/* Build xcode's pattern in *x from t->out; *x stays empty when the
 * pattern needs none. *why is set when rx_exec must refuse. */
static int instrument(struct tr *t, struct buf *x, uint32_t **gmap, uint32_t *xgroups,
		      const char **why)
{
	bool any = false;
	for (size_t i = 0; i < t->nreps; i++)
		any = any || is_region(&t->reps[i]);
	if (!any)
		return 0;
	for (size_t i = 0; i < t->nreps; i++) {
		const struct rep *r = &t->reps[i];
		if (r->kind != R_COUNTED)
			continue;
		for (size_t k = 0; k < t->nreps; k++) {
			const struct rep *q = &t->reps[k];
			if (is_region(q) && q->start < r->end && r->start < q->end) {
				*why = "a counted repetition {n,m} in or around a repetition that can "
				       "match empty";
				return 0;
			}
		}
	}
	size_t cap = 3 * t->nreps + 2 * t->nalts + 1, n = 0;
	struct ins *in = calloc(cap, sizeof *in);
	int rc = 0;
	if (!in)
		return GPULSE_ENOMEM;
	int nstates = 0;
	for (size_t i = 0; i < t->nalts; i++) {
		const struct altgroup *g = &t->alts[i];
		if (!in_region(t, g->start, g->end, NULL))
			continue;
		int s = nstates++;
		in[n++] = (struct ins){g->start, 1, 2 * g->depth, "", s, "(?:", 0};
		in[n++] = (struct ins){g->end, 0, 2 * g->depth, ")", -1, "", 0};
	}
	for (size_t i = 0; i < t->nreps; i++) {
		const struct rep *r = &t->reps[i];
		bool inside = in_region(t, r->start, r->end, r);
		bool own = is_region(r);
		if (r->kind == R_QUEST && inside) {
			in[n++] = (struct ins){r->start, 1, 2 * r->depth + 1, "", nstates++, "", 0};
		} else if (r->kind == R_STAR || r->kind == R_PLUS) {
			if (!inside && !own)
				continue;
			/* Go: x* over a body that cannot match empty is one choice point
			 * visited at the entry and after each iteration; otherwise
			 * (x+)?, two of them; x+ has only the one after each iteration. */
			int entry = -1, end = nstates++;
			if (r->kind == R_STAR && inside)
				entry = r->nullable ? nstates++ : end;
			if (entry >= 0 || !r->group)
				in[n++] = (struct ins){r->start, 1,     2 * r->depth + 1,
						       "",       entry, r->group ? "" : "(?:",
						       0};
			if (r->group)
				in[n++] = (struct ins){r->cend, 0, 2 * (r->depth + 1) - 1, "", end,
						       "",      0};
			else
				in[n++] = (struct ins){r->end, 0, 2 * r->depth + 1, "", end,
						       ")",    0};
		}
	}
	qsort(in, n, sizeof *in, ins_cmp);
	/* Number the capturing groups of the final text in order. */
	*gmap = calloc(t->ngroups + 1, sizeof **gmap);
	if (!*gmap) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	uint32_t num = 0;
	size_t u = 0;
	for (size_t i = 0; i < n; i++) {
		while (u < t->ngroups && t->capopen[u] < in[i].off)
			(*gmap)[++u] = ++num;
		if (in[i].state >= 0)
			in[i].slot = ++num;
	}
	while (u < t->ngroups)
		(*gmap)[++u] = ++num;
	*xgroups = num;
	size_t from = 0;
	for (size_t i = 0; i < n; i++) {
		buf_append(x, t->out.data + from, in[i].off - from);
		from = in[i].off;
		buf_puts(x, in[i].pre);
		if (in[i].state >= 0) {
			buf_puts(x, "(?C{");
			const char *sep = "";
			for (size_t k = 0; k < n; k++)
				if (in[k].state == in[i].state) {
					buf_printf(x, "%s%u", sep, in[k].slot);
					sep = ",";
				}
			buf_puts(x, "})()");
		}
		buf_puts(x, in[i].post);
	}
	buf_append(x, t->out.data + from, t->out.len - from);
	if (x->failed)
		rc = GPULSE_ENOMEM;
out:
	free(in);
	return rc;
}

/* The check at one of Go's choice points: fail the path when one of the
 * groups recording it was set at the current position. */
static int choice_callout(pcre2_callout_block *cb, void *data)
{
	(void)data;
	if (!cb->callout_string)
		return 0;
	const char *p = (const char *)cb->callout_string;
	while (*p) {
		uint32_t g = 0;
		while (*p >= '0' && *p <= '9')
			g = g * 10 + (uint32_t)(*p++ - '0');
		if (*p == ',')
			p++;
		if (g > 0 && g < cb->capture_top && cb->offset_vector[2 * g] != PCRE2_UNSET &&
		    cb->offset_vector[2 * g] == cb->current_position)
			return 1;
	}
	return 0;
}

/* ---- compile and match -------------------------------------------------- */

static void free_names(struct rx_name *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i].name);
	free(names);
}

void rx_free(struct rx *r)
{
	if (!r)
		return;
	if (r->xcode != r->code)
		pcre2_code_free(r->xcode);
	pcre2_code_free(r->code);
	pcre2_match_context_free(r->mctx);
	free(r->gmap);
	free_names(r->names, r->nnames);
	free(r);
}

static void tr_init(struct tr *t, const char *p, size_t n, size_t base, char *err, size_t errlen)
{
	*t = (struct tr){.p = p, .n = n, .base = base, .err = err, .errlen = errlen};
	t->st[0].maxc = 1;
	t->st[0].cat_null = true;
	buf_init(&t->out, RX_OUT_MAX);
}

static void tr_free(struct tr *t)
{
	buf_free(&t->out);
	free_names(t->names, t->nnames);
	free(t->reps);
	free(t->alts);
	free(t->capopen);
	t->names = NULL;
	t->nnames = 0;
	t->reps = NULL;
	t->alts = NULL;
	t->capopen = NULL;
}

int rx_compile(const char *pattern, unsigned flags, struct rx **out, char *err, size_t errlen)
{
	*out = NULL;
	size_t n = strlen(pattern);
	if (n > RX_MAX_PATTERN) {
		str_errf(err, errlen,
			 "error parsing regexp: expression too large (%zu bytes, at most %d)", n,
			 RX_MAX_PATTERN);
		return GPULSE_ELIMIT;
	}
	struct tr t;
	char *wrapped = NULL;
	struct buf x;
	buf_init(&x, RX_OUT_MAX);
	int rc = 0;
	if (flags & RX_ANCHORED) {
		/* Prometheus compiles "^(?:" + re + ")$" as text, after parsing re
		 * alone: both must parse. So "\Qa.b" (its \Q runs to the end and
		 * takes the ")$") is refused as in Prometheus, "missing closing )". */
		tr_init(&t, pattern, n, 0, err, errlen);
		rc = translate(&t);
		tr_free(&t);
		if (rc)
			goto refused;
		wrapped = malloc(n + 7);
		if (!wrapped) {
			rc = GPULSE_ENOMEM;
			goto refused;
		}
		snprintf(wrapped, n + 7, "^(?:%s)$", pattern);
		tr_init(&t, wrapped, n + 6, 4, err, errlen);
	} else {
		tr_init(&t, pattern, n, 0, err, errlen);
	}
	rc = translate(&t);
	if (!rc && t.out.failed)
		rc = GPULSE_ENOMEM;
refused:
	if (rc == GPULSE_ENOMEM)
		str_errf(err, errlen, "error parsing regexp: out of memory");
	struct rx *r = NULL;
	pcre2_compile_context *cctx = NULL;
	if (rc)
		goto out;
	r = calloc(1, sizeof *r);
	cctx = pcre2_compile_context_create(NULL);
	if (!r || !cctx) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	rc = instrument(&t, &x, &r->gmap, &r->xgroups, &r->exec_unsupported);
	if (rc)
		goto out;
	pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
	pcre2_set_parens_nest_limit(cctx, RX_MAX_NESTING + 2);
	int ec;
	PCRE2_SIZE eoff;
	/* No PCRE2_UCP: \d, \w, \b and [[:alpha:]] are ASCII, as in RE2.
	 * No PCRE2_MATCH_INVALID_UTF: a subject is made valid first, as Go
	 * reads it (struct subject), and with it PCRE2 10.42's JIT lets \W
	 * and \D match no character above U+007F. */
	uint32_t opts = PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C;
	r->code = pcre2_compile((PCRE2_SPTR)(t.out.data ? t.out.data : ""), t.out.len, opts, &ec,
				&eoff, cctx);
	if (!r->code) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(ec, msg, sizeof msg);
		/* The translation is ours; what PCRE2 still refuses is an
		 * unknown \p name or a repetition of an assertion. */
		str_errf(err, errlen, "error parsing regexp: %s", (const char *)msg);
		rc = ec == PCRE2_ERROR_NOMEMORY ? GPULSE_ENOMEM : GPULSE_EINVAL;
		goto out;
	}
	r->jit = pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE) == 0;
	r->xcode = r->code;
	if (x.len) {
		/* No optimization that could skip a callout or a backtrack. */
		r->xcode = pcre2_compile((PCRE2_SPTR)x.data, x.len,
					 opts | PCRE2_NO_AUTO_POSSESS | PCRE2_NO_START_OPTIMIZE |
						 PCRE2_NO_DOTSTAR_ANCHOR,
					 &ec, &eoff, cctx);
		if (!r->xcode) {
			PCRE2_UCHAR msg[160];
			pcre2_get_error_message(ec, msg, sizeof msg);
			str_errf(err, errlen, "error parsing regexp: %s", (const char *)msg);
			rc = ec == PCRE2_ERROR_NOMEMORY ? GPULSE_ENOMEM : GPULSE_EINVAL;
			goto out;
		}
		pcre2_jit_compile(r->xcode, PCRE2_JIT_COMPLETE);
	}
	r->mctx = pcre2_match_context_create(NULL);
	if (!r->mctx) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	pcre2_set_callout(r->mctx, choice_callout, NULL);
	pcre2_set_match_limit(r->mctx,
			      (uint32_t)atomic_load_explicit(&match_limit, memory_order_relaxed));
	pcre2_set_depth_limit(r->mctx, RX_DEPTH_LIMIT);
	pcre2_set_heap_limit(r->mctx, RX_HEAP_LIMIT_KIB);
	r->ngroups = t.ngroups;
	r->names = t.names;
	r->nnames = t.nnames;
	t.names = NULL;
	t.nnames = 0;
	*out = r;
	r = NULL;
out:
	pcre2_compile_context_free(cctx);
	buf_free(&x);
	if (wrapped || !(flags & RX_ANCHORED))
		tr_free(&t);
	free(wrapped);
	rx_free(r);
	return rc;
}

const char *rx_exec_unsupported(const struct rx *r)
{
	return r->exec_unsupported;
}

size_t rx_groups(const struct rx *r)
{
	return r->ngroups;
}

int rx_group_index(const struct rx *r, const char *name, size_t len)
{
	for (size_t i = 0; i < r->nnames; i++)
		if (strlen(r->names[i].name) == len && !memcmp(r->names[i].name, name, len))
			return r->names[i].index;
	return -1;
}

/* One match-data block per thread for rx_match, which needs no
 * captures: PCRE2 keeps its backtracking frames there, so reusing it
 * saves an allocation per series matched. */
static pthread_key_t md_key;
static pthread_once_t md_once = PTHREAD_ONCE_INIT;

static void md_free(void *p)
{
	pcre2_match_data_free(p);
}

static void md_init(void)
{
	pthread_key_create(&md_key, md_free);
}

static int run(const struct rx *r, const pcre2_code *code, const char *s, size_t len, size_t start,
	       pcre2_match_data *md, bool *found)
{
	*found = false;
	/* subject_open checked the whole subject: only an offset inside a
	 * character is left for PCRE2 to refuse. */
	uint32_t o = start == 0 ? PCRE2_NO_UTF_CHECK : 0;
	int m = pcre2_match(code, (PCRE2_SPTR)s, len, start, o, md, r->mctx);
	if (m == PCRE2_ERROR_JIT_STACKLIMIT)
		m = pcre2_match(code, (PCRE2_SPTR)s, len, start, o | PCRE2_NO_JIT, md, r->mctx);
	if (m >= 0) {
		*found = true;
		return 0;
	}
	if (m == PCRE2_ERROR_NOMATCH)
		return 0;
	if (m == PCRE2_ERROR_NOMEMORY)
		return GPULSE_ENOMEM;
	/* MATCHLIMIT, DEPTHLIMIT, HEAPLIMIT and anything else: stopped
	 * (counted by the caller, once it gives up). */
	return GPULSE_ELIMIT;
}

/* Go reads a subject that is not UTF-8 one byte per bad byte, each as
 * U+FFFD (utf8.DecodeRuneInString): "a\xffb" matches a.b and a\x{FFFD}b.
 * PCRE2_MATCH_INVALID_UTF would let bad bytes match nothing, so such a
 * subject is matched as a copy with each bad byte replaced by U+FFFD's
 * three bytes, and offsets are mapped back. */
struct subject {
	const char *s; /* what PCRE2 matches */
	size_t len;
	char *copy;     /* owned, or NULL when s is the caller's */
	size_t *to_old; /* copy offset -> caller's offset */
	size_t *to_new; /* caller's offset -> copy offset */
};

/* Length of the well-formed UTF-8 sequence at p (n bytes left), or 0. */
static size_t seq_len(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	size_t l = c >= 0xc2 && c <= 0xdf   ? 2
		   : c >= 0xe0 && c <= 0xef ? 3
		   : c >= 0xf0 && c <= 0xf4 ? 4
					    : 0;
	if (l == 0 || l > n)
		return 0;
	for (size_t k = 1; k < l; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) ||
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))
		return 0;
	return l;
}

static int subject_open(struct subject *v, const char *s, size_t len)
{
	*v = (struct subject){.s = s, .len = len};
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while (i < len) {
		size_t l = seq_len(u + i, len - i);
		if (!l)
			break;
		i += l;
	}
	if (i == len)
		return 0;
	v->copy = malloc(3 * len + 1);
	v->to_old = malloc((3 * len + 1) * sizeof *v->to_old);
	v->to_new = malloc((len + 1) * sizeof *v->to_new);
	if (!v->copy || !v->to_old || !v->to_new)
		return GPULSE_ENOMEM;
	size_t j = 0;
	for (i = 0; i < len;) {
		size_t l = seq_len(u + i, len - i);
		v->to_new[i] = j;
		if (l) {
			for (size_t k = 0; k < l; k++) {
				v->to_old[j] = i;
				v->copy[j++] = s[i + k];
			}
			i += l;
		} else {
			for (size_t k = 0; k < 3; k++)
				v->to_old[j + k] = i;
			memcpy(v->copy + j, "\xef\xbf\xbd", 3);
			j += 3;
			i++;
		}
	}
	v->to_new[len] = j;
	v->to_old[j] = len;
	v->s = v->copy;
	v->len = j;
	return 0;
}

static void subject_close(struct subject *v)
{
	free(v->copy);
	free(v->to_old);
	free(v->to_new);
}

/* Whether it matches, by PCRE2's DFA matcher: it follows every path at
 * once, in time linear in the subject for a given pattern, as RE2 does,
 * where backtracking can take exponential time ((.|..)*X over a long
 * value). Slower than the JIT on ordinary patterns, so it only takes
 * over a match the backtracker gave up at its limit. Its workspace is
 * bounded; a pattern whose states do not fit still stops, counted. */
static int dfa_match(const struct rx *r, const char *s, size_t len, bool *matched)
{
	size_t ws_n = atomic_load_explicit(&dfa_workspace, memory_order_relaxed);
	int *ws = malloc(ws_n * sizeof *ws);
	pcre2_match_data *md = pcre2_match_data_create(1, NULL);
	int rc = 0;
	if (!ws || !md) {
		rc = GPULSE_ENOMEM;
		goto out;
	}
	int m = pcre2_dfa_match(r->code, (PCRE2_SPTR)s, len, 0, PCRE2_NO_UTF_CHECK, md, r->mctx, ws,
				ws_n);
	if (m >= 0)
		*matched = true;
	else if (m == PCRE2_ERROR_NOMEMORY)
		rc = GPULSE_ENOMEM;
	else if (m != PCRE2_ERROR_NOMATCH)
		rc = GPULSE_ELIMIT;
out:
	free(ws);
	pcre2_match_data_free(md);
	return rc;
}

int rx_match(const struct rx *r, const char *s, size_t len, bool *matched)
{
	*matched = false;
	pthread_once(&md_once, md_init);
	pcre2_match_data *md = pthread_getspecific(md_key);
	if (!md) {
		md = pcre2_match_data_create(1, NULL);
		if (!md)
			return GPULSE_ENOMEM;
		pthread_setspecific(md_key, md);
	}
	struct subject v;
	int rc = subject_open(&v, s, len);
	if (!rc)
		rc = run(r, r->code, v.s, v.len, 0, md, matched);
	if (rc == GPULSE_ELIMIT)
		rc = dfa_match(r, v.s, v.len, matched);
	if (rc == GPULSE_ELIMIT)
		atomic_fetch_add_explicit(&limit_hits, 1, memory_order_relaxed);
	subject_close(&v);
	return rc;
}

int rx_exec(const struct rx *r, const char *s, size_t len, size_t start, struct rx_span *sp,
	    size_t nsp, bool *found)
{
	*found = false;
	if (r->exec_unsupported)
		return GPULSE_ENOTSUP;
	uint32_t ng = r->gmap ? r->xgroups : (uint32_t)r->ngroups;
	pcre2_match_data *md = pcre2_match_data_create(ng + 1, NULL);
	struct subject v = {0};
	int rc = md ? subject_open(&v, s, len) : GPULSE_ENOMEM;
	if (!rc && v.copy && start <= len)
		start = v.to_new[start];
	else if (!rc && v.copy)
		start = v.len + 1;
	if (!rc)
		rc = run(r, r->xcode, v.s, v.len, start, md, found);
	if (!rc && *found) {
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		uint32_t have = pcre2_get_ovector_count(md);
		for (size_t i = 0; i < nsp; i++) {
			size_t g = r->gmap && i > 0 && i <= r->ngroups ? r->gmap[i] : i;
			if (i <= r->ngroups && g < have && ov[2 * g] != PCRE2_UNSET) {
				sp[i].start = (long)(v.copy ? v.to_old[ov[2 * g]] : ov[2 * g]);
				sp[i].end = (long)(v.copy ? v.to_old[ov[2 * g + 1]]
							  : ov[2 * g + 1]);
			} else {
				sp[i].start = sp[i].end = -1;
			}
		}
	}
	if (rc == GPULSE_ELIMIT)
		atomic_fetch_add_explicit(&limit_hits, 1, memory_order_relaxed);
	subject_close(&v);
	pcre2_match_data_free(md);
	return rc;
}

static bool name_char(char c)
{
	return is_alnum((unsigned char)c) || c == '_';
}

int rx_expand(const struct rx *r, struct buf *b, const char *tmpl, const char *subject,
	      const struct rx_span *sp, size_t nsp)
{
	for (const char *p = tmpl; *p; p++) {
		if (*p != '$') {
			buf_putc(b, *p);
			continue;
		}
		if (p[1] == '$') {
			buf_putc(b, '$');
			p++;
			continue;
		}
		/* Go's extract: $name or ${name}, name [A-Za-z0-9_]+. */
		const char *name = p + 1, *end;
		bool brace = *name == '{';
		if (brace)
			name++;
		end = name;
		while (name_char(*end))
			end++;
		if (end == name || (brace && *end != '}')) {
			buf_putc(b, '$'); /* malformed: the $ is text */
			continue;
		}
		size_t nl = (size_t)(end - name);
		long g = -1;
		bool digits = true;
		long num = 0;
		for (const char *q = name; q < end; q++) {
			if (*q < '0' || *q > '9') {
				digits = false;
				break;
			}
			num = num * 10 + (*q - '0');
			if (num > 100000000)
				num = 100000000;
		}
		if (digits) {
			g = num;
		} else {
			/* Go's expand: the first group of that name that matched. */
			for (size_t k = 0; k < r->nnames && g < 0; k++)
				if (strlen(r->names[k].name) == nl &&
				    !memcmp(r->names[k].name, name, nl) &&
				    (size_t)r->names[k].index < nsp &&
				    sp[r->names[k].index].start >= 0)
					g = r->names[k].index;
		}
		if (g >= 0 && (size_t)g < nsp && sp[g].start >= 0)
			buf_append(b, subject + sp[g].start, (size_t)(sp[g].end - sp[g].start));
		p = brace ? end : end - 1;
	}
	return b->failed;
}

int rx_replace_all(const struct rx *r, struct buf *b, const char *src, const char *tmpl)
{
	size_t len = strlen(src), nsp = r->ngroups + 1;
	struct rx_span *sp = calloc(nsp, sizeof *sp);
	if (!sp)
		return GPULSE_ENOMEM;
	size_t search = 0, last_end = 0;
	int rc = 0;
	/* Go's Regexp.replaceAll, step by step. */
	while (search <= len) {
		bool found;
		rc = rx_exec(r, src, len, search, sp, nsp, &found);
		if (rc || !found)
			break;
		size_t ms = (size_t)sp[0].start, me = (size_t)sp[0].end;
		buf_append(b, src + last_end, ms - last_end);
		/* No replacement for an empty match right after another. */
		if (me > last_end || ms == 0)
			rx_expand(r, b, tmpl, src, sp, nsp);
		last_end = me;
		size_t width = 1;
		if (search < len) {
			width = utf8_seq_len((const unsigned char *)src + search);
			if (width == 0)
				width = 1;
		}
		if (search + width > me)
			search += width;
		else if (search + 1 > me)
			search++;
		else
			search = me;
	}
	if (!rc)
		buf_append(b, src + last_end, len - last_end);
	free(sp);
	return rc ? rc : b->failed;
}

static char engine_text[64];
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void)
{
	char ver[32] = "";
	pcre2_config(PCRE2_CONFIG_VERSION, ver);
	uint32_t jit = 0;
	pcre2_config(PCRE2_CONFIG_JIT, &jit);
	snprintf(engine_text, sizeof engine_text, "PCRE2 %.20s%s", ver, jit ? " (JIT)" : "");
}

const char *rx_engine(void)
{
	pthread_once(&engine_once, engine_init);
	return engine_text;
}
