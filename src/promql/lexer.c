/* PromQL tokenizer; see lexer.h. Hand-written because no C library speaks
 * PromQL's lexical rules (Go string escapes, durations, octal integers). */
#include "promql/lexer.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/duration.h"
#include "common/status.h"
#include "common/xalloc.h"

void promql_lexer_init(struct promql_lexer *lx, const char *src, size_t len)
{
	lx->src = src;
	lx->len = len;
	lx->pos = 0;
	lx->series_mode = false;
}

static int peekc(const struct promql_lexer *lx, size_t ahead)
{
	size_t p = lx->pos + ahead;
	return p < lx->len ? (unsigned char)lx->src[p] : -1;
}

static bool is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_alnum(int c)
{
	return is_alpha(c) || is_digit(c);
}

static const struct {
	const char *word;
	enum promql_tok kind;
} keywords[] = {
	{"and", PROMQL_TOK_AND}, {"or", PROMQL_TOK_OR},
	{"unless", PROMQL_TOK_UNLESS}, {"atan2", PROMQL_TOK_ATAN2},
	{"by", PROMQL_TOK_BY}, {"without", PROMQL_TOK_WITHOUT},
	{"on", PROMQL_TOK_ON}, {"ignoring", PROMQL_TOK_IGNORING},
	{"group_left", PROMQL_TOK_GROUP_LEFT},
	{"group_right", PROMQL_TOK_GROUP_RIGHT}, {"bool", PROMQL_TOK_BOOL},
	{"offset", PROMQL_TOK_OFFSET},
	/* Every Prometheus aggregator is a keyword, so "sum" never lexes as
	 * a metric name; the parser refuses those outside the subset. */
	{"sum", PROMQL_TOK_AGGREGATOR}, {"avg", PROMQL_TOK_AGGREGATOR},
	{"min", PROMQL_TOK_AGGREGATOR}, {"max", PROMQL_TOK_AGGREGATOR},
	{"count", PROMQL_TOK_AGGREGATOR}, {"stddev", PROMQL_TOK_AGGREGATOR},
	{"stdvar", PROMQL_TOK_AGGREGATOR}, {"topk", PROMQL_TOK_AGGREGATOR},
	{"bottomk", PROMQL_TOK_AGGREGATOR}, {"quantile", PROMQL_TOK_AGGREGATOR},
	{"count_values", PROMQL_TOK_AGGREGATOR}, {"group", PROMQL_TOK_AGGREGATOR},
};

static void set_error(struct promql_token *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct promql_token *t, const char *fmt, ...)
{
	va_list ap;
	t->kind = PROMQL_TOK_ERROR;
	va_start(ap, fmt);
	vsnprintf(t->error, sizeof t->error, fmt, ap);
	va_end(ap);
}

int promql_parse_duration(const char *s, size_t len, int64_t *out_ms)
{
	int64_t ns;
	if (duration_parse(s, len, &ns, NULL, 0) != 0)
		return GPULSE_EPARSE;
	*out_ms = ns / 1000000;
	return 0;
}

void promql_format_duration(int64_t ms, char *out, size_t outlen)
{
	static const struct {
		const char *unit;
		int64_t ms;
	} units[] = {
		{"y", 365LL * 24 * 3600 * 1000}, {"w", 7LL * 24 * 3600 * 1000},
		{"d", 24LL * 3600 * 1000}, {"h", 3600LL * 1000},
		{"m", 60LL * 1000}, {"s", 1000}, {"ms", 1},
	};
	size_t n = 0;
	if (outlen == 0)
		return;
	out[0] = '\0';
	if (ms == 0) {
		snprintf(out, outlen, "0s");
		return;
	}
	if (ms < 0) {
		n += (size_t)snprintf(out, outlen, "-");
		ms = ms == INT64_MIN ? INT64_MAX : -ms;
	}
	for (size_t u = 0; u < sizeof units / sizeof units[0] && n < outlen; u++) {
		int64_t q = ms / units[u].ms;
		if (q == 0)
			continue;
		ms -= q * units[u].ms;
		n += (size_t)snprintf(out + n, outlen - n, "%lld%s", (long long)q, units[u].unit);
	}
}

