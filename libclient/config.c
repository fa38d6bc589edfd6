// SPDX-License-Identifier: GPL-2.0
/*
 * Configuration from the environment. A bad value never stops the host
 * program: it gives one line on stderr (unless HEAPPROFD_QUIET) and the
 * default is used. Runs inside the constructor, with the hooks passing
 * allocations straight through.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "detect.h"
#include "client.h"
#include "../proto/socket_proto.h"

int hp_stack_same_wanted = 1;

struct hp_config hp_cfg = {
	.interval = HEAPPROFD_INTERVAL_DEFAULT,
	.stack_cap = HEAPPROFD_STACK_CAP_DEFAULT,
	/* Wait for room, sample less as the ring fills (the daemon's config
	 * decides, too). */
	.flags = HEAPPROFD_CFG_BLOCK | HEAPPROFD_CFG_ADAPTIVE,
	.block_timeout_us = HP_STALL_US_DEFAULT,
	.ring_size = HEAPPROFD_DATA_SIZE_DEFAULT,
	.socket_path = HP_SOCKET_DEFAULT,
	.exit_wait_ms = -1,
	.hello_timeout_ms = HP_HELLO_TIMEOUT_MS_DEFAULT,
	.stack_reuse = 1,
};

static void say(const char *fmt, va_list ap)
{
	char buf[256];
	int n;

	n = snprintf(buf, sizeof(buf), "heapprofd_client[%d]: ", (int)getpid());
	vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	n = strlen(buf);
	buf[n++] = '\n';
	if (write(2, buf, n) < 0)
		return;
}

void hp_debug(const char *fmt, ...)
{
	va_list ap;

	if (!hp_cfg.debug)
		return;
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

void hp_warn(const char *fmt, ...)
{
	va_list ap;

	if (hp_cfg.quiet)
		return;
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

static void complain(const char *var, const char *val, const char *why)
{
	char buf[256];
	int n;

	if (hp_cfg.quiet)
		return;
	n = snprintf(buf, sizeof(buf),
		     "heapprofd_client: ignoring %s=\"%.64s\": %s; using the default\n",
		     var, val, why);
	if (n > 0 && write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1) < 0)
		return;
}

/* Decimal, optional K/M/G suffix (powers of 1024) when allow_suffix. */
int hp_parse_u64(const char *s, uint64_t *out, int allow_suffix)
{
	unsigned long long v;
	char *end;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	if (*end && allow_suffix) {
		int shift = 0;

		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		else if (*end == 'B')
			end++;
		if (v > (~0ULL >> shift))
			return -1;
		v <<= shift;
	}
	if (*end)
		return -1;
	*out = v;
	return 0;
}

static void env_u64(const char *var, uint64_t *dst, uint64_t lo, uint64_t hi,
		    int suffix)
{
	const char *s = getenv(var);
	uint64_t v;

	if (!s)
		return;
	if (hp_parse_u64(s, &v, suffix)) {
		complain(var, s, "not a number");
		return;
	}
	if (v < lo || v > hi) {
		complain(var, s, "out of range");
		return;
	}
	*dst = v;
}

static int env_bool(const char *var, int dflt)
{
	const char *s = getenv(var);

	if (!s)
		return dflt;
	if (!strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "true") ||
	    !strcasecmp(s, "on"))
		return 1;
	if (!strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "false") ||
	    !strcasecmp(s, "off") || !*s)
		return 0;
	complain(var, s, "expected 0 or 1");
	return dflt;
}

