/* Replay: serve a recording (DESIGN.md's recording format) as live GPUs,
 * row by row in recorded time scaled by `speed`, looping at the end. Every
 * GPU it attaches is labelled source="replay" so nobody mistakes it for
 * hardware. */
#ifndef GPULSE_REPLAY_H
#define GPULSE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collect/bus.h"

struct replay_config {
	const char *path;
	double speed;   /* 1.0 real time; 10 ten times faster */
	bool loop;      /* start again at the end */
};

struct replay;

/* Load and validate the file (errors name file, line and column in
 * `err`), attach its GPUs to the bus and start the replay thread. */
int replay_start(struct replay **out, struct bus *bus, const struct replay_config *cfg,
		 char *err, size_t errlen);
/* Accepts NULL. */
void replay_stop(struct replay *r);
/* Rows published so far and times the file was started over. */
void replay_progress(struct replay *r, uint64_t *rows, uint64_t *loops);

#endif
