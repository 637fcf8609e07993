package bench

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckStreamFIFOInAndOut: a FIFO named as the input and the output
// is refused, as overlap stream refused it before its checks moved here
// (pipeline.SameFile, which never calls a pipe the same file, let it by,
// and the run would read and write one pipe).
func TestCheckStreamFIFOInAndOut(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ff")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	err := CheckStream(StreamOptions{Inputs: []string{fifo}, Output: fifo}, true)
	assert.EqualError(t, err, "Output "+fifo+" is the input "+fifo+" (the same file): writing it would destroy the input as it is read")
}
