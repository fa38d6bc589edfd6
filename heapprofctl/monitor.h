/* SPDX-License-Identifier: GPL-2.0 */
/* `heapprofctl monitor`: the heapprofd netlink family's events, one line each. */
#ifndef HP_MONITOR_H
#define HP_MONITOR_H
#include <stddef.h>

/*
 * One netlink message (nlmsghdr, genlmsghdr, attributes) of the heapprofd
 * family as a line without the time stamp: 1 (out holds it), 0 (not an
 * event we know), -1 (malformed: out says why).
 */
int hp_monitor_format(const void *msg, size_t len, char *out, size_t outlen);
/* argv[0] is "monitor". Exit status. */
int hp_monitor_main(int argc, char **argv);
#endif
