/* HTTP client for the CLI; see client.h. libcurl does the transport; this
 * file adds the bounds (time, size), the token, and messages that say
 * what to do next. */
#include "cli/client.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/commands.h"
#include "common/status.h"
#include "common/str.h"
#include "common/token.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;
static atomic_bool curl_ready;

/* libcurl is started on first use, so commands that never reach the
 * daemon (record, help) never load TLS libraries. */
static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	atomic_store(&curl_ready, curl_init_rc == CURLE_OK);
}

void client_global_cleanup(void)
{
	if (atomic_exchange(&curl_ready, false))
		curl_global_cleanup();
}

const char *client_base_url(const struct client_opts *o)
{
	if (o && o->url && o->url[0])
		return o->url;
	const char *env = getenv("GPULSE_URL");
	return env && env[0] ? env : CLIENT_DEFAULT_URL;
}

/* What the options ask, for messages: gpulsed unless the command said
 * otherwise (a Prometheus API for --prometheus). */
static const char *server_name(const struct client_opts *o)
{
	return o && o->server && o->server[0] ? o->server : "gpulsed";
}

static const char *token_file_of(const struct client_opts *o)
{
	if (o && o->token_file && o->token_file[0])
		return o->token_file;
	const char *env = getenv("GPULSE_TOKEN_FILE");
	return env && env[0] ? env : NULL;
}

/* base + path with the base's trailing slashes dropped. */
static int build_url(const char *who, const char *base, const char *path, char *out,
		     size_t outlen, char *err, size_t errlen)
{
	if (strncasecmp(base, "http://", 7) != 0 && strncasecmp(base, "https://", 8) != 0) {
		str_errf(err, errlen, "bad %s URL \"%.200s\": it must start with http:// or https://",
			who, base);
		return GPULSE_EINVAL;
	}
	for (const char *p = base; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f) {
			str_errf(err, errlen, "bad %s URL: it holds a space or control character", who);
			return GPULSE_EINVAL;
		}
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/')
		n--;
	int w = snprintf(out, outlen, "%.*s%s", (int)n, base, path);
	if (w < 0 || (size_t)w >= outlen) {
		str_errf(err, errlen, "bad %s URL: longer than %zu bytes", who, outlen - 1);
		return GPULSE_EINVAL;
	}
	return 0;
}

static int read_token(const char *path, char *tok, size_t toklen, char *err, size_t errlen)
{
	return token_file_read(path, false, tok, toklen, err, errlen) ? GPULSE_EIO : 0;
}

struct sink {
	struct buf *body;
	bool too_big;
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *ctx)
{
	struct sink *s = ctx;
	size_t n = size * nmemb;
	if (buf_append(s->body, ptr, n) != 0) {
		s->too_big = s->body->len + n > s->body->max || n > s->body->max;
		return 0; /* makes curl stop with CURLE_WRITE_ERROR */
	}
	return n;
}

int client_get(const struct client_opts *o, const char *path, struct buf *body,
	       long *http_status, char *err, size_t errlen)
{
	int rc = 0;
	CURL *curl = NULL;
	struct curl_slist *headers = NULL;
	char url[CLIENT_URL_MAX + 256];
	char token[CLIENT_TOKEN_MAX + 2];
	char auth[CLIENT_TOKEN_MAX + 32];
	char curl_err[CURL_ERROR_SIZE] = "";
	const char *base = client_base_url(o);
	const char *who = server_name(o);
	bool is_gpulsed = strcmp(who, "gpulsed") == 0;
	long timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : CLIENT_TIMEOUT_MS;
	token[0] = auth[0] = '\0';

	if ((rc = build_url(who, base, path, url, sizeof url, err, errlen)))
		return rc;
	const char *token_file = token_file_of(o);
	if (token_file && (rc = read_token(token_file, token, sizeof token, err, errlen)))
		goto out;

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK || !(curl = curl_easy_init())) {
		str_errf(err, errlen, "cannot start libcurl: %s", curl_easy_strerror(curl_init_rc));
		rc = GPULSE_EIO;
		goto out;
	}
	if (token[0]) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
		struct curl_slist *h = curl_slist_append(NULL, auth);
		if (!h) {
			rc = GPULSE_ENOMEM;
			str_errf(err, errlen, "out of memory");
			goto out;
		}
		headers = h;
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	}

	struct sink sink = {.body = body};
	curl_easy_setopt(curl, CURLOPT_URL, url);
	if (o && o->post) {
		curl_easy_setopt(curl, CURLOPT_POST, 1L);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
	} else {
		curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)body->max);
	curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "gpulse/" GPULSE_VERSION);
	/* The token must never follow a redirect elsewhere, nor leave over
	 * another protocol. */
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
	const char *ca = getenv("GPULSE_CA_FILE");
	if (ca && ca[0])
		curl_easy_setopt(curl, CURLOPT_CAINFO, ca);
	/* A client certificate, for a gpulsed with http.tls_client_ca_file
	 * (mutual TLS); the key defaults to the certificate's file. */
	const char *cert = getenv("GPULSE_CERT_FILE"), *key = getenv("GPULSE_KEY_FILE");
	if (cert && cert[0]) {
		curl_easy_setopt(curl, CURLOPT_SSLCERT, cert);
		curl_easy_setopt(curl, CURLOPT_SSLKEY, key && key[0] ? key : cert);
	}

	CURLcode cc = curl_easy_perform(curl);
	if (cc != CURLE_OK) {
		long os_errno = 0;
		curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
		const char *why = os_errno ? strerror((int)os_errno)
					   : curl_err[0] ? curl_err : curl_easy_strerror(cc);
		switch (cc) {
		case CURLE_COULDNT_CONNECT:
			str_errf(err, errlen,
				"cannot reach %s at %s: %s%s", who, base, why,
				is_gpulsed ? " (is it running? start it with 'make run')" : " (is it running?)");
			rc = GPULSE_EIO;
			break;
		case CURLE_COULDNT_RESOLVE_HOST:
			str_errf(err, errlen, "cannot reach %s at %s: unknown host (%s)", who, base,
				curl_err[0] ? curl_err : curl_easy_strerror(cc));
			rc = GPULSE_EIO;
			break;
		case CURLE_OPERATION_TIMEDOUT:
			str_errf(err, errlen, "%s at %s did not answer within %ld ms", who, base,
				timeout_ms);
			rc = GPULSE_ETIMEDOUT;
			break;
		case CURLE_FILESIZE_EXCEEDED:
			str_errf(err, errlen, "the answer from %s at %s is larger than %zu bytes", who,
				base, body->max);
			rc = GPULSE_ELIMIT;
			break;
		case CURLE_WRITE_ERROR:
			if (sink.too_big) {
				str_errf(err, errlen, "the answer from %s at %s is larger than %zu bytes", who,
					base, body->max);
				rc = GPULSE_ELIMIT;
				break;
			}
			/* fall through */
		default:
			str_errf(err, errlen, "request to %s at %s failed: %s", who, base,
				curl_err[0] ? curl_err : curl_easy_strerror(cc));
			rc = GPULSE_EIO;
		}
		goto out;
	}
	long status = 0;
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	if (http_status)
		*http_status = status;