/* Append the UTF-8 encoding of code point cp. */
static size_t put_utf8(char *o, unsigned long cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A quoted string with Go's escapes ("..." and '...') or a raw `...`. */
static void lex_string(struct promql_lexer *lx, struct promql_token *t)
{
	char q = lx->src[lx->pos++];
	size_t start = lx->pos;
	/* The unescaped text is never longer than the source text. */
	char *o = xmalloc(lx->len - start + 4);
	size_t n = 0;
	for (;;) {
		int c = peekc(lx, 0);
		if (c < 0 || (c == '\n' && q != '`')) {
			free(o);
			set_error(t, "unterminated quoted string %s", q == '`' ? "`" : (q == '"' ? "\"" : "'"));
			return;
		}
		lx->pos++;
		if (c == q)
			break;
		if (c != '\\' || q == '`') {
			o[n++] = (char)c;
			continue;
		}
		int e = peekc(lx, 0);
		if (e < 0) {
			free(o);
			set_error(t, "unterminated quoted string %s", q == '"' ? "\"" : "'");
			return;
		}
		lx->pos++;
		switch (e) {
		case 'a': o[n++] = '\a'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'v': o[n++] = '\v'; break;
		case '\\': o[n++] = '\\'; break;
		case '"':
		case '\'':
			if (e != q) {
				free(o);
				set_error(t, "unknown escape sequence %s", e == '"' ? "\\\"" : "\\'");
				return;
			}
			o[n++] = (char)e;
			break;
		case 'x':
		case 'u':
		case 'U': {
			int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
			unsigned long cp = 0;
			for (int i = 0; i < digits; i++) {
				int h = hexval(peekc(lx, 0));
				if (h < 0) {
					free(o);
					set_error(t, "%s", "invalid hexadecimal escape in string");
					return;
				}
				cp = cp * 16 + (unsigned long)h;
				lx->pos++;
			}
			if (e == 'x') {
				o[n++] = (char)cp;
			} else {
				if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
					free(o);
					set_error(t, "%s", "invalid Unicode escape in string");
					return;
				}
				/* \U0010FFFF is 10 source bytes for 4 output ones and
				 * \u is 6 for at most 3: the buffer always suffices. */
				n += put_utf8(o + n, cp);
			}
			break;
		}
		default:
			if (e >= '0' && e <= '7') {
				unsigned v = (unsigned)(e - '0');
				for (int i = 0; i < 2; i++) {
					int d = peekc(lx, 0);
					if (d < '0' || d > '7') {
						free(o);
						set_error(t, "%s", "invalid octal escape in string");
						return;
					}
					v = v * 8 + (unsigned)(d - '0');
					lx->pos++;
				}
				if (v > 255) {
					free(o);
					set_error(t, "%s", "octal escape value > 255 in string");
					return;
				}
				o[n++] = (char)v;
				break;
			}
			{
				char tmp[8];
				snprintf(tmp, sizeof tmp, "\\%c", isprint(e) ? e : '?');
				free(o);
				set_error(t, "unknown escape sequence %s", tmp);
				return;
			}
		}
	}
	o[n] = '\0';
	t->kind = PROMQL_TOK_STRING;
	t->string = o;
}

/* Prometheus parses a number with strconv.ParseInt(s, 0, 64) first (so
 * "010" is octal 8 and "0x1F" hex) and falls back to ParseFloat. */
static bool parse_number_text(const char *s, size_t len, double *out)
{
	char tmp[128];
	if (len >= sizeof tmp)
		return false;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	char *end;
	errno = 0;
	long long ll = strtoll(tmp, &end, 0);
	if (*end == '\0' && errno == 0 && end != tmp) {
		*out = (double)ll;
		return true;
	}
	errno = 0;
	double d = strtod(tmp, &end);
	if (*end != '\0' || end == tmp)
		return false;
	/* Go refuses out-of-range floats (ParseFloat gives ERANGE) but
	 * accepts underflow to zero; strtod says ERANGE for both. */
	if (errno == ERANGE && isinf(d))
		return false;
	*out = d;
	return true;
}

static void lex_number_or_duration(struct promql_lexer *lx, struct promql_token *t)
{
	size_t start = lx->pos;
	const char *digits = "0123456789";
	if (!lx->series_mode && peekc(lx, 0) == '0' && (peekc(lx, 1) == 'x' || peekc(lx, 1) == 'X')) {
		lx->pos += 2;
		digits = "0123456789abcdefABCDEF";
	}
	while (peekc(lx, 0) > 0 && strchr(digits, peekc(lx, 0)))
		lx->pos++;
	if (peekc(lx, 0) == '.') {
		lx->pos++;
		while (peekc(lx, 0) > 0 && strchr(digits, peekc(lx, 0)))
			lx->pos++;
	}
	if (peekc(lx, 0) == 'e' || peekc(lx, 0) == 'E') {
		lx->pos++;
		if (peekc(lx, 0) == '+' || peekc(lx, 0) == '-')
			lx->pos++;
		while (is_digit(peekc(lx, 0)))
			lx->pos++;
	}
	int r = peekc(lx, 0);
	if ((lx->series_mode && r == 'x') || !is_alnum(r)) {
		t->kind = PROMQL_TOK_NUMBER;
		t->len = lx->pos - start;
		if (!parse_number_text(lx->src + start, t->len, &t->number)) {
			char tmp[64];
			snprintf(tmp, sizeof tmp, "%.*s", (int)(t->len > 40 ? 40 : t->len), lx->src + start);
			set_error(t, "bad number syntax: \"%s\"", tmp);
		}
		return;
	}
	/* A duration: digits and unit letters, e.g. 1h30m. */
	lx->pos = start;
	while (is_alnum(peekc(lx, 0)))
		lx->pos++;
	t->len = lx->pos - start;
	if (promql_parse_duration(lx->src + start, t->len, &t->duration_ms) == 0) {
		t->kind = PROMQL_TOK_DURATION;
		return;
	}
	char tmp[64];
	snprintf(tmp, sizeof tmp, "%.*s", (int)(t->len > 40 ? 40 : t->len), lx->src + start);
	set_error(t, "bad number or duration syntax: \"%s\"", tmp);
}

