package gputest

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMemoryLimit is the soft limit on a test process's Go memory that
// RunWithMemoryLimit sets when GOMEMLIMIT sets none, as the Makefile's
// TEST_MEMLIMIT does for make test. Without it the garbage of the
// simulator's tests (jobs of up to 128M elements) outgrows the machine of a
// plain `go test ./...`: `go test ./pipeline` passed 21.6 GB of resident
// memory in 99 s, and was stopped there, on a 24 GiB machine; and once the
// simulator had a package of its own, its tests ran beside pipeline's and
// the kernel killed them. Under 4 GiB, `go test ./pipeline` peaked at
// 5.3 GB and passed in 63 s, `go test ./pipeline/sim` at 1.7 GB in 37 s
// (2026-12-01).
const TestMemoryLimit = 4 << 30

// RunWithMemoryLimit runs m under TestMemoryLimit unless GOMEMLIMIT is
// set, and returns its exit code: a package's TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(gputest.RunWithMemoryLimit(m)) }
func RunWithMemoryLimit(m *testing.M) int {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(TestMemoryLimit)
	}
	return m.Run()
}
