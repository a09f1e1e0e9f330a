# rove: QUIC tunnel daemon (roved) and client (rove).
#   make            build both programs (installs dependencies when missing)
#   make SAN=1      build with AddressSanitizer + UndefinedBehaviorSanitizer
#   make test       layer check, unit tests, config checks, end-to-end
#                   tests (root)
#   make demo       a real tunnel between network namespaces, with traffic
#   make bench      throughput against wireguard-go and the raw link; what
#                   loss recovery costs on a clean link (bench/recovery-cost.sh,
#                   LossRecovery = auto against off in pairs); forward
#                   set-up time against ssh -L (bench/setup.sh); UDP
#                   forwards against the IP tunnel and the raw link
#                   (bench/udpfwd.sh); forwards over a WAN path with a
#                   bottleneck (bench/wan.sh); thousands
#                   of peers on one roved (bench/scale.sh); a group of two
#                   behind a CID balancer, failing over (bench/lb.sh); one
#                   roved process against two (bench/workers.sh)
#   make fuzz       libFuzzer harnesses over their seeds; fuzz-run fuzzes
#                   each for FUZZ_TIME seconds (tests/fuzz/Makefile.inc)
#   make install    programs, man pages, systemd units and example configs
#                   under PREFIX (/usr/local), staged in DESTDIR; uninstall
#                   removes exactly those
#   make deb        the Debian package (debian/), in ../
#   WOLFSSL=5.7.2   build against wolfSSL 5.7.2 instead of 5.9.2 (no
#                   post-quantum key exchange), in .deps-wolfssl5.7.2 and
#                   build-wolfssl5.7.2/ (build-san-wolfssl5.7.2/)
#   V=1             print full commands

CC ?= cc
SAN ?=
WOLFSSL ?=
V ?= 0

DEPS := .deps$(if $(WOLFSSL),-wolfssl$(WOLFSSL))
BUILD := build$(if $(SAN),-san)$(if $(WOLFSSL),-wolfssl$(WOLFSSL))

# ngtcp2_conn_* and the wolfSSL QUIC API come from the static libraries
# scripts/deps.sh builds from Debian's source packages.
DEPS_CFLAGS := -I$(DEPS)/include
DEPS_LIBS := $(DEPS)/lib/libngtcp2_crypto_wolfssl.a \
	$(DEPS)/lib/libngtcp2.a $(DEPS)/lib/libwolfssl.a

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes \
	-Wmissing-prototypes -Wmissing-declarations -Wpointer-arith \
	-Wwrite-strings -Wformat=2 -Wformat-security -Wundef -Wvla \
	-Wcast-align -Wnested-externs -Wfloat-equal -Wimplicit-fallthrough \
	-Wold-style-definition -Wredundant-decls -Wendif-labels -Wempty-body

ifeq ($(SAN),)
HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong
OPT := -O2
else
HARDEN := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
OPT := -O1
endif

CFLAGS ?=
# The version both programs print (--version): the package's, one place.
VERSION := $(shell head -1 debian/changelog | cut -d' ' -f2 | tr -d '()')
CPPFLAGS += -D_GNU_SOURCE -I. -Icommon $(DEPS_CFLAGS) -DROVE_VERSION='"$(VERSION)"'
ALL_CFLAGS := -std=c17 $(OPT) -g $(WARN) $(HARDEN) -fPIE \
	-ftrivial-auto-var-init=zero -MMD -MP $(CFLAGS)
SAN_FLAGS := -fsanitize=address,undefined
LDFLAGS += -pie -Wl,-z,relro,-z,now $(if $(SAN),$(SAN_FLAGS))
# libcap-ng drops root after setup (common/ops/privdrop.c); libsystemd tells
# the service manager when we are ready (common/ops/notify.c).
CAPNG_LIBS := $(shell pkg-config --libs libcap-ng 2>/dev/null || echo -lcap-ng)
SYSTEMD_LIBS := $(shell pkg-config --libs libsystemd 2>/dev/null || echo -lsystemd)
# ISA-L computes the erasure code of the tunnel's loss recovery
# (common/tunnel/fec.c).
ISAL_LIBS := -lisal
# ngtcp2's calls of wolfSSL's QUIC HKDF go to common/transport/tls.c's, which skip
# a DRBG per call (see there).
HKDF_WRAP := -Wl,--wrap=wolfSSL_quic_hkdf_extract \
	-Wl,--wrap=wolfSSL_quic_hkdf_expand -Wl,--wrap=wolfSSL_quic_hkdf
LIBS := $(HKDF_WRAP) $(DEPS_LIBS) -levent_core -levent_extra -lnl-route-3 -lnl-3 \
	$(ISAL_LIBS) $(CAPNG_LIBS) $(SYSTEMD_LIBS) -lm
