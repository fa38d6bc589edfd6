// SPDX-License-Identifier: GPL-2.0
/*
 * Stack capture for the unwinder: the registers it starts from and the raw
 * bytes from the stack pointer up to the top of the thread's stack.
 *
 * The registers are taken by hp_regs_capture() (stack.h), inlined into the
 * hook's outermost sampling frame, and the copy is made by a function that
 * frame calls: everything from the captured sp upwards stays as it was
 * (the frames below, the writer's own, are not copied at all). The
 * unwinder therefore begins in this library (it has unwind tables, as every
 * x86-64 object) and walks up through the hook into the program; a consumer
 * skips the leading frames that lie in libheapprofd_client.so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <immintrin.h>
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

/*
 * Copy a stack into the ring. Large copies use non-temporal stores: the
 * ring is written once by us and read by another process, so pulling its
 * lines into our cache (from the daemon's cache, where its zeroing left
 * them) only evicts the program's data and is slower. The widest streaming
 * store the processor has is used: a whole 64-byte line per store fills a
 * write-combining buffer at once (16 KiB, the daemon's core zeroing each
 * copy: 16-byte stores 1.6 us, 32-byte 1.5 us, 64-byte 1.35 us; plain
 * memcpy 1.5-2.2 us). The sfence orders the streaming stores before the
 * record's release-store commit.
 */
#define HP_STREAM_MIN 2048

static void stream_16(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (; n >= 64; dst += 64, src += 64, n -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

		_mm_stream_si128((__m128i *)dst, a);
		_mm_stream_si128((__m128i *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(dst + 48), d);
	}
}

__attribute__((target("avx2"))) static void stream_32(uint8_t *dst, const uint8_t *src,
						      size_t n)
{
	for (; n >= 64; dst += 64, src += 64, n -= 64) {
		__m256i a = _mm256_loadu_si256((const __m256i *)src);
		__m256i b = _mm256_loadu_si256((const __m256i *)(src + 32));

		_mm256_stream_si256((__m256i *)dst, a);
		_mm256_stream_si256((__m256i *)(dst + 32), b);
	}
}

__attribute__((target("avx512f"))) static void stream_64(uint8_t *dst, const uint8_t *src,
							 size_t n)
{
	for (; n >= 64; dst += 64, src += 64, n -= 64)
		_mm512_stream_si512((void *)dst, _mm512_loadu_si512((const void *)src));
}

static void (*stream_lines)(uint8_t *dst, const uint8_t *src, size_t n);

/*
 * Once, at start-up (the constructor): pick the widest streaming store.
 * 512-bit stores only where they do not lower the core's clock: AVX512-VBMI2
 * marks Ice Lake and later, and AMD's Zen 4, where they do not; on Skylake
 * and Cascade Lake servers (AVX-512 without VBMI2) they may, and the program
 * around us would pay for it, so those get 256-bit stores.
 */
void hp_stack_copy_init(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vbmi2"))
		stream_lines = stream_64;
	else if (__builtin_cpu_supports("avx2"))
		stream_lines = stream_32;
	else
		stream_lines = stream_16;
}

static void copy_out(uint8_t *dst, const uint8_t *src, size_t n)
{
	void (*lines)(uint8_t *, const uint8_t *, size_t) = stream_lines;
	size_t head, body;

	if (n < HP_STREAM_MIN || !lines) {
		memcpy(dst, src, n);
		return;
	}
	/* Up to the next line boundary with ordinary stores, then whole
	 * lines, then the tail. */
	head = (64 - ((uintptr_t)dst & 63)) & 63;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	body = n & ~(size_t)63;
	lines(dst, src, body);
	memcpy(dst + body, src + body, n - body);
	_mm_sfence();
}

uint32_t hp_stack_copy(const uint64_t *regs, uint8_t *dst, uint64_t top,
		       uint32_t want)
{
	uint64_t sp = regs[HEAPPROFD_X86_64_SP];

	if (top <= sp)
		return 0;
	if (want > top - sp)
		want = (uint32_t)(top - sp);
	copy_out(dst, (const uint8_t *)(uintptr_t)sp, want);
	return want;
}
