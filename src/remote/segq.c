/* The remote-write segment log (segq.h). Hand-written: what is needed is
 * a small log with one reader offset and a byte bound, with the crash
 * behaviour spelled out, and none of Debian's libraries is that (SQLite
 * would do it at many times the write cost; Prometheus's WAL is Go). */
#include "remote/segq.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "common/status.h"
#include "common/str.h"

struct seg {
	uint64_t id;
	uint64_t size;       /* bytes of whole records */
	uint64_t records;
	uint64_t samples;
};

struct segq {
	pthread_mutex_t mu;
	char *dir;
	int dirfd;
	uint64_t max_bytes, seg_bytes;
	struct seg *segs;    /* oldest first; segs[nseg - 1] takes appends */
	size_t nseg, capseg;
	int wfd;             /* the newest segment, open for appends */
	int rfd;             /* the segment being read, or -1 */
	uint64_t rfd_id;
	/* The committed read position: segment id and byte offset in it, and
	 * what of that segment lies before it. */
	uint64_t rseg, roff, rrecords, rsamples;
	uint64_t offset_seq;
	struct segq_stats st;
};

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint32_t rec_crc(const uint8_t *hdr, const uint8_t *payload, size_t len)
{
	uLong c = crc32(0L, Z_NULL, 0);
	c = crc32(c, hdr + 8, 4);
	c = crc32(c, hdr + 16, 8);
	/* zlib takes lengths as uInt: feed large payloads in pieces. */
	while (len) {
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
		c = crc32(c, payload, n);
		payload += n;
		len -= n;
	}
	return (uint32_t)c;
}

int segq_record_decode(const uint8_t *p, size_t avail, struct segq_hdr *h)
{
	if (avail < SEGQ_HDR_BYTES)
		return avail >= 4 && get32(p) != SEGQ_MAGIC ? GPULSE_EPARSE : GPULSE_ERANGE;
	if (get32(p) != SEGQ_MAGIC)
		return GPULSE_EPARSE;
	h->len = get32(p + 4);
	h->nsamples = get32(p + 8);
	h->crc = get32(p + 12);
	h->max_t_ms = (int64_t)get64(p + 16);
	if (h->len > SEGQ_MAX_RECORD)
		return GPULSE_EPARSE;
	if (avail - SEGQ_HDR_BYTES < h->len)
		return GPULSE_ERANGE;
	if (rec_crc(p, p + SEGQ_HDR_BYTES, h->len) != h->crc)
		return GPULSE_EPARSE;
	return 0;
}

int segq_record_encode(struct buf *out, const void *payload, uint32_t len, uint32_t nsamples,
		       int64_t max_t_ms)
{
	uint8_t hdr[SEGQ_HDR_BYTES];
	put32(hdr, SEGQ_MAGIC);
	put32(hdr + 4, len);
	put32(hdr + 8, nsamples);
	put64(hdr + 16, (uint64_t)max_t_ms);
	put32(hdr + 12, rec_crc(hdr, payload, len));
	int rc = buf_append(out, hdr, sizeof hdr);
	return rc ? rc : buf_append(out, payload, len);
}

/* ---- files ---- */

static void seg_path(const struct segq *q, uint64_t id, char *out, size_t len)
{
	snprintf(out, len, "%s/%016" PRIx64 ".seg", q->dir, id);
}

static int open_seg(struct segq *q, uint64_t id, int flags)
{
	char p[4096];
	seg_path(q, id, p, sizeof p);
	return open(p, flags | O_CLOEXEC, 0600);
}

