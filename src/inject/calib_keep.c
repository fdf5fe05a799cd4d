/* A device's calibration kept for the processes after it (calib.h,
 * "Kept calibrations"): one small file per device and driver, written by
 * a process whose calibration succeeded and read by one whose own was
 * refused (the GPU busy with other work) before it falls back to the
 * model. Plain file handling, apart from the CUDA calls of calib_cuda.c,
 * so that the unit tests check it. */
#include "inject/calib.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic_file.h"

#define KEEP_MAGIC "gpulse-calibration 1"

int calib_keep_dir(char *buf, size_t n)
{
	const char *d = getenv("GPULSE_CALIB_DIR");
	int w;
	if (d) {
		if (!*d || strcmp(d, "off") == 0)
			return 0;
		w = snprintf(buf, n, "%s", d);
	} else if ((d = getenv("XDG_CACHE_HOME")) && d[0] == '/') {
		w = snprintf(buf, n, "%s/gpulse", d);
	} else if ((d = getenv("HOME")) && d[0] == '/') {
		w = snprintf(buf, n, "%s/.cache/gpulse", d);
	} else {
		return 0;
	}
	return w > 0 && (size_t)w < n;
}

/* The file of `key` in `dir`; 0 when the key holds anything but
 * [A-Za-z0-9._-] (it names a file) or the path does not fit. */
static int keep_path(char *buf, size_t n, const char *dir, const char *key)
{
	if (!*key)
		return 0;
	for (const char *p = key; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '-'))
			return 0;
	int w = snprintf(buf, n, "%s/calibration-%s", dir, key);
	return w > 0 && (size_t)w < n;
}

int calib_keep_load(const char *dir, const char *key, struct calib_kept *k, char *why, size_t nwhy)
{
	char path[4096];
	memset(k, 0, sizeof *k);
	if (!keep_path(path, sizeof path, dir, key)) {
		snprintf(why, nwhy, "no file name for device key \"%.64s\"", key);
		return 0;
	}
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, nwhy, "%s: %s", path, strerror(errno));
		return 0;
	}
	/* Another user's file could set every sample's offset: only one of
	 * this user's (or root's), writable by nobody else, is taken. */
	struct stat st;
	char text[512];
	ssize_t got = -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, nwhy, "%s: not a regular file", path);
	} else if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		snprintf(why, nwhy, "%s: owned by uid %u or writable by others: ignored", path, (unsigned)st.st_uid);
	} else {
		got = read(fd, text, sizeof text - 1);
		if (got < 0)
			snprintf(why, nwhy, "%s: %s", path, strerror(errno));
	}
	close(fd);
	if (got < 0)
		return 0;
	text[got] = '\0';
	struct calib_kept r = {0};
	int used = 0;
	if (strncmp(text, KEEP_MAGIC "\n", sizeof KEEP_MAGIC) != 0 ||
	    sscanf(text + sizeof KEEP_MAGIC, "floors %lf\noffset_ns %lf\nbound_ns %lf\nfloor_ns %lf\nat %lld\n%n",
		   &r.floors, &r.offset_ns, &r.bound_ns, &r.floor_ns, &r.at_s, &used) != 5 ||
	    !used) {
		snprintf(why, nwhy, "%s: not a calibration this library wrote", path);
		return 0;
	}
	/* The fit refuses anything outside these (calib_fit): a file that
	 * says otherwise is not one of its results. */
	if (!isfinite(r.floors) || r.floors <= 0 || r.floors > CALIB_KEEP_FLOORS_MAX || !isfinite(r.offset_ns) ||
	    r.offset_ns <= 0 || !isfinite(r.floor_ns) || r.floor_ns <= 0 || !isfinite(r.bound_ns) ||
	    r.bound_ns < 0) {
		snprintf(why, nwhy, "%s: figures out of range (%.3f floors)", path, r.floors);
		return 0;
	}
	*k = r;
	return 1;
}

/* mkdir -p with 0700 for the directories it makes. */
static int make_dirs(const char *dir)
{
	char p[4096];
	int w = snprintf(p, sizeof p, "%s", dir);
	if (w <= 0 || (size_t)w >= sizeof p)
		return -1;
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int calib_keep_store(const char *dir, const char *key, const struct calib_result *r, long long now_s, char *why,
		     size_t nwhy)
{
	char path[4096];
	if (!r->ok || !keep_path(path, sizeof path, dir, key)) {
		snprintf(why, nwhy, "nothing to keep for device key \"%.64s\"", key);
		return 0;
	}
	if (make_dirs(dir) != 0) {
		snprintf(why, nwhy, "%s: %s", dir, strerror(errno));
		return 0;
	}
	char text[512];
	int n = snprintf(text, sizeof text, KEEP_MAGIC "\nfloors %.6f\noffset_ns %.1f\nbound_ns %.1f\nfloor_ns %.1f\nat %lld\n",
			 r->floors, r->offset_ns, r->bound_ns, r->floor_ns, now_s);
	/* Readers see the old file or the new one whole, never a part. */
	return n > 0 && (size_t)n < sizeof text &&
	       atomic_file_write(dir, path + strlen(dir) + 1, text, (size_t)n, why, nwhy) == 0;
}
