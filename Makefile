# dpcert — top-level Makefile.
#
#   make            build build/dpcert, the tests and (with nvcc) the CUDA objects
#   make run        install what is missing, build, run the main job
#   make test       install what is missing, build, run every test (ends "N passed, N failed, N skipped")
#   make test-fast  the fast subset (under 2 minutes)
#   make test SANITIZE=1   the same under ASan+UBSan (build-san/)
#   make coverage   lcov HTML under build/coverage, a one-line summary, the floors CI enforces
#   make bench      CPU benchmarks (ratios measured side by side)
#   make bench-peers  dpcert against PyTorch/Opacus on the same llama (installs torch, opacus into build/)
#   make fuzz       libFuzzer targets (clang), build/fuzz/
#   make test-peers certify Opacus (installs torch, opacus, safetensors from PyPI into build/peers-venv)
#   make clean
#
# Sources are found by directory: every module's *.c goes into its static
# library, every <module>/tests/test_*.c is a test program, <module>/tests/*.sh
# a test script, <module>/bench/bench_*.c a benchmark, optimized/cuda/*.cu and optimized/cuda/dev/*.cu the
# CUDA backend. Dependencies are probed by ci/configure.sh (compile probes).

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build-san
else
BUILD ?= build
endif
CC ?= cc
ifeq ($(origin CC),default)
CC := gcc
endif

CONFIG := $(BUILD)/config.mk
ifeq ($(filter clean,$(MAKECMDGOALS)),)
-include $(CONFIG)
endif

.DEFAULT_GOAL := all
MODULES := common accountant reference optimized conformance attacks
VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)

WARN := -Wall -Wextra -Werror -Wno-unused-parameter
CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -O2 -g -ffp-contract=off -fno-fast-math $(WARN) -I. $(MPI_CFLAGS) \
	-DDPCERT_VERSION='"$(VERSION)"' -DDPCERT_GIT_REV='"$(GIT_REV)"'
LDLIBS_BASE := $(MPI_LIBS) -lmpfr -lgmp -lfftw3 -ljansson -lcrypto -lm -lpthread
ifeq ($(SANITIZE),1)
CFLAGS_BASE += -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDFLAGS_SAN := -fsanitize=address,undefined
endif
ifeq ($(COVERAGE),1)
# atomic counters: the engine's threads update them at once (else lcov finds negative counts)
CFLAGS_BASE += -O0 --coverage -fprofile-update=atomic
LDFLAGS_SAN += --coverage -fprofile-update=atomic
endif

