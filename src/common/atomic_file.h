/* Files written whole or not at all, and read back with a bound: the
 * on-disk queues and records of gpulsed (alert batches, evidence) share
 * these, so each write is a temporary name, fsync'd, renamed into place
 * and the directory fsync'd: a crash leaves the old file or the new one,
 * never a torn one. */
#ifndef GPULSE_COMMON_ATOMIC_FILE_H
#define GPULSE_COMMON_ATOMIC_FILE_H

#include <stddef.h>

/* Write `len` bytes of `data` to DIR/NAME (mode 0600) atomically and
 * durably, through DIR/.tmp-NAME. 0, or GPULSE_EIO with the reason
 * (the path and strerror: "No space left on device", "Read-only file
 * system") in err. */
int atomic_file_write(const char *dir, const char *name, const void *data, size_t len, char *err,
		      size_t errlen);

/* Read DIR/NAME whole, at most `max` bytes (a longer file is read up to
 * max + 1 bytes and refused), not following a symbolic link. On success
 * *data (NUL-terminated, free with free()) holds *len bytes. GPULSE_EIO
 * (unreadable), GPULSE_ELIMIT (longer than max) or GPULSE_ENOMEM, with
 * the reason in err. */
int atomic_file_read(const char *dir, const char *name, size_t max, char **data, size_t *len,
		     char *err, size_t errlen);

#endif
