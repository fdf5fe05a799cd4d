/* Tests for the RE2 dialect on PCRE2 (src/common/rx.c), table-driven.
 *
 * Where the cases come from:
 * - "prom": Prometheus's model/labels/regexp_test.go, TestNewFastRegexMatcher
 *   (v2.4x), whose matchers are anchored as ^(?:re)$.
 * - "go-invalid": Go's regexp/syntax/parse_test.go, invalidRegexps (every
 *   one of them must be refused) and onlyPerl (accepted in Perl mode,
 *   which Prometheus uses); onlyPOSIX (accepted only in POSIX mode, so
 *   refused here).
 * - "re2": RE2's syntax page (github.com/google/re2/wiki/Syntax): the
 *   constructs it lists as NOT SUPPORTED must be refused naming the
 *   construct and its position, those it supports must work.
 * - "go-replace": Go's regexp/all_test.go replaceTests, for
 *   ReplaceAllString and $-expansion. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/rx.h"
#include "common/status.h"

/* A DFA workspace too small for the states of (x+x+)+y over 40 x's
 * (PCRE2 takes no less than 20 ints). */
#define RX_TEST_DFA_WORKSPACE 20

struct match_case {
	const char *re, *value;
	bool want;
};

static void check_matches(const struct match_case *c, size_t n, unsigned flags)
{
	for (size_t i = 0; i < n; i++) {
		struct rx *r;
		char err[256] = "";
		if (rx_compile(c[i].re, flags, &r, err, sizeof err) != 0)
			fail_msg("%s: refused: %s", c[i].re, err);
		bool hit;
		assert_int_equal(rx_match(r, c[i].value, strlen(c[i].value), &hit), 0);
		if (hit != c[i].want)
			fail_msg("/%s/ on \"%s\": got %d, want %d", c[i].re, c[i].value, hit, c[i].want);
		rx_free(r);
	}
}

/* prom: TestNewFastRegexMatcher, verbatim. */
static void test_prometheus_cases(void **state)
{
	(void)state;
	static const struct match_case c[] = {
		{"(foo|bar)", "foo", true},
		{"(foo|bar)", "foo bar", false},
		{"(foo|bar)", "bar", true},
		{"foo.*", "foo bar", true},
		{"foo.*", "bar foo", false},
		{".*foo", "foo bar", false},
		{".*foo", "bar foo", true},
		{".*foo", "foo", true},
		{"^.*foo$", "foo", true},
		{"^.+foo$", "foo", false},
		{"^.+foo$", "bfoo", true},
		{".*", "\n", false},
		{".*", "\nfoo", false},
		{".*foo", "\nfoo", false},
		{"foo.*", "foo\n", false},
		{"foo\n.*", "foo\n", true},
		{".*foo.*", "foo", true},
		{".*foo.*", "foo bar", true},
		{".*foo.*", "hello foo world", true},
		{".*foo.*", "hello foo\n world", false},
		{".*foo\n.*", "hello foo\n world", true},
		{".*", "foo", true},
		{"", "foo", false},
		{"", "", true},
	};
	check_matches(c, sizeof c / sizeof *c, RX_ANCHORED);
}

/* re2: what RE2 supports and PCRE2 or POSIX read differently or not at
 * all; anchored, as the matchers are. */
