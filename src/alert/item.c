/* Owned alerts and their JSON; see item.h. */
#include "alert/item.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/label.h"
#include "common/status.h"

static bool has_label(const struct label *l, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].name, name) == 0)
			return true;
	return false;
}

int alert_item_new(struct alert_item **out, const struct alert_notice *n,
		   const struct label *ext, size_t next, const char *default_generator)
{
	*out = NULL;
	const char *gen = n->generator_url ? n->generator_url : default_generator ? default_generator : "";
	size_t strings = strlen(gen) + 1, nl = n->nlabels;
	for (size_t i = 0; i < n->nlabels; i++) {
		if (!n->labels[i].name || !n->labels[i].value)
			return GPULSE_EINVAL;
		strings += strlen(n->labels[i].name) + strlen(n->labels[i].value) + 2;
		if (strings > ALERT_ITEM_MAX_BYTES)
			return GPULSE_ELIMIT;
	}
	for (size_t i = 0; i < n->nannotations; i++) {
		if (!n->annotations[i].name || !n->annotations[i].value)
			return GPULSE_EINVAL;
		strings += strlen(n->annotations[i].name) + strlen(n->annotations[i].value) + 2;
		if (strings > ALERT_ITEM_MAX_BYTES)
			return GPULSE_ELIMIT;
	}
	for (size_t i = 0; i < next; i++)
		if (!has_label(n->labels, n->nlabels, ext[i].name)) {
			strings += strlen(ext[i].name) + strlen(ext[i].value) + 2;
			nl++;
		}
	if (strings > ALERT_ITEM_MAX_BYTES)
		return GPULSE_ELIMIT;
	size_t head = sizeof(struct alert_item) + (nl + n->nannotations) * sizeof(struct label);
	size_t total = head + strings;
	struct alert_item *it = calloc(1, total);
	if (!it)
		return GPULSE_ENOMEM;
	it->labels = (struct label *)(it + 1);
	it->annotations = it->labels + nl;
	char *s = (char *)it + head;
#define COPY(dst, src) do { size_t l_ = strlen(src) + 1; memcpy(s, (src), l_); (dst) = s; s += l_; } while (0)
	size_t k = 0;
	for (size_t i = 0; i < n->nlabels; i++, k++) {
		COPY(it->labels[k].name, n->labels[i].name);
		COPY(it->labels[k].value, n->labels[i].value);
	}
	for (size_t i = 0; i < next; i++)
		if (!has_label(n->labels, n->nlabels, ext[i].name)) {
			COPY(it->labels[k].name, ext[i].name);
			COPY(it->labels[k].value, ext[i].value);
			k++;
		}
	for (size_t i = 0; i < n->nannotations; i++) {
		COPY(it->annotations[i].name, n->annotations[i].name);
		COPY(it->annotations[i].value, n->annotations[i].value);
	}
	COPY(it->generator_url, gen);
#undef COPY
	it->nlabels = nl;
	it->nannotations = n->nannotations;
	qsort(it->labels, nl, sizeof *it->labels, label_cmp_name);
	it->starts_at_ms = n->starts_at_ms;
	it->ends_at_ms = n->ends_at_ms;
	it->resolved = n->resolved != 0;
	it->fingerprint = n->fingerprint;
	it->bytes = total;
	*out = it;
	return 0;
}

struct alert_item *alert_item_dup(const struct alert_item *it)
{
	struct alert_item *c = malloc(it->bytes);
	if (!c)
		return NULL;
	memcpy(c, it, it->bytes);
	/* Re-point every pointer into the copy: same offsets, new base. */
#define REBASE(ptr) ((const char *)c + ((const char *)(ptr) - (const char *)it))
	c->labels = (struct label *)(c + 1);
	c->annotations = c->labels + it->nlabels;
	for (size_t i = 0; i < it->nlabels + it->nannotations; i++) {
		c->labels[i].name = REBASE(it->labels[i].name);
		c->labels[i].value = REBASE(it->labels[i].value);
	}
	c->generator_url = REBASE(it->generator_url);
#undef REBASE
	return c;
}

bool alert_item_is_resolved(const struct alert_item *it, int64_t now_ms)
{
	return it->resolved || (it->ends_at_ms > 0 && it->ends_at_ms <= now_ms);
}

int alert_put_time(struct buf *b, int64_t ms)
{
	buf_putc(b, '"');
	buf_put_rfc3339(b, ms, false);
	return buf_putc(b, '"');
}

int alert_put_labels(struct buf *b, const struct label *l, size_t n)
{
	buf_putc(b, '{');
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(b, ',');
		buf_put_json_string(b, l[i].name);
		buf_putc(b, ':');
		buf_put_json_string(b, l[i].value);
	}
	return buf_putc(b, '}');
}

int alert_put_postable(struct buf *b, const struct alert_item *it)
{
	buf_puts(b, "{\"labels\":");
	alert_put_labels(b, it->labels, it->nlabels);
	buf_puts(b, ",\"annotations\":");
	alert_put_labels(b, it->annotations, it->nannotations);
	buf_puts(b, ",\"startsAt\":");
	alert_put_time(b, it->starts_at_ms);
	if (it->ends_at_ms > 0) {
		buf_puts(b, ",\"endsAt\":");
		alert_put_time(b, it->ends_at_ms);
	}
	buf_puts(b, ",\"generatorURL\":");
	buf_put_json_string(b, it->generator_url);
	return buf_putc(b, '}');
}

int alert_put_webhook_alert(struct buf *b, const struct alert_item *it, bool resolved)
{
	buf_printf(b, "{\"status\":\"%s\",\"labels\":", resolved ? "resolved" : "firing");
	alert_put_labels(b, it->labels, it->nlabels);
	buf_puts(b, ",\"annotations\":");
	alert_put_labels(b, it->annotations, it->nannotations);
	buf_puts(b, ",\"startsAt\":");
	alert_put_time(b, it->starts_at_ms);
	buf_puts(b, ",\"endsAt\":");
	alert_put_time(b, resolved ? it->ends_at_ms : 0);
	buf_puts(b, ",\"generatorURL\":");
	buf_put_json_string(b, it->generator_url);
	return buf_printf(b, ",\"fingerprint\":\"%016llx\"}", (unsigned long long)it->fingerprint);
}
