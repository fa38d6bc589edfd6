// SPDX-License-Identifier: GPL-2.0
/* heapprofd: logging to stderr (by hand) or syslog (as a service). */
#include <stdio.h>
#include <syslog.h>
#include <time.h>

#include "hpd.h"

int hpd_verbosity = HPD_INFO;
static int use_syslog;

void hpd_log_to_syslog(void)
{
	openlog("heapprofd", LOG_PID, LOG_DAEMON);
	use_syslog = 1;
}

void hpd_log(int level, const char *fmt, ...)
{
	static const char *const tag[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	va_list ap;

	if (level > hpd_verbosity)
		return;
	va_start(ap, fmt);
	if (use_syslog) {
		vsyslog(prio[level], fmt, ap);
	} else {
		/* With -v, the monotonic time in seconds: how long apart two
		 * events were is what a debug log is read for. */
		if (hpd_verbosity >= HPD_DEBUG) {
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			fprintf(stderr, "[%5lld.%03ld] ", (long long)ts.tv_sec, ts.tv_nsec / 1000000);
		}
		fprintf(stderr, "heapprofd: %s: ", tag[level]);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}
