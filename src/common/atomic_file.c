/* Whole-file writes and bounded reads; see atomic_file.h. */
#include "common/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"
#include "common/str.h"

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		if (w == 0) {
			errno = ENOSPC;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int atomic_file_write(const char *dir, const char *name, const void *data, size_t len, char *err,
		      size_t errlen)
{
	int rc = 0, fd = -1;
	char tmp[300];
	if (snprintf(tmp, sizeof tmp, ".tmp-%s", name) >= (int)sizeof tmp) {
		str_errf(err, errlen, "%s/%s: name too long", dir, name);
		return GPULSE_EIO;
	}
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		str_errf(err, errlen, "cannot open %s: %s", dir, strerror(errno));
		return GPULSE_EIO;
	}
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write_all(fd, data, len) != 0 || fsync(fd) != 0) {
		str_errf(err, errlen, "cannot write %s/%s: %s", dir, tmp, strerror(errno));
		rc = GPULSE_EIO;
		if (fd >= 0)
			unlinkat(dfd, tmp, 0);
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		str_errf(err, errlen, "cannot write %s/%s: %s", dir, tmp, strerror(errno));
		unlinkat(dfd, tmp, 0);
		rc = GPULSE_EIO;
		goto out;
	}
	fd = -1;
	if (renameat(dfd, tmp, dfd, name) != 0 || fsync(dfd) != 0) {
		str_errf(err, errlen, "cannot rename %s/%s: %s", dir, tmp, strerror(errno));
		unlinkat(dfd, tmp, 0);
		rc = GPULSE_EIO;
	}
out:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}

int atomic_file_read(const char *dir, const char *name, size_t max, char **data, size_t *len,
		     char *err, size_t errlen)
{
	*data = NULL;
	*len = 0;
	char path[4400];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		str_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	/* One byte past max tells a file that is too long. */
	size_t cap = max + 2, n = 0;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size < max + 1)
		cap = (size_t)st.st_size + 2;
	char *d = malloc(cap);
	if (!d) {
		close(fd);
		str_errf(err, errlen, "%s: out of memory", path);
		return GPULSE_ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, d + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			str_errf(err, errlen, "cannot read %s: %s", path, strerror(errno));
			free(d);
			close(fd);
			return GPULSE_EIO;
		}
		if (r == 0 || (n += (size_t)r) == cap - 1)
			break;
	}
	close(fd);
	if (n > max) {
		str_errf(err, errlen, "%s: longer than %zu bytes", path, max);
		free(d);
		return GPULSE_ELIMIT;
	}
	d[n] = '\0';
	*data = d;
	*len = n;
	return 0;
}
