// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl attach of a process started without the client: load
 * libheapprofd_client.so into it with the loader's dlopen, called inside
 * the process (remote_call.c) while all its threads are stopped
 * (ptrace_stop.c), then heapprofd_client_attach(config), which opens a
 * dormant session on the transport given and routes the program's GOT
 * slots through the hooks (libclient/got.c). detach calls
 * heapprofd_client_detach() the same way.
 *
 * Before anything is touched, the reasons it cannot work are looked for
 * and named: no such process, a zombie, a tracer already there, seccomp,
 * a static program, a client path that is another file (or none) in the
 * process's mount namespace; Yama's ptrace_scope explains a refused
 * PTRACE_SEIZE. In each case the process is left as it was.
 *
 * The safe point: the remote calls take the loader's and the allocator's
 * locks. A stopped thread that holds one of them (it is inside malloc,
 * dlopen, dl_iterate_phdr, ... or, for detach, inside the client) would
 * deadlock the call. So each thread's call stack is unwound (libunwind
 * over ptrace) and checked against those functions' address ranges; while
 * one is inside, the process runs for a moment and is stopped again, a
 * bounded number of times, then attach gives up and says which thread and
 * where.
 *
 * Which libc and which loader: those of the loader's link map and of the
 * auxiliary vector (linkmap.c), never a file name found in the maps; their
 * files are read as the mappings themselves (target.c). The return
 * trampoline of the calls (remote_call.c) is written past the end of the
 * code of one of them, in the last page of its text, where nothing runs.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind-ptrace.h>
#include <signal.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "arch.h"
#include "inject.h"

#define CLIENT_NAME	"libheapprofd_client.so"
#define SAFE_TRIES	200	/* stops looked at before giving up */
#define RUN_US		2000	/* how long the process runs between them */
#define MAX_FRAMES	64

/*
 * libc's functions that hold (or wait for) a lock that loading the client
 * needs whichever thread holds it: the loader's (dlopen and its kin,
 * dl_iterate_phdr, exit's destructors), all arenas' (fork) and the thread
 * list's (pthread_create: dlopen sets up the client's TLS in every thread).
 */
static const char *const global_fns[] = {
	"dlopen", "dlmopen", "dlclose", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo",
	"dlerror", "dl_iterate_phdr", "__libc_dlopen_mode", "__libc_dlsym", "__libc_dlclose",
	"fork", "_Fork", "pthread_create", "exit",
};
/*
 * And those the thread that makes the calls must not be inside: the
 * allocator's lock of its arena is its own (the other threads' arenas are
 * theirs; a lock wait on one that is shared is resolved while the call
 * runs, remote_call.c).
 */
static const char *const caller_fns[] = {
	"malloc", "free", "calloc", "realloc", "reallocarray", "memalign", "posix_memalign",
	"aligned_alloc", "valloc", "pvalloc", "malloc_usable_size", "malloc_trim", "malloc_info",
	"malloc_stats", "mallinfo", "mallinfo2", "mallopt", "__libc_malloc", "__libc_free",
	"__libc_calloc", "__libc_realloc", "__libc_memalign", "fopen", "fopen64", "fdopen",
	"freopen", "fclose", "fflush",
};
#define NGLOBAL (sizeof(global_fns) / sizeof(global_fns[0]))
#define NCALLER (sizeof(caller_fns) / sizeof(caller_fns[0]))

struct range {
	uint64_t lo, hi;
	const char *what;
};

struct ranges {
	struct range r[NCALLER + NGLOBAL + 8];
	int n;
};

static void add_range(struct ranges *rs, uint64_t lo, uint64_t hi, const char *what)
{
	if (rs->n < (int)(sizeof(rs->r) / sizeof(rs->r[0])) && hi > lo)
		rs->r[rs->n++] = (struct range){ lo, hi, what };
}

