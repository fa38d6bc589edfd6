// SPDX-License-Identifier: GPL-2.0
/*
 * A small library whose one symbol must never show in a profile written
 * for an unprivileged user: tests/hostile/run installs a copy readable by
 * root only, and a forged maps line names it.
 */
__attribute__((noinline)) int hostile_secret_symbol_0600(int x)
{
	volatile int acc = x;
	int i;

	for (i = 0; i < 64; i++)
		acc = acc * 31 + i;
	return acc;
}