static int add_seg(struct segq *q, const struct seg *s)
{
	if (q->nseg == q->capseg) {
		size_t cap = q->capseg ? q->capseg * 2 : 16;
		struct seg *n = realloc(q->segs, cap * sizeof *n);
		if (!n)
			return GPULSE_ENOMEM;
		q->segs = n;
		q->capseg = cap;
	}
	q->segs[q->nseg++] = *s;
	return 0;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Read a segment's records, cut a torn or damaged tail (counted). */
static int scan_seg(struct segq *q, struct seg *s, char *err, size_t errlen)
{
	int fd = open_seg(q, s->id, O_RDWR);
	if (fd < 0) {
		str_errf(err, errlen, "%s: segment %016" PRIx64 ": %s", q->dir, s->id, strerror(errno));
		return GPULSE_EIO;
	}
	struct stat stt;
	if (fstat(fd, &stt) != 0) {
		close(fd);
		str_errf(err, errlen, "%s: %s", q->dir, strerror(errno));
		return GPULSE_EIO;
	}
	uint64_t fsize = (uint64_t)stt.st_size, off = 0;
	uint8_t hdr[SEGQ_HDR_BYTES];
	uint8_t *pay = NULL;
	size_t paycap = 0;
	int rc = 0;
	while (off < fsize) {
		size_t want = fsize - off < SEGQ_HDR_BYTES ? (size_t)(fsize - off) : SEGQ_HDR_BYTES;
		if (pread(fd, hdr, want, (off_t)off) != (ssize_t)want) {
			rc = GPULSE_EIO;
			break;
		}
		struct segq_hdr h;
		int drc = segq_record_decode(hdr, want, &h);
		if (drc == GPULSE_ERANGE && want == SEGQ_HDR_BYTES) {
			/* The header is whole: read the payload and check it. */
			size_t total = SEGQ_HDR_BYTES + (size_t)h.len;
			if (paycap < total) {
				uint8_t *n = realloc(pay, total);
				if (!n) {
					rc = GPULSE_ENOMEM;
					break;
				}
				pay = n;
				paycap = total;
			}
			size_t have = fsize - off < total ? (size_t)(fsize - off) : total;
			if (pread(fd, pay, have, (off_t)off) != (ssize_t)have) {
				rc = GPULSE_EIO;
				break;
			}
			drc = segq_record_decode(pay, have, &h);
		}
		if (drc != 0)
			break;
		off += SEGQ_HDR_BYTES + h.len;
		s->records++;
		s->samples += h.nsamples;
	}
	free(pay);
	if (rc == 0 && off < fsize) {
		q->st.corrupt_records_total++;
		if (ftruncate(fd, (off_t)off) != 0 || fdatasync(fd) != 0) {
			str_errf(err, errlen, "%s: cannot cut the damaged tail of segment %016" PRIx64 ": %s",
				 q->dir, s->id, strerror(errno));
			rc = GPULSE_EIO;
		}
	} else if (rc == GPULSE_EIO) {
		str_errf(err, errlen, "%s: reading segment %016" PRIx64 ": %s", q->dir, s->id,
			 strerror(errno));
	}
	s->size = off;
	close(fd);
	return rc;
}

static int write_offset(struct segq *q)
{
	uint8_t slot[32] = {0};
	q->offset_seq++;
	put64(slot, q->offset_seq);
	put64(slot + 8, q->rseg);
	put64(slot + 16, q->roff);
	put32(slot + 24, (uint32_t)crc32(0L, slot, 24));
	char p[4096];
	snprintf(p, sizeof p, "%s/offset", q->dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		q->st.io_errors_total++;
		return GPULSE_EIO;
	}
	int rc = 0;
	if (pwrite(fd, slot, sizeof slot, (off_t)(q->offset_seq % 2) * 32) != (ssize_t)sizeof slot ||
	    fdatasync(fd) != 0) {
		q->st.io_errors_total++;
		rc = GPULSE_EIO;
	}
	close(fd);
	return rc;
}

static void read_offset(struct segq *q, uint64_t *seg, uint64_t *off, bool *found)
{
	*found = false;
	char p[4096];
	snprintf(p, sizeof p, "%s/offset", q->dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	uint8_t b[64];
	ssize_t n = pread(fd, b, sizeof b, 0);
	close(fd);
	for (int i = 0; i < 2; i++) {
		if (n < (i + 1) * 32)
			break;
		const uint8_t *s = b + i * 32;
		if (get32(s + 24) != (uint32_t)crc32(0L, s, 24))
			continue;
		uint64_t sq = get64(s);
		if (*found && sq <= q->offset_seq)
			continue;
		*found = true;
		q->offset_seq = sq;
		*seg = get64(s + 8);
		*off = get64(s + 16);
	}
}

static void remove_seg_file(struct segq *q, uint64_t id)
{
	char p[4096];
	seg_path(q, id, p, sizeof p);
	if (unlink(p) != 0 && errno != ENOENT)
		q->st.io_errors_total++;
	if (q->rfd >= 0 && q->rfd_id == id) {
		close(q->rfd);
		q->rfd = -1;
	}
}

/* Remove segments[0] (fully read or dropped) from the list. */
static void pop_oldest(struct segq *q)
{
	remove_seg_file(q, q->segs[0].id);
	q->st.bytes -= q->segs[0].size;
	memmove(q->segs, q->segs + 1, (q->nseg - 1) * sizeof *q->segs);
	q->nseg--;
}

static int new_segment(struct segq *q, uint64_t id)
{
	int fd = open_seg(q, id, O_WRONLY | O_CREAT | O_APPEND);
	if (fd < 0)
		return GPULSE_EIO;
	struct seg s = {.id = id};
	if (add_seg(q, &s)) {
		close(fd);
		return GPULSE_ENOMEM;
	}
	if (q->wfd >= 0) {
		fdatasync(q->wfd);
		close(q->wfd);
	}
	q->wfd = fd;
	fsync(q->dirfd);
	return 0;
}

/* The read position is at the end of its segment and a newer one exists:
 * move on, forget the old one. */
static void advance_segment(struct segq *q)
{
	while (q->nseg > 1 && q->segs[0].id == q->rseg && q->roff >= q->segs[0].size) {
		pop_oldest(q);
		q->rseg = q->segs[0].id;
		q->roff = q->rrecords = q->rsamples = 0;
	}
}

int segq_open(struct segq **out, const char *dir, uint64_t max_bytes, char *err, size_t errlen)
{
	*out = NULL;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		str_errf(err, errlen, "%s: cannot create the queue folder: %s", dir, strerror(errno));
		return GPULSE_EIO;
	}
	struct segq *q = calloc(1, sizeof *q);
	if (!q)
		return GPULSE_ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	q->wfd = q->rfd = -1;
	q->dirfd = -1;
	q->max_bytes = max_bytes < SEGQ_MIN_MAX_BYTES ? SEGQ_MIN_MAX_BYTES : max_bytes;
	q->seg_bytes = q->max_bytes / 8;
	int rc = GPULSE_ENOMEM;
	if (!(q->dir = strdup(dir)))
		goto fail;
	rc = GPULSE_EIO;
	q->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = q->dirfd >= 0 ? opendir(dir) : NULL;
	if (!d) {
		str_errf(err, errlen, "%s: cannot open the queue folder: %s", dir, strerror(errno));
		goto fail;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n != 20 || strcmp(e->d_name + 16, ".seg") != 0)
			continue;
		char *end = NULL;
		uint64_t id = strtoull(e->d_name, &end, 16);
		if (end != e->d_name + 16)
			continue;
		struct seg s = {.id = id};
		if ((rc = add_seg(q, &s))) {
			closedir(d);
			goto fail;
		}
	}
	closedir(d);
	if (q->nseg > 1)
		qsort(q->segs, q->nseg, sizeof *q->segs, seg_cmp);
	for (size_t i = 0; i < q->nseg; i++) {
		if ((rc = scan_seg(q, &q->segs[i], err, errlen)))
			goto fail;
		q->st.bytes += q->segs[i].size;
	}
	uint64_t oseg = 0, ooff = 0;
	bool have = false;
	read_offset(q, &oseg, &ooff, &have);
	/* Segments wholly before the committed offset were delivered. */
	while (have && q->nseg && q->segs[0].id < oseg)
		pop_oldest(q);
	if (!q->nseg && (rc = new_segment(q, have ? oseg : 1))) {
		str_errf(err, errlen, "%s: cannot create a segment: %s", dir, strerror(errno));
		goto fail;
	} else if (q->wfd < 0) {
		q->wfd = open_seg(q, q->segs[q->nseg - 1].id, O_WRONLY | O_APPEND);
		if (q->wfd < 0) {
			str_errf(err, errlen, "%s: cannot open the newest segment: %s", dir,
				 strerror(errno));
			goto fail;
		}
	}
	q->rseg = q->segs[0].id;
	q->roff = 0;
	if (have && oseg == q->rseg) {
		/* Count what lies before the offset, stopping at a record
		 * boundary at or before it (the tail may have been cut). */
		int fd = open_seg(q, q->rseg, O_RDONLY);
		uint8_t hdr[SEGQ_HDR_BYTES];
		while (fd >= 0 && q->roff < ooff && q->roff < q->segs[0].size &&
		       pread(fd, hdr, sizeof hdr, (off_t)q->roff) == (ssize_t)sizeof hdr) {
			uint64_t next = q->roff + SEGQ_HDR_BYTES + get32(hdr + 4);
			if (next > ooff)
				break;
			q->roff = next;
			q->rrecords++;
			q->rsamples += get32(hdr + 8);
		}
		if (fd >= 0)
			close(fd);
	}
	advance_segment(q);
	for (size_t i = 0; i < q->nseg; i++) {
		q->st.pending_records += q->segs[i].records;
		q->st.pending_samples += q->segs[i].samples;
	}
	q->st.pending_records -= q->rrecords;
	q->st.pending_samples -= q->rsamples;
	q->st.segments = q->nseg;
	*out = q;
	return 0;
fail:
	segq_close(q);
	return rc;
}

