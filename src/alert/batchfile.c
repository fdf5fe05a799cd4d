/* Batch files of the on-disk notification queue; see batchfile.h. */
#include "alert/batchfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"
#include "common/status.h"
#include "common/str.h"

#define MAGIC "gpulse-alert-batch 1 "
#define HEADER_MAX 160

uint32_t alert_crc32(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint32_t crc = 0xffffffffu;
	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
	}
	return ~crc;
}

int alert_batch_encode(struct buf *out, const struct alert_batch_hdr *h, const char *body,
		       size_t len)
{
	if (len > ALERT_BATCH_MAX_BODY)
		return GPULSE_ELIMIT;
	int rc = buf_printf(out, MAGIC "created_ms=%" PRId64 " alerts=%u length=%zu crc32=%08" PRIx32 "\n",
			    h->created_ms, h->nalerts, len, alert_crc32(body, len));
	return rc ? rc : buf_append(out, body, len);
}

/* Read "KEY=DIGITS" at *p, advancing past it and one following space or
 * newline (`end`). Decimal, or hex when `hex`. */
static int field(const char **p, const char *lim, const char *key, bool hex, char end,
		 uint64_t *out)
{
	size_t kl = strlen(key);
	if ((size_t)(lim - *p) <= kl || memcmp(*p, key, kl) != 0 || (*p)[kl] != '=')
		return -1;
	const char *s = *p + kl + 1;
	uint64_t v = 0;
	int digits = 0;
	for (; s < lim && digits < 20; s++, digits++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (hex && *s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else
			break;
		uint64_t base = hex ? 16 : 10;
		if (v > (UINT64_MAX - (uint64_t)d) / base)
			return -1;
		v = v * base + (uint64_t)d;
	}
	if (digits == 0 || s >= lim || *s != end)
		return -1;
	*p = s + 1;
	*out = v;
	return 0;
}

int alert_batch_decode(const char *data, size_t len, struct alert_batch_hdr *h, size_t *body_off,
		       size_t *body_len, char *err, size_t errlen)
{
	const char *nl = memchr(data, '\n', len < HEADER_MAX ? len : HEADER_MAX);
	size_t ml = sizeof MAGIC - 1;
	if (!nl || len < ml || memcmp(data, MAGIC, ml) != 0) {
		str_errf(err, errlen, "not a gpulse alert batch (bad header)");
		return GPULSE_EPARSE;
	}
	const char *p = data + ml, *lim = nl + 1;
	uint64_t created, alerts, length, crc;
	if (field(&p, lim, "created_ms", false, ' ', &created) ||
	    field(&p, lim, "alerts", false, ' ', &alerts) ||
	    field(&p, lim, "length", false, ' ', &length) ||
	    field(&p, lim, "crc32", true, '\n', &crc) || p != lim || created > INT64_MAX ||
	    alerts > UINT32_MAX || crc > UINT32_MAX) {
		str_errf(err, errlen, "bad header fields");
		return GPULSE_EPARSE;
	}
	size_t off = (size_t)(lim - data);
	if (length > ALERT_BATCH_MAX_BODY || length != len - off) {
		str_errf(err, errlen, "length %" PRIu64 " does not match the file (%zu body bytes)",
			 length, len - off);
		return GPULSE_EPARSE;
	}
	if (alert_crc32(data + off, (size_t)length) != (uint32_t)crc) {
		str_errf(err, errlen, "CRC mismatch: the body is damaged");
		return GPULSE_EPARSE;
	}
	h->created_ms = (int64_t)created;
	h->nalerts = (unsigned)alerts;
	*body_off = off;
	*body_len = (size_t)length;
	return 0;
}

int alert_batch_write(const char *dir, uint64_t seq, const struct alert_batch_hdr *h,
		      const char *body, size_t len, char *err, size_t errlen)
{
	char name[64];
	struct buf b;
	buf_init(&b, ALERT_BATCH_MAX_BODY + HEADER_MAX);
	int rc = alert_batch_encode(&b, h, body, len);
	if (rc != 0)
		str_errf(err, errlen, "batch of %zu bytes is over the limit", len);
	snprintf(name, sizeof name, "%016" PRIx64 ALERT_BATCH_SUFFIX, seq);
	if (rc == 0)
		rc = atomic_file_write(dir, name, b.data, b.len, err, errlen);
	buf_free(&b);
	return rc;
}

int alert_batch_read(const char *dir, const char *name, struct alert_batch_hdr *h, char **data,
		     size_t *body_off, size_t *body_len, char *err, size_t errlen)
{
	size_t len;
	int rc = atomic_file_read(dir, name, ALERT_BATCH_MAX_BODY + HEADER_MAX, data, &len, err,
				  errlen);
	if (rc == GPULSE_ELIMIT) {
		/* Too long to be a batch: as damaged as a short one. */
		str_errf(err, errlen, "%s/%s: not an intact batch: longer than %u bytes", dir, name,
			 ALERT_BATCH_MAX_BODY + HEADER_MAX);
		return GPULSE_EPARSE;
	}
	if (rc != 0)
		return rc == GPULSE_ENOMEM ? GPULSE_ENOMEM : GPULSE_EIO;
	char why[256];
	if (alert_batch_decode(*data, len, h, body_off, body_len, why, sizeof why) != 0) {
		str_errf(err, errlen, "%s/%s: %s", dir, name, why);
		free(*data);
		*data = NULL;
		return GPULSE_EPARSE;
	}
	return 0;
}

int alert_batch_remove(const char *dir, uint64_t seq)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%016" PRIx64 ALERT_BATCH_SUFFIX, dir, seq);
	return unlink(path) == 0 || errno == ENOENT ? 0 : GPULSE_EIO;
}

int64_t alert_batch_name_seq(const char *name)
{
	size_t sl = sizeof ALERT_BATCH_SUFFIX - 1;
	if (strlen(name) != 16 + sl || strcmp(name + 16, ALERT_BATCH_SUFFIX) != 0)
		return -1;
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = name[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	return v > INT64_MAX ? -1 : (int64_t)v;
}
