//go:build !windows

package main

import (
	"bytes"
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
