// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd.ko: kernel support for the heapprofd heap profiler.
 *
 * /dev/heapprofd (mode 0666: any process may register itself) takes two
 * ioctls: REGISTER creates a session for the calling process and ATTACH
 * makes the caller the consumer of a session, subject to access.c. The
 * contract is include/uapi/linux/heapprofd.h (uapi/linux/heapprofd.h in
 * this tree); Documentation/heapprofd/kernel.rst describes the module.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "compat.h"
#include "heapprofd_kmod.h"

unsigned long hp_max_data_size = 64UL << 20;
module_param_named(max_data_size, hp_max_data_size, ulong, 0644);
MODULE_PARM_DESC(max_data_size,
		 "Largest data area a session may ask for, in bytes (default 64 MiB; sizes above give ENOSPC)");

bool hp_charge_memlock = true;
module_param_named(charge_memlock, hp_charge_memlock, bool, 0644);
MODULE_PARM_DESC(charge_memlock,
		 "Charge every ring page to the registering user's locked memory, bounded by RLIMIT_MEMLOCK (default Y)");

unsigned int hp_max_sessions_per_user = 128;
module_param_named(max_sessions_per_user, hp_max_sessions_per_user, uint,
		   0644);
MODULE_PARM_DESC(max_sessions_per_user,
		 "Sessions one real uid may hold at once, without CAP_SYS_RESOURCE (default 128, 0: no limit; more give EDQUOT)");

static long hp_dev_ioctl(struct file *file, unsigned int cmd,
			 unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case HEAPPROFD_IOC_REGISTER:
		return hp_register(uarg);
	case HEAPPROFD_IOC_ATTACH:
		return hp_attach(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations hp_dev_fops = {
	.owner		= THIS_MODULE,
	.open		= nonseekable_open,
	.unlocked_ioctl	= hp_dev_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
};

static struct miscdevice hp_miscdev = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= HEAPPROFD_DEVICE_NAME,
	.fops	= &hp_dev_fops,
	.mode	= 0666,
};

static int __init hp_init(void)
{
	int ret;

	ret = hp_sysfs_init();
	if (ret)
		return ret;
	ret = hp_nl_init();
	if (ret)
		goto err_sysfs;
	ret = hp_dmabuf_sysfs_init(hp_sysfs_root);
	if (ret)
		goto err_nl;
	ret = hp_gpu_init(hp_sysfs_root);
	if (ret)
		goto err_dmabuf_sysfs;
	/*
	 * Fails only on a bad dmabuf_source=: without its probes the module
	 * works unaccounted.
	 */
	ret = hp_dmabuf_init();
	if (ret)
		goto err_gpu;
	ret = hp_oom_init();
	if (ret)
		goto err_dmabuf;
	/* Last: from here on user space can create sessions. */
	ret = misc_register(&hp_miscdev);
	if (ret)
		goto err_oom;
	return 0;

err_oom:
	hp_oom_exit();
err_dmabuf:
	hp_dmabuf_exit();
err_gpu:
	hp_gpu_exit();
err_dmabuf_sysfs:
	hp_dmabuf_sysfs_exit();
	hp_dmabuf_forget_all();
err_nl:
	hp_nl_exit();
err_sysfs:
	hp_sysfs_exit();
	return ret;
}

/*
 * Every session and consumer file holds a reference to this module (their
 * fops have .owner set), so no session exists by the time this runs and
 * rmmod fails while one does; so does every pending DMA-BUF sample
 * (dmabuf.c). First the probes go, then the views, then the tables.
 */
static void __exit hp_exit(void)
{
	misc_deregister(&hp_miscdev);
	hp_oom_exit();
	hp_dmabuf_exit();
	hp_gpu_exit();
	hp_dmabuf_sysfs_exit();
	hp_dmabuf_forget_all();
	hp_nl_exit();
	hp_sysfs_exit();
}

module_init(hp_init);
module_exit(hp_exit);

MODULE_DESCRIPTION("heapprofd: heap profiler sessions, rings and fd passing");
MODULE_AUTHOR("heapprofd developers");
MODULE_LICENSE("GPL");