static const char *in_ranges(const struct ranges *rs, uint64_t ip)
{
	for (int i = 0; i < rs->n; i++)
		if (ip >= rs->r[i].lo && ip < rs->r[i].hi)
			return rs->r[i].what;
	return NULL;
}

/* Every executable mapping of the object o is. */
static void add_object_text(struct ranges *rs, const struct tobj *o, const char *what)
{
	for (int i = 0; o->first && i < o->nmaps; i++)
		if (o->first[i].perms[2] == 'x')
			add_range(rs, o->first[i].start, o->first[i].end, what);
}

/* The objects attach uses in the process, from its loader's link map. */
struct objs {
	struct linkmap lm;
	struct tobj libc, ld, client;
	int have_client;
};

static int find_objs(pid_t pid, const struct target_maps *tm, struct objs *ob, char *err,
		     size_t errlen)
{
	const struct lobj *libc, *cl;
	int rc;

	memset(ob, 0, sizeof(*ob));
	rc = linkmap_read(pid, &ob->lm);
	if (rc == -ENOEXEC) {
		snprintf(err, errlen,
			 "pid %d is statically linked (no dynamic loader or libc in it): there is "
			 "no loader to load the client with, so it cannot be profiled", (int)pid);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "cannot read pid %d's list of loaded objects (its loader's "
			 "link map): %s", (int)pid, strerror(-rc));
		return rc;
	}
	libc = linkmap_find(&ob->lm, "libc.so.6");
	if (!libc || tobj_at(pid, tm, libc->bias, &ob->libc) ||
	    tobj_at(pid, tm, ob->lm.ldbase, &ob->ld)) {
		snprintf(err, errlen, "pid %d: its loader has no glibc (libc.so.6) loaded, or it is "
			 "not where the loader says: not attaching", (int)pid);
		return -ENOEXEC;
	}
	cl = linkmap_find(&ob->lm, CLIENT_NAME);
	ob->have_client = cl && !tobj_at(pid, tm, cl->bias, &ob->client);
	return 0;
}

static void free_objs(struct objs *ob)
{
	linkmap_free(&ob->lm);
}

static void add_fns(pid_t pid, const struct tobj *libc, struct ranges *rs,
		    const char *const *fns, size_t n)
{
	uint64_t a[NCALLER + NGLOBAL], sz[NCALLER + NGLOBAL];

	if (tobj_syms(pid, libc, fns, n, a, sz))
		return;
	for (size_t i = 0; i < n; i++)
		if (a[i] && sz[i])
			add_range(rs, a[i], a[i] + sz[i], fns[i]);
}

static void risky_ranges(pid_t pid, const struct objs *ob, struct ranges *global,
			 struct ranges *caller, int client_too)
{
	global->n = caller->n = 0;
	add_fns(pid, &ob->libc, global, global_fns, NGLOBAL);
	add_fns(pid, &ob->libc, caller, caller_fns, NCALLER);
	add_object_text(global, &ob->ld, "the dynamic loader");
	/* Detach's second half unmaps the ring the client's code writes. */
	if (client_too && ob->have_client)
		add_object_text(global, &ob->client, "the client");
}

/* The return trampoline past the end of libc's or the loader's code. */
static int place_trampoline(struct stopset *s, const struct objs *ob, char *err, size_t errlen)
{
	const struct tobj *cand[] = { &ob->libc, &ob->ld };
	uint64_t at;

	for (size_t i = 0; i < sizeof(cand) / sizeof(cand[0]); i++)
		if (!tobj_code_tail(s->pid, cand[i], rc_trampoline_size(), &at))
			return rc_place_trampoline(s, at, err, errlen);
	snprintf(err, errlen, "pid %d: no room after the code of libc or the loader for the "
		 "call's return", (int)s->pid);
	return -ENOSPC;
}

#define SCAN_MAX (64U << 10)

/*
 * The quick look: does any word between the thread's sp and the top of
 * its stack point into a risky range? Every return address of its call
 * stack is such a word, so "none" means no frame is inside one, without
 * unwinding. Returns -1 when it cannot tell (the stack is deeper than the
 * look), else 2 when a word points into a global-risky range, 1 into one
 * the caller must avoid, 0 none.
 */
