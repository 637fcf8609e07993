package driver

import (
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
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
// Back to back, the launch queue fills and a launch may wait for the GPU
// to free a slot: the Batch variants below measure the issue cost alone.
func BenchmarkLaunch(b *testing.B) { benchLaunch(b, launchPublic, 0) }

// BenchmarkLaunchBound is BenchmarkLaunch through a Bound, which skips the
// per-call context check as the pipeline's issue loop does.
func BenchmarkLaunchBound(b *testing.B) { benchLaunch(b, launchBound, 0) }

// BenchmarkLaunchRaw is the floor that purego gives: cuLaunchKernel
// through purego.SyscallN on the cached entry point, with prepared
// arguments, on a bound thread, and nothing else. C, raw purego and the
// binding side by side split the gap to C into purego's part and ours
// (issue 14).
func BenchmarkLaunchRaw(b *testing.B) { benchLaunch(b, launchRaw, 0) }

// BenchmarkLaunchRawC is BenchmarkLaunchRaw through callC, the binding's
// own call path (ccall on linux/amd64, purego.SyscallN elsewhere): the
// floor under Function.Launch now.
func BenchmarkLaunchRawC(b *testing.B) { benchLaunch(b, launchRawC, 0) }

// BenchmarkLaunchBatch, BenchmarkLaunchBoundBatch and BenchmarkLaunchRawBatch
// launch in batches of 128 from an empty queue (a synchronisation between
// batches), and report beside ns/op (which includes the synchronisations)
// issue-ns/op: the host time inside the launch calls alone, never slowed
// by a full queue. launch.cu prints the same as *_batch128_issue_ns.
func BenchmarkLaunchBatch(b *testing.B)      { benchLaunch(b, launchPublic, launchBatch) }
func BenchmarkLaunchBoundBatch(b *testing.B) { benchLaunch(b, launchBound, launchBatch) }
func BenchmarkLaunchRawBatch(b *testing.B)   { benchLaunch(b, launchRaw, launchBatch) }
func BenchmarkLaunchRawCBatch(b *testing.B)  { benchLaunch(b, launchRawC, launchBatch) }

const launchBatch = 128

type launchMode int

const (
	launchPublic launchMode = iota
	launchBound
	launchRaw
	launchRawC
)

// launchRig makes what the launch benchmarks launch: the test kernels'
// empty kernel, and a stream, closed when b's run ends.
func launchRig(b *testing.B, ctx *Context) (*Function, *Stream) {
	m := loadTestKernels(b, ctx)
	b.Cleanup(func() { m.Close() })
	f, err := m.Function("empty")
	if err != nil {
		b.Fatal(err)
	}
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return f, s
}

func benchLaunch(b *testing.B, mode launchMode, batch int) {
	ctx := requireGPU(b)
	f, s := launchRig(b, ctx)
	args := NewArgs()
	cfg := LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}
	bd, err := ctx.Bind()
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Release()
	var launch func() error
	switch mode {
	case launchPublic:
		launch = func() error { return f.Launch(s, cfg, args) }
	case launchBound:
		launch = func() error { return bd.Launch(f, s, cfg, args) }
	case launchRaw:
		p, a := rawLaunchArgs(b, f, s)
		launch = func() error {
			if r, _, _ := purego.SyscallN(p, a[:]...); r != 0 {
				return newError(symLaunchKernel, Result(int32(r)))
			}
			return nil
		}
	case launchRawC:
		p, a := rawLaunchArgs(b, f, s)
		sc := &scratch{args: *a}
		launch = func() error {
			if r := callC(p, sc, 11); int32(r) != 0 {
				return newError(symLaunchKernel, Result(int32(r)))
			}
			return nil
		}
	}
	for i := 0; i < 1000; i++ {
		_ = launch()
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	if batch == 0 {
		for i := 0; i < b.N; i++ {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer() // the closes after the loop are not launches (see benchCopy)
		return
	}
	var issue time.Duration
	for done := 0; done < b.N; {
		n := min(batch, b.N-done)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := launch(); err != nil {
				b.Fatal(err)
			}
		}
		issue += time.Since(t0)
		done += n
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(issue.Nanoseconds())/float64(b.N), "issue-ns/op")
}

// copyMode says how benchCopy issues and times its copies.
type copyMode struct {
	toDevice bool
	perSync  int  // copies queued per stream synchronisation
	timed    bool // events around each group: the GPU's own time
	raw      bool // purego.SyscallN on the entry points, nothing else
	wait     Wait // the context's wait mode (WaitDefault: as the driver has it)
}

// copyRig makes what the copy benchmarks copy between and on: n bytes of
// pinned host memory, as many of device memory, and a stream, closed when
// b's run ends.
func copyRig(b *testing.B, ctx *Context, n int) (*HostBuffer, *DeviceBuffer, *Stream) {
	h, err := ctx.AllocHost(n, HostAllocOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close() })
	d, err := ctx.Alloc(n)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	s, err := ctx.NewStream(StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return h, d, s
}

func benchCopy(b *testing.B, mode copyMode) {
	var ctx *Context
	if mode.wait == WaitDefault {
		ctx = requireGPU(b)
	} else {
		// The primary context takes a wait mode only when it is created.
		ctx = requireGPUWith(b, ContextOptions{Wait: mode.wait})
	}
	const n = 64 << 20
	h, d, s := copyRig(b, ctx, n)
	var err error
	var e0, e1 *Event
	if mode.timed {
		if e0, err = ctx.NewEvent(EventOptions{Timing: true}); err != nil {
			b.Fatal(err)
		}
		defer e0.Close()
		if e1, err = ctx.NewEvent(EventOptions{Timing: true}); err != nil {
			b.Fatal(err)
		}
		defer e1.Close()
	}
	issue := func() error {
		if mode.toDevice {
			return s.CopyToDevice(d, 0, h, 0, n)
		}
		return s.CopyToHost(h, 0, d, 0, n)
	}
	sync := s.Synchronize
	if mode.raw {
		bd, err := ctx.Bind()
		if err != nil {
			b.Fatal(err)
		}
		defer bd.Release()
		id := symMemcpyDtoHAsync
		ca := &[4]uintptr{uintptr(unsafe.Pointer(&h.Bytes()[0])), uintptr(d.Ptr()), n, s.Handle()}
		if mode.toDevice {
			id = symMemcpyHtoDAsync
			ca[0], ca[1] = ca[1], ca[0]
		}
		cp, err := proc(id)
		if err != nil {
			b.Fatal(err)
		}
		sp, err := proc(symStreamSynchronize)
		if err != nil {
			b.Fatal(err)
		}
		sa := &[1]uintptr{s.Handle()}
		issue = func() error {
			if r, _, _ := purego.SyscallN(cp, ca[:]...); r != 0 {
				return newError(id, Result(int32(r)))
			}
			return nil
		}
		sync = func() error {
			if r, _, _ := purego.SyscallN(sp, sa[:]...); r != 0 {
				return newError(symStreamSynchronize, Result(int32(r)))
			}
			return nil
		}
	}
	per := max(mode.perSync, 1)
	b.SetBytes(n)
	b.ReportAllocs()
	b.ResetTimer()
	var gpu time.Duration
	for done := 0; done < b.N; {
		k := min(per, b.N-done)
		if mode.timed {
			if err := e0.Record(s); err != nil {
				b.Fatal(err)
			}
		}
		for i := 0; i < k; i++ {
			if err := issue(); err != nil {
				b.Fatal(err)
			}
		}
		if mode.timed {
			if err := e1.Record(s); err != nil {
				b.Fatal(err)
			}
		}
		if err := sync(); err != nil {
			b.Fatal(err)
		}
		if mode.timed {
			t, err := e0.Elapsed(e1)
			if err != nil {
				b.Fatal(err)
			}
			gpu += t
		}
		done += k
	}
	// The closes after the loop (deferred, and copyRig's cleanups) are not
	// copies: freeing 64 MiB of pinned memory takes milliseconds, which
	// counted in the time made the copies look 4% slower than C's on the
	// H200 (2026-11-30, bench/RESULTS.md).
	b.StopTimer()
	if mode.timed && gpu > 0 {
		b.ReportMetric(float64(n)*float64(b.N)/gpu.Seconds()/1e6, "gpu-MB/s")
	}
}

// BenchmarkCopyH2D measures pinned host-to-device bandwidth, 64 MiB copies,
// each followed by a stream synchronisation (launch.cu: h2d_GBps).
func BenchmarkCopyH2D(b *testing.B) { benchCopy(b, copyMode{toDevice: true}) }

// BenchmarkCopyD2H measures pinned device-to-host bandwidth, 64 MiB copies.
func BenchmarkCopyD2H(b *testing.B) { benchCopy(b, copyMode{}) }

// BenchmarkCopyH2DTimed and BenchmarkCopyD2HTimed are BenchmarkCopyH2D and
// BenchmarkCopyD2H with timing events recorded around each copy, and report
// the GPU's own rate (gpu-MB/s) beside the wall-clock one (MB/s): equal GPU
// rates and unequal wall rates put a gap to C in the host's wake-up, not
// in the DMA (issue 14; launch.cu: h2d_timed_gpu_GBps).
func BenchmarkCopyH2DTimed(b *testing.B) { benchCopy(b, copyMode{toDevice: true, timed: true}) }
func BenchmarkCopyD2HTimed(b *testing.B) { benchCopy(b, copyMode{timed: true}) }

// BenchmarkCopyH2DTimedWait is BenchmarkCopyH2DTimed on a context that
// waits by spinning, yielding or blocking: whether the host's part of a
// copy's time depends on how cuStreamSynchronize waits.
func BenchmarkCopyH2DTimedWait(b *testing.B) {
	for _, w := range []Wait{WaitSpin, WaitYield, WaitBlock} {
		b.Run(w.String(), func(b *testing.B) { benchCopy(b, copyMode{toDevice: true, timed: true, wait: w}) })
	}
}

// BenchmarkCopyH2DBatch4 and BenchmarkCopyD2HBatch4 queue four copies per
// synchronisation, with events around them: a wake-up cost is paid once
// per four copies (launch.cu: h2d_batch4_*).
func BenchmarkCopyH2DBatch4(b *testing.B) {
	benchCopy(b, copyMode{toDevice: true, perSync: 4, timed: true})
}
func BenchmarkCopyD2HBatch4(b *testing.B) { benchCopy(b, copyMode{perSync: 4, timed: true}) }

// BenchmarkCopyH2DRaw and BenchmarkCopyD2HRaw issue and synchronise through
// purego.SyscallN on the entry points, on a bound thread, and nothing else:
// the binding's part of a copy's gap to C (launch.cu: h2d_drv_GBps).
func BenchmarkCopyH2DRaw(b *testing.B) { benchCopy(b, copyMode{toDevice: true, raw: true}) }
func BenchmarkCopyD2HRaw(b *testing.B) { benchCopy(b, copyMode{raw: true}) }

// rawParams is the kernelParams array of the raw launches: a package
// variable, so that it never moves. An empty kernel reads none of it.
var rawParams [1]unsafe.Pointer

// rawLaunchArgs returns the cached cuLaunchKernel entry point and its
// eleven arguments for a one-thread launch of fn, which takes no
// parameters, on s: what the raw benchmarks pass to purego.SyscallN
// directly. The caller has fn's context current on a locked thread.
func rawLaunchArgs(b *testing.B, fn *Function, s *Stream) (uintptr, *[11]uintptr) {
	b.Helper()
	p, err := proc(symLaunchKernel)
	if err != nil {
		b.Fatal(err)
	}
	args := &[11]uintptr{fn.handle, 1, 1, 1, 1, 1, 1, 0, s.Handle(), uintptr(unsafe.Pointer(&rawParams[0])), 0}
	return p, args
}
