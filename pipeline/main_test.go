package pipeline_test

import (
	"os"
	"runtime/debug"
	"testing"
)

// testMemoryLimit is the soft limit on the test process's Go memory when
// GOMEMLIMIT does not set one, as the Makefile's TEST_MEMLIMIT does for
// make test. Without it the garbage of the simulator tests (jobs of up to
// 128M elements) outgrows any machine a plain `go test ./...` runs on:
// `go test ./pipeline` passed 21.6 GB of resident memory in 99 s, and was
// stopped there, on a 24 GiB machine; with this limit it peaked at 6.4 GB
// and passed in 106 s (2026-12-01).
const testMemoryLimit = 6 << 30

func TestMain(m *testing.M) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(testMemoryLimit)
	}
	os.Exit(m.Run())
}
