/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HPD_STATS_H
#define HPD_STATS_H
#define HP_SYSFS_ROOT "/sys/kernel/heapprofd"
/* Print the module's statistics under root; 0, or 1 when absent. */
int hp_stats_main(const char *root);
#endif
