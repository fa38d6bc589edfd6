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

/* Every executable mapping of the object mp is. */
static void add_object_text(struct ranges *rs, const struct target_maps *tm, const char *path,
			    const char *what)
{
	for (int i = 0; i < tm->n; i++)
		if (!strcmp(tm->m[i].path, path) && tm->m[i].perms[2] == 'x')
			add_range(rs, tm->m[i].start, tm->m[i].end, what);
}

static void add_fns(pid_t pid, const struct tmap *libc, uint64_t bias, struct ranges *rs,
		    const char *const *fns, size_t n)
{
	uint64_t a[NCALLER + NGLOBAL], sz[NCALLER + NGLOBAL];

	if (target_syms(pid, libc->path, bias, fns, n, a, sz))
		return;
	for (size_t i = 0; i < n; i++)
		if (a[i] && sz[i])
			add_range(rs, a[i], a[i] + sz[i], fns[i]);
}

static void risky_ranges(pid_t pid, const struct target_maps *tm, struct ranges *global,
			 struct ranges *caller)
{
	const struct tmap *libc = tmaps_find(tm, "/libc.so.6"), *ld, *cl;
	uint64_t bias;

	global->n = caller->n = 0;
	if (libc && !tmaps_bias(pid, tm, libc, &bias)) {
		add_fns(pid, libc, bias, global, global_fns, NGLOBAL);
		add_fns(pid, libc, bias, caller, caller_fns, NCALLER);
	}
	ld = tmaps_find(tm, "/ld-linux-x86-64.so.2");
	if (ld)
		add_object_text(global, tm, ld->path, "the dynamic loader");
	/* Detach takes the client's hooks out and unmaps its ring. */
	cl = tmaps_find(tm, "/" CLIENT_NAME);
	if (cl)
		add_object_text(global, tm, cl->path, "the client");
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
	uint64_t sp = t->regs.rsp, top = 0;
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

	if ((w = in_ranges(global, t->regs.rip)) != NULL) {
		snprintf(why, len, "thread %d is inside %s (ip %#llx)", (int)t->tid, w,
			 (unsigned long long)t->regs.rip);
		return 2;
	}
	if ((w = in_ranges(caller, t->regs.rip)) != NULL) {
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
 * The call returns by a fault (SIGSEGV at address 0). The kernel unblocks
 * a blocked SIGSEGV (and resets an ignored one) when it raises the fault,
 * which would outlast the call: such a thread does not make the calls.
 */
static int segv_blocked(pid_t pid, pid_t tid)
{
	char p[80], line[128];
	unsigned long long blk = 0, ign = 0;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	f = fopen(p, "re");
	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "SigBlk: %llx", &blk);
		sscanf(line, "SigIgn: %llx", &ign);
	}
	fclose(f);
	return ((blk | ign) >> (SIGSEGV - 1)) & 1;
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
		if (res == 0 && (*pick < 0 || s->t[i].tid == s->pid) &&
		    !segv_blocked(s->pid, s->t[i].tid))
			*pick = i;
		if (res == 1)
			res = 0;
	}
	if (res == 2)
		return 1;
	if (*pick < 0) {
		snprintf(why + strlen(why), len - strlen(why),
			 ", as is every other thread (or it blocks SIGSEGV)");
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
static int client_int(pid_t pid, const struct target_maps *tm, const char *name, int *v)
{
	const struct tmap *cl = tmaps_find(tm, "/" CLIENT_NAME);
	uint64_t bias, a;
	int rc;

	if (!cl)
		return -ENOENT;
	if ((rc = tmaps_bias(pid, tm, cl, &bias)) || (rc = target_sym(pid, cl->path, bias, name, &a, NULL)))
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

static int preflight(pid_t pid, const char *lib, struct target_maps *tm, char *err, size_t errlen)
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
	if ((rc = tmaps_read(pid, tm)) != 0) {
		snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-rc));
		if (rc == -EACCES)
			seize_error(pid, err, errlen);	/* whose it is, Yama */
		return rc;
	}
	if (!tmaps_find(tm, "/ld-linux-x86-64.so.2") || !tmaps_find(tm, "/libc.so.6")) {
		snprintf(err, errlen,
			 "pid %d is statically linked (no dynamic loader or libc in its maps): "
			 "there is no loader to load the client with, so it cannot be profiled",
			 (int)pid);
		return -ENOEXEC;
	}
	if (tmaps_find(tm, "/" CLIENT_NAME)) {
		if (client_int(pid, tm, "heapprofd_client_injected", &inj))
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
	/* The client's function: its value in the file and the file's first
	 * PT_LOAD, placed once the client is mapped. */
	char client_path[512];
	uint64_t client_fn, client_vaddr, client_off;
};

