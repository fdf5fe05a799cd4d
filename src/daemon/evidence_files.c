/* Evidence on disk; see evidence_files.h. */
#include "daemon/evidence_files.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "alert/batchfile.h"   /* alert_crc32 */
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/status.h"
#include "common/str.h"

#define MAGIC "gpulse-evidence 1 "

int evidence_file_encode(struct buf *out, const struct evidence_file_meta *m, const char *doc,
			 size_t len)
{
	buf_puts(out, MAGIC "{\"id\":");
	buf_put_json_string(out, m->id);
	buf_printf(out, ",\"gpu\":%d,\"cause\":", m->gpu);
	buf_put_json_string(out, m->cause);
	buf_puts(out, ",\"detail\":");
	buf_put_json_string(out, m->detail);
	buf_printf(out, ",\"created_ms\":%" PRId64 ",\"ready_ms\":%" PRId64 ",\"links\":[",
		   m->created_ms, m->ready_ms);
	for (unsigned i = 0; i < m->nlinks && i < EVIDENCE_FILE_LINKS; i++) {
		buf_printf(out, "%s{\"fp\":\"%016" PRIx64 "\",\"starts_ms\":%" PRId64 ",\"alert\":",
			   i ? "," : "", m->links[i].fingerprint, m->links[i].starts_at_ms);
		buf_put_json_string(out, m->links[i].alert);
		buf_putc(out, '}');
	}
	buf_printf(out, "],\"length\":%zu,\"crc32\":\"%08" PRIx32 "\"}\n", len, alert_crc32(doc, len));
	buf_append(out, doc, len);
	return out->failed ? GPULSE_ENOMEM : 0;
}

static int str_field(json_t *o, const char *key, char *out, size_t len)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s && str_copy(out, len, s) ? 0 : -1;
}

static int int_field(json_t *o, const char *key, int64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_integer(v))
		return -1;
	*out = json_integer_value(v);
	return 0;
}

int evidence_file_decode(const char *data, size_t len, struct evidence_file_meta *m,
			 size_t *doc_off, size_t *doc_len, char *err, size_t errlen)
{
	size_t ml = sizeof MAGIC - 1;
	const char *nl = memchr(data, '\n', len < EVIDENCE_FILE_HEADER_MAX ? len : EVIDENCE_FILE_HEADER_MAX);
	if (!nl || len < ml || memcmp(data, MAGIC, ml) != 0) {
		str_errf(err, errlen, "not a gpulse evidence file (bad header)");
		return GPULSE_EPARSE;
	}
	json_error_t je;
	json_t *h = json_loadb(data + ml, (size_t)(nl - data) - ml, 0, &je);
	memset(m, 0, sizeof *m);
	int64_t gpu = -1, length = -1;
	const char *crc_s = h ? json_string_value(json_object_get(h, "crc32")) : NULL;
	json_t *links = h ? json_object_get(h, "links") : NULL;
	if (!h || str_field(h, "id", m->id, sizeof m->id) || str_field(h, "cause", m->cause, sizeof m->cause) ||
	    str_field(h, "detail", m->detail, sizeof m->detail) || int_field(h, "gpu", &gpu) ||
	    int_field(h, "created_ms", &m->created_ms) || int_field(h, "ready_ms", &m->ready_ms) ||
	    int_field(h, "length", &length) || !crc_s || strlen(crc_s) != 8 || !json_is_array(links) ||
	    gpu < 0 || gpu > 1 << 20 || !m->id[0]) {
		str_errf(err, errlen, "bad header fields");
		json_decref(h);
		return GPULSE_EPARSE;
	}
	m->gpu = (int)gpu;
	size_t i;
	json_t *l;
	json_array_foreach(links, i, l) {
		if (m->nlinks == EVIDENCE_FILE_LINKS)
			break;
		struct evidence_file_link *k = &m->links[m->nlinks];
		const char *fp = json_string_value(json_object_get(l, "fp"));
		char *end;
		if (!fp || (k->fingerprint = strtoull(fp, &end, 16), *end) ||
		    int_field(l, "starts_ms", &k->starts_at_ms) || str_field(l, "alert", k->alert, sizeof k->alert))
			continue;
		m->nlinks++;
	}
	/* crc_s lives in h: read it whole before h goes (reading `end` after
	 * json_decref was a use after free that, now and then, called a
	 * good file's CRC bad and renamed it .bad). */
	char *end;
	unsigned long crc = strtoul(crc_s, &end, 16);
	bool crc_hex = *end == '\0';
	json_decref(h);
	size_t off = (size_t)(nl + 1 - data);
	if (!crc_hex) {
		str_errf(err, errlen, "bad header fields (crc32 is not 8 hex digits)");
		return GPULSE_EPARSE;
	}
	if ((uint64_t)length != len - off) {
		str_errf(err, errlen, "length %" PRId64 " does not match the file (%zu document bytes)",
			 length, len - off);
		return GPULSE_EPARSE;
	}
	if (alert_crc32(data + off, len - off) != (uint32_t)crc) {
		str_errf(err, errlen, "CRC mismatch: the document is damaged");
		return GPULSE_EPARSE;
	}
	*doc_off = off;
	*doc_len = len - off;
	return 0;
}

