# adaptshim build.  `make` builds the preload library, the runtime archive, the ELF
# inspector and the test programs;
# `make check` installs missing packages (as root), builds and runs every test;
# `make check-fast` only the unit and integration tests (the development loop);
# `make demo` runs the kill-and-resume demonstration; `make bench` the benchmarks;
# `make fuzz` the libFuzzer targets (FUZZ_SECONDS each).

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build

CC      ?= gcc
# One job per processor: Criterion's --jobs of the unit tests (TEST_JOBS),
# and make's -j in `make check` and `make check-fast` unless the command
# line gives one.
NPROC     := $(shell nproc 2>/dev/null || echo 1)
TEST_JOBS ?= $(NPROC)
# The integration tests mostly wait for the programs they start (at one
# test per processor they keep less than half of the processors busy):
# two per processor.
INTEGRATION_JOBS ?= $(shell echo $$(( 2 * $(NPROC) )))
CHECK_JOBS = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))
PKGS    := msgpack nlopt libxxhash
# Without these development packages nothing builds: say so in one line
# rather than with compile errors (`make deps` installs them; check, demo
# and bench run it first, so they are let through).
REQUIRED_PKGS := msgpack nlopt libxxhash ompi-c criterion libelf
MISSING_PKGS := $(strip $(foreach p,$(REQUIRED_PKGS),$(if $(shell pkg-config --exists $(p) 2>/dev/null && echo yes),,$(p))))
ifneq ($(MISSING_PKGS),)
ifeq ($(filter deps check demo bench clean uninstall,$(MAKECMDGOALS)),)
$(error missing development packages for: $(MISSING_PKGS); run `make deps` (as root it installs them), see README "Set-up")
endif
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null)
CRITERION_CFLAGS := $(shell pkg-config --cflags criterion 2>/dev/null)
CRITERION_LIBS   := $(shell pkg-config --libs criterion 2>/dev/null)
ELF_CFLAGS := $(shell pkg-config --cflags libelf 2>/dev/null)
ELF_LIBS   := $(shell pkg-config --libs libelf 2>/dev/null)

WARNINGS := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter
BASE_CFLAGS := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -D_GNU_SOURCE \
               -ftls-model=initial-exec -fopenmp-simd $(WARNINGS)
CFLAGS_ALL := $(BASE_CFLAGS) $(CFLAGS) -Iruntime $(PKG_CFLAGS)

