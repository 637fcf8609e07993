package procfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestField(t *testing.T) {
	f := filepath.Join(t.TempDir(), "status")
	os.WriteFile(f, []byte("Name:\tx\nVmHWM:\t    1234 kB\nVmBad:\tmany kB\nVmNeg:\t-1 kB\n"), 0o644)
	for _, tc := range []struct {
		name string
		want int64
		ok   bool
	}{{"VmHWM:", 1234 << 10, true}, {"VmRSS:", 0, false}, {"VmBad:", 0, false}, {"VmNeg:", 0, false}} {
		got, ok := Field(f, tc.name)
		assert.Equal(t, tc.want, got, tc.name)
		assert.Equal(t, tc.ok, ok, tc.name)
	}
	_, ok := Field(filepath.Join(t.TempDir(), "none"), "VmHWM:")
	assert.False(t, ok, "a missing file")
}
