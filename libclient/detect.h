/* SPDX-License-Identifier: GPL-2.0 */
/* How the client was loaded and whether a daemon is around (detect.c). */
#ifndef HP_DETECT_H
#define HP_DETECT_H

/* The daemon's control socket, as heapprofd and heapprofctl default it. */
#define HP_CTL_DEFAULT	"/run/heapprofd/ctl.sock"
#define HP_CTL_ENV	"HEAPPROFD_CTL"

/*
 * 1 if the LD_PRELOAD value ld_preload (entries separated by ':' or white
 * space; NULL allowed) names the library at path self. A client loaded
 * while LD_PRELOAD does not name it came from /etc/ld.so.preload (or was
 * linked in): whole-system mode, dormant unless told otherwise.
 */
int hp_preload_names(const char *ld_preload, const char *self);

/* 1 if a daemon seems to be running: either socket path exists as a socket
 * (either may be NULL). */
int hp_daemon_expected(const char *sock_path, const char *ctl_path);

#endif /* HP_DETECT_H */