RUNTIME_SRC := $(sort $(wildcard runtime/*.c))
SHIM_SRC    := $(sort $(wildcard shim/*.c))
# hooks/: the ELF inspector's logic (linked into the unit tests too) and its main.
HOOKS_SRC   := $(filter-out hooks/adaptdl_inspect.c,$(sort $(wildcard hooks/*.c)))
UNIT_SRC    := $(sort $(wildcard tests/unit/*.c))
# (the top directory only: tests/trainers/common/ holds no trainer)
TRAINER_SRC := $(sort $(wildcard tests/trainers/*.c))
TRAINER_CXX_SRC := $(sort $(wildcard tests/trainers/*.cpp))
TRAINER_PY_SRC  := $(sort $(wildcard tests/trainers/*.py))
TOOL_SRC    := $(sort $(wildcard tests/tools/*.c))
BENCH_SRC   := $(sort $(wildcard tests/bench/*.c))

RUNTIME_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/obj/%.o)
SHIM_OBJ    := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)
HOOKS_OBJ   := $(HOOKS_SRC:%.c=$(BUILD)/obj/%.o)
HOOKS_ASAN_OBJ := $(HOOKS_SRC:%.c=$(BUILD)/asan/%.o)
RUNTIME_ASAN_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/asan/%.o)
UNIT_OBJ      := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_ASAN_OBJ := $(UNIT_SRC:%.c=$(BUILD)/asan/%.o)

LIB       := $(BUILD)/libadaptshim.so
# The stand-in cooperative trainers link (shim/adaptdl.h): the API as one
# replica, so that they run without the preload too.
STANDALONE := $(BUILD)/libadaptdl.so
ARCHIVE   := $(BUILD)/libadaptshim_runtime.a
ASAN_ARCHIVE := $(BUILD)/asan/libadaptshim_runtime.a
UNIT      := $(BUILD)/tests/unit_tests
UNIT_ASAN := $(BUILD)/tests/unit_tests_asan
INSPECT   := $(BUILD)/adaptdl-inspect
# The launcher's helper that picks a replica count from the hints file.
REPLICAS_TOOL := $(BUILD)/adaptdl-replicas
# Whether a trainer resumes exactly: runs it, kills it, compares delivery traces.
VERIFY_TOOL := $(BUILD)/adaptdl-verify
# The launcher of a PyTorch job's replicas (adaptdl-wrap --launcher torch).
TORCH_LAUNCH := $(BUILD)/adaptdl-torch-launch
WRAP      := $(BUILD)/adaptdl-wrap
PLOT      := $(BUILD)/adaptdl-plot
TRAINERS  := $(patsubst tests/trainers/%.c,$(BUILD)/trainers/%,$(TRAINER_SRC)) \
             $(patsubst tests/trainers/%.cpp,$(BUILD)/trainers/%,$(TRAINER_CXX_SRC)) \
             $(patsubst tests/trainers/%.py,$(BUILD)/trainers/%.py,$(TRAINER_PY_SRC))
TOOLS     := $(patsubst tests/tools/%.c,$(BUILD)/tools/%,$(TOOL_SRC)) $(BUILD)/tools/static_pie_probe
# Preload libraries that inject faults (a full disk) into integration tests.
FAULTS    := $(patsubst tests/faults/%.c,$(BUILD)/faults/%.so,$(sort $(wildcard tests/faults/*.c)))
# The test build of the library with kill points in its commit path
# (runtime/fault_injection.h, ADAPTSHIM_FAULT): only the sources that hold a
# point are compiled again, with the macro; the product library has none.
FAULT_POINT_SRC := runtime/fault_injection.c runtime/state_files.c shim/tracking.c shim/io_rename.c
FAULT_POINT_OBJ := $(FAULT_POINT_SRC:%.c=$(BUILD)/faults/obj/%.o)
FAULT_LIB := $(BUILD)/faults/libadaptshim-faults.so
FAULTS    += $(FAULT_LIB)
BENCHES   := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all

# The dependency files hold rules too: `all` must stay the default goal even
# when one of them is read first.
.DEFAULT_GOAL := all
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

.PHONY: all deps check check-fast check-tests unit unit-asan integration tsan asan-shim \
        fuzz fuzz-short demo bench install uninstall clean
all: $(LIB) $(STANDALONE) $(ARCHIVE) $(INSPECT) $(REPLICAS_TOOL) $(VERIFY_TOOL) $(TORCH_LAUNCH) $(WRAP) $(PLOT) $(TRAINERS) $(TOOLS) $(FAULTS)

# The launcher beside the library and the inspector, where it finds them, as
# after `make install`; the metrics plotter beside it.
$(WRAP) $(PLOT): $(BUILD)/%: scripts/%
	@mkdir -p $(dir $@)
	cp $< $@
	chmod 0755 $@

deps:
	@scripts/install-deps

# -MMD: every object records the headers it included, so a header change
# rebuilds exactly what depends on it.
$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_ALL) -MMD -MP -Ishim $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/asan/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (sanitized)"
	@$(CC) $(CFLAGS_ALL) -MMD -MP $(ASAN_FLAGS) $(CRITERION_CFLAGS) -c $< -o $@

$(ARCHIVE): $(RUNTIME_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(ASAN_ARCHIVE): $(RUNTIME_ASAN_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# The preload library: the shim plus the whole runtime, exporting only the
# interposed entry points listed in shim/exports.map.
$(LIB): $(SHIM_OBJ) $(ARCHIVE) shim/exports.map
	$(CC) $(LDFLAGS) -shared -o $@ $(SHIM_OBJ) -Wl,--whole-archive $(ARCHIVE) -Wl,--no-whole-archive \
	    -Wl,--version-script=shim/exports.map -Wl,-z,now -Wl,-z,relro \
	    $(PKG_LIBS) -ldl -lpthread -lm

$(STANDALONE): $(BUILD)/obj/shim/cooperative_api.o $(BUILD)/obj/shim/standalone/cooperative_host.o \
               $(ARCHIVE) shim/standalone/exports.map
	$(CC) $(LDFLAGS) -shared -o $@ $(BUILD)/obj/shim/cooperative_api.o \
	    $(BUILD)/obj/shim/standalone/cooperative_host.o $(ARCHIVE) \
	    -Wl,--version-script=shim/standalone/exports.map -Wl,-soname,libadaptdl.so \
	    $(PKG_LIBS) -lpthread -lm

# The ELF inspector (hooks/) and the unit tests that include its header use libelf.
$(HOOKS_OBJ) $(HOOKS_ASAN_OBJ) $(BUILD)/obj/hooks/adaptdl_inspect.o: CFLAGS_ALL += $(ELF_CFLAGS)
$(UNIT_OBJ) $(UNIT_ASAN_OBJ): CFLAGS_ALL += -Ihooks $(ELF_CFLAGS)

# (its messages are the runtime's one-line error_message)
$(INSPECT): $(BUILD)/obj/hooks/adaptdl_inspect.o $(HOOKS_OBJ) $(BUILD)/obj/runtime/error_message.o
	$(CC) $(LDFLAGS) -o $@ $^ $(ELF_LIBS)

$(REPLICAS_TOOL): $(BUILD)/obj/scripts/adaptdl_replicas.o $(ARCHIVE)
	$(CC) -o $@ $^ $(PKG_LIBS) -lm

$(TORCH_LAUNCH): $(BUILD)/obj/scripts/adaptdl_torch_launch.o $(ARCHIVE)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(VERIFY_TOOL): $(BUILD)/obj/scripts/adaptdl_verify.o $(BUILD)/obj/scripts/verify_processes.o \
                $(ARCHIVE)
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lpthread -lm

$(BUILD)/obj/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS_ALL) -MMD -MP $(CRITERION_CFLAGS) -Wno-missing-prototypes -c $< -o $@

$(BUILD)/asan/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (sanitized)"
	@$(CC) $(CFLAGS_ALL) -MMD -MP $(ASAN_FLAGS) $(CRITERION_CFLAGS) -Wno-missing-prototypes -c $< -o $@

$(UNIT): $(UNIT_OBJ) $(HOOKS_OBJ) $(ARCHIVE)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(UNIT_OBJ) $(HOOKS_OBJ) $(ARCHIVE) $(CRITERION_LIBS) $(PKG_LIBS) $(ELF_LIBS) -ldl -lpthread -lm

$(UNIT_ASAN): $(UNIT_ASAN_OBJ) $(HOOKS_ASAN_OBJ) $(ASAN_ARCHIVE)
	@mkdir -p $(dir $@)
	$(CC) $(ASAN_FLAGS) -o $@ $(UNIT_ASAN_OBJ) $(HOOKS_ASAN_OBJ) $(ASAN_ARCHIVE) $(CRITERION_LIBS) $(PKG_LIBS) $(ELF_LIBS) -ldl -lpthread -lm

$(BUILD)/trainers/%.py: tests/trainers/%.py
	@mkdir -p $(dir $@)
	cp $< $@
	chmod 0755 $@

# The helpers the C example trainers share (tests/trainers/common/), compiled
# into each one with a section per function and linked with --gc-sections: a
# trainer keeps only the helpers it calls, so it imports no libc function
# that its own code does not use.
TRAINER_COMMON_SRC   := tests/trainers/common/trainer_common.c tests/trainers/common/adsd_records.c
TRAINER_COMMON       := $(TRAINER_COMMON_SRC) tests/trainers/common/trainer_common.h \
                        tests/trainers/common/adsd_records.h
TRAINER_COMMON_FLAGS := -Itests/trainers/common -ffunction-sections -fdata-sections -Wl,--gc-sections

# Cooperative example trainers use the API of shim/adaptdl.h, linked as a
# user would link it: against the stand-in, found at run time by rpath.
$(BUILD)/trainers/coop_%: tests/trainers/coop_%.c shim/adaptdl.h $(STANDALONE) $(TRAINER_COMMON)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -Ishim $(MPI_CFLAGS) $(TRAINER_COMMON_FLAGS) \
	    -o $@ $< $(TRAINER_COMMON_SRC) \
	    -L$(BUILD) -ladaptdl -Wl,-rpath,$(abspath $(BUILD)) $(MPI_LIBS) -lm

$(BUILD)/tools/coop_%: tests/tools/coop_%.c shim/adaptdl.h $(STANDALONE)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -Ishim $(MPI_CFLAGS) -o $@ $< \
	    -L$(BUILD) -ladaptdl -Wl,-rpath,$(abspath $(BUILD)) $(MPI_LIBS) -lm

# Example trainers are plain user programs: no adaptshim header, no runtime.
$(BUILD)/trainers/%: tests/trainers/%.c $(TRAINER_COMMON)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror $(if $(findstring mpi,$*),$(MPI_CFLAGS)) \
	    $(TRAINER_COMMON_FLAGS) -o $@ $< $(TRAINER_COMMON_SRC) $(if $(findstring mpi,$*),$(MPI_LIBS)) -lm

# C++ example trainers, as plain as the C ones.
CXX ?= g++
$(BUILD)/trainers/%: tests/trainers/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -o $@ $<

$(BUILD)/tools/%: tests/tools/%.c tests/tools/probe_common.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror $(if $(findstring mpi,$*),$(MPI_CFLAGS)) \
	    -o $@ $< $(if $(findstring mpi,$*),$(MPI_LIBS)) -lm

$(BUILD)/faults/%.so: tests/faults/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -shared -fPIC -o $@ $< -ldl

$(BUILD)/faults/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (fault injection)"
	@$(CC) $(CFLAGS_ALL) -DADAPTSHIM_FAULT_INJECTION -MMD -MP -Ishim $(MPI_CFLAGS) -c $< -o $@

$(FAULT_LIB): $(filter-out $(FAULT_POINT_SRC:%.c=$(BUILD)/obj/%.o),$(SHIM_OBJ) $(RUNTIME_OBJ)) \
              $(FAULT_POINT_OBJ) shim/exports.map
	$(CC) -shared -o $@ $(filter %.o,$^) -Wl,--version-script=shim/exports.map -Wl,-z,now \
	    -Wl,-z,relro $(PKG_LIBS) -ldl -lpthread -lm

# Static programs, which LD_PRELOAD cannot reach: the inspector must refuse them.
$(BUILD)/tools/static_probe: tests/tools/static_probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -static -o $@ $<

$(BUILD)/tools/static_pie_probe: tests/tools/static_probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -static-pie -o $@ $<

$(BUILD)/bench/%: tests/bench/%.c tests/bench/bench_common.h $(ARCHIVE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Wno-missing-prototypes -Iruntime -o $@ $< $(ARCHIVE) $(PKG_LIBS) -ldl -lpthread -lm

# libFuzzer targets (tests/fuzz/): clang with the fuzzer, AddressSanitizer
# and UBSan, linked against the runtime compiled by clang with the same
# sanitizers.  `make fuzz` runs each for FUZZ_SECONDS; `make check` a short
# run of each.  Corpora that grow and crash inputs stay under $(BUILD)/fuzz.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_SANITIZERS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS := -std=gnu11 -O1 -g -D_GNU_SOURCE -fopenmp-simd -Wall -Wextra -Wno-unused-parameter -Wno-pass-failed \
               -Iruntime $(PKG_CFLAGS)
FUZZ_RUNTIME_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(sort $(wildcard tests/fuzz/fuzz_*.c)))
# Named only by the pattern rule of the targets, the objects would be
# intermediate files that make deletes after each link, and compiles anew
# for the next one.
.SECONDARY: $(FUZZ_RUNTIME_OBJ)

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (fuzzing)"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(FUZZ_SANITIZERS) -MMD -MP -c $< -o $@

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_seal.h $(FUZZ_RUNTIME_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(FUZZ_SANITIZERS) -o $@ $< $(FUZZ_RUNTIME_OBJ) \
	    $(PKG_LIBS) -ldl -lpthread -lm

fuzz: deps
	$(MAKE) $(FUZZ_TARGETS)
	@tests/fuzz/run-fuzzers $(BUILD) $(FUZZ_SECONDS)

fuzz-short: $(FUZZ_TARGETS)
	@tests/fuzz/run-fuzzers $(BUILD) short

# ThreadSanitizer: the preload library and a threaded probe, both built with
# -fsanitize=thread (libtsan must come first in LD_PRELOAD).
TSAN_FLAGS := -O1 -g -fsanitize=thread
TSAN_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/tsan/%.o) $(SHIM_SRC:%.c=$(BUILD)/tsan/%.o)
$(BUILD)/tsan/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (thread sanitizer)"
	@$(CC) $(CFLAGS_ALL) -MMD -MP $(TSAN_FLAGS) -Ishim $(MPI_CFLAGS) -c $< -o $@

# ThreadSanitizer calls sigaction while it initializes, before instrumented
# code may run: the signal wrappers are built without instrumentation, and
# so is the cell they keep the trainer's dispositions in.
$(BUILD)/tsan/shim/signals.o $(BUILD)/tsan/runtime/signal_action_cell.o: TSAN_FLAGS := -O1 -g

$(BUILD)/tsan/libadaptshim.so: $(TSAN_OBJ) shim/exports.map
	$(CC) -shared -fsanitize=thread -o $@ $(TSAN_OBJ) -Wl,--version-script=shim/exports.map \
	    $(PKG_LIBS) -ldl -lpthread -lm

$(BUILD)/tsan/fd_probe: tests/tools/fd_probe.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(TSAN_FLAGS) -Wall -Wextra -Werror -o $@ $< -lm

tsan: $(BUILD)/tsan/libadaptshim.so $(BUILD)/tsan/fd_probe
	@tests/integration/run-thread-sanitizer $(BUILD)

# AddressSanitizer and UBSan: the preload library itself built with them and
# run under real trainers (libasan must come first in LD_PRELOAD).
ASAN_SHIM_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/asan-shim/%.o) $(SHIM_SRC:%.c=$(BUILD)/asan-shim/%.o)
$(BUILD)/asan-shim/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $< (address sanitizer, preload)"
	@$(CC) $(CFLAGS_ALL) -MMD -MP $(ASAN_FLAGS) -Ishim $(MPI_CFLAGS) -c $< -o $@

$(BUILD)/asan-shim/libadaptshim.so: $(ASAN_SHIM_OBJ) shim/exports.map
	$(CC) $(LDFLAGS) -shared $(ASAN_FLAGS) -o $@ $(ASAN_SHIM_OBJ) \
	    -Wl,--version-script=shim/exports.map $(PKG_LIBS) -ldl -lpthread -lm

asan-shim: $(BUILD)/asan-shim/libadaptshim.so all
	@tests/integration/run-address-sanitizer $(BUILD)

# The ELF inspector's tests inspect the built library, trainers and tools.
unit: $(UNIT) $(LIB) $(TRAINERS) $(TOOLS)
	ADAPTSHIM_BUILD=$(abspath $(BUILD)) $(UNIT) --jobs $(TEST_JOBS)

# Each test runs in a process of its own, whose leak report Criterion does
# not count as a failure: the report itself fails the target.
unit-asan: $(UNIT_ASAN) $(LIB) $(TRAINERS) $(TOOLS)
	@status=0; ADAPTSHIM_BUILD=$(abspath $(BUILD)) ASAN_OPTIONS=detect_leaks=1 \
	    UBSAN_OPTIONS=print_stacktrace=1 $(UNIT_ASAN) --jobs $(TEST_JOBS) > $(BUILD)/unit-asan.log 2>&1 \
	    || status=$$?; cat $(BUILD)/unit-asan.log; \
	if grep -q LeakSanitizer $(BUILD)/unit-asan.log; then \
	    echo "unit-asan: a unit test leaked memory (the report is above)" >&2; exit 1; fi; \
	exit $$status

INTEGRATION_SRC := $(sort $(wildcard tests/integration/*.c))
INTEGRATION := $(BUILD)/tests/integration_tests
# The integration tests link the runtime archive only to recompute logged
# decisions from their inputs; everything else they do goes through processes.
$(INTEGRATION): $(INTEGRATION_SRC) $(wildcard tests/integration/*.h) tests/tools/probe_common.h \
                $(ARCHIVE)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE $(CRITERION_CFLAGS) \
	    -Itests/integration -Iruntime -o $@ $(INTEGRATION_SRC) $(ARCHIVE) $(CRITERION_LIBS) \
	    $(PKG_LIBS) -ldl -lpthread -lm

integration: all $(INTEGRATION)
	ADAPTSHIM_BUILD=$(abspath $(BUILD)) ADAPTSHIM_SOURCE=$(abspath .) $(INTEGRATION) \
	    --jobs $(INTEGRATION_JOBS)

# `make check`: make with the jobserver (-j from the command line, else one
# job per processor: CHECK_JOBS) builds the integration tests' programs,
# then in one more make starts them (they take longest, and mostly wait for
# the processes they start) while it builds and runs the other groups of
# tests, each as soon as its programs are built, and builds the benchmarks
# (not run, so that a change cannot break them unnoticed).  Make builds
# each file once, before any test that runs it starts.  (In one make alone
# the integration tests would wait for compiles that make picked first.)
check: deps
	+$(MAKE) $(CHECK_JOBS) all $(INTEGRATION)
	+$(MAKE) $(CHECK_JOBS) check-tests $(BENCHES)

check-tests: integration unit unit-asan tsan asan-shim fuzz-short

# The development loop: the unit and integration tests only.
check-fast:
	+$(MAKE) $(CHECK_JOBS) all $(INTEGRATION)
	+$(MAKE) $(CHECK_JOBS) integration unit

demo: deps
	$(MAKE) all
	@scripts/demo $(BUILD)

bench: deps
	$(MAKE) all $(BENCHES)
	@tests/bench/run-all $(BUILD)

# The Python package (scripts/python: the adaptshim package and the
# sitecustomize of the transparent statistics), installed where the
# package's _library.py finds PREFIX/lib/libadaptdl.so and where
# adaptdl-wrap puts it on PYTHONPATH (PREFIX/share/adaptshim/python);
# uninstall removes the directory whole, with the bytecode Python wrote.
PYTHON_DIR := $(PREFIX)/share/adaptshim/python
# The manual pages, each beside what it describes.
MAN1 := scripts/adaptdl-wrap.1 scripts/adaptdl-verify.1 scripts/adaptdl-plot.1 hooks/adaptdl-inspect.1
MAN3 := shim/adaptdl.3
MAN7 := shim/adaptshim.7
MAN_DIR := $(PREFIX)/share/man

install: $(LIB) $(STANDALONE) $(INSPECT) $(REPLICAS_TOOL) $(VERIFY_TOOL) $(TORCH_LAUNCH) $(WRAP) $(PLOT)
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	    $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libadaptshim.so
	install -m 0755 $(STANDALONE) $(DESTDIR)$(PREFIX)/lib/libadaptdl.so
	install -m 0644 shim/adaptdl.h $(DESTDIR)$(PREFIX)/include/adaptdl.h
	install -m 0755 $(INSPECT) $(DESTDIR)$(PREFIX)/bin/adaptdl-inspect
	install -m 0755 $(REPLICAS_TOOL) $(DESTDIR)$(PREFIX)/bin/adaptdl-replicas
	install -m 0755 $(VERIFY_TOOL) $(DESTDIR)$(PREFIX)/bin/adaptdl-verify
	install -m 0755 $(TORCH_LAUNCH) $(DESTDIR)$(PREFIX)/bin/adaptdl-torch-launch
	install -m 0755 scripts/adaptdl-wrap $(DESTDIR)$(PREFIX)/bin/adaptdl-wrap
	install -m 0755 scripts/adaptdl-plot $(DESTDIR)$(PREFIX)/bin/adaptdl-plot
	@# the Python package, where adaptdl-wrap looks for it (PYTHONPATH)
	for file in $$(cd scripts/python && find . -name '*.py'); do \
	    install -D -m 0644 scripts/python/$$file $(DESTDIR)$(PYTHON_DIR)/$$file; \
	done
	sed -e 's|@PREFIX@|$(PREFIX)|g' scripts/adaptshim.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/adaptshim.pc
	install -d $(DESTDIR)$(MAN_DIR)/man1 $(DESTDIR)$(MAN_DIR)/man3 $(DESTDIR)$(MAN_DIR)/man7
	install -m 0644 $(MAN1) $(DESTDIR)$(MAN_DIR)/man1/
	install -m 0644 $(MAN3) $(DESTDIR)$(MAN_DIR)/man3/
	install -m 0644 $(MAN7) $(DESTDIR)$(MAN_DIR)/man7/

# Removes exactly what `make install` put in place (same PREFIX, DESTDIR).
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libadaptshim.so $(DESTDIR)$(PREFIX)/lib/libadaptdl.so \
	    $(DESTDIR)$(PREFIX)/bin/adaptdl-inspect $(DESTDIR)$(PREFIX)/bin/adaptdl-wrap \
	    $(DESTDIR)$(PREFIX)/bin/adaptdl-plot $(DESTDIR)$(PREFIX)/bin/adaptdl-replicas \
	    $(DESTDIR)$(PREFIX)/bin/adaptdl-verify $(DESTDIR)$(PREFIX)/bin/adaptdl-torch-launch \
	    $(DESTDIR)$(PREFIX)/include/adaptdl.h \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig/adaptshim.pc
	rm -rf $(DESTDIR)$(PREFIX)/share/adaptshim
	rm -f $(addprefix $(DESTDIR)$(MAN_DIR)/man1/,$(notdir $(MAN1))) \
	    $(addprefix $(DESTDIR)$(MAN_DIR)/man3/,$(notdir $(MAN3))) \
	    $(addprefix $(DESTDIR)$(MAN_DIR)/man7/,$(notdir $(MAN7)))

clean:
	rm -rf $(BUILD)
