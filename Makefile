# doctx: the two set-up commands are `make run` and `make test`.  Each one
# first installs any missing Debian packages (scripts/setup.sh), then builds
# with CMake, then runs.
JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 10
CTEST_ARGS ?=
PREFIX ?= /usr/local

.PHONY: all setup build run test test-release test-asan test-fuzz bench install clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# The demo's build is quiet: its output goes to $(BUILD)/build.log, and
# only a failure shows it (the last 40 lines).
run: setup
	@mkdir -p $(BUILD)
	@{ cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo && \
	   cmake --build $(BUILD) -j $(JOBS); } >$(BUILD)/build.log 2>&1 || \
	 { tail -40 $(BUILD)/build.log; \
	   echo "make run: the build failed (whole log: $(BUILD)/build.log)" >&2; \
	   exit 1; }
	@bash scripts/demo.sh $(BUILD)/doctx

# The whole suite: release build, then ASan+UBSan build, then bounded fuzzing.
test: setup
	@bash scripts/test.sh

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

bench: build
	@bash scripts/bench.sh $(BUILD)

# make install PREFIX=/some/where: the command, library, header and a
# doctx.pc that is right for that prefix.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
