//go:build linux

package driver

import (
	"os"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// BenchmarkLaunchLoopInC and BenchmarkLaunchLoopInCBatch run
// bench/reference/cloops.c's loop of empty-kernel launches inside this Go
// process, entered once; BenchmarkCopyLoopInCH2D and ...D2H its loop of 64
// MiB pinned copies, each followed by a synchronisation. Beside
// BenchmarkLaunchRawC and BenchmarkCopy*Raw (a transition from Go for each
// call) and dlopen.c (the same loops in a C process) they tell whether a
// call from Go costs more for the transition or for the process it runs in
// (issue 14). Those that call into cloops.c need it built as a shared
// library and named by OVERLAP_CLOOPS, and skip without it.
func BenchmarkLaunchLoopInC(b *testing.B)      { benchLaunchLoop(b, 0) }
func BenchmarkLaunchLoopInCBatch(b *testing.B) { benchLaunchLoop(b, launchBatch) }
func BenchmarkCopyLoopInCH2D(b *testing.B)     { benchCopyLoop(b, true, copyLoop) }
func BenchmarkCopyLoopInCD2H(b *testing.B)     { benchCopyLoop(b, false, copyLoop) }

// BenchmarkCopyOnceInCH2D calls cloops.c's copy_sync_once from a Go loop:
// one transition from Go per copy and synchronisation, where
// BenchmarkCopyH2DRaw makes two. BenchmarkCopyPollH2D copies as
// BenchmarkCopyH2DRaw does and waits by polling cuStreamQuery from Go:
// many short calls instead of one that lasts the copy.
func BenchmarkCopyOnceInCH2D(b *testing.B) { benchCopyLoop(b, true, copyOnce) }
func BenchmarkCopyPollH2D(b *testing.B)    { benchCopyLoop(b, true, copyPoll) }

// More of the bisection, each a copy from Go and a wait: BenchmarkCopyTwoCallsH2D
// calls cuStreamSynchronize from Go (BenchmarkCopyH2DRaw in this harness);
// BenchmarkCopySyncViaCH2D calls it through cloops.c's sync_call, from a C
// frame; BenchmarkCopyQuerySyncH2D makes one cuStreamQuery first;
// BenchmarkCopyGapSyncH2D spins 20 µs in Go first.
func BenchmarkCopyTwoCallsH2D(b *testing.B)  { benchCopyLoop(b, true, copyTwoCalls) }
func BenchmarkCopySyncViaCH2D(b *testing.B)  { benchCopyLoop(b, true, copySyncViaC) }
func BenchmarkCopyQuerySyncH2D(b *testing.B) { benchCopyLoop(b, true, copyQuerySync) }
func BenchmarkCopyGapSyncH2D(b *testing.B)   { benchCopyLoop(b, true, copyGapSync) }

// cloop finds cloops.c's function name in the library OVERLAP_CLOOPS names.
func cloop(b *testing.B, name string) uintptr {
	b.Helper()
	path := os.Getenv("OVERLAP_CLOOPS")
	if path == "" {
		b.Skip("skipping: OVERLAP_CLOOPS names no cloops.so (bench/reference/cloops.c says how to build it)")
	}
	lib, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		b.Fatalf("dlopen %s: %v", path, err)
	}
	p, err := purego.Dlsym(lib, name)
	if err != nil {
		b.Fatalf("dlsym %s: %v", name, err)
	}
	return p
}

// loopResult fails b on a loop's negative result (minus a CUresult of sym).
func loopResult(b *testing.B, r uintptr, sym symID) int64 {
	b.Helper()
	ns := int64(r)
	if ns < 0 {
		b.Fatal(newError(sym, Result(int32(-ns))))
	}
	return ns
}

func benchLaunchLoop(b *testing.B, batch int) {
	loop := cloop(b, "launch_loop")
	ctx := requireGPU(b)
	f, s := launchRig(b, ctx)
	launch, sync := mustProc(b, symLaunchKernel), mustProc(b, symStreamSynchronize)
	bd, err := ctx.Bind() // the context current on this thread, as the loop needs
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Release()
	run := func(n, batch int) int64 {
		r, _, _ := purego.SyscallN(loop, launch, sync, f.handle, s.Handle(), uintptr(n), uintptr(batch))
		return loopResult(b, r, symLaunchKernel)
	}
	run(1000, 0) // warm, as benchLaunch
	b.ResetTimer()
	ns := run(b.N, batch)
	b.StopTimer()
	if batch > 0 {
		b.ReportMetric(float64(ns)/float64(b.N), "issue-ns/op")
	}
}

// How benchCopyLoop loops: all in C, a C copy and synchronisation per
// step, or a copy and polls from Go.
const (
	copyLoop = iota
	copyOnce
	copyPoll
	copyTwoCalls
	copySyncViaC
	copyQuerySync
	copyGapSync
)

