/* The HTTP server on libmicrohttpd; see http_server.h. MHD does the
 * protocol, the hard connection limit and TLS; this file adds the listen
 * address syntax, request policy (GET/HEAD only, URL length, bearer
 * tokens: one to read, one to change state) and a small route table, and wires MHD's connection notices to the
 * connection guard (http_guard.c: head deadlines, the per-address cap,
 * slots kept for scrapes), which MHD's own timeout and per-IP limit cannot
 * replace (see there). Error responses are built once at start and shared,
 * so a refused request costs no allocation. Routes that may take long run
 * on pools, their connections suspended meanwhile (the last section).
 *
 * Why one file: routing, request policy, tokens and the pools are all
 * callbacks of one MHD daemon over the private struct http_server; the
 * parts that stand alone already live beside it (http_guard.c,
 * http_basic.c, http_static.c). */
#include "http/http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "http/http_basic.h"
#include "http/http_guard.h"
#include "http/http_limit.h"
#include "common/log.h"
#include "common/promjson.h"
#include "common/status.h"
#include "common/str.h"

#define LISTEN_FORMS "expected HOST:PORT, [IPV6]:PORT or :PORT"

struct route {
	char path[HTTP_MAX_ROUTE_PATH];
	size_t len;
	bool prefix;                 /* the path ends in '/' */
	bool reserved;               /* may use the slots kept for scrapes */
	atomic_bool writes;          /* changes state: needs the write token */
	atomic_bool form;            /* also POST, with a form body (http_route_form) */
	_Atomic(http_known_fn *) known; /* a prefix route's paths (http_route_known) */
	http_handler_fn *fn;
	void *ctx;
	struct http_pool *pool;      /* NULL: fn runs on the HTTP thread */
	http_handler_fn *busy;       /* the pool is full: answers instead */
};

enum canned { R_400_FORM, R_401, R_403, R_403_CERT, R_404, R_405, R_405_FORM, R_413, R_413_FORM, R_414,
	      R_429, R_429_RATE, R_500, R_503, R_400_NAME_SPACE, R_400_TE_CL, R_400_CL, R_400_TE,
	      R_400_HOST, R_COUNT };

/* What the server keeps per connection (MHD's socket context): the
 * guard's entry, the decoded pairs of the request's query string, and the
 * form body of the request being read, then its decoded pairs, which
 * http_request_arg hands out until the request completes (on_completed
 * frees them). */
struct conn_ctx {
	struct guard_conn *guard;    /* NULL when the guard had no room */
	struct buf query;            /* the query string's pairs (on_uri) */
	size_t nquery;               /* name\0value\0 pairs in query */
	const char *query_nul;       /* the first of them whose name or value
					decoded to a NUL (cut there), or NULL */
	struct buf form;             /* the body; once parsed, its pairs */
	size_t npairs;               /* once parsed: name\0value\0 pairs in form */
	const char *nul_name;        /* once parsed: the first pair whose name
					or value decoded to a NUL (cut there) */
	bool in_form;                /* a POST to a form route is being read */
	bool form_type;              /* its Content-Type is form-urlencoded */
	bool parsed;                 /* form holds the decoded pairs */
	size_t body_bytes;           /* what arrived, form or not */
};

struct http_server {
	struct MHD_Daemon *mhd;
	struct http_guard *guard;    /* outlives mhd */
	int listen_fd;               /* handed to MHD, which closes it */
	int port;
	size_t max_body;
	char *token;                 /* NULL when no auth */
	size_t token_len;
	char *write_token;           /* NULL: writes need a loopback listen */
	size_t write_token_len;
	bool writes_open;            /* no write token, numeric loopback listen */
	struct http_basic *basic;    /* NULL: no Basic users */
	struct http_pool *auth_pool; /* runs bcrypt for Basic misses */
	struct http_limit *rate;     /* requests per address; NULL: no limit */
	char *tls_cert, *tls_key;    /* must outlive the daemon */
	char *tls_ca;                /* client certificates' CA; NULL: none asked */
	bool tls;
	atomic_bool started;         /* MHD log lines after start are debug */
	atomic_int nroutes;          /* published with release after the entry */
	struct route routes[HTTP_MAX_ROUTES];
	atomic_int npublic;          /* published with release after the entry */
	char public_paths[HTTP_MAX_PUBLIC][HTTP_MAX_ROUTE_PATH];
	struct MHD_Response *canned[R_COUNT];
	atomic_uint_fast64_t requests, rejected;
	atomic_uint_fast64_t *ext_requests, *ext_rejected;
	atomic_uint_fast64_t *ext_denied;  /* HTTP_DENY_COUNT, or NULL */
	struct http_pool *pools[HTTP_MAX_POOLS];
	int npools;
	atomic_int deferred_live;    /* pooled requests not yet completed */
};

/* The URI log callback's verdict, stored by MHD as the request's context
 * (the only place where the whole request target, query included, is
 * seen); the access handler then moves an accepted request to "headers
 * seen". uri_no_memory_marker: no room to keep the query string's
 * pairs (503). */
static char uri_ok_marker, uri_too_long_marker, uri_no_memory_marker, headers_seen_marker;
/* A pooled request whose answer is queued: on_completed counts it done. */
static char deferred_answered_marker;

/* ---- listen addresses ------------------------------------------------ */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* RFC 1123 host name: dot-separated labels of letters, digits and '-',
 * 1-63 bytes each, not starting or ending with '-'. */
static bool valid_hostname(const char *h, size_t n)
{
	if (n == 0 || n > 253)
		return false;
	size_t label = 0;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (c == '.') {
			if (label == 0 || h[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!is_alnum(c) && c != '-')
			return false;
		if (c == '-' && label == 0)
			return false;
		if (++label > 63)
			return false;
	}
	return label > 0 && h[n - 1] != '-';
}

static bool all_digits_dots(const char *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_digit(h[i]) && h[i] != '.')
			return false;
	return true;
}

/* An IPv6 literal as written inside brackets, with an optional zone. */
static bool valid_ipv6(const char *h, size_t n)
{
	char tmp[INET6_ADDRSTRLEN + 1];
	const char *pct = memchr(h, '%', n);
	size_t addr_len = pct ? (size_t)(pct - h) : n;
	if (addr_len == 0 || addr_len >= sizeof tmp)
		return false;
	memcpy(tmp, h, addr_len);
	tmp[addr_len] = '\0';
	struct in6_addr a;
	if (inet_pton(AF_INET6, tmp, &a) != 1)
		return false;
	if (pct) {
		size_t zone = n - addr_len - 1;
		if (zone == 0 || zone > 15) /* IFNAMSIZ - 1 */
			return false;
		for (size_t i = addr_len + 1; i < n; i++)
			if (!is_alnum(h[i]) && h[i] != '_' && h[i] != '.' && h[i] != '-')
				return false;
	}
	return true;
}

int http_parse_listen(const char *spec, char *host, size_t hostlen, int *port,
		      char *err, size_t errlen)
{
	if (!spec || !spec[0]) {
		str_errf(err, errlen, "The listen address is empty; " LISTEN_FORMS ".");
		return GPULSE_EINVAL;
	}
	size_t n = strnlen(spec, HTTP_MAX_LISTEN + 1);
	if (n > HTTP_MAX_LISTEN) {
		str_errf(err, errlen, "The listen address is longer than %d bytes.", HTTP_MAX_LISTEN);
		return GPULSE_EINVAL;
	}
	const char *h, *colon;
	size_t hn;
	bool v6 = false;
	if (spec[0] == '[') {
		const char *close = memchr(spec, ']', n);
		if (!close) {
			str_errf(err, errlen, "Listen address \"%s\" opens '[' but never closes it; "
				LISTEN_FORMS ".", spec);
			return GPULSE_EINVAL;
		}
		h = spec + 1;
		hn = (size_t)(close - h);
		if (close[1] != ':') {
			str_errf(err, errlen, "Listen address \"%s\" has no port after ']'; "
				LISTEN_FORMS ".", spec);
			return GPULSE_EINVAL;
		}
		colon = close + 1;
		if (!valid_ipv6(h, hn)) {
			str_errf(err, errlen, "\"%.*s\" in listen address \"%s\" is not an IPv6 address.",
				(int)hn, h, spec);
			return GPULSE_EINVAL;
		}
		v6 = true;
	} else {
		colon = strrchr(spec, ':');
		if (!colon) {
			str_errf(err, errlen, "Listen address \"%s\" has no port; " LISTEN_FORMS ".",
				spec);
			return GPULSE_EINVAL;
		}
		if (memchr(spec, ':', (size_t)(colon - spec))) {
			str_errf(err, errlen, "Listen address \"%s\" looks like an IPv6 address; "
				"write it in brackets, as in [::1]:9401.", spec);
			return GPULSE_EINVAL;
		}
		h = spec;
		hn = (size_t)(colon - spec);
	}

	const char *p = colon + 1;
	size_t pn = strlen(p);
	long val = 0;
	bool ok = pn > 0 && pn <= 5;
	for (size_t i = 0; ok && i < pn; i++) {
		if (!is_digit(p[i]))
			ok = false;
		else
			val = val * 10 + (p[i] - '0');
	}
	if (!ok || val > 65535) {
		str_errf(err, errlen, "Port \"%.16s\" in listen address \"%s\" is not a number "
			"from 0 to 65535.", p, spec);
		return GPULSE_EINVAL;
	}

	if (!v6) {
		if (hn == 1 && h[0] == '*') {
			hn = 0; /* "*:PORT" means all interfaces, as ":PORT" does */
		} else if (hn > 0 && all_digits_dots(h, hn)) {
			char tmp[INET_ADDRSTRLEN];
			struct in_addr a;
			ok = hn < sizeof tmp;
			if (ok) {
				memcpy(tmp, h, hn);
				tmp[hn] = '\0';
				ok = inet_pton(AF_INET, tmp, &a) == 1;
			}
			if (!ok) {
				str_errf(err, errlen, "\"%.*s\" in listen address \"%s\" is not an IPv4 "
					"address.", (int)hn, h, spec);
				return GPULSE_EINVAL;
			}
		} else if (hn > 0 && !valid_hostname(h, hn)) {
			str_errf(err, errlen, "\"%.*s\" in listen address \"%s\" is neither an IP "
				"address nor a host name.", (int)hn, h, spec);
			return GPULSE_EINVAL;
		}
	}
	if (!host || hn >= hostlen) {
		str_errf(err, errlen, "The host in listen address \"%s\" is too long.", spec);
		return GPULSE_EINVAL;
	}
	memcpy(host, h, hn);
	host[hn] = '\0';
	if (port)
		*port = (int)val;
	return GPULSE_OK;
}

