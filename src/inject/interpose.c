/* Redirect other objects' calls of named functions by rewriting their
 * GOT entries (interpose.h says why, and why by hand). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"
#include "inject/interpose.h"

#if defined(__x86_64__) && defined(__LP64__)
#define IP_SUPPORTED 1
#define IP_JUMP_SLOT R_X86_64_JUMP_SLOT
#define IP_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__) && defined(__LP64__)
#define IP_SUPPORTED 1
#define IP_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define IP_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#define IP_SUPPORTED 0
#endif

int interpose_supported(void)
{
	return IP_SUPPORTED;
}

void interpose_init(struct interpose *ip, const struct interpose_entry *entries, size_t n,
		    const void *const *skip, size_t nskip)
{
	memset(ip, 0, sizeof *ip);
	ip->entries = entries;
	ip->nentries = n;
	for (size_t i = 0; i < nskip && ip->nskip < INTERPOSE_SKIP_MAX; i++)
		if (skip[i])
			ip->skip[ip->nskip++] = skip[i];
}

#if IP_SUPPORTED

/* One scan's state, passed through dl_iterate_phdr. */
struct scan {
	struct interpose *ip;
	int first;                     /* the next object is the first */
	int unchanged;                 /* nothing loaded or unloaded: stopped at once */
	int have_counts;
	unsigned long long adds, subs; /* the loader's counters now */
	int rewritten;
	int incomplete;                /* an object to look at again next time */
	uintptr_t page;
	uintptr_t base;                /* the second pass's object */
};

/* Whether the object contains addr (inside one of its loaded segments). */
static int object_has(const struct dl_phdr_info *info, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		uintptr_t lo = (uintptr_t)info->dlpi_addr + p->p_vaddr;
		if (a >= lo && a < lo + p->p_memsz)
			return 1;
	}
	return 0;
}

/* Whether the loaded segment holding [a, a + len) may be written: the
 * GOT lies in the writable data segment (the RELRO part of it made
 * read-only after relocation, handled by the caller). */
static int segment_writable(const struct dl_phdr_info *info, uintptr_t a, size_t len)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type != PT_LOAD)
			continue;
		uintptr_t lo = (uintptr_t)info->dlpi_addr + p->p_vaddr;
		if (a >= lo && a + len <= lo + p->p_memsz)
			return (p->p_flags & PF_W) != 0;
	}
	return 0;
}

/* A dynamic-section address: glibc rewrites them to absolute addresses
 * when it relocates an object, musl and the vDSO leave them relative to
 * the object's base. */
static uintptr_t dyn_addr(ElfW(Addr) base, ElfW(Addr) v)
{
	return v < base ? (uintptr_t)base + v : (uintptr_t)v;
}

/* Point *slot at `to`. A slot on a page the loader made read-only (RELRO:
 * from the segment's start rounded down to its end rounded down, as
 * glibc and musl protect it) is opened for the one store and closed
 * again. 1 rewritten, 0 already ours, -1 not writable. */
static int write_slot(const struct scan *s, const struct dl_phdr_info *info, void **slot,
		      void *to, uintptr_t ro_lo, uintptr_t ro_hi)
{
	if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) == to)
		return 0;
	uintptr_t a = (uintptr_t)slot;
	if (!segment_writable(info, a, sizeof *slot))
		return -1;
	if (a >= ro_lo && a + sizeof *slot <= ro_hi) {
		void *page = (void *)(a & ~(s->page - 1));
		if (mprotect(page, s->page, PROT_READ | PROT_WRITE) != 0)
			return -1;
		__atomic_store_n(slot, to, __ATOMIC_RELEASE);
		mprotect(page, s->page, PROT_READ);
	} else {
		__atomic_store_n(slot, to, __ATOMIC_RELEASE);
	}
	return 1;
}

/* An object's dynamic tables, as patch_object and the scan's first pass
 * read them. */
struct dyn {
	const ElfW(Sym) *syms;
	const char *strs;
	size_t strsz;
	const uint32_t *gnu_hash;
	const ElfW(Rela) *jmprel, *rela;
	size_t pltrelsz, relasz;
	uintptr_t ro_lo, ro_hi; /* the pages the loader made read-only */
};

