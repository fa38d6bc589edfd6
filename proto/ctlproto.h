/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The control protocol between heapprofctl and heapprofd: a UNIX
 * SOCK_SEQPACKET socket; every message is one line of text,
 *
 *   VERB key=value key=value ...
 *
 * values percent-encoded (%XX) for space, '%', '=' and control bytes.
 * Requests: hello, watch, attach, detach, dump, sessions, quit.
 * Replies:  "ok key=..." or "err msg=...".
 * Events (to the connection that made a rule): "event kind=session|done|
 * ended pid=N ...". Both ends of this protocol are ours, shipped together.
 */
#ifndef HPD_CTLPROTO_H
#define HPD_CTLPROTO_H

#include <stddef.h>
#include <stdint.h>

/* Append " key=value" to buf (NUL-terminated, size len; val NULL: empty). 0 or -1 if full. */
int hpc_put(char *buf, size_t len, const char *key, const char *val);
int hpc_putu(char *buf, size_t len, const char *key, unsigned long long v);
/* Find key in msg and decode its value. 0 found, -1 missing. */
int hpc_get(const char *msg, const char *key, char *out, size_t outlen);
unsigned long long hpc_getu(const char *msg, const char *key, unsigned long long dflt);
/* The verb: the first word. */
int hpc_verb_is(const char *msg, const char *verb);

#endif
