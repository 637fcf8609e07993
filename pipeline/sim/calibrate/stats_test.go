package calibrate

import (
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
)

// TestMedian: the middle value, or the mean of the two middle ones, of
// values in any order, which it leaves in place.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{7}, 7}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{0.1, 0.2}, 0.15000000000000002}} {
		in := append([]float64(nil), c.xs...)
		assert.Equal(t, c.want, median(c.xs), "%v", c.xs)
		assert.Equal(t, in, c.xs, "left as it was")
	}
	assert.Equal(t, 7*time.Millisecond, median([]time.Duration{9 * time.Millisecond, 7 * time.Millisecond, 1 * time.Millisecond}))
}

// TestTexts: sizes as the profile's notes and Config.String write them.
func TestTexts(t *testing.T) {
	for b, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 256 << 10: "256.0 KiB", 4 << 20: "4.0 MiB", 3 << 29: "1.5 GiB"} {
		assert.Equal(t, want, bytesText(b), b)
	}
	for n, want := range map[int]string{0: "0", 512: "512", 1536: "1536", 2048: "2K", 64 << 10: "64K", 16 << 20: "16M", 3<<20 + 1024: "3073K"} {
		assert.Equal(t, want, elemsText(n), n)
	}
	c := Config{Kernel: "seed", Host: pipeline.HostStaged, Chunk: 32 << 10, Slots: 2, Streams: 1}
	assert.Equal(t, "seed  staged       32K chunks 2 slots 1 streams", c.String())
}
