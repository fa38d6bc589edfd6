// SPDX-License-Identifier: GPL-2.0
/* The control protocol's line encoding (see ctlproto.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctlproto.h"

static int needs_escape(unsigned char c)
{
	return c <= ' ' || c == '%' || c == '=' || c >= 0x7f;
}

int hpc_put(char *buf, size_t len, const char *key, const char *val)
{
	size_t n = strlen(buf);
	const unsigned char *v = (const unsigned char *)(val ? val : "");	/* none: empty */
	int w;

	w = snprintf(buf + n, len - n, " %s=", key);
	if (w < 0 || (size_t)w >= len - n)
		return -1;
	n += w;
	for (; *v; v++) {
		if (needs_escape(*v)) {
			if (n + 4 > len)
				return -1;
			snprintf(buf + n, 4, "%%%02X", *v);
			n += 3;
		} else {
			if (n + 2 > len)
				return -1;
			buf[n++] = *v;
			buf[n] = 0;
		}
	}
	return 0;
}

int hpc_putu(char *buf, size_t len, const char *key, unsigned long long v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%llu", v);
	return hpc_put(buf, len, key, tmp);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int hpc_get(const char *msg, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	const char *p = msg;
	size_t n = 0;

	if (!outlen)
		return -1;
	while ((p = strchr(p, ' ')) != NULL) {
		p++;
		if (strncmp(p, key, kl) || p[kl] != '=')
			continue;
		p += kl + 1;
		while (*p && *p != ' ' && *p != '\n') {
			int c = (unsigned char)*p;

			if (c == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
				c = hexval(p[1]) * 16 + hexval(p[2]);
				p += 2;
			}
			if (n + 1 < outlen)
				out[n++] = (char)c;
			p++;
		}
		out[n] = 0;
		return 0;
	}
	out[0] = 0;
	return -1;
}

unsigned long long hpc_getu(const char *msg, const char *key, unsigned long long dflt)
{
	char tmp[32], *end;
	unsigned long long v;

	if (hpc_get(msg, key, tmp, sizeof(tmp)) || !tmp[0])
		return dflt;
	v = strtoull(tmp, &end, 0);
	return *end ? dflt : v;
}

int hpc_verb_is(const char *msg, const char *verb)
{
	size_t n = strlen(verb);

	return !strncmp(msg, verb, n) && (msg[n] == ' ' || msg[n] == '\n' || msg[n] == 0);
}
