# twopc — build, test, install.  GNU make; no generated build system.
#
#   make                      libtwopc.a, libtwopc.so, the twopc command, examples  (build/<variant>/)
#   make test                 unit tests, then integration tests against real servers
#   make test-unit            unit tests only (no server needed)
#   make test-kafka           the Kafka and cluster integration tests only, over their pairs of broker
#                             protocol and librdkafka (tests/matrix)
#   TWOPC_TEST_JOBS=n         test binaries run n at once (default 1: one after the other; see docs/testing.md)
#   make test-install         make install into a temporary prefix, build examples/minimal.c with pkg-config, run it
#   make SANITIZE=address,undefined test      make SANITIZE=thread test-unit
#   make WERROR=1             warnings are errors (default when CI=true)
#   make install PREFIX=/usr/local DESTDIR=
#   make services-up / services-down          local PostgreSQL + Kafka for trying twopc
#   make bench-runtime / bench-file / bench-kafka / bench-pg / bench-latency   benchmark programs
#   make bench-compare        the same Kafka -> Kafka exactly-once job on twopc and on Apache Flink,
#                             and a keyed totals job (twopc keyed state, Flink HashMap and RocksDB
#                             incremental); COMPARE_PARTS=keyed runs only that part
#                             (bench-kafka, -latency, -compare: TWOPC_LIBRDKAFKA=current measures with a
#                             current librdkafka instead of Debian's; make test runs the Kafka tests
#                             with both)
#   make bench-cluster        cluster_totals on 1, 2 and 3 member processes, with and without its
#                             repartition topic; take-over after kill -9; checkpoints on the local
#                             S3 server against a folder (docs/cluster.md, "Measured here")
#   make demo                 exactly_once_pipeline into PostgreSQL and Kafka, kill -9 once, verify
#   make demo-cluster         keyed totals as units over several member processes: kill -9, SIGSTOP,
#                             a member added and one removed, then verified (docs/cluster.md)
#   make torture-cluster RUNS=n  n runs of cluster_totals under random kill -9, SIGSTOP, members
#                             leaving and joining, each verified (TWOPC_LIBRDKAFKA=current and
#                             TORTURE_CLUSTER_PROTOCOL=consumer: KIP-848's group protocol)
#   make torture RUNS=n       n runs of random kill -9 and server restarts, each verified
#                             (TWOPC_LIBRDKAFKA=current: with a current librdkafka)
#   make model                Spin model of the commit protocol: checks and mutants (model/)
#   make soak MINUTES=n       the example pipeline unbounded for n minutes, busy and idle, one kill -9:
#                             fails when memory, fds, threads, clients, connections or checkpoints grow
#   make fuzz FUZZ_SECONDS=n  each libFuzzer harness (tests/fuzz/) n seconds from its seed corpus
#   make docs                 docs/configuration.md from the property tables (twopc config)
#   make lint                 the map of rooms (docs/architecture.md): no circle, no private include,
#                             no plumbing outside the kit (tests/lint.sh)
#   make format / format-check / deps

SHELL      := /bin/bash
CC         ?= cc
PREFIX     ?= /usr/local
DESTDIR    ?=
SANITIZE   ?=
# The version is stated once, in include/twopc/tpc_runtime.h.
VERSION    := $(shell sed -n 's/^\#define TPC_VERSION_STRING "\(.*\)"/\1/p' include/twopc/tpc_runtime.h)
SOVERSION  := 0

comma := ,
ifeq ($(SANITIZE),)
  VARIANT := default
else
  VARIANT := $(subst $(comma),-,$(SANITIZE))
endif
BUILD := build/$(VARIANT)

ifeq ($(CI),true)
  WERROR ?= 1
endif

# The compiler flags below come from pkg-config, so the build packages must be there before this file is
# read on: on a fresh machine, `make` installs them first (see tests/services/deps.sh).
NO_DEPS_GOALS := clean services-down format-check format fuzz-run model lint
ifneq ($(filter-out $(NO_DEPS_GOALS),$(or $(MAKECMDGOALS),all)),)
  ifneq ($(shell tests/services/deps.sh build >&2; echo $$?),0)
    $(error missing build dependencies, see above)
  endif
