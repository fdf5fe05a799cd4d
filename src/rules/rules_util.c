/* Helpers for the rules subsystem (rules_util.h). */
#include "rules/rules_util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/gofloat.h"
#include "common/status.h"
#include "common/str.h"
#include "common/xalloc.h"

const struct ynode *rules_map_get(const struct ynode *n, const char *key)
{
	if (!n || n->kind != YNODE_MAP)
		return NULL;
	for (size_t i = 0; i + 1 < n->n; i += 2)
		if (n->items[i]->kind == YNODE_SCALAR && strcmp(n->items[i]->value, key) == 0)
			return n->items[i + 1];
	return NULL;
}

int rules_check_keys(const char *path, const struct ynode *n, const char *const *allowed,
		     const char *type, struct buf *errs, int *nerr)
{
	int bad = 0;
	for (size_t i = 0; i + 1 < n->n; i += 2) {
		const struct ynode *k = n->items[i];
		if (k->kind != YNODE_SCALAR) {
			buf_printf(errs, "%s:%d:%d: a key must be a string, not %s\n", path, k->line, k->col,
				   ynode_kind_name(k));
			bad++;
			continue;
		}
		bool ok = false;
		for (size_t a = 0; allowed[a] && !ok; a++)
			ok = strcmp(allowed[a], k->value) == 0;
		if (!ok) {
			buf_printf(errs, "%s:%d:%d: field %s not found in type %s\n", path, k->line, k->col,
				   k->value, type);
			bad++;
			continue;
		}
		for (size_t j = 0; j < i; j += 2)
			if (n->items[j]->kind == YNODE_SCALAR && strcmp(n->items[j]->value, k->value) == 0) {
				buf_printf(errs, "%s:%d:%d: key \"%s\" already set in map\n", path, k->line,
					   k->col, k->value);
				bad++;
				break;
			}
	}
	*nerr += bad;
	return bad;
}

bool rules_valid_metric_name(const char *s)
{
	if (!*s)
		return false;
	for (size_t i = 0; s[i]; i++) {
		char c = s[i];
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
			  (i > 0 && c >= '0' && c <= '9');
		if (!ok)
			return false;
	}
	return true;
}

bool rules_valid_label_name(const char *s)
{
	return str_is_label_name(s);
}

void rules_labels_free(struct label *l, size_t n)
{
	if (!l)
		return;
	for (size_t i = 0; i < n; i++) {
		free((void *)(uintptr_t)l[i].name);
		free((void *)(uintptr_t)l[i].value);
	}
	free(l);
}

static int label_name_cmp(const void *a, const void *b)
{
	const struct label *x = a, *y = b;
	return strcmp(x->name, y->name);
}

void rules_labels_sort(struct label *l, size_t n)
{
	if (n > 1)
		qsort(l, n, sizeof *l, label_name_cmp);
}

int rules_labels_cmp(const struct label *a, size_t na, const struct label *b,
		     size_t nb)
{
	for (size_t i = 0; i < na && i < nb; i++) {
		int c = strcmp(a[i].name, b[i].name);
		if (c)
			return c;
		c = strcmp(a[i].value, b[i].value);
		if (c)
			return c;
	}
	return na < nb ? -1 : na > nb ? 1 : 0;
}

int rules_read_file(const char *path, size_t max, char **data, size_t *len, char *err,
		    size_t errlen)
{
	*data = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		str_errf(err, errlen, "%s", strerror(errno));
		return errno == ENOENT ? GPULSE_ENOENT : GPULSE_EIO;
	}
	struct buf b;
	buf_init(&b, max);
	char chunk[65536];
	int rc = 0;
	for (;;) {
		ssize_t r = read(fd, chunk, sizeof chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			str_errf(err, errlen, "%s", strerror(errno));
			rc = GPULSE_EIO;
			break;
		}
		if (r == 0)
			break;
		if (buf_append(&b, chunk, (size_t)r)) {
			str_errf(err, errlen, "file larger than %zu bytes", max);
			rc = GPULSE_ELIMIT;
			break;
		}
	}
	close(fd);
	if (rc) {
		buf_free(&b);
		return rc;
	}
	*len = b.len;
	*data = b.data ? buf_steal(&b) : xstrdup("");
	return 0;
}

int rules_format_e(struct buf *b, double v)
{
	return gofloat_put(b, v, 'E');
}
