// SPDX-License-Identifier: GPL-2.0
/*
 * Hooks by GOT, for a client that `heapprofctl attach` loaded into a running
 * process with dlopen (RTLD_LOCAL). There the library is not the
 * interposer: every object already bound malloc and friends to the real
 * allocator. So the slots of its global offset table that name one of the
 * hooked functions (DT_JMPREL and DT_RELA relocations of type JUMP_SLOT or
 * GLOB_DAT) are pointed at this library's functions, which call the real
 * ones (resolved with RTLD_DEFAULT, hooks.c). The C++ runtime's operator
 * new and delete call malloc and free through the runtime's own slots, so
 * they are routed too.
 *
 * Left alone: this library, the dynamic loader, the vDSO, libc and the
 * object that defines the real malloc (their internal allocations stay
 * unseen; the user guide says so). Objects loaded later by dlopen are
 * patched when the program's dlopen returns (dlopen is hooked as well).
 *
 * Every write is remembered with the slot's old value: detach puts the old
 * values back where a slot still holds ours. A slot in the PT_GNU_RELRO
 * range is read-only after relocation: it is made writable for the write
 * and read-only again, as the loader left it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch.h"
#include "client.h"

struct slot {
	void **where;
	void *orig;
	uintptr_t obj;		/* the object's load address (dlpi_addr) */
	uint64_t id;		/* and its identity: name and program headers */
	int relro;
};

static struct slot *slots;
static size_t nslots, cap_slots;	/* cap in slots; the array is mmap'ed */
static pthread_mutex_t got_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long seen_subs;	/* dlpi_subs at the last pass */
int hp_got_active;			/* the slots point at us */

static void *(*real_dlopen)(const char *, int);

static void *dlopen_hook(const char *file, int mode);

static const char *const hooked[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign",
	"posix_memalign", "aligned_alloc", "valloc", "pvalloc",
	"malloc_usable_size", "dlopen", "pthread_getattr_np",
};
#define NHOOKED (sizeof(hooked) / sizeof(hooked[0]))
static void *hook_fn[NHOOKED];
static uintptr_t self_start, real_start;	/* objects left alone */

static int hooked_index(const char *name)
{
	for (size_t i = 0; i < NHOOKED; i++)
		if (!strcmp(name, hooked[i]))
			return (int)i;
	return -1;
}

/* The start of the object containing addr (dli_fbase), or 0. */
static uintptr_t object_of(const void *addr)
{
	Dl_info di;

	return addr && dladdr(addr, &di) ? (uintptr_t)di.dli_fbase : 0;
}

/* Is addr what its object defines as a symbol, not a PLT entry standing
 * for another's (a non-PIE program that takes malloc's address has one,
 * and the global lookup returns it)? */
static int defined_at(const void *addr)
{
	const ElfW(Sym) *sym = NULL;
	Dl_info di;

	return addr && dladdr1(addr, &di, (void **)&sym, RTLD_DL_SYMENT) && sym &&
	       sym->st_shndx != SHN_UNDEF;
}

struct real_look {
	const char *name;
	uintptr_t skip;		/* the object whose entry the global lookup gave */
	uintptr_t self;		/* this library, which defines the hooks */
	void *found;
};

static int real_in(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct real_look *l = arg;
	void *h, *p;

	(void)size;
	if (l->found || !info->dlpi_name || !info->dlpi_name[0])
		return 0;
	h = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
	if (!h)
		return 0;
	p = dlsym(h, l->name);
	if (p && defined_at(p) && object_of(p) != l->skip && object_of(p) != l->self)
		l->found = p;
	dlclose(h);
	return 0;
}

void *hp_got_real(const char *name)
{
	struct real_look l = { .name = name };
	void *p = dlsym(RTLD_DEFAULT, name);
	Dl_info di;

	if (!p || defined_at(p))
		return p;
	/* Its definition, in load order after the program's stand-in. */
	l.skip = object_of(p);
	l.self = dladdr((void *)hp_got_real, &di) ? (uintptr_t)di.dli_fbase : 0;
	dl_iterate_phdr(real_in, &l);
	return l.found ? l.found : p;
}

/* Our own definitions: the lookup in our handle starts with this object
 * (a plain reference would bind to libc's, the global scope comes first). */