endif

PKG_LIBS := rdkafka libpq openssl libmicrohttpd libcurl check
# Public headers live in include/twopc/ (installed there, and programs include them as <tpc_*.h>).
# Each layer compiles with the public headers and its own folder only, so the build enforces the
# layering (connectors -> txn -> runtime -> kit, through public headers): a connector that includes
# runtime_internal.h does not compile. Tests, fuzz harnesses and benchmarks see every folder.
PUBLIC_INC := -Iinclude/twopc
KAFKA_ROOMS := connectors/kafka/sink connectors/kafka/source connectors/kafka/wire
ALL_INC    := $(PUBLIC_INC) -Ikit -Iruntime -Itxn -Iconnectors/file $(KAFKA_ROOMS:%=-I%) \
              -Iconnectors/postgres -Icluster -Itests/support

WARN   := -Wall -Wextra -Wstrict-prototypes -Wshadow -Wpointer-arith -Wcast-align
ifeq ($(WERROR),1)
  WARN += -Werror
endif
OPT    ?= -O2
CFLAGS_ALL := -std=c11 -D_GNU_SOURCE -g $(OPT) $(WARN) -fPIC -fvisibility=hidden -pthread -MMD -MP \
              $(shell pkg-config --cflags $(PKG_LIBS) 2>/dev/null) $(CFLAGS)
LDLIBS_ALL := $(shell pkg-config --libs rdkafka libpq openssl libmicrohttpd libcurl 2>/dev/null) -pthread -lm $(LDLIBS)
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)
ifneq ($(SANITIZE),)
  CFLAGS_ALL += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS    += -fsanitize=$(SANITIZE)
endif