void promql_lexer_next(struct promql_lexer *lx, struct promql_token *t)
{
	memset(t, 0, sizeof *t);
	for (;;) {
		int c = peekc(lx, 0);
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			lx->pos++;
		} else if (c == '#') {
			while (peekc(lx, 0) >= 0 && peekc(lx, 0) != '\n')
				lx->pos++;
		} else {
			break;
		}
	}
	t->pos = (int)lx->pos + 1;
	t->text = lx->src + lx->pos;
	int c = peekc(lx, 0);
	if (c < 0) {
		t->kind = PROMQL_TOK_EOF;
		return;
	}
	size_t start = lx->pos;
	int c1 = peekc(lx, 1);
	enum promql_tok k = PROMQL_TOK_ERROR;
	size_t n = 1;
	switch (c) {
	case '{': k = PROMQL_TOK_LBRACE; break;
	case '}': k = PROMQL_TOK_RBRACE; break;
	case '(': k = PROMQL_TOK_LPAREN; break;
	case ')': k = PROMQL_TOK_RPAREN; break;
	case '[': k = PROMQL_TOK_LBRACKET; break;
	case ']': k = PROMQL_TOK_RBRACKET; break;
	case ',': k = PROMQL_TOK_COMMA; break;
	case ':':
		/* ":foo" is a metric name; a lone colon separates a subquery. */
		if (!is_alpha(c1) && c1 != ':')
			k = PROMQL_TOK_COLON;
		break;
	case '@': k = PROMQL_TOK_AT; break;
	case '+': k = PROMQL_TOK_ADD; break;
	case '-': k = PROMQL_TOK_SUB; break;
	case '*': k = PROMQL_TOK_MUL; break;
	case '/': k = PROMQL_TOK_DIV; break;
	case '%': k = PROMQL_TOK_MOD; break;
	case '^': k = PROMQL_TOK_POW; break;
	case '=':
		if (c1 == '=') {
			k = PROMQL_TOK_EQLC;
			n = 2;
		} else if (c1 == '~') {
			k = PROMQL_TOK_EQL_RE;
			n = 2;
		} else {
			k = PROMQL_TOK_ASSIGN;
		}
		break;
	case '!':
		if (c1 == '=') {
			k = PROMQL_TOK_NEQ;
			n = 2;
		} else if (c1 == '~') {
			k = PROMQL_TOK_NEQ_RE;
			n = 2;
		} else {
			lx->pos++;
			t->len = 1;
			set_error(t, "%s", "unexpected character after '!'");
			return;
		}
		break;
	case '<':
		k = c1 == '=' ? PROMQL_TOK_LTE : PROMQL_TOK_LSS;
		n = c1 == '=' ? 2 : 1;
		break;
	case '>':
		k = c1 == '=' ? PROMQL_TOK_GTE : PROMQL_TOK_GTR;
		n = c1 == '=' ? 2 : 1;
		break;
	default:
		break;
	}
	if (k != PROMQL_TOK_ERROR) {
		/* ".5" is a number, not an operator followed by one. */
		t->kind = k;
		lx->pos += n;
		t->len = n;
		return;
	}
	if (c == '"' || c == '\'' || c == '`') {
		lex_string(lx, t);
		t->len = lx->pos - start;
		return;
	}
	if (is_digit(c) || (c == '.' && is_digit(c1))) {
		lex_number_or_duration(lx, t);
		return;
	}
	if (is_alpha(c) || c == ':') {
		while (is_alnum(peekc(lx, 0)) || peekc(lx, 0) == ':')
			lx->pos++;
		t->len = lx->pos - start;
		t->kind = PROMQL_TOK_IDENT;
		for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
			if (strlen(keywords[i].word) == t->len &&
			    strncasecmp(keywords[i].word, t->text, t->len) == 0) {
				t->kind = keywords[i].kind;
				return;
			}
		}
		if (t->len == 3 && strncasecmp(t->text, "inf", 3) == 0) {
			t->kind = PROMQL_TOK_NUMBER;
			t->number = INFINITY;
		} else if (t->len == 3 && strncasecmp(t->text, "nan", 3) == 0) {
			t->kind = PROMQL_TOK_NUMBER;
			t->number = NAN;
		}
		return;
	}
	lx->pos++;
	t->len = 1;
	char tmp[16];
	if (isprint(c))
		snprintf(tmp, sizeof tmp, "%c", c);
	else
		snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)c & 0xffu);
	set_error(t, "unexpected character: '%s'", tmp);
}
