package pipeline

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParallelCopy(t *testing.T) {
	for _, n := range []int{0, 1, copyYieldBytes - 1, copyYieldBytes, copyYieldBytes + 1, 255 << 10, 256 << 10, 1<<20 + 3, 9<<20 + 17} {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*31 + 7)
		}
		dst := make([]byte, n)
		parallelCopy(dst, src)
		assert.True(t, bytes.Equal(src, dst), "n=%d", n)
	}
}