static void test_re2_syntax(void **state)
{
	(void)state;
	static const struct match_case c[] = {
		{"\\d+", "0123", true},
		{"\\d", "\xd9\xa3", false},          /* ASCII only: not ARABIC-INDIC 3 */
		{"\\w+", "gpu_0", true},
		{"\\w", "\xc3\xa9", false},          /* é is not \w in RE2 */
		{"\\s", " ", true},
		{"\\s", "\v", false},                /* RE2's \s has no \v */
		{"\\S", "\v", true},
		{"[\\s]", "\v", false},
		{"[\\S]", "\v", true},
		{"\\v", "\v", true},                 /* a character in RE2 */
		{"\\x47", "G", true},
		{"\\x{47}", "G", true},
		{"\\x{1F600}", "\xf0\x9f\x98\x80", true},
		{"\\101", "A", true},                /* octal */
		{"\\0", "\x00", false},              /* a NUL never reaches a C string */
		{"\\Qa.b*c\\E", "a.b*c", true},
		{"\\Qa.b*c\\E", "axbc", false},
		{"(?i)h100", "H100", true},
		{"(?i:h)100", "H100", true},
		{"(?i:h)100", "h100", true},
		{"h(?i)100x", "h100X", true},
		{"(?i)\xce\xb1", "\xce\x91", true},  /* Unicode case folding: α Α */
		{"(?s).", "\n", true},
		{".", "\n", false},
		{"a(?s:.)b", "a\nb", true},
		{"(?m)^b$", "b", true},
		{"(?U)a+", "aaa", true},
		{"(?:gpu|cpu)-\\d", "gpu-1", true},
		{"(?P<kind>gpu|cpu)", "cpu", true},
		{"(?<kind>gpu|cpu)", "gpu", true},
		{"[[:alpha:]]+", "abcXYZ", true},
		{"[[:alpha:]]", "1", false},
		{"[[:^alpha:]]", "1", true},
		{"[[:word:]]+", "a_1", true},
		{"\\pL+", "\xce\xb1\xce\xb2" "abc", true},
		{"\\p{Greek}+", "\xce\xb1\xce\xb2", true},
		{"\\p{Greek}", "a", false},
		{"\\PL", "1", true},
		{"\\P{Greek}", "a", true},
		{"\\p{^Greek}", "a", true},
		{"[\\p{Lu}\\d]+", "AB12", true},
		{"[a-c-e]+", "a-e", true},           /* '-' literal after a range */
		{"[\\d-z]+", "1-z", true},           /* and after a class */
		{"[]a]+", "]a", true},
		{"[^]a]", "b", true},
		{"[^a]", "\n", true},                /* negated classes match \n */
		{"a{2,3}", "aaa", true},
		{"a{2,3}", "aaaa", false},
		{"a{,3}", "a{,3}", true},            /* not a repetition in RE2 */
		{"a{", "a{", true},
		{"a{x}", "a{x}", true},
		{"}", "}", true},
		{"]", "]", true},
		{"a+?", "aaa", true},
		{"a*?b", "aab", true},
		{"\\.", ".", true},
		{"\\.", "x", false},
		{"\\_", "_", true},
		{"a|b|", "", true},
		{"()", "", true},
		{"x*", "", true},
		{"\\Aab\\z", "ab", true},
		{"\\bab\\b", "ab", true},
		{"a\\Bb", "ab", true},
		{"a$", "a\n", false},                /* $ is the very end, not before \n */
		{"(a*)*(b*)*(c*)*(d*)*(e*)*(f*)*", "abcdef", true},
		{"(a|aa)*b", "aaaaaaaaab", true},
		{"#", "#", true},                    /* never extended mode */
		{"a b", "a b", true},
	};
	check_matches(c, sizeof c / sizeof *c, RX_ANCHORED);
}

static void test_unanchored(void **state)
{
	(void)state;
	static const struct match_case c[] = {
		{"gpu", "the gpu is lost", true},
		{"^gpu", "the gpu", false},
		{"lost$", "the gpu is lost", true},
		{"(?m)^b", "a\nb", true},
		{"^b", "a\nb", false},
		{"\\Qa.b", "a.b", true},             /* \Q to the end */
		{"\\Qa.b", "axb", false},
	};
	check_matches(c, sizeof c / sizeof *c, 0);
}

struct refuse_case {
	const char *re;
	const char *want;     /* a piece of the message */
	size_t byte;          /* the 1-based position it names; 0: any */
};

static void check_refused(const struct refuse_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rx *r = NULL;
		char err[256] = "";
		int rc = rx_compile(c[i].re, RX_ANCHORED, &r, err, sizeof err);
		if (rc == 0) {
			rx_free(r);
			fail_msg("/%s/ accepted; want \"%s\"", c[i].re, c[i].want);
		}
		assert_null(r);
		assert_true(rc == GPULSE_EINVAL || rc == GPULSE_ELIMIT);
		if (!strstr(err, c[i].want))
			fail_msg("/%s/: \"%s\" lacks \"%s\"", c[i].re, err, c[i].want);
		assert_non_null(strstr(err, "error parsing regexp"));
		if (c[i].byte) {
			char at[32];
			snprintf(at, sizeof at, "at byte %zu", c[i].byte);
			if (!strstr(err, at))
				fail_msg("/%s/: \"%s\" lacks \"%s\"", c[i].re, err, at);
		}
	}
}

