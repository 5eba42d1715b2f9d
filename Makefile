# SPDX-License-Identifier: GPL-2.0
# bpf/X.bpf.c -> build/X.bpf.o -> build/X.skel.h -> build/stackpilot
# Quiet by default; `make V=1` shows the commands.

# `make SANITIZE=1` builds the loader and its unit tests (test_unit) with
# ASan + UBSan into build-san/ (BPF objects are the same); `make check` runs
# the whole suite against that build.
# `make` builds everything: rules above `all` (version.h) must not become the default.
.DEFAULT_GOAL := all

ifeq ($(SANITIZE),1)
OUTPUT    ?= build-san
else
OUTPUT    ?= build
endif
SAN_OUTPUT := build-san
CLANG     ?= clang
BPFTOOL   ?= bpftool
CC        ?= cc
PKGCONFIG ?= pkg-config
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/')

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
# Second builds of a BPF file for kernels that refuse something in the
# first: NAME_noatomics from bpf/NAME.bpf.c with -DSP_NO_ATOMICS (before
# 5.12, no BPF atomic but a plain add). The module's loader picks one.
BPF_VARIANTS := rehash_noatomics
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS)) \
	     $(patsubst %,$(OUTPUT)/%.bpf.o,$(BPF_VARIANTS))
SKELS     := $(patsubst %.bpf.o,%.skel.h,$(BPF_OBJS))
# The loader's layers are folders of src/ (docs/architecture.md): core/,
# modules/ (a folder per module), service/, export/, cli/. Objects keep
# the folder (OUTPUT/obj/core/log.o). Everything but the command line's
# main.c is also linked into the unit tests.
SRC_DIRS  := src/core src/modules $(wildcard src/modules/*/) src/service src/export src/cli
LIB_SRCS  := $(filter-out src/cli/main.c,$(wildcard $(addsuffix /*.c,$(SRC_DIRS:/=))))
LIB_OBJS  := $(patsubst src/%.c,$(OUTPUT)/obj/%.o,$(LIB_SRCS))
HDRS      := $(wildcard include/*.h $(addsuffix /*.h,$(SRC_DIRS:/=)))

LIBBPF_CFLAGS := $(shell $(PKGCONFIG) --cflags libbpf 2>/dev/null)
LIBBPF_LIBS   := $(shell $(PKGCONFIG) --libs libbpf 2>/dev/null || echo -lbpf) -lelf -lz
LIBMNL_LIBS   := $(shell $(PKGCONFIG) --libs libmnl 2>/dev/null || echo -lmnl)
# rtnetlink through libmnl: linked wherever libbpf is.
LIBBPF_LIBS   += $(LIBMNL_LIBS)
# run --metrics-listen (src/export/metrics.c)
LIBBPF_LIBS   += $(shell $(PKGCONFIG) --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd)
# sd_notify(3): readiness and reloads under systemd (Type=notify)
LIBBPF_LIBS   += $(shell $(PKGCONFIG) --libs libsystemd 2>/dev/null || echo -lsystemd)

CFLAGS    ?= -g -O2
CFLAGS    += -Wall -Wextra -Werror -Wno-unused-parameter -std=gnu11 \
	     -Iinclude -Isrc -I$(OUTPUT) $(LIBBPF_CFLAGS)
ifeq ($(SANITIZE),1)
# Any finding stops the program (src/core/sanitize.c sets abort_on_error), so a
# test sees a failure rather than a report it does not read.
SAN_CFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	     -fno-omit-frame-pointer -DSP_SANITIZE
endif
BPF_CFLAGS := -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -Wall -Werror \
	     -Wno-unused-function -I. -Iinclude
# A mutant of `make mutants` (tests/mutants/run.sh, docs/mutants.md):
# MUTANT=NAME compiles the C and BPF sources with -DSP_MUTANT_NAME, the
# switch that removes one decision. Always with its own OUTPUT.
ifneq ($(MUTANT),)
CFLAGS     += -DSP_MUTANT_$(MUTANT)
BPF_CFLAGS += -DSP_MUTANT_$(MUTANT)
endif

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

# `stackpilot --version`: `git describe` of the source tree at build time,
# or VERSION (a tarball has no .git; `make STACKPILOT_VERSION=...` overrides both).
# The header is rewritten only when the string changes, so an unchanged
# tree does not relink.
VERSION_FALLBACK := $(shell cat VERSION 2>/dev/null)
STACKPILOT_VERSION ?= $(shell test -e .git && git describe --tags --always --dirty 2>/dev/null || echo '$(VERSION_FALLBACK)')
$(OUTPUT)/version.h: FORCE | $(OUTPUT)
	$(Q)printf '#define SP_VERSION "%s"\n' '$(STACKPILOT_VERSION)' > $@.tmp; \
	cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(OUTPUT)/obj/cli/main.o $(OUTPUT)/obj/service/targets.o: $(OUTPUT)/version.h
FORCE:

# Keep the objects and skeletons between builds.
.SECONDARY: $(BPF_OBJS) $(SKELS)

.PHONY: all deps test-deps check test vmtest bench bench-compare mutants run clean man install uninstall layers deb image FORCE
all: $(OUTPUT)/stackpilot $(OUTPUT)/test_unit $(OUTPUT)/test_fragguard $(OUTPUT)/tcptool $(OUTPUT)/fragflood $(OUTPUT)/fragdiff $(OUTPUT)/fgcost $(OUTPUT)/rhfloor $(OUTPUT)/sockops_floor

# What building needs (`make run` too); test-deps: that and what the
# tests, benchmarks and kernel matrix need (`make check`).
deps:
	$(Q)scripts/install-deps.sh build

test-deps:
	$(Q)scripts/install-deps.sh test

# Imports point down only (docs/architecture.md): each layer of src/
# includes its own headers and those of the layers below it, never one
# above, and a module's folder includes no other module's. A call needs a
# declaration (-Werror), and each layer declares its names in its own
# headers, so these includes are the whole import graph. Prints what
# breaks the rule and fails, or prints nothing.
LAYER_ORDER := core modules export service cli
layers:
	$(Q)fail=0; above="$(LAYER_ORDER)"; \
	for l in $(LAYER_ORDER); do \
		above=$${above#*$$l}; \
		files=$$(ls src/$$l/*.[ch] 2>/dev/null); \
		[ $$l != modules ] || files="$$files $$(ls src/modules/*/*.[ch])"; \
		for u in $$above; do \
			grep -Hn "#include \"$$u/" $$files && fail=1; \
		done; \
	done; \
	for d in src/modules/*/; do \
		n=$$(basename $$d); \
		grep -Hn '#include "modules/' $$d*.[ch] | grep -v "\"modules/$$n/" && fail=1; \
	done; \
	exit $$fail

$(OUTPUT):
	$(Q)mkdir -p $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.bpf.h) include/stackpilot.h vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(OUTPUT)/%_noatomics.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.bpf.h) include/stackpilot.h vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -DSP_NO_ATOMICS -c $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@.tmp && mv $@.tmp $@

$(OUTPUT)/obj/%.o: src/%.c $(HDRS) $(SKELS) | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) $(SAN_CFLAGS) -c $< -o $@

$(OUTPUT)/stackpilot: $(OUTPUT)/obj/cli/main.o $(LIB_OBJS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_CFLAGS) $^ $(LIBBPF_LIBS) -o $@

$(OUTPUT)/test_unit: tests/unit/test_unit.c tests/unit/check.h $(LIB_OBJS) $(HDRS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_CFLAGS) tests/unit/test_unit.c $(LIB_OBJS) $(LIBBPF_LIBS) -o $@

$(OUTPUT)/test_fragguard: tests/unit/test_fragguard.c tests/unit/check.h tests/tools/csum.h $(OUTPUT)/fragguard.skel.h include/stackpilot.h
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_CFLAGS) $< $(LIBBPF_LIBS) -o $@

$(OUTPUT)/fragdiff: tests/tools/fragdiff.c tests/tools/csum.h include/stackpilot.h | $(OUTPUT)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBBPF_LIBS) -lm -o $@

# The tools that load BPF themselves (an empty program beside the one measured).
$(OUTPUT)/fgcost: tests/tools/csum.h
$(OUTPUT)/fgcost $(OUTPUT)/rhfloor $(OUTPUT)/sockops_floor: $(OUTPUT)/%: tests/tools/%.c | $(OUTPUT)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBBPF_LIBS) -o $@

$(OUTPUT)/%: tests/tools/%.c | $(OUTPUT)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

# The README's test command. Installs what is missing, builds, runs all
# (tests/check.sh): the sanitized build's unit tests, the whole suite
# against the sanitized loader (tests/run.sh runs the unit tests of build/
# too), the fast mutants (build-mut/), then the kernel matrix on build/
# (tests/vm/). The traffic tools are not sanitized. `make check SP_VM=0`
# leaves the matrix out.
check test: test-deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)$(MAKE) -s --no-print-directory SANITIZE=1 OUTPUT=$(SAN_OUTPUT) all
	$(Q)SAN_OUTPUT=$(SAN_OUTPUT) tests/check.sh

# Every mutant of tests/mutants/list, each built into build-mut/NAME with
# its switch and killed by its guarding tests (docs/mutants.md); ends with
# "M mutants, K killed". `make check` runs the fast ones.
mutants: test-deps
	$(Q)tests/mutants/run.sh

# One kernel of the matrix (tests/vm/kernels), e.g. `make vmtest KERNEL=6.1`;
# TESTS="PATTERN ..." instead of the core set (tests/vm/core-tests; a
# pattern may end in $). Without KERNEL, every kernel of the matrix.
vmtest: test-deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)$(if $(KERNEL),tests/vm/run.sh $(KERNEL) $(foreach t,$(value TESTS),'$t'),tests/vm/matrix.sh)

bench: test-deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)tests/bench/run.sh

# The benchmarks matching BENCH (default: pmtu, rehash, fragguard) with the
# stackpilot of REV and of this tree, side by side in one run (ABBA).
bench-compare: test-deps
	$(Q)test -n "$(REV)" || { echo "bench-compare: give REV=COMMIT (the build to compare against)" >&2; exit 2; }
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)tests/bench/compare.sh "$(REV)" "$(or $(BENCH),pmtu\|rehash\|fragguard)"

# The README's main job: attach to the root cgroup, live status, Ctrl-C detaches.
# `run` takes the root cgroup only when asked for by name (--cgroup /): this
# target asks, unless ARGS chooses a cgroup or the modules itself. A first
# run on someone's host only counts what it would do (--dry-run) unless
# ENFORCE=1: every flow of the host is in the root cgroup.
RUN_CGROUP := $(if $(findstring --cgroup,$(ARGS))$(findstring --modules,$(ARGS)),,--cgroup /)
RUN_DRY   := $(if $(filter 1,$(ENFORCE)),,--dry-run)
run: deps
	$(Q)$(MAKE) -s --no-print-directory all
	$(Q)$(if $(RUN_DRY),echo "make run: a dry run: modules count what they would do and do not act." \
		"To act: make run ENFORCE=1 (or now from another terminal: stackpilot set MODULE.enforce=1)")
	$(Q)$(OUTPUT)/stackpilot run $(RUN_CGROUP) $(RUN_DRY) $(ARGS)

# Man pages: one reStructuredText source each (docs/), rendered by rst2man
# (python3-docutils). A module page's @TUNABLES@ and @COUNTERS@ lines are
# replaced by what the loader itself says (scripts/man-page.sh: `stackpilot
# tunables --rst MODULE`, `stackpilot counters --rst MODULE`), so the page's ranges,
# defaults, counters and their metric names are the code's. A page's other
# metrics are prose, held against a live exposition by t_metrics_man_pages.
RST2MAN   ?= rst2man
MAN_SRCS  := $(wildcard docs/*.rst)
MAN_PAGES := $(patsubst docs/%.rst,$(OUTPUT)/man/%.8,$(MAN_SRCS))
man: $(MAN_PAGES)

$(OUTPUT)/man/%.8: docs/%.rst $(OUTPUT)/stackpilot scripts/man-page.sh
	$(call msg,MAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)scripts/man-page.sh $< $(OUTPUT)/stackpilot > $@.rst && \
	$(RST2MAN) --halt=warning --no-generator --no-datestamp $@.rst > $@.tmp && mv $@.tmp $@ && rm -f $@.rst

# `make install PREFIX=/usr/local DESTDIR=...`: the binary, the unit (with
# this PREFIX's path in ExecStart), the example config (never over an
# operator's: installed only when there is none, and uninstalled only while
# unchanged), the route protocol name, man pages and bash completion. systemd reads units from /usr/local/lib/systemd/system
# too; iproute2's configuration stays in /etc whatever the PREFIX.
PREFIX      ?= /usr/local
SBINDIR     ?= $(PREFIX)/sbin
UNITDIR     ?= $(PREFIX)/lib/systemd/system
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
SYSCONFDIR  ?= /etc
install: $(OUTPUT)/stackpilot $(MAN_PAGES)
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)install -D -m 0755 $(OUTPUT)/stackpilot $(DESTDIR)$(SBINDIR)/stackpilot
	$(Q)install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man8
	$(Q)sed -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
		dist/stackpilot.service.in > $(DESTDIR)$(UNITDIR)/stackpilot.service
	$(Q)chmod 0644 $(DESTDIR)$(UNITDIR)/stackpilot.service
	$(Q)install -D -m 0644 dist/rt_protos.conf $(DESTDIR)$(SYSCONFDIR)/iproute2/rt_protos.d/stackpilot.conf
	$(Q)test -e $(DESTDIR)$(SYSCONFDIR)/stackpilot/stackpilot.conf || \
		install -D -m 0644 dist/stackpilot.conf $(DESTDIR)$(SYSCONFDIR)/stackpilot/stackpilot.conf
	$(Q)install -m 0644 $(MAN_PAGES) $(DESTDIR)$(MANDIR)/man8/
	$(Q)install -D -m 0644 dist/stackpilot.bash $(DESTDIR)$(BASHCOMPDIR)/stackpilot

uninstall:
	$(Q)! cmp -s dist/stackpilot.conf $(DESTDIR)$(SYSCONFDIR)/stackpilot/stackpilot.conf || \
		{ rm -f $(DESTDIR)$(SYSCONFDIR)/stackpilot/stackpilot.conf; rmdir $(DESTDIR)$(SYSCONFDIR)/stackpilot; }
	$(Q)rm -f $(DESTDIR)$(SBINDIR)/stackpilot $(DESTDIR)$(UNITDIR)/stackpilot.service \
		$(DESTDIR)$(SYSCONFDIR)/iproute2/rt_protos.d/stackpilot.conf \
		$(patsubst docs/%.rst,$(DESTDIR)$(MANDIR)/man8/%.8,$(MAN_SRCS)) \
		$(DESTDIR)$(BASHCOMPDIR)/stackpilot

# `make deb`: the Debian package (debian/, debhelper), built from a copy
# of this tree so build/ and debian/ stay as they are. DEB_VERSIONS=V
# builds it as version V instead of debian/changelog's; "V1 V2 ...": one
# package each (a test of an upgrade). The .deb goes to DEB_OUT (default:
# this folder).
DEB_OUT ?= .
deb: deps
	$(Q)scripts/make-deb.sh "$(DEB_OUT)" $(DEB_VERSIONS)

clean:
	$(call msg,CLEAN)
	$(Q)rm -rf $(OUTPUT) $(SAN_OUTPUT) build-mut

# `make image`: the container image (scripts/image.sh, buildah from scratch),
# tagged IMAGE:VERSION and IMAGE:latest. VERSION is `stackpilot --version`'s.
IMAGE ?= localhost/stackpilot
image: $(OUTPUT)/stackpilot
	$(call msg,IMAGE,$(IMAGE):$(STACKPILOT_VERSION))
	$(Q)scripts/image.sh $(OUTPUT)/stackpilot $(IMAGE) '$(STACKPILOT_VERSION)'
