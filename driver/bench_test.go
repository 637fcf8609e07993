package driver

import (
	"testing"
	"unsafe"
)

// BenchmarkCall measures one trivial driver call (cuCtxGetCurrent) through
// the raw layer: purego.SyscallN on a cached entry point.
func BenchmarkCall(b *testing.B) {
	requireGPU(b)
	s := new(scratch)
	s.args[0] = uintptr(unsafe.Pointer(&s.out[0]))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := callScratch(symCtxGetCurrent, s, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamQuery measures a hot public call: Stream.Done, which also
// checks the current context.
func BenchmarkStreamQuery(b *testing.B) {
	ctx := requireGPU(b)
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Done(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLaunch measures the host cost of launching an empty kernel
// through Function.Launch, the way bench/reference/launch.cu measures
// cuLaunchKernel from C: b.N launches on one stream, then one
// synchronisation, divided by b.N. Use -benchtime=200000x to match it.
func BenchmarkLaunch(b *testing.B) { benchLaunch(b, false) }

// BenchmarkLaunchBound is BenchmarkLaunch through a Bound, which skips the
// per-call context check as the pipeline's issue loop does.
func BenchmarkLaunchBound(b *testing.B) { benchLaunch(b, true) }

func benchLaunch(b *testing.B, bind bool) {
	ctx := requireGPU(b)
	m := loadTestKernels(b, ctx)
	defer m.Close()
	f, err := m.Function("empty")
	if err != nil {
		b.Fatal(err)
	}
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	args := NewArgs()
	cfg := LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}
	bd, err := ctx.Bind()
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Release()
	launch := f.Launch
	if bind {
		launch = func(s *Stream, cfg LaunchConfig, args *Args) error { return bd.Launch(f, s, cfg, args) }
	}
	for i := 0; i < 1000; i++ {
		_ = launch(s, cfg, args)
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := launch(s, cfg, args); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
}

func benchCopy(b *testing.B, toDevice bool) {
	ctx := requireGPU(b)
	const n = 64 << 20
	h, err := ctx.AllocHost(n, HostAllocOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	d, err := ctx.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if toDevice {
			err = s.CopyToDevice(d, 0, h, 0, n)
		} else {
			err = s.CopyToHost(h, 0, d, 0, n)
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopyH2D measures pinned host-to-device bandwidth, 64 MiB copies.
func BenchmarkCopyH2D(b *testing.B) { benchCopy(b, true) }

// BenchmarkCopyD2H measures pinned device-to-host bandwidth, 64 MiB copies.
func BenchmarkCopyD2H(b *testing.B) { benchCopy(b, false) }
