# SPDX-License-Identifier: GPL-2.0
# tests/hostile: the attack programs, the normal program and the
# root-only library, into build/tests/hostile/. Included by the top-level
# Makefile (target `hostile`, part of `userspace`, so the VM gets them too);
# tests/hostile/run and tests/hostile/user-budget run them.
HOSTILE_SRC := $(CURDIR)/tests/hostile
HOSTILE_OUT := $(CURDIR)/build/tests/hostile
OBJCOPY ?= objcopy
HOSTILE_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -g
HOSTILE_HDRS := $(CURDIR)/proto/ring.h $(CURDIR)/proto/socket_proto.h \
	$(CURDIR)/uapi/linux/heapprofd.h
HOSTILE_PROGS := $(HOSTILE_OUT)/hostile $(HOSTILE_OUT)/normal $(HOSTILE_OUT)/libhpsecret.so \
	$(HOSTILE_OUT)/stacks $(HOSTILE_OUT)/termcheck $(HOSTILE_OUT)/normal_escname

$(HOSTILE_OUT):
	mkdir -p $@

$(HOSTILE_OUT)/hostile: $(HOSTILE_SRC)/hostile.c $(HOSTILE_HDRS) | $(HOSTILE_OUT)
	$(CC) -O1 $(HOSTILE_CFLAGS) -o $@ $< -ldl

$(HOSTILE_OUT)/normal: $(HOSTILE_SRC)/normal.c | $(HOSTILE_OUT)
	$(CC) -O0 -fno-omit-frame-pointer -fno-inline $(HOSTILE_CFLAGS) -o $@ $<

# Thousands of distinct call stacks (tests/hostile/user-budget), or a
# flood of them (tests/e2e/mem-budget): frame pointers and no inlining keep
# each path a stack of its own.
$(HOSTILE_OUT)/stacks: $(HOSTILE_SRC)/stacks.c | $(HOSTILE_OUT)
	$(CC) -O0 -fno-omit-frame-pointer -fno-inline $(HOSTILE_CFLAGS) -o $@ $<

$(HOSTILE_OUT)/libhpsecret.so: $(HOSTILE_SRC)/libsecret.c | $(HOSTILE_OUT)
	$(CC) -O1 -fPIC -shared $(HOSTILE_CFLAGS) -o $@ $<

# tests/hostile/root-tools: what reaches root's terminal.
$(HOSTILE_OUT)/termcheck: $(HOSTILE_SRC)/termcheck.c | $(HOSTILE_OUT)
	$(CC) -O1 $(HOSTILE_CFLAGS) -o $@ $<

# The normal program whose allocation site is named with a terminal escape
# (ESC ] 0 ; pwned BEL sets a window title): a name any user's program can
# give its functions. No -g: the name comes from the symbol table.
$(HOSTILE_OUT)/normal_escname: $(HOSTILE_SRC)/normal.c | $(HOSTILE_OUT)
	$(CC) -O0 -fno-omit-frame-pointer -fno-inline $(filter-out -g,$(HOSTILE_CFLAGS)) -c -o $@.o $<
	$(OBJCOPY) --redefine-sym "normal_site_loop=$$(printf 'evil_site\033]0;pwned\007')" $@.o $@.2.o
	$(CC) -o $@ $@.2.o
	rm -f $@.o $@.2.o

hostile: $(HOSTILE_PROGS)
