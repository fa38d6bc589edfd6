// SPDX-License-Identifier: GPL-2.0
/*
 * A library of the user's, installed under the name libc.so.6 by
 * tests/attach/hostile and mapped by hand below the real libc (victim.c):
 * its dlopen and dlerror, were root's attach to call them for libc's,
 * leave a mark (the file mark.decoy in the process's working directory)
 * and fail. Built without libc and without relocations (raw system calls,
 * data reached relative to the code), so that it works mapped anywhere.
 */
#include <fcntl.h>
#include <stddef.h>
#include <sys/syscall.h>

static long sys3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

static void mark(void)
{
	static const char name[] = "mark.decoy", what[] = "called\n";
	long fd = sys3(SYS_open, (long)name, O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (fd >= 0) {
		sys3(SYS_write, fd, (long)what, sizeof(what) - 1);
		sys3(SYS_close, fd, 0, 0);
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