bool http_addr_is_loopback(const struct sockaddr *sa)
{
	if (!sa)
		return false;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in a4;
		memcpy(&a4, sa, sizeof a4);
		return (ntohl(a4.sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 a6;
		memcpy(&a6, sa, sizeof a6);
		if (IN6_IS_ADDR_LOOPBACK(&a6.sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&a6.sin6_addr) && a6.sin6_addr.s6_addr[12] == 127;
	}
	return false;
}

bool http_is_loopback_listen(const char *spec)
{
	char host[HTTP_MAX_LISTEN + 1];
	int port;
	if (http_parse_listen(spec, host, sizeof host, &port, NULL, 0) != 0)
		return false;
	/* In storage big enough for either family: http_addr_is_loopback
	 * copies as much as the family says. */
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		return http_addr_is_loopback((const struct sockaddr *)&ss);
	}
	char *pct = strchr(host, '%');
	if (pct)
		*pct = '\0';
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		return http_addr_is_loopback((const struct sockaddr *)&ss);
	}
	return false;
}

/* Resolve a listen host once; the list is what both the loopback rule and
 * the bind use, so a resolver that answers differently the second time
 * cannot slip a remote address past the check. */
static int resolve_listen(const struct http_config *cfg, const char *host, int port,
			  struct addrinfo **res, char *err, size_t errlen)
{
	struct addrinfo hints = {0};
	char portstr[8];
	snprintf(portstr, sizeof portstr, "%d", port);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	http_resolve_fn *resolve = cfg->resolve ? cfg->resolve : getaddrinfo;
	*res = NULL;
	int g = resolve(host, portstr, &hints, res);
	if (g != 0 || !*res) {
		if (*res)
			freeaddrinfo(*res);
		*res = NULL;
		str_errf(err, errlen, "Cannot resolve \"%s\" in listen address \"%s\": %s.",
			host, cfg->listen, g ? gai_strerror(g) : "no addresses");
		return GPULSE_EINVAL;
	}
	return GPULSE_OK;
}

/* The first resolved address beyond loopback, as text into buf; false when
 * every address is loopback. */
static bool first_remote(const struct addrinfo *res, char *buf, size_t buflen)
{
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (http_addr_is_loopback(ai->ai_addr))
			continue;
		if (getnameinfo(ai->ai_addr, ai->ai_addrlen, buf, (socklen_t)buflen, NULL, 0,
				NI_NUMERICHOST) != 0)
			snprintf(buf, buflen, "an address of family %d", ai->ai_family);
		return true;
	}
	return false;
}

/* Bind and spec ourselves rather than let MHD do it, so a failure comes
 * back with errno and turns into a sentence a person can act on. */
static int open_listener(const char *spec, const char *host, int port,
			 const struct addrinfo *res, int defer_s, int *fd_out, bool *v6_out,
			 char *err, size_t errlen)
{
	struct addrinfo any6 = {0}, any4 = {0};
	struct sockaddr_in6 sa6 = {0};
	struct sockaddr_in sa4 = {0};
	int rc = GPULSE_EIO, fd = -1, last_errno = 0;

	if (!host[0]) {
		/* All interfaces: one dual-stack socket, or IPv4 alone on a
		 * machine without IPv6. */
		sa6.sin6_family = AF_INET6;
		sa6.sin6_addr = in6addr_any;
		sa6.sin6_port = htons((uint16_t)port);
		sa4.sin_family = AF_INET;
		sa4.sin_addr.s_addr = htonl(INADDR_ANY);
		sa4.sin_port = htons((uint16_t)port);
		any6.ai_family = AF_INET6;
		any6.ai_addr = (struct sockaddr *)&sa6;
		any6.ai_addrlen = sizeof sa6;
		any6.ai_next = &any4;
		any4.ai_family = AF_INET;
		any4.ai_addr = (struct sockaddr *)&sa4;
		any4.ai_addrlen = sizeof sa4;
	}
	for (const struct addrinfo *ai = host[0] ? res : &any6; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0) {
			last_errno = errno;
			continue;
		}
		int one = 1, zero = 0;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, host[0] ? &one : &zero, sizeof one);
		/* The kernel hands a connection over only once its first bytes
		 * are in (or defer_s has passed), so one that sends nothing
		 * takes no slot and no guard entry for that long, and a scrape
		 * is accepted with its request head, or its ClientHello,
		 * already there (see http_guard.c). Best effort: without it
		 * the guard alone decides. */
		if (defer_s > 0 &&
		    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_s, sizeof defer_s) != 0)
			log_debug("http: TCP_DEFER_ACCEPT: %s", strerror(errno));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
			*v6_out = ai->ai_family == AF_INET6;
			*fd_out = fd;
			fd = -1;
			rc = GPULSE_OK;
			goto out;
		}
		last_errno = errno;
		close(fd);
		fd = -1;
		/* A busy port stays busy on the next address family: say so. */
		if (last_errno == EADDRINUSE || last_errno == EACCES)
			break;
	}
	if (last_errno == EADDRINUSE)
		str_errf(err, errlen, "Cannot listen on %s: the port is already in use "
			"(is another gpulsed running?).", spec);
	else if (last_errno == EACCES)
		str_errf(err, errlen, "Cannot listen on %s: permission denied (ports below 1024 "
			"need privileges).", spec);
	else if (last_errno == EADDRNOTAVAIL)
		str_errf(err, errlen, "Cannot listen on %s: no local interface has that address.",
			spec);
	else
		str_errf(err, errlen, "Cannot listen on %s: %s.", spec,
			strerror(last_errno ? last_errno : EINVAL));
out:
	return rc;
}

/* ---- requests -------------------------------------------------------- */

const char *http_request_header(const struct http_request *req, const char *name)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

/* Form values first, then the query string's: Go's Request.FormValue,
 * which is what Prometheus reads. */
static struct conn_ctx *conn_ctx(struct MHD_Connection *conn);

/* Calls fn for each name\0value\0 pair of the n in `pairs` until it
 * returns false; false then. */
static bool pairs_walk(const struct buf *pairs, size_t n,
		       bool (*fn)(void *cls, const char *name, const char *value), void *cls)
{
	const char *p = pairs->data;
	for (size_t i = 0; p && i < n; i++) {
		const char *value = p + strlen(p) + 1;
		if (!fn(cls, p, value))
			return false;
		p = value + strlen(value) + 1;
	}
	return true;
}

/* The decoded body's pairs (none unless a form was parsed), then the
 * query string's: calls fn for each until it returns false. */
static void request_pairs(const struct http_request *req,
			  bool (*fn)(void *cls, const char *name, const char *value), void *cls)
{
	const struct conn_ctx *c = req->conn ? conn_ctx(req->conn) : NULL;
	if (!c)
		return;
	if (c->parsed && !pairs_walk(&c->form, c->npairs, fn, cls))
		return;
	pairs_walk(&c->query, c->nquery, fn, cls);
}

struct args_walk {
	const char *name;
	const char **out;
	size_t max, n;
};

static bool first_pair(void *cls, const char *name, const char *value)
{
	struct args_walk *w = cls;
	if (strcmp(name, w->name) != 0)
		return true;
	w->out[0] = value;
	w->n = 1;
	return false;
}

const char *http_request_arg(const struct http_request *req, const char *name)
{
	const char *v = NULL;
	struct args_walk w = {.name = name, .out = &v, .max = 1};
	request_pairs(req, first_pair, &w);
	return v;
}

static bool collect_pair(void *cls, const char *name, const char *value)
{
	struct args_walk *w = cls;
	if (strcmp(name, w->name) == 0) {
		if (w->n < w->max)
			w->out[w->n] = value;
		w->n++;
	}
	return true;
}

size_t http_request_args(const struct http_request *req, const char *name, const char **out,
			 size_t max)
{
	/* As Go's Request.Form: the body's values, then the query's. */
	struct args_walk w = {.name = name, .out = out, .max = max, .n = 0};
	request_pairs(req, collect_pair, &w);
	return w.n;
}

const char *http_request_nul_arg(const struct http_request *req)
{
	const struct conn_ctx *c = req->conn ? conn_ctx(req->conn) : NULL;
	if (!c)
		return NULL;
	if (c->parsed && c->nul_name)
		return c->nul_name;
	return c->query_nul;
}

/* The server's state for a connection (NULL when out of memory). */
static struct conn_ctx *conn_ctx(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* ---- form bodies (POST, application/x-www-form-urlencoded) -------------
 *
 * As Go's Request.ParseForm, which Prometheus's API calls: the body of a
 * POST whose Content-Type is application/x-www-form-urlencoded holds
 * key=value pairs joined by '&', percent-encoded, '+' for a space; other
 * bodies are read (within the bound) and ignored. The decoded pairs
 * replace the body in the buffer kept in the connection's conn_ctx until
 * on_completed. Each function returns a canned response to send, or -1
 * to go on. The query string's pairs are decoded by the same code
 * (pairs_decode), in on_uri. */

static int form_begin(struct MHD_Connection *conn, const char *cl)
{
	struct conn_ctx *c = conn_ctx(conn);
	if (!c)
		return R_503;
	if (cl) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(cl, &end, 10);
		if (*end || end == cl || errno || n > HTTP_MAX_FORM_BYTES)
			return R_413_FORM;
	}
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_TYPE);
	static const char form[] = "application/x-www-form-urlencoded";
	c->form_type = ct && strncasecmp(ct, form, sizeof form - 1) == 0 &&
		       (ct[sizeof form - 1] == '\0' || ct[sizeof form - 1] == ';' ||
			ct[sizeof form - 1] == ' ');
	c->in_form = true;
	c->parsed = false;
	c->body_bytes = 0;
	buf_reset(&c->form);
	return -1;
}

static int form_data(struct MHD_Connection *conn, const char *data, size_t len)
{
	struct conn_ctx *c = conn_ctx(conn);
	if (!c || !c->in_form)
		return R_413; /* a body where none is read */
	if (len > HTTP_MAX_FORM_BYTES - c->body_bytes)
		return R_413_FORM;
	c->body_bytes += len;
	if (c->form_type && buf_append(&c->form, data, len))
		return R_503; /* out of memory: the bound was checked above */
	return -1;
}

