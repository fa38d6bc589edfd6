/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What heapprofctl prints that another process chose (a command name, a
 * file name, a profile's function names, a daemon's or a kernel module's
 * text) reaches the terminal of whoever runs it, often root: a byte a
 * terminal acts on (ESC, BEL, the other C0 controls, DEL, anything not
 * 7-bit ASCII) could retitle the window, rewrite the screen or answer
 * back. Such bytes are shown as '?'.
 */
#ifndef HP_PRINTABLE_H
#define HP_PRINTABLE_H

#include <stddef.h>
#include <stdio.h>

/* A byte shown as itself: printable 7-bit ASCII, space included. */
static inline int hp_printable_byte(unsigned char c)
{
	return c >= ' ' && c < 0x7f;
}

/*
 * Copy src (up to srclen bytes or its NUL) into dst (len bytes, always
 * NUL-terminated), every byte that is not hp_printable_byte() or is in
 * also (NULL: none; e.g. "," for a CSV field) as '?'. dst may be src.
 * Returns dst.
 */
char *hp_printable(char *dst, size_t len, const char *src, size_t srclen, const char *also);

/*
 * A stream that writes to `to` what is written to it, every byte but
 * newline and tab that is not hp_printable_byte() as '?'. Its buffering is
 * set by the caller (setvbuf); `to` itself is made unbuffered so that a
 * flush of the stream reaches the file. NULL on failure.
 */
FILE *hp_printable_stream(FILE *to);

#endif
