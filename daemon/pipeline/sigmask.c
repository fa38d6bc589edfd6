// SPDX-License-Identifier: GPL-2.0
/*
 * A system-call-free sigprocmask() for the unwinder workers.
 *
 * Why: libunwind (Debian's 1.6) masks every signal with sigprocmask() around
 * the lock of its register-state cache and restores the old mask afterwards:
 * 2 system calls per frame, ~80% of a warm unwind on our test VM. The
 * masking only protects against a signal handler re-entering libunwind on
 * the same thread. Our workers block every signal for their whole life
 * (hp_sigmask_worker_init at thread start), so no handler can run on them
 * and libunwind's "block everything ... restore" never changes their mask.
 *
 * How: this file defines sigprocmask() itself; the daemon's executable
 * (or test) links it, so the dynamic linker binds libunwind's (and
 * everybody's) sigprocmask calls here. The result equals glibc's:
 *   - on a thread that did not call hp_sigmask_worker_init (every thread of
 *     the daemon except the workers), and for any call that would change
 *     the mask, we forward to pthread_sigmask(), which is what glibc's own
 *     sigprocmask does (same per-thread semantics, same filtering of glibc's
 *     internal signals), only converting its error number to -1/errno;
 *   - on a worker, we keep the thread's kernel mask in a thread-local copy
 *     (read from the kernel at init). A call whose result would equal that
 *     mask (a query, "block all" when all is blocked, restoring the same
 *     mask) just reports the copy in *oset, as the kernel would (only the
 *     kernel's 64 bits are written, like the system call does). Any call
 *     that really changes the mask is forwarded and the thread leaves the
 *     fast path for good, so the copy can never go stale through us.
 * The copy stays exact because only the thread itself changes its mask:
 * through sigprocmask (here), pthread_sigmask (never called on workers),
 * or signal delivery (impossible: all blocked; forced synchronous faults
 * kill the daemon or return with the mask restored). Other threads' masks
 * and signal delivery to them are untouched.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

static __thread int tl_fast;
static __thread uint64_t tl_mask;	/* the kernel's mask of this thread */
static __thread uint64_t tl_unblockable;	/* unblockable(), computed once */

/* Bits the kernel or glibc never let a thread block. */
static uint64_t unblockable(void)
{
	uint64_t b = (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1));

	/* glibc's SIGCANCEL and SIGSETXID: the two signals below SIGRTMIN. */
	for (int s = 32; s < SIGRTMIN && s <= 64; s++)
		b |= 1ULL << (s - 1);
	return b;
}

static uint64_t kbits(const sigset_t *s)
{
	uint64_t v;

	memcpy(&v, s, sizeof(v));	/* the kernel's sigset is the first 64 bits */
	return v;
}

int hp_sigmask_worker_init(void)
{
	sigset_t all, cur;
	int r;

	sigfillset(&all);
	r = pthread_sigmask(SIG_SETMASK, &all, NULL);
	if (!r)
		r = pthread_sigmask(SIG_SETMASK, NULL, &cur);
	if (r)
		return -r;
	tl_mask = kbits(&cur);
	tl_unblockable = unblockable();
	tl_fast = 1;
	return 0;
}

int hp_sigmask_worker_fast(void)
{
	return tl_fast;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *oset)
{
	int r;

	if (tl_fast) {
		uint64_t want = tl_mask;

		if (set) {
			uint64_t s = kbits(set) & ~tl_unblockable;

			if (how == SIG_BLOCK)
				want = tl_mask | s;
			else if (how == SIG_UNBLOCK)
				want = tl_mask & ~s;
			else if (how == SIG_SETMASK)
				want = s;
			else
				goto forward;	/* invalid: glibc says EINVAL, nothing changes */
		}
		if (want == tl_mask) {
			if (oset)
				memcpy(oset, &tl_mask, sizeof(tl_mask));
			return 0;
		}
		tl_fast = 0;
	}
forward:
	r = pthread_sigmask(how, set, oset);
	if (r) {
		errno = r;
		return -1;
	}
	return 0;
}
