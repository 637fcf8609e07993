# overlap: make test is what CI runs. It needs Go, and for the race
# detector (make race) a C compiler as well: -race needs cgo. Where no
# working C compiler is found, the race run is skipped with a message; CI
# has one.
GO       ?= go
PKGS     := loader driver ptx ptx/kernels pipeline model bench nvrtc cublas
GPU_DIR  := .gpu
# The test processes keep their Go heap under TEST_MEMLIMIT. Without a
# limit, the garbage of package pipeline's simulator tests (jobs of up to
# 128M elements) grew its test process to 21-24 GiB, and the OOM killer
# ended one run on a 23 GiB machine; under 6 GiB it peaked at 6 GiB and
# ran in half the time (2026-11-30).
TEST_MEMLIMIT ?= 6GiB

.PHONY: generate-check beam all build cli test fmt-check vet staticcheck race nocgo stackmove directcalls cross gpu-bundle ptx fuzz bench-fake clean

all: build

build:
	CGO_ENABLED=0 $(GO) build ./...

# VERSION_LDFLAGS stamp the commit that `overlap version` names. The go
# command records it itself only when it builds in a git checkout's main
# working tree: not in a git worktree, not under go run, not with
# -buildvcs=false. The binary prefers the go command's record where
# there is one.
VCS_REV  = $(shell git rev-parse HEAD 2>/dev/null)
VCS_TIME = $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
VCS_MOD  = $(shell if [ -n "$$(git status --porcelain 2>/dev/null)" ]; then echo true; else echo false; fi)
VERSION_LDFLAGS = $(if $(VCS_REV),-X main.vcsRevision=$(VCS_REV) -X main.vcsTime=$(VCS_TIME) -X main.vcsModified=$(VCS_MOD))

# cli builds the command, cgo-free, into $(BIN).
BIN ?= overlap
cli:
	CGO_ENABLED=0 $(GO) build -ldflags '$(VERSION_LDFLAGS)' -o $(BIN) ./cmd/overlap

test: generate-check fmt-check vet staticcheck race nocgo stackmove directcalls cross beam

# generate-check fails when driver's generated files (zcalls.go, zsymbols.go,
# the fake's zexports.h) are stale against driver/prototypes.go.
generate-check:
	$(GO) run ./driver/internal/mkdriver -dir driver -check

# beam runs the Beam module's checks (beam/Makefile: gofmt, vet, its tests on
# prism and the direct runner with the simulator). It is a module of its own,
# so that the core module's dependencies stay purego and testify.
beam:
	$(MAKE) -C beam test

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO_CC) $(GO) vet ./...

CC ?= cc
# CC_OK is a C compiler that compiles a trivial program: $(CC) where it
# was set (make test CC=clang), else the first of cc, gcc and clang that
# does. Empty where none does, and the race runs are skipped; `command
# -v` is not enough (make test CC=false found /bin/false and then failed).
# The go commands below get it as CC, so that cgo and the fake driver's
# build use a compiler that works.
CC_TRY = printf 'int main(void) { return 0; }\n' | $(1) -x c -o /dev/null - >/dev/null 2>&1 && echo yes
ifeq ($(origin CC),default)
CC_OK  := $(firstword $(foreach c,cc gcc clang,$(if $(shell $(call CC_TRY,$(c))),$(c))))
CC_WHY := no C compiler (cc, gcc or clang) can compile a C program
else
CC_OK  := $(if $(shell $(call CC_TRY,$(CC))),$(CC))
CC_WHY := CC=$(CC) cannot compile a C program
endif
# GO_CC is the C compiler setting of the go commands that cgo need not
# serve: the working compiler, or cgo off where there is none.
GO_CC = $(if $(CC_OK),CC='$(CC_OK)',CC= CGO_ENABLED=0)

# staticcheck runs where it is installed
# (go install honnef.co/go/tools/cmd/staticcheck@latest) and says so where not.
staticcheck:
	@if command -v staticcheck >/dev/null 2>&1; then echo staticcheck ./...; $(GO_CC) staticcheck ./...; \
	else echo "make staticcheck: SKIPPED: staticcheck is not installed"; fi

