//go:build !windows

package main

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoppedByWithoutAnError: a command whose work returned no error
// after a signal ended its context exits as stopped (the trial's bench
// small-jobs, whose last step checks every element without looking at
// the context, printed its table and exited 0 after SIGTERM); a context
// that stop ended, or none, changes nothing.
func TestStoppedByWithoutAnError(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&signalError{sig: syscall.SIGTERM})
	err := stoppedBy(ctx, nil)
	var se *signalError
	require.True(t, errors.As(err, &se), "got %v", err)
	assert.Equal(t, 143, se.exitCode())
	var stderr bytes.Buffer
	assert.Equal(t, 143, reportError("bench small-jobs", err, &stderr))
	assert.Equal(t, "overlap bench small-jobs: terminated (SIGTERM)\n", stderr.String())

	stopped, stop := context.WithCancelCause(context.Background())
	stop(nil) // what signalContext's stop does
	assert.NoError(t, stoppedBy(stopped, nil))
	assert.NoError(t, stoppedBy(context.Background(), nil))
}

// TestAtGraceExitRunsOnce: the command's own call of a cleanup runs it
// once however often it is made, and unregisters it, so that the grace
// exit does not run it again (that exit is tested in a child process, by
// TestSignals' "work that does not stop").
func TestAtGraceExitRunsOnce(t *testing.T) {
	runs := 0
	run := atGraceExit(func() { runs++ })
	run()
	run()
	assert.Equal(t, 1, runs)
	graceCleanups.Lock()
	defer graceCleanups.Unlock()
	assert.Empty(t, graceCleanups.fns, "unregistered")
}

// TestSignalContextStopEndsTheGrace: a command that returns within its
// grace after a signal, and calls stop, is not ended by the grace: this
// process (the test itself) takes the signal, stops in time, and lives on
// well past the grace. Were stop to leave the grace running, the test
// binary would exit with 143 here.
func TestSignalContextStopEndsTheGrace(t *testing.T) {
	defer func(g time.Duration) { drainGrace = g }(drainGrace)
	drainGrace = 100 * time.Millisecond
	var stderr bytes.Buffer
	ctx, stop := signalContext("run", &stderr)
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGTERM))
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the signal did not end the context")
	}
	var se *signalError
	require.True(t, errors.As(context.Cause(ctx), &se))
	assert.Equal(t, 143, se.exitCode())
	stop()
	stop() // idempotent
	time.Sleep(5 * drainGrace)
	assert.Empty(t, stderr.String(), "the grace said nothing")
}

// TestLimitHeapToAvailable: the soft memory limit is 90% of what the
// host has available, and at least 1 GiB; limitHeapToAvailable sets it
// where the host says and GOMEMLIMIT does not.
func TestLimitHeapToAvailable(t *testing.T) {
	assert.Equal(t, int64(9<<30), memoryLimitFor(10<<30))
	assert.Equal(t, int64(1<<30), memoryLimitFor(94<<20), "a floor: a cgroup's page cache counts as used")
	if _, ok := availableMemory(); !ok || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("skipping the call: no available memory known, or GOMEMLIMIT set")
	}
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	debug.SetMemoryLimit(math.MaxInt64)
	limitHeapToAvailable()
	assert.Less(t, debug.SetMemoryLimit(-1), int64(math.MaxInt64), "a limit was set")
}