static int find_fns(pid_t pid, const struct target_maps *tm, const char *lib, const char *fn,
		    struct fns *f, char *err, size_t errlen)
{
	const struct tmap *libc = tmaps_find(tm, "/libc.so.6"), *cl = tmaps_find(tm, "/" CLIENT_NAME);
	static const char *const names[] = { "dlopen", "__libc_dlopen_mode", "dlerror" };
	uint64_t bias, a[3], sz[3];

	memset(f, 0, sizeof(*f));
	if (libc && !tmaps_bias(pid, tm, libc, &bias) &&
	    !target_syms(pid, libc->path, bias, names, 3, a, sz)) {
		f->dlopen = a[0] ? a[0] : a[1];
		f->old_dlopen = !a[0];
		f->dlerror = a[2];
	}
	snprintf(f->client_path, sizeof(f->client_path), "%s", cl ? cl->path : lib);
	if ((!cl && !f->dlopen) ||
	    target_sym(pid, f->client_path, 0, fn, &f->client_fn, NULL) ||
	    elf_load0(pid, f->client_path, &f->client_vaddr, &f->client_off)) {
		snprintf(err, errlen, "cannot find %s in pid %d's libc or %s in %s",
			 f->old_dlopen ? "__libc_dlopen_mode" : "dlopen", (int)pid, fn, f->client_path);
		return -ENOENT;
	}
	return 0;
}

/* dlopen(lib) in the process, with dlerror's text on failure. */
static int remote_dlopen(pid_t pid, struct stopset *s, struct sthread *t, const struct fns *f,
			 const char *lib, char *err, size_t errlen)
{
	uint64_t args[2] = { RC_BLOB(0), RTLD_NOW | RTLD_LOCAL }, h = 0, msg = 0;
	int rc;

	if (f->old_dlopen)
		args[1] |= 0x80000000;	/* __RTLD_DLOPEN */
	rc = remote_call(pid, s, t, f->dlopen, args, 2, lib, strlen(lib) + 1, &h, err, errlen);
	if (rc)
		return rc;
	if (h)
		return 0;
	if (f->dlerror && !remote_call(pid, s, t, f->dlerror, NULL, 0, NULL, 0, &msg, err, errlen) &&
	    msg) {
		char text[400] = "";

		for (size_t i = 0; i < sizeof(text) - 1; i++)
			if (remote_read(pid, msg + i, &text[i], 1) || !text[i])
				break;
		snprintf(err, errlen, "dlopen of %s in pid %d failed: %s", lib, (int)pid, text);
	} else {
		snprintf(err, errlen, "dlopen of %s in pid %d failed", lib, (int)pid);
	}
	return -ENOEXEC;
}