# ---- CUDA (compiled whenever nvcc, cuBLAS and NCCL are present, GPU or not; ci/configure.sh
# finds them; make CUDA=1 requires them, make CUDA=0 leaves CUDA out) ----
CU_SRC := $(wildcard optimized/cuda/*.cu optimized/cuda/dev/*.cu)
# (not in the sanitizer or coverage builds: no GPU runs them, and their tests are host-only)
ifeq ($(HAVE_CUDA),1)
ifneq ($(SANITIZE),1)
ifneq ($(COVERAGE),1)
ifneq ($(CUDA),0)
USE_CUDA := 1
endif
endif
endif
endif
ifeq ($(CUDA),1)
ifneq ($(wildcard $(CONFIG)),)
ifneq ($(HAVE_CUDA),1)
$(error CUDA=1 was requested but $(CONFIG) has no CUDA build (nvcc, cuBLAS or NCCL missing: see $(BUILD)/banner.txt, ci/configure.sh, docs/cuda.md "Building"))
endif
endif
endif
ifeq ($(USE_CUDA),1)
CFLAGS_BASE += -DDP_HAVE_CUDA=1 -I$(CUDA_HOME)/include $(CUDA_INC)
NVCCFLAGS := -std=c++17 -O3 -g -lineinfo -I. -I$(CUDA_HOME)/include $(CUDA_INC) -DDP_HAVE_CUDA=1 \
	-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
	-Xcompiler -Wall,-Wextra,-Wno-unused-parameter -Werror all-warnings $(MPI_CFLAGS)
CU_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj/%.o)
CUDA_LIBS := $(CUDA_LINK_LIBS) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++
else
CU_OBJ :=
CUDA_LIBS :=
endif

# ---- module libraries ----
lib_src_of = $(filter-out common/main.c,$(sort $(shell find $(1) -name '*.c' -not -path '*/tests/*' -not -path '*/bench/*' -not -path '*/fuzz/*' -not -path '*/plugins/*' 2>/dev/null)))
define MODULE_LIB
$(1)_SRC := $$(call lib_src_of,$(1))
$(1)_OBJ := $$($(1)_SRC:%.c=$$(BUILD)/obj/%.o)
$$(BUILD)/lib/libdp$(1).a: $$($(1)_OBJ) $(if $(filter optimized,$(1)),$$(CU_OBJ)) $$(BUILD)/obj/empty.o
	@mkdir -p $$(@D)
	@rm -f $$@
	@ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call MODULE_LIB,$(m))))

# The modules' command tables are weak references in common/main.c (common/cmd.h), and a weak reference does not
# pull an object out of an archive, so the binary links every module library whole.
# Link order (dependents first). A module's tests link its own library and those below it.
LIBS_common := common
LIBS_accountant := accountant common
LIBS_reference := reference common
LIBS_optimized := optimized reference common
LIBS_attacks := attacks optimized reference accountant common
LIBS_conformance := conformance attacks optimized reference accountant common
ALL_LIBS := $(LIBS_conformance)
libfiles = $(foreach l,$(1),$(BUILD)/lib/libdp$(l).a)

DPCERT := $(BUILD)/dpcert

# Quiet build lines unless V=1.
ifeq ($(V),1)
Q_CC :=
Q_NVCC :=
Q_LD :=
else
Q_CC = @echo "  CC      $<";
Q_NVCC = @echo "  NVCC    $<";
Q_LD = @echo "  LD      $@";
endif

# ---- tests and benches ----
TEST_SRC := $(wildcard $(MODULES:%=%/tests/test_*.c))
TEST_BIN := $(foreach s,$(TEST_SRC),$(BUILD)/tests/$(firstword $(subst /, ,$(s)))_$(basename $(notdir $(s))))
# (bench_gpu_step loads the CUDA backend as a plugin, as dpcert does: its own rule below)
BENCH_SRC := $(filter-out optimized/bench/bench_gpu_step.c,$(wildcard $(MODULES:%=%/bench/bench_*.c)))
BENCH_BIN := $(foreach s,$(BENCH_SRC),$(BUILD)/bench/$(firstword $(subst /, ,$(s)))_$(basename $(notdir $(s))))

define TEST_RULE
$(BUILD)/$(2)/$(1)_$(basename $(notdir $(3))): $(3) $$(call libfiles,$$(LIBS_$(1))) | $$(CONFIG)
	@mkdir -p $$(@D)
	$$(Q_LD)$$(CC) $$(CFLAGS_BASE) $$< -o $$@ $$(call libfiles,$$(LIBS_$(1))) $$(LDFLAGS_SAN) $$(if $$(filter optimized conformance attacks,$(1)),$$(CUDA_LIBS)) $$(LDLIBS_BASE)
endef
$(foreach s,$(TEST_SRC),$(eval $(call TEST_RULE,$(firstword $(subst /, ,$(s))),tests,$(s))))
$(foreach s,$(BENCH_SRC),$(eval $(call TEST_RULE,$(firstword $(subst /, ,$(s))),bench,$(s))))

.PHONY: all programs benches run test test-fast test-gpu test-cuda-emu-full coverage bench bench-gpu fuzz clean deps config banner check-config test-peers
all: programs $(BENCH_BIN)
# the benchmark programs alone (make coverage builds them: ci/tests/bench_harness.sh runs each)
benches: $(BENCH_BIN)
# the binary and the test programs (what the coverage run needs)
programs: banner $(DPCERT) $(TEST_BIN)

banner: | $(CONFIG)
	@cat $(BUILD)/banner.txt

$(CONFIG): ci/configure.sh
	@mkdir -p $(BUILD)
	@CC=$(CC) CUDA=$(CUDA) ci/configure.sh $(BUILD) --quiet || (cat $(BUILD)/banner.txt; exit 1)

# Re-probe, installing missing packages (used by run and test on a fresh machine).
deps:
	@mkdir -p $(BUILD)
	@CC=$(CC) CUDA=$(CUDA) ci/configure.sh $(BUILD) --install --quiet || (cat $(BUILD)/banner.txt; exit 1)

$(BUILD)/obj/empty.o:
	@mkdir -p $(@D)
	echo 'typedef int dp_empty_unit;' | $(CC) -x c -c - -o $@

$(BUILD)/obj/%.o: %.c | $(CONFIG)
	@mkdir -p $(@D)
	$(Q_CC)$(CC) $(CFLAGS_BASE) -MMD -MP -c $< -o $@

# The plugin loader's forwarding functions, generated from OPT_BACKEND_OPS (docs/plugin-abi.md).
$(BUILD)/gen/opt_plugin_fwd.inc: optimized/backend.h optimized/plugin/gen_abi.sh
	@mkdir -p $(@D)
	@optimized/plugin/gen_abi.sh fwd > $@.tmp && mv $@.tmp $@
$(BUILD)/obj/optimized/plugin_loader.o: $(BUILD)/gen/opt_plugin_fwd.inc
$(BUILD)/obj/optimized/plugin_loader.o: CFLAGS_BASE += -I$(BUILD)/gen

$(BUILD)/obj/%.o: %.cu | $(CONFIG)
	@mkdir -p $(@D)
	$(Q_NVCC)$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

# build/dpcert links no CUDA library (docs/cuda.md "Plugin"): it takes the optimized
# library without the CUDA objects and with a backend.o that has no link anchor to them
# (-DOPT_CUDA_PLUGIN_ONLY), exports its symbols to the plugin (-rdynamic), and loads
# $(BUILD)/libdpcert_cuda.so (the CUDA objects, -fPIC, with cuBLAS/NCCL/cudart) on first
# use of --backend cuda. Test programs keep linking libdpoptimized.a with the CUDA objects.
OPT_HOST_OBJ := $(filter-out $(BUILD)/obj/optimized/backend.o,$(optimized_OBJ)) $(BUILD)/obj-host/optimized/backend.o
DPCERT_LIBS := $(patsubst %/libdpoptimized.a,%/libdpoptimized_host.a,$(call libfiles,$(ALL_LIBS)))
$(BUILD)/obj-host/optimized/backend.o: optimized/backend.c | $(CONFIG)
	@mkdir -p $(@D)
	$(Q_CC)$(CC) $(CFLAGS_BASE) -DOPT_CUDA_PLUGIN_ONLY -MMD -MP -c $< -o $@
$(BUILD)/lib/libdpoptimized_host.a: $(OPT_HOST_OBJ) $(BUILD)/obj/empty.o
	@mkdir -p $(@D)
	@rm -f $@
	@ar rcs $@ $^
ifeq ($(USE_CUDA),1)
CUDA_PLUGIN := $(BUILD)/libdpcert_cuda.so
CU_PIC_OBJ := $(CU_SRC:%.cu=$(BUILD)/obj-pic/%.o)
$(BUILD)/obj-pic/%.o: %.cu | $(CONFIG)
	@mkdir -p $(@D)
	$(Q_NVCC)$(NVCC) $(NVCCFLAGS) -Xcompiler -fPIC -MMD -MP -c $< -o $@
$(CUDA_PLUGIN): $(CU_PIC_OBJ)
	$(Q_LD)$(CC) -shared -o $@ $^ $(CUDA_LINK_LIBS) -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart \
		-lstdc++ $(MPI_LIBS) -lm -lpthread -ldl -lrt
else
CUDA_PLUGIN :=
endif
all: $(CUDA_PLUGIN)

# Backend plugins (docs/plugin-abi.md), each built by its own Makefile from its directory
# against optimized/plugin/dpcert_backend.h only, as a team outside dpcert builds one:
# BUILD/plugins/libdpcert_NAME.so (--backend plugin:NAME). The OpenBLAS one needs
# libopenblas-dev (ci/configure.sh probe HAVE_OPENBLAS).
PLUGIN_NAMES := skeleton $(if $(filter 1,$(HAVE_OPENBLAS)),openblas)
PLUGINS := $(PLUGIN_NAMES:%=$(BUILD)/plugins/libdpcert_%.so)
define PLUGIN_RULE
$(BUILD)/plugins/libdpcert_$(1).so: $(wildcard optimized/plugins/$(1)/*.c) optimized/plugins/$(1)/Makefile optimized/plugin/dpcert_backend.h | $(CONFIG)
	@mkdir -p $$(@D)
	@echo "  PLUGIN  $$@"
	+@$(MAKE) --no-print-directory -s -C optimized/plugins/$(1) OUT=$$(abspath $$(@D)) CC=$(CC) EXTRA_CFLAGS=-Werror
endef
$(foreach p,skeleton openblas,$(eval $(call PLUGIN_RULE,$(p))))
all: $(PLUGINS)

# ---- the CUDA emulation (docs/cuda.md "The emulation"): the same optimized/cuda/*.cu,
# unmodified, through the launch rewriter and g++ against optimized/cuda/emu/ (stand-ins
# for the CUDA, cuBLAS and NCCL headers) -- always built, no GPU or nvcc needed. Variants:
# emu ($(BUILD)/libdpcert_cuda_emu.so, loaded by --backend cuda-emu, and the emulated GPU
# tests in $(BUILD)/tests), emu-asan (ASan+UBSan) and emu-tsan (TSan): their tests go to
# $(BUILD)/emu-asan/tests and $(BUILD)/emu-tsan/tests (run by optimized/tests/cuda_emu_san.sh).
# Under SANITIZE=1 the emu variant itself is ASan-instrumented and the other two are not built;
# under COVERAGE=1 only the plain variant is built (the coverage run, `programs`, runs its tests).
ifeq ($(origin CXX),default)
CXX := g++
endif
EMU := optimized/cuda/emu
EMU_RT_SRC := $(wildcard $(EMU)/*.cc)
EMU_TEST_CU := $(wildcard optimized/tests/test_cuda_emu_*.cu)
EMU_GPU_TEST := $(wildcard optimized/tests/test_cuda_gpu_*.c)
EMU_CXXFLAGS := -std=c++20 -g -fPIC -ffp-contract=off -fno-fast-math -fno-strict-aliasing -Wall -Wextra \
	-Wno-unused-parameter -Wno-unknown-pragmas -I. -I$(EMU)/include $(MPI_CFLAGS) -DDP_CUDA_EMU=1
EMU_SAN_asan := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
ifeq ($(SANITIZE),1)
EMU_VARIANTS := emu
EMU_OPT_emu := $(EMU_SAN_asan)
else ifeq ($(COVERAGE),1)
EMU_VARIANTS := emu
EMU_OPT_emu := -O2
else
EMU_VARIANTS := emu emu-asan emu-tsan
EMU_OPT_emu := -O2
endif
EMU_OPT_emu-asan := $(EMU_SAN_asan)
EMU_OPT_emu-tsan := -O1 -fsanitize=thread
# test programs of a variant: test_cuda_gpu_X.c -> *_emu_X, test_cuda_emu_X.cu -> *_emu_X
emu_test_dir = $(if $(filter emu,$(1)),$(BUILD)/tests,$(BUILD)/$(1)/tests)
emu_tests = $(foreach s,$(EMU_GPU_TEST),$(call emu_test_dir,$(1))/optimized_test_cuda_emu_$(patsubst test_cuda_gpu_%.c,%,$(notdir $(s)))) \
	$(foreach s,$(EMU_TEST_CU),$(call emu_test_dir,$(1))/optimized_$(basename $(notdir $(s))))
Q_CXX = $(if $(filter 1,$(V)),,@echo "  CXX     $<";)

$(BUILD)/emu-src/%.cc: %.cu $(EMU)/cu_emu_rewrite.sh
	@$(EMU)/cu_emu_rewrite.sh $< $@
.SECONDARY: $(CU_SRC:%.cu=$(BUILD)/emu-src/%.cc) $(EMU_TEST_CU:%.cu=$(BUILD)/emu-src/%.cc)

# the optimized library without the CUDA stubs (the emulated objects are linked instead)
$(BUILD)/lib/libdpoptimized_emu.a: $(filter-out $(BUILD)/obj/optimized/cuda/cu_stub.o,$(optimized_OBJ)) $(BUILD)/obj/empty.o
	@mkdir -p $(@D)
	@rm -f $@
	@ar rcs $@ $^
EMU_LIBS := $(BUILD)/lib/libdpoptimized_emu.a $(call libfiles,reference common)

define EMU_VARIANT
$(1)_CU_OBJ := $$(CU_SRC:%.cu=$$(BUILD)/$(1)/obj/%.o)
$(1)_RT_OBJ := $$(EMU_RT_SRC:%.cc=$$(BUILD)/$(1)/obj/%.o)
$$(BUILD)/$(1)/obj/%.o: $$(BUILD)/emu-src/%.cc | $$(CONFIG)
	@mkdir -p $$(@D)
	$$(Q_CXX)$$(CXX) $$(EMU_CXXFLAGS) $$(EMU_OPT_$(1)) -include $$(EMU)/include/cuda_runtime.h -MMD -MP -c $$< -o $$@
$$(BUILD)/$(1)/obj/$$(EMU)/%.o: $$(EMU)/%.cc | $$(CONFIG)
	@mkdir -p $$(@D)
	$$(Q_CXX)$$(CXX) $$(EMU_CXXFLAGS) $$(EMU_OPT_$(1)) -Werror -MMD -MP -c $$< -o $$@
$$(BUILD)/$(1)/obj/optimized/tests/%.o: optimized/tests/%.c | $$(CONFIG)
	@mkdir -p $$(@D)
	$$(Q_CC)$$(CC) $$(CFLAGS_BASE) $$(EMU_OPT_$(1)) -DDP_CUDA_EMU=1 -MMD -MP -c $$< -o $$@
$$(call emu_test_dir,$(1))/optimized_test_cuda_emu_%: $$(BUILD)/$(1)/obj/optimized/tests/test_cuda_gpu_%.o $$($(1)_CU_OBJ) $$($(1)_RT_OBJ) $$(EMU_LIBS)
	@mkdir -p $$(@D)
	$$(Q_LD)$$(CXX) $$(EMU_OPT_$(1)) $$< $$($(1)_CU_OBJ) $$($(1)_RT_OBJ) -o $$@ -rdynamic $$(EMU_LIBS) $$(LDFLAGS_SAN) $$(LDLIBS_BASE) -ldl
$$(call emu_test_dir,$(1))/optimized_test_cuda_emu_%: $$(BUILD)/$(1)/obj/optimized/tests/test_cuda_emu_%.o $$($(1)_CU_OBJ) $$($(1)_RT_OBJ) $$(EMU_LIBS)
	@mkdir -p $$(@D)
	$$(Q_LD)$$(CXX) $$(EMU_OPT_$(1)) $$< $$($(1)_CU_OBJ) $$($(1)_RT_OBJ) -o $$@ -rdynamic $$(EMU_LIBS) $$(LDFLAGS_SAN) $$(LDLIBS_BASE) -ldl
.SECONDARY: $$($(1)_CU_OBJ) $$($(1)_RT_OBJ) $$(EMU_GPU_TEST:%.c=$$(BUILD)/$(1)/obj/%.o) $$(EMU_TEST_CU:%.cu=$$(BUILD)/$(1)/obj/%.o)
all: $$(call emu_tests,$(1))
endef
$(foreach v,$(EMU_VARIANTS),$(eval $(call EMU_VARIANT,$(v))))
# the coverage run (`programs`) runs the cuda-emu tests too: the plain variant and its plugin
# (the emulated .cu objects carry no counters; the engine code they drive does)
programs: $(call emu_tests,emu) $(BUILD)/libdpcert_cuda_emu.so

# benchmarks of the emulation itself (optimized/bench/bench_cuda_emu*.cu, plain variant)
EMU_BENCH_CU := $(wildcard optimized/bench/bench_cuda_emu*.cu)
EMU_BENCH := $(EMU_BENCH_CU:optimized/bench/%.cu=$(BUILD)/bench/optimized_%)
.SECONDARY: $(EMU_BENCH_CU:%.cu=$(BUILD)/emu-src/%.cc) $(EMU_BENCH_CU:%.cu=$(BUILD)/emu/obj/%.o)
$(EMU_BENCH): $(BUILD)/bench/optimized_%: $(BUILD)/emu/obj/optimized/bench/%.o $(emu_CU_OBJ) $(emu_RT_OBJ) $(EMU_LIBS)
	@mkdir -p $(@D)
	$(Q_LD)$(CXX) $(EMU_OPT_emu) $< $(emu_CU_OBJ) $(emu_RT_OBJ) -o $@ -rdynamic $(EMU_LIBS) $(LDFLAGS_SAN) $(LDLIBS_BASE) -ldl
all: $(EMU_BENCH)
benches: $(EMU_BENCH)

# -Bsymbolic: the plugin's calls to its own cu_* functions bind to its own definitions, never to
# the stubs (cu_stub.c) that a SANITIZE=1 or coverage dpcert exports with -rdynamic
CUDA_EMU_PLUGIN := $(BUILD)/libdpcert_cuda_emu.so
$(CUDA_EMU_PLUGIN): $(emu_CU_OBJ) $(emu_RT_OBJ)
	$(Q_LD)$(CXX) -shared -Wl,-Bsymbolic $(EMU_OPT_emu) -o $@ $^ $(MPI_LIBS) -lm -lpthread -ldl
all: $(CUDA_EMU_PLUGIN)

$(DPCERT): common/main.c $(DPCERT_LIBS) | $(CONFIG)
	$(Q_LD)$(CC) $(CFLAGS_BASE) $< -o $@ -rdynamic -Wl,--whole-archive $(DPCERT_LIBS) -Wl,--no-whole-archive $(LDFLAGS_SAN) $(LDLIBS_BASE) -ldl
# G4's benchmark (docs/gpu-results.md) links like dpcert, so that --backend cuda and cuda-emu load
# their plugins (DPCERT_CUDA_PLUGIN / DPCERT_CUDA_EMU_PLUGIN when not next to the binary)
$(BUILD)/bench/optimized_bench_gpu_step: optimized/bench/bench_gpu_step.c $(DPCERT_LIBS) | $(CONFIG)
	@mkdir -p $(@D)
	$(Q_LD)$(CC) $(CFLAGS_BASE) $< -o $@ -rdynamic -Wl,--whole-archive $(DPCERT_LIBS) -Wl,--no-whole-archive $(LDFLAGS_SAN) $(LDLIBS_BASE) -ldl
all: $(BUILD)/bench/optimized_bench_gpu_step
# the coverage run (`programs`) runs its smoke test on cuda-emu
programs: $(BUILD)/bench/optimized_bench_gpu_step
benches: $(BUILD)/bench/optimized_bench_gpu_step

# The sanitizer build runs only the fast subset (ci/run-tests.sh --fast).
TEST_FLAGS := $(if $(filter 1,$(SANITIZE)),--fast,)
test: deps
	@$(MAKE) --no-print-directory all
	@ci/run-tests.sh $(BUILD) $(TEST_FLAGS)

test-fast: deps
	@$(MAKE) --no-print-directory all
	@ci/run-tests.sh $(BUILD) --fast

test-gpu: deps
	@$(MAKE) --no-print-directory all
	@ci/run-tests.sh $(BUILD) --gpu

# the cuda-emu conformance of every ci run at 1, 2 and 4 ranks (make test runs a selection;
# optimized/tests/cuda_emu_conform.sh, docs/cuda.md "Conformance on cuda-emu")
test-cuda-emu-full: deps
	@$(MAKE) --no-print-directory all
	@CUDA_EMU_CONFORM_FULL=1 ci/run-tests.sh $(BUILD) --filter '^cuda_emu_conform'

run: deps
	@$(MAKE) --no-print-directory all
	@ci/main-job.sh $(BUILD)

# Third-party peers (not part of `make test`): virtual environments under $(BUILD)/ filled from
# PyPI; Opacus, optax, jax-privacy, TensorFlow Privacy and pyvacy certified, the accountants and
# ML Privacy Meter compared (docs/certification.md "Peers", accounting.md, audits.md).
test-peers: deps
	@$(MAKE) --no-print-directory all
	@conformance/adapters/python/peers.sh $(BUILD)

bench: deps
	@$(MAKE) --no-print-directory all
	@ci/run-bench.sh $(BUILD)

.PHONY: bench-peers
bench-peers: deps
	@$(MAKE) --no-print-directory all
	@ci/peers/bench-peers.sh $(BUILD)

bench-gpu: deps
	@$(MAKE) --no-print-directory all
	@ci/run-bench.sh $(BUILD) --gpu

# CI runs it after `make test` and `make test SANITIZE=1` (.ci/run); it exits 1 when a fast test
# fails or a floor of ci/coverage.sh is not met (docs/development.md "CI and coverage")
coverage:
	@$(MAKE) --no-print-directory BUILD=build-cov COVERAGE=1 deps
	@$(MAKE) --no-print-directory BUILD=build-cov COVERAGE=1 programs benches
	@ci/coverage.sh build-cov build/coverage

FUZZ_SRC := $(wildcard $(MODULES:%=%/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:%.c=$(BUILD)/fuzz/%)
FUZZ_LIB_SRC := common/alloc.c common/status.c common/tensor.c common/safetensors.c common/fsutil.c
# Per target: the sources compiled with the fuzzer's instrumentation (FUZZ_CC_name, default
# FUZZ_LIB_SRC) and prebuilt module libraries linked for what the parser only names (FUZZ_AR_name).
FUZZ_CC_fuzz_claims := $(common_SRC) $(accountant_SRC)
FUZZ_CC_fuzz_dpzo_log := $(common_SRC) $(reference_SRC)
FUZZ_CC_fuzz_cases := $(common_SRC) conformance/conform/cases.c conformance/conform/case_matrix.c
FUZZ_AR_fuzz_cases := $(call libfiles,optimized reference)
fuzz: $(FUZZ_BIN)
.SECONDEXPANSION:
$(BUILD)/fuzz/%: %.c $(wildcard common/*.c common/*.h) $$(FUZZ_CC_$$(notdir $$*)) $$(FUZZ_AR_$$(notdir $$*)) | $(CONFIG)
	@mkdir -p $(@D)
	clang -std=c11 -D_GNU_SOURCE -g -O1 -I. $(MPI_CFLAGS) -fsanitize=fuzzer,address,undefined $< $(or $(FUZZ_CC_$(notdir $*)),$(FUZZ_LIB_SRC)) $(FUZZ_AR_$(notdir $*)) -o $@ $(if $(FUZZ_AR_$(notdir $*)),$(CUDA_LIBS)) $(MPI_LIBS) -lmpfr -lgmp -lfftw3 -ljansson -lcrypto -lm -lpthread

clean:
	rm -rf build build-san build-cov

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(shell find $(BUILD)/obj-host $(BUILD)/obj-pic -name '*.d' 2>/dev/null)
-include $(shell find $(BUILD)/emu $(BUILD)/emu-asan $(BUILD)/emu-tsan -name '*.d' 2>/dev/null)
