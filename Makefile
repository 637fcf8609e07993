# overlap: make test is what CI runs. It needs Go, and for the race
# detector (make race) a C compiler as well: -race needs cgo. Where no C
# compiler is found, the race run is skipped with a message; CI has one.
GO       ?= go
PKGS     := loader driver ptx ptx/kernels pipeline bench
GPU_DIR  := .gpu
# The test processes keep their Go heap under TEST_MEMLIMIT. Without a
# limit, the garbage of package pipeline's simulator tests (jobs of up to
# 128M elements) grew its test process to 21-24 GiB, and the OOM killer
# ended one run on a 23 GiB machine; under 6 GiB it peaked at 6 GiB and
# ran in half the time (2026-11-30).
TEST_MEMLIMIT ?= 6GiB

.PHONY: all build test fmt-check vet staticcheck race nocgo stackmove directcalls cross gpu-bundle ptx fuzz bench-fake clean

all: build

build:
	CGO_ENABLED=0 $(GO) build ./...

test: generate-check fmt-check vet staticcheck race nocgo stackmove directcalls cross
generate-check: ; $(GO) run ./driver/internal/mkdriver -dir driver -check

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

CC ?= cc
# staticcheck runs where it is installed
# (go install honnef.co/go/tools/cmd/staticcheck@latest) and says so where not.
staticcheck:
	@if command -v staticcheck >/dev/null 2>&1; then echo staticcheck ./...; staticcheck ./...; \
	else echo "make staticcheck: SKIPPED: staticcheck is not installed"; fi

race:
	@if command -v $(CC) >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1; then \
		echo "GOMEMLIMIT=$(TEST_MEMLIMIT) CGO_ENABLED=1 $(GO) test -race -count=1 ./..."; \
		GOMEMLIMIT=$(TEST_MEMLIMIT) CGO_ENABLED=1 $(GO) test -race -count=1 ./...; \
	else \
		echo "make race: SKIPPED: the race detector needs cgo and no C compiler ($(CC), gcc or clang) was found; the cgo-free tests still run"; \
	fi

nocgo:
	GOMEMLIMIT=$(TEST_MEMLIMIT) CGO_ENABLED=0 $(GO) test -count=1 ./...

# stackmove runs the fake-driver tests (driver/fake_test.go) with every
# function call moving the goroutine stack, so that a bad pointer kept on the
# stack across a driver call crashes at once (issue 9). Like -race, it needs
# a C compiler, to build the fake driver; without one the test says so and
# skips.
stackmove:
	$(GO) test -count=1 -gcflags='all=-d=maymorestack=runtime.mayMoreStackMove' -run '^TestFakeDriver$$' ./driver

# directcalls builds with the overlap_directcalls tag, which turns on the
# direct call path of driver.BindOptions.DirectCalls on linux/amd64, vets
# it, and runs the fake-driver tests that exercise it, with and without
# the race detector (like make race, the latter only where a C compiler
# is found).
DIRECT_TESTS := TestFakeDriver|OnFakeDriver|TestSmallJobsFlags
directcalls:
	$(GO) vet -tags overlap_directcalls ./...
	CGO_ENABLED=0 $(GO) test -tags overlap_directcalls -count=1 -run '$(DIRECT_TESTS)' ./driver ./pipeline ./cmd/overlap
	@if command -v $(CC) >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 || command -v clang >/dev/null 2>&1; then \
		echo "CGO_ENABLED=1 $(GO) test -race -tags overlap_directcalls -count=1 -run 'TestFakeDriver/DirectCalls|TestDirectCallsOnFakeDriver' ./driver ./pipeline"; \
		CGO_ENABLED=1 $(GO) test -race -tags overlap_directcalls -count=1 -run 'TestFakeDriver/DirectCalls|TestDirectCallsOnFakeDriver' ./driver ./pipeline; \
	else \
		echo "make directcalls: race run SKIPPED: the race detector needs cgo and no C compiler was found"; \
	fi

cross:
	CGO_ENABLED=0 GOOS=linux   GOARCH=amd64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=arm64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=386   $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=amd64 $(GO) vet ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) vet ./...

# gpu-bundle cross-compiles every package's test binary and the CLI into
# .gpu/ for a linux/amd64 GPU host without Go. A binary is named after its
# package's path with / as _ (ptx/kernels: .gpu/ptx_kernels.test); run
# each from its package's directory, where its testdata is.
# TAGS are build tags for gpu-bundle and bench-fake, such as
# overlap_directcalls (driver.BindOptions.DirectCalls):
#   make gpu-bundle TAGS=overlap_directcalls
TAGS ?=
gpu-bundle:
	mkdir -p $(GPU_DIR)
	for p in $(PKGS); do CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) test -tags '$(TAGS)' -c -o $(GPU_DIR)/$$(echo $$p | tr / _).test ./$$p || exit 1; done
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) test -tags '$(TAGS)' -c -o $(GPU_DIR)/cmd.test ./cmd/overlap
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -tags '$(TAGS)' -o $(GPU_DIR)/overlap ./cmd/overlap

# bench-fake runs package driver's BenchmarkFake, the binding's own host
# cost per hot call (launch, copy, record, wait), and package pipeline's
# BenchmarkFakeSmallJob, the engine's own cost per small job, against the
# fake driver in its no-op mode, so that the driver's cost is removed
# (issue 14). Built without cgo, as the GPU binaries are. It needs a C
# compiler, to build the fake. BENCH picks sub-benchmarks, COUNT the
# repetitions:
#   make bench-fake BENCH=Launch COUNT=10
BENCH ?= .
COUNT ?= 10
bench-fake:
	@dir=$$(mktemp -d) && \
	cc=$$(command -v $(CC) || command -v gcc || command -v clang) && \
	$$cc -shared -fPIC -O2 -o $$dir/libcuda.so.1 internal/fakecuda/src/libcuda.c -lpthread && \
	OVERLAP_FAKECUDA_CHILD=1 OVERLAP_CUDA_LIBRARY=$$dir/libcuda.so.1 CGO_ENABLED=0 \
		$(GO) test -tags '$(TAGS)' -run '^$$' -bench 'Fake/$(BENCH)' -benchmem -count $(COUNT) ./driver ./pipeline; \
	rc=$$?; rm -rf $$dir; exit $$rc

# ptx regenerates ptx/kernels/*.ptx; it needs nvcc (the GPU machine has it).
ptx:
	sh ptx/kernels/gen.sh

# fuzz runs the PTX parser's fuzz target; FUZZTIME=10m for a long run.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./ptx -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

clean:
	rm -rf $(GPU_DIR)