static void patch_relocs(struct scan *s, const struct dl_phdr_info *info, const struct dyn *d,
			 const ElfW(Rela) *rel, size_t relsz)
{
	struct interpose *ip = s->ip;
	size_t n = relsz / sizeof *rel;
	for (size_t i = 0; i < n; i++) {
		unsigned long type = ELF64_R_TYPE(rel[i].r_info);
		if (type != IP_JUMP_SLOT && type != IP_GLOB_DAT)
			continue;
		size_t si = ELF64_R_SYM(rel[i].r_info);
		if (si == 0)
			continue;
		const ElfW(Sym) *sym = &d->syms[si];
		/* Only imports: an object's own function, reached through its
		 * own PLT, is not another object's call. */
		if (sym->st_shndx != SHN_UNDEF || sym->st_name >= d->strsz)
			continue;
		const char *name = d->strs + sym->st_name;
		for (size_t e = 0; e < ip->nentries; e++) {
			const char *want = ip->entries[e].name;
			if (name[0] != want[0] || strcmp(name, want) != 0)
				continue;
			void **slot = (void **)((uintptr_t)info->dlpi_addr + rel[i].r_offset);
			int r = write_slot(s, info, slot, ip->entries[e].to, d->ro_lo, d->ro_hi);
			if (r > 0) {
				ip->patched++;
				s->rewritten++;
			} else if (r < 0) {
				ip->failed++;
			}
			break;
		}
	}
}

/* Whether the object imports any of the names. Its undefined symbols
 * are the ones the GNU hash table leaves out, all before the table's
 * first hashed index (symoffset), so only those are read; without that
 * table (DT_HASH alone, or neither) the answer is "maybe" and the
 * relocations are read. A large library's relocation tables run to
 * megabytes, its imports to a few thousand names. */
static int may_import(const struct interpose *ip, const ElfW(Sym) *syms, const char *strs,
		      size_t strsz, const uint32_t *gnu_hash)
{
	if (!gnu_hash)
		return 1;
	uint32_t symoffset = gnu_hash[1];
	for (uint32_t i = 1; i < symoffset; i++) {
		if (syms[i].st_shndx != SHN_UNDEF || syms[i].st_name >= strsz)
			continue;
		const char *name = strs + syms[i].st_name;
		for (size_t e = 0; e < ip->nentries; e++)
			if (name[0] == ip->entries[e].name[0] && strcmp(name, ip->entries[e].name) == 0)
				return 1;
	}
	return 0;
}

/* 1 with *d filled, 0 for an object without what a redirection needs. */
static int read_dynamic(const struct scan *s, const struct dl_phdr_info *info, struct dyn *d)
{
	ElfW(Addr) base = info->dlpi_addr;
	const ElfW(Dyn) *dyn = NULL;
	memset(d, 0, sizeof *d);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		if (p->p_type == PT_DYNAMIC) {
			dyn = (const ElfW(Dyn) *)((uintptr_t)base + p->p_vaddr);
		} else if (p->p_type == PT_GNU_RELRO) {
			uintptr_t lo = (uintptr_t)base + p->p_vaddr;
			d->ro_lo = lo & ~(s->page - 1);
			d->ro_hi = (lo + p->p_memsz) & ~(s->page - 1);
		}
	}
	if (!dyn)
		return 0;
	ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0, gnu_hash = 0;
	long pltrel = DT_RELA;
	for (const ElfW(Dyn) *e = dyn; e->d_tag != DT_NULL; e++) {
		switch (e->d_tag) {
		case DT_SYMTAB: symtab = e->d_un.d_ptr; break;
		case DT_STRTAB: strtab = e->d_un.d_ptr; break;
		case DT_STRSZ: d->strsz = e->d_un.d_val; break;
		case DT_JMPREL: jmprel = e->d_un.d_ptr; break;
		case DT_PLTRELSZ: d->pltrelsz = e->d_un.d_val; break;
		case DT_PLTREL: pltrel = (long)e->d_un.d_val; break;
		case DT_RELA: rela = e->d_un.d_ptr; break;
		case DT_RELASZ: d->relasz = e->d_un.d_val; break;
		case DT_GNU_HASH: gnu_hash = e->d_un.d_ptr; break;
		default: break;
		}
	}
	if (!symtab || !strtab || !d->strsz)
		return 0;
	d->syms = (const ElfW(Sym) *)dyn_addr(base, symtab);
	d->strs = (const char *)dyn_addr(base, strtab);
	d->gnu_hash = gnu_hash ? (const uint32_t *)dyn_addr(base, gnu_hash) : NULL;
	if (jmprel && d->pltrelsz && pltrel == DT_RELA)
		d->jmprel = (const ElfW(Rela) *)dyn_addr(base, jmprel);
	if (rela && d->relasz)
		d->rela = (const ElfW(Rela) *)dyn_addr(base, rela);
	return 1;
}

