# SPDX-License-Identifier: GPL-2.0
# Tests of libheapprofd_client (included by ../Makefile).
# Every test binary prints TAP lines; `make check` runs them all, first as
# built normally, then under ASan+UBSan, and the threaded unit tests under
# TSan. The client library itself is preloaded into unsanitized targets
# (a sanitizer runtime and a malloc interposer cannot share a process).

TCFLAGS := -std=gnu11 -O2 -g $(WARN) -I$(CURDIR)
ASAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
TSAN := -fsanitize=thread -Wno-tsan
TDIR := $(CURDIR)/tests

UNIT_PLAIN := $(TBUILD)/test_sampler $(TBUILD)/test_ring $(TBUILD)/test_freeset $(TBUILD)/test_detect \
	$(TBUILD)/test_mark
UNIT_ASAN := $(TBUILD)/asan/test_sampler $(TBUILD)/asan/test_ring $(TBUILD)/asan/test_freeset \
	$(TBUILD)/asan/test_detect $(TBUILD)/asan/test_mark
UNIT_TSAN := $(TBUILD)/tsan/test_ring $(TBUILD)/tsan/test_freeset
E2E := $(TBUILD)/test_client $(TBUILD)/asan/test_client
TARGETS := $(TBUILD)/hp_target $(TBUILD)/hp_cxx $(TBUILD)/hp_target_linked $(TBUILD)/test_got \
	$(TBUILD)/libdlsite.so
KTEST := $(BUILD)/tests/client_kernel_test

guest-tests: $(KTEST) $(TBUILD)/hp_target

# The client itself with UBSan (ASan cannot share a process with a malloc
# interposer; UBSan can), for the end-to-end tests.
UBSAN_LIB := $(TBUILD)/ubsan/libheapprofd_client.so
$(UBSAN_LIB): $(SRCS) $(HDRS) | $(TBUILD)
	mkdir -p $(dir $@)
	$(CC) $(CFLAGS_LIB) -fsanitize=undefined -fno-sanitize-recover=undefined \
		$(LDFLAGS_LIB) -o $@ $(SRCS) $(LIBS_LIB)

tests: $(LIB) $(UBSAN_LIB) $(UNIT_PLAIN) $(UNIT_ASAN) $(UNIT_TSAN) $(E2E) $(TARGETS) $(KTEST)

$(TBUILD) $(TBUILD)/asan $(TBUILD)/tsan:
	mkdir -p $@

SRC_sampler := sampler.c
SRC_freeset := freeset.c
SRC_ring :=
SRC_detect := detect.c
SRC_mark :=
SRC_client := tests/minidaemon.c

# A unit test is rebuilt when the sources it compiles in change.
$(foreach t,sampler freeset detect,$(eval $(TBUILD)/test_$(t) $(TBUILD)/asan/test_$(t) \
	$(TBUILD)/tsan/test_$(t): $(SRC_$(t))))

$(TBUILD)/test_%: tests/test_%.c $(HDRS) ../tests/tap.h tests/minidaemon.h tests/minidaemon.c | $(TBUILD)
	$(CC) $(TCFLAGS) -o $@ $< $(SRC_$*) -lm -lpthread

$(TBUILD)/asan/test_%: tests/test_%.c $(HDRS) ../tests/tap.h tests/minidaemon.h tests/minidaemon.c | $(TBUILD)/asan
	$(CC) $(TCFLAGS) $(ASAN) -o $@ $< $(SRC_$*) -lm -lpthread

$(TBUILD)/tsan/test_%: tests/test_%.c $(HDRS) ../tests/tap.h | $(TBUILD)/tsan
	$(CC) $(TCFLAGS) $(TSAN) -o $@ $< $(SRC_$*) -lm -lpthread

$(TBUILD)/hp_target: tests/hp_target.c include/heapprofd_client.h | $(TBUILD)
	$(CC) $(TCFLAGS) -o $@ $< -lpthread

# The same program with the client as a DT_NEEDED library instead of
# LD_PRELOAD: the client loaded without LD_PRELOAD naming it, as from
# /etc/ld.so.preload (which the tests cannot write).
$(TBUILD)/hp_target_linked: tests/hp_target.c include/heapprofd_client.h $(LIB) | $(TBUILD)
	$(CC) $(TCFLAGS) -o $@ $< -Wl,--no-as-needed -L$(BUILD) -lheapprofd_client \
		-Wl,-rpath,$(BUILD) -lpthread

# The client loaded by dlopen as heapprofctl attach loads it (got.c).
$(TBUILD)/test_got: tests/test_got.c ../tests/tap.h | $(TBUILD)
	$(CC) $(TCFLAGS) -o $@ $< -ldl

$(TBUILD)/libdlsite.so: ../tests/attach/dlsite.c | $(TBUILD)
	$(CC) $(TCFLAGS) -fPIC -shared -o $@ $<

$(TBUILD)/hp_cxx: tests/hp_cxx.cc | $(TBUILD)
	$(CXX) -std=gnu++17 -O2 -g -Wall -Wextra -Werror -o $@ $< -lpthread

$(KTEST): tests/client_kernel_test.c $(HDRS) ../tests/tap.h | $(TBUILD)
	$(CC) $(TCFLAGS) -o $@ $< -lpthread

check: tests
	@echo "# libclient: unit tests"
	@rc=0; \
	for t in $(UNIT_PLAIN); do $$t || rc=1; done; \
	echo "# libclient: unit tests under ASan+UBSan"; \
	for t in $(UNIT_ASAN); do HP_TAP_PREFIX='[asan] ' $$t || rc=1; done; \
	echo "# libclient: threaded unit tests under TSan"; \
	for t in $(UNIT_TSAN); do HP_TAP_PREFIX='[tsan] ' TSAN_OPTIONS=halt_on_error=1 $$t || rc=1; done; \
	echo "# libclient: loaded by dlopen, hooks by GOT (as heapprofctl attach loads it)"; \
	$(TBUILD)/test_got $(LIB) $(TBUILD)/libdlsite.so || rc=1; \
	echo "# libclient: end-to-end over the socket transport"; \
	$(TBUILD)/test_client $(BUILD) || rc=1; \
	echo "# libclient: end-to-end, the test daemon under ASan+UBSan"; \
	HP_TAP_PREFIX='[asan] ' $(TBUILD)/asan/test_client $(BUILD) || rc=1; \
	echo "# libclient: end-to-end, the client built with UBSan"; \
	HP_TAP_PREFIX='[ubsan client] ' HP_TEST_LIB=$(UBSAN_LIB) UBSAN_OPTIONS=print_stacktrace=1 \
		$(TBUILD)/test_client $(BUILD) || rc=1; \
	echo "# libclient: kernel transport (runs in the VM via tests/guest.list)"; \
	$(KTEST); test $$? -eq 0 -o $$? -eq 4 || rc=1; \
	exit $$rc
