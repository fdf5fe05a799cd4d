/* The web dashboard at gpulsed's "/" (docs/internals/web.md): the files
 * of src/web/, embedded at build time, served from memory. */
#ifndef GPULSE_WEB_H
#define GPULSE_WEB_H

#include "http/http_server.h"
#include "http/http_static.h"

/* The Content-Security-Policy every dashboard file carries: scripts,
 * styles, images and fetches from this origin only; no frames, forms,
 * plugins or inline code. */
extern const char web_csp[];

/* Serve the dashboard on `s` at "/" (a prefix route: register it after
 * every other route, as it answers the paths no other route takes, with
 * 404 for those not in the dashboard). Its files are public
 * (http_path_public): they hold no data, and the page asks for a token
 * when the API wants one. *out is the table, freed with
 * http_static_free after the server stops (set even on failure). 0, GPULSE_ENOMEM, or the
 * server's refusal. */
int web_register(struct http_server *s, struct http_static **out);

#endif