func benchCopyLoop(b *testing.B, toDevice bool, how int) {
	var loop uintptr
	switch how {
	case copyLoop:
		loop = cloop(b, "copy_loop")
	case copyOnce:
		loop = cloop(b, "copy_sync_once")
	case copySyncViaC:
		loop = cloop(b, "sync_call")
	}
	ctx := requireGPU(b)
	const n = 64 << 20
	h, d, s := copyRig(b, ctx, n)
	id, dst, src := symMemcpyDtoHAsync, uintptr(unsafe.Pointer(&h.Bytes()[0])), uintptr(d.Ptr())
	if toDevice {
		id, dst, src = symMemcpyHtoDAsync, src, dst
	}
	cp, sync := mustProc(b, id), mustProc(b, symStreamSynchronize)
	bd, err := ctx.Bind()
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Release()
	query := mustProc(b, symStreamQuery)
	b.SetBytes(n)
	b.ResetTimer()
	switch how {
	case copyLoop:
		r, _, _ := purego.SyscallN(loop, cp, sync, dst, src, n, s.Handle(), uintptr(b.N))
		loopResult(b, r, id)
	case copyOnce:
		for i := 0; i < b.N; i++ {
			r, _, _ := purego.SyscallN(loop, cp, sync, dst, src, n, s.Handle())
			loopResult(b, r, id)
		}
	case copyTwoCalls, copySyncViaC, copyQuerySync, copyGapSync:
		for i := 0; i < b.N; i++ {
			if r, _, _ := purego.SyscallN(cp, dst, src, n, s.Handle()); r != 0 {
				b.Fatal(newError(id, Result(int32(r))))
			}
			switch how {
			case copyQuerySync:
				purego.SyscallN(query, s.Handle())
			case copyGapSync:
				for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
				}
			}
			var r uintptr
			if how == copySyncViaC {
				r, _, _ = purego.SyscallN(loop, sync, s.Handle())
				loopResult(b, r, symStreamSynchronize)
			} else if r, _, _ = purego.SyscallN(sync, s.Handle()); r != 0 {
				b.Fatal(newError(symStreamSynchronize, Result(int32(r))))
			}
		}
	case copyPoll:
		for i := 0; i < b.N; i++ {
			if r, _, _ := purego.SyscallN(cp, dst, src, n, s.Handle()); r != 0 {
				b.Fatal(newError(id, Result(int32(r))))
			}
			for {
				r, _, _ := purego.SyscallN(query, s.Handle())
				if Result(int32(r)) == ErrNotReady {
					continue
				}
				if r != 0 {
					b.Fatal(newError(symStreamQuery, Result(int32(r))))
				}
				break
			}
		}
	}
	b.StopTimer()
}

