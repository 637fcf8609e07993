# overlap: make test is what CI runs. Only Go is needed.
GO       ?= go
PKGS     := loader driver ptx pipeline bench
GPU_DIR  := .gpu

.PHONY: all build test fmt-check vet race nocgo stackmove cross gpu-bundle ptx fuzz clean

all: build

build:
	CGO_ENABLED=0 $(GO) build ./...

test: fmt-check vet race nocgo stackmove cross

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

race:
	CGO_ENABLED=1 $(GO) test -race -count=1 ./...

nocgo:
	CGO_ENABLED=0 $(GO) test -count=1 ./...

# stackmove runs the fake-driver tests (driver/fake_test.go) with every
# function call moving the goroutine stack, so that a bad pointer kept on the
# stack across a driver call crashes at once (issue 9). Like -race, it needs
# a C compiler, to build the fake driver; without one the test says so and
# skips.
stackmove:
	$(GO) test -count=1 -gcflags='all=-d=maymorestack=runtime.mayMoreStackMove' -run '^TestFakeDriver$$' ./driver

cross:
	CGO_ENABLED=0 GOOS=linux   GOARCH=amd64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=arm64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build ./...
	CGO_ENABLED=0 GOOS=linux   GOARCH=amd64 $(GO) vet ./...
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) vet ./...

# gpu-bundle cross-compiles every package's test binary and the CLI into
# .gpu/ for a linux/amd64 GPU host without Go (see shared/GPU.md).
gpu-bundle:
	mkdir -p $(GPU_DIR)
	for p in $(PKGS); do CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) test -c -o $(GPU_DIR)/$$p.test ./$$p || exit 1; done
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) test -c -o $(GPU_DIR)/cmd.test ./cmd/overlap
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -o $(GPU_DIR)/overlap ./cmd/overlap

# ptx regenerates ptx/kernels/*.ptx; it needs nvcc (the GPU machine has it).
ptx:
	sh ptx/kernels/gen.sh

# fuzz runs the PTX parser's fuzz target; FUZZTIME=10m for a long run.
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./ptx -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

clean:
	rm -rf $(GPU_DIR)