/* A candidate of the first pass (it imports a name), held open. */
static void patch_object(struct scan *s, const struct dl_phdr_info *info)
{
	struct dyn d;
	if (!read_dynamic(s, info, &d))
		return;
	if (d.jmprel)
		patch_relocs(s, info, &d, d.jmprel, d.pltrelsz);
	if (d.rela)
		patch_relocs(s, info, &d, d.rela, d.relasz);
}

/* The first pass, under the loader's list lock: which objects import a
 * name. Nothing is written here: an object can be on the list before
 * the loader has relocated it (a dlopen on another thread), when a store
 * would be overwritten, or a RELRO page closed that the loader has yet
 * to write (async-profiler met the same race, its issue 1125). */
static int on_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan *s = arg;
	struct interpose *ip = s->ip;
	if (s->first) {
		s->first = 0;
		/* The loader counts the objects it ever added and removed
		 * (glibc 2.4 on): equal counts, nothing new to look at. */
		if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
			s->have_counts = 1;
			s->adds = info->dlpi_adds;
			s->subs = info->dlpi_subs;
			if (ip->scanned && s->adds == ip->adds && s->subs == ip->subs) {
				s->unchanged = 1;
				return 1;
			}
		}
	}
	ip->objects++;
	for (size_t i = 0; i < ip->nskip; i++)
		if (object_has(info, ip->skip[i]))
			return 0;
	struct dyn d;
	if (!read_dynamic(s, info, &d) || !may_import(ip, d.syms, d.strs, d.strsz, d.gnu_hash))
		return 0;
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	if (ip->ncand >= INTERPOSE_CAND_MAX || strlen(name) >= sizeof ip->cand[0].name) {
		s->incomplete = 1;
		return 0;
	}
	memcpy(ip->cand[ip->ncand].name, name, strlen(name) + 1);
	ip->cand[ip->ncand].base = (uintptr_t)info->dlpi_addr;
	ip->ncand++;
	return 0;
}

/* The second pass: the one object at s->base, held open. */
static int on_candidate(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct scan *s = arg;
	if ((uintptr_t)info->dlpi_addr != s->base)
		return 0;
	patch_object(s, info);
	return 1;
}

int interpose_scan(struct interpose *ip)
{
	long ps = sysconf(_SC_PAGESIZE);
	struct scan s = { .ip = ip, .first = 1, .page = ps > 0 ? (uintptr_t)ps : 4096 };
	int64_t t0 = clock_mono_ns();
	ip->ncand = 0;
	dl_iterate_phdr(on_object, &s);
	if (s.unchanged)
		return 0;
	/* Each object that imports a name, opened by its name with
	 * RTLD_NOLOAD: that waits for a dlopen under way on another thread
	 * (the loader's lock) and answers only for an object loaded whole,
	 * relocated, and keeps it from being unloaded while it is written.
	 * The main program ("") is opened as NULL. An object not answering
	 * is looked at again by the next scan. */
	for (size_t i = 0; i < ip->ncand; i++) {
		const char *name = ip->cand[i].name;
		void *h = dlopen(name[0] ? name : NULL, RTLD_LAZY | RTLD_NOLOAD);
		if (!h) {
			s.incomplete = 1;
			continue;
		}
		s.base = ip->cand[i].base;
		dl_iterate_phdr(on_candidate, &s);
		dlclose(h);
	}
	ip->scanned = 1;
	ip->scans++;
	if (s.have_counts && !s.incomplete) {
		ip->adds = s.adds;
		ip->subs = s.subs;
	} else {
		ip->adds = ip->subs = ~0ull; /* no count matches: look again */
	}
	ip->scan_ns += (uint64_t)(clock_mono_ns() - t0);
	return s.rewritten;
}

#else /* !IP_SUPPORTED */

int interpose_scan(struct interpose *ip)
{
	ip->scanned = 1;
	return 0;
}

#endif
