package nvrtc

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompileKernelFileRefusesAFIFO: opening a FIFO for reading waits for a
// writer, so a --cu naming one hung before the file was checked to be a
// regular file. No library is needed: the check comes first.
func TestCompileKernelFileRefusesAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe.cu")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	_, err := CompileKernelFile(fifo, "k", Options{})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.EqualError(t, err, "nvrtc: invalid argument: "+fifo+" is not a regular file (p---------)")
}
