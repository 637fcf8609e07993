package main

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunCURefusesAFIFO: a FIFO given to --cu would block the read of the
// source until a writer came; it is refused with the other flag checks.
func TestRunCURefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe.cu")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	code, _, errOut := runCLI("run", "--cu", fifo, "--entry", "k")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: --cu "+fifo+": not a regular file (a FIFO or device is not a kernel's source)\n", errOut)
}
