/* Token buckets per client address; see http_limit.h. A linear scan of a
 * fixed table under one mutex: at a few hundred to a few thousand
 * addresses it costs about what the accept it guards does, and needs no
 * allocation while serving. */
#include "http/http_limit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_guard.h"
#include "common/status.h"

struct bucket {
	bool used;
	unsigned char key[GUARD_KEY_LEN];
	double tokens;               /* as of at_ns */
	int64_t at_ns;
};

struct http_limit {
	pthread_mutex_t lock;
	double rate_per_ns, burst;
	unsigned retry_s;
	size_t n;
	struct bucket b[];
};

int http_limit_new(struct http_limit **out, double rate_per_s, double burst, size_t addresses)
{
	*out = NULL;
	if (!(rate_per_s > 0) || !(burst >= 1) || addresses == 0)
		return GPULSE_EINVAL;
	struct http_limit *l = calloc(1, sizeof *l + addresses * sizeof l->b[0]);
	if (!l)
		return GPULSE_ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	l->rate_per_ns = rate_per_s / 1e9;
	l->burst = burst;
	double wait_s = 1.0 / rate_per_s;
	l->retry_s = (unsigned)wait_s + ((double)(unsigned)wait_s < wait_s);
	if (l->retry_s == 0)
		l->retry_s = 1;
	l->n = addresses;
	*out = l;
	return GPULSE_OK;
}

void http_limit_free(struct http_limit *l)
{
	if (!l)
		return;
	pthread_mutex_destroy(&l->lock);
	free(l);
}

unsigned http_limit_retry_s(const struct http_limit *l)
{
	return l ? l->retry_s : 0;
}

static double tokens_at(const struct http_limit *l, const struct bucket *k, int64_t now)
{
	double t = k->tokens + (double)(now - k->at_ns) * l->rate_per_ns;
	return t > l->burst ? l->burst : t < k->tokens ? k->tokens : t;
}

/* The address's bucket brought up to now; a new, full one when absent.
 * Under the lock. */
static struct bucket *bucket_of(struct http_limit *l, const struct sockaddr *peer, int64_t now)
{
	unsigned char key[GUARD_KEY_LEN];
	guard_peer_key(peer, key);
	struct bucket *free_slot = NULL, *fullest = NULL;
	double fullest_tokens = -1;
	for (size_t i = 0; i < l->n; i++) {
		struct bucket *k = &l->b[i];
		if (!k->used) {
			if (!free_slot)
				free_slot = k;
			continue;
		}
		double t = tokens_at(l, k, now);
		if (memcmp(k->key, key, GUARD_KEY_LEN) == 0) {
			k->tokens = t;
			if (now > k->at_ns)
				k->at_ns = now;
			return k;
		}
		if (t > fullest_tokens) {
			fullest = k;
			fullest_tokens = t;
		}
	}
	struct bucket *k = free_slot ? free_slot : fullest;
	k->used = true;
	memcpy(k->key, key, GUARD_KEY_LEN);
	k->tokens = l->burst;
	k->at_ns = now;
	return k;
}

static bool check(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns,
		  unsigned *retry_s, bool take)
{
	pthread_mutex_lock(&l->lock);
	struct bucket *k = bucket_of(l, peer, now_ns);
	bool ok = k->tokens >= 1.0;
	if (ok && take)
		k->tokens -= 1.0;
	if (!ok && retry_s) {
		double wait_s = (1.0 - k->tokens) / (l->rate_per_ns * 1e9);
		unsigned w = (unsigned)wait_s;
		*retry_s = w + ((double)w < wait_s);
	}
	pthread_mutex_unlock(&l->lock);
	return ok;
}

bool http_limit_take(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns,
		     unsigned *retry_s)
{
	return check(l, peer, now_ns, retry_s, true);
}

void http_limit_give(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns)
{
	pthread_mutex_lock(&l->lock);
	struct bucket *k = bucket_of(l, peer, now_ns);
	k->tokens = k->tokens + 1.0 > l->burst ? l->burst : k->tokens + 1.0;
	pthread_mutex_unlock(&l->lock);
}

bool http_limit_peek(struct http_limit *l, const struct sockaddr *peer, int64_t now_ns,
		     unsigned *retry_s)
{
	return check(l, peer, now_ns, retry_s, false);
}