static int hexdigit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decode s[0..n) (percent escapes, '+') to out; the decoded length, or
 * -1 on a bad escape. out may be s: the text only shrinks. */
static ptrdiff_t form_unescape(const char *s, size_t n, char *out)
{
	char *w = out;
	for (const char *r = s, *end = s + n; r < end; r++) {
		if (*r == '+') {
			*w++ = ' ';
		} else if (*r == '%') {
			int hi = r + 1 < end ? hexdigit(r[1]) : -1;
			int lo = hi >= 0 && r + 2 < end ? hexdigit(r[2]) : -1;
			if (hi < 0 || lo < 0)
				return -1;
			*w++ = (char)(hi * 16 + lo);
			r += 2;
		} else {
			*w++ = *r;
		}
	}
	return w - out;
}

/* Decode one name or value to the end of `out`, NUL-terminated; a NUL
 * it decodes to (%00) ends it there and is noted in *nul. false on a bad
 * escape. */
static bool form_put(struct buf *out, const char *s, size_t n, bool *nul)
{
	char *w = out->data + out->len;
	ptrdiff_t dn = form_unescape(s, n, w);
	if (dn < 0)
		return false;
	size_t len = strnlen(w, (size_t)dn);
	if (len < (size_t)dn)
		*nul = true;
	w[len] = '\0';
	out->len += len + 1;
	return true;
}

/* What pairs_decode does with a pair that Go's url.ParseQuery rejects (a
 * ';' in it, a bad percent escape): Go skips it and goes on, reporting an
 * error that Request.FormValue ignores. */
enum bad_pair { BAD_PAIR_REFUSES, BAD_PAIR_SKIPPED };

/* The pairs of s[0..n), decoded as Go's url.ParseQuery does, appended to
 * `out` as name\0value\0 runs (a pair without '=' has the value ""); *npairs
 * counts them and *nul_at is the offset in `out` of the first whose name
 * or value decoded to a NUL (SIZE_MAX: none). The decoded text is at most
 * the input and one byte a pair more: 1.5 times it at worst ("a&a&"), so
 * the caller reserves n + n / 2 + 2 bytes in `out`. Returns false on a bad
 * pair when `bad` is BAD_PAIR_REFUSES. */
static bool pairs_decode(const char *s, size_t n, enum bad_pair bad, struct buf *out,
			 size_t *npairs, size_t *nul_at)
{
	*npairs = 0;
	*nul_at = SIZE_MAX;
	const char *p = s, *end = s + n;
	while (p < end) {
		const char *next = memchr(p, '&', (size_t)(end - p));
		if (!next)
			next = end;
		size_t pn = (size_t)(next - p);
		if (pn) {
			const char *eq = memchr(p, '=', pn);
			size_t kn = eq ? (size_t)(eq - p) : pn;
			size_t at = out->len;
			bool nul = false;
			bool ok = !memchr(p, ';', pn) && form_put(out, p, kn, &nul) &&
				  form_put(out, eq ? eq + 1 : "", eq ? pn - kn - 1 : 0, &nul);
			if (!ok && bad == BAD_PAIR_REFUSES)
				return false;
			if (!ok) {
				out->len = at;
				out->data[at] = '\0';
			} else {
				if (nul && *nul_at == SIZE_MAX)
					*nul_at = at;
				(*npairs)++;
			}
		}
		p = next + 1;
	}
	return true;
}

/* The body's pairs (pairs_decode) go to a buffer of their own, which
 * replaces the body: MHD's connection values would take them from the
 * connection's memory pool, which a few thousand pairs exhaust (MHD then
 * cannot even send an answer). A bad pair, which Go skips, is refused
 * here (400). */
static int form_finish(struct MHD_Connection *conn)
{
	struct conn_ctx *c = conn_ctx(conn);
	if (!c || !c->in_form || c->parsed || !c->form_type)
		return -1;
	c->parsed = true;
	c->npairs = 0;
	c->nul_name = NULL;
	if (!c->form.data || c->form.len == 0)
		return -1;
	/* A NUL inside would cut a value short without notice. */
	if (memchr(c->form.data, '\0', c->form.len))
		return R_400_FORM;
	struct buf out;
	buf_init(&out, c->form.len + c->form.len / 2 + 2);
	if (buf_reserve(&out, c->form.len + c->form.len / 2 + 2))
		return R_503;
	int rc = -1;
	size_t npairs, nul_at;
	if (!pairs_decode(c->form.data, c->form.len, BAD_PAIR_REFUSES, &out, &npairs, &nul_at)) {
		rc = R_400_FORM; /* Go: "invalid semicolon separator", a bad escape */
		goto out;
	}
	buf_free(&c->form);
	c->form = out;
	memset(&out, 0, sizeof out);
	c->npairs = npairs;
	if (nul_at != SIZE_MAX)
		c->nul_name = c->form.data + nul_at;
out:
	buf_free(&out);
	return rc;
}

/* The query string `q` (what follows the target's first '?') decoded to
 * the connection's own buffer, bounded by the target's limit, for
 * http_request_arg: a pair Go's url.ParseQuery rejects is skipped, as
 * Prometheus (Request.FormValue) skips it. false when out of memory. */
static bool query_parse(struct conn_ctx *c, const char *q, size_t n)
{
	buf_free(&c->query);
	c->nquery = 0;
	c->query_nul = NULL;
	buf_init(&c->query, n + n / 2 + 2);
	if (n == 0)
		return true;
	if (buf_reserve(&c->query, n + n / 2 + 2))
		return false;
	size_t nul_at;
	pairs_decode(q, n, BAD_PAIR_SKIPPED, &c->query, &c->nquery, &nul_at);
	if (nul_at != SIZE_MAX)
		c->query_nul = c->query.data + nul_at;
	return true;
}

/* ---- framing (RFC 9112) ---------------------------------------------------
 *
 * A request that a proxy in front of gpulsed could frame differently from
 * MHD is refused, so that no second request can be smuggled inside its
 * body. MHD 0.9.75 frames by Transfer-Encoding when it is present and by
 * the first Content-Length otherwise, and keeps a header name followed by
 * whitespace with the whitespace ("Transfer-Encoding " is then no
 * Transfer-Encoding to it, while a lenient proxy reads one). Its options
 * do not serve: MHD_OPTION_STRICT_FOR_CLIENT at 1 answers an HTTP/1.1
 * request without Host with a 400 whose status line and headers are sent
 * twice (0.9.75), and at -1, which refuses the whitespace (by closing
 * without an answer), it drops the Host check. So all of it is checked
 * here, on the head's first call, where a queued answer makes MHD close
 * the connection after it (nothing after the head is read as a
 * request). */

struct framing {
	unsigned hosts, lengths, encodings;
	const char *length;          /* the first Content-Length */
	bool lengths_differ, name_space, not_chunked;
};

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	struct framing *f = cls;
	(void)kind;
	if (!key)
		return MHD_YES;
	if (strpbrk(key, " \t"))
		f->name_space = true;
	if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0) {
		f->hosts++;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		/* Equal values frame alike; RFC 9110, section 8.6 lets them be. */
		if (f->lengths++ == 0)
			f->length = value;
		else if (!value || !f->length || strcmp(value, f->length) != 0)
			f->lengths_differ = true;
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->encodings++;
		if (!value || strcasecmp(value, "chunked") != 0)
			f->not_chunked = true;
	}
	return MHD_YES;
}

/* The refusal for a request whose framing or Host is ambiguous, or -1.
 * `version` is the request line's ("HTTP/1.1"). */
static int framing_check(struct MHD_Connection *conn, const char *version)
{
	struct framing f = {0};
	MHD_get_connection_values(conn, MHD_HEADER_KIND, framing_header, &f);
	if (f.name_space)
		return R_400_NAME_SPACE;
	if (f.encodings && f.lengths)
		return R_400_TE_CL;
	if (f.lengths_differ)
		return R_400_CL;
	if (f.encodings > 1 || f.not_chunked)
		return R_400_TE;
	/* HTTP/1.0 had no Host; HTTP/1.1 and later must send one. */
	bool needs_host = version && strcmp(version, MHD_HTTP_VERSION_1_0) != 0;
	if (f.hosts > 1 || (f.hosts == 0 && needs_host))
		return R_400_HOST;
	return -1;
}

/* The path of an absolute-form target ("http://host:port/path", RFC 9112,
 * section 3.2.2), which a server must take as it takes the origin form;
 * any other target as it is. The query string is not in it (MHD parses
 * that off), and the Host header is ignored for it, as the RFC says. */
static const char *origin_path(const char *url)
{
	const char *rest = NULL;
	if (strncasecmp(url, "http://", 7) == 0)
		rest = url + 7;
	else if (strncasecmp(url, "https://", 8) == 0)
		rest = url + 8;
	if (!rest)
		return url;
	const char *slash = strchr(rest, '/');
	return slash ? slash : "/";
}

/* The whole request target, before MHD parses its query string: MHD
 * would keep each pair in the connection's memory pool (64 bytes a pair
 * in 0.9.75), which a few thousand pairs exhaust, and then it sends no
 * answer at all (5,000 pairs, 10 KB, hung until the head deadline). A
 * pool big enough for the longest target's pairs (32,768 of "a&" in 64
 * KiB: 2 MiB) would be zeroed whole at each kept-alive request, so every
 * kept-alive connection would hold it. So the pairs are decoded here,
 * into the connection's own bounded buffer, and MHD is handed an empty
 * query string: it finds the '?' before calling this and parses what
 * follows it afterwards, from the same buffer (0.9.75 and 1.0
 * alike), so the byte after the '?' becomes the end of the string. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	(void)cls;
	const char *q = strchr(uri, '?');
	size_t n = strnlen(uri, HTTP_MAX_URL_BYTES + 1);
	void *verdict = &uri_ok_marker;
	struct conn_ctx *c = conn_ctx(conn);
	if (n > HTTP_MAX_URL_BYTES)
		verdict = &uri_too_long_marker; /* its pairs are not read either */
	else if (!c || !query_parse(c, q ? q + 1 : "", q ? (size_t)(uri + n - q - 1) : 0))
		verdict = &uri_no_memory_marker;
	if (q && q[1]) {
		/* MHD's own read buffer, handed over as const: see above. */
		char *rest = (char *)(uintptr_t)(q + 1);
		*rest = '\0';
	}
	return verdict;
}

