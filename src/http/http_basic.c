/* Basic authentication with bcrypt hashes; see http_basic.h. bcrypt is
 * libxcrypt's (crypt_rn: $2a$, $2b$, $2y$), never ours; the cache's
 * digests are GnuTLS's HMAC-SHA256 under a key drawn at start, so what is
 * kept of a password that verified is useless outside this process and
 * cannot be tested against offline faster than bcrypt would allow. */
#include "http/http_basic.h"

#include <crypt.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_limit.h"
#include "common/status.h"

#define DIGEST_LEN 32
#define BCRYPT_LEN 60

struct user {
	char name[HTTP_BASIC_MAX_NAME + 1];
	char hash[BCRYPT_LEN + 1];
};

struct cached {
	bool used;
	unsigned char digest[DIGEST_LEN];
};

struct http_basic {
	struct user users[HTTP_BASIC_MAX_USERS];
	size_t nusers;
	char dummy[BCRYPT_LEN + 1];  /* for unknown users, the first user's cost */
	unsigned char key[DIGEST_LEN];
	pthread_mutex_t lock;        /* cache, buckets, counters */
	struct cached cache[HTTP_BASIC_CACHE];
	unsigned next;               /* the cache's slot to overwrite next */
	struct http_limit *fails;    /* failures per address */
	uint64_t verified, failed;
};

static bool b64_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '/';
}

bool http_basic_hash_ok(const char *h)
{
	if (!h || strlen(h) != BCRYPT_LEN || h[0] != '$' || h[1] != '2' ||
	    (h[2] != 'a' && h[2] != 'b' && h[2] != 'y') || h[3] != '$' || h[6] != '$')
		return false;
	if (h[4] < '0' || h[4] > '3' || h[5] < '0' || h[5] > '9')
		return false;
	int cost = (h[4] - '0') * 10 + (h[5] - '0');
	if (cost < 4 || cost > 31)
		return false;
	for (int i = 7; i < BCRYPT_LEN; i++)
		if (!b64_char(h[i]))
			return false;
	return true;
}

bool http_basic_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (n == 0 || n > HTTP_BASIC_MAX_NAME)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] == ':' || (unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return false;
	return true;
}

int http_basic_new(struct http_basic **out, const struct http_basic_user *users, size_t n)
{
	*out = NULL;
	if (n == 0 || n > HTTP_BASIC_MAX_USERS)
		return GPULSE_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!http_basic_name_ok(users[i].name) || !http_basic_hash_ok(users[i].hash))
			return GPULSE_EINVAL;
		for (size_t j = 0; j < i; j++)
			if (strcmp(users[i].name, users[j].name) == 0)
				return GPULSE_EINVAL;
	}
	struct http_basic *b = calloc(1, sizeof *b);
	if (!b)
		return GPULSE_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		memcpy(b->users[i].name, users[i].name, strlen(users[i].name) + 1);
		memcpy(b->users[i].hash, users[i].hash, BCRYPT_LEN + 1);
	}
	b->nusers = n;
	/* A dummy of the first user's variant and cost: "$2b$10$" and a
	 * fixed salt; verifying against it costs what a real user's does. */
	memcpy(b->dummy, users[0].hash, 7);
	memcpy(b->dummy + 7, "gpulsedummysaltgpulse.gpulsedummyhashgpulsedummyhash0", BCRYPT_LEN - 7);
	b->dummy[BCRYPT_LEN] = '\0';
	int rc = http_limit_new(&b->fails, 1e9 / (double)HTTP_BASIC_FAIL_PERIOD_NS,
				HTTP_BASIC_FAIL_BURST, HTTP_BASIC_ADDRESSES);
	if (!rc && gnutls_rnd(GNUTLS_RND_KEY, b->key, sizeof b->key) != 0)
		rc = GPULSE_EIO;
	if (rc) {
		http_limit_free(b->fails);
		free(b);
		return rc;
	}
	pthread_mutex_init(&b->lock, NULL);
	*out = b;
	return GPULSE_OK;
}

void http_basic_free(struct http_basic *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	http_limit_free(b->fails);
	explicit_bzero(b, sizeof *b);
	free(b);
}

/* HMAC-SHA256(key, user NUL password): the NUL keeps "ab"+"c" apart from
 * "a"+"bc" (a user name holds none). */
