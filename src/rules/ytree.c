/* The bounded YAML tree (ytree.h). libyaml has a document API too, but it
 * has no bound on the nodes it builds and expands aliases; building our
 * own tree from events keeps both under control in a few lines. */
#include "rules/ytree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

struct builder {
	yaml_parser_t yp;
	size_t nodes;
	char *err;
	size_t errlen;
};

void ytree_free(struct ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		ytree_free(n->items[i]);
	free(n->items);
	free(n->value);
	free(n);
}

bool ynode_is_null(const struct ynode *n)
{
	if (!n)
		return true;
	if (n->kind != YNODE_SCALAR || !n->plain)
		return false;
	return n->value[0] == '\0' || strcmp(n->value, "~") == 0 || strcmp(n->value, "null") == 0 ||
	       strcmp(n->value, "Null") == 0 || strcmp(n->value, "NULL") == 0;
}

const char *ynode_kind_name(const struct ynode *n)
{
	if (!n)
		return "null";
	switch (n->kind) {
	case YNODE_MAP:
		return "a mapping";
	case YNODE_SEQ:
		return "a sequence";
	case YNODE_SCALAR:
		break;
	}
	return "a string";
}

static int next_event(struct builder *b, yaml_event_t *ev)
{
	if (yaml_parser_parse(&b->yp, ev))
		return 0;
	const yaml_parser_t *y = &b->yp;
	yaml_mark_t m = y->problem_mark;
	if (y->context)
		str_errf(b->err, b->errlen, "%zu:%zu: %s %s", m.line + 1, m.column + 1, y->context,
			 y->problem ? y->problem : "invalid YAML");
	else
		str_errf(b->err, b->errlen, "%zu:%zu: %s", m.line + 1, m.column + 1,
			 y->problem ? y->problem : "invalid YAML");
	return GPULSE_EPARSE;
}

static void push(struct ynode *parent, struct ynode *child, size_t *cap)
{
	if (parent->n == *cap) {
		*cap = *cap ? *cap * 2 : 8;
		parent->items = xrealloc(parent->items, *cap * sizeof *parent->items);
	}
	parent->items[parent->n++] = child;
}

/* Build the node that starts with `ev` (consumed here). */
static int build(struct builder *b, yaml_event_t *ev, int depth, struct ynode **out)
{
	*out = NULL;
	if (++b->nodes > YTREE_MAX_NODES) {
		str_errf(b->err, b->errlen, "%zu:%zu: document has more than %d nodes",
			 ev->start_mark.line + 1, ev->start_mark.column + 1, YTREE_MAX_NODES);
		yaml_event_delete(ev);
		return GPULSE_ELIMIT;
	}
	struct ynode *n = xcalloc(1, sizeof *n);
	n->line = (int)ev->start_mark.line + 1;
	n->col = (int)ev->start_mark.column + 1;
	int rc = 0;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n->kind = YNODE_SCALAR;
		n->value = xmalloc(ev->data.scalar.length + 1);
		memcpy(n->value, ev->data.scalar.value, ev->data.scalar.length);
		n->value[ev->data.scalar.length] = '\0';
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag;
		yaml_event_delete(ev);
		*out = n;
		return 0;
	case YAML_ALIAS_EVENT:
		str_errf(b->err, b->errlen, "%d:%d: YAML aliases are not supported", n->line, n->col);
		yaml_event_delete(ev);
		free(n);
		return GPULSE_EPARSE;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		break;
	default:
		str_errf(b->err, b->errlen, "%d:%d: unexpected YAML event", n->line, n->col);
		yaml_event_delete(ev);
		free(n);
		return GPULSE_EPARSE;
	}
	bool map = ev->type == YAML_MAPPING_START_EVENT;
	n->kind = map ? YNODE_MAP : YNODE_SEQ;
	yaml_event_delete(ev);
	if (depth >= YTREE_MAX_DEPTH) {
		str_errf(b->err, b->errlen, "%d:%d: nested more than %d levels deep", n->line, n->col,
			 YTREE_MAX_DEPTH);
		free(n);
		return GPULSE_ELIMIT;
	}
	size_t cap = 0;
	for (;;) {
		yaml_event_t e;
		if ((rc = next_event(b, &e)))
			break;
		if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&e);
			break;
		}
		struct ynode *child;
		if ((rc = build(b, &e, depth + 1, &child)))
			break;
		push(n, child, &cap);
	}
	if (rc) {
		ytree_free(n);
		return rc;
	}
	*out = n;
	return 0;
}

int ytree_parse(const char *data, size_t len, struct ynode **out, char *err, size_t errlen)
{
	struct builder b = {.err = err, .errlen = errlen};
	int rc = 0;
	*out = NULL;
	if (!yaml_parser_initialize(&b.yp))
		return GPULSE_ENOMEM;
	yaml_parser_set_input_string(&b.yp, (const unsigned char *)data, len);
	yaml_event_t ev;
	if ((rc = next_event(&b, &ev)))
		goto out;
	yaml_event_delete(&ev); /* STREAM_START */
	if ((rc = next_event(&b, &ev)))
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {
		yaml_event_delete(&ev);
		goto out;
	}
	yaml_event_delete(&ev); /* DOCUMENT_START */
	if ((rc = next_event(&b, &ev)))
		goto out;
	if ((rc = build(&b, &ev, 0, out)))
		goto out;
	if ((rc = next_event(&b, &ev)))
		goto out;
	yaml_event_delete(&ev); /* DOCUMENT_END */
out:
	if (rc) {
		ytree_free(*out);
		*out = NULL;
	}
	yaml_parser_delete(&b.yp);
	return rc;
}