/* ---- shared bodies ---------------------------------------------------- */

struct http_blob {
	atomic_int refs;
	size_t len;
	char data[];
};

const char *http_blob_data(const struct http_blob *b)
{
	return b->data;
}

size_t http_blob_len(const struct http_blob *b)
{
	return b->len;
}

struct http_blob *http_blob_new(const void *data, size_t len)
{
	struct http_blob *b = malloc(sizeof *b + (len ? len : 1));
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	if (len)
		memcpy(b->data, data, len);
	return b;
}

struct http_blob *http_blob_ref(struct http_blob *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return b;
}

void http_blob_unref(struct http_blob *b)
{
	if (b && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		free(b);
}

/* MHD calls this when a response built on a blob is done with it. */
static void blob_release(void *cls)
{
	http_blob_unref(cls);
}

/* True when v[n] is `want`, in time that depends only on want's length,
 * so a client cannot find a token byte by byte. */
static bool token_equal(const char *want, size_t want_len, const char *v, size_t n)
{
	unsigned diff = (unsigned)(n != want_len);
	for (size_t i = 0; i < want_len; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)(i < n ? v[i] : 0);
	return diff == 0;
}

/* What the request's "Authorization: Bearer TOKEN" proves. Both tokens
 * are always compared, so the answer's timing does not say which one a
 * guess came close to. */
enum grant { GRANT_NONE, GRANT_READ, GRANT_WRITE };

static enum grant bearer_grant(const struct http_server *s, struct MHD_Connection *conn)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	if (!v)
		return GRANT_NONE;
	while (*v == ' ' || *v == '\t')
		v++;
	if (strncasecmp(v, "Bearer", 6) != 0 || (v[6] != ' ' && v[6] != '\t'))
		return GRANT_NONE;
	v += 6;
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = strlen(v);
	while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	bool read = s->token && token_equal(s->token, s->token_len, v, n);
	bool write = s->write_token && token_equal(s->write_token, s->write_token_len, v, n);
	return write ? GRANT_WRITE : read ? GRANT_READ : GRANT_NONE;
}

static const struct route *find_route(const struct http_server *s, const char *path)
{
	int n = atomic_load_explicit(&s->nroutes, memory_order_acquire);
	for (int i = 0; i < n; i++) {
		const struct route *r = &s->routes[i];
		if (r->prefix ? strncmp(path, r->path, r->len) == 0 : strcmp(path, r->path) == 0)
			return r;
	}
	return NULL;
}

static bool is_public(const struct http_server *s, const char *path)
{
	int n = atomic_load_explicit(&s->npublic, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(path, s->public_paths[i]) == 0)
			return true;
	return false;
}

static enum MHD_Result send_canned(struct http_server *s, struct MHD_Connection *conn,
				   enum canned which, bool rejected)
{
	static const unsigned codes[R_COUNT] = {
		[R_400_FORM] = MHD_HTTP_BAD_REQUEST, [R_413_FORM] = MHD_HTTP_CONTENT_TOO_LARGE,
		[R_401] = MHD_HTTP_UNAUTHORIZED, [R_403] = MHD_HTTP_FORBIDDEN,
		[R_403_CERT] = MHD_HTTP_FORBIDDEN,
		[R_404] = MHD_HTTP_NOT_FOUND,
		[R_405] = MHD_HTTP_METHOD_NOT_ALLOWED, [R_405_FORM] = MHD_HTTP_METHOD_NOT_ALLOWED,
		[R_413] = MHD_HTTP_CONTENT_TOO_LARGE,
		[R_414] = MHD_HTTP_URI_TOO_LONG, [R_429] = MHD_HTTP_TOO_MANY_REQUESTS,
		[R_429_RATE] = MHD_HTTP_TOO_MANY_REQUESTS,
		[R_500] = MHD_HTTP_INTERNAL_SERVER_ERROR,
		[R_503] = MHD_HTTP_SERVICE_UNAVAILABLE,
		[R_400_NAME_SPACE] = MHD_HTTP_BAD_REQUEST, [R_400_TE_CL] = MHD_HTTP_BAD_REQUEST,
		[R_400_CL] = MHD_HTTP_BAD_REQUEST, [R_400_TE] = MHD_HTTP_BAD_REQUEST,
		[R_400_HOST] = MHD_HTTP_BAD_REQUEST,
	};
	if (rejected) {
		atomic_fetch_add_explicit(&s->rejected, 1, memory_order_relaxed);
		if (s->ext_rejected)
			atomic_fetch_add_explicit(s->ext_rejected, 1, memory_order_relaxed);
	}
	static const int denial[R_COUNT] = {
		[R_401] = HTTP_DENY_UNAUTHORIZED + 1, [R_403] = HTTP_DENY_FORBIDDEN + 1,
		[R_403_CERT] = HTTP_DENY_CLIENT_CERT + 1, [R_429_RATE] = HTTP_DENY_RATE_LIMITED + 1,
		[R_429] = HTTP_DENY_LOGIN_LIMITED + 1,
	};
	if (denial[which] && s->ext_denied)
		atomic_fetch_add_explicit(&s->ext_denied[denial[which] - 1], 1,
					  memory_order_relaxed);
	return MHD_queue_response(conn, codes[which], s->canned[which]);
}

/* With a client CA (mTLS): true when the peer presented an X.509
 * certificate chain that GnuTLS verifies against it (signature, validity
 * dates, key usage). MHD asks for a certificate once a trust list is set
 * (GNUTLS_CERT_REQUEST) but lets the handshake finish without one, so the
 * verdict is taken here, per request: a connection is cheap to recheck
 * next to a handshake, and a resumed session carries its peer's chain. */
static bool client_cert_ok(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return false;
	gnutls_session_t ses = ci->tls_session;
	unsigned status = 0;
	if (gnutls_certificate_type_get(ses) != GNUTLS_CRT_X509)
		return false;
	unsigned n = 0;
	if (!gnutls_certificate_get_peers(ses, &n) || n == 0)
		return false;
	return gnutls_certificate_verify_peers2(ses, &status) == GNUTLS_E_SUCCESS && status == 0;
}

/* The guard's entry for a connection (NULL when the guard had no room). */
static struct guard_conn *conn_guard(struct MHD_Connection *conn)
{
	struct conn_ctx *c = conn_ctx(conn);
	return c ? c->guard : NULL;
}

/* True when a whole request head already waits in the socket's buffer
 * (plaintext only: TLS records cannot be read without the handshake).
 * One non-blocking peek; a head longer than the peek counts as not. */
static bool head_buffered(int fd)
{
	char b[4096];
	ssize_t n = recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
	return n >= 4 && memmem(b, (size_t)n, "\r\n\r\n", 4) != NULL;
}

/* MHD's connection notices, on the connection's own thread: "started"
 * comes after accept and before any read (so before a TLS handshake),
 * "closed" before MHD closes the socket, which is what lets the guard shut
 * sockets down from its own thread (http_guard.c). */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct http_server *s = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *addr =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		struct conn_ctx *c = calloc(1, sizeof *c);
		if (c) {
			c->guard = fd ? guard_open(s->guard, fd->connect_fd,
						   addr ? addr->client_addr : NULL,
						   !s->tls && head_buffered(fd->connect_fd))
				      : NULL;
			buf_init(&c->form, HTTP_MAX_FORM_BYTES);
		}
		*socket_context = c;
	} else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct conn_ctx *c = *socket_context;
		guard_close(s->guard, c ? c->guard : NULL);
		if (c) {
			buf_free(&c->form);
			buf_free(&c->query);
		}
		free(c);
		*socket_context = NULL;
	}
}

struct http_job;
static struct http_job *job_of(void *req_cls);
static enum MHD_Result deferred_start(struct http_server *s, const struct route *r,
				      struct MHD_Connection *conn, const char *url,
				      const char *method, void **req_cls);
static enum MHD_Result deferred_answer(struct http_server *s, struct MHD_Connection *conn,
				       struct http_job *job, void **req_cls);
static bool job_is_auth(const struct http_job *job);
static enum MHD_Result basic_start(struct http_server *s, struct MHD_Connection *conn,
				   const char *url, const char *method, const char *user,
				   const char *pass, void **req_cls);
static bool basic_resumed(struct http_server *s, struct http_job *job, void **req_cls,
			  bool *ok);
static enum MHD_Result send_response(struct http_server *s, struct MHD_Connection *conn, int rc,
				     struct http_response *resp);
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode why);
static void pools_stop(struct http_server *s);
static int add_route(struct http_server *s, const char *path, http_handler_fn *fn, void *ctx,
		     bool reserved, struct http_pool *pool, http_handler_fn *busy);

