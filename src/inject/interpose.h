/* Calls that other loaded objects make to a named function, sent to one
 * of ours instead, by rewriting the entries of their global offset tables
 * (GOT) that the dynamic loader filled with that function's address.
 *
 * Why: the injection library is loaded by the CUDA driver with dlopen
 * (CUDA_INJECTION64_PATH), so its symbols never come before another
 * library's in the loader's search, and LD_PRELOAD would need a change to
 * how the application is started. CUPTI allows one subscriber per process;
 * a profiler that subscribes while a census window holds the subscriber
 * (torch.profiler started at a random moment: 5-12% of the time at the
 * default duty) fails and records no CUDA activity. Redirecting the
 * other objects' calls of cuptiSubscribe lets the library give its
 * subscriber back first (docs/internals/inject.md).
 *
 * Hand-written: no Debian library rewrites GOT entries of objects already
 * loaded (libffi, libunwind and libelf read ELF; none patches a process).
 * ELF64 on x86-64 and AArch64 with RELA relocations; elsewhere a scan
 * finds nothing and says so. Thread-safe only as its caller makes it:
 * call from one thread. */
#ifndef GPULSE_INJECT_INTERPOSE_H
#define GPULSE_INJECT_INTERPOSE_H

#include <stddef.h>
#include <stdint.h>

/* One function to redirect: every other object's calls of `name` (an
 * undefined symbol there, bound through a JUMP_SLOT or GLOB_DAT entry)
 * go to `to` from the scan on. `to` must stay mapped for the process's
 * life. */
struct interpose_entry {
	const char *name;
	void *to;
};

#define INTERPOSE_SKIP_MAX 4
#define INTERPOSE_CAND_MAX 16 /* objects importing a name, per scan */

struct interpose {
	const struct interpose_entry *entries;
	size_t nentries;
	const void *skip[INTERPOSE_SKIP_MAX]; /* objects left alone, by an address inside each */
	size_t nskip;
	unsigned long long adds, subs;        /* the loader's counters at the last scan */
	int scanned;                          /* a scan has run */
	/* What the scans did, over the process's life. */
	uint64_t scans;                       /* scans that looked at the objects */
	uint64_t objects;                     /* objects looked at, in all scans */
	uint64_t patched;                     /* entries rewritten */
	uint64_t failed;                      /* entries that could not be written */
	uint64_t scan_ns;                     /* time spent scanning (monotonic) */
	/* A scan's objects that import a name (interpose.c), kept here
	 * rather than allocated under the loader's lock. */
	struct {
		char name[512];
		uintptr_t base;
	} cand[INTERPOSE_CAND_MAX];
	size_t ncand;
};

/* Whether this build can rewrite entries on this machine (ELF64 RELA on
 * x86-64 or AArch64). */
int interpose_supported(void);

/* Set up *ip to redirect entries[0..n) (kept by pointer: they must
 * outlive *ip), leaving alone the objects that contain any of the
 * addresses in skip[0..nskip) (NULLs ignored; at most INTERPOSE_SKIP_MAX):
 * the library itself, and the one that defines the function. */
void interpose_init(struct interpose *ip, const struct interpose_entry *entries, size_t n,
		    const void *const *skip, size_t nskip);

/* Look at every loaded object if any was loaded or unloaded since the
 * last scan (all of them the first time) and rewrite their entries for
 * the functions of *ip; an entry already pointing at ours is left. Cheap
 * when nothing changed (one dl_iterate_phdr step). Returns the number of
 * entries rewritten by this call. */
int interpose_scan(struct interpose *ip);

#endif