static int stack_words(pid_t pid, const struct sthread *t, const struct target_maps *tm,
		       const struct ranges *global, const struct ranges *caller)
{
	static uint64_t buf[SCAN_MAX / 8];
	uint64_t sp = arch_regs_sp(&t->regs), top = 0;
	size_t len;
	int res = 0;

	for (int i = 0; i < tm->n; i++)
		if (sp >= tm->m[i].start && sp < tm->m[i].end)
			top = tm->m[i].end;
	if (!top || top - sp > SCAN_MAX)
		return -1;
	len = (size_t)(top - (sp & ~7ULL));
	if (remote_read(pid, sp & ~7ULL, buf, len))
		return -1;
	for (size_t i = 0; i < len / 8; i++) {
		if (in_ranges(global, buf[i] - 1))
			return 2;
		if (in_ranges(caller, buf[i] - 1))
			res = 1;
	}
	return res;
}

/*
 * Where a thread is: 2 inside a global-risky function, 1 inside one the
 * caller must not be in, 0 neither. why says which and where. exact: the
 * thread is wanted as the caller (none is picked yet, or it is the main
 * thread), so a word on its stack that points into the allocator is
 * unwound to tell a frame from a stale value left there by an earlier
 * call; otherwise such a maybe is a no. (A single-threaded program that
 * allocates all the time, an interpreter, has such words below nearly
 * every stop.)
 */
static int where_is(unw_addr_space_t as, pid_t pid, const struct target_maps *tm,
		    struct sthread *t, const struct ranges *global, const struct ranges *caller,
		    int exact, char *why, size_t len)
{
	const char *w;
	unw_cursor_t c;
	int res = 0;
	void *upt;

	if ((w = in_ranges(global, arch_regs_pc(&t->regs))) != NULL) {
		snprintf(why, len, "thread %d is inside %s (ip %#llx)", (int)t->tid, w,
			 (unsigned long long)arch_regs_pc(&t->regs));
		return 2;
	}
	if ((w = in_ranges(caller, arch_regs_pc(&t->regs))) != NULL) {
		snprintf(why, len, "thread %d is inside %s", (int)t->tid, w);
		res = 1;
	}
	switch (stack_words(pid, t, tm, global, caller)) {
	case 0:
		return res;
	case 1:
		if (res)	/* inside already, and no word into a global range */
			return res;
		if (exact)
			break;
		snprintf(why, len, "thread %d may be inside the allocator", (int)t->tid);
		return 1;
	}
	upt = _UPT_create(t->tid);
	if (!upt)
		return res;
	if (unw_init_remote(&c, as, upt) == 0) {
		for (int d = 0; d < MAX_FRAMES && unw_step(&c) > 0; d++) {
			unw_word_t ip;

			if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0)
				break;
			/* A return address: the call is just before it. */
			if ((w = in_ranges(global, (uint64_t)ip - 1)) != NULL) {
				snprintf(why, len, "thread %d is inside %s (called at %#llx)",
					 (int)t->tid, w, (unsigned long long)ip);
				res = 2;
				break;
			}
			if (!res && (w = in_ranges(caller, (uint64_t)ip - 1)) != NULL) {
				snprintf(why, len, "thread %d is inside %s", (int)t->tid, w);
				res = 1;
			}
		}
	}
	_UPT_destroy(upt);
	return res;
}

/*
 * Is it a safe point? 0 yes, and *caller is the thread to make the calls
 * in (the main thread when it can); 1 no (why says which thread and where).
 * Frames are unwound with the program's CFI; where that stops, the frames
 * seen so far are what is known.
 */