static int find_hooks(void)
{
	Dl_info di;
	void *self;

	if (hook_fn[0])
		return 0;
	if (!dladdr((void *)find_hooks, &di) || !di.dli_fname)
		return -ENOENT;
	self = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!self)
		return -ENOENT;
	for (size_t i = 0; i < NHOOKED; i++) {
		hook_fn[i] = strcmp(hooked[i], "dlopen") ? dlsym(self, hooked[i]) :
			     (void *)dlopen_hook;
		if (!hook_fn[i] || object_of(hook_fn[i]) != (uintptr_t)di.dli_fbase) {
			dlclose(self);
			return -ENOENT;
		}
	}
	dlclose(self);	/* the load we came with keeps us */
	self_start = (uintptr_t)di.dli_fbase;
	real_start = object_of(hp_got_real("malloc"));
	real_dlopen = (void *(*)(const char *, int))hp_got_real("dlopen");
	return real_dlopen ? 0 : -ENOENT;
}

static int grow(void)
{
	size_t ncap = cap_slots ? cap_slots * 2 : 1024;
	void *p;

	if (slots)
		p = mremap(slots, cap_slots * sizeof(*slots), ncap * sizeof(*slots),
			   MREMAP_MAYMOVE);
	else
		p = mmap(NULL, ncap * sizeof(*slots), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	slots = p;
	cap_slots = ncap;
	return 0;
}

static uintptr_t page_of(uintptr_t a)
{
	return a & ~((uintptr_t)getpagesize() - 1);
}

/* Store v into a slot, lifting RELRO's protection around the store. */
static int store(void **where, void *v, int relro)
{
	uintptr_t pg = page_of((uintptr_t)where);

	if (relro && mprotect((void *)pg, (size_t)getpagesize(), PROT_READ | PROT_WRITE))
		return -errno;
	__atomic_store_n(where, v, __ATOMIC_RELEASE);
	if (relro)
		mprotect((void *)pg, (size_t)getpagesize(), PROT_READ);
	return 0;
}

struct dyn_info {
	const ElfW(Sym) *symtab;
	const char *strtab;
	const ElfW(Rela) *rela[2];
	size_t relasz[2];
	const char *soname;
};

/* The loader relocates most d_ptr values in place; the vDSO's stay
 * relative. A value below the load address is relative. */
static uintptr_t dptr(uintptr_t base, ElfW(Addr) v)
{
	return v < base ? base + v : v;
}

static void read_dynamic(uintptr_t base, const ElfW(Dyn) *d, struct dyn_info *di)
{
	uintptr_t soname = 0, strtab = 0;

	memset(di, 0, sizeof(*di));
	for (; d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: di->symtab = (const ElfW(Sym) *)dptr(base, d->d_un.d_ptr); break;
		case DT_STRTAB: strtab = dptr(base, d->d_un.d_ptr); break;
		case DT_JMPREL: di->rela[0] = (const ElfW(Rela) *)dptr(base, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: di->relasz[0] = d->d_un.d_val; break;
		case DT_RELA: di->rela[1] = (const ElfW(Rela) *)dptr(base, d->d_un.d_ptr); break;
		case DT_RELASZ: di->relasz[1] = d->d_un.d_val; break;
		case DT_SONAME: soname = d->d_un.d_val + 1; break;
		}
	}
	di->strtab = (const char *)strtab;
	if (strtab && soname)
		di->soname = di->strtab + soname - 1;
}

/* Another object loaded where an unloaded one was is another object. */
static uint64_t object_id(const struct dl_phdr_info *info)
{
	uint64_t h = 1469598103934665603ULL;

	for (const char *c = info->dlpi_name ? info->dlpi_name : ""; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211ULL;
	return h ^ (uint64_t)(uintptr_t)info->dlpi_phdr;
}

static int already_seen(uintptr_t obj, uint64_t id)
{
	for (size_t i = 0; i < nslots; i++)
		if (slots[i].obj == obj && slots[i].id == id)
			return 1;
	return 0;
}

struct live_obj {
	uintptr_t base;
	uint64_t id;
};

struct pass {
	int err;
	int count;		/* slots written */
	struct live_obj *live;	/* the objects there now */
	size_t nlive, cap;
};

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pass *ps = arg;
	uintptr_t base = info->dlpi_addr, start = UINTPTR_MAX, relro_lo = 0, relro_hi = 0;
	const ElfW(Dyn) *dyn = NULL;
	struct dyn_info di;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && page_of(base + ph->p_vaddr) < start)
			start = page_of(base + ph->p_vaddr);
		else if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
		else if (ph->p_type == PT_GNU_RELRO) {
			relro_lo = page_of(base + ph->p_vaddr);
			relro_hi = page_of(base + ph->p_vaddr + ph->p_memsz);
		}
	}
	if (!dyn || start == self_start || start == real_start ||
	    start == getauxval(AT_SYSINFO_EHDR) || base == getauxval(AT_BASE))
		return 0;
	if (already_seen(base, object_id(info)))
		return 0;
	read_dynamic(base, dyn, &di);
	if (!di.symtab || !di.strtab)
		return 0;
	if (di.soname && (!strncmp(di.soname, "libc.so", 7) || !strncmp(di.soname, "ld-linux", 8)))
		return 0;
	for (int r = 0; r < 2; r++) {
		size_t n = di.relasz[r] / sizeof(ElfW(Rela));

		for (size_t k = 0; k < n; k++) {
			const ElfW(Rela) *rel = &di.rela[r][k];
			unsigned type = (unsigned)ELF64_R_TYPE(rel->r_info);
			const ElfW(Sym) *sym;
			void **where;
			int h;

			if (type != HP_R_JUMP_SLOT && type != HP_R_GLOB_DAT)
				continue;
			sym = &di.symtab[ELF64_R_SYM(rel->r_info)];
			if (!sym->st_name || (h = hooked_index(di.strtab + sym->st_name)) < 0)
				continue;
			where = (void **)(base + rel->r_offset);
			if (*where == hook_fn[h])
				continue;	/* DT_RELA also spanning DT_JMPREL */
			if (nslots == cap_slots && grow()) {
				ps->err = -ENOMEM;
				return 1;
			}
			slots[nslots] = (struct slot){ where, *where, base, object_id(info),
				(uintptr_t)where >= relro_lo && (uintptr_t)where < relro_hi };
			if (store(where, hook_fn[h], slots[nslots].relro)) {
				ps->err = -errno;
				continue;
			}
			nslots++;
			ps->count++;
		}
	}
	return 0;
}

