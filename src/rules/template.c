/* Go text/template for alert rules (template.h). The parser follows Go's
 * parse package closely enough to refuse what Go refuses with Go's
 * sentence ("unclosed action", "function \"x\" not defined", "undefined
 * variable \"$x\"", "unexpected EOF"); the executor follows Go's exec
 * package for the value kinds that occur here (string, float64, int,
 * bool, label maps, nil), and the functions follow Prometheus's
 * template/template.go.
 *
 * Why one file: the lexer, parser, executor and functions of Go's
 * text/template share the private node and value types (struct tmpl,
 * struct val) and the error sentences Go gives; splitting them means
 * publishing those types for no other user. */
#include "rules/template.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gofloat.h"
#include "common/rx.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

/* Prometheus prepends these definitions to every alert template; the
 * columns Go reports on line 1 count them. */
#define PREAMBLE_LEN 112 /* strlen of the four {{$x := .X}} definitions */

/* ---- parse tree ------------------------------------------------------ */

enum akind { A_FUNC, A_VAR, A_FIELD, A_INT, A_FLOAT, A_STR, A_BOOL, A_NIL, A_PIPE, A_DOT };

struct pipe;

struct arg {
	enum akind k;
	int fn;            /* A_FUNC: index in funcs[] */
	char *name;        /* A_VAR: "$x" ("$" alone: the root) */
	char **fields;     /* A_VAR, A_FIELD, A_PIPE: .a.b after it */
	size_t nfields;
	int64_t i;
	double f;
	char *s;           /* A_STR: unquoted */
	bool b;
	struct pipe *pipe; /* A_PIPE */
	char *src;         /* source text, for error messages */
	int fpos;          /* A_VAR with fields: where the last ".field" starts */
};

struct cmd {
	struct arg *args;
	size_t nargs;
	int pos;           /* byte offset of the first token */
	char *src;
};

struct pipe {
	char *decl;        /* "$x" declared or assigned; NULL: none */
	bool assign;       /* `=` rather than `:=` */
	struct cmd *cmds;
	size_t ncmds;
};

enum nkind { N_TEXT, N_ACTION, N_IF, N_WITH, N_RANGE };

struct node;

struct list {
	struct node **items;
	size_t n, cap;
};

struct node {
	enum nkind k;
	const char *text;  /* N_TEXT (into tmpl->text) */
	size_t len;
	struct pipe *pipe;
	struct list then, els;
	char *kvar, *vvar;  /* N_RANGE: {{range $k, $v := ...}} (NULL: not declared) */
};

struct tmpl {
	char *name;
	char *text;
	void **allocs;
	size_t nallocs, cap;
	size_t nnodes;
	struct list root;
};

static void *talloc(struct tmpl *t, size_t n)
{
	if (t->nallocs == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->allocs = xrealloc(t->allocs, t->cap * sizeof *t->allocs);
	}
	void *p = xcalloc(1, n ? n : 1);
	t->allocs[t->nallocs++] = p;
	return p;
}

static char *tstrndup(struct tmpl *t, const char *s, size_t n)
{
	char *p = talloc(t, n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

void tmpl_free(struct tmpl *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nallocs; i++)
		free(t->allocs[i]);
	free(t->allocs);
	free(t->name);
	free(t->text);
	free(t);
}

/* ---- functions ------------------------------------------------------- */

enum vkind { V_NIL, V_STR, V_FLOAT, V_INT, V_BOOL, V_MAP, V_DATA };

struct val {
	enum vkind k;
	const char *s;
	double f;
	int64_t i;
	bool b;
	const struct label *m;
	size_t mn;
};

struct ex;
typedef int fn_call(struct ex *x, const struct val *a, size_t n, struct val *out);

struct fn {
	const char *name;
	fn_call *call;
	int minargs, maxargs; /* -1: any */
};

static const struct fn funcs[];
static const size_t nfuncs;

/* Prometheus's functions gpulse does not offer: they query the TSDB from
 * inside a template. Named so the refusal says why. */
static const char *const unsupported_funcs[] = {
	"query", "first", "label", "value", "strvalue", "sortByLabel", "args", "tmpl",
	"graphLink", "tableLink", "pathPrefix", "safeHtml_", "parseDuration", "toTime",
	"urlquery", "html", "js", "call", "slice", "println_", NULL,
};

static int func_find(const char *name, size_t n)
{
	for (size_t i = 0; i < nfuncs; i++)
		if (strlen(funcs[i].name) == n && memcmp(funcs[i].name, name, n) == 0)
			return (int)i;
	return -1;
}

/* ---- parser ---------------------------------------------------------- */

struct parser {
	struct tmpl *t;
	const char *s;     /* the text */
	size_t len, pos;
	char *err;
	size_t errlen;
	bool failed;
	int depth;
	const char **vars; /* declared variable names, a stack */
	size_t nvars, capvars;
	size_t action_end; /* where the current action's "}}" starts */
	bool trim_right;   /* the current action ends with " -}}" */
};

static int line_at(const struct parser *p, size_t pos)
{
	int line = 1;
	for (size_t i = 0; i < pos && i < p->len; i++)
		if (p->s[i] == '\n')
			line++;
	return line;
}

static void perrf(struct parser *p, size_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void perrf(struct parser *p, size_t pos, const char *fmt, ...)
{
	if (p->failed)
		return;
	p->failed = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	str_errf(p->err, p->errlen, "template: %s:%d: %s", p->t->name, line_at(p, pos), msg);
}

static void push_var(struct parser *p, const char *name)
{
	if (p->nvars == p->capvars) {
		p->capvars = p->capvars ? p->capvars * 2 : 16;
		p->vars = xrealloc(p->vars, p->capvars * sizeof *p->vars);
	}
	p->vars[p->nvars++] = name;
}

static bool var_known(const struct parser *p, const char *name, size_t n)
{
	if (n == 1)
		return true; /* "$" */
	for (size_t i = p->nvars; i-- > 0;)
		if (strlen(p->vars[i]) == n && memcmp(p->vars[i], name, n) == 0)
			return true;
	return false;
}

static struct node *new_node(struct parser *p, enum nkind k, size_t pos)
{
	if (++p->t->nnodes > TMPL_MAX_NODES) {
		perrf(p, pos, "more than %d nodes in one template", TMPL_MAX_NODES);
		return NULL;
	}
	struct node *n = talloc(p->t, sizeof *n);
	n->k = k;
	return n;
}

static void list_add(struct tmpl *t, struct list *l, struct node *n)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct node **items = talloc(t, cap * sizeof *items);
		if (l->n)
			memcpy(items, l->items, l->n * sizeof *items);
		l->items = items;
		l->cap = cap;
	}
	l->items[l->n++] = n;
}