static int unsafe(unw_addr_space_t as, const struct target_maps *tm, struct stopset *s,
		  const struct ranges *global, const struct ranges *caller, int *pick, char *why,
		  size_t len)
{
	int res = 0;

	*pick = -1;
	if (!as)
		return 0;
	for (int i = 0; i < s->n && res != 2; i++) {
		res = where_is(as, s->pid, tm, &s->t[i], global, caller,
			       *pick < 0 || s->t[i].tid == s->pid, why, len);
		if (res == 0 && (*pick < 0 || s->t[i].tid == s->pid))
			*pick = i;
		if (res == 1)
			res = 0;
	}
	if (res == 2)
		return 1;
	if (*pick < 0) {
		snprintf(why + strlen(why), len - strlen(why), ", as is every other thread");
		return 1;
	}
	return 0;
}

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* Stop every thread at a safe point; *pick: the thread to call in. The
 * ranges are found before the process is stopped (its files are read). */
static int stop_safely(pid_t pid, const struct target_maps *tm, struct stopset *s,
		       const struct ranges *global,
		       const struct ranges *caller, int *tries, int *pick, char *err, size_t errlen)
{
	unw_addr_space_t as = unw_create_addr_space(&_UPT_accessors, 0);
	char why[300] = "";
	int rc = 0;

	/* The unwind tables read once for all threads and tries. */
	if (as)
		unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
	for (*tries = 1; unsafe(as, tm, s, global, caller, pick, why, sizeof(why)); (*tries)++) {
		if (inject_cancelled && inject_cancelled()) {
			snprintf(err, errlen, "interrupted: pid %d was let go as it was", (int)pid);
			rc = -ECANCELED;
			break;
		}
		if (*tries >= SAFE_TRIES) {
			snprintf(err, errlen,
				 "pid %d: no safe moment to load the client in %d tries: %s "
				 "(it holds the allocator's or the loader's lock); try again",
				 (int)pid, SAFE_TRIES, why);
			rc = -EAGAIN;
			break;
		}
		if ((rc = run_briefly(s, RUN_US, err, errlen)) != 0)
			break;
		if (s->changed) {
			snprintf(err, errlen, "pid %d executed another program while held: let go",
				 (int)pid);
			rc = -ESRCH;
			break;
		}
	}
	if (as)
		unw_destroy_addr_space(as);
	return rc;
}

/* A line of /proc/PID/status, as a number; -1 when absent. */
static long status_num(const char *status, const char *key)
{
	const char *p = strstr(status, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

static int read_status(pid_t pid, char *buf, size_t len, char *err, size_t errlen)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "no process %d%s", (int)pid,
			 errno == ENOENT ? " (it has exited?)" : "");
		return -ESRCH;
	}
	n = read(fd, buf, len - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	if (strstr(buf, "\nState:\tT") || strstr(buf, "\nState:\tt")) {
		snprintf(err, errlen, "pid %d is stopped (job control or a debugger): continue it "
			 "first (kill -CONT %d)", (int)pid, (int)pid);
		return -EAGAIN;
	}
	if (strstr(buf, "\nState:\tZ") || strstr(buf, "\nState:\tX")) {
		snprintf(err, errlen, "pid %d has exited (a zombie): nothing to attach to", (int)pid);
		return -ESRCH;
	}
	if (status_num(buf, "\nTracerPid:") > 0) {
		snprintf(err, errlen,
			 "pid %d is already traced by pid %ld (a debugger or strace?): only one "
			 "tracer at a time; detach that one first",
			 (int)pid, status_num(buf, "\nTracerPid:"));
		return -EBUSY;
	}
	return 0;
}

static void seize_error(pid_t pid, char *err, size_t errlen)
{
	char buf[16] = "";
	int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
	size_t l = strlen(err);

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) < 0)
			buf[0] = 0;
		close(fd);
	}
	if (buf[0] >= '1' && buf[0] <= '3')
		snprintf(err + l, errlen - l,
			 "; kernel.yama.ptrace_scope is %c: %s", buf[0],
			 buf[0] == '1' ? "only a parent may trace its descendants (run heapprofctl as "
					 "root, or set kernel.yama.ptrace_scope=0)" :
			 buf[0] == '2' ? "only root (CAP_SYS_PTRACE) may trace" :
					 "nobody may trace (until reboot)");
	else
		snprintf(err + l, errlen - l, " (pid %d belongs to another user or is not dumpable: "
			 "run heapprofctl as root)", (int)pid);
}