NL_CFLAGS := $(shell pkg-config --cflags libnl-route-3.0 2>/dev/null || echo -I/usr/include/libnl3)
CPPFLAGS += $(NL_CFLAGS)

ifeq ($(V),0)
Q := @
say = @printf '  %-6s %s\n' $(1) $(2);
else
Q :=
say =
endif

COMMON_SRC := $(wildcard common/*/*.c)
TUN_SRC := $(wildcard tun/*.c)
DAEMON_SRC := $(wildcard daemon/*.c)
CLIENT_SRC := $(wildcard client/*.c)
LIB_SRC := $(COMMON_SRC) $(TUN_SRC)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
LIB_OBJ := $(call obj,$(LIB_SRC))
DAEMON_OBJ := $(call obj,$(DAEMON_SRC))
CLIENT_OBJ := $(call obj,$(CLIENT_SRC))

# tests/unit/ is grouped as the code is (tests/unit/transport/test-quic.c
# tests common/transport/quic.c); the binaries stand side by side.
UNIT_SRC := $(wildcard tests/unit/*/test-*.c)
UNIT_BIN := $(patsubst %.c,$(BUILD)/tests/%,$(notdir $(UNIT_SRC)))
vpath test-%.c $(sort $(dir $(UNIT_SRC)))

.PHONY: FORCE all deps test check check-layers check-unit check-configs check-cli check-e2e demo bench \
	clean distclean install uninstall deb

all: $(BUILD)/roved $(BUILD)/rove $(BUILD)/tests/rove-load

deps: $(DEPS)/.complete