func mustProc(b *testing.B, s symID) uintptr {
	b.Helper()
	p, err := proc(s)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkLaunchPaired settles launch against C in one process (issue
// 14): it alternates blocks of empty-kernel launches made by cloops.c's
// launch_loop (C calling the driver API, entered once per block) with
// blocks of the same launches made four ways in Go: through Bound.Launch
// (go); through a bare callC (cgocall: runtime.cgocall and the
// trampoline, no binding); through a bare callCDirect (direct: the
// trampoline on the system stack without the scheduler's system-call
// bookkeeping); and through Bound.Launch of a Bound bound with
// BindOptions.DirectCalls (godirect). All on one stream, so that the
// host's drift from run to run, which is larger than the differences
// sought, falls on all alike. Back to back, each block ends with a stream
// synchronisation; it reports each way's ns per launch and go/c and
// godirect/c, the ratios of the totals; then the same from an empty queue
// (batches of 128 with a synchronisation between them, only the launches
// timed) as *-issue-ns, go/c-issue and godirect/c-issue. It needs
// OVERLAP_CLOOPS.
func BenchmarkLaunchPaired(b *testing.B) {
	loop := cloop(b, "launch_loop")
	ctx := requireGPU(b)
	r := newDirectLaunch(b, ctx)
	defer r.direct.Release()
	f, s, direct, args, cfg, p, sc := r.f, r.s, &r.direct, r.args, r.cfg, r.p, r.sc
	launch, sync := mustProc(b, symLaunchKernel), mustProc(b, symStreamSynchronize)
	bd, err := ctx.Bind() // the same thread, bound again, without direct calls
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Release()
	inC := func(n, batch int) int64 {
		r, _, _ := purego.SyscallN(loop, launch, sync, f.handle, s.Handle(), uintptr(n), uintptr(batch))
		return loopResult(b, r, symLaunchKernel)
	}
	// inGo times n launches by one, as launch_loop times its own.
	inGo := func(one func() error) func(n, batch int) int64 {
		return func(n, batch int) int64 {
			var ns int64
			for done := 0; done < n; {
				k := n - done
				if batch > 0 {
					k = min(batch, k)
				}
				t0 := time.Now()
				for i := 0; i < k; i++ {
					if err := one(); err != nil {
						b.Fatal(err)
					}
				}
				if batch == 0 {
					if err := bd.Synchronize(s); err != nil {
						b.Fatal(err)
					}
				}
				ns += time.Since(t0).Nanoseconds()
				if batch > 0 {
					if err := bd.Synchronize(s); err != nil {
						b.Fatal(err)
					}
				}
				done += k
			}
			return ns
		}
	}
	rawResult := func(r uintptr) error {
		if r := Result(int32(r)); r != 0 {
			return newError(symLaunchKernel, r)
		}
		return nil
	}
	ways := []struct {
		name string
		run  func(n, batch int) int64
	}{
		{"c", inC},
		{"go", inGo(func() error { return bd.Launch(f, s, cfg, args) })},
		{"cgocall", inGo(func() error { return rawResult(callC(p, sc, 11)) })},
	}
	if haveDirectCalls { // linux/amd64; elsewhere they would be go and cgocall again
		ways = append(ways, []struct {
			name string
			run  func(n, batch int) int64
		}{
			{"direct", inGo(func() error { return rawResult(callCDirect(p, sc)) })},
			{"godirect", inGo(func() error { return direct.Launch(f, s, cfg, args) })},
		}...)
	}
	const block = 4096
	for _, w := range ways {
		w.run(block, 0) // warm each, as benchLaunch
	}
	b.ResetTimer()
	back, issue := make([]int64, len(ways)), make([]int64, len(ways))
	for done := 0; done < b.N; done += block {
		k := min(block, b.N-done)
		for i, w := range ways {
			back[i] += w.run(k, 0)
			issue[i] += w.run(k, launchBatch)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	for i, w := range ways {
		b.ReportMetric(float64(back[i])/n, w.name+"-ns/launch")
		b.ReportMetric(float64(issue[i])/n, w.name+"-issue-ns")
	}
	b.ReportMetric(float64(back[1])/float64(back[0]), "go/c")
	b.ReportMetric(float64(issue[1])/float64(issue[0]), "go/c-issue")
	if haveDirectCalls {
		b.ReportMetric(float64(back[4])/float64(back[0]), "godirect/c")
		b.ReportMetric(float64(issue[4])/float64(issue[0]), "godirect/c-issue")
	}
}

// BenchmarkLaunchBindingCold asks why a launch through the binding costs
// 2–3 times more over C's on the GPU host than on the fake driver (issue
// 14): whether the binding's own work is slower right after a real
// launch, the driver having pushed the binding's data out of the core's
// caches. In alternating blocks it times real launches made bare
// (callCDirect, raw-ns), the same each followed by a Bound.Launch (direct
// calls) whose driver entry is cloops.c's noop_call (after-real-ns: the
// binding's work after a real launch is after-real-ns − raw-ns, reported
// as cold-ns), and Bound.Launch into noop_call alone, back to back (warm-ns).
// It needs OVERLAP_CLOOPS.
func BenchmarkLaunchBindingCold(b *testing.B) {
	noop := cloop(b, "noop_call")
	r := newDirectLaunch(b, requireGPU(b))
	defer r.direct.Release()
	f, s, bd, args, cfg, real, sc := r.f, r.s, &r.direct, r.args, r.cfg, r.p, r.sc
	slot := &procs[symLaunchKernel]
	rawLaunch := func() {
		if r := Result(int32(callCDirect(real, sc))); r != 0 {
			b.Fatal(newError(symLaunchKernel, r))
		}
	}
	boundNoop := func() {
		slot.Store(noop)
		err := bd.Launch(f, s, cfg, args)
		slot.Store(real)
		if err != nil {
			b.Fatal(err)
		}
	}
	block := func(k int, one func()) int64 {
		t0 := time.Now()
		for i := 0; i < k; i++ {
			one()
		}
		ns := time.Since(t0).Nanoseconds()
		if err := bd.Synchronize(s); err != nil {
			b.Fatal(err)
		}
		return ns
	}
	ways := []func(){rawLaunch, func() { rawLaunch(); boundNoop() }, boundNoop}
	const size = 1024
	for _, w := range ways {
		block(size, w)
	}
	b.ResetTimer()
	var t [3]int64
	for done := 0; done < b.N; done += size {
		k := min(size, b.N-done)
		for i, w := range ways {
			t[i] += block(k, w)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(t[0])/n, "raw-ns")
	b.ReportMetric(float64(t[1])/n, "after-real-ns")
	b.ReportMetric(float64(t[1]-t[0])/n, "cold-ns")
	b.ReportMetric(float64(t[2])/n, "warm-ns")
}

// directLaunch is what the launch pairings share: the empty kernel on a
// stream, a Bound bound with direct calls on the calling goroutine (the
// caller defers its Release, on that goroutine), empty arguments for one
// thread, and the bare launch's entry point and scratch.
type directLaunch struct {
	f      *Function
	s      *Stream
	direct Bound
	args   *Args
	cfg    LaunchConfig
	p      uintptr
	sc     *scratch
}

func newDirectLaunch(b *testing.B, ctx *Context) *directLaunch {
	b.Helper()
	r := &directLaunch{args: NewArgs(), cfg: LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}}
	r.f, r.s = launchRig(b, ctx)
	p, raw := rawLaunchArgs(b, r.f, r.s)
	r.p, r.sc = p, &scratch{args: *raw}
	if err := ctx.BindWith(&r.direct, BindOptions{DirectCalls: true}); err != nil {
		b.Fatal(err)
	}
	return r
}