static void skip_space(struct parser *p)
{
	while (p->pos < p->action_end && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
					  p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
		p->pos++;
}

static bool at_action_end(const struct parser *p)
{
	return p->pos >= p->action_end;
}

static bool is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static bool is_ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static struct pipe *parse_pipe(struct parser *p, bool in_paren, bool allow_decl);

/* .a.b.c after a term; *fields gets the names, *fpos where the last one
 * starts. */
static void parse_fields(struct parser *p, char ***fields, size_t *nfields, int *fpos)
{
	while (p->pos < p->action_end && p->s[p->pos] == '.' && p->pos + 1 < p->action_end &&
	       is_ident_start(p->s[p->pos + 1])) {
		*fpos = (int)p->pos;
		size_t st = ++p->pos;
		while (p->pos < p->action_end && is_ident_char(p->s[p->pos]))
			p->pos++;
		char **nf = talloc(p->t, (*nfields + 1) * sizeof *nf);
		if (*nfields)
			memcpy(nf, *fields, *nfields * sizeof *nf);
		nf[(*nfields)++] = tstrndup(p->t, p->s + st, p->pos - st);
		*fields = nf;
	}
}

/* A quoted or raw string starting at p->pos; 0 or -1 (error reported). */
static int parse_string(struct parser *p, struct arg *a)
{
	char q = p->s[p->pos];
	size_t st = p->pos++;
	struct buf b;
	buf_init(&b, TMPL_MAX_TEXT);
	buf_puts(&b, "");
	for (;;) {
		if (p->pos >= p->len || (q == '"' && p->s[p->pos] == '\n')) {
			perrf(p, st, q == '`' ? "unterminated raw quoted string" : "unterminated quoted string");
			buf_free(&b);
			return -1;
		}
		char c = p->s[p->pos++];
		if (c == q)
			break;
		if (c == '\\' && q == '"') {
			char e = p->pos < p->len ? p->s[p->pos++] : '\0';
			switch (e) {
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'a': c = '\a'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'v': c = '\v'; break;
			case '\\': c = '\\'; break;
			case '"': c = '"'; break;
			case '\'': c = '\''; break;
			case 'x': {
				char h[3] = {0};
				if (p->pos + 2 > p->len || !isxdigit((unsigned char)p->s[p->pos]) ||
				    !isxdigit((unsigned char)p->s[p->pos + 1])) {
					perrf(p, st, "invalid syntax");
					buf_free(&b);
					return -1;
				}
				memcpy(h, p->s + p->pos, 2);
				p->pos += 2;
				c = (char)strtol(h, NULL, 16);
				break;
			}
			default:
				perrf(p, st, "invalid syntax");
				buf_free(&b);
				return -1;
			}
		}
		buf_putc(&b, c);
	}
	if (p->pos > p->action_end) {
		/* The string ran over the "}}" we found first: find the end again. */
		const char *e = strstr(p->s + p->pos, "}}");
		if (!e) {
			perrf(p, st, "unclosed action");
			buf_free(&b);
			return -1;
		}
		p->action_end = (size_t)(e - p->s);
		p->trim_right = p->action_end >= 2 && p->s[p->action_end - 1] == '-' &&
				isspace((unsigned char)p->s[p->action_end - 2]);
		if (p->trim_right)
			p->action_end--;
	}
	a->k = A_STR;
	a->s = tstrndup(p->t, b.data, b.len);
	buf_free(&b);
	return 0;
}

/* A number constant; Go's rules: an integer when it has no '.', 'e' or
 * 'p' (and fits), else a float64. */
static int parse_number(struct parser *p, struct arg *a)
{
	size_t st = p->pos;
	if (p->s[p->pos] == '-' || p->s[p->pos] == '+')
		p->pos++;
	while (p->pos < p->action_end && (isalnum((unsigned char)p->s[p->pos]) || p->s[p->pos] == '.' ||
					  p->s[p->pos] == '_' ||
					  ((p->s[p->pos] == '-' || p->s[p->pos] == '+') &&
					   (p->s[p->pos - 1] == 'e' || p->s[p->pos - 1] == 'E'))))
		p->pos++;
	char txt[128];
	size_t n = p->pos - st;
	if (n >= sizeof txt) {
		perrf(p, st, "bad number syntax");
		return -1;
	}
	memcpy(txt, p->s + st, n);
	txt[n] = '\0';
	char *end;
	bool hex = strstr(txt, "0x") || strstr(txt, "0X");
	if (!hex && strpbrk(txt, ".eE")) {
		errno = 0;
		a->f = strtod(txt, &end);
		if (*end || errno) {
			perrf(p, st, "bad number syntax: \"%s\"", txt);
			return -1;
		}
		a->k = A_FLOAT;
		return 0;
	}
	errno = 0;
	long long v = strtoll(txt, &end, 0);
	if (*end || errno) {
		perrf(p, st, "bad number syntax: \"%s\"", txt);
		return -1;
	}
	a->k = A_INT;
	a->i = v;
	a->f = (double)v;
	return 0;
}

/* One operand of a command. 0, 1 when none is here, -1 on error. */
static int parse_operand(struct parser *p, struct arg *a, bool first)
{
	skip_space(p);
	if (at_action_end(p))
		return 1;
	size_t st = p->pos;
	char c = p->s[p->pos];
	int rc = 0;
	if (c == '|' || c == ')')
		return 1;
	if (c == '"' || c == '`') {
		rc = parse_string(p, a);
	} else if (isdigit((unsigned char)c) ||
		   ((c == '-' || c == '+' || c == '.') && p->pos + 1 < p->action_end &&
		    isdigit((unsigned char)p->s[p->pos + 1]))) {
		rc = parse_number(p, a);
	} else if (c == '$') {
		p->pos++;
		while (p->pos < p->action_end && is_ident_char(p->s[p->pos]))
			p->pos++;
		if (!var_known(p, p->s + st, p->pos - st)) {
			perrf(p, st, "undefined variable \"%.*s\"", (int)(p->pos - st), p->s + st);
			return -1;
		}
		a->k = A_VAR;
		a->name = tstrndup(p->t, p->s + st, p->pos - st);
		parse_fields(p, &a->fields, &a->nfields, &a->fpos);
	} else if (c == '.') {
		if (p->pos + 1 < p->action_end && is_ident_start(p->s[p->pos + 1])) {
			a->k = A_FIELD;
			parse_fields(p, &a->fields, &a->nfields, &a->fpos);
		} else {
			p->pos++;
			a->k = A_DOT;
		}
	} else if (c == '(') {
		if (++p->depth > TMPL_MAX_DEPTH) {
			perrf(p, st, "more than %d levels of nesting", TMPL_MAX_DEPTH);
			return -1;
		}
		p->pos++;
		a->pipe = parse_pipe(p, true, false);
		p->depth--;
		if (!a->pipe)
			return -1;
		a->k = A_PIPE;
		parse_fields(p, &a->fields, &a->nfields, &a->fpos);
	} else if (is_ident_start(c)) {
		while (p->pos < p->action_end && is_ident_char(p->s[p->pos]))
			p->pos++;
		size_t n = p->pos - st;
		const char *w = p->s + st;
		if (n == 4 && memcmp(w, "true", 4) == 0) {
			a->k = A_BOOL;
			a->b = true;
		} else if (n == 5 && memcmp(w, "false", 5) == 0) {
			a->k = A_BOOL;
		} else if (n == 3 && memcmp(w, "nil", 3) == 0) {
			a->k = A_NIL;
		} else {
			int f = func_find(w, n);
			if (f < 0) {
				for (size_t i = 0; unsupported_funcs[i]; i++)
					if (strlen(unsupported_funcs[i]) == n &&
					    memcmp(unsupported_funcs[i], w, n) == 0) {
						perrf(p, st, "function \"%.*s\" is not supported by gpulse "
						      "(templates cannot query the store)", (int)n, w);
						return -1;
					}
				perrf(p, st, "function \"%.*s\" not defined", (int)n, w);
				return -1;
			}
			a->k = A_FUNC;
			a->fn = f;
		}
	} else {
		perrf(p, st, "unexpected \"%c\" in command", c);
		return -1;
	}
	if (rc)
		return -1;
	(void)first;
	a->src = tstrndup(p->t, p->s + st, p->pos - st);
	return 0;
}

static int parse_cmd(struct parser *p, struct cmd *c)
{
	struct arg tmp[64];
	size_t n = 0;
	skip_space(p);
	c->pos = (int)p->pos;
	for (;;) {
		if (n == sizeof tmp / sizeof tmp[0]) {
			perrf(p, p->pos, "too many arguments in one command");
			return -1;
		}
		memset(&tmp[n], 0, sizeof tmp[n]);
		int rc = parse_operand(p, &tmp[n], n == 0);
		if (rc < 0)
			return -1;
		if (rc > 0)
			break;
		n++;
		/* Operands are separated by spaces; a term followed directly by
		 * another is Go's "unexpected ... in operand". */
		if (!at_action_end(p) && !isspace((unsigned char)p->s[p->pos]) && p->s[p->pos] != '|' &&
		    p->s[p->pos] != ')') {
			if (p->s[p->pos] == '.')
				perrf(p, p->pos, "unexpected <.> in operand");
			else
				perrf(p, p->pos, "unexpected \"%c\" in operand", p->s[p->pos]);
			return -1;
		}
	}
	if (n == 0) {
		perrf(p, p->pos, "missing value for command");
		return -1;
	}
	c->args = talloc(p->t, n * sizeof *c->args);
	memcpy(c->args, tmp, n * sizeof *c->args);
	c->nargs = n;
	/* Go places a lone variable with fields ($labels.x) at its last field. */
	if (n == 1 && tmp[0].k == A_VAR && tmp[0].nfields)
		c->pos = tmp[0].fpos;
	size_t srclen = 0;
	for (size_t i = 0; i < n; i++)
		srclen += strlen(tmp[i].src) + 1;
	c->src = talloc(p->t, srclen + 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			strcat(c->src, " ");
		strcat(c->src, tmp[i].src);
	}
	return 0;
}

static struct pipe *parse_pipe(struct parser *p, bool in_paren, bool allow_decl)
{
	struct pipe *pp = talloc(p->t, sizeof *pp);
	skip_space(p);
	size_t start = p->pos;
	/* A declaration: $x := or $x = */
	if (allow_decl && p->pos < p->action_end && p->s[p->pos] == '$') {
		size_t e = p->pos + 1;
		while (e < p->action_end && is_ident_char(p->s[e]))
			e++;
		size_t after = e;
		while (after < p->action_end && (p->s[after] == ' ' || p->s[after] == '\t'))
			after++;
		bool decl = after + 1 < p->action_end && p->s[after] == ':' && p->s[after + 1] == '=';
		bool assign = !decl && after < p->action_end && p->s[after] == '=' &&
			      (after + 1 >= p->action_end || p->s[after + 1] != '=');
		if (decl || assign) {
			char *name = tstrndup(p->t, p->s + p->pos, e - p->pos);
			if (assign && !var_known(p, name, strlen(name))) {
				perrf(p, p->pos, "undefined variable \"%s\"", name);
				return NULL;
			}
			pp->decl = name;
			pp->assign = assign;
			p->pos = after + (decl ? 2 : 1);
		}
	}
	struct cmd tmp[32];
	size_t n = 0;
	for (;;) {
		if (n == sizeof tmp / sizeof tmp[0]) {
			perrf(p, p->pos, "too many commands in one pipeline");
			return NULL;
		}
		memset(&tmp[n], 0, sizeof tmp[n]);
		if (parse_cmd(p, &tmp[n]))
			return NULL;
		/* Go: only the first command may start with a constant. */
		enum akind k0 = tmp[n].args[0].k;
		if (n > 0 && (k0 == A_INT || k0 == A_FLOAT || k0 == A_STR || k0 == A_BOOL || k0 == A_NIL ||
			      k0 == A_DOT)) {
			perrf(p, (size_t)tmp[n].pos, "non executable command in pipeline stage %zu", n + 1);
			return NULL;
		}
		n++;
		skip_space(p);
		if (!at_action_end(p) && p->s[p->pos] == '|') {
			p->pos++;
			continue;
		}
		break;
	}
	if (in_paren) {
		if (at_action_end(p) || p->s[p->pos] != ')') {
			perrf(p, start, "unclosed left paren");
			return NULL;
		}
		p->pos++;
	} else if (!at_action_end(p)) {
		perrf(p, p->pos, "unexpected \"%c\" in command", p->s[p->pos]);
		return NULL;
	}
	pp->cmds = talloc(p->t, n * sizeof *pp->cmds);
	memcpy(pp->cmds, tmp, n * sizeof *pp->cmds);
	pp->ncmds = n;
	if (pp->decl && !pp->assign)
		push_var(p, pp->decl);
	return pp;
}

/* How parse_list stopped. */
enum stop { STOP_EOF, STOP_END, STOP_ELSE, STOP_ELSE_IF, STOP_ERR };

/* Find the action that starts at p->pos ("{{"): set action_end and the
 * trim flags; return the position after "{{" (and its trim marker). */
static bool open_action(struct parser *p, size_t *inner)
{
	size_t st = p->pos;
	size_t i = st + 2;
	if (i + 1 < p->len && p->s[i] == '-' && isspace((unsigned char)p->s[i + 1]))
		i += 2;
	/* Comments may hold "}}" */
	size_t j = i;
	while (j < p->len && isspace((unsigned char)p->s[j]))
		j++;
	const char *e;
	if (j + 1 < p->len && p->s[j] == '/' && p->s[j + 1] == '*') {
		const char *ce = strstr(p->s + j + 2, "*/");
		if (!ce) {
			perrf(p, st, "unclosed comment");
			return false;
		}
		e = strstr(ce + 2, "}}");
	} else {
		e = strstr(p->s + i, "}}");
	}
	if (!e) {
		perrf(p, st, "unclosed action");
		return false;
	}
	p->action_end = (size_t)(e - p->s);
	p->trim_right = p->action_end >= i + 2 && p->s[p->action_end - 1] == '-' &&
			isspace((unsigned char)p->s[p->action_end - 2]);
	if (p->trim_right)
		p->action_end--;
	*inner = i;
	return true;
}

static void close_action(struct parser *p)
{
	p->pos = p->action_end + (p->trim_right ? 3 : 2);
	if (p->trim_right)
		while (p->pos < p->len && isspace((unsigned char)p->s[p->pos]))
			p->pos++;
}

static bool word_is(const struct parser *p, const char *w)
{
	size_t n = strlen(w);
	return p->pos + n <= p->action_end && memcmp(p->s + p->pos, w, n) == 0 &&
	       (p->pos + n == p->action_end || !is_ident_char(p->s[p->pos + n]));
}

static enum stop parse_list(struct parser *p, struct list *l);

/* {{if pipe}} or {{with pipe}} ... {{else ...}} ... {{end}}; p->pos is
 * after the keyword. */
static struct node *parse_control(struct parser *p, enum nkind k, size_t pos)
{
	if (++p->depth > TMPL_MAX_DEPTH) {
		perrf(p, pos, "more than %d levels of nesting", TMPL_MAX_DEPTH);
		return NULL;
	}
	struct node *n = new_node(p, k, pos);
	if (!n)
		return NULL;
	size_t mark = p->nvars;
	skip_space(p);
	if (at_action_end(p)) {
		perrf(p, pos, "missing value for %s", k == N_IF ? "if" : k == N_WITH ? "with" : "range");
		return NULL;
	}
	if (k == N_RANGE && p->s[p->pos] == '$') {
		/* {{range $v := x}} or {{range $k, $v := x}} */
		size_t q = p->pos;
		char *names[2] = {NULL, NULL};
		int nn = 0;
		for (;;) {
			size_t st = q++;
			while (q < p->action_end && is_ident_char(p->s[q]))
				q++;
			names[nn++] = tstrndup(p->t, p->s + st, q - st);
			while (q < p->action_end && (p->s[q] == ' ' || p->s[q] == '\t'))
				q++;
			if (nn < 2 && q < p->action_end && p->s[q] == ',') {
				q++;
				while (q < p->action_end && (p->s[q] == ' ' || p->s[q] == '\t'))
					q++;
				if (q < p->action_end && p->s[q] == '$')
					continue;
				perrf(p, q, "range can only initialize variables");
				return NULL;
			}
			break;
		}
		if (q + 1 < p->action_end && p->s[q] == ':' && p->s[q + 1] == '=') {
			p->pos = q + 2;
			n->kvar = nn == 2 ? names[0] : NULL;
			n->vvar = nn == 2 ? names[1] : names[0];
			for (int i = 0; i < nn; i++)
				push_var(p, names[i]);
		} else if (nn == 2) {
			perrf(p, q, "expected := after range variables");
			return NULL;
		}
	}
	n->pipe = parse_pipe(p, false, k != N_RANGE);
	if (!n->pipe)
		return NULL;
	close_action(p);
	enum stop s = parse_list(p, &n->then);
	if (s == STOP_ERR)
		return NULL;
	if (s == STOP_EOF) {
		perrf(p, p->len, "unexpected EOF");
		return NULL;
	}
	if (s == STOP_ELSE_IF && k == N_RANGE) {
		perrf(p, p->pos, "unexpected {{else if}} in range");
		return NULL;
	}
	if (s == STOP_ELSE_IF) {
		/* {{else if x}} is {{else}}{{if x}}...{{end}}: the nested if
		 * consumes the shared {{end}}. */
		p->nvars = mark;
		struct node *inner = parse_control(p, N_IF, p->pos);
		if (!inner)
			return NULL;
		list_add(p->t, &n->els, inner);
	} else if (s == STOP_ELSE) {
		p->nvars = mark;
		s = parse_list(p, &n->els);
		if (s == STOP_ERR)
			return NULL;
		if (s != STOP_END) {
			perrf(p, p->len, s == STOP_EOF ? "unexpected EOF" : "expected end; found {{else}}");
			return NULL;
		}
	}
	p->nvars = mark;
	p->depth--;
	return n;
}

static enum stop parse_list(struct parser *p, struct list *l)
{
	while (p->pos < p->len) {
		const char *o = strstr(p->s + p->pos, "{{");
		size_t tend = o ? (size_t)(o - p->s) : p->len;
		size_t tlen = tend - p->pos;
		/* A left trim marker eats the spaces before the action. */
		if (o && tend + 3 < p->len && p->s[tend + 2] == '-' && isspace((unsigned char)p->s[tend + 3]))
			while (tlen && isspace((unsigned char)p->s[p->pos + tlen - 1]))
				tlen--;
		if (tlen) {
			struct node *n = new_node(p, N_TEXT, p->pos);
			if (!n)
				return STOP_ERR;
			n->text = p->s + p->pos;
			n->len = tlen;
			list_add(p->t, l, n);
		}
		p->pos = tend;
		if (!o)
			break;
		size_t apos = p->pos;
		size_t inner;
		if (!open_action(p, &inner))
			return STOP_ERR;
		p->pos = inner;
		skip_space(p);
		if (p->pos + 1 < p->action_end && p->s[p->pos] == '/' && p->s[p->pos + 1] == '*') {
			close_action(p);
			continue;
		}
		if (word_is(p, "end")) {
			p->pos += 3;
			skip_space(p);
			if (!at_action_end(p)) {
				perrf(p, p->pos, "unexpected \"%c\" in end", p->s[p->pos]);
				return STOP_ERR;
			}
			close_action(p);
			if (p->depth == 0) {
				perrf(p, apos, "unexpected {{end}}");
				return STOP_ERR;
			}
			return STOP_END;
		}
		if (word_is(p, "else")) {
			p->pos += 4;
			skip_space(p);
			if (p->depth == 0) {
				perrf(p, apos, "unexpected {{else}}");
				return STOP_ERR;
			}
			if (word_is(p, "if")) {
				p->pos += 2;
				return STOP_ELSE_IF;
			}
			if (!at_action_end(p)) {
				perrf(p, p->pos, "unexpected \"%c\" in else", p->s[p->pos]);
				return STOP_ERR;
			}
			close_action(p);
			return STOP_ELSE;
		}
		if (word_is(p, "if") || word_is(p, "with") || word_is(p, "range")) {
			enum nkind k = word_is(p, "if") ? N_IF : word_is(p, "with") ? N_WITH : N_RANGE;
			p->pos += k == N_IF ? 2 : k == N_WITH ? 4 : 5;
			struct node *n = parse_control(p, k, apos);
			if (!n)
				return STOP_ERR;
			list_add(p->t, l, n);
			continue;
		}
		static const char *const kw[] = {"template", "define", "block", "break", "continue", NULL};
		for (size_t i = 0; kw[i]; i++)
			if (word_is(p, kw[i])) {
				perrf(p, apos, "{{%s}} is not supported by gpulse", kw[i]);
				return STOP_ERR;
			}
		if (at_action_end(p)) {
			perrf(p, apos, "missing value for command");
			return STOP_ERR;
		}
		struct node *n = new_node(p, N_ACTION, apos);
		if (!n)
			return STOP_ERR;
		n->pipe = parse_pipe(p, false, true);
		if (!n->pipe)
			return STOP_ERR;
		close_action(p);
		list_add(p->t, l, n);
	}
	return STOP_EOF;
}

int tmpl_parse(const char *name, const char *text, struct tmpl **out, char *err, size_t errlen)
{
	*out = NULL;
	size_t len = strlen(text);
	struct tmpl *t = xcalloc(1, sizeof *t);
	t->name = xstrdup(name);
	t->text = xstrdup(text);
	struct parser p = {.t = t, .s = t->text, .len = len, .err = err, .errlen = errlen};
	if (len > TMPL_MAX_TEXT) {
		perrf(&p, 0, "template longer than %d bytes", TMPL_MAX_TEXT);
		tmpl_free(t);
		return GPULSE_ELIMIT;
	}
	static const char *const pre[] = {"$labels", "$externalLabels", "$externalURL", "$value"};
	for (size_t i = 0; i < 4; i++)
		push_var(&p, pre[i]);
	enum stop s = parse_list(&p, &t->root);
	free(p.vars);
	if (s != STOP_EOF || p.failed) {
		tmpl_free(t);
		return GPULSE_EPARSE;
	}
	*out = t;
	return 0;
}

/* ---- execution ------------------------------------------------------- */

struct var {
	const char *name;
	struct val v;
};

struct ex {
	const struct tmpl *t;
	const struct tmpl_data *d;
	struct buf *out;
	char **strs;       /* strings made while executing */
	size_t nstrs, capstrs;
	struct var *vars;
	size_t nvars, capvars;
	char err[1024];
	bool failed;
	const struct cmd *cur; /* the command being run, for messages */
	const char *cur_fn;
};

static char *xstrndup_(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

static const char *xs_own(struct ex *x, char *s)
{
	if (x->nstrs == x->capstrs) {
		x->capstrs = x->capstrs ? x->capstrs * 2 : 16;
		x->strs = xrealloc(x->strs, x->capstrs * sizeof *x->strs);
	}
	x->strs[x->nstrs++] = s;
	return s;
}

static const char *xs_buf(struct ex *x, struct buf *b)
{
	char *s = buf_steal(b);
	return xs_own(x, s ? s : xstrdup(""));
}

static void xvar_push(struct ex *x, const char *name, struct val v)
{
	if (x->nvars == x->capvars) {
		x->capvars = x->capvars ? x->capvars * 2 : 16;
		x->vars = xrealloc(x->vars, x->capvars * sizeof *x->vars);
	}
	x->vars[x->nvars].name = name;
	x->vars[x->nvars].v = v;
	x->nvars++;
}

static int line_col(const struct tmpl *t, int pos, int *col)
{
	int line = 1, last_nl = -1;
	for (int i = 0; i < pos && t->text[i]; i++)
		if (t->text[i] == '\n') {
			line++;
			last_nl = i;
		}
	*col = line == 1 ? PREAMBLE_LEN + pos : pos - last_nl - 1;
	return line;
}

/* Fail the execution with Prometheus's wording; `fmt` is the reason. */
static int xfail(struct ex *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int xfail(struct ex *x, const char *fmt, ...)
{
	if (x->failed)
		return GPULSE_EINVAL;
	x->failed = true;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	int col = 0, line = x->cur ? line_col(x->t, x->cur->pos, &col) : 1;
	if (x->cur_fn)
		snprintf(x->err, sizeof x->err, "error executing template %s: template: %s:%d:%d: executing "
			 "\"%s\" at <%s>: error calling %s: %s", x->t->name, x->t->name, line, col,
			 x->t->name, x->cur ? x->cur->src : "", x->cur_fn, msg);
	else
		snprintf(x->err, sizeof x->err, "error executing template %s: template: %s:%d:%d: executing "
			 "\"%s\" at <%s>: %s", x->t->name, x->t->name, line, col, x->t->name,
			 x->cur ? x->cur->src : "", msg);
	return GPULSE_EINVAL;
}

static const char *type_name(const struct val *v)
{
	switch (v->k) {
	case V_STR: return "string";
	case V_FLOAT: return "float64";
	case V_INT: return "int";
	case V_BOOL: return "bool";
	case V_MAP: return "map[string]string";
	case V_DATA: return "template.tmplData";
	default: return "<nil>";
	}
}

void tmpl_format_float(struct buf *b, double v)
{
	gofloat_put(b, v, 'g');
}

/* Go's %v of a float64 in fmt: %g with the shortest precision, switching
 * to the exponent form from 1e6 on (and below 1e-4). */
static void put_float_v(struct buf *b, double v)
{
	tmpl_format_float(b, v);
}

/* The format specs passed to printf below are built from Go's verb
 * syntax after checking every character (flags, width, precision, one
 * verb), never taken from input as they are. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"

/* Go's %.Ng (and %e, %f with a precision) on finite values is C's; Go
 * spells the non-finite ones "NaN", "+Inf", "-Inf". */
static void put_cfmt(struct buf *b, const char *spec, double v)
{
	if (isnan(v)) {
		buf_puts(b, "NaN");
		return;
	}
	if (isinf(v)) {
		buf_puts(b, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	buf_printf(b, spec, v);
}

static int cmp_labels_by_name(const void *a, const void *b)
{
	const struct label *x = *(const struct label *const *)a;
	const struct label *y = *(const struct label *const *)b;
	return strcmp(x->name, y->name);
}

static void put_map(struct buf *b, const struct label *m, size_t n)
{
	const struct label **s = xcalloc(n + 1, sizeof *s);
	for (size_t i = 0; i < n; i++)
		s[i] = &m[i];
	qsort(s, n, sizeof *s, cmp_labels_by_name);
	buf_puts(b, "map[");
	for (size_t i = 0; i < n; i++)
		buf_printf(b, "%s%s:%s", i ? " " : "", s[i]->name, s[i]->value);
	buf_putc(b, ']');
	free(s);
}

/* Print a value as Go's template output (and %v) does. */
static void put_val(struct ex *x, struct buf *b, const struct val *v)
{
	switch (v->k) {
	case V_STR: buf_puts(b, v->s); break;
	case V_FLOAT: put_float_v(b, v->f); break;
	case V_INT: buf_printf(b, "%" PRId64, v->i); break;
	case V_BOOL: buf_puts(b, v->b ? "true" : "false"); break;
	case V_MAP: put_map(b, v->m, v->mn); break;
	case V_DATA:
		buf_puts(b, "{");
		put_map(b, x->d->labels, x->d->nlabels);
		buf_putc(b, ' ');
		put_map(b, x->d->ext_labels, x->d->next_labels);
		buf_printf(b, " %s ", x->d->external_url ? x->d->external_url : "");
		put_float_v(b, x->d->value);
		buf_putc(b, '}');
		break;
	default: buf_puts(b, "<no value>"); break;
	}
}

static bool truth(const struct val *v)
{
	switch (v->k) {
	case V_STR: return v->s[0] != '\0';
	case V_FLOAT: return v->f != 0;
	case V_INT: return v->i != 0;
	case V_BOOL: return v->b;
	case V_MAP: return v->mn != 0;
	case V_DATA: return true;
	default: return false;
	}
}

static struct val vstr(const char *s)
{
	return (struct val){.k = V_STR, .s = s};
}

static int field(struct ex *x, struct val *v, const char *name)
{
	if (v->k == V_DATA) {
		if (strcmp(name, "Labels") == 0)
			*v = (struct val){.k = V_MAP, .m = x->d->labels, .mn = x->d->nlabels};
		else if (strcmp(name, "ExternalLabels") == 0)
			*v = (struct val){.k = V_MAP, .m = x->d->ext_labels, .mn = x->d->next_labels};
		else if (strcmp(name, "ExternalURL") == 0)
			*v = vstr(x->d->external_url ? x->d->external_url : "");
		else if (strcmp(name, "Value") == 0)
			*v = (struct val){.k = V_FLOAT, .f = x->d->value};
		else
			return xfail(x, "can't evaluate field %s in type template.tmplData", name);
		return 0;
	}
	if (v->k == V_MAP) {
		for (size_t i = 0; i < v->mn; i++)
			if (strcmp(v->m[i].name, name) == 0) {
				*v = vstr(v->m[i].value);
				return 0;
			}
		*v = vstr(""); /* a missing key of a map[string]string: "" */
		return 0;
	}
	if (v->k == V_NIL)
		return xfail(x, "nil pointer evaluating interface {}.%s", name);
	return xfail(x, "can't evaluate field %s in type %s", name, type_name(v));
}

static int exec_pipe(struct ex *x, const struct pipe *pp, const struct val *dot, struct val *out);

static int eval_arg(struct ex *x, const struct arg *a, const struct val *dot, struct val *out)
{
	int rc = 0;
	switch (a->k) {
	case A_INT: *out = (struct val){.k = V_INT, .i = a->i}; return 0;
	case A_FLOAT: *out = (struct val){.k = V_FLOAT, .f = a->f}; return 0;
	case A_STR: *out = vstr(a->s); return 0;
	case A_BOOL: *out = (struct val){.k = V_BOOL, .b = a->b}; return 0;
	case A_NIL: *out = (struct val){.k = V_NIL}; return 0;
	case A_DOT: *out = *dot; return 0;
	case A_FIELD: *out = *dot; break;
	case A_VAR:
		if (strcmp(a->name, "$") == 0) {
			*out = (struct val){.k = V_DATA};
		} else {
			size_t i = x->nvars;
			while (i-- > 0)
				if (strcmp(x->vars[i].name, a->name) == 0)
					break;
			if (i == (size_t)-1)
				return xfail(x, "undefined variable: %s", a->name);
			*out = x->vars[i].v;
		}
		break;
	case A_PIPE:
		if ((rc = exec_pipe(x, a->pipe, dot, out)))
			return rc;
		break;
	case A_FUNC: return xfail(x, "can't use a function here");
	}
	for (size_t i = 0; i < a->nfields && !rc; i++)
		rc = field(x, out, a->fields[i]);
	return rc;
}

static int exec_cmd(struct ex *x, const struct cmd *c, const struct val *dot, const struct val *final,
		    struct val *out)
{
	const struct cmd *saved = x->cur;
	x->cur = c;
	int rc;
	if (c->args[0].k == A_FUNC) {
		const struct fn *f = &funcs[c->args[0].fn];
		size_t n = c->nargs - 1 + (final ? 1 : 0);
		struct val av[72];
		for (size_t i = 1; i < c->nargs; i++)
			if ((rc = eval_arg(x, &c->args[i], dot, &av[i - 1])))
				goto out;
		x->cur = c;
		if (final)
			av[n - 1] = *final;
		if ((f->minargs >= 0 && (int)n < f->minargs) || (f->maxargs >= 0 && (int)n > f->maxargs)) {
			rc = xfail(x, "wrong number of args for %s: want %d got %zu", f->name,
				   f->minargs, n);
			goto out;
		}
		x->cur_fn = f->name;
		rc = f->call(x, av, n, out);
		x->cur_fn = NULL;
	} else {
		if (final || c->nargs > 1) {
			rc = xfail(x, "can't give argument to non-function %s", c->args[0].src);
			goto out;
		}
		if (c->args[0].k == A_NIL) {
			rc = xfail(x, "nil is not a command");
			goto out;
		}
		rc = eval_arg(x, &c->args[0], dot, out);
	}
out:
	x->cur = saved;
	return rc;
}

static int exec_pipe(struct ex *x, const struct pipe *pp, const struct val *dot, struct val *out)
{
	struct val v = {0};
	for (size_t i = 0; i < pp->ncmds; i++) {
		struct val nv;
		int rc = exec_cmd(x, &pp->cmds[i], dot, i ? &v : NULL, &nv);
		if (rc)
			return rc;
		v = nv;
	}
	if (pp->decl) {
		if (pp->assign) {
			for (size_t i = x->nvars; i-- > 0;)
				if (strcmp(x->vars[i].name, pp->decl) == 0) {
					x->vars[i].v = v;
					break;
				}
		} else {
			xvar_push(x, pp->decl, v);
		}
	}
	*out = v;
	return 0;
}

static int exec_list(struct ex *x, const struct list *l, const struct val *dot);

/* {{range}} over a label map, keys in order (Go sorts map keys); an empty
 * map or nil runs the {{else}} part. */
static int exec_range(struct ex *x, const struct node *n, const struct val *dot)
{
	size_t mark = x->nvars;
	struct val v;
	int rc = exec_pipe(x, n->pipe, dot, &v);
	if (rc)
		return rc;
	if (v.k != V_MAP && v.k != V_NIL) {
		const struct cmd *saved = x->cur;
		if (n->pipe->ncmds == 1)
			x->cur = &n->pipe->cmds[0];
		struct buf vb;
		buf_init(&vb, 1024);
		buf_puts(&vb, "");
		put_val(x, &vb, &v);
		rc = xfail(x, "range can't iterate over %s", vb.data ? vb.data : "");
		buf_free(&vb);
		x->cur = saved;
		return rc;
	}
	if (v.k == V_NIL || v.mn == 0) {
		rc = exec_list(x, &n->els, dot);
		x->nvars = mark;
		return rc;
	}
	const struct label **sorted = xcalloc(v.mn, sizeof *sorted);
	for (size_t i = 0; i < v.mn; i++)
		sorted[i] = &v.m[i];
	qsort(sorted, v.mn, sizeof *sorted, cmp_labels_by_name);
	for (size_t i = 0; i < v.mn && !rc; i++) {
		struct val item = vstr(sorted[i]->value);
		x->nvars = mark;
		if (n->kvar)
			xvar_push(x, n->kvar, vstr(sorted[i]->name));
		if (n->vvar)
			xvar_push(x, n->vvar, item);
		rc = exec_list(x, &n->then, &item);
	}
	free(sorted);
	x->nvars = mark;
	return rc;
}

static int exec_list(struct ex *x, const struct list *l, const struct val *dot)
{
	for (size_t i = 0; i < l->n; i++) {
		const struct node *n = l->items[i];
		int rc = 0;
		struct val v;
		switch (n->k) {
		case N_TEXT:
			buf_append(x->out, n->text, n->len);
			break;
		case N_ACTION:
			if ((rc = exec_pipe(x, n->pipe, dot, &v)))
				return rc;
			if (!n->pipe->decl)
				put_val(x, x->out, &v);
			break;
		case N_RANGE:
			if ((rc = exec_range(x, n, dot)))
				return rc;
			break;
		case N_IF:
		case N_WITH: {
			size_t mark = x->nvars;
			if ((rc = exec_pipe(x, n->pipe, dot, &v)))
				return rc;
			if (truth(&v))
				rc = exec_list(x, &n->then, n->k == N_WITH ? &v : dot);
			else
				rc = exec_list(x, &n->els, dot);
			x->nvars = mark;
			if (rc)
				return rc;
			break;
		}
		}
		if (x->out->failed)
			return GPULSE_ELIMIT;
	}
	return 0;
}

int tmpl_expand(const struct tmpl *t, const struct tmpl_data *d, struct buf *out)
{
	struct ex x = {.t = t, .d = d};
	struct buf tmp;
	buf_init(&tmp, TMPL_MAX_OUTPUT);
	x.out = &tmp;
	struct val data = {.k = V_DATA};
	xvar_push(&x, "$labels", (struct val){.k = V_MAP, .m = d->labels, .mn = d->nlabels});
	xvar_push(&x, "$externalLabels", (struct val){.k = V_MAP, .m = d->ext_labels, .mn = d->next_labels});
	xvar_push(&x, "$externalURL", vstr(d->external_url ? d->external_url : ""));
	xvar_push(&x, "$value", (struct val){.k = V_FLOAT, .f = d->value});
	int rc = exec_list(&x, &t->root, &data);
	if (rc == GPULSE_ELIMIT) {
		buf_printf(out, "<error expanding template: output longer than %d bytes>", TMPL_MAX_OUTPUT);
	} else if (rc) {
		buf_printf(out, "<error expanding template: %s>", x.err);
	} else if (tmp.len) {
		buf_append(out, tmp.data, tmp.len);
	}
	buf_free(&tmp);
	for (size_t i = 0; i < x.nstrs; i++)
		free(x.strs[i]);
	free(x.strs);
	free(x.vars);
	return rc;
}

/* ---- the functions --------------------------------------------------- */

/* Prometheus's convertToFloat: float64, int, or a string ParseFloat takes. */
static int to_float(struct ex *x, const struct val *v, double *f)
{
	switch (v->k) {
	case V_FLOAT: *f = v->f; return 0;
	case V_INT: *f = (double)v->i; return 0;
	case V_STR: {
		char *end;
		const char *s = v->s;
		errno = 0;
		*f = strtod(s, &end);
		if (*s && !*end && !isspace((unsigned char)*s))
			return 0;
		if (strcmp(s, "NaN") == 0 || strcmp(s, "+Inf") == 0 || strcmp(s, "-Inf") == 0 ||
		    strcmp(s, "Inf") == 0) {
			*f = s[0] == 'N' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
			return 0;
		}
		return xfail(x, "strconv.ParseFloat: parsing \"%s\": invalid syntax", s);
	}
	default:
		return xfail(x, "can't convert %s to float", type_name(v));
	}
}

static int ret_buf(struct ex *x, struct buf *b, struct val *out)
{
	*out = vstr(xs_buf(x, b));
	return 0;
}

static int f_humanize(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	double v = 0;
	if (to_float(x, &a[0], &v))
		return GPULSE_EINVAL;
	struct buf b;
	buf_init(&b, 256);
	if (v == 0 || isnan(v) || isinf(v)) {
		put_cfmt(&b, "%.4g", v);
		return ret_buf(x, &b, out);
	}
	const char *prefix = "";
	if (fabs(v) >= 1) {
		static const char *const p[] = {"k", "M", "G", "T", "P", "E", "Z", "Y"};
		for (size_t i = 0; i < 8 && fabs(v) >= 1000; i++) {
			prefix = p[i];
			v /= 1000;
		}
	} else {
		static const char *const p[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
		for (size_t i = 0; i < 8 && fabs(v) < 1; i++) {
			prefix = p[i];
			v *= 1000;
		}
	}
	put_cfmt(&b, "%.4g", v);
	buf_puts(&b, prefix);
	return ret_buf(x, &b, out);
}

static int f_humanize1024(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	double v = 0;
	if (to_float(x, &a[0], &v))
		return GPULSE_EINVAL;
	struct buf b;
	buf_init(&b, 256);
	if (fabs(v) <= 1 || isnan(v) || isinf(v)) {
		put_cfmt(&b, "%.4g", v);
		return ret_buf(x, &b, out);
	}
	static const char *const p[] = {"ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"};
	const char *prefix = "";
	for (size_t i = 0; i < 8 && fabs(v) >= 1024; i++) {
		prefix = p[i];
		v /= 1024;
	}
	put_cfmt(&b, "%.4g", v);
	buf_puts(&b, prefix);
	return ret_buf(x, &b, out);
}

static int f_humanize_pct(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	double v = 0;
	if (to_float(x, &a[0], &v))
		return GPULSE_EINVAL;
	struct buf b;
	buf_init(&b, 256);
	put_cfmt(&b, "%.4g", v * 100);
	buf_putc(&b, '%');
	return ret_buf(x, &b, out);
}

static int f_humanize_duration(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	double v = 0;
	if (to_float(x, &a[0], &v))
		return GPULSE_EINVAL;
	struct buf b;
	buf_init(&b, 256);
	if (isnan(v) || isinf(v)) {
		put_cfmt(&b, "%.4g", v);
	} else if (v == 0) {
		put_cfmt(&b, "%.4g", v);
		buf_putc(&b, 's');
	} else if (fabs(v) >= 1) {
		const char *sign = "";
		if (v < 0) {
			sign = "-";
			v = -v;
		}
		/* Go's int64() of a float past the range is the minimum on
		 * amd64 (and so Prometheus prints a negative duration). */
		int64_t dur = v >= 9223372036854775807.0 ? INT64_MIN : (int64_t)v;
		int64_t s = dur % 60, m = (dur / 60) % 60, h = (dur / 3600) % 24, d = dur / 86400;
		if (d)
			buf_printf(&b, "%s%" PRId64 "d %" PRId64 "h %" PRId64 "m %" PRId64 "s", sign, d, h, m, s);
		else if (h)
			buf_printf(&b, "%s%" PRId64 "h %" PRId64 "m %" PRId64 "s", sign, h, m, s);
		else if (m)
			buf_printf(&b, "%s%" PRId64 "m %" PRId64 "s", sign, m, s);
		else
			buf_printf(&b, "%s%.4gs", sign, v);
	} else {
		static const char *const p[] = {"m", "u", "n", "p", "f", "a", "z", "y"};
		const char *prefix = "";
		for (size_t i = 0; i < 8 && fabs(v) < 1; i++) {
			prefix = p[i];
			v *= 1000;
		}
		put_cfmt(&b, "%.4g", v);
		buf_printf(&b, "%ss", prefix);
	}
	return ret_buf(x, &b, out);
}

/* Go's time.Time.String() of a Unix time in UTC, as humanizeTimestamp. */
static int f_humanize_ts(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	double v = 0;
	if (to_float(x, &a[0], &v))
		return GPULSE_EINVAL;
	struct buf b;
	buf_init(&b, 256);
	if (isnan(v) || isinf(v)) {
		put_cfmt(&b, "%.4g", v);
		return ret_buf(x, &b, out);
	}
	if (v * 1e9 >= 9223372036854775807.0 || v * 1e9 < -9223372036854775807.0) {
		put_float_v(&b, v);
		buf_puts(&b, " cannot be represented as a nanoseconds timestamp since it overflows int64");
		int rc = xfail(x, "%s", b.data ? b.data : "");
		buf_free(&b);
		return rc;
	}
	/* Prometheus goes through model.Time: nanoseconds truncated to
	 * milliseconds. */
	int64_t ms = (int64_t)(v * 1e9) / 1000000;
	int64_t sec = ms / 1000, ns = ms % 1000 * 1000000;
	if (ns < 0) {
		sec -= 1;
		ns += 1000000000;
	}
	time_t ts = (time_t)sec;
	struct tm tm;
	gmtime_r(&ts, &tm);
	buf_printf(&b, "%04d-%02d-%02d %02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		   tm.tm_hour, tm.tm_min, tm.tm_sec);
	if (ns) {
		char frac[24];
		snprintf(frac, sizeof frac, "%09" PRId64, ns);
		size_t l = strlen(frac);
		while (l && frac[l - 1] == '0')
			frac[--l] = '\0';
		buf_printf(&b, ".%s", frac);
	}
	buf_puts(&b, " +0000 UTC");
	return ret_buf(x, &b, out);
}

static void put_quoted(struct buf *b, const char *s)
{
	buf_putc(b, '"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		switch (c) {
		case '"': buf_puts(b, "\\\""); break;
		case '\\': buf_puts(b, "\\\\"); break;
		case '\n': buf_puts(b, "\\n"); break;
		case '\t': buf_puts(b, "\\t"); break;
		case '\r': buf_puts(b, "\\r"); break;
		case '\a': buf_puts(b, "\\a"); break;
		case '\b': buf_puts(b, "\\b"); break;
		case '\f': buf_puts(b, "\\f"); break;
		case '\v': buf_puts(b, "\\v"); break;
		default:
			if (c < 0x20 || c == 0x7f)
				buf_printf(b, "\\x%02x", c);
			else
				buf_putc(b, (char)c);
		}
	}
	buf_putc(b, '"');
}

/* Pad s to width (Go: spaces, left unless '-'). */
static void pad(struct buf *b, const char *s, int width, bool minus)
{
	int l = (int)strlen(s);
	if (!minus)
		for (int i = l; i < width; i++)
			buf_putc(b, ' ');
	buf_puts(b, s);
	if (minus)
		for (int i = l; i < width; i++)
			buf_putc(b, ' ');
}

/* Go's "%!verb(type=value)", the value printed with %v and the verb's
 * width, as fmt does. */
static void bad_verb(struct ex *x, struct buf *b, char verb, const struct val *v, int width, bool minus)
{
	if (v->k == V_NIL) {
		buf_printf(b, "%%!%c(<nil>)", verb);
		return;
	}
	buf_printf(b, "%%!%c(%s=", verb, type_name(v));
	struct buf sv;
	buf_init(&sv, TMPL_MAX_OUTPUT);
	buf_puts(&sv, "");
	put_val(x, &sv, v);
	pad(b, sv.data ? sv.data : "", width, minus);
	buf_free(&sv);
	buf_putc(b, ')');
}

/* Go fmt's parsenum: digits at *f into *num; -1 when the number passes
 * 1e6 before its last digit (Go's tooLarge), else 0. */
static int parse_go_num(const char **f, int *num)
{
	int n = 0;
	for (; isdigit((unsigned char)**f); (*f)++) {
		if (n > 1000000)
			return -1;
		n = n * 10 + (**f - '0');
	}
	*num = n;
	return 0;
}

/* fmt.Sprintf for the verbs alert templates use: v s d f F e E g G x X o c q t %. */
static int f_printf(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	if (a[0].k != V_STR)
		return xfail(x, "wrong type for value; expected string; got %s", type_name(&a[0]));
	const char *f = a[0].s;
	size_t ai = 1;
	struct buf b;
	buf_init(&b, TMPL_MAX_OUTPUT);
	buf_puts(&b, "");
	while (*f) {
		if (*f != '%') {
			buf_putc(&b, *f++);
			continue;
		}
		const char *spec0 = f++;
		bool minus = false, plus = false;
		while (*f && strchr("-+# 0", *f)) {
			if (*f == '-')
				minus = true;
			if (*f == '+')
				plus = true;
			f++;
		}
		size_t nflags = (size_t)(f - spec0 - 1);
		/* Width and precision as Go's fmt parses them: a number that
		 * grows past 1e6 with digits still to come takes the rest of
		 * the format with it (%!(NOVERB), then the arguments as
		 * EXTRA). Parsed like C, "%555555555X" had printf pad to half
		 * a gigabyte: 8.6 s for one expansion (found by fuzz_template). */
		int width = -1, prec = -1;
		if (isdigit((unsigned char)*f) && parse_go_num(&f, &width) < 0)
			f += strlen(f);
		if (*f == '.') {
			f++;
			prec = 0;
			if (isdigit((unsigned char)*f) && parse_go_num(&f, &prec) < 0)
				f += strlen(f);
		}
		char verb = *f;
		if (!verb) {
			buf_puts(&b, "%!(NOVERB)");
			break;
		}
		f++;
		if (verb == '%') {
			buf_putc(&b, '%');
			continue;
		}
		/* What Go would print past the expansion's bound fails here
		 * without being formatted (a width of 9,999,999 took C's printf
		 * a second): at least `width` bytes, and `prec` digits but for
		 * %g without '#', where a double's exact digits (at most 767)
		 * end first, and for strings, which precision only cuts. */
		bool alt = memchr(spec0 + 1, '#', nflags) != NULL;
		if ((verb == 'g' || verb == 'G' || verb == 'v') && !alt && prec > 1100)
			prec = 1100;
		if (width > TMPL_MAX_OUTPUT ||
		    (prec > TMPL_MAX_OUTPUT && verb != 's' && verb != 'q' && verb != 'v')) {
			b.failed = 1; /* as an append past the bound would */
			break;
		}
		if (ai >= n) {
			buf_printf(&b, "%%!%c(MISSING)", verb);
			continue;
		}
		const struct val *v = &a[ai++];
		/* The C spec for numeric verbs: the flags, then width and
		 * precision as parsed (bounded), then the verb. */
		char spec[64];
		if (nflags > 16)
			nflags = 16; /* repeats of the five flags say no more */
		memcpy(spec, spec0, nflags + 1);
		size_t sl = nflags + 1;
		if (width >= 0)
			sl += (size_t)snprintf(spec + sl, sizeof spec - sl, "%d", width);
		if (prec >= 0)
			sl += (size_t)snprintf(spec + sl, sizeof spec - sl, ".%d", prec);
		spec[sl++] = verb;
		spec[sl] = '\0';
		struct buf sv;
		switch (verb) {
		case 'v':
		case 's':
			if (verb == 's' && v->k != V_STR) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			if (v->k == V_FLOAT && verb == 'v' && prec >= 0) {
				spec[sl - 1] = 'g';
				buf_printf(&b, spec, v->f);
				break;
			}
			buf_init(&sv, TMPL_MAX_OUTPUT);
			buf_puts(&sv, "");
			put_val(x, &sv, v);
			if (prec >= 0 && v->k == V_STR && (size_t)prec < sv.len)
				sv.data[prec] = '\0';
			pad(&b, sv.data, width, minus);
			buf_free(&sv);
			break;
		case 'd':
			if (v->k != V_INT) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			spec[sl - 1] = '\0';
			strcat(spec, PRId64);
			buf_printf(&b, spec, v->i);
			break;
		case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
			if (v->k != V_FLOAT) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			if (isnan(v->f) || isinf(v->f)) {
				pad(&b, isnan(v->f) ? (plus ? "+NaN" : "NaN") : v->f > 0 ? "+Inf" : "-Inf", width,
				    minus);
				break;
			}
			if (prec < 0 && (verb == 'g' || verb == 'G')) {
				buf_init(&sv, 128);
				put_float_v(&sv, v->f);
				pad(&b, sv.data ? sv.data : "", width, minus);
				buf_free(&sv);
				break;
			}
			buf_printf(&b, spec, v->f);
			break;
		case 'x': case 'X':
			if (v->k == V_INT) {
				spec[sl - 1] = '\0';
				strcat(spec, verb == 'x' ? PRIx64 : PRIX64);
				buf_printf(&b, spec, (uint64_t)v->i);
			} else if (v->k == V_STR) {
				for (const char *s = v->s; *s; s++)
					buf_printf(&b, verb == 'x' ? "%02x" : "%02X", (unsigned char)*s);
			} else {
				bad_verb(x, &b, verb, v, width, minus);
			}
			break;
		case 'o':
			if (v->k != V_INT) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			spec[sl - 1] = '\0';
			strcat(spec, PRIo64);
			buf_printf(&b, spec, (uint64_t)v->i);
			break;
		case 'c':
			if (v->k != V_INT || v->i < 0 || v->i > 0x10ffff) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			{
				/* The code point as UTF-8. */
				char u[8] = "";
				uint32_t cp = (uint32_t)v->i;
				if (cp < 0x80) {
					u[0] = (char)cp;
				} else if (cp < 0x800) {
					u[0] = (char)(0xc0 | cp >> 6);
					u[1] = (char)(0x80 | (cp & 0x3f));
				} else if (cp < 0x10000) {
					u[0] = (char)(0xe0 | cp >> 12);
					u[1] = (char)(0x80 | (cp >> 6 & 0x3f));
					u[2] = (char)(0x80 | (cp & 0x3f));
				} else {
					u[0] = (char)(0xf0 | cp >> 18);
					u[1] = (char)(0x80 | (cp >> 12 & 0x3f));
					u[2] = (char)(0x80 | (cp >> 6 & 0x3f));
					u[3] = (char)(0x80 | (cp & 0x3f));
				}
				pad(&b, u, width, minus);
			}
			break;
		case 'q':
			if (v->k != V_STR) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			buf_init(&sv, TMPL_MAX_OUTPUT);
			put_quoted(&sv, v->s);
			pad(&b, sv.data ? sv.data : "", width, minus);
			buf_free(&sv);
			break;
		case 't':
			if (v->k != V_BOOL) {
				bad_verb(x, &b, verb, v, width, minus);
				break;
			}
			pad(&b, v->b ? "true" : "false", width, minus);
			break;
		default:
			bad_verb(x, &b, verb, v, width, minus);
		}
	}
	if (b.failed) {
		buf_free(&b);
		return GPULSE_ELIMIT; /* "output longer than TMPL_MAX_OUTPUT bytes" */
	}
	if (ai < n) {
		buf_puts(&b, "%!(EXTRA ");
		for (size_t i = ai; i < n; i++) {
			buf_printf(&b, "%s%s=", i > ai ? ", " : "", type_name(&a[i]));
			put_val(x, &b, &a[i]);
		}
		buf_putc(&b, ')');
	}
	return ret_buf(x, &b, out);
}

/* fmt.Sprint: a space between operands when neither is a string. */
static int f_print(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	struct buf b;
	buf_init(&b, TMPL_MAX_OUTPUT);
	buf_puts(&b, "");
	for (size_t i = 0; i < n; i++) {
		if (i && a[i].k != V_STR && a[i - 1].k != V_STR)
			buf_putc(&b, ' ');
		if (a[i].k == V_NIL)
			buf_puts(&b, "<nil>"); /* fmt's nil; a template action prints "<no value>" */
		else
			put_val(x, &b, &a[i]);
	}
	return ret_buf(x, &b, out);
}

static int f_case(struct ex *x, const struct val *a, struct val *out, int mode)
{
	if (a[0].k != V_STR)
		return xfail(x, "wrong type for value; expected string; got %s", type_name(&a[0]));
	char *s = xstrdup(a[0].s);
	bool word_start = true;
	for (char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (mode == 0)
			*p = (char)toupper(c);
		else if (mode == 1)
			*p = (char)tolower(c);
		else {
			if (word_start && c < 0x80)
				*p = (char)toupper(c);
			word_start = !(isalnum(c) || c == '_' || c == '\'' || c >= 0x80);
		}
	}
	*out = vstr(xs_own(x, s));
	return 0;
}

static int f_toupper(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_case(x, a, out, 0);
}

static int f_tolower(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_case(x, a, out, 1);
}

static int f_title(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_case(x, a, out, 2);
}

/* Go's template comparison: basic kinds must agree. *c gets <0, 0, >0. */
static int compare(struct ex *x, const struct val *a, const struct val *b, bool eq_only, int *c)
{
	if (a->k != b->k) {
		if (a->k == V_NIL || b->k == V_NIL)
			return xfail(x, "invalid type for comparison");
		return xfail(x, "incompatible types for comparison");
	}
	switch (a->k) {
	case V_STR: *c = strcmp(a->s, b->s); return 0;
	case V_FLOAT: *c = a->f < b->f ? -1 : a->f > b->f ? 1 : a->f == b->f ? 0 : 2; return 0;
	case V_INT: *c = a->i < b->i ? -1 : a->i > b->i; return 0;
	case V_BOOL:
		if (!eq_only)
			return xfail(x, "invalid type for comparison");
		*c = a->b != b->b;
		return 0;
	default:
		return xfail(x, "invalid type for comparison");
	}
}

static int f_eq(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	for (size_t i = 1; i < n; i++) {
		int c = 0;
		if (compare(x, &a[0], &a[i], true, &c))
			return GPULSE_EINVAL;
		if (c == 0) {
			*out = (struct val){.k = V_BOOL, .b = true};
			return 0;
		}
	}
	*out = (struct val){.k = V_BOOL, .b = false};
	return 0;
}

static int f_ne(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	int c = 0;
	if (compare(x, &a[0], &a[1], true, &c))
		return GPULSE_EINVAL;
	*out = (struct val){.k = V_BOOL, .b = c != 0};
	return 0;
}

static int f_ord(struct ex *x, const struct val *a, struct val *out, int op)
{
	int c = 0;
	if (compare(x, &a[0], &a[1], false, &c))
		return GPULSE_EINVAL;
	/* Go defines le as lt or eq, gt as not le and ge as not lt: with a
	 * NaN (c == 2), lt and le are false, gt and ge true. */
	bool lt = c == -1, le = c == -1 || c == 0;
	bool r = op == 0 ? lt : op == 1 ? le : op == 2 ? !le : !lt;
	*out = (struct val){.k = V_BOOL, .b = r};
	return 0;
}

static int f_lt(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_ord(x, a, out, 0);
}

static int f_le(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_ord(x, a, out, 1);
}

static int f_gt(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_ord(x, a, out, 2);
}

static int f_ge(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	return f_ord(x, a, out, 3);
}

static int f_and(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)x;
	for (size_t i = 0; i < n - 1; i++)
		if (!truth(&a[i])) {
			*out = a[i];
			return 0;
		}
	*out = a[n - 1];
	return 0;
}

static int f_or(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)x;
	for (size_t i = 0; i < n - 1; i++)
		if (truth(&a[i])) {
			*out = a[i];
			return 0;
		}
	*out = a[n - 1];
	return 0;
}

static int f_not(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)x;
	(void)n;
	*out = (struct val){.k = V_BOOL, .b = !truth(&a[0])};
	return 0;
}

static int f_len(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	if (a[0].k == V_STR)
		*out = (struct val){.k = V_INT, .i = (int64_t)strlen(a[0].s)};
	else if (a[0].k == V_MAP)
		*out = (struct val){.k = V_INT, .i = (int64_t)a[0].mn};
	else
		return xfail(x, "len of type %s", type_name(&a[0]));
	return 0;
}

static int f_index(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	struct val v = a[0];
	for (size_t i = 1; i < n; i++) {
		if (v.k != V_MAP)
			return xfail(x, "can't index item of type %s", type_name(&v));
		if (a[i].k != V_STR)
			return xfail(x, "value has type %s; should be string", type_name(&a[i]));
		if (field(x, &v, a[i].s))
			return GPULSE_EINVAL;
	}
	*out = v;
	return 0;
}

/* Go's regexp.MatchString and MustCompile, unanchored, in RE2's
 * dialect (rx.h). */
static int compile_re(struct ex *x, const struct val *pat, struct rx **re)
{
	if (pat->k != V_STR)
		return xfail(x, "wrong type for value; expected string; got %s", type_name(pat));
	char msg[256];
	int rc = rx_compile(pat->s, 0, re, msg, sizeof msg);
	if (rc)
		return xfail(x, "%s", msg);
	return 0;
}

static int f_match(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	struct rx *re;
	if (a[1].k != V_STR)
		return xfail(x, "wrong type for value; expected string; got %s", type_name(&a[1]));
	if (compile_re(x, &a[0], &re))
		return GPULSE_EINVAL;
	bool hit;
	int rc = rx_match(re, a[1].s, strlen(a[1].s), &hit);
	rx_free(re);
	if (rc)
		return xfail(x, "match: the regular expression stopped at its cost limit");
	*out = (struct val){.k = V_BOOL, .b = hit};
	return 0;
}

/* regexp.MustCompile(a[0]).ReplaceAllString(a[2], a[1]). */
static int f_re_replace_all(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	struct rx *re;
	if (a[1].k != V_STR || a[2].k != V_STR)
		return xfail(x, "wrong type for value; expected string");
	if (compile_re(x, &a[0], &re))
		return GPULSE_EINVAL;
	struct buf b;
	buf_init(&b, TMPL_MAX_OUTPUT);
	buf_puts(&b, "");
	int rc = rx_replace_all(re, &b, a[2].s, a[1].s);
	rx_free(re);
	if (rc && rc != GPULSE_ELIMIT) {
		buf_free(&b);
		return xfail(x, "reReplaceAll: %s", gpulse_strerror(rc));
	}
	if (rc == GPULSE_ELIMIT && !b.failed) {
		buf_free(&b);
		return xfail(x, "reReplaceAll: the regular expression stopped at its cost limit");
	}
	return ret_buf(x, &b, out);
}

/* net.SplitHostPort's host, or the text itself when it has no port. */
static int f_strip_port(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	if (a[0].k != V_STR)
		return xfail(x, "wrong type for value; expected string; got %s", type_name(&a[0]));
	const char *s = a[0].s;
	const char *last = strrchr(s, ':');
	if (s[0] == '[') {
		const char *e = strchr(s, ']');
		if (e && e[1] == ':' && e + 1 == last) {
			*out = vstr(xs_own(x, xstrndup_(s + 1, (size_t)(e - s - 1))));
			return 0;
		}
	} else if (last && strchr(s, ':') == last && !strchr(s, '[') && !strchr(s, ']')) {
		*out = vstr(xs_own(x, xstrndup_(s, (size_t)(last - s))));
		return 0;
	}
	*out = a[0];
	return 0;
}

static int f_strip_domain(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)n;
	if (a[0].k != V_STR)
		return xfail(x, "wrong type for value; expected string; got %s", type_name(&a[0]));
	const char *s = a[0].s;
	const char *colon = strrchr(s, ':');
	if (colon && strchr(s, ':') != colon)
		colon = NULL; /* an IPv6 address */
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);
	bool ip = true;
	for (size_t i = 0; i < hl; i++)
		if (!isdigit((unsigned char)s[i]) && s[i] != '.')
			ip = false;
	if (ip || strchr(s, '[')) {
		*out = a[0];
		return 0;
	}
	const char *dot = memchr(s, '.', hl);
	size_t keep = dot ? (size_t)(dot - s) : hl;
	struct buf b;
	buf_init(&b, 4096);
	buf_append(&b, s, keep);
	if (colon)
		buf_puts(&b, colon);
	return ret_buf(x, &b, out);
}

static int f_identity(struct ex *x, const struct val *a, size_t n, struct val *out)
{
	(void)x;
	(void)n;
	*out = a[0];
	return 0;
}

static const struct fn funcs[] = {
	{"humanize", f_humanize, 1, 1},
	{"humanize1024", f_humanize1024, 1, 1},
	{"humanizePercentage", f_humanize_pct, 1, 1},
	{"humanizeDuration", f_humanize_duration, 1, 1},
	{"humanizeTimestamp", f_humanize_ts, 1, 1},
	{"printf", f_printf, 1, -1},
	{"print", f_print, 0, -1},
	{"toUpper", f_toupper, 1, 1},
	{"toLower", f_tolower, 1, 1},
	{"title", f_title, 1, 1},
	{"eq", f_eq, 2, -1},
	{"ne", f_ne, 2, 2},
	{"lt", f_lt, 2, 2},
	{"le", f_le, 2, 2},
	{"gt", f_gt, 2, 2},
	{"ge", f_ge, 2, 2},
	{"and", f_and, 1, -1},
	{"or", f_or, 1, -1},
	{"not", f_not, 1, 1},
	{"len", f_len, 1, 1},
	{"index", f_index, 1, -1},
	{"match", f_match, 2, 2},
	{"reReplaceAll", f_re_replace_all, 3, 3},
	{"stripPort", f_strip_port, 1, 1},
	{"stripDomain", f_strip_domain, 1, 1},
	{"safeHtml", f_identity, 1, 1},
};
static const size_t nfuncs = sizeof funcs / sizeof funcs[0];