$(DEPS)/.complete: scripts/deps.sh scripts/lib-apt.sh $(wildcard scripts/patches/*.patch)
	$(Q)ROVE_WOLFSSL=$(WOLFSSL) scripts/deps.sh $(DEPS) && touch $(DEPS)/.complete

# Which library build .deps points at. Rewritten only when that changes
# (as git's Makefile does for GIT-CFLAGS), so objects compiled against
# other headers are rebuilt: the cached headers' own times say nothing.
$(BUILD)/deps-id: FORCE | $(DEPS)/.complete
	@mkdir -p $(@D)
	@readlink -f $(DEPS) >$@.new
	@if cmp -s $@.new $@; then rm -f $@.new; else mv $@.new $@; fi

FORCE:

$(BUILD)/librove.a: $(LIB_OBJ)
	$(call say,AR,$@)$(AR) rcs $@ $^

$(BUILD)/roved: $(DAEMON_OBJ) $(BUILD)/librove.a
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/rove: $(CLIENT_OBJ) $(BUILD)/librove.a
	$(call say,LD,$@)$(CC) $(LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/%.o: %.c $(BUILD)/deps-id | $(DEPS)/.complete
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# Unit tests link the module they test through librove.a, plus the daemon
# objects other than main (for route.c and friends).
DAEMON_LIB_OBJ := $(filter-out $(BUILD)/daemon/main.o,$(DAEMON_OBJ))
CLIENT_LIB_OBJ := $(filter-out $(BUILD)/client/main.o,$(CLIENT_OBJ))

$(BUILD)/tests/test-%: test-%.c $(DAEMON_LIB_OBJ) $(CLIENT_LIB_OBJ) $(BUILD)/librove.a
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -Itests/unit -o $@ \
		$(filter %.c %.o %.a,$^) $(LDFLAGS) $(LIBS) -lcmocka

$(BUILD)/tests/test-route: $(BUILD)/daemon/route.o

check-unit: $(UNIT_BIN)
	$(Q)tests/run-unit.sh $(UNIT_BIN)

check-configs: all
	$(Q)tests/check-configs.sh $(BUILD)

check-cli: all
	$(Q)tests/check-cli.sh $(BUILD)

# Which folder may include which (docs/ARCHITECTURE.md), and that the
# check itself catches a slip planted in a copy of the tree.
check-layers:
	$(Q)tests/check-layers.sh
	$(Q)tests/check-layers.sh --self-test

check: check-layers check-unit check-configs check-cli

# Test tools built on rove's own code: tun-probe drives tun/ for
# test-tun.sh; quic-flood sends valid QUIC Initials at full rate, from one
# source or spoofed ones; ctl-abuse is a peer that abuses its control
# stream; fake-resolved stands in for systemd-resolved on a private bus.
E2E_TOOLS := $(addprefix $(BUILD)/tests/,tun-probe quic-flood ctl-abuse \
	fake-resolved)

$(E2E_TOOLS): $(BUILD)/tests/%: tests/e2e/%.c $(BUILD)/librove.a
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -o $@ \
		$(filter %.c %.o %.a,$^) $(LDFLAGS) $(LIBS)

# The load generator: thousands of rove peers in one process, on rove's own
# QUIC, TLS and protocol code (bench/scale.sh, test-load).
$(BUILD)/tests/rove-load: tests/load/rove-load.c $(BUILD)/librove.a
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -o $@ \
		$(filter %.c %.o %.a,$^) $(LDFLAGS) $(LIBS)

# A user-space delay line between two TUN devices (netem is missing here).
$(BUILD)/tests/delay-relay: tests/e2e/delay-relay.c
	@mkdir -p $(@D)
	$(call say,CC,$<)$(CC) $(CPPFLAGS) $(ALL_CFLAGS) -o $@ $< $(LDFLAGS)

check-e2e: all $(E2E_TOOLS) $(BUILD)/tests/delay-relay
	$(Q)tests/e2e/run.sh $(BUILD)

test: check check-e2e

demo: all
	$(Q)tests/e2e/demo.sh $(BUILD)

bench: all $(BUILD)/tests/delay-relay $(E2E_TOOLS)
	$(Q)bench/run.sh $(BUILD)
	$(Q)bench/recovery-cost.sh $(BUILD)
	$(Q)BENCH_STREAMS=4 bench/recovery-cost.sh $(BUILD)
	$(Q)bench/forward.sh $(BUILD)
	$(Q)bench/udpfwd.sh $(BUILD)
	$(Q)bench/wan.sh $(BUILD)
	$(Q)bench/setup.sh $(BUILD)
	$(Q)bench/roam.sh $(BUILD)
	$(Q)bench/throttle.sh $(BUILD)
	$(Q)BENCH_INNER_CC=cubic bench/lossy.sh $(BUILD)
	$(Q)BENCH_INNER_CC=bbr bench/lossy.sh $(BUILD)
	$(Q)BENCH_TRANSPORT=tcp BENCH_LOSS="0 1" BENCH_TUNNELS="rove wg" bench/lossy.sh $(BUILD)
	$(Q)bench/flood.sh $(BUILD)
	$(Q)SCALE_N=1000 bench/scale.sh $(BUILD)
	$(Q)SCALE_N=10000 bench/scale.sh $(BUILD)
	$(Q)SCALE_N=10000 SCALE_WORKERS=2 bench/scale.sh $(BUILD)
	$(Q)bench/lb.sh $(BUILD)
	$(Q)bench/workers.sh $(BUILD)

# SOAK_MINUTES (default 30) of traffic, floods, rebindings and restarts,
# with memory and fds sampled each minute; too long for test or bench.
.PHONY: soak
soak: all $(BUILD)/tests/quic-flood
	$(Q)bench/soak.sh $(BUILD)

include tests/fuzz/Makefile.inc

# --- Installation
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/rove
UNITDIR ?= $(PREFIX)/lib/systemd/system
# Everything install puts in place, and so all that uninstall removes.
INSTALLED := $(SBINDIR)/roved $(BINDIR)/rove \
	$(MANDIR)/man8/roved.8 $(MANDIR)/man8/rove.8 $(MANDIR)/man5/rove.conf.5 \
	$(UNITDIR)/roved.service $(UNITDIR)/rove@.service \
	$(DOCDIR)/examples/roved.conf $(DOCDIR)/examples/rove.conf
UNIT_SED := -e 's|@SBINDIR@|$(SBINDIR)|g' -e 's|@BINDIR@|$(BINDIR)|g'

# The examples hold no secret (public keys and paths), so they are
# readable like any documentation; the files an administrator makes from
# them, with the private key beside them, are 0600 under /etc/rove.
install: $(BUILD)/roved $(BUILD)/rove
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR)/examples
	install -m 0755 $(BUILD)/roved $(DESTDIR)$(SBINDIR)/roved
	install -m 0755 $(BUILD)/rove $(DESTDIR)$(BINDIR)/rove
	install -m 0644 docs/roved.8 docs/rove.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 docs/rove.conf.5 $(DESTDIR)$(MANDIR)/man5/
	sed $(UNIT_SED) configs/systemd/roved.service.in >$(DESTDIR)$(UNITDIR)/roved.service
	sed $(UNIT_SED) configs/systemd/rove@.service.in >$(DESTDIR)$(UNITDIR)/rove@.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/roved.service $(DESTDIR)$(UNITDIR)/rove@.service
	install -m 0644 configs/examples/roved.conf configs/examples/rove.conf \
		$(DESTDIR)$(DOCDIR)/examples/

uninstall:
	rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	-rmdir $(DESTDIR)$(DOCDIR)/examples $(DESTDIR)$(DOCDIR) 2>/dev/null

# dpkg-buildpackage builds with this Makefile (debian/rules); the .deb and
# its .buildinfo/.changes land in the parent directory, as usual.
deb:
	scripts/deps.sh --packages-only
	scripts/deb.sh

clean:
	rm -rf build build-san build-fuzz

distclean: clean
	rm -f $(DEPS)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
