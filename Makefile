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

.PHONY: all setup build run serve test test-release test-asan test-fuzz bench install clean

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

# doctxd on the embedded default store ($$DOCTX_STORE, else
# sqlite:./doctx.db) at 127.0.0.1:8420 (docs/server.md).  Its token file,
# $(BUILD)/doctxd.tokens, is made once (mode 0600, one admin token of 32
# random hex digits) and its token printed for curl.
serve: build
	@f=$(BUILD)/doctxd.tokens; \
	 if [ ! -e $$f ]; then \
	   ( umask 077; printf 'admin %s admin\n' \
	     "$$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >$$f ); fi; \
	 echo "doctxd: token file $$f; try:"; \
	 echo "  curl -H 'Authorization: Bearer $$(awk '!/^#/ && NF==3 {print $$2; exit}' $$f)' http://127.0.0.1:8420/v1/accounts"; \
	 exec $(BUILD)/doctxd --tokens $$f $(SERVE_ARGS)

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