/* MHD calls this twice for a request without a body: once when the
 * headers are in, and again when the (empty) body is. A response queued on
 * the first call makes MHD drop the rest of the request and close the
 * connection, so the first call answers only what must be refused anyway
 * (too long, a method that may carry a body, a body) and everything else
 * is answered on the second, keeping the connection alive. No state is
 * kept per request beyond the marker in *req_cls. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size,
				  void **req_cls)
{
	struct http_server *s = cls;
	(void)upload_data;

	url = origin_path(url);
	struct http_job *job = job_of(*req_cls);
	enum grant g = GRANT_NONE;
	if (job && job_is_auth(job)) {
		/* Back from the auth pool: bcrypt has spoken. */
		bool ok;
		if (!basic_resumed(s, job, req_cls, &ok))
			return MHD_NO; /* the client left meanwhile */
		if (!ok)
			return send_canned(s, conn, R_401, true);
		g = GRANT_READ;
		goto authorized;
	}
	if (job)
		return deferred_answer(s, conn, job, req_cls);
	if (*req_cls != &headers_seen_marker) {
		atomic_fetch_add_explicit(&s->requests, 1, memory_order_relaxed);
		if (s->ext_requests)
			atomic_fetch_add_explicit(s->ext_requests, 1, memory_order_relaxed);
		if (*req_cls == &uri_too_long_marker)
			return send_canned(s, conn, R_414, true);
		if (*req_cls == &uri_no_memory_marker)
			return send_canned(s, conn, R_503, true);
		int frc = framing_check(conn, version);
		if (frc >= 0)
			return send_canned(s, conn, (enum canned)frc, true);
		bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
		bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
		bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0;
		/* POST goes to two kinds of routes: the query API's form routes
		 * (http_route_form: a form body is read, or the query string
		 * alone) and write actions (http_route_writes, e.g. POST
		 * /api/v1/bench: without a body; the write check below still
		 * applies). POST to no route is 404, elsewhere 405; a path a
		 * prefix route does not know (http_route_known) is no route. */
		const struct route *fr = get || head ? NULL : find_route(s, url);
		http_known_fn *known = fr ? atomic_load_explicit(&fr->known, memory_order_relaxed)
					  : NULL;
		if (known && !known(fr->ctx, url))
			fr = NULL;
		bool form = fr && atomic_load_explicit(&fr->form, memory_order_relaxed);
		bool writes = fr && atomic_load_explicit(&fr->writes, memory_order_relaxed);
		if (post && !fr)
			return send_canned(s, conn, R_404, true);
		if (!head && !get && !(post && (form || writes)))
			return send_canned(s, conn, form ? R_405_FORM : R_405, true);
		const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (post && form) {
			/* A write action's POST takes no body: the 413 below. */
			int brc = form_begin(conn, cl);
			if (brc >= 0)
				return send_canned(s, conn, (enum canned)brc, true);
		} else if ((cl && strcmp(cl, "0") != 0) ||
			   MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
			return send_canned(s, conn, R_413, true);
		}
		/* Without a verified client certificate nothing is answered but
		 * this, and the connection closes (a first-call response). */
		if (s->tls_ca && !client_cert_ok(conn))
			return send_canned(s, conn, R_403_CERT, true);
		/* The head is complete: its deadline no longer applies, and an
		 * ordinary route takes a busy slot if one is left for it. */
		const struct route *r = find_route(s, url);
		if (!guard_head(s->guard, conn_guard(conn), r && r->reserved))
			return send_canned(s, conn, R_503, true);
		*req_cls = &headers_seen_marker;
		return MHD_YES;
	}
	if (*upload_data_size != 0) {
		/* A form route's body is kept, up to its bound; any other body
		 * is refused. */
		int brc = form_data(conn, upload_data, *upload_data_size);
		if (brc >= 0)
			return send_canned(s, conn, (enum canned)brc, true);
		*upload_data_size = 0;
		return MHD_YES;
	}
	{
		int frc = form_finish(conn);
		if (frc >= 0)
			return send_canned(s, conn, (enum canned)frc, true);
	}
	/* The rate limit comes first, so that unauthenticated floods count
	 * too; the reserved routes (/metrics, /healthz) are exempt, so a
	 * scraper that shares an address with a busy client is never starved
	 * (they are cheap: one rendering serves every scrape for 50 ms). */
	if (s->rate) {
		const struct route *rr = find_route(s, url);
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (!(rr && rr->reserved) &&
		    !http_limit_take(s->rate, ci ? ci->client_addr : NULL, clock_mono_ns(), NULL))
			return send_canned(s, conn, R_429_RATE, true);
	}
	/* What holds no data (http_path_public) loads without credentials,
	 * so that a browser can show the page that asks for them. */
	if ((s->token || s->basic) && is_public(s, url))
		goto authorized;
	g = s->token || s->write_token ? bearer_grant(s, conn) : GRANT_NONE;
	if (g == GRANT_NONE && s->basic) {
		/* Basic credentials: a pair verified before passes here; any
		 * other is verified on the auth pool, unless its address has
		 * failed too often of late. */
		char *pass = NULL;
		char *user = MHD_basic_auth_get_username_password(conn, &pass);
		enum MHD_Result ret = MHD_YES;
		bool decided = false;
		if (user && pass) {
			const union MHD_ConnectionInfo *ci =
				MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
			const struct sockaddr *peer = ci ? ci->client_addr : NULL;
			decided = true;
			if (http_basic_cached(s->basic, user, pass))
				g = GRANT_READ, decided = false;
			else if (!http_basic_try(s->basic, peer, clock_mono_ns(), NULL))
				ret = send_canned(s, conn, R_429, true);
			else
				ret = basic_start(s, conn, url, method, user, pass, req_cls);
		}
		if (pass) {
			explicit_bzero(pass, strlen(pass));
			MHD_free(pass);
		}
		MHD_free(user);
		if (decided)
			return ret;
	}
	if ((s->token || s->basic) && g == GRANT_NONE)
		return send_canned(s, conn, R_401, true);

authorized:;
	const struct route *r = find_route(s, url);
	if (!r)
		return send_canned(s, conn, R_404, false);
	/* Reading is what the read token (or none) allows; changing state
	 * takes the write token, or no write token and a loopback listen. */
	if (atomic_load_explicit(&r->writes, memory_order_relaxed) && g != GRANT_WRITE &&
	    !s->writes_open)
		return send_canned(s, conn, R_403, true);
	if (r->pool)
		return deferred_start(s, r, conn, url, method, req_cls);

	struct http_request req = {.method = method, .path = url, .conn = conn,
				   .received_ns = clock_mono_ns()};
	struct http_response resp = {.status = MHD_HTTP_OK, .content_type = NULL};
	buf_init(&resp.body, s->max_body);
	return send_response(s, conn, r->fn(r->ctx, &req, &resp), &resp);
}

/* Queue what a handler that returned `rc` wrote in *resp (which this
 * frees), or a 500 for a failed handler. */
static enum MHD_Result send_response(struct http_server *s, struct MHD_Connection *conn, int rc,
				     struct http_response *resp0)
{
	struct http_response resp = *resp0;
	if (rc != 0 || resp.body.failed || resp.status < 100 || resp.status > 599) {
		buf_free(&resp.body);
		http_blob_unref(resp.blob);
		return send_canned(s, conn, R_500, false);
	}
	size_t len = resp.body.len;
	char *data = buf_steal(&resp.body);
	struct MHD_Response *mr;
	if (resp.blob) {
		/* No copy: the response points into the blob and drops its
		 * reference when MHD is done sending. */
		free(data);
		mr = MHD_create_response_from_buffer_with_free_callback_cls(
			resp.blob->len, resp.blob->data, blob_release, resp.blob);
		if (!mr)
			http_blob_unref(resp.blob);
	} else if (data) {
		mr = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
		if (!mr)
			free(data);
	} else {
		static char empty[1];
		mr = MHD_create_response_from_buffer(0, empty, MHD_RESPMEM_PERSISTENT);
	}
	if (!mr)
		return MHD_NO;
	MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE,
				resp.content_type ? resp.content_type : "text/plain; charset=utf-8");
	for (size_t i = 0; i < resp.nheaders && i < HTTP_MAX_RESP_HEADERS; i++)
		if (MHD_add_response_header(mr, resp.headers[i].name, resp.headers[i].value) != MHD_YES) {
			MHD_destroy_response(mr);
			return send_canned(s, conn, R_500, false);
		}
	enum MHD_Result ret = MHD_queue_response(conn, (unsigned)resp.status, mr);
	MHD_destroy_response(mr);
	return ret;
}

/* ---- lifetime -------------------------------------------------------- */

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* MHD's own complaints: worth a warning while starting, but once serving
 * they are about clients (resets, bad TLS hellos) and would flood the log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *s = cls;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	size_t n = strlen(msg);
	while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		msg[--n] = '\0';
	if (atomic_load_explicit(&s->started, memory_order_relaxed))
		log_debug("http: %s", msg);
	else
		log_warn("http: %s", msg);
}

/* Read a whole PEM file into a NUL-terminated string (MHD wants it so). */
static int read_pem(const char *what, const char *path, char **out, char *err, size_t errlen)
{
	int rc = GPULSE_EIO;
	char *data = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		str_errf(err, errlen, "Cannot read the TLS %s file %s: %s.", what, path,
			strerror(errno));
		goto out;
	}
	data = malloc(HTTP_MAX_TLS_FILE + 1);
	if (!data) {
		rc = GPULSE_ENOMEM;
		str_errf(err, errlen, "Out of memory reading the TLS %s file.", what);
		goto out;
	}
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, data + len, HTTP_MAX_TLS_FILE + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			str_errf(err, errlen, "Cannot read the TLS %s file %s: %s.", what, path,
				strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len > HTTP_MAX_TLS_FILE) {
			str_errf(err, errlen, "The TLS %s file %s is larger than %d bytes.", what,
				path, HTTP_MAX_TLS_FILE);
			rc = GPULSE_EPARSE;
			goto out;
		}
	}
	if (len == 0 || !memmem(data, len, "-----BEGIN", 10)) {
		str_errf(err, errlen, "The TLS %s file %s holds no PEM data.", what, path);
		rc = GPULSE_EPARSE;
		goto out;
	}
	data[len] = '\0';
	*out = data;
	data = NULL;
	rc = GPULSE_OK;
out:
	free(data);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* A canned answer's JSON body, in the query API's error shape; NULL
 * when out of memory. */
static char *error_body(const char *type, const char *msg)
{
	struct buf b;
	buf_init(&b, 4096);
	promjson_put_error(&b, type, msg);
	return buf_steal(&b);
}

/* The 403's message. */
static char *forbidden_body(const struct http_server *s, const char *hint)
{
	char msg[1024];
	snprintf(msg, sizeof msg, "%s%s",
		 s->write_token
			 ? "this endpoint changes state, so it needs the write token (Authorization: "
			   "Bearer WRITE_TOKEN); a read token does not allow it"
			 : "this endpoint changes state, and no write token is configured: without one, "
			   "state-changing endpoints are served only on a numeric loopback listen address",
		 hint && !s->write_token ? hint : "");
	return error_body("forbidden", msg);
}

