/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The user-space transport: how a client hands its ring to the daemon when
 * /dev/heapprofd is absent. The ring layout is the module's (ring.h); only
 * the way the two sides meet differs.
 *
 * The client creates a memfd holding the control area and the data area
 * once (ctl_size + data_size bytes; each side maps the data twice with
 * hp_ring_map_fd), formats it with hp_ring_format, and an eventfd for
 * wake-ups. It connects a SOCK_SEQPACKET UNIX socket to the daemon's
 * address and sends one struct hp_hello with SCM_RIGHTS carrying, in order,
 * the memfd, the eventfd, /proc/self/maps, /proc/self/mem and a pidfd of
 * itself (nfds = 5; /proc/self/exe may follow as a sixth). The daemon answers
 * with one struct hp_hello_reply. From then on the connection stays open and
 * carries nothing: its end tells each side that the other is gone.
 *
 * Who sent the hello is the kernel's word, not the client's: the client
 * sends SCM_CREDENTIALS beside the fds, which the kernel checks against
 * the sender (its own pid; one of its own uids) as it sends them, and the
 * daemon (SO_PASSCRED on its listener, so every accepted end has it from
 * the first message; a client that sends none of its own still gets the
 * kernel's) takes the pid and uid from there. It
 * holds the session to that process by the pidfd, which must name the
 * same pid. The pid field
 * below is informative only. A hello that is not answered within the
 * client's deadline (HEAPPROFD_HELLO_TIMEOUT_MS, 200 ms by default) is given
 * up: the program runs unprofiled.
 *
 * A dormant client that has no daemon to talk to keeps its memfd and
 * eventfd open under the names HP_MEMFD_NAME and HP_EVENTFD marker below; a
 * daemon with ptrace-level access to it finds them in /proc/<pid>/fd
 * ("/memfd:heapprofd-ring (deleted)" and "anon_inode:[eventfd]") and maps
 * the ring directly; the client learns of it through kstate.state and the
 * config's enabled flag, both written by the daemon.
 */
#ifndef HEAPPROFD_SOCKET_PROTO_H
#define HEAPPROFD_SOCKET_PROTO_H

#include <stdint.h>

#define HP_HELLO_MAGIC		0x48504843U	/* "HPHC" */
#define HP_REPLY_MAGIC		0x48504844U	/* "HPHD" */
#define HP_PROTO_VERSION	2U
#define HP_MEMFD_NAME		"heapprofd-ring"

/* Default socket: $HEAPPROFD_SOCKET, else this path. */
#define HP_SOCKET_DEFAULT	"/run/heapprofd/heapprofd.sock"
#define HP_SOCKET_ENV		"HEAPPROFD_SOCKET"

#define HP_HELLO_DORMANT	(1U << 0)	/* wait for `attach` */

/* The fds of a hello, in this order; HP_HELLO_FD_EXE is optional. */
enum { HP_HELLO_FD_RING, HP_HELLO_FD_WAKE, HP_HELLO_FD_MAPS, HP_HELLO_FD_MEM,
       HP_HELLO_FD_PIDFD, HP_HELLO_FD_EXE, HP_HELLO_FDS_MAX };

/* How long a client waits for the daemon by default (connect and answer). */
#define HP_HELLO_TIMEOUT_MS_DEFAULT	200U

struct hp_hello {
	uint32_t magic;		/* HP_HELLO_MAGIC */
	uint32_t version;	/* HP_PROTO_VERSION */
	uint32_t pid;
	uint32_t flags;		/* HP_HELLO_* */
	uint64_t data_size;
	uint32_t ctl_size;
	uint32_t nfds;
	char comm[16];
	uint64_t resv[4];
};

struct hp_hello_reply {
	uint32_t magic;		/* HP_REPLY_MAGIC */
	int32_t status;		/* 0 or -errno: the daemon refused */
	uint64_t session_id;	/* the daemon's own numbering */
	uint64_t resv[2];
};

#endif /* HEAPPROFD_SOCKET_PROTO_H */
