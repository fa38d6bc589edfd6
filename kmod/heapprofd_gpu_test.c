// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd_gpu_test.ko: a stand-in GPU driver for heapprofd's tests. It
 * defines the gpu_mem_total tracepoint, as a GPU driver module does on a
 * kernel without CONFIG_TRACE_GPU_MEM, and fires it on demand:
 *
 *   echo "GPU_ID PID SIZE" > /sys/module/heapprofd_gpu_test/parameters/emit
 *
 * Loaded before or after heapprofd.ko, it shows that heapprofd finds the
 * tracepoint by name in a module and leaves it when either goes away.
 */
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#define CREATE_TRACE_POINTS
#include <trace/events/gpu_mem.h>

static int hp_gpu_test_emit(const char *val, const struct kernel_param *kp)
{
	unsigned int gpu_id, pid;
	unsigned long long size;

	if (sscanf(val, "%u %u %llu", &gpu_id, &pid, &size) != 3)
		return -EINVAL;
	trace_gpu_mem_total(gpu_id, pid, size);
	return 0;
}

static const struct kernel_param_ops hp_gpu_test_emit_ops = {
	.set = hp_gpu_test_emit,
};

module_param_cb(emit, &hp_gpu_test_emit_ops, NULL, 0200);
MODULE_PARM_DESC(emit, "Write \"GPU_ID PID SIZE\" to fire gpu_mem_total");

MODULE_DESCRIPTION("heapprofd test: defines and fires gpu_mem_total");
MODULE_AUTHOR("heapprofd developers");
MODULE_LICENSE("GPL");