race:
ifeq ($(CC_OK),)
	@echo "make race: SKIPPED: the race detector needs cgo, and $(CC_WHY); the cgo-free tests still run"
else
	GOMEMLIMIT=$(TEST_MEMLIMIT) CC='$(CC_OK)' CGO_ENABLED=1 $(GO) test -race -count=1 ./...
endif

nocgo:
	GOMEMLIMIT=$(TEST_MEMLIMIT) CC='$(CC_OK)' CGO_ENABLED=0 $(GO) test -count=1 ./...

# stackmove runs the fake-driver tests (driver/fake_test.go) with every
# function call moving the goroutine stack, so that a bad pointer kept on the
# stack across a driver call crashes at once (issue 9). Like -race, it needs
# a C compiler, to build the fake driver; without one the test says so and
# skips.
stackmove:
	$(GO_CC) $(GO) test -count=1 -gcflags='all=-d=maymorestack=runtime.mayMoreStackMove' -run '^TestFakeDriver$$' ./driver

# directcalls builds with the overlap_directcalls tag, which turns on the
# direct call path of driver.BindOptions.DirectCalls on linux/amd64, vets
# it, and runs the fake-driver tests that exercise it, with and without
# the race detector (like make race, the latter only where a C compiler
# is found).
DIRECT_TESTS := TestFakeDriver|OnFakeDriver|TestSmallJobsFlags
directcalls:
	$(GO_CC) $(GO) vet -tags overlap_directcalls ./...
	CC='$(CC_OK)' CGO_ENABLED=0 $(GO) test -tags overlap_directcalls -count=1 -run '$(DIRECT_TESTS)' ./driver ./pipeline ./cmd/overlap
ifeq ($(CC_OK),)
	@echo "make directcalls: race run SKIPPED: the race detector needs cgo, and $(CC_WHY)"
else
	CC='$(CC_OK)' CGO_ENABLED=1 $(GO) test -race -tags overlap_directcalls -count=1 -run 'TestFakeDriver/DirectCalls|TestDirectCallsOnFakeDriver' ./driver ./pipeline
endif

# FreeBSD builds, with the flag that purego asks of a cgo-free build there
# (its fakecgo package compiled with -std); NVIDIA ships no CUDA driver for
# FreeBSD, so there the loader says the system is not supported and
# overlap run uses the simulator.
FREEBSD_GCFLAGS := -gcflags=github.com/ebitengine/purego/internal/fakecgo=-std
cross:
	CGO_ENABLED=0 GOOS=linux   GOARCH=amd64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=arm64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=386   $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=amd64 $(GO) vet ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) vet ./...
	CGO_ENABLED=0 GOOS=freebsd GOARCH=amd64 $(GO) build $(FREEBSD_GCFLAGS) ./...
	CGO_ENABLED=0 GOOS=freebsd GOARCH=amd64 $(GO) vet $(FREEBSD_GCFLAGS) ./...

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
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -tags '$(TAGS)' -ldflags '$(VERSION_LDFLAGS)' -o $(GPU_DIR)/overlap ./cmd/overlap

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
ifeq ($(CC_OK),)
	@echo "make bench-fake: the fake driver needs a C compiler, and $(CC_WHY)"; exit 1
else
	@dir=$$(mktemp -d) && \
	$(CC_OK) -shared -fPIC -O2 -o $$dir/libcuda.so.1 internal/fakecuda/src/libcuda.c -lpthread && \
	OVERLAP_FAKECUDA_CHILD=1 OVERLAP_CUDA_LIBRARY=$$dir/libcuda.so.1 CGO_ENABLED=0 \
		$(GO) test -tags '$(TAGS)' -run '^$$' -bench 'Fake/$(BENCH)' -benchmem -count $(COUNT) ./driver ./pipeline; \
	rc=$$?; rm -rf $$dir; exit $$rc
endif

# ptx regenerates ptx/kernels/*.ptx; it needs nvcc (the GPU machine has it).
ptx:
	sh ptx/kernels/gen.sh

# fuzz runs the PTX parser's fuzz target; FUZZTIME=10m for a long run.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./ptx -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

clean:
	rm -rf $(GPU_DIR)
