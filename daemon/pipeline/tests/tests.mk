# SPDX-License-Identifier: GPL-2.0
# Pipeline tests, fuzzing and benchmarks (included by daemon/pipeline.mk).

PL_TSRC    := $(PL_DIR)/tests
PL_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
PL_TSAN    := -fsanitize=thread
PL_LIBSRC  := $(PL_NAMES:%=$(PL_DIR)/%.c) $(PL_GEN)/profile.pb-c.c $(PL_OTEL_C)
PL_TDEPS   := $(PL_LIBSRC) $(PL_HDRS) $(wildcard $(PL_TSRC)/*.[ch])
# The call chains are built without sanitizers: O0 with frame pointers, O2
# without (only DWARF unwinds those).
PL_TARGET_OBJS := $(PL_TDIR)/target_o0.o $(PL_TDIR)/target_o2.o $(PL_TDIR)/capture.o
PL_DLTEST      := $(PL_TDIR)/libhp_dltest.so
PL_SYMTEST     := $(PL_TDIR)/libhp_symtest.so
PL_SYMROOT     := $(PL_TDIR)/symroot
PL_TDEFS       := -DHP_DLTEST_SO='"$(PL_DLTEST)"' -DHP_SYMTEST_SO='"$(PL_SYMTEST)"' \
		  -DHP_SYMROOT='"$(PL_SYMROOT)"'

$(PL_DLTEST): $(PL_TSRC)/dltest.c
	@mkdir -p $(PL_TDIR)
	$(PL_CC) -std=gnu11 -g -O2 -fomit-frame-pointer -fno-optimize-sibling-calls -shared -fPIC $< -o $@

# The symbol cache's test library: debug info split off into a debug root
# by build id and compressed, as distributions ship it (libc6-dbg).
$(PL_SYMTEST): $(PL_TSRC)/dltest.c
	@mkdir -p $(PL_TDIR)
	$(PL_CC) -std=gnu11 -g -O2 -Wl,--build-id -shared -fPIC $< -o $@.full
	id=$$(readelf -n $@.full | sed -n 's/.*Build ID: *//p'); [ -n "$$id" ] && \
	d=$(PL_SYMROOT)/.build-id/$$(echo $$id | cut -c1-2) && mkdir -p $$d && \
	objcopy --only-keep-debug --compress-debug-sections=zlib $@.full $$d/$$(echo $$id | cut -c3-).debug && \
	objcopy --strip-debug $@.full $@ && rm -f $@.full

$(PL_TDIR)/target_o0.o: $(PL_TSRC)/target_o0.c $(PL_TSRC)/capture.h
	@mkdir -p $(PL_TDIR)
	$(PL_CC) -std=gnu11 -g -O0 -fno-omit-frame-pointer -c $< -o $@
$(PL_TDIR)/target_o2.o: $(PL_TSRC)/target_o2.c $(PL_TSRC)/capture.h
	@mkdir -p $(PL_TDIR)
	$(PL_CC) -std=gnu11 -g -O2 -fomit-frame-pointer -fno-optimize-sibling-calls -c $< -o $@
$(PL_TDIR)/capture.o: $(PL_TSRC)/capture.c $(PL_TSRC)/capture.h $(PL_HDRS)
	@mkdir -p $(PL_TDIR)
	$(PL_CC) -std=gnu11 -g -O2 -fomit-frame-pointer -c $< -o $@

$(PL_TDIR)/test_pipeline: $(PL_TDEPS) $(PL_TARGET_OBJS) $(PL_DLTEST) $(PL_SYMTEST)
	$(PL_CC) $(PL_WARN) -g -O1 $(PL_TDEFS) $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/test_pipeline.c \
		$(PL_LIBSRC) $(PL_TARGET_OBJS) $(PIPELINE_LIBS)
$(PL_TDIR)/test_pipeline_asan: $(PL_TDEPS) $(PL_TARGET_OBJS) $(PL_DLTEST) $(PL_SYMTEST)
	$(PL_CC) $(PL_WARN) -g -O1 $(PL_TDEFS) $(PL_SAN) $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/test_pipeline.c \
		$(PL_LIBSRC) $(PL_TARGET_OBJS) $(PIPELINE_LIBS)
$(PL_TDIR)/test_pipeline_tsan: $(PL_TDEPS) $(PL_TARGET_OBJS) $(PL_DLTEST) $(PL_SYMTEST)
	$(PL_CC) $(PL_WARN) -g -O1 $(PL_TDEFS) $(PL_TSAN) $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/test_pipeline.c \
		$(PL_LIBSRC) $(PL_TARGET_OBJS) $(PIPELINE_LIBS)

# Python frames, location tables and perf maps against hostile input.
$(PL_TDIR)/test_runtimes: $(PL_TDEPS)
	@mkdir -p $(PL_TDIR)
	$(PL_CC) $(PL_WARN) -g -O1 $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/test_runtimes.c \
		$(PL_LIBSRC) $(PIPELINE_LIBS)
$(PL_TDIR)/test_runtimes_asan: $(PL_TDEPS)
	@mkdir -p $(PL_TDIR)
	$(PL_CC) $(PL_WARN) -g -O1 $(PL_SAN) $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/test_runtimes.c \
		$(PL_LIBSRC) $(PIPELINE_LIBS)

# libFuzzer over hp_proc_feed's parser and the unwinder's inputs.
FUZZ_RUNS ?= 20000
FUZZ_SECS ?= 30
$(PL_TDIR)/fuzz_feed: $(PL_TDEPS)
	@mkdir -p $(PL_TDIR)
	$(PL_CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/fuzz_feed.c \
		$(PL_LIBSRC) $(PIPELINE_LIBS)

$(PL_TDIR)/fuzz_pprof: $(PL_TDEPS)
	@mkdir -p $(PL_TDIR)
	$(PL_CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined $(PIPELINE_CFLAGS) -o $@ $(PL_TSRC)/fuzz_pprof.c \
		$(PL_LIBSRC) $(PIPELINE_LIBS)

# $(1) target, $(2) runs, $(3) seconds, $(4) TAP number, $(5) what. Inputs
# that once crashed a target (tests/regress-TARGET, kept in git) are run
# first, every time.
PL_RUN_FUZZ = mkdir -p $(PL_TDIR)/corpus-$(1) && cd $(PL_TDIR) && \
	if ./$(1) -runs=$(2) -max_total_time=$(3) -max_len=4096 corpus-$(1) \
		$(wildcard $(PL_TSRC)/regress-$(1)) > $(1).log 2>&1; \
	then echo "ok $(4) - $(5): $$(grep -o 'Done [0-9]* runs' $(1).log) without a crash"; \
	else echo "not ok $(4) - $(5): crash, see $(PL_TDIR)/$(1).log"; tail -30 $(1).log | sed 's/^/\# /'; fi

pipeline-fuzz: $(PL_TDIR)/fuzz_feed $(PL_TDIR)/fuzz_pprof
	@$(call PL_RUN_FUZZ,fuzz_feed,-1,$(FUZZ_SECS),1,fuzz records + unwinder)
	@$(call PL_RUN_FUZZ,fuzz_pprof,-1,$(FUZZ_SECS),2,fuzz pprof reader + renderers)

# $(1) tag, $(2) command: its TAP lines tagged; a run that dies without a
# "not ok" line (a sanitizer abort, a crash) still counts as a failure.
PL_RUN_T = echo "\# pipeline tests ($(1))"; out=$$(HP_GOCACHE=$(PL_BUILD)/gocache $(2) 2>&1); rc=$$?; \
	printf '%s\n' "$$out" | sed 's/^\(\(not \)\{0,1\}ok [0-9]* - \)/\1[$(1)] /'; \
	if [ $$rc -ne 0 ] && ! printf '%s\n' "$$out" | grep -q '^not ok'; then \
		echo "not ok - pipeline tests [$(1)]: exited $$rc without naming a failed test"; fi

# Three builds of the tests (plain, ASan+UBSan, TSan), then a short fuzz run.
pipeline-check: $(PL_TDIR)/test_pipeline $(PL_TDIR)/test_pipeline_asan $(PL_TDIR)/test_pipeline_tsan $(PL_TDIR)/fuzz_feed $(PL_TDIR)/fuzz_pprof $(PL_TDIR)/test_runtimes $(PL_TDIR)/test_runtimes_asan
	@$(call PL_RUN_T,plain,$(PL_TDIR)/test_pipeline)
	@$(call PL_RUN_T,runtimes,$(PL_TDIR)/test_runtimes)
	@$(call PL_RUN_T,runtimes asan,env ASAN_OPTIONS=detect_leaks=1 $(PL_TDIR)/test_runtimes_asan)
	@$(call PL_RUN_T,asan,env ASAN_OPTIONS=detect_leaks=1 $(PL_TDIR)/test_pipeline_asan)
	@$(call PL_RUN_T,tsan,env TSAN_OPTIONS=halt_on_error=1 setarch -R $(PL_TDIR)/test_pipeline_tsan)
	@$(call PL_RUN_FUZZ,fuzz_feed,$(FUZZ_RUNS),$(FUZZ_SECS),1,pipeline fuzz: records + unwinder)
	@$(call PL_RUN_FUZZ,fuzz_pprof,$(FUZZ_RUNS),$(FUZZ_SECS),2,pipeline fuzz: pprof reader + renderers)

# Unwind cost (30-frame stacks, warm caches), memory per process, and the
# accuracy against a known workload (needs build/heapprofctl and the client).
$(PL_BUILD)/bench/pipeline/bench_unwind: $(PL_TDEPS) $(PL_TARGET_OBJS) $(PL_ROOT)/bench/unwind/bench_unwind.c
	@mkdir -p $(dir $@)
	$(PL_CC) $(PL_WARN) -O2 -g $(PIPELINE_CFLAGS) -I$(PL_TSRC) -I$(PL_DIR) -o $@ \
		$(PL_ROOT)/bench/unwind/bench_unwind.c $(PL_LIBSRC) $(PL_TARGET_OBJS) $(PIPELINE_LIBS)

pipeline-bench: $(PL_BUILD)/bench/pipeline/bench_unwind
	$(PL_BUILD)/bench/pipeline/bench_unwind
	$(PL_ROOT)/bench/unwind/accuracy.sh
