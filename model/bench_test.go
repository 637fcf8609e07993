package model

import (
	"testing"

	"github.com/purecuda/overlap/ptx/kernels"
)

// BenchmarkVerify measures the reference and its tolerance on rows of the
// 768→256→16 model; the GPU host verifies 1M rows with 16 cores.
func BenchmarkVerify(b *testing.B) {
	m, err := Random([]int{768, 256, 16}, ReLU, 1)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 4096
	x := make([]float32, rows*768)
	kernels.FillPattern(x, 0)
	y, err := m.Forward32(x)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(x)) * 4)
	b.ResetTimer()
	for range b.N {
		if err := m.Verify(x, y, VerifyOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkForward32 measures the simulator's stand-in on the same model.
func BenchmarkForward32(b *testing.B) {
	m, err := Random([]int{768, 256, 16}, ReLU, 1)
	if err != nil {
		b.Fatal(err)
	}
	const rows = 4096
	x := make([]float32, rows*768)
	kernels.FillPattern(x, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := m.Forward32(x); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}