static int make_canned(struct http_server *s, const char *write_hint)
{
	/* The JSON bodies, made here; NULL where out of memory. */
	char *json[R_COUNT] = {
		[R_400_FORM] = error_body("bad_data", "error parsing form values: invalid form body "
					  "(a bad percent escape, a semicolon or a NUL)"),
		[R_403] = forbidden_body(s, write_hint),
		[R_413_FORM] = error_body("bad_data", "request body too large: a form body may hold "
					  "at most " HTTP_MAX_FORM_TEXT),
	};
	static const char *const bodies[R_COUNT] = {
		[R_400_FORM] = "", /* json, above */
		[R_401] = ("unauthorized: send Authorization: Bearer TOKEN, or Basic credentials "
			   "where users are configured\n"),
		[R_403] = "", /* json, above */
		[R_403_CERT] = "forbidden: a client certificate signed by the configured CA is required\n",
		[R_404] = "not found\n",
		[R_405] = "method not allowed: GET and HEAD are served here\n",
		[R_405_FORM] = "method not allowed: GET, HEAD and POST are served here\n",
		[R_413] = "request bodies are not accepted here\n",
		[R_413_FORM] = "", /* json, above */
		[R_414] = "request target too long\n",
		[R_429] = "too many failed logins from this address; retry later\n",
		[R_429_RATE] = "too many requests from this address; retry later\n",
		[R_500] = "internal error\n",
		[R_503] = "busy: too many requests at once; retry shortly\n",
		[R_400_NAME_SPACE] = ("bad request: a header field name is followed by whitespace "
				      "before its colon (RFC 9112, section 5.1)\n"),
		[R_400_TE_CL] = ("bad request: both Transfer-Encoding and Content-Length "
				 "(RFC 9112, section 6.1)\n"),
		[R_400_CL] = "bad request: Content-Length headers that differ (RFC 9112, section 6.3)\n",
		[R_400_TE] = ("bad request: a Transfer-Encoding other than one \"chunked\" "
			      "(RFC 9112, section 6.3)\n"),
		[R_400_HOST] = ("bad request: an HTTP/1.1 request needs exactly one Host header "
				"(RFC 9112, section 3.2)\n"),
	};
	int rc = GPULSE_OK;
	for (int i = 0; i < R_COUNT && rc == GPULSE_OK; i++) {
		bool is_json = i == R_403 || i == R_400_FORM || i == R_413_FORM;
		if (is_json && json[i]) {
			s->canned[i] = MHD_create_response_from_buffer(strlen(json[i]), json[i],
								       MHD_RESPMEM_MUST_FREE);
			if (s->canned[i])
				json[i] = NULL; /* MHD's now */
		} else if (!is_json) {
			/* MHD never writes to a PERSISTENT buffer; its prototype
			 * is just not const. */
			void *body;
			memcpy(&body, &bodies[i], sizeof body);
			s->canned[i] = MHD_create_response_from_buffer(strlen(bodies[i]), body,
								       MHD_RESPMEM_PERSISTENT);
		}
		if (!s->canned[i]) {
			rc = GPULSE_ENOMEM;
			break;
		}
		MHD_add_response_header(s->canned[i], MHD_HTTP_HEADER_CONTENT_TYPE,
					is_json ? "application/json" : "text/plain; charset=utf-8");
	}
	for (int i = 0; i < R_COUNT; i++)
		free(json[i]);
	if (rc)
		return rc;
	MHD_add_response_header(s->canned[R_405], MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	MHD_add_response_header(s->canned[R_405_FORM], MHD_HTTP_HEADER_ALLOW, "GET, HEAD, POST");
	if (s->token || !s->basic)
		MHD_add_response_header(s->canned[R_401], MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"gpulse\"");
	if (s->basic)
		MHD_add_response_header(s->canned[R_401], MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Basic realm=\"gpulse\", charset=\"UTF-8\"");
	/* A bucket gives one more try every HTTP_BASIC_FAIL_PERIOD_NS. */
	MHD_add_response_header(s->canned[R_429], MHD_HTTP_HEADER_RETRY_AFTER, "2");
	/* An empty bucket has a token again after 1/rate seconds. */
	char retry[16];
	snprintf(retry, sizeof retry, "%u", s->rate ? http_limit_retry_s(s->rate) : 1);
	MHD_add_response_header(s->canned[R_429_RATE], MHD_HTTP_HEADER_RETRY_AFTER, retry);
	MHD_add_response_header(s->canned[R_503], MHD_HTTP_HEADER_RETRY_AFTER, "1");
	return GPULSE_OK;
}

int http_server_start(struct http_server **out, const struct http_config *cfg,
		      char *err, size_t errlen)
{
	int rc;
	char host[HTTP_MAX_LISTEN + 1];
	char remote[NI_MAXHOST + 32];
	int port = 0;
	bool v6 = false;
	struct addrinfo *res = NULL;
	struct http_server *s = calloc(1, sizeof *s);
	if (!s) {
		str_errf(err, errlen, "Out of memory starting the HTTP server.");
		return GPULSE_ENOMEM;
	}
	s->listen_fd = -1;

	rc = http_parse_listen(cfg->listen, host, sizeof host, &port, err, errlen);
	if (rc)
		goto out;
	/* All interfaces (host "") is never loopback; a host, numeric or a
	 * name, is loopback only when every address it resolves to is. */
	bool loopback = false;
	if (host[0]) {
		rc = resolve_listen(cfg, host, port, &res, err, errlen);
		if (rc)
			goto out;
		loopback = !first_remote(res, remote, sizeof remote);
	} else {
		snprintf(remote, sizeof remote, "every interface");
	}
	bool tls = cfg->tls_cert_file || cfg->tls_key_file;
	if (cfg->tls_client_ca_file && !tls) {
		str_errf(err, errlen, "Client certificates need TLS: a certificate file and a key "
			"file.");
		rc = GPULSE_EINVAL;
		goto out;
	}
	bool token = (cfg->auth_token && cfg->auth_token[0]) || cfg->nbasic_users > 0;
	if (!loopback && cfg->refuse_insecure_remote && !(tls && token)) {
		str_errf(err, errlen, "listen \"%s\" resolves to %s, which is reachable from other "
			"machines, so it needs TLS and a token (missing: %s)%s", cfg->listen, remote,
			!tls && !token ? "TLS, token" : !tls ? "TLS" : "token",
			cfg->insecure_remote_hint ? cfg->insecure_remote_hint : "");
		rc = GPULSE_EINVAL;
		goto out;
	}
	unsigned max_conn = cfg->max_connections ? cfg->max_connections
						 : HTTP_DEFAULT_MAX_CONNECTIONS;
	unsigned threads = cfg->threads ? cfg->threads : HTTP_DEFAULT_THREADS;
	unsigned timeout = cfg->timeout_s ? cfg->timeout_s : HTTP_DEFAULT_TIMEOUT_S;
	unsigned head_ms = cfg->header_timeout_ms ? cfg->header_timeout_ms
						  : HTTP_DEFAULT_HEADER_TIMEOUT_MS;
	unsigned per_ip = cfg->max_per_ip;
	if (per_ip == 0) {
		/* On loopback every client shares one address, so a per-address
		 * cap would only lower the total. */
		per_ip = loopback ? max_conn : max_conn / 4;
		if (per_ip < 4)
			per_ip = max_conn < 4 ? max_conn : 4;
	}
	if (per_ip > max_conn)
		per_ip = max_conn;
	if (threads > max_conn)
		threads = max_conn;
	/* MHD's hard limit is above max_connections by a quarter (at least
	 * 8): room for the connections accepted while evicted ones are still
	 * closing, and for scrapes beyond the reserve. */
	unsigned slack = max_conn / 4 > 8 ? max_conn / 4 : 8;
	unsigned reserve = max_conn / 8 > 2 ? max_conn / 8 : 2;
	if (reserve > max_conn / 2)
		reserve = max_conn / 2;
	struct guard_config gc = {
		.max_connections = max_conn,
		.slots = max_conn + slack,
		.reserved = reserve,
		.per_address = per_ip,
		.head_timeout_ns = (int64_t)head_ms * NS_PER_MS,
		.next_head_timeout_ns = (int64_t)timeout * NS_PER_SEC,
		.sweep_ns = 100 * NS_PER_MS,
		.shed_total = cfg->shed_total,
	};
	s->max_body = cfg->max_body_bytes ? cfg->max_body_bytes : HTTP_DEFAULT_MAX_BODY;
	s->ext_requests = cfg->requests_total;
	s->ext_rejected = cfg->rejected_total;
	s->ext_denied = cfg->denied_total;

	if (cfg->auth_token && cfg->auth_token[0]) {
		s->token = strdup(cfg->auth_token);
		if (!s->token) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		s->token_len = strlen(s->token);
	}
	if (cfg->write_token && cfg->write_token[0]) {
		s->write_token = strdup(cfg->write_token);
		if (!s->write_token) {
			rc = GPULSE_ENOMEM;
			goto out;
		}
		s->write_token_len = strlen(s->write_token);
	}
	if (cfg->rate_limit > 0) {
		double burst = cfg->rate_limit_burst ? cfg->rate_limit_burst
			       : cfg->rate_limit * 2 > HTTP_RATE_MIN_BURST ? cfg->rate_limit * 2
									    : HTTP_RATE_MIN_BURST;
		rc = http_limit_new(&s->rate, cfg->rate_limit, burst, HTTP_RATE_ADDRESSES);
		if (rc) {
			str_errf(err, errlen, "Cannot set up the rate limit: %s.", gpulse_strerror(rc));
			goto out;
		}
	}
	if (cfg->nbasic_users > 0) {
		rc = http_basic_new(&s->basic, cfg->basic_users, cfg->nbasic_users);
		if (rc) {
			str_errf(err, errlen, rc == GPULSE_EINVAL
				 ? "Bad HTTP Basic users: each needs a name without ':' and a bcrypt hash."
				 : "Cannot set up HTTP Basic authentication: %s.", gpulse_strerror(rc));
			goto out;
		}
	}
	/* A name is not loopback by its name (http_is_loopback_listen): on
	 * one, writes need the token even when it resolves to loopback. */
	s->writes_open = !s->write_token && http_is_loopback_listen(cfg->listen);

	if (tls) {
		if (!cfg->tls_cert_file || !cfg->tls_key_file) {
			str_errf(err, errlen, "TLS needs both a certificate file and a key file.");
			rc = GPULSE_EINVAL;
			goto out;
		}
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			str_errf(err, errlen, "This libmicrohttpd was built without TLS support.");
			rc = GPULSE_ENOTSUP;
			goto out;
		}
		rc = read_pem("certificate", cfg->tls_cert_file, &s->tls_cert, err, errlen);
		if (!rc)
			rc = read_pem("key", cfg->tls_key_file, &s->tls_key, err, errlen);
		if (!rc && cfg->tls_client_ca_file)
			rc = read_pem("client CA", cfg->tls_client_ca_file, &s->tls_ca, err, errlen);
		if (rc)
			goto out;
	}

	rc = make_canned(s, cfg->write_hint);
	if (!rc)
		rc = guard_start(&s->guard, &gc);
	if (rc) {
		str_errf(err, errlen, rc == GPULSE_ENOMEM ? "Out of memory starting the HTTP server."
							  : "Cannot start the HTTP server's thread.");
		goto out;
	}
	/* Silent connections wait in the kernel about as long as a head may
	 * take once accepted (the kernel rounds up to its SYN-ACK
	 * retransmission schedule: 1, 3, 7, 15 s...). */
	rc = open_listener(cfg->listen, host, port, res, (int)((head_ms + 999) / 1000),
			   &s->listen_fd, &v6, err, errlen);
	if (rc)
		goto out;

	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
			 MHD_ALLOW_SUSPEND_RESUME;
	if (v6)
		flags |= MHD_USE_IPv6;
	if (tls)
		flags |= MHD_USE_TLS;
	s->tls = tls;
	struct MHD_OptionItem opts[16];
	int no = 0;
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, s};
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, s->listen_fd, NULL};
	/* No MHD_OPTION_PER_IP_CONNECTION_LIMIT: the guard caps addresses,
	 * by /64 for IPv6, and makes room by closing a waiting connection
	 * where MHD would refuse the newcomer. */
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)gc.slots, NULL};
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
					     (intptr_t)on_connection, s};
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed,
					     s};
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)timeout, NULL};
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, NULL};
	/* Room for a request head with the longest target we take (MHD's
	 * default, 32 KiB, would answer a Grafana dashboard's long query
	 * itself before on_uri could). */
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
					     (intptr_t)HTTP_CONN_MEMORY_BYTES, NULL};
	if (threads > 1)
		opts[no++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads,
						     NULL};
	if (tls) {
		opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert};
		opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key};
		if (s->tls_ca)
			opts[no++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->tls_ca};
	}
	opts[no++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
				  MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (!s->mhd) {
		str_errf(err, errlen, "Cannot start the HTTP server on %s (libmicrohttpd refused; "
			"see the log above).", cfg->listen);
		rc = GPULSE_EIO;
		goto out;
	}
	s->listen_fd = -1; /* MHD owns it now */
	/* bcrypt runs here, never on an HTTP thread: two threads at nice 10
	 * (each about ten verifications a second at cost 10), 32 waiting. */
	if (s->basic && http_pool_new(s, "gpulse-auth", HTTP_AUTH_THREADS, HTTP_AUTH_QUEUED, 10,
				      &s->auth_pool) != 0) {
		str_errf(err, errlen, "Cannot start the HTTP server's authentication threads.");
		rc = GPULSE_EIO;
		goto out;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd,
								MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	atomic_store(&s->started, true);
	*out = s;
	s = NULL;
	rc = GPULSE_OK;
out:
	if (res)
		freeaddrinfo(res);
	if (s && s->listen_fd >= 0)
		close(s->listen_fd);
	http_server_stop(s);
	return rc;
}

static int add_route(struct http_server *s, const char *path, http_handler_fn *fn, void *ctx,
		     bool reserved, struct http_pool *pool, http_handler_fn *busy)
{
	int n = atomic_load(&s->nroutes);
	size_t len = strlen(path);
	if (n >= HTTP_MAX_ROUTES || len == 0 || len >= HTTP_MAX_ROUTE_PATH || !fn)
		return n >= HTTP_MAX_ROUTES ? GPULSE_ELIMIT : GPULSE_EINVAL;
	struct route *r = &s->routes[n];
	memcpy(r->path, path, len + 1);
	r->len = len;
	r->prefix = path[len - 1] == '/';
	r->reserved = reserved;
	r->fn = fn;
	r->ctx = ctx;
	r->pool = pool;
	r->busy = busy;
	atomic_store_explicit(&s->nroutes, n + 1, memory_order_release);
	return GPULSE_OK;
}

int http_response_header(struct http_response *resp, const char *name, const char *value)
{
	if (resp->nheaders >= HTTP_MAX_RESP_HEADERS)
		return GPULSE_ELIMIT;
	resp->headers[resp->nheaders].name = name;
	resp->headers[resp->nheaders].value = value;
	resp->nheaders++;
	return GPULSE_OK;
}

int http_api_error(struct http_response *resp, int status, const char *type, const char *msg)
{
	buf_reset(&resp->body);
	resp->status = status;
	resp->content_type = "application/json";
	return promjson_put_error(&resp->body, type, msg);
}

int http_path_public(struct http_server *s, const char *path)
{
	int n = atomic_load(&s->npublic);
	size_t len = strlen(path);
	if (len == 0 || len >= HTTP_MAX_ROUTE_PATH || path[0] != '/')
		return GPULSE_EINVAL;
	if (n >= HTTP_MAX_PUBLIC)
		return GPULSE_ELIMIT;
	int nr = atomic_load_explicit(&s->nroutes, memory_order_acquire);
	for (int i = 0; i < nr; i++)
		if (atomic_load(&s->routes[i].writes) && strcmp(s->routes[i].path, path) == 0)
			return GPULSE_EINVAL;
	memcpy(s->public_paths[n], path, len + 1);
	atomic_store_explicit(&s->npublic, n + 1, memory_order_release);
	return GPULSE_OK;
}

int http_route_writes(struct http_server *s, const char *path)
{
	if (is_public(s, path))
		return GPULSE_EINVAL;
	int n = atomic_load_explicit(&s->nroutes, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(s->routes[i].path, path) == 0) {
			atomic_store(&s->routes[i].writes, true);
			return GPULSE_OK;
		}
	return GPULSE_ENOENT;
}

int http_route_known(struct http_server *s, const char *path, http_known_fn *known)
{
	int n = atomic_load_explicit(&s->nroutes, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(s->routes[i].path, path) == 0) {
			if (!s->routes[i].prefix || !known)
				return GPULSE_EINVAL;
			atomic_store(&s->routes[i].known, known);
			return GPULSE_OK;
		}
	return GPULSE_ENOENT;
}

int http_route_form(struct http_server *s, const char *path)
{
	int n = atomic_load_explicit(&s->nroutes, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (strcmp(s->routes[i].path, path) == 0) {
			atomic_store(&s->routes[i].form, true);
			return GPULSE_OK;
		}
	return GPULSE_ENOENT;
}

int http_route(struct http_server *s, const char *path, http_handler_fn *fn, void *ctx)
{
	return add_route(s, path, fn, ctx, false, NULL, NULL);
}

int http_route_reserved(struct http_server *s, const char *path, http_handler_fn *fn,
			void *ctx)
{
	return add_route(s, path, fn, ctx, true, NULL, NULL);
}

int http_server_port(const struct http_server *s)
{
	return s ? s->port : 0;
}

void http_server_counters(const struct http_server *s, uint64_t *requests,
			  uint64_t *rejected)
{
	if (requests)
		*requests = s ? atomic_load_explicit(&s->requests, memory_order_relaxed) : 0;
	if (rejected)
		*rejected = s ? atomic_load_explicit(&s->rejected, memory_order_relaxed) : 0;
}

uint64_t http_server_shed(const struct http_server *s, enum http_shed why)
{
	return s ? guard_shed(s->guard, why) : 0;
}

void http_server_stop(struct http_server *s)
{
	if (!s)
		return;
	pools_stop(s);  /* every suspended connection resumed, no handler running */
	if (s->mhd)
		MHD_stop_daemon(s->mhd); /* closes every connection: guard_close */
	guard_stop(s->guard);
	for (int i = 0; i < R_COUNT; i++)
		if (s->canned[i])
			MHD_destroy_response(s->canned[i]);
	free(s->token);
	free(s->write_token);
	http_basic_free(s->basic);
	http_limit_free(s->rate);
	free(s->tls_cert);
	free(s->tls_ca);
	if (s->tls_key) {
		/* The private key should not linger in freed memory. */
		explicit_bzero(s->tls_key, strlen(s->tls_key));
		free(s->tls_key);
	}
	free(s);
}

/* ---- handlers on pools ------------------------------------------------- */

/* A request handed to a pool. It is the request's MHD context (*req_cls)
 * from the suspend until its answer is queued; the pool thread never
 * touches it after resuming the connection. */
struct http_job {
	struct http_job *next;       /* the pool's queue */
	struct http_pool *pool;
	const struct route *route;
	struct MHD_Connection *conn;
	int fd;                      /* the connection's socket, for poll(2) */
	struct http_request req;
	struct http_response resp;
	int rc;                      /* the handler's return */
	bool dropped;                /* not run: the client left while queued */
	bool auth;                   /* a Basic verification, not a handler */
	bool auth_ok;                /* its verdict */
	struct sockaddr_storage peer; /* whose failure it is */
	char user[HTTP_BASIC_MAX_NAME + 1];
	char pass[HTTP_BASIC_MAX_PASSWORD + 1];
};

struct http_pool {
	struct http_server *s;
	char name[16];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct http_job *head, *tail; /* waiting, oldest first */
	unsigned nthreads, max_queued;
	int nice;
	unsigned nqueued, nrunning;
	atomic_bool stop;
	uint64_t started_total, rejected_total, gone_total;
	pthread_t threads[];
};

static struct http_job *job_of(void *req_cls)
{
	if (!req_cls || req_cls == &uri_ok_marker || req_cls == &uri_too_long_marker ||
	    req_cls == &uri_no_memory_marker ||
	    req_cls == &headers_seen_marker || req_cls == &deferred_answered_marker)
		return NULL;
	return req_cls;
}

static void job_free(struct http_job *job)
{
	if (!job)
		return;
	buf_free(&job->resp.body);
	http_blob_unref(job->resp.blob);
	explicit_bzero(job->pass, sizeof job->pass);
	free(job);
}

static bool job_is_auth(const struct http_job *job)
{
	return job->auth;
}

bool http_request_gone(const struct http_request *req)
{
	const struct http_job *job = req ? req->job : NULL;
	if (!job)
		return false;
	if (atomic_load_explicit(&job->pool->stop, memory_order_relaxed))
		return true;
	/* The request was read whole and nothing more is read while the
	 * connection is suspended, so a hang-up is the peer's FIN or reset
	 * (a pipelined request is POLLIN only, and not a hang-up). */
	struct pollfd pfd = {.fd = job->fd, .events = POLLRDHUP};
	return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void *pool_main(void *arg)
{
	struct http_pool *p = arg;
	/* On Linux a thread's nice value is its own: PRIO_PROCESS with a
	 * thread id. Lowering one's priority needs no privilege. */
	if (p->nice && setpriority(PRIO_PROCESS, (id_t)gettid(), p->nice) != 0)
		log_debug("http: %s: setpriority: %s", p->name, strerror(errno));
	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->head && !atomic_load(&p->stop))
			pthread_cond_wait(&p->cond, &p->lock);
		struct http_job *job = p->head;
		if (!job)
			break; /* stopping, and nothing left */
		p->head = job->next;
		if (!p->head)
			p->tail = NULL;
		p->nqueued--;
		p->nrunning++;
		bool gone = http_request_gone(&job->req);
		if (gone)
			p->gone_total++;
		else
			p->started_total++;
		pthread_mutex_unlock(&p->lock);
		if (gone)
			job->dropped = true;
		else if (job->auth)
			job->auth_ok = http_basic_verify(p->s->basic, job->user, job->pass);
		else
			job->rc = job->route->fn(job->route->ctx, &job->req, &job->resp);
		/* From here the connection's HTTP thread owns the job. */
		MHD_resume_connection(job->conn);
		pthread_mutex_lock(&p->lock);
		p->nrunning--;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int http_pool_new(struct http_server *s, const char *name, unsigned threads,
		  unsigned max_queued, int nice, struct http_pool **out)
{
	if (threads == 0)
		return GPULSE_EINVAL;
	if (s->npools == HTTP_MAX_POOLS)
		return GPULSE_ELIMIT;
	struct http_pool *p = calloc(1, sizeof *p + threads * sizeof p->threads[0]);
	if (!p)
		return GPULSE_ENOMEM;
	p->s = s;
	str_copy(p->name, sizeof p->name, name);
	p->max_queued = max_queued;
	p->nice = nice < 0 ? 0 : nice > 19 ? 19 : nice;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	for (unsigned i = 0; i < threads; i++) {
		if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0) {
			s->pools[s->npools++] = p; /* pools_stop joins those started */
			return GPULSE_EIO;
		}
		pthread_setname_np(p->threads[i], p->name);
		p->nthreads++;
	}
	s->pools[s->npools++] = p;
	*out = p;
	return GPULSE_OK;
}

int http_route_deferred(struct http_server *s, const char *path, http_handler_fn *fn,
			http_handler_fn *busy, void *ctx, struct http_pool *pool)
{
	if (!pool || !busy)
		return GPULSE_EINVAL;
	return add_route(s, path, fn, ctx, false, pool, busy);
}

void http_pool_stats(struct http_pool *p, struct http_pool_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	out->running = p->nrunning;
	out->queued = p->nqueued;
	out->started_total = p->started_total;
	out->rejected_total = p->rejected_total;
	out->gone_total = p->gone_total;
	pthread_mutex_unlock(&p->lock);
}

/* Queue a job on its pool (whose lock the caller holds; let go here),
 * the connection suspended before any pool thread can see the job, so
 * its resume always follows the suspend. */
static enum MHD_Result pool_enqueue(struct http_server *s, struct http_pool *p,
				    struct MHD_Connection *conn, struct http_job *job, void **req_cls)
{
	*req_cls = job;
	atomic_fetch_add(&s->deferred_live, 1);
	MHD_suspend_connection(conn);
	if (p->tail)
		p->tail->next = job;
	else
		p->head = job;
	p->tail = job;
	p->nqueued++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return MHD_YES;
}

/* On the HTTP thread: queue the request on its route's pool and suspend
 * the connection, or let `busy` answer now when the pool has no room. */
static enum MHD_Result deferred_start(struct http_server *s, const struct route *r,
				      struct MHD_Connection *conn, const char *url,
				      const char *method, void **req_cls)
{
	struct http_pool *p = r->pool;
	struct http_job *job = calloc(1, sizeof *job);
	if (!job)
		return send_canned(s, conn, R_500, false);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	job->pool = p;
	job->route = r;
	job->conn = conn;
	job->fd = ci ? ci->connect_fd : -1;
	job->req = (struct http_request){.method = method, .path = url, .conn = conn,
					 .received_ns = clock_mono_ns(), .job = job};
	job->resp = (struct http_response){.status = MHD_HTTP_OK};
	buf_init(&job->resp.body, s->max_body);

	pthread_mutex_lock(&p->lock);
	bool room = !atomic_load(&p->stop) && job->fd >= 0 &&
		    p->nqueued + p->nrunning < p->nthreads + p->max_queued;
	if (!room) {
		p->rejected_total++;
		pthread_mutex_unlock(&p->lock);
		job->req.job = NULL; /* busy runs as a plain handler */
		int rc = r->busy(r->ctx, &job->req, &job->resp);
		struct http_response resp = job->resp;
		free(job);
		return send_response(s, conn, rc, &resp);
	}
	return pool_enqueue(s, p, conn, job, req_cls);
}

/* On the HTTP thread, once the pool resumed the connection: send the
 * handler's answer, or close when the client had gone. */
static enum MHD_Result deferred_answer(struct http_server *s, struct MHD_Connection *conn,
				       struct http_job *job, void **req_cls)
{
	*req_cls = &deferred_answered_marker;
	if (job->dropped) {
		job_free(job);
		return MHD_NO;
	}
	struct http_response resp = job->resp;
	int rc = job->rc;
	free(job);
	return send_response(s, conn, rc, &resp);
}

/* A request is over (answered, refused or abandoned): the connection, if
 * it stays, waits for its next head under a new deadline (the guard). A
 * connection that closed while its job was attached (an error after the
 * resume, or the server stopping): the job is the request's to free. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
			 enum MHD_RequestTerminationCode why)
{
	struct http_server *s = cls;
	(void)why;
	guard_done(s->guard, conn_guard(conn));
	struct conn_ctx *c = conn_ctx(conn);
	if (c) {
		/* The request's values pointed into these: it is done. */
		buf_free(&c->form);
		buf_init(&c->form, HTTP_MAX_FORM_BYTES);
		buf_free(&c->query);
		c->nquery = 0;
		c->query_nul = NULL;
		c->in_form = c->form_type = c->parsed = false;
		c->body_bytes = 0;
	}
	if (!req_cls || !*req_cls)
		return;
	struct http_job *job = job_of(*req_cls);
	if (job || *req_cls == &deferred_answered_marker)
		atomic_fetch_sub(&s->deferred_live, 1);
	if (job)
		job_free(job);
	*req_cls = NULL;
}

