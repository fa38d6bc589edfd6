# SPDX-License-Identifier: GPL-2.0
# tests/attach: the programs heapprofctl attach loads the client into, into
# build/tests/attach/. Included by the top-level Makefile (target
# `attach-tests`, part of `userspace`, so the VM gets them too);
# tests/attach/run runs them.
ATTACH_SRC := $(CURDIR)/tests/attach
ATTACH_OUT := $(CURDIR)/build/tests/attach
ATTACH_CFLAGS := -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
ATTACH_PROGS := $(ATTACH_OUT)/storm $(ATTACH_OUT)/libdlsite.so $(ATTACH_OUT)/static_loop \
	$(ATTACH_OUT)/cxx_storm $(ATTACH_OUT)/victim $(ATTACH_OUT)/libdecoy.so \
	$(ATTACH_OUT)/libaudit.so $(ATTACH_OUT)/suid_probe $(ATTACH_OUT)/vregs

$(ATTACH_OUT):
	mkdir -p $@

$(ATTACH_OUT)/storm: $(ATTACH_SRC)/storm.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -o $@ $< -ldl -lpthread

$(ATTACH_OUT)/vregs: $(ATTACH_SRC)/vregs.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -o $@ $<

$(ATTACH_OUT)/cxx_storm: $(ATTACH_SRC)/cxx_storm.cc | $(ATTACH_OUT)
	$(CXX) -std=gnu++17 -Wall -Wextra -Werror -g -O1 -fno-omit-frame-pointer -o $@ $< -lpthread

$(ATTACH_OUT)/libdlsite.so: $(ATTACH_SRC)/dlsite.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -fPIC -shared -o $@ $<

# tests/attach/hostile: a user's programs against root's attach.
$(ATTACH_OUT)/victim: $(ATTACH_SRC)/victim.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -o $@ $< -lpthread

$(ATTACH_OUT)/suid_probe: $(ATTACH_SRC)/suid_probe.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -o $@ $<

$(ATTACH_OUT)/libdecoy.so: $(ATTACH_SRC)/decoy.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -fPIC -shared -nostdlib -fno-stack-protector -o $@ $<

$(ATTACH_OUT)/libaudit.so: $(ATTACH_SRC)/audit.c | $(ATTACH_OUT)
	$(CC) $(ATTACH_CFLAGS) -fPIC -shared -o $@ $<

# Without libc.a there is no static program to refuse: the test skips.
$(ATTACH_OUT)/static_loop: $(ATTACH_SRC)/static_loop.c | $(ATTACH_OUT)
	-$(CC) $(ATTACH_CFLAGS) -static -o $@ $<

attach-tests: $(ATTACH_PROGS)
