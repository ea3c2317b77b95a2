# Thin wrapper over CMake/ctest. `make demo` and `make test` set everything up
# on a fresh Debian machine (scripts/deps.sh installs what is missing).
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps extras build build-asan test test-release test-asan demo bench fuzz clean

all: build

deps:
	bash scripts/deps.sh

# Packages only some tests use (chromium for the report check).
extras:
	bash scripts/ci_extras.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# The sanitizer build leaves out CUDA: nothing runs it here, and the release
# build already checks that it compiles and links.
build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBERTC_SANITIZE=ON -DBERTC_CUDA=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)

test-release: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: build-asan
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)

test: extras test-release test-asan

demo: build
	./$(BUILD)/bertc demo

bench: build
	bash bench/train_speed/step_vs_torch.sh

# libFuzzer harnesses (clang, ASan+UBSan); make fuzz FUZZ_SECONDS=600 FUZZ_TARGET=squad
FUZZ_SECONDS ?= 60
fuzz: deps
	bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS) $(if $(FUZZ_TARGET),--target $(FUZZ_TARGET))

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