/* Where the client's function is now (after dlopen: its maps, read again). */
static int client_fn_addr(pid_t pid, const struct fns *f, uint64_t *addr, char *err, size_t errlen)
{
	struct target_maps tm;
	uint64_t bias;
	int rc = tmaps_read(pid, &tm);

	if (!rc)
		rc = tmaps_bias_at(&tm, f->client_path, f->client_vaddr, f->client_off, &bias);
	tmaps_free(&tm);
	if (rc) {
		snprintf(err, errlen, "the client is not mapped in pid %d after dlopen", (int)pid);
		return -ENOENT;
	}
	*addr = bias + f->client_fn;
	return 0;
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

int hp_inject_attach(pid_t pid, const char *lib, const char *config, struct inject_times *tt,
		     char *err, size_t errlen)
{
	struct ranges global, caller;
	struct target_maps tm = { 0 };
	struct stopset s;
	struct sthread *t;
	struct fns f;
	uint64_t t0, t1, fn, ret = 0, a0 = RC_BLOB(0);
	int rc, pick, loaded;

	memset(tt, 0, sizeof(*tt));
	rc = preflight(pid, lib, &tm, err, errlen);
	if (!rc)
		rc = find_fns(pid, &tm, lib, "heapprofd_client_attach", &f, err, errlen);
	if (rc) {
		tmaps_free(&tm);
		return rc;
	}
	risky_ranges(pid, &tm, &global, &caller);
	loaded = tmaps_find(&tm, "/" CLIENT_NAME) != NULL;
	t0 = mono_us();
	rc = stop_all(&s, pid, err, errlen);
	tt->stop_us = mono_us() - t0;
	if (rc) {
		if (rc == -EPERM)
			seize_error(pid, err, errlen);
		goto out;
	}
	t1 = mono_us();
	rc = stop_safely(pid, &tm, &s, &global, &caller, &tt->tries, &pick, err, errlen);
	tt->safe_us = mono_us() - t1;
	if (rc)
		goto out;
	t = &s.t[pick];
	if (!loaded) {
		t1 = mono_us();
		rc = remote_dlopen(pid, &s, t, &f, lib, err, errlen);
		tt->dlopen_us = mono_us() - t1;
		if (rc)
			goto out;
	}
	t1 = mono_us();
	rc = client_fn_addr(pid, &f, &fn, err, errlen);
	if (!rc)
		rc = remote_call(pid, &s, t, fn, &a0, 1, config, strlen(config) + 1, &ret, err, errlen);
	tt->call_us = mono_us() - t1;
	if (!rc && (int)ret < 0) {
		rc = (int)ret;
		snprintf(err, errlen, "the client in pid %d: %s", (int)pid, attach_errstr(rc));
	}
out:
	release_all(&s);
	tt->stopped_us = mono_us() - t0;
	tmaps_free(&tm);
	return rc;
}

int hp_inject_detach(pid_t pid, struct inject_times *tt, char *err, size_t errlen)
{
	struct ranges global, caller;
	char status[4096];
	struct target_maps tm;
	const struct tmap *cl;
	struct stopset s;
	uint64_t t0, bias, fn, ret = 0;
	int rc, inj = 0, busy;

	memset(tt, 0, sizeof(*tt));
	if ((rc = read_status(pid, status, sizeof(status), err, errlen)) != 0)
		return rc;
	if ((rc = tmaps_read(pid, &tm)) != 0) {
		snprintf(err, errlen, "no process %d (it has exited?)", (int)pid);
		return -ESRCH;
	}
	cl = tmaps_find(&tm, "/" CLIENT_NAME);
	if (!cl || client_int(pid, &tm, "heapprofd_client_injected", &inj) || inj != 2) {
		tmaps_free(&tm);
		return 1;	/* preloaded, or not attached by us: nothing here */
	}
	if ((rc = tmaps_bias(pid, &tm, cl, &bias)) != 0 ||
	    (rc = target_sym(pid, cl->path, bias, "heapprofd_client_detach", &fn, NULL)) != 0) {
		snprintf(err, errlen, "cannot read the client's file in pid %d", (int)pid);
		tmaps_free(&tm);
		return rc;
	}
	risky_ranges(pid, &tm, &global, &caller);
	t0 = mono_us();
	rc = stop_all(&s, pid, err, errlen);
	if (rc) {
		if (rc == -EPERM)
			seize_error(pid, err, errlen);
		goto out;
	}
	tt->stop_us = mono_us() - t0;
	for (busy = 0; busy < SAFE_TRIES; busy++) {
		uint64_t t1 = mono_us();
		int tries, pick;

		rc = stop_safely(pid, &tm, &s, &global, &caller, &tries, &pick, err, errlen);
		tt->tries += tries;
		tt->safe_us += mono_us() - t1;
		if (rc)
			break;
		/* No other thread may run while the ring is unmapped. */
		t1 = mono_us();
		rc = remote_call(pid, NULL, &s.t[pick], fn, NULL, 0, NULL, 0, &ret, err, errlen);
		tt->call_us += mono_us() - t1;
		if (rc || (int)ret != -EBUSY)
			break;
		if ((rc = run_briefly(&s, RUN_US, err, errlen)) != 0)
			break;
	}
	if (!rc && (int)ret < 0) {
		rc = (int)ret;
		snprintf(err, errlen, "the client in pid %d refused to detach: %s", (int)pid,
			 strerror(-rc));
	}
out:
	release_all(&s);
	tt->stopped_us = mono_us() - t0;
	tmaps_free(&tm);
	return rc;
}
