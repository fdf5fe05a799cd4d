/* The scrape endpoints; see metrics.h. */
#include "api/metrics.h"

#include "common/clock.h"
#include "common/status.h"
#include "export/prom.h"
#include "export/status_json.h"

void api_metrics_init(struct api_metrics *m, size_t max_bytes)
{
	for (int i = 0; i < 2; i++) {
		pthread_mutex_init(&m->cache[i].lock, NULL);
		buf_init(&m->cache[i].scratch, max_bytes);
	}
}

void api_metrics_destroy(struct api_metrics *m)
{
	for (int i = 0; i < 2; i++) {
		buf_free(&m->cache[i].scratch);
		http_blob_unref(m->cache[i].blob);
		pthread_mutex_destroy(&m->cache[i].lock);
	}
}

/* Render into mc unless its last rendering is recent enough; mc->lock
 * held. */
static int refresh(struct api_metrics *m, struct api_metrics_cache *mc, bool om)
{
	int64_t now = clock_mono_ns();
	if (mc->blob && now - mc->rendered_ns < API_METRICS_CACHE_NS)
		return 0;
	buf_reset(&mc->scratch);
	int rc = m->render(m->render_ctx, &mc->scratch, om);
	struct http_blob *b = rc ? NULL : http_blob_new(mc->scratch.data, mc->scratch.len);
	if (!rc && !b)
		rc = GPULSE_ENOMEM;
	if (b) {
		http_blob_unref(mc->blob);
		mc->blob = b;
		mc->rendered_ns = now;
	}
	return rc;
}

static int handle_metrics(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_metrics *m = ctx;
	bool om = prom_wants_openmetrics(http_request_header(req, "Accept"));
	struct api_metrics_cache *mc = &m->cache[om];
	resp->content_type = om ? PROM_CONTENT_TYPE_OPENMETRICS : PROM_CONTENT_TYPE_TEXT;
	atomic_fetch_add(m->scrapes_total, 1);
	pthread_mutex_lock(&mc->lock);
	int rc = refresh(m, mc, om);
	if (!rc)
		resp->blob = http_blob_ref(mc->blob);
	pthread_mutex_unlock(&mc->lock);
	return rc;
}

/* What Prometheus negotiates when it scrapes, so the family names agree
 * (a counter's without _total). */
int api_metrics_text(void *ctx, struct buf *out)
{
	struct api_metrics *m = ctx;
	struct api_metrics_cache *mc = &m->cache[1];
	pthread_mutex_lock(&mc->lock);
	int rc = refresh(m, mc, true);
	/* The blob, not the scratch: a /metrics request may have rendered
	 * the blob and left the scratch holding it too, but only the blob is
	 * sure to be this cache's last good rendering. */
	if (!rc)
		rc = mc->blob ? buf_append(out, http_blob_data(mc->blob), http_blob_len(mc->blob))
			      : GPULSE_ENOENT;
	pthread_mutex_unlock(&mc->lock);
	return rc;
}

static int handle_gpus(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_metrics *m = ctx;
	(void)req;
	resp->content_type = "application/json";
	return status_json_render(&resp->body, m->bus, m->self);
}

static int handle_health(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return buf_puts(&resp->body, "ok\n");
}

int api_metrics_register(struct http_server *s, struct api_metrics *m)
{
	int rc = http_route_reserved(s, "/metrics", handle_metrics, m);
	if (!rc)
		rc = http_route(s, "/api/v1/gpus", handle_gpus, m);
	return rc ? rc : http_route_reserved(s, "/healthz", handle_health, m);
}
