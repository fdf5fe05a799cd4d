/* Regular expressions in RE2's dialect (what Prometheus, Alertmanager and
 * Go's text/template use), run by PCRE2. A pattern is first checked and
 * translated by rx.c: what RE2 refuses (backreferences, lookaround,
 * atomic and possessive groups, recursion, \C, conditionals, ...) is
 * refused with Go's message, the construct and its byte position; what
 * RE2 accepts is rewritten where PCRE2 would read it differently (\s,
 * \v, octal escapes, named groups, literal braces). Matching is bounded
 * by PCRE2's match, depth and heap limits instead of RE2's linear time;
 * docs/internals/regex.md has the dialect and the differences left. */
#ifndef GPULSE_RX_H
#define GPULSE_RX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define RX_MAX_PATTERN (64 * 1024) /* bytes of one pattern */
#define RX_MAX_REPEAT 1000         /* RE2's largest {n,m}, nested counts multiplied */
#define RX_MAX_NESTING 250         /* groups nested in groups */
#define RX_MAX_GROUPS 1000         /* capturing groups in one pattern */
#define RX_MATCH_LIMIT 1000000     /* PCRE2 match() calls for one match */
#define RX_DEPTH_LIMIT 10000       /* PCRE2 backtracking depth */
#define RX_HEAP_LIMIT_KIB 8192     /* PCRE2 backtracking memory */
#define RX_DFA_WORKSPACE 65536     /* ints of PCRE2's DFA matcher, rx_match's fallback */

/* Compile flags. */
#define RX_ANCHORED \
	1u /* as Prometheus: re must parse alone and as the
				    * text "^(?:" re ")$", which is what runs */

struct rx;

/* A capture's byte offsets in the subject; start -1 when it took no part. */
struct rx_span {
	long start, end;
};

/* Compile `pattern` (NUL-terminated, UTF-8). On success *out holds a
 * pattern for rx_free; it may be used by many threads at once. On error
 * GPULSE_EINVAL (or GPULSE_ELIMIT for a size bound) and one sentence in
 * err, Go's words: "error parsing regexp: invalid escape sequence: `\C`
 * (any byte) at byte 3"; ENOMEM. */
int rx_compile(const char *pattern, unsigned flags, struct rx **out, char *err, size_t errlen);

/* Destroy; accepts NULL. */
void rx_free(struct rx *r);

/* For tests: the match limit of patterns compiled from now on (instead
 * of RX_MATCH_LIMIT) and the DFA fallback's workspace in ints (instead
 * of RX_DFA_WORKSPACE), so that a small pattern and subject can exceed
 * both and rx_match answer GPULSE_ELIMIT. 0 restores a default. */
void rx_set_limits(uint32_t match_limit, size_t dfa_workspace_ints);

/* Whether the pattern matches within s[0..len), in *matched. 0, or
 * GPULSE_ELIMIT when a cost limit stopped the match (counted in
 * rx_limit_hits; *matched is false: the caller must fail, never take it
 * for "no match"), GPULSE_ENOMEM. A match the backtracker gives up is
 * decided by PCRE2's DFA matcher, linear in the subject, so ELIMIT needs
 * a pattern too large for its workspace. An anchored pattern
 * must match all of it. A byte of invalid UTF-8 in the subject is one
 * character U+FFFD, as Go reads it, and no error. */
int rx_match(const struct rx *r, const char *s, size_t len, bool *matched);

/* The leftmost-first match starting at or after byte `start`, in
 * *found; when found, sp[0] is the match and sp[1..nsp) the captures
 * (absent ones start -1), as Go's regexp reports them. rx_match's status
 * codes, and GPULSE_ENOTSUP for a pattern rx_exec_unsupported names. */
int rx_exec(const struct rx *r, const char *s, size_t len, size_t start, struct rx_span *sp,
	    size_t nsp, bool *found);

/* NULL, or why rx_exec refuses this pattern's submatches with
 * GPULSE_ENOTSUP (a counted repetition in or around a loop whose body
 * can match empty: docs/internals/regex.md, "Submatches"). */
const char *rx_exec_unsupported(const struct rx *r);

/* Capturing groups in the pattern (not counting the whole match). */
size_t rx_groups(const struct rx *r);

/* The number of the group named `name` (len bytes), or -1. */
int rx_group_index(const struct rx *r, const char *name, size_t len);

/* Append Go's Regexp.ExpandString of `tmpl` for the match `sp` (nsp
 * spans, rx_groups(r) + 1 of them) in `subject`: $1, ${1}, $name,
 * ${name} give a capture (an unknown or unmatched one gives nothing; a
 * name is the longest run of letters, digits and '_', so "$1x" is the
 * group named "1x"), $$ gives '$', and a '$' that starts none of those
 * stays as it is. Returns the buffer's status. */
int rx_expand(const struct rx *r, struct buf *b, const char *tmpl, const char *subject,
	      const struct rx_span *sp, size_t nsp);

/* Go's Regexp.ReplaceAllString(src, tmpl) with rx_expand's $-expansion:
 * appended to b. 0, the buffer's status, or rx_exec's. */
int rx_replace_all(const struct rx *r, struct buf *b, const char *src, const char *tmpl);

/* Matches stopped by a cost limit since start, all patterns together. */
uint64_t rx_limit_hits(void);

/* "PCRE2 10.42 (JIT)": the engine that runs the patterns, for logs and
 * buildinfo. */
const char *rx_engine(void);

#endif
