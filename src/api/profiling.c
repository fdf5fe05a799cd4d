/* The profiling endpoints; see profiling.h. */
#include "api/profiling.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "profile/profile_agg.h"
#include "profile/profile_server.h"

/* An optional unsigned argument: 0 when absent (value untouched), 1 when
 * parsed, -1 after writing a 400. */
static int uint_arg(const struct http_request *req, struct http_response *resp, const char *name,
		    unsigned long lo, unsigned long hi, unsigned long *v)
{
	const char *s = http_request_arg(req, name);
	if (!s)
		return 0;
	char *end;
	unsigned long x = strtoul(s, &end, 10);
	if (!*s || *end || *s == '-' || *s == '+' || x < lo || x > hi) {
		char msg[160];
		snprintf(msg, sizeof msg, "%s: \"%.40s\" is not a whole number from %lu to %lu", name, s,
			 lo, hi);
		http_api_error(resp, 400, "bad_data", msg);
		return -1;
	}
	*v = x;
	return 1;
}

static void put_state(const struct api_profiling *p, struct buf *b)
{
	buf_printf(b, "\"profiling\":{\"enabled\":%s,\"serving\":%s,\"socket\":",
		   p->enabled ? "true" : "false", p->serving ? "true" : "false");
	buf_put_json_string(b, p->socket);
	if (!p->serving) {
		buf_puts(b, ",\"why_off\":");
		buf_put_json_string(b, p->why_off);
	}
	buf_putc(b, '}');
}

/* The answer's envelope opened, with the profiler's state first. */
static struct buf *open_answer(const struct api_profiling *p, struct http_response *resp)
{
	resp->content_type = "application/json";
	buf_puts(&resp->body, "{\"status\":\"success\",\"data\":{");
	put_state(p, &resp->body);
	return &resp->body;
}

static int handle_processes(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_profiling *p = ctx;
	(void)req;
	if (!p)
		return http_api_error(resp, 503, "unavailable", "profiling is not set up");
	struct buf *b = open_answer(p, resp);
	if (!p->agg)
		return buf_puts(b, ",\"processes\":[]}}\n");
	buf_putc(b, ',');
	int rc = profile_agg_processes_json(p->agg, b);
	return rc ? rc : buf_puts(b, "}}\n");
}

static int handle_kernels(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_profiling *p = ctx;
	if (!p)
		return http_api_error(resp, 503, "unavailable", "profiling is not set up");
	unsigned long pid = 0, gpu = 0, limit = 50, per_process = 0;
	int has_pid, has_gpu;
	if ((has_pid = uint_arg(req, resp, "pid", 1, UINT32_MAX, &pid)) < 0 ||
	    (has_gpu = uint_arg(req, resp, "gpu", 0, UINT32_MAX, &gpu)) < 0 ||
	    uint_arg(req, resp, "limit", 1, API_PROFILING_MAX_KERNEL_ROWS, &limit) < 0 ||
	    uint_arg(req, resp, "per_process", 1, API_PROFILING_MAX_KERNEL_ROWS, &per_process) < 0)
		return 0;
	struct buf *b = open_answer(p, resp);
	if (!p->agg)
		return buf_puts(b, ",\"kernels\":[],\"total\":0}}\n");
	buf_putc(b, ',');
	int rc = profile_agg_kernels_top_json(p->agg, b, has_pid ? (int64_t)pid : -1,
					      has_gpu ? (int64_t)gpu : -1, (unsigned)limit,
					      (unsigned)per_process);
	return rc ? rc : buf_puts(b, "}}\n");
}

static int handle_trace(void *ctx, const struct http_request *req, struct http_response *resp)
{
	struct api_profiling *p = ctx;
	if (!p || !p->serving)
		return http_api_error(resp, 503, "unavailable",
				 p ? p->why_off : "profiling is not set up");
	if (strcmp(req->method, "GET") != 0)
		return http_api_error(resp, 405, "bad_data", "a trace is started with GET only");
	unsigned long pid = 0, seconds = API_PROFILING_DEFAULT_TRACE_SECONDS;
	int has_pid;
	if ((has_pid = uint_arg(req, resp, "pid", 1, UINT32_MAX, &pid)) < 0 ||
	    uint_arg(req, resp, "seconds", 1, API_PROFILING_MAX_TRACE_SECONDS, &seconds) < 0)
		return 0;
	if (!has_pid)
		return http_api_error(resp, 400, "bad_data", "pid: required (the process to trace)");
	char err[256];
	resp->content_type = "application/json";
	int rc = p->capture(p->capture_ctx, (uint32_t)pid, (unsigned)seconds, &resp->body, err,
			    sizeof err);
	if (rc == GPULSE_ENOENT)
		return http_api_error(resp, 404, "not_found", err);
	if (rc == GPULSE_EBUSY)
		return http_api_error(resp, 409, "busy", err);
	if (rc == GPULSE_ESTATE || rc == GPULSE_EINVAL)
		return http_api_error(resp, 503, "unavailable", err);
	return rc;
}

/* Every capture thread busy: answered at once, on the HTTP thread. */
static int handle_trace_busy(void *ctx, const struct http_request *req,
			     struct http_response *resp)
{
	(void)ctx;
	(void)req;
	char msg[200];
	snprintf(msg, sizeof msg, "%d captures are already running, the most gpulsed runs at once; "
		 "try again when one ends", PROFILE_MAX_CAPTURES);
	return http_api_error(resp, 503, "unavailable", msg);
}

int api_profiling_register(struct http_server *s, struct api_profiling *p)
{
	int rc = http_route(s, "/api/v1/processes", handle_processes, p);
	if (!rc)
		rc = http_route(s, "/api/v1/kernels", handle_kernels, p);
	if (rc)
		return rc;
	/* A capture makes a process trace everything: a write (DESIGN.md,
	 * decision 9), refused by the server unless the write token, or no
	 * write token and a loopback listen, allows it. */
	if (!p) {
		rc = http_route(s, "/api/v1/trace", handle_trace, p); /* answers 503 */
		return rc ? rc : http_route_writes(s, "/api/v1/trace");
	}
	/* A capture waits seconds + 5 for its process: on a thread of its
	 * own, one per capture the profile server can run, with the
	 * connection suspended meanwhile, so captures hold no HTTP thread;
	 * one more is refused at once. */
	rc = http_pool_new(s, "gpulse-capture", PROFILE_MAX_CAPTURES, 0, 0, &p->captures);
	if (!rc)
		rc = http_route_deferred(s, "/api/v1/trace", handle_trace, handle_trace_busy, p,
					 p->captures);
	if (!rc)
		rc = http_route_writes(s, "/api/v1/trace");
	return rc;
}
