//go:build linux

package driver_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFakeDriver runs the binding's lifetime, cleanup, concurrency and
// error-path tests against the fake driver (internal/fakecuda), in a child
// process whose libcuda.so.1 is the fake: the real loader and call paths,
// no GPU. Most cases guard a bug of issue 9; each says which.
func TestFakeDriver(t *testing.T) {
	s := gputest.Fake(t)
	if s == nil {
		return
	}
	runFakeCases(t, s, fakeCases)
}

// runFakeCases runs each case as a subtest of the session s, which checks
// after each that the fake recorded no violation, that no driver object
// and no primary context retain is left, and that no thread is left in
// capture mode (gputest.FakeSession.Watch).
func runFakeCases(t *testing.T, s *gputest.FakeSession, cases []fakeCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.Watch(t)
			tc.run(t, s.Fake)
		})
	}
}

type fakeCase struct {
	name string
	run  func(t *testing.T, f *fakecuda.Fake)
}

// fakeKernel loads a module on c and returns its kernel "k", whose
// parameters the fake reports as 8 and 4 bytes (a pointer and an int32).
func fakeKernel(t *testing.T, f *fakecuda.Fake, c *driver.Context) *driver.Function {
	t.Helper()
	m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
	require.NoError(t, err)
	fn, err := m.Function("k")
	require.NoError(t, err)
	f.SetParams(8, 4)
	return fn
}

// collect runs the garbage collector until cleanups have had a chance to
// run, for the length of d.
func collect(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

var packageArgs driver.Args

// captureStdout runs fn and returns what it printed.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	fn()
	os.Stdout = saved
	require.NoError(t, w.Close())
	return string(<-done)
}

