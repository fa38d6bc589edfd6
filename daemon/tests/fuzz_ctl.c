// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer over the control protocol, through the daemon's own control
 * server: each input is one request on a fresh control connection, read
 * and answered by ctl.c from the event loop, then the connection closes
 * (and with it the rules it made). No client is connected, so no request
 * can reach a process; what is fuzzed is parsing, the rules and the replies.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../hpd.h"

static char outdir[] = "/tmp/hp_fuzz_ctl.XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct hp_pipeline_opts po = { .unwind_workers = 1 };

	(void)argc;
	(void)argv;
	hpd_verbosity = -1;
	if (!mkdtemp(outdir) || hpd_loop_init() < 0)
		abort();
	hpd_opts.outdir = outdir;
	hpd_opts.private_mode = 1;
	hpd_opts.transport = 2;		/* no module: nothing to attach through */
	hpd_pipe = hp_pipeline_new(&po);
	if (!hpd_pipe)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t n)
{
	char reply[HPD_MSG_MAX];
	int sv[2];

	if (n == 0 || n >= HPD_MSG_MAX)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		abort();
	if (hpd_ctl_adopt(sv[0]))
		abort();
	if (send(sv[1], in, n, MSG_NOSIGNAL) != (ssize_t)n)
		abort();
	hpd_loop_run(0);
	while (recv(sv[1], reply, sizeof(reply), MSG_DONTWAIT) > 0)
		;
	close(sv[1]);
	hpd_loop_run(0);
	hpd_ctl_reap();
	hpd_sessions_reap();
	return 0;
}
