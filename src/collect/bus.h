/* The sample bus: the latest state of every GPU, merged from tier updates,
 * with subscribers that see each update as it arrives (the store will be
 * one). Writers are collector lanes and the event thread; readers are the
 * HTTP exporters. Each GPU slot has its own lock, held only to copy. */
#ifndef GPULSE_BUS_H
#define GPULSE_BUS_H

#include <stdint.h>

#include "collect/sample.h"

struct bus;

/* Called for every update after it is merged and the slot unlocked, on the
 * publisher's thread. Must not block; it may call the bus's setters. */
typedef void bus_subscriber_fn(void *ctx, const struct gpu_update *u);

/* Create an empty bus. 0 or GPULSE_ENOMEM. Free with bus_destroy. */
int bus_create(struct bus **out);
/* Accepts NULL. Subscribers must have stopped publishing. */
void bus_destroy(struct bus *b);

/* How late a tier may be before its fields are treated as stale and left
 * out of snapshots. 0 (the default) disables staleness for the tier. */
void bus_set_stale_after(struct bus *b, enum tier tier, int64_t ns);

/* Add a GPU or, when a GPU with the same UUID is already there, refresh
 * its identity (a lost GPU that came back keeps its slot). Writes the slot
 * to *slot. GPULSE_ELIMIT past GPU_MAX. */
int bus_attach_gpu(struct bus *b, const struct gpu_identity *id, int *slot);
/* Replace a GPU's topology (identity.peers, npeers <= GPU_MAX - 1): how
 * it reaches the other GPUs, which changes as GPUs come and go. */
void bus_set_peers(struct bus *b, int slot, const struct gpu_peer *peers, int npeers);
/* Slot of the GPU with this UUID, or -1. */
int bus_find_uuid(struct bus *b, const char *uuid);
/* Number of slots in use. Slots are 0..count-1 and never removed. */
int bus_gpu_count(struct bus *b);

/* Merge one tier's reading. An update with a valid F_POWER also carries,
 * to the snapshot and to subscribers, F_POWER_ENERGY: the trapezoid
 * integral of every power reading since the slot was attached, in joules
 * (not across a gap over BUS_ENERGY_MAX_GAP_NS). It is what rate() over a
 * minute needs, from reads the fast tier makes anyway; the board's own
 * counter (F_ENERGY, ~4 ms a read) stays in the slow tier. */
#define BUS_ENERGY_MAX_GAP_NS (5LL * 1000000000LL)
void bus_publish(struct bus *b, const struct gpu_update *u);
/* Mark a GPU up, stale or lost, with a short reason ("" for up). */
void bus_set_health(struct bus *b, int slot, enum gpu_health h, const char *reason);
/* Count one XID event on a GPU. */
void bus_note_xid(struct bus *b, int slot, uint32_t xid, int64_t wall_ns);
/* Count one ECC event (double_bit false: single-bit). */
void bus_note_ecc_event(struct bus *b, int slot, bool double_bit);

/* Record the live diagnosis of a GPU's last complete window (class index
 * of diagnose.h or -1, finding bits, the window's end in Unix seconds). */
void bus_set_diagnosis(struct bus *b, int slot, int diag_class, unsigned findings,
		       double window_end_s);

/* Record a GPU's health score (src/diagnose/health_live.h). Copied. */
void bus_set_health_score(struct bus *b, int slot, const struct gpu_health_score *h);

/* Copy slot's state into *out, applying staleness at monotonic time now.
 * 0 or GPULSE_ENOENT. */
int bus_read(struct bus *b, int slot, struct gpu_snapshot *out);

/* Increases with every change; lets readers cache what they render. */
uint64_t bus_generation(struct bus *b);

/* Register a subscriber; at most 8. 0 or GPULSE_ELIMIT. Call before
 * collection starts. */
int bus_subscribe(struct bus *b, bus_subscriber_fn *fn, void *ctx);

#endif
