// SPDX-License-Identifier: GPL-2.0
/* A statically linked program (no loader, no libc.so) that attach must
 * refuse: prints "ready PID" and waits to be killed. */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;)
		pause();
}
