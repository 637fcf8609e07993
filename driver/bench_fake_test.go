//go:build linux

package driver

import (
	"testing"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/internal/fakecuda"
)

// BenchmarkFake measures the binding's own host cost per hot call, with
// the driver's cost removed: it runs against the fake driver
// (internal/fakecuda) in its no-op mode, where cuLaunchKernel, the
// asynchronous copies, cuEventRecord and cuStreamWaitEvent return at once
// and cuCtxGetCurrent only reads a thread-local variable. Run it with
// `make bench-fake` (it skips otherwise); compare runs with benchstat or
// by medians of -count 10 (issue 14).
//
//   - Syscall is purego's floor: purego.SyscallN on the cached
//     cuLaunchKernel entry point with prepared arguments, on a bound
//     thread, nothing else. CallC is the same through callC, the
//     binding's own call path (ccall on linux/amd64, purego elsewhere).
//   - Launch and LaunchBound are Function.Launch and Bound.Launch of a
//     kernel without parameters, as BenchmarkLaunch on the GPU;
//     LaunchArgs is Bound.Launch with a pointer and an int32, the seed
//     kernel's shape.
//   - CopyH2D, Record and WaitEvent are Stream.CopyToDevice, Event.Record
//     and Stream.WaitEvent; each has a Bound twin. Copies are synchronised
//     every 1024 calls, with the timer stopped, to drain the stream's
//     record of host memory in use.
//
// The GPU figures minus these are the driver's own cost, which C pays too.
func BenchmarkFake(b *testing.B) {
	f := fakecuda.Benchmark(b)
	f.Reset()
	dev, err := DeviceAt(0)
	if err != nil {
		b.Fatal(err)
	}
	ctx, err := NewContext(dev)
	if err != nil {
		b.Fatal(err)
	}
	defer ctx.Close()
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s2, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	e, err := ctx.NewEvent(EventOptions{})
	if err != nil {
		b.Fatal(err)
	}
	d, err := ctx.Alloc(4096)
	if err != nil {
		b.Fatal(err)
	}
	h, err := ctx.AllocHost(4096, HostAllocOptions{})
	if err != nil {
		b.Fatal(err)
	}
	m, err := ctx.LoadModule([]byte("// any"), ModuleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	f.SetParams()
	empty, err := m.Function("empty")
	if err != nil {
		b.Fatal(err)
	}
	f.SetParams(8, 4)
	seed, err := m.Function("seed")
	if err != nil {
		b.Fatal(err)
	}
	noArgs := NewArgs()
	seedArgs := NewArgs().Pointer(d.Ptr()).Int32(1024)
	cfg := LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}
	f.Noop(true)
	defer f.Reset()

	// bound runs fn on a goroutine bound to ctx; plain runs it unbound.
	bound := func(fn func(b *testing.B, bd *Bound)) func(b *testing.B) {
		return func(b *testing.B) {
			bd, err := ctx.Bind()
			if err != nil {
				b.Fatal(err)
			}
			defer bd.Release()
			b.ReportAllocs()
			b.ResetTimer()
			fn(b, bd)
		}
	}
	// boundDirect is bound with BindOptions.DirectCalls.
	boundDirect := func(fn func(b *testing.B, bd *Bound)) func(b *testing.B) {
		return func(b *testing.B) {
			var bd Bound
			if err := ctx.BindWith(&bd, BindOptions{DirectCalls: true}); err != nil {
				b.Fatal(err)
			}
			defer bd.Release()
			b.ReportAllocs()
			b.ResetTimer()
			fn(b, &bd)
		}
	}
	plain := func(fn func(b *testing.B)) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			fn(b)
		}
	}
	copies := func(b *testing.B, bd *Bound) {
		for i := 0; i < b.N; i++ {
			var err error
			if bd != nil {
				err = bd.CopyToDevice(s, d, 0, h, 0, 4096)
			} else {
				err = s.CopyToDevice(d, 0, h, 0, 4096)
			}
			if err != nil {
				b.Fatal(err)
			}
			if i%1024 == 1023 {
				b.StopTimer()
				if err := s.Synchronize(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		}
	}

	b.Run("Syscall", bound(func(b *testing.B, bd *Bound) {
		p, args := rawLaunchArgs(b, empty, s)
		for i := 0; i < b.N; i++ {
			if r, _, _ := purego.SyscallN(p, args[:]...); r != 0 {
				b.Fatal(Result(int32(r)))
			}
		}
	}))
	b.Run("CallC", bound(func(b *testing.B, bd *Bound) {
		p, args := rawLaunchArgs(b, empty, s)
		sc := &scratch{args: *args}
		for i := 0; i < b.N; i++ {
			if r := callC(p, sc, 11); int32(r) != 0 {
				b.Fatal(Result(int32(r)))
			}
		}
	}))
	b.Run("CallCDirect", bound(func(b *testing.B, bd *Bound) {
		if !haveDirectCalls {
			b.Skip("skipping: no call path without runtime.cgocall on this platform")
		}
		p, args := rawLaunchArgs(b, empty, s)
		sc := &scratch{args: *args}
		for i := 0; i < b.N; i++ {
			if r := callCDirect(p, sc); int32(r) != 0 {
				b.Fatal(Result(int32(r)))
			}
		}
	}))
	b.Run("Launch", plain(func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := empty.Launch(s, cfg, noArgs); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("LaunchBound", bound(func(b *testing.B, bd *Bound) {
		for i := 0; i < b.N; i++ {
			if err := bd.Launch(empty, s, cfg, noArgs); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("LaunchBoundDirect", boundDirect(func(b *testing.B, bd *Bound) {
		for i := 0; i < b.N; i++ {
			if err := bd.Launch(empty, s, cfg, noArgs); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("LaunchArgs", bound(func(b *testing.B, bd *Bound) {
		for i := 0; i < b.N; i++ {
			if err := bd.Launch(seed, s, cfg, seedArgs); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("CopyH2D", plain(func(b *testing.B) { copies(b, nil) }))
	b.Run("CopyH2DBound", bound(copies))
	b.Run("CopyH2DBoundDirect", boundDirect(copies))
	b.Run("Record", plain(func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := e.Record(s); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("RecordBound", bound(func(b *testing.B, bd *Bound) {
		for i := 0; i < b.N; i++ {
			if err := bd.Record(e, s); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("WaitEvent", plain(func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := s2.WaitEvent(e); err != nil {
				b.Fatal(err)
			}
		}
	}))
	b.Run("WaitEventBound", bound(func(b *testing.B, bd *Bound) {
		for i := 0; i < b.N; i++ {
			if err := bd.WaitEvent(s2, e); err != nil {
				b.Fatal(err)
			}
		}
	}))
	f.Noop(false)
	if err := ctx.Synchronize(); err != nil {
		b.Fatal(err)
	}
	f.Clean(b)
}
