// SPDX-License-Identifier: GPL-2.0
/*
 * A library of the user's, installed under the name libc.so.6 by
 * tests/attach/hostile and mapped by hand below the real libc (victim.c):
 * its dlopen and dlerror, were root's attach to call them for libc's,
 * leave a mark (the file mark.decoy in the process's working directory)
 * and fail. Built without libc and without relocations (raw system calls,
 * data reached relative to the code), so that it works mapped anywhere;
 * one system call instruction per architecture.
 */
#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>

static long sys4(long nr, long a, long b, long c, long d)
{
#if defined(__x86_64__)
	register long r10 __asm__("r10") = d;
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
			 : "rcx", "r11", "memory");
	return ret;
#elif defined(__aarch64__)
	register long x8 __asm__("x8") = nr;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;

	__asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
	return x0;
#else
#error "decoy.c: no system call for this architecture"
#endif
}

static void mark(void)
{
	static const char name[] = "mark.decoy", what[] = "called\n";
	long fd = sys4(SYS_openat, AT_FDCWD, (long)name, O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (fd >= 0) {
		sys4(SYS_write, fd, (long)what, sizeof(what) - 1, 0);
		sys4(SYS_close, fd, 0, 0, 0);
	}
}

void *dlopen(const char *file, int mode)
{
	(void)file;
	(void)mode;
	mark();
	return NULL;
}

char *dlerror(void)
{
	mark();
	return NULL;
}
