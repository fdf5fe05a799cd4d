/* A small, bounded YAML document tree for the rule and rule-test files:
 * libyaml's event API builds it, every node keeps its line and column so
 * that errors can name FILE:LINE:COL as promtool does, and the number of
 * nodes and the nesting depth are bounded so that no input can exhaust
 * memory or the stack. Aliases are refused (they are how a small file
 * expands into a huge one). */
#ifndef GPULSE_RULES_YTREE_H
#define GPULSE_RULES_YTREE_H

#include <stdbool.h>
#include <stddef.h>

#define YTREE_MAX_NODES  (1000 * 1000) /* nodes of one document */
#define YTREE_MAX_DEPTH  64            /* nesting of sequences and mappings */

enum ynode_kind { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP };

struct ynode {
	enum ynode_kind kind;
	int line, col;        /* 1-based position of the node's start */
	char *value;          /* SCALAR: NUL-terminated text */
	bool plain;           /* SCALAR: written without quotes (may be null or a number) */
	struct ynode **items; /* SEQ: the items; MAP: key, value, key, value ... */
	size_t n;             /* entries of items */
};

/* Parse the first document of data[len]. On success *out is the root
 * (NULL for an empty document), freed with ytree_free. On failure a
 * status code and err holds "LINE:COL: message". */
int ytree_parse(const char *data, size_t len, struct ynode **out, char *err, size_t errlen);

/* Accepts NULL. */
void ytree_free(struct ynode *n);

/* True when n is NULL or a plain scalar meaning null ("", "~", "null"). */
bool ynode_is_null(const struct ynode *n);

/* "a mapping", "a sequence", "a string". */
const char *ynode_kind_name(const struct ynode *n);

#endif
