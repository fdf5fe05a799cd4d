# Thin front for CMake. `make run` and `make test` install what they need.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Quiet builds: no "Entering directory" from the nested make, no per-file
# progress lines; warnings and errors still show.
MAKEFLAGS += --no-print-directory
QUIET_CMAKE = -DCMAKE_RULE_MESSAGES=OFF -DCMAKE_TARGET_MESSAGES=OFF

.PHONY: all deps build run test test-unit test-asan test-tsan fuzz bench clean gpu-check deb

all: build

deps:
	@scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPULSE_TESTS=ON $(QUIET_CMAKE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Start gpulsed --demo in the foreground on 127.0.0.1:9401: real GPUs
# through NVML, or with no NVIDIA driver the bundled real H200 recording
# (its first line says which); history in a temporary store removed at
# exit, and the rule pack deploy/rules/gpulse.rules.yml, so gpulse status,
# query, alerts and diagnose --since 10m answer at once. Its last start-up
# line says what to try.
# Only what the daemon and the CLI need is installed and built (the
# tests' tools and programs come with `make test`).
run:
	@scripts/install-deps.sh --run
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPULSE_TESTS=OFF $(QUIET_CMAKE) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gpulsed gpulse
	$(BUILD)/gpulsed --demo

# Every stage, each reported even when an earlier one failed: the suite,
# the suite with the wall clock 400 days ahead and 400 days back
# (libfaketime), and the suite under ASan+UBSan (scripts/test.sh).
test: deps
	@BUILD=$(BUILD) ASAN_BUILD=$(ASAN_BUILD) JOBS=$(JOBS) scripts/test.sh

test-unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite again under AddressSanitizer and UBSan.
test-asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPULSE_SANITIZE=ON $(QUIET_CMAKE) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --output-on-failure -j $(JOBS)

# The whole suite under ThreadSanitizer (by hand: slower, not in `make test`).
# Two tests cannot pass under it by nature: test_inject_client's fork test
# (TSan refuses threads started after a multi-threaded fork) and
# test_tsdb_crash (its loss bound assumes normal speed). The fork case of
# test_inject_fake_cupti says it is skipped under any sanitizer (an ASan
# child can inherit the allocator's lock held) and runs in the normal build.
test-tsan:
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DGPULSE_TSAN=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:die_after_fork=0 \
		ctest --output-on-failure -j $(JOBS)

fuzz:
	@cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGPULSE_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@scripts/run-fuzzers.sh build-fuzz

# The Debian package (debian/, debhelper), built from a copy of the tree
# with Debian's hardening flags: build/deb/gpulse_VERSION_ARCH.deb.
deb: deps
	@scripts/build-deb.sh --out $(BUILD)/deb

bench: build
	@bench/run-all.sh $(BUILD)

# On the GPU machine: build, run every GPU check and benchmark, print a table.
gpu-check:
	@scripts/gpu-check.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