static bool digest_of(const struct http_basic *b, const char *user, const char *pass,
		      unsigned char out[DIGEST_LEN])
{
	size_t un = strlen(user), pn = strnlen(pass, HTTP_BASIC_MAX_PASSWORD + 1);
	if (un > HTTP_BASIC_MAX_NAME || pn > HTTP_BASIC_MAX_PASSWORD)
		return false;
	unsigned char msg[HTTP_BASIC_MAX_NAME + 1 + HTTP_BASIC_MAX_PASSWORD];
	memcpy(msg, user, un);
	msg[un] = '\0';
	memcpy(msg + un + 1, pass, pn);
	int rc = gnutls_hmac_fast(GNUTLS_MAC_SHA256, b->key, sizeof b->key, msg, un + 1 + pn, out);
	explicit_bzero(msg, sizeof msg);
	return rc == 0;
}

bool http_basic_cached(struct http_basic *b, const char *user, const char *pass)
{
	unsigned char d[DIGEST_LEN];
	if (!b || !user || !pass || !digest_of(b, user, pass, d))
		return false;
	unsigned hit = 0;
	pthread_mutex_lock(&b->lock);
	/* Every slot, every byte: the time says nothing of a near miss. */
	for (size_t i = 0; i < HTTP_BASIC_CACHE; i++) {
		unsigned diff = 0;
		for (size_t k = 0; k < DIGEST_LEN; k++)
			diff |= (unsigned)(b->cache[i].digest[k] ^ d[k]);
		hit |= (unsigned)b->cache[i].used & (unsigned)(diff == 0);
	}
	pthread_mutex_unlock(&b->lock);
	explicit_bzero(d, sizeof d);
	return hit != 0;
}

static bool names_equal(const char *a, const char *b)
{
	size_t an = strlen(a), bn = strnlen(b, HTTP_BASIC_MAX_NAME + 1);
	unsigned diff = (unsigned)(an != bn);
	for (size_t i = 0; i < an; i++)
		diff |= (unsigned char)a[i] ^ (unsigned char)(i < bn ? b[i] : 0);
	return diff == 0;
}

bool http_basic_verify(struct http_basic *b, const char *user, const char *pass)
{
	if (!b || !user || !pass)
		return false;
	const char *hash = b->dummy;
	bool known = false;
	for (size_t i = 0; i < b->nusers; i++)
		if (names_equal(b->users[i].name, user)) {
			hash = b->users[i].hash;
			known = true;
		}
	bool ok = false;
	/* crypt_rn's scratch is about 32 KiB: not for a thread's stack. */
	struct crypt_data *cd = calloc(1, sizeof *cd);
	if (cd && strnlen(pass, HTTP_BASIC_MAX_PASSWORD + 1) <= HTTP_BASIC_MAX_PASSWORD) {
		const char *r = crypt_rn(pass, hash, cd, (int)sizeof *cd);
		if (r && r[0] != '*' && strlen(r) == BCRYPT_LEN) {
			unsigned diff = 0;
			for (size_t k = 0; k < BCRYPT_LEN; k++)
				diff |= (unsigned char)r[k] ^ (unsigned char)hash[k];
			ok = known && diff == 0;
		}
	}
	if (cd) {
		explicit_bzero(cd, sizeof *cd);
		free(cd);
	}
	unsigned char d[DIGEST_LEN];
	bool have_digest = ok && digest_of(b, user, pass, d);
	pthread_mutex_lock(&b->lock);
	b->verified++;
	if (!ok)
		b->failed++;
	if (have_digest) {
		struct cached *c = &b->cache[b->next];
		b->next = (b->next + 1) % HTTP_BASIC_CACHE;
		c->used = true;
		memcpy(c->digest, d, DIGEST_LEN);
	}
	pthread_mutex_unlock(&b->lock);
	explicit_bzero(d, sizeof d);
	return ok;
}

bool http_basic_try(struct http_basic *b, const struct sockaddr *peer, int64_t now_ns,
		    unsigned *retry_s)
{
	bool ok = http_limit_take(b->fails, peer, now_ns, retry_s);
	if (!ok) {
		pthread_mutex_lock(&b->lock);
		b->failed++;
		pthread_mutex_unlock(&b->lock);
	}
	return ok;
}

void http_basic_refund(struct http_basic *b, const struct sockaddr *peer, int64_t now_ns)
{
	http_limit_give(b->fails, peer, now_ns);
}

void http_basic_stats(struct http_basic *b, uint64_t *verified, uint64_t *failed)
{
	uint64_t v = 0, f = 0;
	if (b) {
		pthread_mutex_lock(&b->lock);
		v = b->verified;
		f = b->failed;
		pthread_mutex_unlock(&b->lock);
	}
	if (verified)
		*verified = v;
	if (failed)
		*failed = f;
}
