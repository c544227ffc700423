# sbx: one entry point.  `make` builds the programs into build/bin; `make
# SAN=1` builds the same tree with AddressSanitizer and UBSan into build/san.
# Every library comes through pkg-config.

# The system's programs first.  The suites start Debian's python3 (the
# one `make deps` gives python3-protobuf and the rest) hundreds of times,
# and a version manager's shim in front of /usr/bin (pyenv) both picks
# another interpreter and costs 0.4 s a start.
export PATH := /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$(PATH)

PREFIX    ?= /usr/local
DESTDIR   ?=
SBX_STATE ?= $(CURDIR)/run

CC        ?= cc
PKGS       = libprotobuf-c libevent libevent_openssl libevent_pthreads yaml-0.1 sqlite3 openssl libsodium jansson libsystemd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CRIT_LIBS  := $(shell pkg-config --libs criterion 2>/dev/null)
# libpq: its header only.  The fleet's store (policyd, approvald, sbxctl)
# loads the library when one is configured (common/pg.c): nothing links it.
PQ_CFLAGS  := $(shell pkg-config --cflags libpq 2>/dev/null)

WARN      = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wpointer-arith -Werror
CFLAGS   ?= -O2 -g
SAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined

ifeq ($(SAN),1)
B        := build/san
XCFLAGS  := $(SAN_FLAGS) -O1
XLDFLAGS := $(SAN_FLAGS)
else
B        := build
XCFLAGS  :=
XLDFLAGS :=
endif

GEN      := build/gen
ALLCFLAGS = -std=c17 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(XCFLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS)
LDLIBS    = $(PKG_LIBS) -lpthread