/* go-invalid: every one of Go's invalidRegexps, plus onlyPOSIX. */
static void test_go_invalid(void **state)
{
	(void)state;
	static const struct refuse_case c[] = {
		{"(", "missing closing )", 1},
		{")", "unexpected )", 1},
		{"(a", "missing closing )", 0},
		{"a)", "unexpected )", 2},
		{"(a))", "unexpected )", 4},
		{"(a|b|", "missing closing )", 0},
		{"a|b|)", "unexpected )", 5},
		{"(a|b|))", "unexpected )", 7},
		{"(a|b", "missing closing )", 0},
		{"a|b)", "unexpected )", 4},
		{"(a|b))", "unexpected )", 6},
		{"[a-z", "missing closing ]", 1},
		{"([a-z)", "missing closing ]", 2},
		{"[a-z)", "missing closing ]", 1},
		{"([a-z]))", "unexpected )", 8},
		{"x{1001}", "invalid repeat count", 2},
		{"x{9876543210}", "invalid repeat count", 2},
		{"x{2,1}", "invalid repeat count", 2},
		{"x{1,9876543210}", "invalid repeat count", 2},
		{"\xff", "invalid UTF-8", 1},
		{"[\xff]", "invalid UTF-8", 2},
		{"[\\\xff]", "invalid escape sequence", 2},
		{"\\\xff", "invalid escape sequence", 1},
		{"(?P<name>a", "missing closing )", 0},
		{"(?P<name>", "missing closing )", 0},
		{"(?P<name", "invalid named capture", 1},
		{"(?P<x y>a)", "invalid named capture", 1},
		{"(?P<>a)", "invalid named capture", 1},
		{"(?<name>a", "missing closing )", 0},
		{"(?<name", "invalid named capture", 1},
		{"(?<x y>a)", "invalid named capture", 1},
		{"(?<>a)", "invalid named capture", 1},
		{"[a-Z]", "invalid character class range", 2},
		{"(?i)[a-Z]", "invalid character class range", 6},
		{"\\Q\\E*", "missing argument to repetition operator", 5},
		{"a{100000}", "invalid repeat count", 2},
		{"a{100000,}", "invalid repeat count", 2},
		{"((((((((((x{2}){2}){2}){2}){2}){2}){2}){2}){2}){2})", "invalid repeat count", 0},
		/* onlyPOSIX */
		{"a++", "invalid nested repetition operator", 2},
		{"a**", "invalid nested repetition operator", 2},
		{"a?*", "invalid nested repetition operator", 2},
		{"a+*", "invalid nested repetition operator", 2},
		{"a{1}*", "invalid nested repetition operator", 2},
		{".{1}{2}.{3}", "invalid nested repetition operator", 2},
		/* and from the parser's own error paths */
		{"*", "missing argument to repetition operator", 1},
		{"a|*", "missing argument to repetition operator", 3},
		{"(*)", "missing argument to repetition operator", 2},
		{"a???", "invalid nested repetition operator", 2},
		{"(x{40}){40}", "invalid repeat count", 8},
		{"[[:foo:]]", "invalid character class range", 2},
		{"\\", "trailing backslash", 1},
		{"\\x4", "invalid escape sequence", 1},
		{"\\x{110000}", "invalid escape sequence", 1},
		{"(?)", "invalid or unsupported Perl syntax", 1},
		{"(?i-)", "invalid or unsupported Perl syntax", 1},
		{"(?x)a", "invalid or unsupported Perl syntax", 1},
		{"\\pX", "unknown property", 0},
	};
	check_refused(c, sizeof c / sizeof *c);
}

/* re2: constructs RE2 lists as NOT SUPPORTED (all PCRE2 features), each
 * refused naming it. */