void segq_close(struct segq *q)
{
	if (!q)
		return;
	if (q->wfd >= 0) {
		fdatasync(q->wfd);
		close(q->wfd);
	}
	if (q->rfd >= 0)
		close(q->rfd);
	if (q->dirfd >= 0)
		close(q->dirfd);
	pthread_mutex_destroy(&q->mu);
	free(q->segs);
	free(q->dir);
	free(q);
}

/* Over the bound: drop whole segments, oldest first, never the one
 * taking appends. What was unread in them is counted. */
static void enforce_bound(struct segq *q)
{
	while (q->st.bytes > q->max_bytes && q->nseg > 1) {
		struct seg *s = &q->segs[0];
		uint64_t recs = s->records, samples = s->samples;
		if (s->id == q->rseg) {
			recs -= q->rrecords;
			samples -= q->rsamples;
		}
		q->st.dropped_records_total += recs;
		q->st.dropped_samples_total += samples;
		q->st.pending_records -= recs;
		q->st.pending_samples -= samples;
		pop_oldest(q);
		q->rseg = q->segs[0].id;
		q->roff = q->rrecords = q->rsamples = 0;
		write_offset(q);
	}
	q->st.segments = q->nseg;
}

int segq_append(struct segq *q, const void *payload, size_t len, uint32_t nsamples,
		int64_t max_t_ms, char *err, size_t errlen)
{
	if (len > SEGQ_MAX_RECORD) {
		str_errf(err, errlen, "a request of %zu bytes is over the queue's record bound", len);
		return GPULSE_ELIMIT;
	}
	struct buf rec;
	buf_init(&rec, SEGQ_MAX_RECORD + SEGQ_HDR_BYTES);
	int rc = segq_record_encode(&rec, payload, (uint32_t)len, nsamples, max_t_ms);
	if (rc) {
		buf_free(&rec);
		return rc;
	}
	pthread_mutex_lock(&q->mu);
	struct seg *last = &q->segs[q->nseg - 1];
	if (last->size && last->size + rec.len > q->seg_bytes) {
		if ((rc = new_segment(q, last->id + 1))) {
			q->st.io_errors_total++;
			str_errf(err, errlen, "%s: cannot start a segment: %s", q->dir, strerror(errno));
			goto out;
		}
		last = &q->segs[q->nseg - 1];
	}
	ssize_t w = write(q->wfd, rec.data, rec.len);
	if (w != (ssize_t)rec.len || fdatasync(q->wfd) != 0) {
		int e = errno;
		q->st.io_errors_total++;
		/* A partial write leaves a torn record: cut it so the next one
		 * starts on a boundary. */
		if (w > 0 && ftruncate(q->wfd, (off_t)last->size) != 0)
			q->st.io_errors_total++;
		str_errf(err, errlen, "%s: writing segment %016" PRIx64 ": %s", q->dir, last->id,
			 w < 0 || w == (ssize_t)rec.len ? strerror(e) : "short write");
		rc = GPULSE_EIO;
		goto out;
	}
	last->size += rec.len;
	last->records++;
	last->samples += nsamples;
	q->st.bytes += rec.len;
	q->st.pending_records++;
	q->st.pending_samples += nsamples;
	q->st.appended_records_total++;
	enforce_bound(q);
out:
	pthread_mutex_unlock(&q->mu);
	buf_free(&rec);
	return rc;
}