/* Read an int of the client in the process, by symbol. */
static int client_int(pid_t pid, const struct objs *ob, const char *name, int *v)
{
	uint64_t a;
	int rc;

	if (!ob->have_client)
		return -ENOENT;
	if ((rc = tobj_sym(pid, &ob->client, name, &a)) != 0)
		return rc;
	return remote_read(pid, a, v, sizeof(*v));
}

static int same_file_in_target(pid_t pid, const char *lib, char *err, size_t errlen)
{
	char p[PATH_MAX + 64], a[64], b[64];
	struct stat mine, theirs;
	ssize_t na, nb;

	if (stat(lib, &mine)) {
		snprintf(err, errlen, "%s: %s", lib, strerror(errno));
		return -ENOENT;
	}
	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, lib);
	if (!stat(p, &theirs) && theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino)
		return 0;
	snprintf(a, sizeof(a), "/proc/%d/ns/mnt", (int)pid);
	na = readlink(a, p, sizeof(p) - 1);
	nb = readlink("/proc/self/ns/mnt", b, sizeof(b) - 1);
	if (na > 0 && nb > 0 && (na != nb || memcmp(p, b, (size_t)na)))
		snprintf(err, errlen,
			 "pid %d runs in another mount namespace, where %s is %s: make the client "
			 "available at that path inside it (a bind mount), or attach from inside it",
			 (int)pid, lib, errno == ENOENT ? "missing" : "another file or unreadable");
	else
		snprintf(err, errlen, "pid %d cannot see %s (its root is elsewhere)", (int)pid, lib);
	return -ENOENT;
}

static int preflight(pid_t pid, const char *lib, struct target_maps *tm, struct objs *ob,
		     struct target_id *id, char *err, size_t errlen)
{
	char status[4096];
	int rc, inj = 0;
	long sc;

	if ((rc = read_status(pid, status, sizeof(status), err, errlen)) != 0)
		return rc;
	sc = status_num(status, "\nSeccomp:");
	if (sc > 0) {
		snprintf(err, errlen,
			 "pid %d runs under seccomp (%s): the client's system calls (open, mmap, socket) "
			 "could be refused or kill it; not attaching",
			 (int)pid, sc == 1 ? "strict mode" : "a filter");
		return -EPERM;
	}
	if ((rc = tmaps_read(pid, tm)) != 0 || (rc = target_id_read(pid, id)) != 0) {
		snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-rc));
		if (rc == -EACCES)
			seize_error(pid, err, errlen);	/* whose it is, Yama */
		return rc;
	}
	if ((rc = find_objs(pid, tm, ob, err, errlen)) != 0)
		return rc;
	if (ob->have_client) {
		if (client_int(pid, ob, "heapprofd_client_injected", &inj))
			inj = 0;
		if (!inj)
			return 1;	/* preloaded: the usual attach */
	}
	return same_file_in_target(pid, lib, err, errlen);
}

/* The functions called in the process, found before it is stopped. */
struct fns {
	uint64_t dlopen, dlerror;
	int old_dlopen;		/* __libc_dlopen_mode (glibc before 2.34) */
	/* The client's function: in the process when it is loaded already,
	 * else its value in our file, placed once dlopen has loaded it. */
	uint64_t client_fn;
	int client_placed;
};

static int find_fns(pid_t pid, const struct objs *ob, const char *lib, const char *fn,
		    struct fns *f, char *err, size_t errlen)
{
	static const char *const names[] = { "dlopen", "__libc_dlopen_mode", "dlerror" };
	uint64_t a[3], sz[3];