out:
	curl_slist_free_all(headers);
	if (curl)
		curl_easy_cleanup(curl);
	/* Leave no copy of the secret behind on the stack. */
	explicit_bzero(token, sizeof token);
	explicit_bzero(auth, sizeof auth);
	return rc;
}

int client_get_json(const struct client_opts *o, const char *path, json_t **out,
		    struct buf *raw, char *err, size_t errlen)
{
	struct buf body;
	long status = 0;
	json_t *root = NULL;
	const char *base = client_base_url(o);
	const char *who = server_name(o);
	buf_init(&body, CLIENT_MAX_RESPONSE);
	int rc = client_get(o, path, &body, &status, err, errlen);
	if (rc)
		goto out;

	json_error_t jerr;
	root = body.data ? json_loadb(body.data, body.len, 0, &jerr) : NULL;
	const char *api_status = json_string_value(json_object_get(root, "status"));
	const char *api_error = json_string_value(json_object_get(root, "error"));
	if (status < 200 || status > 299) {
		const char *hint = status == 401 ? " (give a token with --token-file or GPULSE_TOKEN_FILE)"
				 : status == 404 && strcmp(who, "gpulsed") == 0
					? " (is this a gpulsed, and as new as this gpulse?)"
				 : "";
		str_errf(err, errlen, "%s at %s answered %s with HTTP %ld%s%s%s", who, base, path,
			status, api_error ? ": " : "", api_error ? api_error : "", hint);
		rc = GPULSE_EIO;
		goto out;
	}
	if (!root) {
		str_errf(err, errlen, "%s at %s sent something that is not JSON for %s", who, base,
			path);
		rc = GPULSE_EPARSE;
		goto out;
	}
	if (api_status && strcmp(api_status, "success") != 0) {
		str_errf(err, errlen, "%s at %s refused %s: %s", who, base, path,
			api_error ? api_error : api_status);
		rc = GPULSE_EIO;
		goto out;
	}
	if (raw && (rc = buf_append(raw, body.data, body.len))) {
		str_errf(err, errlen, "the answer from %s is too large", who);
		goto out;
	}
	*out = root;
	root = NULL;
out:
	json_decref(root);
	buf_free(&body);
	return rc;
}

int client_exit_code(int status)
{
	if (status == 0)
		return CLI_OK;
	return status == GPULSE_EINVAL ? CLI_USAGE : CLI_FAIL;
}

static void indent(FILE *out, int depth)
{
	fputc('\n', out);
	for (int i = 0; i < depth; i++)
		fputs("  ", out);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int client_print_json(FILE *out, const char *text, size_t len)
{
	int depth = 0;
	bool in_string = false, escaped = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			fputc(c, out);
			if (escaped)
				escaped = false;
			else if (c == '\\')
				escaped = true;
			else if (c == '"')
				in_string = false;
			continue;
		}
		switch (c) {
		case '"':
			in_string = true;
			fputc(c, out);
			break;
		case '{':
		case '[': {
			size_t j = i + 1;
			while (j < len && is_space(text[j]))
				j++;
			if (j < len && text[j] == (c == '{' ? '}' : ']')) {
				fputc(c, out);
				fputc(text[j], out);
				i = j;
				break;
			}
			fputc(c, out);
			indent(out, ++depth);
			break;
		}
		case '}':
		case ']':
			indent(out, depth > 0 ? --depth : 0);
			fputc(c, out);
			break;
		case ',':
			fputc(c, out);
			indent(out, depth);
			break;
		case ':':
			fputs(": ", out);
			break;
		default:
			if (!is_space(c))
				fputc(c, out);
		}
	}
	fputc('\n', out);
	return ferror(out) ? GPULSE_EIO : 0;
}
