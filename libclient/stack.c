// SPDX-License-Identifier: GPL-2.0
/*
 * Stack capture for the unwinder: the registers it starts from and the raw
 * bytes from the stack pointer up to the top of the thread's stack.
 *
 * The registers are taken by hp_regs_capture() (stack.h), inlined into the
 * hook's outermost sampling frame, and the copy is made by a function that
 * frame calls: everything from the captured sp upwards stays as it was
 * (the frames below, the writer's own, are not copied at all). The
 * unwinder therefore begins in this library (built with unwind tables) and
 * walks up through the hook into the program; a consumer
 * skips the leading frames that lie in libheapprofd_client.so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "client.h"
#include "stack.h"

/*
 * The main thread's stack mapping ends above the program's arguments, its
 * environment strings and the auxiliary vector, several KiB that every
 * sample would copy for nothing: the unwinder stops at _start, whose frame
 * lies below the stack pointer the process started with, which the dynamic
 * loader keeps in __libc_stack_end (the address of argc). The copy of the
 * main thread therefore ends a little above that address.
 */
extern void *__libc_stack_end;
#define HP_MAIN_STACK_MARGIN 64

/*
 * The main thread is known by its tid (== pid), not by where
 * pthread_getattr_np says its stack ends: that comes from a parse of
 * /proc/self/maps and is the end of the mapping, which the cap replaces
 * anyway (and once in a while, in CI, it did not contain
 * __libc_stack_end + 64, so the cap was skipped).
 */
static void cap_main_stack(struct hp_thread *t)
{
	uint64_t end = (uint64_t)(uintptr_t)__libc_stack_end;
	uint64_t here = (uint64_t)(uintptr_t)__builtin_frame_address(0);

	/*
	 * Within 64 MiB above this frame, too: a fork child whose forking
	 * thread was not the main one has tid == pid on another stack, and
	 * thread stacks lie far below the main one (at least 128 MiB: the
	 * kernel's gap below the stack for mmap). A deeper main stack simply
	 * keeps the uncapped top.
	 */
	if (!end || end <= here || end - here > (64ULL << 20) ||
	    (pid_t)syscall(SYS_gettid) != getpid())
		return;		/* not the main thread */
	end = (end + HP_MAIN_STACK_MARGIN + 7) & ~7ULL;
	t->stack_top = end;
	if (t->stack_lo >= end)
		t->stack_lo = 0;
}

/*
 * glibc's pthread_getattr_np allocates while it holds the thread's lock: a
 * sample taken in there must not ask for the thread's stack bounds through
 * it again (it would wait for that lock for ever: the JVM's threads start
 * by asking for their own attributes). Ours marks the thread while the real
 * one runs; such a sample goes without a stack.
 */
static int (*real_getattr)(pthread_t, pthread_attr_t *);

HP_EXPORT int pthread_getattr_np(pthread_t th, pthread_attr_t *attr)
{
	struct hp_thread *t = &hp_self;
	int was = t->in_bounds, r;
	int (*fn)(pthread_t, pthread_attr_t *);

	t->in_bounds = 1;
	fn = __atomic_load_n(&real_getattr, __ATOMIC_ACQUIRE);
	if (!fn) {
		fn = (int (*)(pthread_t, pthread_attr_t *))(hp_injected ?
			hp_got_real("pthread_getattr_np") : dlsym(RTLD_NEXT, "pthread_getattr_np"));
		__atomic_store_n(&real_getattr, fn, __ATOMIC_RELEASE);
	}
	r = fn ? fn(th, attr) : ENOSYS;
	t->in_bounds = was;
	return r;
}

/* Once per thread: where does its stack end? */
void hp_stack_bounds(struct hp_thread *t)
{
	pthread_attr_t a;
	void *addr = NULL;
	size_t size = 0;

	if (t->stack_top || t->in_bounds)
		return;	/* inside pthread_getattr_np: no stack for this one */
	if (!pthread_getattr_np(pthread_self(), &a)) {
		if (!pthread_attr_getstack(&a, &addr, &size) && addr && size) {
			t->stack_lo = (uint64_t)(uintptr_t)addr;
			t->stack_top = t->stack_lo + size;
		}
		pthread_attr_destroy(&a);
	}
	if (!t->stack_top) {
		/* Unknown: treat the current frame as near the top; copies
		 * are then bounded by stack_cap only via this guess. */
		uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);

		t->stack_lo = 0;
		t->stack_top = sp + 4096;
	}
	cap_main_stack(t);
	hp_debug("thread stack [%#llx, %#llx), %llu bytes above this frame",
		 (unsigned long long)t->stack_lo, (unsigned long long)t->stack_top,
		 (unsigned long long)(t->stack_top -
				      (uint64_t)(uintptr_t)__builtin_frame_address(0)));
}

uint32_t hp_stack_copy(const uint64_t *regs, uint8_t *dst, uint64_t top,
		       uint32_t want)
{
	uint64_t sp = regs[HEAPPROFD_REG_SP];

	if (top <= sp)
		return 0;
	if (want > top - sp)
		want = (uint32_t)(top - sp);
	hp_arch_copy_out(dst, (const uint8_t *)(uintptr_t)sp, want);
	return want;
}
