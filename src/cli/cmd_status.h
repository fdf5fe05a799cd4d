/* `gpulse status`: one screen for every GPU, from gpulsed's /api/v1/gpus. */
#ifndef GPULSE_CMD_STATUS_H
#define GPULSE_CMD_STATUS_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/client.h"
#include "cli/commands.h"

/* Render the /api/v1/gpus document (the whole envelope, or its "data"
 * object) to `out`, with ANSI colour when `color`. Values missing from the
 * document print as "-", never 0; text from the daemon is printed with
 * control characters replaced, so a process name cannot drive the
 * terminal. Returns 0, or GPULSE_EPARSE when `root` does not have the
 * documented shape (nothing useful could be shown). */
int status_render(json_t *root, FILE *out, bool color);

/* Whether gpulsed at `co` watches a GPU of index `gpu` (/api/v1/gpus),
 * for commands that take --gpu to refuse an index the host lacks. On a
 * failure to ask it says yes (the command then shows what it gets).
 * Fills `have` with the indices it does watch ("0, 1"; "" for none). */
bool status_has_gpu(const struct client_opts *co, int gpu, char *have, size_t havelen);

#endif
