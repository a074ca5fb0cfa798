# The README's two commands: `make demo` and `make test`. Both set themselves up.
BUILD ?= build
# ccache (when installed; CMakeLists.txt) keys on paths relative to the checkout, so a fresh
# clone anywhere reuses what an earlier clone on this machine compiled.
export CCACHE_BASEDIR ?= $(CURDIR)
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Warnings are errors in our own builds (CMake's HACHI_WERROR is OFF for everyone else).
WERROR ?= ON
# Seconds per fuzz target (five of them): `make fuzz`, and the smoke run in `make test`.
FUZZ_SECONDS ?= 300
FUZZ_SMOKE_SECONDS ?= 12

.PHONY: all deps build test demo bench fuzz format format-check analyze clean package package-test

all: build

deps:
	@scripts/install-deps.sh

# A new build dir is Release: what the package ships (-O3, no debug info), so the tests
# (and CI, on a clean clone) run the shipped build and `make test` packages it. One made
# before keeps its type; BUILD_TYPE=RelWithDebInfo for debug info.
BUILD_TYPE ?= Release
$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DHACHI_WERROR=$(WERROR) \
	  $(CMAKE_FLAGS)

# A build dir configured by hand (or before HACHI_WERROR became opt-in) gets WERROR too.
build: deps $(BUILD)/build.ninja
	@grep -q '^HACHI_WERROR:BOOL=$(WERROR)$$' $(BUILD)/CMakeCache.txt \
	  || cmake -S . -B $(BUILD) -DHACHI_WERROR=$(WERROR)
	cmake --build $(BUILD) -j $(JOBS)

# Every unit, property and end-to-end test (the dashboard's in Chromium among them,
# docs/dashboard.md), then a short run of every fuzz target (about a minute; the long
# run is `make fuzz`).
test: build format-check analyze
	npm ci --prefix tests/browser --prefer-offline --no-audit --no-fund
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS)
	$(MAKE) --no-print-directory package-test PKG_BUILD=$(BUILD)

# Debian packages (docs/install.md): hachi and hachi-slurm-compat, by CPack's DEB generator,
# in $(PKG_BUILD)/deb/. `make package` configures build-release for them (Release, the
# binary alone); `make test` packages $(BUILD), already built (Release when make made it)
# and tested, rather than compile a second tree. `make package-test` installs them into a throwaway root and runs
# a server, an agent and a job from the installed units (scripts/package-test.sh).
PKG_BUILD ?= build-release
RELEASE_FLAGS = -DCMAKE_BUILD_TYPE=Release -DHACHI_TESTS=OFF -DHACHI_BENCH=OFF -DHACHI_FUZZ=OFF
package: deps
	@[ -f $(PKG_BUILD)/build.ninja ] || cmake -S . -B $(PKG_BUILD) -G Ninja \
	  -DHACHI_WERROR=$(WERROR) $(RELEASE_FLAGS) $(CMAKE_FLAGS)
	cmake --build $(PKG_BUILD) -j $(JOBS) --target hachi hachi_man
	rm -rf $(PKG_BUILD)/deb
	cd $(PKG_BUILD) && cpack -G DEB
	@ls -l $(PKG_BUILD)/deb/*.deb

package-test: package
	@scripts/package-test.sh $(PKG_BUILD)

demo: build
	@scripts/demo.sh $(BUILD)/hachi

bench: build
	@scripts/bench.sh $(BUILD)
	@bench/scale/compare.py $(BUILD)/hachi --out $(BUILD)/bench-results  # $$SCALE_BASELINE=old binary
	@HACHI_ATTACK_SECONDS=60 $(BUILD)/src/cli/cli_attack_e2e_test  # 500+300 slow clients, 60 s (docs/benchmarks.md)
	@HACHI_ATTACK_SECONDS=60 $(BUILD)/src/cli/cli_flood_e2e_test  # idle, pipelined and body floods (docs/benchmarks.md)

# -O1 -gline-tables-only as OSS-Fuzz builds: the clean fuzz build takes ~1.3 min on 2
# cores instead of ~2.2 at -O2 -g, and NDEBUG as the shipped binary.
FUZZ_FLAGS = -O1 -gline-tables-only -DNDEBUG
fuzz: deps
	cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
	  -DCMAKE_C_COMPILER=clang-14 -DHACHI_FUZZ=ON -DHACHI_TESTS=OFF -DHACHI_BENCH=OFF -DHACHI_WERROR=$(WERROR) \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(FUZZ_FLAGS)" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$(FUZZ_FLAGS)"
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target fuzz_all  # and only the libraries they use
	@scripts/fuzz.sh $(BUILD)-fuzz $(FUZZ_SECONDS)

# The C++ files git knows, but the vendored ones (scripts/format.sh): `make format`
# rewrites them, `make format-check` (part of `make test`) fails on any drift.
format:
	@scripts/format.sh fix

format-check: deps
	@scripts/format.sh check

# Clang's thread-safety analysis (core/mutex.h): clang-14 -fsyntax-only -Wthread-safety
# over every source file with the flags of BUILD's compile_commands.json, about a minute
# on 2 cores; part of `make test`.
analyze: deps $(BUILD)/build.ninja
	@scripts/analyze.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD)-fuzz build-release