var fakeCases = []fakeCase{
	// The package examples run here, in CI, against the fake: the fake's
	// device memory is host memory, so the round trip is real; its kernels
	// do nothing.
	{"Examples", func(t *testing.T, f *fakecuda.Fake) {
		assert.Equal(t, "round trip: 0 1 1023\n", captureStdout(t, Example))
		assert.Equal(t, "launched fill\n", captureStdout(t, ExampleFunction_Launch))
	}},

	// Issue 14: every argument of cuLaunchKernel reaches the driver in its
	// place, through the ccall trampoline on linux/amd64 (six arguments in
	// registers, five on the stack) as through purego elsewhere: grid,
	// block and shared memory are all distinct here, the fake checks the
	// function and the stream, LastParam the parameters, and extra must be
	// NULL. Unbound and bound, each with its own shape.
	{"LaunchArgumentOrder", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
		require.NoError(t, err)
		f.SetParams(8, 4)
		fn, err := m.Function("k")
		require.NoError(t, err)
		b, err := c.Bind()
		require.NoError(t, err)
		defer b.Release()
		for _, tc := range []struct {
			cfg    driver.LaunchConfig
			bound  bool
			p0, p1 uint64
		}{
			{driver.LaunchConfig{Grid: driver.Dim3{X: 3, Y: 5, Z: 7}, Block: driver.Dim3{X: 11, Y: 13, Z: 17}, SharedMem: 19}, false, 0x1122334455667788, 0xfffffffb},
			{driver.LaunchConfig{Grid: driver.Dim3{X: 23, Y: 29, Z: 31}, Block: driver.Dim3{X: 37, Y: 41, Z: 43}, SharedMem: 47}, true, 0x8877665544332211, 53},
		} {
			args := driver.NewArgs().Uint64(tc.p0).Uint32(uint32(tc.p1))
			if tc.bound {
				require.NoError(t, b.Launch(fn, s, tc.cfg, args))
			} else {
				require.NoError(t, fn.Launch(s, tc.cfg, args))
			}
			dims, extra := f.LastLaunch()
			g, k := tc.cfg.Grid, tc.cfg.Block
			assert.Equal(t, [7]uint32{uint32(g.X), uint32(g.Y), uint32(g.Z), uint32(k.X), uint32(k.Y), uint32(k.Z), uint32(tc.cfg.SharedMem)}, dims, "bound %v", tc.bound)
			assert.Zero(t, extra, "extra")
			p0, ok := f.LastParam(0, 8)
			assert.True(t, ok)
			assert.Equal(t, binary.NativeEndian.AppendUint64(nil, tc.p0), p0)
			p1, ok := f.LastParam(1, 4)
			assert.True(t, ok)
			assert.Equal(t, binary.NativeEndian.AppendUint32(nil, uint32(tc.p1)), p1)
		}
		require.NoError(t, s.Synchronize())
	}},

	// The issue loop's calls allocate nothing (STYLE: a hot driver call
	// allocates nothing), host-memory bookkeeping included.
	{"HotPathAllocatesNothing", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		d, err := c.Alloc(64)
		require.NoError(t, err)
		h, err := c.AllocHost(64, driver.HostAllocOptions{})
		require.NoError(t, err)
		e, err := c.NewEvent(driver.EventOptions{})
		require.NoError(t, err)
		fn := fakeKernel(t, f, c)
		b, err := c.Bind()
		require.NoError(t, err)
		defer b.Release()
		args := driver.NewArgs()
		round := func() {
			args.Reset().Pointer(d.Ptr()).Int32(1)
			assert.NoError(t, b.CopyToDevice(s, d, 0, h, 0, 64))
			assert.NoError(t, b.Launch(fn, s, driver.GridFor(64, 64), args))
			assert.NoError(t, b.CopyToHost(s, h, 0, d, 0, 64))
			assert.NoError(t, b.Record(e, s))
			assert.NoError(t, e.Synchronize())
			assert.NoError(t, b.Synchronize(s))
		}
		for range 10 {
			round()
		}
		if allocs := testing.AllocsPerRun(200, round); !raceEnabled {
			assert.Zero(t, allocs, "allocations per round of copy, launch, copy, record, wait, synchronise")
		}
	}},

	// BindInto binds a Bound that the caller keeps, without allocating,
	// and refuses one that is still bound, nil, or a closed context's.
	{"BindInto", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		e, err := c.NewEvent(driver.EventOptions{})
		require.NoError(t, err)
		var b driver.Bound
		require.NoError(t, c.BindInto(&b))
		require.NoError(t, b.Record(e, s), "a Bound bound in place issues")
		err = c.BindInto(&b)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.ErrorContains(t, err, "the Bound is still bound")
		require.NoError(t, b.Record(e, s), "a refused BindInto leaves the Bound bound")
		b.Release()
		assert.ErrorIs(t, c.BindInto(nil), driver.ErrInvalidArgument)

		round := func() {
			if err := c.BindInto(&b); err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
		if allocs := testing.AllocsPerRun(100, round); !raceEnabled {
			assert.Zero(t, allocs, "allocations per BindInto and Release")
		}

		closed := gputest.FakeContext(t, 1)
		require.NoError(t, closed.Close())
		assert.ErrorIs(t, closed.BindInto(&b), driver.ErrClosed)
		require.NoError(t, c.BindInto(&b), "a failed BindInto leaves the Bound unbound")
		require.NoError(t, b.Record(e, s))
		b.Release()
		require.NoError(t, s.Synchronize())
	}},

	// BindOptions.DirectCalls: a Bound's non-blocking calls skip
	// runtime.cgocall on linux/amd64 (runtime.NumCgoCall does not move),
	// carry the same arguments and data, allocate nothing, and survive a
	// collector that runs all the while; waits keep the safe path. A
	// direct call that blocks holds up the collector's stop-the-world,
	// the trade-off the option documents, which a safe call does not.
	{"DirectCalls", func(t *testing.T, f *fakecuda.Fake) {
		direct := driver.DirectCallsAvailable()
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		const n = 4096
		d, err := c.Alloc(n)
		require.NoError(t, err)
		hin, err := c.AllocHost(n, driver.HostAllocOptions{})
		require.NoError(t, err)
		hout, err := c.AllocHost(n, driver.HostAllocOptions{})
		require.NoError(t, err)
		e, err := c.NewEvent(driver.EventOptions{})
		require.NoError(t, err)
		fn := fakeKernel(t, f, c)

		var b driver.Bound
		assert.ErrorIs(t, c.BindWith(nil, driver.BindOptions{DirectCalls: true}), driver.ErrInvalidArgument)
		require.NoError(t, c.BindWith(&b, driver.BindOptions{DirectCalls: true}))
		err = c.BindWith(&b, driver.BindOptions{})
		assert.ErrorContains(t, err, "BindWith", "the error names the call")
		assert.ErrorContains(t, err, "the Bound is still bound")

		args := driver.NewArgs()
		round := func(k int) {
			in, out := hin.Bytes(), hout.Bytes()
			for i := range in {
				in[i] = byte(i*7 + k)
			}
			clear(out)
			args.Reset().Pointer(d.Ptr()).Int32(int32(k))
			require.NoError(t, b.CopyToDevice(s, d, 0, hin, 0, n))
			require.NoError(t, b.Launch(fn, s, driver.GridFor(64, 32), args))
			require.NoError(t, b.Record(e, s))
			require.NoError(t, b.WaitEvent(s, e))
			require.NoError(t, b.CopyToHost(s, hout, 0, d, 0, n))
			require.NoError(t, b.Synchronize(s))
			require.True(t, bytes.Equal(in, out), "round %d: the bytes through the device", k)
			p1, ok := f.LastParam(1, 4)
			require.True(t, ok)
			require.Equal(t, binary.NativeEndian.AppendUint32(nil, uint32(k)), p1, "round %d: the launch's argument", k)
		}

		// Five non-blocking calls and one wait a round: only the wait goes
		// through runtime.cgocall when calls are direct.
		const rounds = 50
		cgo := runtime.NumCgoCall()
		for k := range rounds {
			round(k)
		}
		made := runtime.NumCgoCall() - cgo
		// A round's own cgocalls: the wait, and the fake's LastParam.
		if direct {
			assert.Less(t, made, int64(3*rounds), "direct: two cgocalls a round (the wait, LastParam), not seven")
			assert.GreaterOrEqual(t, made, int64(2*rounds), "the waits keep runtime.cgocall")
		} else {
			assert.GreaterOrEqual(t, made, int64(7*rounds), "no direct path here: every call through runtime.cgocall")
		}
		gputest.WhileCollecting(func() {
			for k := range 500 {
				round(k)
			}
		})
		issue := func() {
			for _, err := range []error{
				b.CopyToDevice(s, d, 0, hin, 0, n),
				b.Launch(fn, s, driver.GridFor(64, 32), args),
				b.Record(e, s),
				b.WaitEvent(s, e),
				b.CopyToHost(s, hout, 0, d, 0, n),
				b.Synchronize(s),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if allocs := testing.AllocsPerRun(100, issue); !raceEnabled {
			assert.Zero(t, allocs, "allocations per direct round")
		}
		b.Release()

		// Released and bound again without the option: the safe path.
		require.NoError(t, c.BindInto(&b))
		cgo = runtime.NumCgoCall()
		for k := range rounds {
			round(k)
		}
		assert.GreaterOrEqual(t, runtime.NumCgoCall()-cgo, int64(7*rounds), "safe: every call through runtime.cgocall")
		b.Release()

		// The trade-off: a direct call that blocks in the driver holds up a
		// stop-the-world (runtime.GC waits for it); a safe one does not.
		const stall = 300 * time.Millisecond
		gcDuring := func(opts driver.BindOptions) time.Duration {
			started := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				var bd driver.Bound
				if err := c.BindWith(&bd, opts); err != nil {
					close(started)
					done <- err
					return
				}
				defer bd.Release()
				close(started)
				done <- bd.Record(e, s)
			}()
			<-started
			time.Sleep(stall / 6) // let the call enter the driver's sleep
			t0 := time.Now()
			runtime.GC()
			took := time.Since(t0)
			require.NoError(t, <-done)
			return took
		}
		f.Delay("cuEventRecord", stall)
		safe := gcDuring(driver.BindOptions{})
		held := gcDuring(driver.BindOptions{DirectCalls: true})
		f.Delay("cuEventRecord", 0)
		assert.Less(t, safe, stall/2, "a safe call in the driver does not hold up the collector")
		if direct {
			assert.Greater(t, held, stall/2, "a direct call that blocks holds up the collector")
		} else {
			assert.Less(t, held, stall/2, "no direct path here")
		}
		require.NoError(t, s.Synchronize())
	}},

	// Bound.Synchronize waits for the stream on the bound thread without
	// checking the context again, and lets go of the host memory that the
	// stream's copies held, as Stream.Synchronize does; after Release it
	// checks the context as Stream.Synchronize does.
	{"BoundSynchronize", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		const n = 1 << 16
		d, err := c.Alloc(n)
		require.NoError(t, err)
		h, err := c.AllocHost(n, driver.HostAllocOptions{})
		require.NoError(t, err)
		b, err := c.Bind()
		require.NoError(t, err)
		f.ExecDelay(50 * time.Millisecond)
		require.NoError(t, b.CopyToDevice(s, d, 0, h, 0, n))
		checks := f.Calls("cuCtxGetCurrent")
		start := time.Now()
		require.NoError(t, b.Synchronize(s))
		assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "Bound.Synchronize returned before the copy ran")
		assert.Equal(t, checks, f.Calls("cuCtxGetCurrent"), "a bound wait checks no context")
		syncs := f.Calls("cuStreamSynchronize")
		require.NoError(t, h.Close())
		assert.Equal(t, syncs, f.Calls("cuStreamSynchronize"), "the copy was seen done: Close has nothing to wait for")
		f.ExecDelay(0)
		b.Release()
		checks = f.Calls("cuCtxGetCurrent")
		require.NoError(t, b.Synchronize(s), "released, it waits as Stream.Synchronize does")
		assert.Equal(t, checks+1, f.Calls("cuCtxGetCurrent"), "released, it checks the context")
		require.NoError(t, s.Close())
		assert.ErrorIs(t, b.Synchronize(s), driver.ErrClosed)
	}},

	{"RoundTrip", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		d, err := c.Alloc(64)
		require.NoError(t, err)
		h, err := c.AllocHost(64, driver.HostAllocOptions{})
		require.NoError(t, err)
		for i := range h.Bytes() {
			h.Bytes()[i] = byte(i)
		}
		want := bytes.Clone(h.Bytes())
		require.NoError(t, s.CopyToDevice(d, 0, h, 0, 64))
		require.NoError(t, s.Synchronize())
		clear(h.Bytes())
		require.NoError(t, s.CopyToHost(h, 0, d, 0, 64))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, want, h.Bytes())
		got := make([]byte, 64)
		require.NoError(t, d.CopyToHost(got, 0))
		assert.Equal(t, want, got)
		assert.Equal(t, 3, c.OpenObjects(), "the stream and the two buffers")
	}},

	// Issue 9, bug 1: integer JIT option values were stored in
	// unsafe.Pointer slots; `make test` also runs this case with every
	// function call moving the stack, where such a value crashes the runtime.
	{"LoadModuleOptions", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		ptx := []byte(".version 7.0\n.target sm_75\n.address_size 64\n")
		for _, o := range []driver.ModuleOptions{{}, {Verbose: true}, {Verbose: true, OptimizationLevel: 9}, {OptimizationLevel: 1, LogSize: 64}} {
			m, err := c.LoadModule(ptx, o)
			require.NoError(t, err, "%+v", o)
			assert.Equal(t, "fake JIT: 44 bytes of image", m.InfoLog(), "%+v", o)
			require.NoError(t, m.Close())
		}
		_, err := c.LoadModule([]byte(".version 7.0 error"), driver.ModuleOptions{Verbose: true})
		assert.EqualError(t, err, "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed: ptxas fake: line 1; error : the image asks for an error")
	}},

	// Issue 9, bug 2: an Args held anywhere (a package variable, a local,
	// a copy) launches its own values and never crashes the process.
	{"ArgsHeldAnyWay", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
		require.NoError(t, err)
		fn, err := m.Function("k")
		require.NoError(t, err)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		f.SetParams(4)
		launched := func(a *driver.Args) int32 {
			t.Helper()
			require.NoError(t, fn.Launch(s, driver.GridFor(1, 1), a))
			b, ok := f.LastParam(0, 4)
			require.True(t, ok)
			return int32(binary.NativeEndian.Uint32(b))
		}
		packageArgs.Reset().Int32(42)
		runtime.GC()
		runtime.GC()
		assert.Equal(t, int32(42), launched(&packageArgs))

		a := driver.NewArgs().Int32(42)
		b := *a
		b.Reset().Int32(7)
		collect(5 * time.Millisecond)
		assert.Equal(t, int32(42), launched(a), "a copy must not share its original's values")
		assert.Equal(t, int32(7), launched(&b))

		var local driver.Args
		local.Int32(-3)
		assert.Equal(t, int32(-3), launched(&local))

		// Launching one Args from several goroutines at once only reads it.
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					assert.NoError(t, fn.Launch(s, driver.GridFor(1, 1), a))
				}
			}()
		}
		wg.Wait()
		require.NoError(t, s.Synchronize())
	}},

	// Issue 9, bug 3: a view of a HostBuffer that the caller dropped stays
	// valid memory; only Close (of the buffer or the context) frees it.
	{"ViewsOutliveDroppedOwner", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		must := func(h *driver.HostBuffer, err error) *driver.HostBuffer {
			require.NoError(t, err)
			return h
		}
		hv := must(c.AllocHost(1<<16, driver.HostAllocOptions{})).Float32s()
		collect(20 * time.Millisecond)
		for i := range hv {
			hv[i] = float32(i)
		}
		assert.True(t, f.HostLive(driver.Bytes(hv)), "the pinned memory behind a live view was freed")
		assert.Equal(t, float32(100), hv[100])
		require.NoError(t, c.Close())
		assert.False(t, f.HostLive(driver.Bytes(hv)), "Context.Close frees buffers dropped without Close")

		// A registration's memory is Go's: its view outlives the
		// registration, which the cleanup may unregister.
		c2 := gputest.FakeContext(t, 0)
		mem := make([]byte, 4096)
		func() {
			r, err := c2.RegisterHost(mem, driver.RegisterOptions{})
			require.NoError(t, err)
			assert.True(t, f.HostLive(r.Bytes()))
		}()
		collect(20 * time.Millisecond)
		mem[0] = 1
		assert.False(t, f.HostLive(mem), "a dropped registration is unregistered by its cleanup")
	}},

	// Issue 9, bug 4: a cleanup must never destroy a handle that a call is
	// still using. Each call below is slowed down while its object has no
	// other reference and the collector runs.
	{"NoDestroyDuringCall", func(t *testing.T, f *fakecuda.Fake) {
		for _, export := range []string{"cuStreamSynchronize", "cuEventSynchronize", "cuCtxSynchronize", "cuMemGetInfo_v2", "cuFuncGetAttribute.body"} {
			f.Delay(export, 20*time.Millisecond)
		}
		dev, err := driver.DeviceAt(0)
		require.NoError(t, err)
		gputest.WhileCollecting(func() {
			for range 3 {
				func() {
					c, err := driver.NewContext(dev)
					require.NoError(t, err)
					assert.NoError(t, c.Synchronize())
				}()
				func() {
					c, err := driver.NewContext(dev)
					require.NoError(t, err)
					_, _, err = c.MemoryInfo()
					assert.NoError(t, err)
				}()
			}
			c := gputest.FakeContext(t, 0)
			for range 3 {
				func() {
					s, err := c.NewStream(driver.StreamOptions{})
					require.NoError(t, err)
					assert.NoError(t, s.Synchronize())
				}()
				func() {
					s, err := c.NewStream(driver.StreamOptions{})
					require.NoError(t, err)
					e, err := c.NewEvent(driver.EventOptions{})
					require.NoError(t, err)
					require.NoError(t, e.Record(s))
					assert.NoError(t, e.Synchronize())
				}()
				func() {
					m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
					require.NoError(t, err)
					fn, err := m.Function("k")
					require.NoError(t, err)
					_, err = fn.Attribute(driver.FuncMaxThreadsPerBlock)
					assert.NoError(t, err)
				}()
			}
		})
		collect(20 * time.Millisecond)
	}},

	// Issue 9, bug 5: host memory that a queued copy uses stays alive and
	// registered, or pinned, until the host has seen the copy done.
	{"AsyncCopyKeepsHostMemory", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		const n = 1 << 16
		d, err := c.Alloc(n)
		require.NoError(t, err)
		f.ExecDelay(50 * time.Millisecond)

		// Dropped registration and slice, D2H pending.
		gputest.WhileCollecting(func() {
			func() {
				mem := make([]byte, n)
				r, err := c.RegisterHost(mem, driver.RegisterOptions{})
				require.NoError(t, err)
				require.NoError(t, s.CopyToHost(r, 0, d, 0, n))
			}()
			time.Sleep(10 * time.Millisecond)
		})
		require.NoError(t, s.Synchronize())
		f.Clean(t)
		collect(10 * time.Millisecond)
		assert.Equal(t, 0, f.Live(fakecuda.Registrations), "once the copy is seen done, the registration may go")

		// Close of memory with a copy in flight waits for the copy.
		h, err := c.AllocHost(n, driver.HostAllocOptions{})
		require.NoError(t, err)
		require.NoError(t, s.CopyToDevice(d, 0, h, 0, n))
		start := time.Now()
		require.NoError(t, h.Close())
		assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "Close returned before the copy ran")
		assert.Equal(t, 0, f.Pending())

		// An event recorded after the copy lets the memory go once seen.
		mem := make([]byte, n)
		r, err := c.RegisterHost(mem, driver.RegisterOptions{})
		require.NoError(t, err)
		e, err := c.NewEvent(driver.EventOptions{})
		require.NoError(t, err)
		require.NoError(t, s.CopyToDevice(d, 0, r, 0, n))
		require.NoError(t, e.Record(s))
		require.NoError(t, e.Synchronize())
		start = time.Now()
		require.NoError(t, r.Close())
		assert.Less(t, time.Since(start), 25*time.Millisecond, "nothing left to wait for")

		// A stream dropped with a copy pending waits for it when collected.
		func() {
			s2, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			mem := make([]byte, n)
			r, err := c.RegisterHost(mem, driver.RegisterOptions{})
			require.NoError(t, err)
			require.NoError(t, s2.CopyToHost(r, 0, d, 0, n))
		}()
		collect(120 * time.Millisecond)
	}},

	// Issue 9, bug 6: Close of an object racing Context.Close destroys the
	// handle exactly once and unpins only what it unregistered; objects
	// made while the context closes do not leak.
	{"ConcurrentClose", func(t *testing.T, f *fakecuda.Fake) {
		dev, err := driver.DeviceAt(0)
		require.NoError(t, err)
		rounds := 300
		if testing.Short() {
			rounds = 50
		}
		for i := range rounds {
			c, err := driver.NewContext(dev)
			require.NoError(t, err)
			mem := make([]byte, 4096)
			r, err := c.RegisterHost(mem, driver.RegisterOptions{})
			require.NoError(t, err)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			var wg sync.WaitGroup
			wg.Add(4)
			go func() { defer wg.Done(); assert.NoError(t, r.Close()) }()
			go func() { defer wg.Done(); assert.NoError(t, s.Close()) }()
			go func() { defer wg.Done(); assert.NoError(t, c.Close()) }()
			go func() {
				defer wg.Done()
				for j := 0; ; j++ {
					e, err := c.NewEvent(driver.EventOptions{})
					if err != nil {
						assert.ErrorIs(t, err, driver.ErrClosed)
						return
					}
					if j%2 == 0 {
						assert.NoError(t, e.Close())
					}
				}
			}()
			wg.Wait()
			if !assert.Equal(t, 0, f.Live(fakecuda.AllObjects), "round %d", i) {
				return
			}
			require.Equal(t, 0, f.PrimaryRefs(0), "round %d", i)
		}
	}},

	// Issue 9, bug 7: a method never calls the driver with a handle that a
	// concurrent Close has destroyed.
	{"CloseWaitsForCalls", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		f.Delay("cuStreamSynchronize", 20*time.Millisecond)
		for range 5 {
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			done := make(chan error)
			go func() { done <- s.Synchronize() }()
			time.Sleep(5 * time.Millisecond)
			require.NoError(t, s.Close())
			err = <-done
			if err != nil {
				assert.ErrorIs(t, err, driver.ErrClosed)
			}
			assert.ErrorIs(t, s.Synchronize(), driver.ErrClosed)
		}
	}},

	// Issue 9, bug 7: SetParams and Launch on one Function from two
	// goroutines (the race detector watches).
	{"SetParamsWhileLaunching", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
		require.NoError(t, err)
		fn, err := m.Function("k")
		require.NoError(t, err)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 100 {
				assert.NoError(t, fn.SetParams([]driver.ParamInfo{{Offset: 0, Size: 4}}))
			}
		}()
		go func() {
			defer wg.Done()
			for range 100 {
				assert.NoError(t, fn.Launch(s, driver.GridFor(1, 1), driver.NewArgs().Int32(1)))
			}
		}()
		wg.Wait()
		err = fn.Launch(s, driver.GridFor(1, 1), driver.NewArgs().Int64(1))
		assert.ErrorIs(t, err, driver.ErrArguments)
		require.NoError(t, s.Synchronize())
	}},

	// Issue 10, section 2: objects of two contexts used together are a
	// clear error, and a Bound never leaves another context current.
	{"ContextsDoNotMix", func(t *testing.T, f *fakecuda.Fake) {
		c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
		s0, err := c0.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		s1, err := c1.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		d0, err := c0.Alloc(16)
		require.NoError(t, err)
		d1, err := c1.Alloc(16)
		require.NoError(t, err)
		h0, err := c0.AllocHost(16, driver.HostAllocOptions{})
		require.NoError(t, err)
		hp, err := c0.AllocHost(16, driver.HostAllocOptions{Portable: true})
		require.NoError(t, err)
		e1, err := c1.NewEvent(driver.EventOptions{})
		require.NoError(t, err)
		m0, err := c0.LoadModule([]byte("// any"), driver.ModuleOptions{})
		require.NoError(t, err)
		fn0, err := m0.Function("k")
		require.NoError(t, err)

		assert.ErrorIs(t, s0.CopyToDevice(d1, 0, h0, 0, 16), driver.ErrWrongContext)
		assert.ErrorIs(t, s1.CopyToDevice(d1, 0, h0, 0, 16), driver.ErrWrongContext, "non-portable pinned memory of another context")
		assert.NoError(t, s1.CopyToDevice(d1, 0, hp, 0, 16), "portable pinned memory serves every context")
		assert.ErrorIs(t, e1.Record(s0), driver.ErrWrongContext)
		assert.ErrorIs(t, s0.WaitEvent(e1), driver.ErrWrongContext)
		assert.ErrorIs(t, fn0.Launch(s1, driver.GridFor(1, 1), driver.NewArgs()), driver.ErrWrongContext)
		assert.ErrorIs(t, d0.CopyFromDevice(0, d1, 0, 16), driver.ErrWrongContext)
		assert.EqualError(t, s0.Memset(d1, 0, 16, 0), "cuda: Stream.Memset: objects of different contexts: an object of GPU 1's context used with one of GPU 0's")

		b, err := c0.Bind()
		require.NoError(t, err)
		assert.Equal(t, 0, f.CurrentDevice())
		assert.ErrorIs(t, b.Launch(fn0, s1, driver.GridFor(1, 1), driver.NewArgs()), driver.ErrWrongContext)
		assert.ErrorIs(t, b.CopyToDevice(s1, d1, 0, hp, 0, 16), driver.ErrWrongContext)
		assert.ErrorIs(t, b.Record(e1, s1), driver.ErrWrongContext)
		assert.ErrorIs(t, b.Synchronize(s1), driver.ErrWrongContext)
		assert.Equal(t, 0, f.CurrentDevice(), "a refused call must leave the bound context current")
		assert.NoError(t, b.CopyToDevice(s0, d0, 0, h0, 0, 16))
		b.Release()
		require.NoError(t, s0.Synchronize())
		require.NoError(t, s1.Synchronize())
	}},

	// Every driver failure is returned, named and counted; nothing leaks.
	{"ErrorPaths", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		f.Fail("cuMemAlloc_v2", 1, 2)
		_, err := c.Alloc(16)
		assert.ErrorIs(t, err, driver.ErrOutOfMemory)
		assert.EqualError(t, err, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
		d, err := c.Alloc(16)
		require.NoError(t, err, "only the first call fails")

		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		f.Fail("cuStreamDestroy_v2", 1, 400)
		err = s.Close()
		assert.ErrorIs(t, err, driver.ErrInvalidHandle)
		assert.EqualError(t, err, "cuda: Stream.Close: cuStreamDestroy_v2: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle")
		assert.NoError(t, s.Close(), "a second Close does nothing")
		assert.ErrorIs(t, s.Synchronize(), driver.ErrClosed)

		// An unregister that fails leaves the memory pinned, not reused.
		mem := make([]byte, 4096)
		r, err := c.RegisterHost(mem, driver.RegisterOptions{})
		require.NoError(t, err)
		f.Fail("cuMemHostUnregister", 1, 1)
		assert.ErrorIs(t, r.Close(), driver.ErrInvalidValue)
		assert.True(t, f.HostLive(mem))
		f.Fail("cuMemHostUnregister", 0, 0)
		reg, err := c.RegisterHost(mem, driver.RegisterOptions{})
		assert.Nil(t, reg)
		assert.ErrorIs(t, err, driver.ErrHostMemoryRegistered)

		f.Fail("cuStreamCreate", 1, 2)
		_, err = c.NewStream(driver.StreamOptions{})
		assert.ErrorIs(t, err, driver.ErrOutOfMemory)
		assert.Equal(t, 1, c.OpenObjects(), "only the device buffer")
		require.NoError(t, d.Close())
		// The registration that could not be unregistered is the driver's
		// now; closing the context cleans it up and the fake says so.
		require.NoError(t, c.Close())
		n, msg := f.Violations()
		assert.Equal(t, 2, n, "the stream and the registration the driver refused to destroy")
		assert.Contains(t, msg, "context 0 destroyed with a stream still alive")
		f.Reset()
	}},
}