void hp_config_from_env(void)
{
	uint64_t v;
	const char *s;

	hp_cfg.quiet = env_bool("HEAPPROFD_QUIET", 0);
	hp_cfg.debug = env_bool("HEAPPROFD_DEBUG", 0);

	env_u64("HEAPPROFD_INTERVAL", &hp_cfg.interval, 1, 1ULL << 40, 1);
	v = hp_cfg.stack_cap;
	env_u64("HEAPPROFD_STACK_CAP", &v, 0, HP_STACK_CAP_MAX, 1);
	hp_cfg.stack_cap = (uint32_t)v & ~7U;

	s = getenv("HEAPPROFD_BLOCK");
	if (s) {
		v = 0;
		if (hp_parse_u64(s, &v, 0) || v > HP_STALL_US_MAX)
			complain("HEAPPROFD_BLOCK", s, "expected a stall bound in microseconds (0..600000000)");
		else if (v)
			hp_cfg.block_timeout_us = (uint32_t)v;
		else
			hp_cfg.flags &= ~HEAPPROFD_CFG_BLOCK;	/* 0: drop at once */
	}
	if (env_bool("HEAPPROFD_FOLLOW_FORKS", 0))
		hp_cfg.flags |= HEAPPROFD_CFG_FOLLOW_FORKS;
	/* 0: a fixed interval, whatever the daemon's config says. */
	hp_cfg.no_adapt = !env_bool("HEAPPROFD_ADAPTIVE", 1);
	if (hp_cfg.no_adapt)
		hp_cfg.flags &= ~HEAPPROFD_CFG_ADAPTIVE;
	hp_cfg.stack_reuse = env_bool("HEAPPROFD_STACK_REUSE", 1);
	hp_stack_same_wanted = env_bool("HEAPPROFD_STACK_SAME", 1);
	/*
	 * Loaded without LD_PRELOAD naming us: /etc/ld.so.preload put us into
	 * every process of the machine (or a program linked us in). Then be
	 * dormant unless HEAPPROFD_DORMANT says otherwise, so that each
	 * process only pays the dormant cost until a daemon enables it.
	 */
	{
		Dl_info di;

		hp_cfg.system_preload =
			dladdr((void *)hp_config_from_env, &di) && di.dli_fname &&
			!hp_preload_names(getenv("LD_PRELOAD"), di.dli_fname);
	}
	hp_cfg.dormant = env_bool("HEAPPROFD_DORMANT", hp_cfg.system_preload);
	v = 0;
	if (getenv("HEAPPROFD_EXIT_WAIT_MS")) {
		v = ~0ULL;
		env_u64("HEAPPROFD_EXIT_WAIT_MS", &v, 0, 600000, 0);
		hp_cfg.exit_wait_ms = v == ~0ULL ? -1 : (int)v;
	}

	/*
	 * A program must start whatever state the daemon is in: the connect
	 * and the answer to the hello share this deadline, then the program
	 * runs unprofiled. `heapprofctl record` raises it for its own daemon.
	 */
	v = hp_cfg.hello_timeout_ms;
	env_u64("HEAPPROFD_HELLO_TIMEOUT_MS", &v, 1, 600000, 0);
	hp_cfg.hello_timeout_ms = (uint32_t)v;

	s = getenv("HEAPPROFD_SEED");
	if (s) {
		if (hp_parse_u64(s, &v, 0))
			complain("HEAPPROFD_SEED", s, "not a number");
		else {
			hp_cfg.have_seed = 1;
			hp_cfg.seed = v;
		}
	}

	s = getenv(HP_SOCKET_ENV);
	if (s) {
		if (!*s || strlen(s) >= sizeof(hp_cfg.socket_path))
			complain(HP_SOCKET_ENV, s, "empty or longer than 107 bytes");
		else
			strcpy(hp_cfg.socket_path, s);
	}

	s = getenv("HEAPPROFD_TRANSPORT");
	if (s) {
		if (!strcmp(s, "auto"))
			hp_cfg.transport = HP_TR_AUTO;
		else if (!strcmp(s, "kernel"))
			hp_cfg.transport = HP_TR_KERNEL;
		else if (!strcmp(s, "socket"))
			hp_cfg.transport = HP_TR_SOCKET;
		else
			complain("HEAPPROFD_TRANSPORT", s, "expected auto, kernel or socket");
	}

	s = getenv("HEAPPROFD_RING_SIZE");
	if (s) {
		if (hp_parse_u64(s, &v, 1) || v < HEAPPROFD_DATA_SIZE_MIN ||
		    v > HP_RING_SIZE_MAX || (v & (v - 1)))
			complain("HEAPPROFD_RING_SIZE", s,
				 "expected a power of two from 64K to 64M");
		else
			hp_cfg.ring_size = v;
	}

	s = getenv("HEAPPROFD_NAME");
	if (s) {
		if (strlen(s) >= sizeof(hp_cfg.name))
			complain("HEAPPROFD_NAME", s, "longer than 63 bytes");
		else
			strcpy(hp_cfg.name, s);
	}
}

/* HEAPPROFD_NAME: does our comm or the basename of argv[0] match? */
int hp_name_matches(void)
{
	extern char *program_invocation_short_name;
	char comm[17] = "";

	if (!hp_cfg.name[0])
		return 1;
	if (program_invocation_short_name &&
	    !strcmp(program_invocation_short_name, hp_cfg.name))
		return 1;
	/* comm holds at most 15 bytes of the name. */
	if (!prctl(PR_GET_NAME, comm, 0, 0, 0) &&
	    !strncmp(comm, hp_cfg.name, 15) &&
	    (strlen(hp_cfg.name) > 15 ? strlen(comm) == 15 : !strcmp(comm, hp_cfg.name)))
		return 1;
	return 0;
}