PUBLIC_HEADERS := $(sort $(wildcard include/twopc/*.h))
LIB_SRCS  := $(sort $(wildcard kit/*.c runtime/*.c txn/*.c connectors/*/*.c connectors/kafka/*/*.c \
                               cluster/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_SRCS := $(sort $(wildcard tests/unit/check_*.c))
INTEG_SRCS:= $(sort $(wildcard tests/integration/check_*.c))
BENCH_SRCS:= $(sort $(wildcard tests/bench/bench_*.c))
EX_SRCS   := $(sort $(wildcard examples/*.c))
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/fuzz_*.c))
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TEST_HELPER_SRCS := $(sort $(wildcard tests/support/*.c))
TEST_HELPER_OBJS := $(TEST_HELPER_SRCS:%.c=$(BUILD)/obj/%.o)

UNIT_BINS  := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
INTEG_BINS := $(INTEG_SRCS:tests/integration/%.c=$(BUILD)/tests/%)
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)
EX_BINS    := $(EX_SRCS:examples/%.c=$(BUILD)/examples/%)
FUZZ_BINS  := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)

STATIC := $(BUILD)/libtwopc.a
SHARED := $(BUILD)/libtwopc.so.$(VERSION)
# The operator's command (tools/): linked statically with the library, compiled with its public
# headers and the Kafka wire client's only, like any program built on it.
TWOPC_CMD := $(BUILD)/bin/twopc

.PHONY: all lib tools test-install deps deps-build test test-unit test-integration test-kafka tests-build examples \
        install format format-check lint services-up services-down clean docs \
        bench-runtime bench-file bench-kafka bench-pg bench-compare bench-cluster demo demo-cluster torture torture-cluster soak fuzz fuzz-run model \
        dashboard-png
.DEFAULT_GOAL := all

all: deps-build lib tools examples
lib: $(STATIC) $(SHARED)
tools: $(TWOPC_CMD)

deps-build:
	@tests/services/deps.sh build
deps:
	@tests/services/deps.sh all

# Header dependencies are generated by the compiler (-MMD) into .d files beside each output.
$(BUILD)/obj/kit/%.o: kit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -Ikit -c $< -o $@
$(BUILD)/obj/runtime/%.o: runtime/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -Iruntime -c $< -o $@
$(BUILD)/obj/txn/%.o: txn/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -Itxn -c $< -o $@
$(BUILD)/obj/connectors/%.o: connectors/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -I$(dir $<) -c $< -o $@
# Kafka is three rooms: the sink and the source each see their own folder and the wire client's,
# never each other's; the wire client sees only its own.
$(BUILD)/obj/connectors/kafka/%.o: connectors/kafka/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -I$(dir $<) -Iconnectors/kafka/wire -c $< -o $@
# A job run as units over several processes (cluster/): above the runtime and the connectors, it
# sees the public headers and the Kafka wire client's (librdkafka's properties), as the tools do.
$(BUILD)/obj/cluster/%.o: cluster/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -Icluster -Iconnectors/kafka/wire -c $< -o $@
$(BUILD)/obj/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ALL_INC) -c $< -o $@

$(STATIC): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(SHARED): $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libtwopc.so.$(SOVERSION) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)
	ln -sf libtwopc.so.$(VERSION) $(BUILD)/libtwopc.so.$(SOVERSION)
	ln -sf libtwopc.so.$(SOVERSION) $(BUILD)/libtwopc.so

$(BUILD)/tests/%: tests/unit/%.c $(STATIC) $(TEST_HELPER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ALL_INC) $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJS) $(STATIC) $(CHECK_LIBS) $(LDLIBS_ALL)

$(BUILD)/tests/%: tests/integration/%.c $(STATIC) $(TEST_HELPER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ALL_INC) $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJS) $(STATIC) $(CHECK_LIBS) $(LDLIBS_ALL)

$(BUILD)/bench/%: tests/bench/%.c $(STATIC) $(TEST_HELPER_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ALL_INC) $(LDFLAGS) -o $@ $< $(TEST_HELPER_OBJS) $(STATIC) $(LDLIBS_ALL)

$(BUILD)/fuzz/%: tests/fuzz/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(ALL_INC) -fsanitize=fuzzer,address,undefined $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

$(TWOPC_CMD): $(TOOL_SRCS) $(wildcard tools/*.h) $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) -Iconnectors/kafka/wire -Itools $(LDFLAGS) -o $@ $(TOOL_SRCS) \
	    $(STATIC) $(LDLIBS_ALL)

# docs/configuration.md is generated from the property tables; check_config_doc compares.
docs: $(TWOPC_CMD)
	$(TWOPC_CMD) config > docs/configuration.md

$(BUILD)/examples/%: examples/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)

# Keep the test helpers' objects: they are only prerequisites of pattern rules, which would make them
# intermediate files that make deletes (and rebuilds) every time.
.SECONDARY: $(TEST_HELPER_OBJS)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

examples: $(EX_BINS)
tests-build: lib tools $(UNIT_BINS) $(INTEG_BINS)

# Each test binary is a Check suite that forks per test; tests/run-tests.sh prints one summary line.
test-unit: deps-build lib tools $(UNIT_BINS) examples
	@tests/run-tests.sh unit $(UNIT_BINS)
	@MAKE="$(MAKE)" SANITIZE="$(SANITIZE)" tests/install/install_test.sh

# make install into a temporary prefix, then examples/minimal.c built with pkg-config from outside
# the tree and run (tests/install/install_test.sh).
test-install: lib tools
	@MAKE="$(MAKE)" SANITIZE="$(SANITIZE)" tests/install/install_test.sh

test-integration: deps lib tools $(INTEG_BINS) examples
	@$(RUN_MATRIX) integration $(INTEG_BINS)

# Which binaries run on servers of their own and with which (broker protocol, librdkafka) pairs is
# tests/matrix (docs/testing.md, "The test matrix"): a current librdkafka (tests/services/
# rdkafka-current.sh; TWOPC_RDKAFKA_CURRENT=off skips those runs) and a second broker of transaction
# protocol v1 (TWOPC_TEST_KAFKA_V1=1 to with-services.sh) are set up for it here. tests/run-tests.sh
# runs TWOPC_TEST_JOBS binaries at once (default 1: one after the other; see docs/testing.md).
KAFKA_INTEG_BINS := $(filter $(BUILD)/tests/check_kafka_% $(BUILD)/tests/check_conformance_kafka \
                      $(BUILD)/tests/check_owner_kafka $(BUILD)/tests/check_cluster_% \
                      $(BUILD)/tests/check_twopc_producers, $(INTEG_BINS))
RDKAFKA_CURRENT_DIR := build/rdkafka
# Run tests/run-tests.sh with the current librdkafka and the v1 broker the matrix wants.
RUN_MATRIX = if lib=$$(tests/services/rdkafka-current.sh $(RDKAFKA_CURRENT_DIR)); then \
	    echo "make $@: the matrix's pairs use librdkafka" \
	        "$$($(TWOPC_CMD) version | sed -n 's/^librdkafka //p') and" \
	        "$$(LD_LIBRARY_PATH=$$lib $(TWOPC_CMD) version | sed -n 's/^librdkafka //p') ($$lib)"; \
	    export TWOPC_TEST_RDKAFKA_CURRENT_LIB=$$lib; \
	else \
	    echo "make $@: NOT running the Kafka tests against a current librdkafka (see above)"; \
	fi; \
	TWOPC_TEST_KAFKA_V1=1 tests/services/with-services.sh tests/run-tests.sh

test: deps lib tools $(UNIT_BINS) $(INTEG_BINS) examples
	@MAKE="$(MAKE)" SANITIZE="$(SANITIZE)" tests/install/install_test.sh
	@$(RUN_MATRIX) all $(UNIT_BINS) -- $(INTEG_BINS)

# The Kafka and cluster integration tests alone, over the pairs tests/matrix gives them.
test-kafka: deps lib tools $(KAFKA_INTEG_BINS) examples
	@$(RUN_MATRIX) kafka $(KAFKA_INTEG_BINS)

services-up: deps
	@tests/services/services.sh up
services-down:
	@tests/services/services.sh down

bench-runtime: deps-build $(BUILD)/bench/bench_runtime
	@$(BUILD)/bench/bench_runtime
bench-file: deps-build $(BUILD)/bench/bench_file
	@$(BUILD)/bench/bench_file
# Needs PostgreSQL only: a dummy Kafka address keeps with-services.sh from starting a broker.
bench-pg: deps $(BUILD)/bench/bench_pg
	@TWOPC_TEST_KAFKA_BOOTSTRAP=$${TWOPC_TEST_KAFKA_BOOTSTRAP:-unused} \
	    tests/services/with-services.sh $(BUILD)/bench/bench_pg
bench-kafka: deps $(BUILD)/bench/bench_kafka
	@tests/services/with-rdkafka.sh tests/services/with-services.sh $(BUILD)/bench/bench_kafka
# The latency distributions go to $(BUILD)/bench-latency/, drawn into latency.png with gnuplot.
bench-latency: deps $(BUILD)/bench/bench_latency
	@mkdir -p $(BUILD)/bench-latency
	@TWOPC_BENCH_OUT=$(BUILD)/bench-latency tests/services/with-rdkafka.sh \
	    tests/services/with-services.sh $(BUILD)/bench/bench_latency
	@tests/services/deps.sh plot && if command -v gnuplot > /dev/null; then \
	    gnuplot -e "dir='$(BUILD)/bench-latency'" tests/bench/latency_plot.gp && \
	    echo "bench-latency: distributions and latency.png in $(BUILD)/bench-latency"; fi
# docs/img/twopc-dashboard.png: the dashboard's queries over a real run, drawn by gnuplot
# (tests/bench/dashboard_png.sh; Prometheus, gnuplot and python3).
DASHBOARD_SECONDS ?= 150
dashboard-png: deps $(BUILD)/bench/dashboard_job
	@tests/services/deps.sh plot
	@tests/services/with-services.sh tests/bench/dashboard_png.sh $(DASHBOARD_SECONDS)

# twopc beside Apache Flink (MiniCluster, KafkaSink EXACTLY_ONCE) on the same job and broker.
COMPARE_BINS := $(BUILD)/bench/compare_twopc_job $(BUILD)/bench/compare_twopc_keyed_job \
                $(BUILD)/bench/compare_topic_tool
$(BUILD)/bench/compare_%: tests/bench/compare/%.c $(STATIC)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(PUBLIC_INC) $(LDFLAGS) -o $@ $< $(STATIC) $(LDLIBS_ALL)
bench-compare: deps $(COMPARE_BINS)
	@tests/services/deps.sh compare
	@tests/services/deps.sh plot
	@tests/services/with-rdkafka.sh tests/services/with-services.sh tests/bench/compare/run.sh $(BUILD)

# The keyed totals as units over member processes: throughput on 1, 2 and 3 processes, the
# repartition hop's cost, take-over after kill -9, checkpoint duration on S3 against a folder
# (tests/bench/cluster_bench.sh; TWOPC_BENCH_CLUSTER_PARTS=throughput,takeover,storage).
bench-cluster: deps lib examples $(BUILD)/bench/bench_cluster_storage
	@TWOPC_EXAMPLES_DIR=$(CURDIR)/$(BUILD)/examples TWOPC_BENCH_DIR=$(CURDIR)/$(BUILD)/bench \
	    tests/services/with-rdkafka.sh tests/services/with-services.sh tests/bench/cluster_bench.sh

# End to end: the example pipeline, killed and restarted, its outputs read back (tests/e2e/).
RUNS ?= 5
demo: deps lib tools examples
	@TWOPC_EXAMPLES_DIR=$(CURDIR)/$(BUILD)/examples TWOPC_COMMAND=$(CURDIR)/$(TWOPC_CMD) tests/e2e/demo.sh
# The keyed totals as units over several processes, through kill -9, SIGSTOP and members joining and
# leaving (tests/e2e/demo_cluster.sh, docs/cluster.md).
demo-cluster: deps lib examples
	@TWOPC_EXAMPLES_DIR=$(CURDIR)/$(BUILD)/examples tests/e2e/demo_cluster.sh
# Random kill -9, SIGSTOP, members leaving and joining under cluster_totals, each run verified
# (tests/e2e/torture_cluster.sh).
torture-cluster: deps lib examples
	@TWOPC_EXAMPLES_DIR=$(CURDIR)/$(BUILD)/examples tests/services/with-rdkafka.sh \
	    tests/services/with-services.sh tests/e2e/torture_cluster.sh $(RUNS)
torture: deps lib examples
	@TWOPC_EXAMPLES_DIR=$(CURDIR)/$(BUILD)/examples tests/services/with-rdkafka.sh \
	    tests/services/with-services.sh tests/e2e/torture.sh $(RUNS)
# gnuplot only draws the series: installed when possible, never required.
MINUTES ?= 3
soak: deps lib examples
	@tests/services/deps.sh plot
	@TWOPC_EXAMPLES_DIR=$(CURDIR)/$(BUILD)/examples \
	    tests/services/with-services.sh tests/e2e/soak.sh $(MINUTES)

# Fuzzing: clang's libFuzzer with AddressSanitizer and UndefinedBehaviorSanitizer, the library built
# for it in build/fuzzer-no-link-address-undefined/. Seeds in tests/fuzz/corpus/, new inputs and any
# crash in build/fuzz-corpus/ (tests/fuzz/run.sh).
FUZZ_SECONDS ?= 60
fuzz:
	@tests/services/deps.sh fuzz
	@$(MAKE) --no-print-directory CC=clang SANITIZE=fuzzer-no-link,address,undefined fuzz-run
fuzz-run: $(FUZZ_BINS)
	@tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

# The commit protocol as a Promela model, checked exhaustively by Spin within the bounds stated in
# model/twopc.pml, and the mutants that must fail (docs/model.md).
model:
	@tests/services/deps.sh model
	@model/check.sh $(BUILD)/model

install: lib tools
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/twopc $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(TWOPC_CMD) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(STATIC) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(SHARED) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libtwopc.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/libtwopc.so.$(SOVERSION)
	ln -sf libtwopc.so.$(SOVERSION) $(DESTDIR)$(PREFIX)/lib/libtwopc.so
	install -m 644 $(PUBLIC_HEADERS) $(DESTDIR)$(PREFIX)/include/twopc/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' twopc.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/twopc.pc

FORMAT_FILES = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_FILES)
lint:
	@tests/lint.sh

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format-check: ok"

clean:
	rm -rf build