# ---- protocol ------------------------------------------------------------
PROTOS    := $(sort $(wildcard proto/sbx/v1/*.proto))
PB_C      := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
PB_H      := $(PB_C:.c=.h)

# ---- common library ------------------------------------------------------
COMMON_SRCS  = common/log.c
COMMON_SRCS += common/peer.c
COMMON_SRCS += common/frame.c
COMMON_SRCS += common/frame_client.c
COMMON_SRCS += common/yaml.c
COMMON_SRCS += common/policy.c
COMMON_SRCS += common/policy_yaml.c
COMMON_SRCS += common/policy_diff.c
COMMON_SRCS += common/sign.c
COMMON_SRCS += common/receipt.c
COMMON_SRCS += common/keyfile.c
COMMON_SRCS += common/audit.c
COMMON_SRCS += common/auditq.c
COMMON_SRCS += common/util.c
COMMON_SRCS += common/sha256.c
COMMON_SRCS += common/config.c
COMMON_SRCS += common/pg.c
COMMON_SRCS += common/daemon.c
COMMON_SRCS += common/admin.c
COMMON_SRCS += common/scrape.c
COMMON_SRCS += common/utf8.c
COMMON_SRCS += common/name.c
COMMON_SRCS += common/errf.c
COMMON_SRCS += common/trace.c

# ---- programs ------------------------------------------------------------
POLICYD_SRCS  = policyd/policyd.c
POLICYD_SRCS += policyd/parse.c
POLICYD_SRCS += policyd/orch.c
POLICYD_SRCS += policyd/control.c
POLICYD_SRCS += policyd/launch.c
POLICYD_SRCS += policyd/commit.c
POLICYD_SRCS += policyd/template.c
POLICYD_SRCS += policyd/pin.c
POLICYD_SRCS += policyd/rollout.c
POLICYD_SRCS += policyd/entitle.c
POLICYD_SRCS += policyd/entitle_eff.c
POLICYD_SRCS += policyd/compile.c
POLICYD_SRCS += policyd/store.c
POLICYD_SRCS += policyd/capability.c
POLICYD_SRCS += policyd/fleet.c

SBXCTL_SRCS  = sbxctl/sbxctl.c
SBXCTL_SRCS += sbxctl/parse.c
SBXCTL_SRCS += sbxctl/print.c
SBXCTL_SRCS += sbxctl/fleet.c
SBXCTL_SRCS += sbxctl/secret.c
SBXCTL_SRCS += sbxctl/request.c
SBXCTL_SRCS += sbxctl/canary.c
SBXCTL_SRCS += sbxctl/canary_channel.c
SBXCTL_SRCS += sbxctl/canary_probe.c
SBXCTL_SRCS += sbxctl/metrics.c
SBXCTL_SRCS += sbxctl/render.c

LAUNCHD_SRCS  = launchd-sbx/launchd.c
LAUNCHD_SRCS += launchd-sbx/parse.c
LAUNCHD_SRCS += launchd-sbx/control.c
LAUNCHD_SRCS += launchd-sbx/record.c
LAUNCHD_SRCS += launchd-sbx/image.c
LAUNCHD_SRCS += launchd-sbx/dataset.c
LAUNCHD_SRCS += launchd-sbx/run.c
LAUNCHD_SRCS += launchd-sbx/runtime.c
LAUNCHD_SRCS += launchd-sbx/pool.c
LAUNCHD_SRCS += launchd-sbx/ident.c
LAUNCHD_SRCS += launchd-sbx/spec.c
LAUNCHD_SRCS += launchd-sbx/seccomp.c
LAUNCHD_SRCS += launchd-sbx/jsonw.c
LAUNCHD_SRCS += launchd-sbx/client.c
LAUNCHD_SRCS += launchd-sbx/egress_client.c
LAUNCHD_SRCS += launchd-sbx/gate_client.c
LAUNCHD_SRCS += launchd-sbx/mon_client.c
LAUNCHD_SRCS += launchd-sbx/microvm.c

# sbx-monitor: launchd-sbx's root half (launchd-sbx/monitor.h).  It links
# libc alone -- these sources and no -l, no library archive -- so a call
# into anything else fails the link (tests/monitor/size checks the result).
MONITOR_SRCS  = launchd-sbx/monitor.c
MONITOR_SRCS += launchd-sbx/mon_ops.c
MONITOR_SRCS += launchd-sbx/handover.c
MONITOR_SRCS += launchd-sbx/spec.c
MONITOR_SRCS += launchd-sbx/seccomp.c
MONITOR_SRCS += launchd-sbx/jsonw.c
MONITOR_SRCS += common/log.c
MONITOR_SRCS += common/name.c
MONITOR_SRCS += common/errf.c
MONITOR_SRCS += common/utf8.c

BROKERD_SRCS  = brokerd/brokerd.c
BROKERD_SRCS += brokerd/parse.c
BROKERD_SRCS += brokerd/control.c
BROKERD_SRCS += brokerd/store.c
BROKERD_SRCS += brokerd/mint.c

APPROVALD_SRCS  = approvald/approvald.c
APPROVALD_SRCS += approvald/parse.c
APPROVALD_SRCS += approvald/control.c
APPROVALD_SRCS += approvald/queue.c
APPROVALD_SRCS += approvald/queue_pg.c
APPROVALD_SRCS += approvald/queue_item.c
APPROVALD_SRCS += approvald/quote.c

APPROVALCTL_SRCS  = approvalctl/approvalctl.c

EGRESSD_SRCS  = egressd/egressd.c
EGRESSD_SRCS += egressd/parse.c
EGRESSD_SRCS += egressd/control.c
EGRESSD_SRCS += egressd/proxy.c
EGRESSD_SRCS += egressd/proxy_http.c
EGRESSD_SRCS += egressd/proxy_tls.c
EGRESSD_SRCS += egressd/proxy_peer.c
EGRESSD_SRCS += egressd/proxy_handoff.c
EGRESSD_SRCS += egressd/ca.c
EGRESSD_SRCS += egressd/decide.c
EGRESSD_SRCS += egressd/idn.c
EGRESSD_SRCS += egressd/resolve.c
EGRESSD_SRCS += egressd/broker.c
# libhttp-parser has no pkg-config file.
# libidn2 is not linked: egressd/idn.c loads it when a host needs it
# (its header, libidn2-dev, is still needed).
EGRESSD_LIBS := -lhttp_parser

GATED_SRCS  = gated/gated.c
GATED_SRCS += gated/parse.c
GATED_SRCS += gated/control.c
GATED_SRCS += gated/release.c
GATED_SRCS += gated/sniff.c
GATED_SRCS += gated/text.c
GATED_SRCS += gated/store.c
GATED_SRCS += gated/markdown.c
GATED_SRCS += gated/csv.c
GATED_SRCS += gated/archive.c
GATED_SRCS += gated/inspect.c
GATED_SRCS += gated/image.c
MAGIC_LIBS := $(shell pkg-config --libs libmagic 2>/dev/null || echo -lmagic)
# gated reads image headers (libpng, libjpeg, giflib) it releases; the
# archives are read by gated-unpack, the only program linking libarchive
# (and so libxml2, ICU, libstdc++, ...): gated/unpack.c.
GATED_PKGS  = libpng libjpeg libgif
GATED_CFLAGS := $(shell pkg-config --cflags libarchive $(GATED_PKGS) 2>/dev/null)
GATED_LIBS := $(MAGIC_LIBS) $(shell pkg-config --libs $(GATED_PKGS) 2>/dev/null)
ARCHIVE_LIBS := $(shell pkg-config --libs libarchive 2>/dev/null || echo -larchive)
ALLCFLAGS += $(GATED_CFLAGS)

PROGS = policyd sbxctl
PROGS += launchd-sbx
PROGS += sbx-monitor
PROGS += sbx-vmrt
PROGS += sbx-init
PROGS += egressd
PROGS += brokerd
PROGS += gated
PROGS += gated-unpack
PROGS += approvald
PROGS += approvalctl

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))
LIBCOMMON = $(B)/lib/libsbxcommon.a

# policyd's modules without main(), for unit tests and benches.
POLICYD_LIB_SRCS = $(filter-out policyd/policyd.c,$(POLICYD_SRCS))

# launchd-sbx's modules without main(), for unit tests and test helpers.
LAUNCHD_LIB_SRCS  = launchd-sbx/spec.c
LAUNCHD_LIB_SRCS += launchd-sbx/seccomp.c
LAUNCHD_LIB_SRCS += launchd-sbx/jsonw.c
LAUNCHD_LIB_SRCS += launchd-sbx/parse.c
LAUNCHD_LIB_SRCS += launchd-sbx/mon_client.c
LAUNCHD_LIB_SRCS += launchd-sbx/microvm.c
LAUNCHD_LIB_SRCS += launchd-sbx/microvm_extract.c

# brokerd's modules without main(), for unit tests.
BROKERD_LIB_SRCS = $(filter-out brokerd/brokerd.c,$(BROKERD_SRCS))

# approvald's modules without main(), for unit tests and approvalctl (which
# shows requests through the same quoting).
APPROVALD_LIB_SRCS = $(filter-out approvald/approvald.c,$(APPROVALD_SRCS))

# gated's modules without main(), for unit tests.
GATED_LIB_SRCS = $(filter-out gated/gated.c,$(GATED_SRCS))

# egressd's modules without main(), for unit tests and the fuzz target.
EGRESSD_LIB_SRCS = $(filter-out egressd/egressd.c,$(EGRESSD_SRCS))

.PHONY: vectors all deps test test-suites test-fleet fleet-demo fleet-down test-unit test-golden test-scenario test-denial test-san test-load bench fuzz \
        up down demo install clean proto image
all: $(addprefix $(B)/bin/,$(PROGS)) $(B)/tests/spec_libc $(B)/bin/sbx-vminit

proto: $(PB_C)

$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	@mkdir -p $(GEN)
	protoc-c --proto_path=proto --c_out=$(GEN) $<

# Every object depends on the generated headers.
$(B)/obj/%.o: %.c $(PB_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALLCFLAGS) -MMD -MP -c $< -o $@

$(B)/obj/$(GEN)/%.o: $(GEN)/%.c $(PB_H)
	@mkdir -p $(dir $@)
	$(CC) -std=c17 $(CFLAGS) $(XCFLAGS) -I$(GEN) $(PKG_CFLAGS) -c $< -o $@

$(LIBCOMMON): $(call obj,$(COMMON_SRCS)) $(call obj,$(PB_C))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/libpolicyd.a: $(call obj,$(POLICYD_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/liblaunchd.a: $(call obj,$(LAUNCHD_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/lib/libbrokerd.a: $(call obj,$(BROKERD_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/bin/brokerd: $(call obj,brokerd/brokerd.c) $(B)/lib/libbrokerd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/lib/libapprovald.a: $(call obj,$(APPROVALD_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/bin/approvald: $(call obj,approvald/approvald.c) $(B)/lib/libapprovald.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bin/approvalctl: $(call obj,$(APPROVALCTL_SRCS)) $(B)/lib/libapprovald.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/lib/libgated.a: $(call obj,$(GATED_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

# gated runs gated-unpack for every archive: whatever needs gated (every
# suite that starts it, plain or SAN=1) needs its reader too.
$(B)/bin/gated: $(call obj,gated/gated.c) $(B)/lib/libgated.a $(LIBCOMMON) | $(B)/bin/gated-unpack
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS) $(GATED_LIBS)

$(B)/bin/gated-unpack: $(call obj,gated/unpack.c gated/archive.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS) $(ARCHIVE_LIBS) -lseccomp

$(B)/lib/libegressd.a: $(call obj,$(EGRESSD_LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(B)/bin/egressd: $(call obj,egressd/egressd.c) $(B)/lib/libegressd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS) $(EGRESSD_LIBS)

$(B)/bin/policyd: $(call obj,policyd/policyd.c) $(B)/lib/libpolicyd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

# The microvm tier reads the guest's output archive with libarchive, in
# sbx-vmrt (microvm_extract.c): the launcher does not link it.
LAUNCHD_LIBS := $(shell pkg-config --libs libarchive 2>/dev/null)
$(B)/bin/launchd-sbx: $(call obj,$(filter-out $(LAUNCHD_LIB_SRCS),$(LAUNCHD_SRCS))) $(B)/lib/liblaunchd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

# sbx-vmrt: the microvm tier's runtime as sbx-monitor runs it (vmrt.c).
$(B)/bin/sbx-vmrt: $(call obj,launchd-sbx/vmrt.c launchd-sbx/microvm.c launchd-sbx/microvm_extract.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS) $(LAUNCHD_LIBS) -ljansson

$(B)/bin/sbx-monitor: $(call obj,$(MONITOR_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^

# sbxctl canary looks for its probes where `make install` puts them.
$(call obj,sbxctl/canary.c): XCFLAGS += -DSBX_CANARY_DIR='"$(PREFIX)/share/sbx/canary"'
$(B)/bin/sbxctl: $(call obj,$(SBXCTL_SRCS)) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

# sbx-init runs inside images it did not build: one file, plain libc,
# linked statically.  ASan cannot link statically, so SAN=1 builds it
# dynamically with the sanitizers for the tests instead.
SBXINIT_CFLAGS = -std=c17 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(XCFLAGS)
ifeq ($(SAN),1)
SBXINIT_LDFLAGS = $(XLDFLAGS)
else
SBXINIT_LDFLAGS = -static
endif
$(B)/bin/sbx-init: sbx-init/sbx-init.c common/version.h
	@mkdir -p $(dir $@)
	$(CC) $(SBXINIT_CFLAGS) $(SBXINIT_LDFLAGS) -o $@ sbx-init/sbx-init.c

# sbx-vminit: PID 1 of a microvm guest (its initramfs's /init), static
# like sbx-init and for the same reason; never sanitized (it runs in the
# guest, whose kernel has no sanitizer runtime to offer it).
$(B)/bin/sbx-vminit: sbx-init/guest.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE $(WARN) -O2 -static -o $@ sbx-init/guest.c -lseccomp

# ---- the microvm tier's kernel and initramfs (deploy/microvm/build) ------
# Debian's cloud kernel, unpacked under build/vm (never installed into the
# host's /boot), and an initramfs of sbx-vminit, sbx-init and the virtio
# modules, made reproducibly.
vm: build/vm/initrd.img
build/vm/initrd.img: build/bin/sbx-vminit build/bin/sbx-init deploy/microvm/build
	@deploy/microvm/build $(CURDIR)/build/vm build/bin/sbx-vminit build/bin/sbx-init

# ---- tests ---------------------------------------------------------------
UNIT_TESTS := $(patsubst tests/unit/%.c,$(B)/tests/%,$(wildcard tests/unit/*_test.c))

# A unit test links only the module under test: its daemon's library (if
# any) and the common library, so a name two daemons share can never
# resolve to the wrong one.
TESTLIB_compile       = $(B)/lib/libpolicyd.a
TESTLIB_entitle       = $(B)/lib/libpolicyd.a
TESTLIB_capability    = $(B)/lib/libpolicyd.a
TESTLIB_pin           = $(B)/lib/libpolicyd.a
TESTLIB_orch          = $(B)/lib/libpolicyd.a
TESTLIB_rollout       = $(B)/lib/libpolicyd.a
TESTLIB_launchd_parse = $(B)/lib/liblaunchd.a
TESTLIB_mon_client    = $(B)/lib/liblaunchd.a
TESTLIB_spec          = $(B)/lib/liblaunchd.a
TESTLIB_spec_golden   = $(B)/lib/liblaunchd.a
TESTLIB_microvm       = $(B)/lib/liblaunchd.a
TESTLIB_brokerd       = $(B)/lib/libbrokerd.a
TESTLIB_approvald     = $(B)/lib/libapprovald.a
TESTLIB_decide        = $(B)/lib/libegressd.a
TESTLIB_channel       = $(B)/lib/libegressd.a
TESTLIB_gated         = $(B)/lib/libgated.a

.SECONDEXPANSION:
$(B)/tests/%_test: $(B)/obj/tests/unit/%_test.o $$(TESTLIB_$$*) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS) $(EGRESSD_LIBS) $(GATED_LIBS) $(ARCHIVE_LIBS) $(CRIT_LIBS)

TEST_HELPERS = $(B)/bin/frameprobe
TEST_HELPERS += $(B)/bin/probe $(B)/bin/mkspec
TEST_HELPERS += $(B)/bin/launchclient
TEST_HELPERS += $(B)/bin/egressclient
$(B)/bin/egressclient: $(call obj,tests/egress/egressclient.c) $(call obj,tests/lib/testclient.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)
$(B)/bin/launchclient: $(call obj,tests/launch/launchclient.c) $(call obj,tests/lib/testclient.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bin/frameprobe: $(call obj,tests/scenario/frameprobe.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

# The probe runs inside sandboxes whose images it did not come from, so it
# is static and carries no sanitizer runtime.
$(B)/bin/probe: tests/probe/probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE $(WARN) -O2 -static -o $@ $<

TEST_HELPERS += $(B)/bin/vmrun
$(B)/bin/vmrun: $(call obj,tests/microvm/vmrun.c) $(B)/lib/liblaunchd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS) $(LAUNCHD_LIBS)

$(B)/bin/mkspec: $(call obj,tests/probe/mkspec.c) $(B)/lib/liblaunchd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

# Writes proto/testdata/ with a key for tests only: run it only when the
# formats change, and commit what it writes (proto/README.md).
$(B)/bin/vectorgen: $(call obj,tests/vectors/gen.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

vectors: $(B)/bin/vectorgen
	@mkdir -p proto/testdata
	$(B)/bin/vectorgen proto/testdata

# Writes tests/golden/spec/ (tests/unit/spec_cases.h): run it only when the
# spec is meant to change, and review the diff.
TEST_HELPERS += $(B)/bin/specgolden
$(B)/bin/specgolden: $(call obj,tests/probe/specgolden.c) $(B)/lib/liblaunchd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

ifeq ($(SAN),1)
SUITE_SFX := -san
endif

test-unit: $(UNIT_TESTS) $(B)/tests/spec_libc
	@$(B)/tests/spec_libc
	@SAN_LABEL=$(if $(SUITE_SFX),san) tests/run-unit $(UNIT_TESTS)

# The spec renderer links against libc alone (the root monitor links
# nothing else): spec.c, seccomp.c and jsonw.c with common/utf8.c,
# common/name.c and common/errf.c, no -l and no library archive.  It is built with every
# program, so a dependency that creeps in fails `make`.
SPEC_LIBC_SRCS  = launchd-sbx/spec.c
SPEC_LIBC_SRCS += launchd-sbx/seccomp.c
SPEC_LIBC_SRCS += launchd-sbx/jsonw.c
SPEC_LIBC_SRCS += common/utf8.c
SPEC_LIBC_SRCS += common/name.c
SPEC_LIBC_SRCS += common/errf.c
SPEC_LIBC_SRCS += tests/unit/spec_libc_main.c
$(B)/tests/spec_libc: $(SPEC_LIBC_SRCS) $(wildcard launchd-sbx/*.h common/utf8.h common/name.h common/errf.h tests/unit/spec_cases.h)
	@mkdir -p $(dir $@)
	$(CC) -std=c17 -D_GNU_SOURCE $(WARN) $(CFLAGS) $(XCFLAGS) -I. -iquote common $(XLDFLAGS) -o $@ $(SPEC_LIBC_SRCS)

.PHONY: test-init
test-init: $(B)/bin/sbx-init
	@tests/record init$(SUITE_SFX) tests/sbx-init/run $(CURDIR)/$(B)/bin/sbx-init

# Issue 16: the microvm tier's VM under QEMU (TCG here), its boundaries
# probed from inside the guest.  About 50 s, so the plain pass only: the
# host-side code it runs (microvm.c) is in the unit tests of both passes.
.PHONY: test-microvm
test-microvm: $(B)/bin/vmrun build/vm/initrd.img
	@tests/record microvm$(SUITE_SFX) tests/microvm/run $(B)/bin build/vm \
	    build/images/py-analytics $$(sed -n 's/.*@//p' build/images/py-analytics.ref)

# The OCI spec and seccomp profile under the real runtimes (root; a missing
# runtime is reported and skipped by the script itself).
.PHONY: test-deploy
test-deploy: all
	@tests/record deploy$(SUITE_SFX) env SBX_BIN=$(CURDIR)/$(B)/bin tests/deploy/run

# Issue 12: each daemon's files form layers a reader follows downwards,
# no file calling back one that calls it (read off the objects' symbols).
.PHONY: test-layers
test-layers: all
	@tests/record layers$(SUITE_SFX) python3 tests/layers.py -v $(B)/obj

# Issue 12 item 3: no identical run of six or more lines is shared between
# two daemon folders (what two daemons need lives once, in common/).  It
# reads the source, so the plain pass runs it.
.PHONY: test-dupes
test-dupes:
	@tests/record dupes$(SUITE_SFX) python3 tests/dupes.py

.PHONY: test-spec
test-spec: $(B)/bin/probe $(B)/bin/mkspec
	@tests/record spec$(SUITE_SFX) tests/probe/run-spec $(CURDIR)/$(B)/bin

# launchd-sbx through its sockets with runc (and runsc when present); root.
.PHONY: test-launch
# sbx-init runs inside the sandbox, so always the static one from build/bin.
test-launch: $(B)/bin/launchd-sbx $(B)/bin/sbx-monitor $(B)/bin/launchclient \
    $(B)/bin/probe \
    $(B)/bin/gated $(B)/bin/egressd $(B)/bin/egressclient $(B)/bin/sbx-init
	@tests/record launch$(SUITE_SFX) env SBX_INIT=$(CURDIR)/build/bin/sbx-init \
	    tests/launch/run $(B)/bin

# sbx-monitor: its size and its libc-only link (tests/monitor/size), then
# the attacks on its protocol (tests/monitor/run, root), when present; its
# real-runc cases need sbx-init, which runs inside the sandbox: the static
# one from build/bin, as for test-launch.
.PHONY: test-monitor
test-monitor: $(B)/bin/sbx-monitor $(B)/bin/sbx-init
	@rc=0; tests/record monitor-size$(SUITE_SFX) tests/monitor/size \
	    $(if $(SUITE_SFX),--san) $(B)/bin/sbx-monitor || rc=1; \
	if [ -x tests/monitor/run ]; then \
	    tests/record monitor$(SUITE_SFX) env \
	    SBX_INIT=$(CURDIR)/build/bin/sbx-init tests/monitor/run \
	    $(CURDIR)/$(B)/bin || rc=1; fi; exit $$rc

# brokerd through its sockets as the invoking user: secrets in, credentials
# out for bound hosts only, every refusal checked.
.PHONY: test-broker
TEST_HELPERS += $(B)/bin/brokerclient
$(B)/bin/brokerclient: $(call obj,tests/broker/brokerclient.c) $(call obj,tests/lib/testclient.c) $(B)/lib/libbrokerd.a $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

test-broker: $(B)/bin/brokerd $(B)/bin/brokerclient
	@tests/record broker$(SUITE_SFX) tests/broker/run $(B)/bin

# gated through its release socket as the invoking user (root adds the
# device-node case): a scratch directory of traps passed as a descriptor,
# every release and refusal checked in the result and the audit log.
.PHONY: test-gate
TEST_HELPERS += $(B)/bin/gateclient
$(B)/bin/gateclient: $(call obj,tests/gate/gateclient.c) $(call obj,tests/lib/testclient.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

# 40 executions in flight at once through the whole stack (sbxctl ->
# policyd -> launchd-sbx -> sbx-monitor -> runc -> gated), one of them
# SIGKILLed mid-run: 0 failures, every audit record, every chain verified
# (root; bench/load_bench, whose 200-at-once runs are in `make bench`).
test-load: all
	@tests/record load$(SUITE_SFX) env LOAD_N=40 LOAD_C=40 LOAD_KILL=1 \
	    bench/load_bench $(CURDIR)/$(B)/bin

test-gate: $(B)/bin/gated $(B)/bin/gated-unpack $(B)/bin/gateclient
	@tests/record gate$(SUITE_SFX) tests/gate/run $(B)/bin

# approvald with a fake policyd (tests/approve/fakepolicyd.py) and
# approvalctl driven in a real terminal (tmux); root for the
# approvers-group refusal.
.PHONY: test-approve
TEST_HELPERS += $(B)/bin/fakepolicyd
$(B)/bin/fakepolicyd: $(call obj,tests/approve/fakepolicyd.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

test-approve: $(B)/bin/approvald $(B)/bin/approvalctl $(B)/bin/fakepolicyd
	@tests/record approve$(SUITE_SFX) tests/approve/run $(CURDIR)/$(B)/bin

# egressd with real servers on loopback (root or not).
.PHONY: test-egress
test-egress: $(B)/bin/egressd $(B)/bin/egressclient $(B)/bin/sbx-init
	@tests/record egress$(SUITE_SFX) tests/egress/run $(CURDIR)/$(B)/bin

# egressd against three real servers (nginx, Node's http, Python's
# http.server) with the request corpus of tests/differential/ (its
# README): whatever egressd forwards they all read as egressd decided
# it, and whatever they read differently egressd refuses.
.PHONY: test-differential
test-differential: $(B)/bin/egressd $(B)/bin/egressclient
	@tests/record differential$(SUITE_SFX) tests/differential/run $(CURDIR)/$(B)/bin

# The Python modules for the second-language orchestrator
# (examples/orchestrator.py), from the same .proto files: Debian's protoc
# and python3-protobuf, nothing else.
PY_PB := build/py/sbx/v1/envelope_pb2.py
$(PY_PB): $(PROTOS)
	@mkdir -p build/py
	protoc --python_out=build/py -I proto $(PROTOS)

# examples/orchestrator.py against policyd (and, as root, the whole
# deployment) through deploy/sbx-up: compile, hash verification, a refused
# task, a run, a capability request.
.PHONY: test-orchestrator
test-orchestrator: all $(PY_PB)
	@tests/record orchestrator$(SUITE_SFX) tests/orchestrator/run $(CURDIR)/$(B)/bin

# Issue 13 item 9: --help/--version of every program, sd_notify (READY=1
# once the sockets listen), the metrics text through promtool and the
# opt-in scrape listener, as the invoking user (root tries the allowlist
# with a second user).
.PHONY: test-ops
# (after PY_PB's definition: a prerequisite is expanded as it is read)
test-ops: all $(PY_PB)
	@tests/record ops$(SUITE_SFX) python3 tests/ops/run $(CURDIR)/$(B)/bin

# Issue 17 item 4: `sbxctl render k8s` against a real policyd (as the
# invoking user), its goldens, its refusals, and the schema check of what
# it renders and of deploy/k8s/ (python3-kubernetes's models: no cluster).
.PHONY: test-k8s
test-k8s: $(B)/bin/policyd $(B)/bin/sbxctl $(B)/bin/mkspec $(PY_PB)
	@tests/record k8s$(SUITE_SFX) python3 tests/k8s/run $(CURDIR)/$(B)/bin

# Issue 17: two policyd replicas over one private PostgreSQL cluster
# (deploy/sbx-pg; no TCP, no system service): the execution cap, the
# binding and grants hold across hosts, and an unreachable database
# refuses (tests/fleet/run).  Then `make fleet-demo` end to end as root
# (tests/fleet/demo, about 90 s: both hosts run the worked example, a host
# or the cluster that cannot start fails it, fleet-down leaves nothing
# running); `make test` runs it in its plain pass only (NO_FLEET_DEMO=1 in
# the sanitizer pass, to keep within its time), `SAN=1 make test-fleet`
# runs it on the sanitized daemons.  Skipped when PostgreSQL is not
# installed (the demo also without root or the sandbox image).
.PHONY: test-fleet
test-fleet: $(B)/bin/policyd $(B)/bin/sbxctl $(B)/bin/approvald $(B)/bin/approvalctl $(PY_PB)
	@rc=0; tests/record fleet$(SUITE_SFX) tests/fleet/run $(CURDIR)/$(B)/bin || rc=1; \
	$(if $(NO_FLEET_DEMO),,tests/record fleet-demo$(SUITE_SFX) tests/fleet/demo $(CURDIR)/$(B)/bin || rc=1;) \
	exit $$rc

test-golden: $(B)/bin/policyd
	@tests/record golden$(SUITE_SFX) tests/golden/run $(B)/bin/policyd

test-scenario: all $(TEST_HELPERS)
	@tests/record scenario$(SUITE_SFX) env SBX_BIN=$(CURDIR)/$(B)/bin tests/scenario/run

# The reference text's denial suite through the whole stack (root; SKIPs
# otherwise), and `sbxctl canary` against the same deployment.
test-denial: all
	@tests/record denial$(SUITE_SFX) env SBX_BIN=$(CURDIR)/$(B)/bin tests/denial/run

# The same suite under the microvm tier (issue 16): every probe, the
# channel attack and sbxctl canary as code in VMs of their own.  Not in
# `make test`: under TCG it takes about half an hour (bench/README.md).
.PHONY: test-denial-vm
test-denial-vm: all build/vm/initrd.img $(B)/bin/probe
	@tests/record denial-vm$(SUITE_SFX) env SBX_BIN=$(CURDIR)/$(B)/bin \
	    SBX_DENIAL_TIER=microvm tests/denial/run

# SIGKILL each daemon during a running task: fail closed, recovery after
# restart, audit chains intact, nothing acknowledged lost (root; SKIPs
# otherwise).
.PHONY: test-faults
test-faults: all
	@tests/record faults$(SUITE_SFX) env SBX_BIN=$(CURDIR)/$(B)/bin tests/faults/run

# CPython's regression suite (Debian's libpython3.11-testsuite) on the host
# and in each tier, through launchd-sbx's spec (mkspec) and sbx-init, on
# the compat image; every case that passes on the host and not in a tier,
# with its reason (tests/compat/run, bench/README.md).  `make compat` runs
# the whole suite once per tier (an hour or more each on two CPUs);
# `make test-compat` the fast subset, six system-call-heavy modules
# (about 2.5 minutes, and 2 to build the compat image once), which
# `make test` runs in its plain pass: what runs in the sandbox is the
# static sbx-init and the runtimes, the same in both builds.  Root; SKIPs
# otherwise.  sbx-init runs inside the sandbox: the static one.
.PHONY: compat test-compat
compat: $(B)/bin/mkspec build/bin/sbx-init build/images/compat.ref
	@env SBX_INIT=$(CURDIR)/build/bin/sbx-init tests/compat/run $(CURDIR)/$(B)/bin

test-compat: $(B)/bin/mkspec build/bin/sbx-init build/images/compat.ref
	@tests/record compat$(SUITE_SFX) env SBX_INIT=$(CURDIR)/build/bin/sbx-init \
	    tests/compat/run -q $(CURDIR)/$(B)/bin

# `make test`: the plain build, then the same tests built with ASan+UBSan.
# Every suite runs even if an earlier one failed; tests/summary adds up
# the totals each suite recorded.  A suite that did not even build is
# recorded as one failure, so it can never pass by not running.
RECORD_FAIL = || echo "$(1)$(SUITE_SFX)-did-not-complete 0 1 0" >> build/test-results.txt
# Two suites run once, to keep `make test` inside its 30 minutes: the
# compatibility subset in the plain pass (the sandbox runs no sanitized
# code), and the fault suite in the sanitizer pass (it kills and restarts
# every daemon, and the sanitizers check each one's crash and recovery
# paths as well as what the plain pass would).
test:
	@mkdir -p build && rm -f build/test-results.txt
	@$(MAKE) --no-print-directory build/images/py-analytics.ref $(call RECORD_FAIL,image)
	@$(MAKE) --no-print-directory build/images/compat.ref $(call RECORD_FAIL,compat-image)
	@$(MAKE) --no-print-directory build/vm/initrd.img $(call RECORD_FAIL,vm)
	@$(MAKE) --no-print-directory test-suites
	@$(MAKE) --no-print-directory SAN=1 test-suites
	@tests/summary

test-suites:
	@mkdir -p build
	@$(MAKE) --no-print-directory all $(TEST_HELPERS) $(call RECORD_FAIL,build)
	@$(MAKE) --no-print-directory test-unit $(call RECORD_FAIL,unit)
	@$(MAKE) --no-print-directory test-golden $(call RECORD_FAIL,golden)
	@$(MAKE) --no-print-directory test-scenario $(call RECORD_FAIL,scenario)
	@$(MAKE) --no-print-directory test-fleet $(if $(SUITE_SFX),NO_FLEET_DEMO=1) $(call RECORD_FAIL,fleet)
	@$(MAKE) --no-print-directory test-denial $(call RECORD_FAIL,denial)
	@$(MAKE) --no-print-directory test-init $(call RECORD_FAIL,init)
	@$(MAKE) --no-print-directory test-layers $(call RECORD_FAIL,layers)
	$(if $(SUITE_SFX),,@$(MAKE) --no-print-directory test-dupes $(call RECORD_FAIL,dupes))
	@$(MAKE) --no-print-directory test-spec $(call RECORD_FAIL,spec)
	@$(MAKE) --no-print-directory test-launch $(call RECORD_FAIL,launch)
	@$(MAKE) --no-print-directory test-monitor $(call RECORD_FAIL,monitor)
	@$(MAKE) --no-print-directory test-deploy $(call RECORD_FAIL,deploy)
	@$(MAKE) --no-print-directory test-ops $(call RECORD_FAIL,ops)
	@$(MAKE) --no-print-directory test-egress $(call RECORD_FAIL,egress)
	@$(MAKE) --no-print-directory test-differential $(call RECORD_FAIL,differential)
	@$(MAKE) --no-print-directory test-broker $(call RECORD_FAIL,broker)
	@$(MAKE) --no-print-directory test-gate $(call RECORD_FAIL,gate)
	@$(MAKE) --no-print-directory test-approve $(call RECORD_FAIL,approve)
	@$(MAKE) --no-print-directory test-orchestrator $(call RECORD_FAIL,orchestrator)
	@$(MAKE) --no-print-directory test-k8s $(call RECORD_FAIL,k8s)
	@$(MAKE) --no-print-directory test-load $(call RECORD_FAIL,load)
	$(if $(SUITE_SFX),@$(MAKE) --no-print-directory test-faults $(call RECORD_FAIL,faults))
	$(if $(SUITE_SFX),,@$(MAKE) --no-print-directory test-compat $(call RECORD_FAIL,compat))
	$(if $(SUITE_SFX),,@$(MAKE) --no-print-directory test-microvm $(call RECORD_FAIL,microvm))

test-san:
	@mkdir -p build && rm -f build/test-results.txt
	@$(MAKE) --no-print-directory SAN=1 test-suites
	@tests/summary

# ---- fuzzing (clang's libFuzzer) -----------------------------------------
FUZZ_TARGETS = frame_fuzz template_fuzz
FUZZ_TARGETS += http_fuzz
FUZZ_TARGETS += http_resp_fuzz
FUZZ_TARGETS += release_fuzz
FUZZ_TARGETS += forward_fuzz
FUZZ_TARGETS += vmout_fuzz
FUZZ_SECONDS ?= 30
FUZZ_FLAGS   = -fsanitize=fuzzer,address,undefined -g -O1
build/fuzz/%: tests/fuzz/%.c $(COMMON_SRCS) $(PB_C) $(PB_H)
	@mkdir -p $(dir $@)
	clang -std=c17 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS) \
	  -o $@ $< $(COMMON_SRCS) $(PB_C) $(LDLIBS)

# The HTTP request parser: egressd's proxy_http.c and decide.c.
build/fuzz/http_fuzz: tests/fuzz/http_fuzz.c egressd/proxy_http.c egressd/decide.c egressd/idn.c $(COMMON_SRCS) $(PB_C) $(PB_H)
	@mkdir -p $(dir $@)
	clang -std=c17 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS) \
	  -o $@ $< egressd/proxy_http.c egressd/decide.c egressd/idn.c $(COMMON_SRCS) $(PB_C) $(LDLIBS) $(EGRESSD_LIBS)

# What egressd forwards, parsed again (proxy_http.c and decide.c as
# proxy.c drives them); seeded from the differential corpus.
build/fuzz/forward_fuzz: tests/fuzz/forward_fuzz.c egressd/proxy_http.c egressd/decide.c egressd/idn.c $(COMMON_SRCS) $(PB_C) $(PB_H)
	@mkdir -p $(dir $@)
	clang -std=c17 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS) \
	  -o $@ $< egressd/proxy_http.c egressd/decide.c egressd/idn.c $(COMMON_SRCS) $(PB_C) $(LDLIBS) $(EGRESSD_LIBS)

# The response parser and its accounting against max_response_kb.
build/fuzz/http_resp_fuzz: tests/fuzz/http_resp_fuzz.c egressd/proxy_http.c egressd/decide.c egressd/idn.c $(COMMON_SRCS) $(PB_C) $(PB_H)
	@mkdir -p $(dir $@)
	clang -std=c17 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS) \
	  -o $@ $< egressd/proxy_http.c egressd/decide.c egressd/idn.c $(COMMON_SRCS) $(PB_C) $(LDLIBS) $(EGRESSD_LIBS)

# The forward_fuzz seeds are the differential corpus for one host:port
# (tests/differential/run checks that they are up to date).
.PHONY: fuzz-seeds
fuzz-seeds:
	rm -rf tests/fuzz/seeds/forward_fuzz
	python3 tests/differential/corpus.py --seeds tests/fuzz/seeds/forward_fuzz a.internal 8080

# gated's output-name and manifest handling: release.c and what it uses.
RELEASE_FUZZ_SRCS = gated/release.c gated/sniff.c gated/text.c gated/store.c \
    gated/markdown.c gated/csv.c gated/archive.c gated/image.c
build/fuzz/release_fuzz: tests/fuzz/release_fuzz.c $(RELEASE_FUZZ_SRCS) $(COMMON_SRCS) $(PB_C) $(PB_H)
	@mkdir -p $(dir $@)
	clang -std=c17 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS) $(GATED_CFLAGS) \
	  -o $@ $< $(RELEASE_FUZZ_SRCS) $(COMMON_SRCS) $(PB_C) $(LDLIBS) $(GATED_LIBS) $(ARCHIVE_LIBS)

# The microvm tier's output archive, as a guest writes it:
# microvm_extract.c.
build/fuzz/vmout_fuzz: tests/fuzz/vmout_fuzz.c launchd-sbx/microvm.c launchd-sbx/microvm_extract.c $(COMMON_SRCS) $(PB_C) $(PB_H)
	@mkdir -p $(dir $@)
	clang -std=c17 -D_GNU_SOURCE $(FUZZ_FLAGS) -I. -iquote common -I$(GEN) $(PKG_CFLAGS) $(PQ_CFLAGS) \
	  -o $@ $< launchd-sbx/microvm.c launchd-sbx/microvm_extract.c $(COMMON_SRCS) $(PB_C) $(LDLIBS) $(LAUNCHD_LIBS)

fuzz: $(addprefix build/fuzz/,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build/fuzz/corpus-$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS)s"; \
	  build/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    build/fuzz/corpus-$$t tests/fuzz/seeds/$$t || exit 1; \
	done

# ---- bench ---------------------------------------------------------------
$(B)/bin/rpc_bench: $(call obj,bench/rpc_bench.c) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

$(B)/bin/egress_bench: $(call obj,bench/egress_bench.c)
	@mkdir -p $(dir $@)
	$(CC) $(XLDFLAGS) -o $@ $^ $(LDLIBS)

bench: all $(B)/bin/rpc_bench $(B)/bin/egress_bench
	@bench/run $(CURDIR)/$(B)/bin
	@bench/run_egress $(CURDIR)/$(B)/bin
	@bench/load_bench $(CURDIR)/$(B)/bin
	@IDLE_MAPS="egressd gated" bench/idle_mem $(CURDIR)/$(B)/bin
	@LOAD_N=200 LOAD_C=200 bench/load_bench $(CURDIR)/$(B)/bin
	@LOAD_N=200 LOAD_C=200 LOAD_KILL=10 bench/load_bench $(CURDIR)/$(B)/bin
	@$(MAKE) --no-print-directory bench-microvm

# The microvm tier's boot-to-code and worked-example times (bench/README.md).
.PHONY: bench-microvm
bench-microvm: build/bin/vmrun build/vm/initrd.img
	@bench/run_microvm build/bin build/vm build/images/py-analytics \
	    $$(sed -n 's/.*@//p' build/images/py-analytics.ref)
	@bench/run_microvm_stack 3

# ---- running the daemons on the embedded default ---------------------------
# As root the sandbox needs its pinned image: build it once if missing.
# Without root only policyd starts, and no image is needed.
AS_ROOT_IMAGE = $(if $(filter 0,$(shell id -u)),build/images/py-analytics.ref)

up: all $(AS_ROOT_IMAGE)
	@SBX_STATE=$(SBX_STATE) SBX_BIN=$(CURDIR)/build/bin deploy/sbx-up

down:
	@SBX_STATE=$(SBX_STATE) deploy/sbx-down

demo: deps
	@$(MAKE) --no-print-directory all $(AS_ROOT_IMAGE)
	@SBX_STATE=$(SBX_STATE) SBX_BIN=$(CURDIR)/build/bin deploy/sbx-demo

# Issue 17: two hosts of one fleet on this machine over a private
# PostgreSQL cluster under $(SBX_STATE)/fleet (deploy/sbx-fleet-demo).
fleet-demo: deps
	@$(MAKE) --no-print-directory all $(AS_ROOT_IMAGE)
	@SBX_STATE=$(SBX_STATE) SBX_BIN=$(CURDIR)/$(B)/bin deploy/sbx-fleet-demo

fleet-down:
	@SBX_STATE=$(SBX_STATE) deploy/sbx-fleet-demo down

# ---- sandbox images (deploy/images/README.md) ------------------------------
# Reproducible OCI layouts under build/images/; needs root (mmdebstrap).
image:
	@deploy/images/py-analytics/build $(CURDIR)/build/images

# Build the image only when it is missing (tests and make up need one).
build/images/py-analytics.ref:
	@deploy/images/py-analytics/build $(CURDIR)/build/images

# The compat image: py-analytics plus the regression suite, same recipe.
build/images/compat.ref:
	@deploy/images/compat/build $(CURDIR)/build/images

# ---- install, deps, clean ------------------------------------------------
deps:
	@deploy/deps

# `make install`: every daemon and client, sbx-init, every man page, the
# example configuration (the *.yaml.in sbx-up fills in, the templates, the
# entitlements, the worked example's task, code, spreadsheet and FX API).
# Honours DESTDIR and PREFIX.
INSTALL_SBIN = policyd launchd-sbx sbx-monitor sbx-vmrt egressd brokerd gated gated-unpack approvald
INSTALL_BIN  = sbxctl approvalctl
MAN8 = $(sort $(wildcard */*.8))
MAN5 = $(sort $(wildcard */*.5))
EXAMPLES = $(sort $(wildcard deploy/examples/*.yaml deploy/examples/*.in \
           deploy/examples/*.py deploy/examples/*.csv))
install: all
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/libexec/sbx
	install -m 0755 $(addprefix build/bin/,$(INSTALL_SBIN)) $(DESTDIR)$(PREFIX)/sbin/
	install -m 0755 $(addprefix build/bin/,$(INSTALL_BIN)) $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 build/bin/sbx-init $(DESTDIR)$(PREFIX)/libexec/sbx/sbx-init
	install -d $(DESTDIR)$(PREFIX)/share/man/man8 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 0644 $(MAN8) $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 0644 $(MAN5) $(DESTDIR)$(PREFIX)/share/man/man5/
	install -d $(DESTDIR)$(PREFIX)/share/sbx/examples/templates
	install -m 0644 $(EXAMPLES) $(DESTDIR)$(PREFIX)/share/sbx/examples/
	install -m 0644 deploy/examples/templates/*.yaml $(DESTDIR)$(PREFIX)/share/sbx/examples/templates/
	install -d $(DESTDIR)$(PREFIX)/share/sbx/canary
	install -m 0644 tests/denial/probes/*.py $(DESTDIR)$(PREFIX)/share/sbx/canary/
	install -m 0755 tests/denial/target.py $(DESTDIR)$(PREFIX)/share/sbx/canary-target.py
	$(MAKE) --no-print-directory install-deploy

# The systemd units, sysusers.d, tmpfiles.d and /etc/sbx (deploy/README.md).
include deploy/install.mk

clean:
	rm -rf build

# (build/compat holds an unpacked root file system, whose *.d are not ours.)
-include $(shell find build -path build/compat -prune -o -name '*.d' -type f -print 2>/dev/null)
