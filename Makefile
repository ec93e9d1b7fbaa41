# Quick start: `make run` (set-up, build, then a 4-rank CPU training job) and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps test-deps configure build build-run run test torch2 bench chaos format clean

deps:
	./scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Only what `make run` runs: the launcher and the built-in worker (the Python agent is source).
build-run: configure
	cmake --build $(BUILD) -j $(JOBS) --target dlaunch dlaunch-worker

# Ends with the path of the run's report page (dlaunch report), whatever the training's outcome.
run: build-run
	@rc=0; $(BUILD)/launcher/dlaunch --nproc 4 train || rc=$$?; \
	run_dir=$$(ls -td dlaunch-logs/*/ 2>/dev/null | head -1); \
	if [ -n "$$run_dir" ]; then echo "report: $$($(BUILD)/launcher/dlaunch report "$$run_dir")"; fi; \
	exit $$rc

# A test that fails is run once more and counted failed only if it fails again, so that one slow
# try on a loaded machine does not sink the whole run; ctest still prints every failed try.
# The test tools are installed before CMake first configures, so a fresh machine's first
# `make test` (or a `make run` before it) never caches a tool as missing; the tests also look
# their tools up on PATH when they run.
test-deps:
	./scripts/install-deps.sh --test

test: test-deps
	$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300 --repeat until-pass:2

# The torch 2.x venv (.venv-torch2, python/torch2-requirements.txt) the Python agent's tests also
# run on; opt-in: it downloads ~2.3 GB once. Re-configures so that ctest registers that tier.
torch2:
	./scripts/torch2-venv.sh
	if [ -f $(BUILD)/CMakeCache.txt ]; then cmake -S . -B $(BUILD) $(CMAKE_FLAGS); fi

bench: build
	./scripts/install-deps.sh --bench
	./benchmarks/run.sh $(BUILD)

# The long fault campaign; writes RELIABILITY.md (one campaign at a time on a shared machine).
chaos: build
	flock /tmp/dlaunch-bench.lock ./scripts/chaos.sh $(BUILD) RELIABILITY.md

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
