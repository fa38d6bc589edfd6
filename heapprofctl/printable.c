// SPDX-License-Identifier: GPL-2.0
/* Text from other processes made safe for a terminal (printable.h). */
#include <string.h>

#include "printable.h"

char *hp_printable(char *dst, size_t len, const char *src, size_t srclen, const char *also)
{
	size_t i;

	if (!len)
		return dst;
	for (i = 0; i < srclen && i + 1 < len && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = hp_printable_byte(c) && !(also && strchr(also, c)) ? (char)c : '?';
	}
	dst[i] = 0;
	return dst;
}

static ssize_t filter_write(void *cookie, const char *buf, size_t n)
{
	FILE *to = cookie;
	char tmp[4096];
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < sizeof(tmp) ? n - done : sizeof(tmp);

		for (size_t i = 0; i < k; i++) {
			unsigned char c = (unsigned char)buf[done + i];

			tmp[i] = hp_printable_byte(c) || c == '\n' || c == '\t' ? (char)c : '?';
		}
		if (fwrite(tmp, 1, k, to) != k)
			return 0;	/* fopencookie: 0 is the error (errno says which) */
		done += k;
	}
	return (ssize_t)n;
}

FILE *hp_printable_stream(FILE *to)
{
	cookie_io_functions_t io = { .write = filter_write };

	setvbuf(to, NULL, _IONBF, 0);
	return fopencookie(to, "w", io);
}
