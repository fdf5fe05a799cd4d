/* The fleet's baseline results from a central Prometheus, for benchd's
 * comparison of a run with the same model's other cards (bench_fleet.h).
 * Apart from benchd.c because it is the one part of it that speaks HTTP
 * to another server, and benchd.c is long enough without it. */
#include "daemon/bench_fleet.h"

#include <stdio.h>
#include <stdlib.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/redact.h"

struct curl_sink {
	struct buf *b;
};

static size_t curl_write(char *p, size_t size, size_t n, void *ctx)
{
	struct curl_sink *s = ctx;
	return buf_append(s->b, p, size * n) == 0 ? size * n : 0;
}

json_t *bench_fleet_query(const char *base, const struct bench_result *r)
{
	if (!base[0])
		return NULL;
	CURL *c = curl_easy_init();
	if (!c)
		return NULL;
	char q[512];
	snprintf(q, sizeof q,
		 "gpulse_bench_value{model=\"%s\",uuid!=\"%s\"} and on(uuid) "
		 "(gpulse_bench_last_run_baseline == 1)", r->gpu.name, r->gpu.uuid);
	char *enc = curl_easy_escape(c, q, 0);
	struct buf url, body;
	buf_init(&url, 4096);
	buf_init(&body, 8u << 20);
	buf_printf(&url, "%s/api/v1/query?query=%s", base, enc ? enc : "");
	curl_free(enc);
	json_t *out = NULL;
	struct curl_sink sink = {&body};
	if (!url.failed) {
		curl_easy_setopt(c, CURLOPT_URL, url.data);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
		CURLcode cc = curl_easy_perform(c);
		long status = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		json_t *doc = cc == CURLE_OK && status == 200 ? json_loadb(body.data, body.len, 0, NULL) : NULL;
		json_t *res = json_object_get(json_object_get(doc, "data"), "result");
		if (json_is_array(res)) {
			out = json_object();
			size_t i;
			json_t *s;
			json_array_foreach(res, i, s) {
				json_t *m = json_object_get(s, "metric");
				const char *fig = json_string_value(json_object_get(m, "figure"));
				const char *var = json_string_value(json_object_get(m, "variant"));
				const char *meth = json_string_value(json_object_get(m, "method"));
				const char *val = json_string_value(json_array_get(json_object_get(s, "value"), 1));
				if (!fig || !val)
					continue;
				char key[96];
				snprintf(key, sizeof key, "%s/%s/%s", fig, var ? var : "",
					 meth && *meth ? meth : BENCH_METHOD_LEGACY);
				json_t *arr = json_object_get(out, key);
				if (!arr) {
					arr = json_array();
					json_object_set_new(out, key, arr);
				}
				if (json_array_size(arr) < BENCH_FLEET_MAX)
					json_array_append_new(arr, json_real(atof(val)));
			}
		} else {
			char shown[256];
			redact_url(shown, sizeof shown, base);
			log_warn("bench: the fleet's results from %s: %s", shown,
				 cc != CURLE_OK ? curl_easy_strerror(cc) : "no vector in the answer");
		}
		json_decref(doc);
	}
	buf_free(&url);
	buf_free(&body);
	curl_easy_cleanup(c);
	return out;
}
