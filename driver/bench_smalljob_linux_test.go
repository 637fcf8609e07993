//go:build linux

package driver

import (
	"math"
	"os"
	"strconv"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The small-job bisection (issue 14): one job of 4096 floats as
// bench/reference/smalljobs.cu makes it (a copy in, the seed kernel, a
// copy out, a stream synchronisation), back to back on one stream, made
// four ways inside this Go process:
//
//   - BenchmarkSmallJobLoopInC: cloops.c's job_loop, all the jobs in C,
//     entered once from Go (needs OVERLAP_CLOOPS, as the loops above);
//   - BenchmarkSmallJobRawC: the four calls from a Go loop through callC,
//     the binding's call path, and nothing else;
//   - BenchmarkSmallJobBound: through a Bound, as the pipeline's issuer
//     makes them, the wait too (Bound.Synchronize);
//   - BenchmarkSmallJobPublic: through the public methods, each checking
//     the thread's context.
//
// Beside the C++ twin in its own process (smalljobs 100 0.5 default 0 4096
// 1) they split the gap to it into the process (LoopInC), the transition
// from Go (RawC) and the binding (Bound, Public). The kernel is
// ptx/kernels/seed.ptx, JIT-compiled by the driver, or the image that
// OVERLAP_SEED_IMAGE names (a cubin from nvcc -cubin, as the C++ twin's
// kernel is compiled). OVERLAP_SMALLJOB_ELEMS sets the job's size (4096
// unless set). Each checks every element of its last job.
func BenchmarkSmallJobLoopInC(b *testing.B) { benchSmallJob(b, jobLoopInC) }
func BenchmarkSmallJobRawC(b *testing.B)    { benchSmallJob(b, jobRawC) }
func BenchmarkSmallJobBound(b *testing.B)   { benchSmallJob(b, jobBound) }
func BenchmarkSmallJobPublic(b *testing.B)  { benchSmallJob(b, jobPublic) }

const (
	jobLoopInC = iota
	jobRawC
	jobBound
	jobPublic
)

const (
	smallJobElems = 4096
	smallJobIters = 100
)

func benchSmallJob(b *testing.B, how int) {
	var loop uintptr
	if how == jobLoopInC {
		loop = cloop(b, "job_loop")
	}
	ctx := requireGPU(b)
	path := os.Getenv("OVERLAP_SEED_IMAGE")
	if path == "" {
		path = "../ptx/kernels/seed.ptx"
	}
	image, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	m, err := ctx.LoadModule(image, ModuleOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	fn, err := m.Function("seed")
	if err != nil {
		b.Fatal(err)
	}
	n := smallJobElems
	if v := os.Getenv("OVERLAP_SMALLJOB_ELEMS"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 1<<28 {
			b.Fatalf("OVERLAP_SMALLJOB_ELEMS=%q: want 1 to %d elements", v, 1<<28)
		}
	}
	bytes := 4 * n
	hin, din, s := copyRig(b, ctx, bytes)
	hout, dout, _ := copyRig(b, ctx, bytes)
	in := hin.Float32s()
	for i := range in {
		in[i] = float32(i%1000)/500 - 1
	}
	// The raw launch's kernelParams and values, in pinned memory: the
	// driver reads them during the call, and nothing there moves.
	pb, err := ctx.AllocHost(64, HostAllocOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { pb.Close() })
	pm := pb.Bytes()
	base := uintptr(unsafe.Pointer(&pm[0]))
	ptrs := (*[4]uintptr)(unsafe.Pointer(&pm[0]))
	vals := (*[4]uint64)(unsafe.Pointer(&pm[32]))
	vals[0], vals[1] = uint64(dout.Ptr()), uint64(din.Ptr())
	vals[2] = uint64(n) | uint64(smallJobIters)<<32 // n, then iters, as two 4-byte values
	ptrs[0], ptrs[1], ptrs[2], ptrs[3] = base+32, base+40, base+48, base+52

	procOf := func(id symID) uintptr { return mustProc(b, id) }
	h2d, launch, d2h, sync := procOf(symMemcpyHtoDAsync), procOf(symLaunchKernel), procOf(symMemcpyDtoHAsync), procOf(symStreamSynchronize)
	hinP, houtP := uintptr(unsafe.Pointer(&hin.Bytes()[0])), uintptr(unsafe.Pointer(&hout.Bytes()[0]))
	grid := uintptr((n + 255) / 256)
	args := NewArgs()
	args.Buffer(dout, 0).Buffer(din, 0).Uint32(uint32(n)).Int32(smallJobIters)
	cfg := GridFor(n, 256)

	bd, err := ctx.Bind()
	if err != nil {
		b.Fatal(err)
	}
	defer bd.Release()
	sc := new(scratch)
	check := func(id symID, r uintptr) {
		if r := Result(int32(r)); r != 0 {
			b.Fatal(newError(id, r))
		}
	}
	run := func(jobs int) {
		switch how {
		case jobLoopInC:
			r, _, _ := purego.SyscallN(loop, h2d, launch, d2h, sync, fn.handle, s.Handle(), uintptr(din.Ptr()), uintptr(dout.Ptr()),
				hinP, houtP, uintptr(n), smallJobIters, uintptr(jobs))
			loopResult(b, r, symLaunchKernel)
		case jobRawC:
			sh := s.Handle()
			for j := 0; j < jobs; j++ {
				sc.args[0], sc.args[1], sc.args[2], sc.args[3] = uintptr(din.Ptr()), hinP, uintptr(bytes), sh
				check(symMemcpyHtoDAsync, callC(h2d, sc, 4))
				sc.args = [11]uintptr{fn.handle, grid, 1, 1, 256, 1, 1, 0, sh, base, 0}
				check(symLaunchKernel, callC(launch, sc, 11))
				sc.args[0], sc.args[1], sc.args[2], sc.args[3] = houtP, uintptr(dout.Ptr()), uintptr(bytes), sh
				check(symMemcpyDtoHAsync, callC(d2h, sc, 4))
				sc.args[0] = sh
				check(symStreamSynchronize, callC(sync, sc, 1))
			}
		case jobBound, jobPublic:
			for j := 0; j < jobs; j++ {
				var err error
				if how == jobBound {
					err = bd.CopyToDevice(s, din, 0, hin, 0, bytes)
					if err == nil {
						err = bd.Launch(fn, s, cfg, args)
					}
					if err == nil {
						err = bd.CopyToHost(s, hout, 0, dout, 0, bytes)
					}
				} else {
					err = s.CopyToDevice(din, 0, hin, 0, bytes)
					if err == nil {
						err = fn.Launch(s, cfg, args)
					}
					if err == nil {
						err = s.CopyToHost(hout, 0, dout, 0, bytes)
					}
				}
				if err == nil && how == jobBound {
					err = bd.Synchronize(s)
				} else if err == nil {
					err = s.Synchronize()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	run(100) // warm: the JIT, the first copies
	clear(hout.Bytes())
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	// kernels.Seed's reference and tolerance, written out: package driver
	// cannot import ptx/kernels, which imports it.
	out := hout.Float32s()
	tol := 4 * (smallJobIters + 2) * 1.1920929e-7
	for i, x := range in {
		v := float64(x)*0.5 + float64(x)*float64(x)*0.1
		for k := 0; k < smallJobIters; k++ {
			v += math.Sin(v * 0.01)
		}
		if d := math.Abs(float64(out[i]) - v); !(d <= tol*max(1, math.Abs(v))) {
			b.Fatalf("element %d: got %g, want %g (tolerance %g relative)", i, out[i], v, tol)
		}
	}
}
