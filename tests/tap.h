/* SPDX-License-Identifier: GPL-2.0 */
/* Minimal TAP output for the client tests. */
#ifndef HP_TAP_H
#define HP_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3), unused))
static int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	const char *pfx = getenv("HP_TAP_PREFIX");	/* e.g. "[asan] " */

	printf("%sok %d - %s", cond ? "" : "not ", ++tap_n, pfx ? pfx : "");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!cond)
		tap_failed++;
	return cond;
}

__attribute__((format(printf, 1, 2), unused))
static void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}
#endif