static void test_re2_unsupported(void **state)
{
	(void)state;
	static const struct refuse_case c[] = {
		{"(a)\\1", "backreferences are not supported", 4},
		{"(?P<n>a)(?P=n)", "backreference", 9},
		{"\\k<n>", "backreference", 1},
		{"\\g1", "backreference", 1},
		{"a(?=b)", "lookahead", 2},
		{"a(?!b)", "negative lookahead", 2},
		{"(?<=a)b", "lookbehind", 1},
		{"(?<!a)b", "negative lookbehind", 1},
		{"(?>a+)b", "atomic group", 1},
		{"a*+", "invalid nested repetition operator", 2},  /* possessive */
		{"a{2}+", "invalid nested repetition operator", 2},
		{"\\C", "any byte", 1},
		{"(?R)", "recursion", 1},
		{"(a)(?1)", "recursion", 4},
		{"(?&n)", "recursion", 1},
		{"(?P>n)", "recursion", 1},
		{"(?(1)a|b)", "conditional", 1},
		{"(?#comment)", "comment", 1},
		{"(?|a)", "branch reset", 1},
		{"(?C1)", "callout", 1},
		{"(*LIMIT_MATCH=999999999)a", "missing argument to repetition operator", 2},
		{"(*UTF)a", "missing argument to repetition operator", 2},
		{"\\K", "match reset", 1},
		{"\\G", "start of match", 1},
		{"\\Z", "end or before final newline", 1},
		{"\\R", "newline sequence", 1},
		{"\\X", "grapheme cluster", 1},
		{"\\h", "horizontal space", 1},
		{"\\N", "not a newline", 1},
		{"\\e", "escape character", 1},
		{"\\cA", "control character", 1},
		{"\\E", "\\E without \\Q", 1},
		{"[\\b]", "invalid escape sequence", 2},
		{"\\8", "invalid escape sequence", 1},
	};
	check_refused(c, sizeof c / sizeof *c);
}

static void test_go_only_perl(void **state)
{
	(void)state;
	static const char *const ok[] = {"[a-b-c]", "\\Qabc\\E", "\\Q*+?{[\\E", "\\Q\\\\E",
					 "\\Q\\\\\\E", "\\Q\\\\\\\\E", "\\Q\\\\\\\\\\E", "(?:a)",
					 "(?P<name>a)"};
	for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
		struct rx *r;
		char err[256];
		if (rx_compile(ok[i], RX_ANCHORED, &r, err, sizeof err) != 0)
			fail_msg("%s: %s", ok[i], err);
		rx_free(r);
	}
}

static void test_bounds(void **state)
{
	(void)state;
	/* Nesting deeper than RX_MAX_NESTING, and a pattern over the size bound. */
	size_t deep = RX_MAX_NESTING + 1;
	char *p = malloc(2 * deep + 1);
	memset(p, '(', deep);
	memset(p + deep, ')', deep);
	p[2 * deep] = '\0';
	struct rx *r = NULL;
	char err[256] = "";
	assert_int_equal(rx_compile(p, RX_ANCHORED, &r, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "nests too deeply"));
	free(p);
	size_t big = RX_MAX_PATTERN + 1;
	p = malloc(big + 1);
	memset(p, 'a', big);
	p[big] = '\0';
	assert_int_equal(rx_compile(p, RX_ANCHORED, &r, err, sizeof err), GPULSE_ELIMIT);
	assert_non_null(strstr(err, "too large"));
	free(p);

	/* Catastrophic backtracking meets the cost limit: never minutes of
	 * CPU. (RE2 is linear here; PCRE2's backtracker is not, and its
	 * auto-possessification does not rescue this one.) rx_match then
	 * decides by the DFA matcher, right and uncounted; rx_exec, which
	 * needs captures, stops with an error, counted. */
	assert_int_equal(rx_compile("(x+x+)+y", RX_ANCHORED, &r, err, sizeof err), 0);
	char subject[64];
	memset(subject, 'x', 40);
	memcpy(subject + 40, "yy", 3); /* a 'y' so PCRE2's required-character check passes */
	uint64_t before = rx_limit_hits();
	bool hit = true;
	assert_int_equal(rx_match(r, subject, strlen(subject), &hit), 0);
	assert_false(hit);
	subject[41] = '\0';
	assert_int_equal(rx_match(r, subject, strlen(subject), &hit), 0);
	assert_true(hit);
	assert_int_equal(rx_limit_hits(), before);
	struct rx_span sp[2];
	subject[41] = 'y';
	assert_int_equal(rx_exec(r, subject, strlen(subject), 0, sp, 2, &hit), GPULSE_ELIMIT);
	assert_false(hit);
	assert_int_equal(rx_limit_hits(), before + 1);
	rx_free(r);

	/* When the DFA matcher cannot decide either (its workspace too
	 * small for the pattern's states, shrunk here by the tests' knob),
	 * rx_match says so, counted, and never answers "no match". */
	rx_set_limits(0, RX_TEST_DFA_WORKSPACE);
	assert_int_equal(rx_compile("(x+x+)+y", RX_ANCHORED, &r, err, sizeof err), 0);
	subject[41] = 'y';
	before = rx_limit_hits();
	hit = true;
	assert_int_equal(rx_match(r, subject, strlen(subject), &hit), GPULSE_ELIMIT);
	assert_false(hit);
	assert_int_equal(rx_limit_hits(), before + 1);
	/* An ordinary subject still matches within the shrunk limits. */
	assert_int_equal(rx_match(r, "xxy", 3, &hit), 0);
	assert_true(hit);
	rx_free(r);
	rx_set_limits(0, 0);

	/* A selector that once dropped series: the first branch backtracks
	 * exponentially over every name before the second one matches. */
	assert_int_equal(rx_compile("(.|..)*X|gpulse_.*", RX_ANCHORED, &r, err, sizeof err), 0);
	const char *name = "gpulse_gpu_memory_used_bytes_per_process_total";
	assert_int_equal(rx_match(r, name, strlen(name), &hit), 0);
	assert_true(hit);
	assert_int_equal(rx_match(r, "nvidia_gpu_memory_used_bytes_per_process_total", 46, &hit), 0);
	assert_false(hit);
	rx_free(r);
	rx_free(NULL);
}

