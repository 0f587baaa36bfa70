# doctx: the two set-up commands are `make run` and `make test`.  Each one
# first installs any missing Debian packages (scripts/setup.sh), then builds
# with CMake, then runs.
JOBS ?= 2
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
CTEST_ARGS ?=

.PHONY: all setup build run test test-release test-asan test-fuzz bench install clean

all: build

setup:
	@bash scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@bash scripts/demo.sh $(BUILD)/doctx

# The whole suite: release build, then ASan+UBSan build, then bounded fuzzing.
test: setup
	@bash scripts/test.sh

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

bench: build
	@bash scripts/bench.sh $(BUILD)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
