package bench

import (
	"errors"
	"testing"

	"github.com/purecuda/overlap/internal/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBytes: a byte count in the largest unit it fills.
func TestBytes(t *testing.T) {
	for _, c := range []struct {
		b    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {3 << 19, "1.5 MiB"}, {5 << 30, "5.0 GiB"}} {
		assert.Equal(t, c.want, Bytes(c.b), "%d", c.b)
	}
}

// TestCheckHostMemory: more than the host has available is a
// *MemoryError that says what needs how much; what fits is no error.
func TestCheckHostMemory(t *testing.T) {
	avail, ok := procfs.AvailableMemory()
	if !ok {
		t.Skip("skipping: this OS does not say how much memory is available")
	}
	assert.NoError(t, CheckHostMemory(1<<20, "a small job"))
	err := CheckHostMemory(2*avail, "the job's 2 arrays")
	var me *MemoryError
	require.True(t, errors.As(err, &me), "%v", err)
	assert.Equal(t, "the job's 2 arrays", me.What)
	assert.Equal(t, 2*avail, me.Need)
	assert.Positive(t, me.Available)
	assert.Contains(t, err.Error(), "bench: CheckHostMemory: the job's 2 arrays need "+Bytes(2*avail)+" of host memory, more than the ")
}
