# SPDX-License-Identifier: GPL-2.0
# Client benchmarks (included by libclient/Makefile): `make -C libclient bench`.
BBUILD := $(BUILD)/bench/client
BDIR := $(ROOT)/bench/client

$(BBUILD):
	mkdir -p $@

$(BBUILD)/bench_client: $(BDIR)/bench_client.c | $(BBUILD)
	$(CC) -std=gnu11 -O2 -g $(WARN) -o $@ $< -lpthread

$(BBUILD)/bench_run: $(BDIR)/bench_run.c tests/minidaemon.c tests/minidaemon.h $(HDRS) | $(BBUILD)
	$(CC) -std=gnu11 -O2 -g $(WARN) -I$(CURDIR) -o $@ $< tests/minidaemon.c -lpthread

$(BBUILD)/bench_draw: $(BDIR)/bench_draw.c sampler.c sampler.h | $(BBUILD)
	$(CC) -std=gnu11 -O2 -g $(WARN) -I$(CURDIR) -o $@ $< sampler.c -lm -lpthread

bench: $(LIB) $(BBUILD)/bench_client $(BBUILD)/bench_run $(BBUILD)/bench_draw
	$(BBUILD)/bench_run $(BUILD) $(or $(REPEATS),7)
	@if [ -z "$(BENCH_ONLY)" ] || [ "$(BENCH_ONLY)" = draw ]; then \
		echo "# a sample's draw (bench/client/bench_draw.c)"; \
		$(BBUILD)/bench_draw; fi
	@if [ -z "$(BENCH_ONLY)" ] || [ "$(BENCH_ONLY)" = paired ]; then \
		echo "# unsampled hooks, paired in-process, 1 and 2 threads (bench/client/paired.sh)"; \
		$(BDIR)/paired.sh; fi
