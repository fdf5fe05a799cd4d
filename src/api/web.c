/* The web dashboard: the embedded files (web_assets.c, generated from
 * src/web/) handed to the static file server. */
#include "api/web.h"

#include "common/status.h"
#include "api/web_assets.h"

/* 'self' only: the page works air-gapped, and a script injected into it
 * could neither load code from elsewhere nor send data there. uPlot sets
 * element styles through the CSSOM, which style-src does not restrict;
 * img-src allows data: for the canvas's exported images. */
const char web_csp[] =
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
	"connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; "
	"form-action 'none'; frame-ancestors 'none'";

int web_register(struct http_server *s, struct http_static **out)
{
	*out = NULL;
	struct http_static *st;
	int rc = http_static_new(web_assets, web_nassets, web_csp, &st);
	if (rc)
		return rc;
	/* Handed out even when registering fails: a route may already point
	 * at it, so it is freed only once the server has stopped. */
	*out = st;
	return http_static_register(st, s, "/");
}
