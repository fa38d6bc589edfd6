// SPDX-License-Identifier: GPL-2.0
/*
 * Python frames at sample time (uapi HEAPPROFD_ALLOC_PYFRAMES): the chain
 * of the sampling thread's CPython interpreter frames, as code-object and
 * instruction addresses, for the daemon to name later from the process's
 * memory. Only what is gone once the allocation returns is taken here: the
 * frames live in the thread's own data stack and change with every call;
 * the code objects they point at stay where they are while a frame uses
 * them, and their names and line tables are the daemon's to read.
 *
 * The thread's state comes from PyGILState_GetThisThreadState (the
 * interpreter's thread-specific key: a pthread_getspecific), which, unlike
 * the runtime's "current thread state", also answers in a thread that let
 * go of the interpreter lock to run C code. A thread that never ran Python
 * has none, and its samples carry no Python frames.
 *
 * The layout of the structures walked is that of CPython 3.11 on a 64-bit
 * Linux ABI (x86-64 and arm64 lay them out alike: 8-byte pointers, 4-byte
 * ints, natural alignment), checked against the interpreter's Py_Version
 * before anything is read; any other version is profiled natively, with
 * one line saying so. Only memory
 * the thread itself owns is read (its thread state, its C frame record,
 * its interpreter frames), and only while it is inside an allocation it
 * made, so nothing read can change under the walk.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "pyframes.h"

/* CPython 3.11, x86-64 and arm64 (Include/cpython/pystate.h,
 * internal/pycore_frame.h). */
#define PY311_TSTATE_CFRAME	56	/* PyThreadState.cframe */
#define PY311_CFRAME_CURRENT	8	/* _PyCFrame.current_frame */
#define PY311_FRAME_CODE	32	/* _PyInterpreterFrame.f_code */
#define PY311_FRAME_PREVIOUS	48	/* .previous */
#define PY311_FRAME_INSTR	56	/* .prev_instr */
#define PY311_FRAME_IS_ENTRY	68	/* .is_entry (bool) */

static struct {
	void *(*tstate)(void);		/* PyGILState_GetThisThreadState */
	int (*initialized)(void);	/* Py_IsInitialized */
	int on;
} py;

static inline uint64_t word(uintptr_t p, unsigned off)
{
	return *(const uint64_t *)(p + off);
}

void hp_py_init(void)
{
	const unsigned long *version;
	unsigned long v;

	const char *off = getenv("HEAPPROFD_PYTHON_FRAMES");

	if (py.on || (off && !strcmp(off, "0")))
		return;
	version = dlsym(RTLD_DEFAULT, "Py_Version");
	py.tstate = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	py.initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
	if (!py.tstate || !py.initialized)
		return;		/* no Python in this process */
#if defined(__x86_64__) || defined(__aarch64__)
	v = version ? *version : 0;
	if (version && (v >> 16) == 0x030b) {
		__atomic_store_n(&py.on, 1, __ATOMIC_RELEASE);
		hp_debug("Python %lu.%lu.%lu: Python frames in samples", v >> 24,
			 (v >> 16) & 0xff, (v >> 8) & 0xff);
		return;
	}
	if (version)
		hp_warn("Python %lu.%lu is not supported for Python frames (3.11 is): profiled natively",
			v >> 24, (v >> 16) & 0xff);
	else
		hp_warn("a Python older than 3.11 is not supported for Python frames: profiled natively");
#else
	(void)version;
	(void)v;
	hp_warn("Python frames are read on x86-64 and arm64 only: profiled natively");
#endif
}

uintptr_t hp_py_top(void)
{
	uintptr_t ts, cf;

	if (!py.on || !hp_cfg.pyframes || !py.initialized())
		return 0;
	ts = (uintptr_t)py.tstate();
	if (!ts || (ts & 7))
		return 0;
	cf = (uintptr_t)word(ts, PY311_TSTATE_CFRAME);
	if (!cf || (cf & 7))
		return 0;
	return (uintptr_t)word(cf, PY311_CFRAME_CURRENT);
}

uint32_t hp_py_count(uintptr_t f)
{
	uint32_t n = 0;

	while (f && !(f & 7) && n < HEAPPROFD_PYFRAMES_MAX) {
		n++;
		f = (uintptr_t)word(f, PY311_FRAME_PREVIOUS);
	}
	return n;
}

uint32_t hp_py_write(uintptr_t f, struct heapprofd_pyframe *out, uint32_t max)
{
	uint32_t n = 0;

	while (f && !(f & 7) && n < max) {
		uint64_t instr = word(f, PY311_FRAME_INSTR) & ~HEAPPROFD_PYFRAME_ENTRY;

		if (*(const uint8_t *)(f + PY311_FRAME_IS_ENTRY))
			instr |= HEAPPROFD_PYFRAME_ENTRY;
		out[n].code = word(f, PY311_FRAME_CODE);
		out[n].instr = instr;
		n++;
		f = (uintptr_t)word(f, PY311_FRAME_PREVIOUS);
	}
	return n;
}