	memset(f, 0, sizeof(*f));
	if (!tobj_syms(pid, &ob->libc, names, 3, a, sz)) {
		f->dlopen = a[0] ? a[0] : a[1];
		f->old_dlopen = !a[0];
		f->dlerror = a[2];
	}
	f->client_placed = ob->have_client;
	if ((!ob->have_client && !f->dlopen) ||
	    (ob->have_client ? tobj_sym(pid, &ob->client, fn, &f->client_fn) :
			       file_sym(lib, fn, &f->client_fn))) {
		snprintf(err, errlen, "cannot find %s in pid %d's libc or %s in %s",
			 f->old_dlopen ? "__libc_dlopen_mode" : "dlopen", (int)pid, fn, lib);
		return -ENOENT;
	}
	return 0;
}

/* dlopen(lib) in the process, with dlerror's text on failure; *handle:
 * the client's struct link_map. */
static int remote_dlopen(struct stopset *s, struct sthread *t, const struct fns *f,
			 const char *lib, uint64_t *handle, char *err, size_t errlen)
{
	uint64_t args[2] = { RC_BLOB(0), RTLD_NOW | RTLD_LOCAL }, msg = 0;
	int rc;

	if (f->old_dlopen)
		args[1] |= 0x80000000;	/* __RTLD_DLOPEN */
	*handle = 0;
	rc = remote_call(s, t, 1, f->dlopen, args, 2, lib, strlen(lib) + 1, handle, err, errlen);
	if (rc)
		return rc;
	if (*handle)
		return 0;
	if (f->dlerror && !remote_call(s, t, 1, f->dlerror, NULL, 0, NULL, 0, &msg, err, errlen) &&
	    msg) {
		char text[400] = "";

		remote_str(s->pid, msg, text, sizeof(text));
		snprintf(err, errlen, "dlopen of %s in pid %d failed: %s", lib, (int)s->pid, text);
	} else if (!s->abandoned && !s->changed) {
		snprintf(err, errlen, "dlopen of %s in pid %d failed", lib, (int)s->pid);
	}
	return -ENOEXEC;
}

/* Where the client's function is now: the object dlopen returned (its
 * link map entry), which must be our file. */
static int client_fn_addr(pid_t pid, const char *lib, uint64_t handle, struct fns *f,
			  char *err, size_t errlen)
{
	struct target_maps tm;
	struct stat mine, theirs;
	struct tobj o;
	uint64_t bias;
	int fd = -1, rc;

	rc = remote_read(pid, handle, &bias, sizeof(bias));	/* l_addr */
	if (!rc)
		rc = tmaps_read(pid, &tm);
	if (rc) {
		snprintf(err, errlen, "cannot read pid %d after dlopen", (int)pid);
		return -ESRCH;
	}
	rc = tobj_at(pid, &tm, bias, &o);
	if (!rc)
		fd = tmap_open(pid, o.first);
	if (rc || fd < 0 || fstat(fd, &theirs) || stat(lib, &mine) || mine.st_dev != theirs.st_dev ||
	    mine.st_ino != theirs.st_ino) {
		snprintf(err, errlen, "the object dlopen loaded in pid %d is not %s", (int)pid, lib);
		rc = -ENOENT;
	} else {
		f->client_fn += bias;
		f->client_placed = 1;
	}
	if (fd >= 0)
		close(fd);
	tmaps_free(&tm);
	return rc;
}

static const char *attach_errstr(int rc)
{
	switch (rc) {
	case -ENOTCONN: return "the client reached no daemon transport";
	case -EALREADY: return "the client there is profiling already (detach first)";
	case -EPERM: return "the client there was not loaded by attach";
	case -ENOENT: return "the client found no hooks to install";
	default: return strerror(-rc);
	}
}

