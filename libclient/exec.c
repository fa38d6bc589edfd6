// SPDX-License-Identifier: GPL-2.0
/*
 * The exec family, interposed so that the image about to be replaced hands
 * over what it has before it is gone: exec runs no destructor, so without
 * this the per-thread exact counters of the old image would never reach the
 * control page, and a kernel session whose consumer has not attached yet
 * would be freed by the module with all its samples (the same bounded wait
 * as at exit, attach_wait.c). A failed exec returns to the program as
 * before, with its errno.
 *
 * glibc's exec functions call its internal execve directly, so each one is
 * wrapped; the variadic ones build their argument vector and call the
 * vector forms, as glibc's own do. Nothing here runs in a vfork child
 * (posix_spawn uses the internal execve, and an explicit vfork child is
 * another process sharing this one's memory: it does not own the session).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "client.h"

#define HP_EXEC_MAX_ARGS 4096	/* beyond, the real function gets E2BIG */

static void before_exec(void)
{
	int e = errno;

	if (!hp_sess.live || __atomic_load_n(&hp_sess.stopped, __ATOMIC_RELAXED) ||
	    hp_sess.pid != getpid())
		goto out;
	hp_debug("exec: publishing the counters before the image goes");
	hp_counters_flush_all();
	hp_exit_wait();		/* kernel session, never attached: bounded */
out:
	errno = e;
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
static execve_fn r_execve, r_execvpe;
static execv_fn r_execv, r_execvp;
static fexecve_fn r_fexecve;

/* At start-up, so that an exec (perhaps in a vfork child) normally needs no
 * dlsym; an exec before the constructor ran looks its function up then. */
#define LOOKUP(var, type, name) \
	do { \
		if (!__atomic_load_n(&(var), __ATOMIC_RELAXED)) \
			__atomic_store_n(&(var), (type)dlsym(RTLD_NEXT, name), \
					 __ATOMIC_RELAXED); \
	} while (0)

void hp_exec_init(void)
{
	LOOKUP(r_execve, execve_fn, "execve");
	LOOKUP(r_execv, execv_fn, "execv");
	LOOKUP(r_execvp, execv_fn, "execvp");
	LOOKUP(r_execvpe, execve_fn, "execvpe");
	LOOKUP(r_fexecve, fexecve_fn, "fexecve");
}

#define REAL(fn) \
	do { \
		if (!__atomic_load_n(&(fn), __ATOMIC_RELAXED)) \
			hp_exec_init(); \
		if (!(fn)) { \
			errno = ENOSYS; \
			return -1; \
		} \
		before_exec(); \
	} while (0)

HP_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	REAL(r_execve);
	return r_execve(path, argv, envp);
}

HP_EXPORT int execv(const char *path, char *const argv[])
{
	REAL(r_execv);
	return r_execv(path, argv);
}

HP_EXPORT int execvp(const char *file, char *const argv[])
{
	REAL(r_execvp);
	return r_execvp(file, argv);
}

HP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	REAL(r_execvpe);
	return r_execvpe(file, argv, envp);
}

HP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	REAL(r_fexecve);
	return r_fexecve(fd, argv, envp);
}

/* Count the arguments after arg0 up to the terminating NULL. */
static int count_args(va_list ap)
{
	int n = 1;

	while (va_arg(ap, char *)) {
		if (++n > HP_EXEC_MAX_ARGS)
			return -1;
	}
	return n;
}

enum exec_list_kind { EXEC_L, EXEC_LP, EXEC_LE };

/*
 * The list forms: argv on the stack (as glibc does: exec needs no heap, and
 * a vfork child must not touch its parent's), then the vector form.
 */
static int exec_list(enum exec_list_kind kind, const char *path, const char *arg0,
		     va_list ap)
{
	char *const *envp;
	va_list count;
	int n;

	va_copy(count, ap);
	n = count_args(count);
	va_end(count);
	if (n < 0) {
		errno = E2BIG;
		return -1;
	}
	char *argv[n + 1];

	argv[0] = (char *)arg0;
	for (int i = 1; i <= n; i++)
		argv[i] = va_arg(ap, char *);
	switch (kind) {
	case EXEC_LP:
		return execvp(path, argv);
	case EXEC_LE:
		envp = va_arg(ap, char *const *);
		return execve(path, argv, envp);
	default:
		return execv(path, argv);
	}
}

HP_EXPORT int execl(const char *path, const char *arg0, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg0);
	r = exec_list(EXEC_L, path, arg0, ap);
	va_end(ap);
	return r;
}

HP_EXPORT int execlp(const char *file, const char *arg0, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg0);
	r = exec_list(EXEC_LP, file, arg0, ap);
	va_end(ap);
	return r;
}

HP_EXPORT int execle(const char *path, const char *arg0, ...)
{
	va_list ap;
	int r;

	va_start(ap, arg0);
	r = exec_list(EXEC_LE, path, arg0, ap);
	va_end(ap);
	return r;
}