struct replace_case {
	const char *re, *repl, *in, *want;
};

/* go-replace: Go's replaceTests (ReplaceAllString), with $-expansion. */
static void test_replace_all(void **state)
{
	(void)state;
	static const struct replace_case c[] = {
		{"", "", "", ""},
		{"", "x", "", "x"},
		{"", "", "abc", "abc"},
		{"", "x", "abc", "xaxbxcx"},
		{"b", "", "", ""},
		{"b", "x", "", ""},
		{"b", "", "abc", "ac"},
		{"b", "x", "abc", "axc"},
		{"y", "", "", ""},
		{"y", "x", "", ""},
		{"y", "", "abc", "abc"},
		{"y", "x", "abc", "abc"},
		{"[a-c]*", "x", "\xe2\x98\xba", "x\xe2\x98\xbax"},
		{"^[a-c]*", "x", "abcdabc", "xdabc"},
		{"[a-c]*$", "x", "abcdabc", "abcdx"},
		{"^[a-c]*$", "x", "abcdabc", "abcdabc"},
		{"abc", "def", "abcdefg", "defdefg"},
		{"bc", "BC", "abcbcdcdedef", "aBCBCdcdedef"},
		{"abc", "", "abcdabc", "d"},
		{"x", "xXx", "xxxXxxx", "xXxxXxxXxXxXxxXxxXx"},
		{"abc", "d", "", ""},
		{"abc", "d", "abc", "d"},
		{".+", "x", "abc", "x"},
		{"[a-c]*", "x", "def", "xdxexfx"},
		{"[a-c]+", "x", "abcbcdcdedef", "xdxdedef"},
		{"[a-c]*", "x", "abcbcdcdedef", "xdxdxexdxexfx"},
		/* expansion */
		{"a(b)c", "[$1]", "abcabc", "[b][b]"},
		{"a(b)c", "[${1}x]", "abc", "[bx]"},
		{"a(b)c", "[$1x]", "abc", "[]"},          /* the group named "1x" */
		{"a(?P<mid>b)c", "<$mid>", "abc", "<b>"},
		{"a(?P<mid>b)c", "<${mid}>", "abc", "<b>"},
		{"a(b)c", "$$1", "abc", "$1"},
		{"a(b)c", "$", "abc", "$"},
		{"a(b)c", "${1", "abc", "${1"},
		{"a(b)?c", "[$1]", "ac", "[]"},
		{"(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)(k)", "$11$10", "abcdefghijk", "kj"},
	};
	for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
		struct rx *r;
		char err[256];
		if (rx_compile(c[i].re, 0, &r, err, sizeof err) != 0)
			fail_msg("%s: %s", c[i].re, err);
		struct buf b;
		buf_init(&b, 4096);
		buf_puts(&b, "");
		assert_int_equal(rx_replace_all(r, &b, c[i].in, c[i].repl), 0);
		if (strcmp(b.data, c[i].want) != 0)
			fail_msg("/%s/ \"%s\" on \"%s\": got \"%s\", want \"%s\"", c[i].re, c[i].repl,
				 c[i].in, b.data, c[i].want);
		buf_free(&b);
		rx_free(r);
	}
}