/* Stopped, and the same process as the one looked at before. */
static int stop_same(struct stopset *s, pid_t pid, const struct target_id *id, char *err,
		     size_t errlen)
{
	int rc = stop_all(s, pid, err, errlen);

	if (rc) {
		if (rc == -EPERM)
			seize_error(pid, err, errlen);
		return rc;
	}
	if (!target_id_same(id, &s->id)) {
		snprintf(err, errlen, "pid %d changed (another program, or other credentials) "
			 "since it was looked at: not attaching", (int)pid);
		s->changed = 1;
		return -ESRCH;
	}
	return 0;
}

/* Put the trampoline's page back (unless a call still needs it) and let
 * the threads go. */
static void let_go(struct stopset *s)
{
	rc_remove_trampoline(s);
	release_all(s);
}

int hp_inject_attach(pid_t pid, const char *lib, const char *config, struct inject_times *tt,
		     char *err, size_t errlen)
{
	struct ranges global, caller;
	struct target_maps tm = { 0 };
	struct target_id id;
	struct stopset s = { 0 };
	struct sthread *t;
	struct objs ob;
	struct fns f;
	uint64_t t0, t1, handle, ret = 0, a0 = RC_BLOB(0);
	int rc, pick;

	memset(tt, 0, sizeof(*tt));
	memset(&ob, 0, sizeof(ob));
	rc_tick_start();
	rc = preflight(pid, lib, &tm, &ob, &id, err, errlen);
	if (!rc)
		rc = find_fns(pid, &ob, lib, "heapprofd_client_attach", &f, err, errlen);
	if (rc) {
		rc_tick_stop();
		free_objs(&ob);
		tmaps_free(&tm);
		return rc;
	}
	risky_ranges(pid, &ob, &global, &caller, 1);
	t0 = mono_us();
	rc = stop_same(&s, pid, &id, err, errlen);
	tt->stop_us = mono_us() - t0;
	if (rc)
		goto out;
	t1 = mono_us();
	rc = stop_safely(pid, &tm, &s, &global, &caller, &tt->tries, &pick, err, errlen);
	tt->safe_us = mono_us() - t1;
	if (!rc)
		rc = place_trampoline(&s, &ob, err, errlen);
	if (rc)
		goto out;
	t = &s.t[pick];
	if (!f.client_placed) {
		t1 = mono_us();
		rc = remote_dlopen(&s, t, &f, lib, &handle, err, errlen);
		tt->dlopen_us = mono_us() - t1;
		if (!rc)
			rc = client_fn_addr(pid, lib, handle, &f, err, errlen);
		if (rc)
			goto out;
	}
	t1 = mono_us();
	rc = remote_call(&s, t, 1, f.client_fn, &a0, 1, config, strlen(config) + 1, &ret, err,
			 errlen);
	tt->call_us = mono_us() - t1;
	if (!rc && (int)ret < 0) {
		rc = (int)ret;
		snprintf(err, errlen, "the client in pid %d: %s", (int)pid, attach_errstr(rc));
	}
out:
	let_go(&s);
	rc_tick_stop();
	tt->stopped_us = mono_us() - t0;
	free_objs(&ob);
	tmaps_free(&tm);
	return rc;
}

/*
 * Call fn() of the client in a thread stopped at a safe point (client_too:
 * no thread inside the client either), again after letting the threads run
 * briefly while it answers -EBUSY (a thread was in a section the client
 * guards). *ret is its answer.
 */
static int call_when_safe(struct stopset *s, const struct target_maps *tm,
			  const struct objs *ob, int client_too, uint64_t fn,
			  struct inject_times *tt, uint64_t *ret, char *err, size_t errlen)
{
	struct ranges global, caller;
	int rc = 0, busy;

