/* Secrets as gpulse shows them to readers who are not the operator: the
 * config API (/api/v1/status/config), logs, error messages and /metrics
 * labels. One place decides how, so every path shows the same. */
#ifndef GPULSE_REDACT_H
#define GPULSE_REDACT_H

#include <stddef.h>

/* A secret value in a shown configuration, as Prometheus's config.Secret
 * marshals it. */
#define REDACT_SECRET "<secret>"
/* A URL's password, as Go's url.URL.Redacted writes it (what Prometheus
 * 2.42 shows for a remote_write url with user:password@ in its config
 * API, logs and url labels); gpulse masks query values the same way. */
#define REDACT_URL_MASK "xxxxx"

/* url with the password of its userinfo (user:PASSWORD@host) and the value
 * of every query parameter (?token=VALUE; a parameter without '=' whole)
 * replaced by REDACT_URL_MASK, written into out[outlen] as snprintf does:
 * cut to fit, NUL-terminated (outlen 0: nothing written). Returns the
 * length of the whole result. Query values are masked beyond what
 * Prometheus does: receivers take API keys there, and which parameter
 * names hold one is the receiver's choice. A username alone is kept, as
 * Go keeps it. Any string is taken: one that is not a well-formed URL is
 * masked where the same shapes appear (a message may quote a URL that
 * failed to parse), and returned unchanged where none do. */
size_t redact_url(char *out, size_t outlen, const char *url);

/* redact_url into a new string the caller frees with free(); NULL: out
 * of memory, or url NULL. */
char *redact_url_dup(const char *url);

#endif
