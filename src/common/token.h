/* Bearer-token files, read the same way by gpulsed (what it demands of
 * clients) and the CLI (what it presents): one line, trailing whitespace
 * removed, no spaces or control characters (it goes into an HTTP header
 * verbatim). */
#ifndef GPULSE_TOKEN_H
#define GPULSE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

/* Read the token in `path` into tok[toklen]. With `private_only`, the file
 * must also be a regular file that other users cannot read (the daemon's
 * secret). Returns 0, GPULSE_EIO (cannot read) or GPULSE_EINVAL (a rule
 * broken), with one sentence naming the file in `why`; on failure `tok` is
 * cleared. */
int token_file_read(const char *path, bool private_only, char *tok, size_t toklen, char *why,
		    size_t whylen);

#endif