static int is_hook(const void *v)
{
	for (size_t h = 0; h < NHOOKED; h++)
		if (v == hook_fn[h])
			return 1;
	return 0;
}

/*
 * Drop the slots of objects that were unloaded (dlclose): their memory may
 * belong to something else now. The same file loaded again where it was
 * has the same identity and fresh slots: those that no longer hold our
 * function are dropped too, so that the object is patched again.
 */
static void forget_unloaded(const struct live_obj *live, size_t nlive)
{
	size_t o = 0;

	for (size_t i = 0; i < nslots; i++) {
		int found = 0;

		for (size_t j = 0; j < nlive && !found; j++)
			found = live[j].base == slots[i].obj && live[j].id == slots[i].id;
		if (found && is_hook(*slots[i].where))
			slots[o++] = slots[i];
	}
	nslots = o;
}

static int live_objects(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pass *ps = arg;

	(void)size;
	seen_subs = info->dlpi_subs;
	if (ps->nlive < ps->cap)
		ps->live[ps->nlive++] = (struct live_obj){ info->dlpi_addr, object_id(info) };
	return 0;
}

/* Bring the list of slots up to date with unloads: under got_lock. */
static void check_unloads(void)
{
	static struct live_obj live[4096];
	struct pass ps = { .live = live, .cap = 4096 };
	unsigned long long before = seen_subs;

	dl_iterate_phdr(live_objects, &ps);
	if (seen_subs != before && ps.nlive < ps.cap)
		forget_unloaded(live, ps.nlive);
}

/* Point the slots of every object not yet patched at the hooks. Returns
 * how many slots were written, or -errno. */
int hp_got_patch(void)
{
	struct pass ps = { 0 };
	int rc;

	pthread_mutex_lock(&got_lock);
	rc = find_hooks();
	if (!rc) {
		check_unloads();
		dl_iterate_phdr(patch_object, &ps);
		hp_got_active = 1;
		rc = ps.err ? ps.err : ps.count;
	}
	pthread_mutex_unlock(&got_lock);
	return rc;
}

/*
 * The objects a program dlopen's while attached: their slots too. Under
 * the lock, hp_got_active is read again: a detach may have put the slots
 * back since the caller looked.
 */
void hp_got_patch_loaded(void)
{
	struct pass ps = { 0 };

	pthread_mutex_lock(&got_lock);
	if (hp_got_active && !find_hooks()) {
		check_unloads();
		dl_iterate_phdr(patch_object, &ps);
	}
	pthread_mutex_unlock(&got_lock);
}

