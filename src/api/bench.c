/* The baseline benchmarks' endpoints; see bench.h. */
#include "api/bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

/* gpu=N below max: 1 with *gpu set, 0 absent, -1 after a 400. */
static int gpu_arg(const struct http_request *req, struct http_response *resp, int max, int *gpu)
{
	const char *s = http_request_arg(req, "gpu");
	if (!s)
		return 0;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < 0 || v >= max) {
		char msg[128];
		snprintf(msg, sizeof msg, "gpu: \"%.40s\" is not a GPU index (0-%d)", s, max - 1);
		http_api_error(resp, 400, "bad_data", msg);
		return -1;
	}
	*gpu = (int)v;
	return 1;
}

static int handle_start(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_bench *b = ctx;
	if (strcmp(req->method, "POST") != 0)
		return http_api_error(resp, 405, "bad_data",
				 "POST /api/v1/bench?gpu=N&mode=quick|full starts a benchmark; "
				 "GET /api/v1/bench/status shows it");
	if (!b->can_run)
		return http_api_error(resp, 503, "unavailable",
				 "this gpulsed replays a recording: there is no GPU to benchmark");
	int gpu = 0;
	if (gpu_arg(req, resp, b->max_gpus, &gpu) < 0)
		return 0;
	const char *mode = http_request_arg(req, "mode");
	if (!mode)
		mode = b->default_mode;
	if (strcmp(mode, "quick") != 0 && strcmp(mode, "full") != 0)
		return http_api_error(resp, 400, "bad_data", "mode: not quick or full");
	char msg[160];
	long long id = 0;
	if (b->start(b->ctx, gpu, mode, &id, msg, sizeof msg) != 0)
		return http_api_error(resp, 409, "busy", msg);
	resp->status = 202;
	resp->content_type = "application/json";
	return buf_printf(&resp->body,
			  "{\"status\":\"success\",\"data\":{\"id\":%lld,\"gpu\":%d,\"mode\":\"%s\","
			  "\"state\":\"starting\"}}\n", id, gpu, mode);
}

static int handle_status(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_bench *b = ctx;
	int gpu = -1;
	if (gpu_arg(req, resp, b->max_gpus, &gpu) < 0)
		return 0;
	resp->content_type = "application/json";
	return b->status(b->ctx, gpu, &resp->body);
}

static int handle_results(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_bench *b = ctx;
	int gpu = 0;
	if (gpu_arg(req, resp, b->max_gpus, &gpu) < 0)
		return 0;
	char msg[160] = "";
	int rc = b->results(b->ctx, gpu, http_request_arg(req, "uuid"), &resp->body, msg, sizeof msg);
	if (msg[0])
		return http_api_error(resp, 503, "unavailable", msg);
	resp->content_type = "application/json";
	return rc;
}

static int handle_off(void *ctx, const struct http_request *req, struct http_response *resp)
{
	(void)ctx;
	(void)req;
	return http_api_error(resp, 503, "unavailable", "benchmarks are not available in this gpulsed");
}

int api_bench_register(struct http_server *s, struct api_bench *b)
{
	int rc = http_route(s, "/api/v1/bench", b ? handle_start : handle_off, b);
	if (!rc)
		rc = http_route_writes(s, "/api/v1/bench");
	if (!rc)
		rc = http_route(s, "/api/v1/bench/status", b ? handle_status : handle_off, b);
	if (!rc)
		rc = http_route(s, "/api/v1/bench/results", b ? handle_results : handle_off, b);
	return rc;
}