/* An ID names a file: only what trigger makes ("MS-GPU-SEQ"). */
static int name_of(const char *id, char *name, size_t len)
{
	if (!id[0] || strspn(id, "0123456789-") != strlen(id))
		return -1;
	return snprintf(name, len, "%s" EVIDENCE_FILE_SUFFIX, id) < (int)len ? 0 : -1;
}

int evidence_file_write(const char *dir, const struct evidence_file_meta *m, const char *doc,
			size_t len, char *err, size_t errlen)
{
	char name[64];
	if (name_of(m->id, name, sizeof name) != 0) {
		str_errf(err, errlen, "evidence ID %s cannot name a file", m->id);
		return GPULSE_EIO;
	}
	/* Made again if it went (or never was: a directory that could
	 * not be made at start). */
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		str_errf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return GPULSE_EIO;
	}
	struct buf b;
	buf_init(&b, len + EVIDENCE_FILE_HEADER_MAX);
	int rc = evidence_file_encode(&b, m, doc, len);
	if (rc)
		str_errf(err, errlen, "%s/%s: out of memory", dir, name);
	else
		rc = atomic_file_write(dir, name, b.data, b.len, err, errlen);
	buf_free(&b);
	return rc;
}

int evidence_file_remove(const char *dir, const char *id, char *err, size_t errlen)
{
	char name[64], path[4400];
	if (name_of(id, name, sizeof name) != 0)
		return 0;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (unlink(path) == 0 || errno == ENOENT)
		return 0;
	str_errf(err, errlen, "cannot remove %s: %s", path, strerror(errno));
	return GPULSE_EIO;
}

int evidence_file_load(const char *dir, size_t max_doc, evidence_file_fn *fn, void *ctx,
		       unsigned *damaged, char *err, size_t errlen)
{
	*damaged = 0;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		str_errf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
		return GPULSE_EIO;
	}
	DIR *d = opendir(dir);
	if (!d) {
		str_errf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
		return GPULSE_EIO;
	}
	size_t sl = sizeof EVIDENCE_FILE_SUFFIX - 1;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		size_t nl = strlen(de->d_name);
		if (strncmp(de->d_name, ".tmp-", 5) == 0) {
			/* A write a crash cut short: never renamed into place. */
			unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (nl <= sl || strcmp(de->d_name + nl - sl, EVIDENCE_FILE_SUFFIX) != 0)
			continue;
		char *data = NULL, why[512];
		size_t len = 0, off = 0, doc_len = 0;
		struct evidence_file_meta m;
		int rc = atomic_file_read(dir, de->d_name, max_doc + EVIDENCE_FILE_HEADER_MAX, &data,
					  &len, why, sizeof why);
		if (rc == GPULSE_ENOMEM || rc == GPULSE_EIO) {
			log_warn("evidence: %s; left where it is", why);
			(*damaged)++;
			continue;
		}
		if (rc == 0)
			rc = evidence_file_decode(data, len, &m, &off, &doc_len, why, sizeof why);
		if (rc != 0) {
			char bad[300];
			snprintf(bad, sizeof bad, "%s.bad", de->d_name);
			log_warn("evidence: %s/%s: %s; renamed %s", dir, de->d_name, why, bad);
			renameat(dirfd(d), de->d_name, dirfd(d), bad);
			(*damaged)++;
			free(data);
			continue;
		}
		memmove(data, data + off, doc_len);
		data[doc_len] = '\0';
		fn(ctx, &m, data, doc_len);
	}
	closedir(d);
	return 0;
}
