# SPDX-License-Identifier: GPL-2.0
# The daemon's profile pipeline (daemon/pipeline/): records -> profile files.
# Included by daemon/Makefile; also usable on its own from daemon/:
#   make -f pipeline.mk pipeline-lib     build/libhp_pipeline.a
#   make -f pipeline.mk pipeline-check   tests (TAP lines), also under ASan/UBSan
#                                        and TSan, plus a short fuzz run
#   make -f pipeline.mk pipeline-fuzz    libFuzzer (FUZZ_RUNS=... / FUZZ_SECS=...)
#   make -f pipeline.mk pipeline-bench   unwind cost, memory per process
#
# For users: PIPELINE_SRCS, PIPELINE_CFLAGS, PIPELINE_LIBS, PIPELINE_LIB.
# Internal names start with PL_ so they never clash with the includer's.

PL_MK    := $(lastword $(MAKEFILE_LIST))
PL_ROOT  := $(abspath $(dir $(PL_MK))..)
PL_DIR   := $(PL_ROOT)/daemon/pipeline
PL_BUILD := $(PL_ROOT)/build
PL_OBJ   := $(PL_BUILD)/obj/pipeline
PL_GEN   := $(PL_BUILD)/gen/pipeline
PL_TDIR  := $(PL_BUILD)/tests/pipeline
PL_CC    ?= gcc
PL_CLANG ?= clang

PL_NAMES := parse hmap elf maps unwind symbolize books prof pprof frames render timeline numbers \
	    prof_diff prof_symbolize symcache sigmask memo reuse outfile intervals symtab python perfmap \
	    pipeline formats otlp samepath splice
# OpenTelemetry's profiles protos (proto/otel/, vendored), generated like profile.proto.
PL_OTEL_DIR   := $(PL_ROOT)/proto/otel
PL_OTEL_PROTO := opentelemetry/proto/common/v1/common opentelemetry/proto/resource/v1/resource \
		 opentelemetry/proto/profiles/v1development/profiles \
		 opentelemetry/proto/collector/profiles/v1development/profiles_service
PL_OTEL_C     := $(PL_OTEL_PROTO:%=$(PL_GEN)/%.pb-c.c)
PL_OTEL_H     := $(PL_OTEL_PROTO:%=$(PL_GEN)/%.pb-c.h)
PIPELINE_SRCS   := $(PL_NAMES:%=$(PL_DIR)/%.c) $(PL_GEN)/profile.pb-c.c $(PL_OTEL_C)
# The C++ runtime (__cxa_demangle, symbolize.c). A cross build names the
# runtime's shared object (make arm64: the :arm64 package has no -dev link).
PL_CXXRT ?= -lstdc++
PIPELINE_CFLAGS := -I$(PL_ROOT)/daemon -I$(PL_GEN) \
	$(shell pkg-config --cflags libunwind-ptrace libunwind-generic libdw libprotobuf-c zlib 2>/dev/null)
PIPELINE_LIBS   := $(shell pkg-config --libs libunwind-ptrace libunwind-generic libunwind libdw libelf libprotobuf-c zlib 2>/dev/null || \
		     echo -lunwind-ptrace -lunwind-generic -lunwind -ldw -lelf -lprotobuf-c -lz) \
		   $(PL_CXXRT) -lm -pthread
PIPELINE_LIB    := $(PL_BUILD)/libhp_pipeline.a

PL_WARN   := -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread
PL_CFLAGS := -O2 -g -fasynchronous-unwind-tables $(PL_WARN) $(PIPELINE_CFLAGS)
PL_HDRS   := $(wildcard $(PL_DIR)/*.h) $(wildcard $(PL_DIR)/arch/*.h) $(PL_ROOT)/uapi/linux/heapprofd.h $(PL_GEN)/profile.pb-c.h \
	     $(PL_OTEL_H)
PL_OBJS   := $(PL_NAMES:%=$(PL_OBJ)/%.o) $(PL_OBJ)/profile.pb-c.o $(PL_OTEL_PROTO:%=$(PL_OBJ)/%.pb-c.o)

.PHONY: pipeline-lib pipeline-check pipeline-fuzz pipeline-bench pipeline-clean

pipeline-lib: $(PIPELINE_LIB)

$(PL_GEN)/profile.pb-c.c $(PL_GEN)/profile.pb-c.h: $(PL_DIR)/profile.proto
	@mkdir -p $(PL_GEN)
	cd $(PL_DIR) && protoc-c --c_out=$(PL_GEN) profile.proto

# One protoc-c run makes them all (grouped target).
$(PL_OTEL_C) $(PL_OTEL_H) &: $(PL_OTEL_PROTO:%=$(PL_OTEL_DIR)/%.proto)
	@mkdir -p $(PL_GEN)
	cd $(PL_OTEL_DIR) && protoc-c --c_out=$(PL_GEN) $(PL_OTEL_PROTO:%=%.proto)

$(PL_OBJ)/opentelemetry/%.pb-c.o: $(PL_GEN)/opentelemetry/%.pb-c.c $(PL_OTEL_H)
	@mkdir -p $(@D)
	$(PL_CC) -O2 -g -fPIC $(PIPELINE_CFLAGS) -c $< -o $@

$(PL_OBJ)/%.o: $(PL_DIR)/%.c $(PL_HDRS)
	@mkdir -p $(PL_OBJ)
	$(PL_CC) $(PL_CFLAGS) -c $< -o $@

$(PL_OBJ)/profile.pb-c.o: $(PL_GEN)/profile.pb-c.c $(PL_GEN)/profile.pb-c.h
	@mkdir -p $(PL_OBJ)
	$(PL_CC) -O2 -g -fPIC $(PIPELINE_CFLAGS) -c $< -o $@

$(PIPELINE_LIB): $(PL_OBJS)
	@rm -f $@
	$(AR) rcs $@ $(PL_OBJS)

include $(PL_DIR)/tests/tests.mk