static void unpatch_locked(void)
{
	check_unloads();
	__atomic_store_n(&hp_got_active, 0, __ATOMIC_RELEASE);
	for (size_t i = nslots; i-- > 0;)
		if (is_hook(*slots[i].where))
			store(slots[i].where, slots[i].orig, slots[i].relro);
	nslots = 0;
}

/* Put back every slot that still holds our function. */
void hp_got_unpatch(void)
{
	pthread_mutex_lock(&got_lock);
	unpatch_locked();
	pthread_mutex_unlock(&got_lock);
}

/*
 * The same, called while the program's threads are stopped wherever they
 * were, in our code too: one may be stopped holding the lock (a dlopen
 * being patched), and then waiting for it would never end: -EBUSY.
 */
int hp_got_unpatch_try(void)
{
	if (pthread_mutex_trylock(&got_lock))
		return -EBUSY;
	unpatch_locked();
	pthread_mutex_unlock(&got_lock);
	return 0;
}

int hp_got_slots(void)
{
	return (int)nslots;
}

/*
 * A name without '/' is looked up in the calling object's DT_RPATH or
 * DT_RUNPATH by the loader; called from here, the caller would be this
 * library. So the caller's own search path is tried here (with $ORIGIN),
 * DT_RPATH before and DT_RUNPATH after the loader's other places, as the
 * loader orders them.
 */
static void *open_in(const char *paths, const char *origin, const char *file, int mode)
{
	char path[PATH_MAX], dir[PATH_MAX];
	const char *p = paths;

	while (p && *p) {
		size_t n = strcspn(p, ":");
		const char *o;

		if (n && n < sizeof(dir)) {
			memcpy(dir, p, n);
			dir[n] = 0;
			int len;

			o = strstr(dir, "$ORIGIN");
			if (o || (o = strstr(dir, "${ORIGIN}"))) {
				size_t skip = o[1] == '{' ? 9 : 7;

				len = snprintf(path, sizeof(path), "%.*s%s%s/%s", (int)(o - dir),
					       dir, origin, o + skip, file);
			} else {
				len = snprintf(path, sizeof(path), "%s/%s", dir, file);
			}
			if (len > 0 && (size_t)len < sizeof(path) && !access(path, F_OK)) {
				void *h = real_dlopen(path, mode);

				if (h)
					return h;
			}
		}
		p += n + (p[n] == ':');
	}
	return NULL;
}

static void *open_as_caller(const char *file, int mode, const void *caller)
{
	char origin[PATH_MAX] = "";
	const char *rpath = NULL, *runpath = NULL, *strtab = NULL;
	struct link_map *lm = NULL;
	uintptr_t rp = 0, rup = 0;
	Dl_info info;
	void *h;

	if (!file || strchr(file, '/') || !caller ||
	    !dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm || !lm->l_ld)
		return real_dlopen(file, mode);
	h = real_dlopen(file, mode | RTLD_NOLOAD);
	if (h)
		return h;
	dlerror();	/* not loaded yet is no error */
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_STRTAB)
			strtab = (const char *)dptr(lm->l_addr, d->d_un.d_ptr);
		else if (d->d_tag == DT_RPATH)
			rp = d->d_un.d_val + 1;
		else if (d->d_tag == DT_RUNPATH)
			rup = d->d_un.d_val + 1;
	}
	if (strtab && rup)
		runpath = strtab + rup - 1;
	else if (strtab && rp)
		rpath = strtab + rp - 1;
	if (!rpath && !runpath)
		return real_dlopen(file, mode);
	if (lm->l_name && lm->l_name[0]) {
		snprintf(origin, sizeof(origin), "%s", lm->l_name);
	} else {
		ssize_t n = readlink("/proc/self/exe", origin, sizeof(origin) - 1);

		origin[n > 0 ? n : 0] = 0;
	}
	if (strrchr(origin, '/'))
		*strrchr(origin, '/') = 0;
	if (!rpath || !(h = open_in(rpath, origin, file, mode)))
		h = real_dlopen(file, mode);
	if (!h && runpath)
		h = open_in(runpath, origin, file, mode);
	if (h)
		dlerror();	/* an earlier place's failure is no error */
	return h;
}

/* The program's dlopen: the real one, then the new objects' slots. */
static void *dlopen_hook(const char *file, int mode)
{
	void *h = open_as_caller(file, mode, __builtin_return_address(0));

	if (h && __atomic_load_n(&hp_got_active, __ATOMIC_ACQUIRE))
		hp_got_patch_loaded();
	return h;
}