/* Stop every pool: a queued request is dropped, a running handler sees
 * http_request_gone and should return soon; each thread resumes its
 * connections and is joined, so MHD_stop_daemon then finds nothing in a
 * pool's hands. The answers just resumed (a capture's "gpulsed is
 * stopping") get up to 2 s to be sent first. */
static void pools_stop(struct http_server *s)
{
	for (int i = 0; i < s->npools; i++) {
		struct http_pool *p = s->pools[i];
		pthread_mutex_lock(&p->lock);
		atomic_store(&p->stop, true);
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
	for (int i = 0; i < s->npools; i++) {
		struct http_pool *p = s->pools[i];
		for (unsigned k = 0; k < p->nthreads; k++)
			pthread_join(p->threads[k], NULL);
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
		free(p);
	}
	s->npools = 0;
	for (int i = 0; i < 400 && atomic_load(&s->deferred_live) > 0; i++)
		usleep(5000);
}

/* ---- Basic verification on the auth pool --------------------------------- */

/* On the HTTP thread: a Basic pair not verified before goes to the auth
 * pool with the connection suspended; a full pool answers 503. */
static enum MHD_Result basic_start(struct http_server *s, struct MHD_Connection *conn,
				   const char *url, const char *method, const char *user,
				   const char *pass, void **req_cls)
{
	struct http_pool *p = s->auth_pool;
	if (strlen(user) > HTTP_BASIC_MAX_NAME || strlen(pass) > HTTP_BASIC_MAX_PASSWORD) {
		/* Never verifies: no bcrypt spent on it; its try is spent. */
		return send_canned(s, conn, R_401, true);
	}
	struct http_job *job = calloc(1, sizeof *job);
	if (!job)
		return send_canned(s, conn, R_500, false);
	const union MHD_ConnectionInfo *fd =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	job->pool = p;
	job->conn = conn;
	job->fd = fd ? fd->connect_fd : -1;
	job->auth = true;
	if (ci && ci->client_addr) {
		size_t len = ci->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
								     : sizeof(struct sockaddr_in);
		memcpy(&job->peer, ci->client_addr, len);
	}
	memcpy(job->user, user, strlen(user) + 1);
	memcpy(job->pass, pass, strlen(pass) + 1);
	job->req = (struct http_request){.method = method, .path = url, .conn = conn,
					 .received_ns = clock_mono_ns(), .job = job};
	buf_init(&job->resp.body, 0);

	pthread_mutex_lock(&p->lock);
	bool room = !atomic_load(&p->stop) && job->fd >= 0 &&
		    p->nqueued + p->nrunning < p->nthreads + p->max_queued;
	if (!room) {
		p->rejected_total++;
		pthread_mutex_unlock(&p->lock);
		/* Not the client's failure: its try back. */
		http_basic_refund(s->basic, (const struct sockaddr *)&job->peer, clock_mono_ns());
		job_free(job);
		return send_canned(s, conn, R_503, true);
	}
	return pool_enqueue(s, p, conn, job, req_cls);
}

/* On the HTTP thread, once the auth pool resumed the connection: the
 * verdict in *ok (a success gives its address's try back), the job
 * freed and the request back to "headers seen", so that routing goes on
 * as for any authorized request. False when the client had left. */
static bool basic_resumed(struct http_server *s, struct http_job *job, void **req_cls,
			  bool *ok)
{
	*req_cls = &headers_seen_marker;
	atomic_fetch_sub(&s->deferred_live, 1);
	bool dropped = job->dropped;
	*ok = job->auth_ok;
	if (!dropped && *ok)
		http_basic_refund(s->basic, (const struct sockaddr *)&job->peer, clock_mono_ns());
	job_free(job);
	return !dropped;
}
