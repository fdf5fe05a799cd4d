/* Bearer-token files; see token.h. */
#include "common/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"

int token_file_read(const char *path, bool private_only, char *tok, size_t toklen, char *why,
		    size_t whylen)
{
	int rc = 0;
	tok[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(why, whylen, "cannot read token file %s: %s", path, strerror(errno));
		return GPULSE_EIO;
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		snprintf(why, whylen, "cannot read token file %s: %s", path, strerror(errno));
		rc = GPULSE_EIO;
		goto out;
	}
	if (private_only && !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "token file %s is not a regular file", path);
		rc = GPULSE_EINVAL;
		goto out;
	}
	if (private_only && (st.st_mode & S_IROTH)) {
		snprintf(why, whylen,
			 "token file %s is readable by every user (mode %04o); run: chmod o-rwx %s",
			 path, (unsigned)(st.st_mode & 07777), path);
		rc = GPULSE_EINVAL;
		goto out;
	}
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, tok + len, toklen - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, whylen, "cannot read token file %s: %s", path,
				 strerror(errno));
			rc = GPULSE_EIO;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == toklen - 1) {
			snprintf(why, whylen,
				 "token file %s is too large for a token (over %zu bytes)", path,
				 toklen - 2);
			rc = GPULSE_EINVAL;
			goto out;
		}
	}
	size_t read_len = len;
	while (len > 0 && (tok[len - 1] == '\n' || tok[len - 1] == '\r' || tok[len - 1] == ' ' ||
			   tok[len - 1] == '\t'))
		len--;
	tok[len] = '\0';
	if (len == 0) {
		snprintf(why, whylen, "token file %s %s; put the token in it", path,
			 read_len ? "holds only whitespace" : "is empty");
		rc = GPULSE_EINVAL;
		goto out;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)tok[i] <= ' ' || tok[i] == 0x7f) {
			snprintf(why, whylen,
				 "token file %s: the token holds a space or control character",
				 path);
			rc = GPULSE_EINVAL;
			goto out;
		}
out:
	if (rc)
		memset(tok, 0, toklen);
	close(fd);
	return rc;
}
