/* The web dashboard's files (src/web/), embedded in gpulsed by
 * cmake/embed_assets.cmake at build time. */
#ifndef GPULSE_WEB_ASSETS_H
#define GPULSE_WEB_ASSETS_H

#include <stddef.h>

#include "http/http_static.h"

extern const struct http_asset web_assets[];
extern const size_t web_nassets;
extern const size_t web_assets_bytes;  /* their sum, as stored */

#endif
