# SPDX-License-Identifier: GPL-2.0
# bpf/X.bpf.c -> build/X.bpf.o -> build/X.skel.h -> build/stackpilot
# Quiet by default; `make V=1` shows the commands.

OUTPUT    ?= build
CLANG     ?= clang
BPFTOOL   ?= bpftool
CC        ?= cc
PKGCONFIG ?= pkg-config
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS))
SKELS     := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))
# Everything but main.c is also linked into the unit tests.
LIB_SRCS  := $(filter-out src/main.c,$(wildcard src/*.c))
LIB_OBJS  := $(patsubst src/%.c,$(OUTPUT)/%.o,$(LIB_SRCS))
HDRS      := $(wildcard include/*.h src/*.h)

LIBBPF_CFLAGS := $(shell $(PKGCONFIG) --cflags libbpf 2>/dev/null)
LIBBPF_LIBS   := $(shell $(PKGCONFIG) --libs libbpf 2>/dev/null || echo -lbpf) -lelf -lz
LIBMNL_LIBS   := $(shell $(PKGCONFIG) --libs libmnl 2>/dev/null || echo -lmnl)
# rtnetlink through libmnl: linked wherever libbpf is.
LIBBPF_LIBS   += $(LIBMNL_LIBS)

CFLAGS    ?= -g -O2
CFLAGS    += -Wall -Wextra -Werror -Wno-unused-parameter -std=gnu11 \
	     -Iinclude -Isrc -I$(OUTPUT) $(LIBBPF_CFLAGS)
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	     -Wno-unused-function -I. -Iinclude

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# Keep the objects and skeletons between builds.
.SECONDARY: $(BPF_OBJS) $(SKELS)

.PHONY: all deps check test bench run clean
all: $(OUTPUT)/stackpilot $(OUTPUT)/test_unit $(OUTPUT)/test_fragguard $(OUTPUT)/tcptool $(OUTPUT)/fragflood

deps:
	$(Q)scripts/install-deps.sh

$(OUTPUT):
	$(Q)mkdir -p $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c bpf/common.bpf.h include/stackpilot.h vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

$(OUTPUT)/%.o: src/%.c $(HDRS) $(SKELS) | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(OUTPUT)/stackpilot: $(OUTPUT)/main.o $(LIB_OBJS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $^ $(LIBBPF_LIBS) -o $@

$(OUTPUT)/test_unit: tests/unit/test_unit.c $(LIB_OBJS) $(HDRS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) tests/unit/test_unit.c $(LIB_OBJS) $(LIBBPF_LIBS) -o $@

$(OUTPUT)/test_fragguard: tests/unit/test_fragguard.c $(OUTPUT)/fragguard.skel.h include/stackpilot.h
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBBPF_LIBS) -o $@

$(OUTPUT)/%: tests/tools/%.c | $(OUTPUT)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

# The README's test command. Installs what is missing, builds, runs all.
check test: deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)tests/run.sh

bench: deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)tests/bench/run.sh

# The README's main job: attach to the root cgroup, live status, Ctrl-C detaches.
run: deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)$(OUTPUT)/stackpilot run $(ARGS)

clean:
	$(call msg,CLEAN)
	$(Q)rm -rf $(OUTPUT)