static void test_groups(void **state)
{
	(void)state;
	struct rx *r;
	char err[256];
	if (rx_compile("(?P<a>x)(?:y)(z)?(?i)(?P<b>w)", RX_ANCHORED, &r, err, sizeof err) != 0)
		fail_msg("%s", err);
	assert_int_equal(rx_groups(r), 3);
	assert_int_equal(rx_group_index(r, "a", 1), 1);
	assert_int_equal(rx_group_index(r, "b", 1), 3);
	assert_int_equal(rx_group_index(r, "c", 1), -1);
	struct rx_span sp[4];
	bool found;
	assert_int_equal(rx_exec(r, "xyW", 3, 0, sp, 4, &found), 0);
	assert_true(found);
	assert_int_equal(sp[0].start, 0);
	assert_int_equal(sp[0].end, 3);
	assert_int_equal(sp[2].start, -1); /* (z)? took no part */
	assert_int_equal(sp[3].start, 2);
	rx_free(r);
	assert_non_null(strstr(rx_engine(), "PCRE2"));
}

struct sub_case {
	const char *re, *value, *tmpl, *want;
};

/* Each anchored pattern matches its value, and tmpl expands to want. */
static void check_subs(const struct sub_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rx *r;
		char err[256];
		if (rx_compile(c[i].re, RX_ANCHORED, &r, err, sizeof err) != 0)
			fail_msg("%s: %s", c[i].re, err);
		struct rx_span sp[8];
		bool found = false;
		assert_true(rx_groups(r) < 8);
		assert_int_equal(rx_exec(r, c[i].value, strlen(c[i].value), 0, sp, rx_groups(r) + 1, &found), 0);
		assert_true(found);
		struct buf b;
		buf_init(&b, 256);
		buf_puts(&b, "");
		rx_expand(r, &b, c[i].tmpl, c[i].value, sp, rx_groups(r) + 1);
		if (strcmp(b.data, c[i].want) != 0)
			fail_msg("/%s/ on \"%s\": got %s, want %s", c[i].re, c[i].value, b.data, c[i].want);
		buf_free(&b);
		rx_free(r);
	}
}

/* Submatches of groups inside loops that can match empty, as
 * label_replace() reports them in Prometheus 2.42 (each `want` is its
 * answer to label_replace(..., "dst", tmpl, "src", re) on src=value).
 * Go never lets a path revisit a choice point at the same position, so
 * an empty iteration after the first is cut; PCRE2 alone keeps it. */
static void test_go_submatches(void **state)
{
	(void)state;
	static const struct sub_case c[] = {
		{"(a*)+", "aa", "[$1]", "[aa]"},
		{"(a?)*", "aa", "[$1]", "[a]"},
		{"(a|)+", "aa", "[$1]", "[a]"},
		{"(|a)+", "aa", "[$1]", "[a]"},
		{"(|a)*", "aa", "[$1]", "[a]"},
		{"(a*)*", "aa", "[$1]", "[aa]"},
		{"(a*|b)*", "aab", "[$1]", "[b]"},
		{"((a)|b)+", "ab", "[$1|$2]", "[b|a]"},
		{"(a+?)*", "aa", "[$1]", "[a]"},
		{"(a*?)*", "aa", "[$1]", "[aa]"},
		{"(a*?)+", "aa", "[$1]", "[aa]"},
		{"(a*)+?", "aa", "[$1]", "[aa]"},
		{"(a||b)*", "ab", "[$1]", "[b]"},
		{"(a|(?:)|b)*", "ab", "[$1]", "[b]"},
		{"((a*)*)*", "aa", "[$1|$2]", "[aa|aa]"},
		{"(a*)+(b)", "aab", "[$1|$2]", "[aa|b]"},
		{"(?:(a)|b)*", "ab", "[$1]", "[a]"},
		{"(a?)+b", "aab", "[$1]", "[a]"},
		{"((a)|(b)|)*", "ab", "[$1|$2|$3]", "[b|a|b]"},
		{"(()|a)*", "aa", "[$1|$2]", "[a|]"},
		{"(a|())*", "aa", "[$1|$2]", "[a|]"},
		{"(x?y?)*", "xyx", "[$1]", "[x]"},
		{"(?P<n>a*)+", "aa", "[$n]", "[aa]"},
		{"(a?){2}", "a", "[$1]", "[]"},
	};
	check_subs(c, sizeof c / sizeof *c);
	/* A counted repetition in or around such a loop: PCRE2's copies share
	 * group numbers, so captures are refused, never wrong; matching works. */
	struct rx *r;
	char err[256];
	assert_int_equal(rx_compile("(a|){2,}", RX_ANCHORED, &r, err, sizeof err), 0);
	struct rx_span sp[2];
	bool found = true;
	assert_int_equal(rx_exec(r, "aa", 2, 0, sp, 2, &found), GPULSE_ENOTSUP);
	assert_false(found);
	assert_non_null(strstr(rx_exec_unsupported(r), "counted repetition"));
	assert_int_equal(rx_match(r, "aa", 2, &found), 0);
	assert_true(found);
	rx_free(r);
}