	risky_ranges(s->pid, ob, &global, &caller, client_too);
	for (busy = 0; busy < SAFE_TRIES; busy++) {
		uint64_t t1 = mono_us();
		int tries, pick;

		rc = stop_safely(s->pid, tm, s, &global, &caller, &tries, &pick, err, errlen);
		tt->tries += tries;
		tt->safe_us += mono_us() - t1;
		if (!rc && !s->tramp)
			rc = place_trampoline(s, ob, err, errlen);
		if (rc)
			return rc;
		t1 = mono_us();
		rc = remote_call(s, &s->t[pick], 0, fn, NULL, 0, NULL, 0, ret, err, errlen);
		tt->call_us += mono_us() - t1;
		if (rc || (int)*ret != -EBUSY)
			return rc;
		if ((rc = run_briefly(s, RUN_US, err, errlen)) != 0)
			return rc;
	}
	return rc;
}

/*
 * Detach's first half (heapprofd_client_unhook): the GOT slots put back at
 * a point where no thread is in the allocator or the loader, wherever else
 * it is, in the client too. From then on no call enters the client, so the
 * threads leave it as they run, and the second half (no thread inside the
 * client) finds its safe point at once, however busy the program.
 */
static int unhook_first(struct stopset *s, const struct target_maps *tm, const struct objs *ob,
			uint64_t fn, struct inject_times *tt, char *err, size_t errlen)
{
	uint64_t ret = 0;
	int rc = call_when_safe(s, tm, ob, 0, fn, tt, &ret, err, errlen);

	if (rc)
		return rc;
	if ((int)ret < 0) {
		snprintf(err, errlen, "the client in pid %d did not take its hooks out: %s",
			 (int)s->pid, strerror(-(int)ret));
		return (int)ret;
	}
	/* The threads stopped inside the client run out of it. */
	return run_briefly(s, RUN_US, err, errlen);
}

int hp_inject_detach(pid_t pid, struct inject_times *tt, char *err, size_t errlen)
{
	char status[4096];
	struct target_maps tm;
	struct target_id id;
	struct stopset s = { 0 };
	struct objs ob;
	uint64_t t0, fn, unhook, ret = 0;
	int rc, inj = 0;

	memset(tt, 0, sizeof(*tt));
	memset(&ob, 0, sizeof(ob));
	if ((rc = read_status(pid, status, sizeof(status), err, errlen)) != 0)
		return rc;
	if ((rc = tmaps_read(pid, &tm)) != 0 || target_id_read(pid, &id)) {
		snprintf(err, errlen, "no process %d (it has exited?)", (int)pid);
		tmaps_free(&tm);
		return -ESRCH;
	}
	rc_tick_start();
	if (find_objs(pid, &tm, &ob, err, errlen) || !ob.have_client ||
	    client_int(pid, &ob, "heapprofd_client_injected", &inj) || inj != 2)
		rc = 1;	/* preloaded, or not attached by us: nothing here */
	else if ((rc = tobj_sym(pid, &ob.client, "heapprofd_client_detach", &fn)) != 0)
		snprintf(err, errlen, "cannot read the client's file in pid %d", (int)pid);
	else if (tobj_sym(pid, &ob.client, "heapprofd_client_unhook", &unhook))
		unhook = 0;	/* a client without the first half: all at once */
	if (rc) {
		rc_tick_stop();
		free_objs(&ob);
		tmaps_free(&tm);
		return rc;
	}
	t0 = mono_us();
	rc = stop_same(&s, pid, &id, err, errlen);
	if (rc)
		goto out;
	tt->stop_us = mono_us() - t0;
	if (unhook && (rc = unhook_first(&s, &tm, &ob, unhook, tt, err, errlen)) != 0)
		goto out;
	/* No other thread may run while the ring is unmapped: all stay
	 * stopped during the call. */
	rc = call_when_safe(&s, &tm, &ob, 1, fn, tt, &ret, err, errlen);
	if (!rc && (int)ret < 0) {
		rc = (int)ret;
		snprintf(err, errlen, "the client in pid %d refused to detach: %s", (int)pid,
			 strerror(-rc));
	}
out:
	let_go(&s);
	rc_tick_stop();
	tt->stopped_us = mono_us() - t0;
	free_objs(&ob);
	tmaps_free(&tm);
	return rc;
}