int segq_peek(struct segq *q, struct buf *out, struct segq_hdr *h, struct segq_pos *pos)
{
	int rc;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		advance_segment(q);
		struct seg *s = &q->segs[0];
		if (q->roff >= s->size) {
			rc = GPULSE_ENOENT;
			break;
		}
		if (q->rfd < 0 || q->rfd_id != s->id) {
			if (q->rfd >= 0)
				close(q->rfd);
			q->rfd = open_seg(q, s->id, O_RDONLY);
			q->rfd_id = s->id;
			if (q->rfd < 0) {
				q->st.io_errors_total++;
				rc = GPULSE_EIO;
				break;
			}
		}
		uint8_t hdr[SEGQ_HDR_BYTES];
		buf_reset(out);
		int drc = GPULSE_EIO;
		if (pread(q->rfd, hdr, sizeof hdr, (off_t)q->roff) == (ssize_t)sizeof hdr) {
			drc = segq_record_decode(hdr, sizeof hdr, h);
			if (drc == GPULSE_ERANGE && q->roff + SEGQ_HDR_BYTES + h->len <= s->size &&
			    buf_reserve(out, SEGQ_HDR_BYTES + h->len) == 0 &&
			    pread(q->rfd, out->data, SEGQ_HDR_BYTES + h->len, (off_t)q->roff) ==
				    (ssize_t)(SEGQ_HDR_BYTES + h->len))
				drc = segq_record_decode((const uint8_t *)out->data,
							 SEGQ_HDR_BYTES + h->len, h);
		}
		if (drc == 0) {
			memmove(out->data, out->data + SEGQ_HDR_BYTES, h->len);
			out->len = h->len;
			out->data[out->len] = '\0';
			pos->seg = s->id;
			pos->off = q->roff;
			rc = 0;
			break;
		}
		/* Damaged since it was written: the rest of this segment cannot
		 * be framed. Count what it held and go on with the next. */
		uint64_t lost = s->samples - q->rsamples;
		q->st.corrupt_records_total++;
		q->st.corrupt_samples_total += lost;
		q->st.pending_records -= s->records - q->rrecords;
		q->st.pending_samples -= lost;
		s->records = q->rrecords;
		s->samples = q->rsamples;
		if (q->nseg == 1) {
			/* The appender's own segment: start a fresh one after it. */
			if (new_segment(q, s->id + 1)) {
				q->st.io_errors_total++;
				rc = GPULSE_EIO;
				break;
			}
			s = &q->segs[0];
		}
		q->roff = s->size;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int segq_ack(struct segq *q, const struct segq_pos *pos, const struct segq_hdr *h)
{
	int rc = 0;
	pthread_mutex_lock(&q->mu);
	if (pos->seg == q->rseg && pos->off == q->roff) {
		q->roff += SEGQ_HDR_BYTES + h->len;
		q->rrecords++;
		q->rsamples += h->nsamples;
		q->st.pending_records--;
		q->st.pending_samples -= h->nsamples;
		q->st.acked_records_total++;
		if (h->max_t_ms > q->st.newest_acked_t_ms)
			q->st.newest_acked_t_ms = h->max_t_ms;
		rc = write_offset(q);
		advance_segment(q);
		q->st.segments = q->nseg;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

void segq_get_stats(struct segq *q, struct segq_stats *out)
{
	pthread_mutex_lock(&q->mu);
	*out = q->st;
	pthread_mutex_unlock(&q->mu);
}