/* What Prometheus 2.42 answers (label_replace and matchers, checked on
 * Debian's prometheus) where gpulse once differed. */
static void test_prometheus_quirks(void **state)
{
	(void)state;
	/* Go reads each byte of invalid UTF-8 as one U+FFFD. */
	static const struct match_case c[] = {
		{"a.b", "a\xff" "b", true},
		{"a.b", "a\xff" "z", false},
		{"a[^x]b", "a\xff" "b", true},
		{"a\\x{FFFD}b", "a\xff" "b", true},
		{"a\\Wb", "a\xff" "b", true},
		{"a..", "a\xe2\x82", true},           /* a cut sequence: two characters */
		{"a.", "a\xe2\x82", false},
		{"a.b", "a\xce\xb1" "b", true},
		{"\\x{FFFD}", "\xef\xbf\xbd", true},
		{"a\\Wb", "a\xce\xb1" "b", true},   /* \W and \D: any non-ASCII character */
		{"a\\Db", "a\xce\xb1" "b", true},
	};
	check_matches(c, sizeof c / sizeof *c, RX_ANCHORED);
	struct rx *r;
	char err[256];
	struct rx_span sp[3];
	bool found;
	assert_int_equal(rx_compile("a(.)(b)", RX_ANCHORED, &r, err, sizeof err), 0);
	assert_int_equal(rx_exec(r, "a\xff" "b", 3, 0, sp, 3, &found), 0);
	assert_true(found);
	assert_int_equal(sp[1].start, 1);
	assert_int_equal(sp[1].end, 2);
	assert_int_equal(sp[2].start, 2);
	assert_int_equal(sp[0].end, 3);
	rx_free(r);

	/* Prometheus anchors by text, "^(?:" + re + ")$", so a \Q without \E
	 * takes the ")$" and the group is never closed. */
	assert_int_equal(rx_compile("\\Qfoo.bar", RX_ANCHORED, &r, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "missing closing )"));
	assert_int_equal(rx_compile("\\Qfoo.bar", 0, &r, err, sizeof err), 0);
	rx_free(r);
	/* and the pattern alone must parse too, as for a matcher */
	assert_int_equal(rx_compile("a)|(b", RX_ANCHORED, &r, err, sizeof err), GPULSE_EINVAL);
	assert_non_null(strstr(err, "unexpected )"));

	/* Duplicate group names are accepted (Go before 1.22); $name is the
	 * first group of that name that took part. */
	static const struct sub_case d[] = {
		{"(?P<x>a)(?P<x>b)", "ab", "[$x]", "[a]"},
		{"(?P<x>a)|(?P<x>b)", "b", "[$x]", "[b]"},
	};
	check_subs(d, sizeof d / sizeof *d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prometheus_cases),
		cmocka_unit_test(test_re2_syntax),
		cmocka_unit_test(test_unanchored),
		cmocka_unit_test(test_go_invalid),
		cmocka_unit_test(test_re2_unsupported),
		cmocka_unit_test(test_go_only_perl),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_replace_all),
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_go_submatches),
		cmocka_unit_test(test_prometheus_quirks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
