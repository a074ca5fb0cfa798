# The README's two commands: `make demo` and `make test`. Both set themselves up.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps build test demo bench fuzz format clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

demo: build
	@scripts/demo.sh $(BUILD)/hachi

bench: build
	@scripts/bench.sh $(BUILD)

fuzz: deps
	cmake -S . -B $(BUILD)-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 \
	  -DCMAKE_C_COMPILER=clang-14 -DHACHI_FUZZ=ON -DHACHI_TESTS=OFF -DHACHI_BENCH=OFF
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target fuzz_nvidia_smi
	@scripts/fuzz.sh $(BUILD)-fuzz 60

format:
	find src bench fuzz -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD)-fuzz
