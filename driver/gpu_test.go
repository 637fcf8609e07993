package driver

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/purecuda/overlap/loader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireGPU returns a context on device 0. It skips the test only when no
// NVIDIA driver is present; any other failure fails the test.
func requireGPU(t testing.TB) *Context { t.Helper(); return requireGPUWith(t, ContextOptions{}) }

// requireGPUWith is requireGPU with a context made by NewContextWith.
func requireGPUWith(t testing.TB, opts ContextOptions) *Context {
	t.Helper()
	if err := Load(); err != nil {
		var oe *loader.OpenError
		if errors.As(err, &oe) {
			t.Skip("skipping: " + oe.Brief())
		}
		t.Fatalf("driver present but unusable: %v", err)
	}
	dev, err := DeviceAt(0)
	require.NoError(t, err)
	ctx, err := NewContextWith(dev, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ctx.Close()) })
	return ctx
}

func loadTestKernels(t testing.TB, ctx *Context) *Module {
	t.Helper()
	src, err := os.ReadFile("testdata/kernels.ptx")
	require.NoError(t, err)
	m, err := ctx.LoadModule(src, ModuleOptions{})
	require.NoError(t, err)
	return m
}

func TestGPUDevice(t *testing.T) {
	ctx := requireGPU(t)
	n, err := DeviceCount()
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 1)
	d := ctx.Device()
	assert.Equal(t, 0, d.Ordinal())
	assert.Equal(t, "GPU 0", d.String())
	name, err := d.Name()
	require.NoError(t, err)
	assert.NotEmpty(t, name)
	major, minor, err := d.ComputeCapability()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, major, 5)
	assert.GreaterOrEqual(t, minor, 0)
	mem, err := d.TotalMemory()
	require.NoError(t, err)
	assert.Greater(t, mem, uint64(1<<30))
	bus, err := d.PCIBusID()
	require.NoError(t, err)
	assert.Regexp(t, `^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9]$`, bus)
	sms, err := d.Multiprocessors()
	require.NoError(t, err)
	assert.Greater(t, sms, 0)
	ce, err := d.CopyEngines()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ce, 1)
	ck, err := d.ConcurrentKernels()
	require.NoError(t, err)
	assert.True(t, ck)
	warp, err := d.Attribute(DeviceAttribute(10)) // WARP_SIZE
	require.NoError(t, err)
	assert.Equal(t, 32, warp)
	_, err = d.Attribute(DeviceAttribute(100000))
	assert.ErrorIs(t, err, ErrInvalidValue)
	t.Logf("%s: %s, sm_%d%d, %d SMs, %d copy engines, %.1f GiB, PCI %s", d, name, major, minor, sms, ce, float64(mem)/(1<<30), bus)

	_, err = DeviceAt(n)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.Contains(t, err.Error(), "out of range")
	_, err = DeviceAt(-1)
	assert.ErrorIs(t, err, ErrInvalidArgument)

	v, err := DriverVersion()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, v, loader.MinDriverVersion)
	assert.NotEmpty(t, LibraryPath())
	assert.NotZero(t, ctx.Handle())
}

func TestGPUContext(t *testing.T) {
	ctx := requireGPU(t)
	free, total, err := ctx.MemoryInfo()
	require.NoError(t, err)
	assert.Greater(t, total, uint64(0))
	assert.LessOrEqual(t, free, total)
	require.NoError(t, ctx.Synchronize())

	// A second context on the same device shares the primary context.
	c2, err := NewContext(ctx.Device())
	require.NoError(t, err)
	assert.Equal(t, ctx.Handle(), c2.Handle())
	s, err := c2.NewStream(StreamOptions{})
	require.NoError(t, err)
	assert.Equal(t, 1, c2.OpenObjects())
	require.NoError(t, c2.Close(), "closing a context closes its objects first")
	assert.Equal(t, 0, c2.OpenObjects())
	assert.ErrorIs(t, s.Synchronize(), ErrClosed)
	assert.NoError(t, c2.Close(), "second Close is a no-op")
	_, err = c2.Alloc(16)
	assert.ErrorIs(t, err, ErrClosed)
	// The first context still works.
	require.NoError(t, ctx.Synchronize())
}

func TestGPUMemoryAndCopies(t *testing.T) {
	ctx := requireGPU(t)
	const n = 1 << 20
	d, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer d.Close()
	assert.Equal(t, n, d.Len())
	assert.NotZero(t, d.Ptr())
	require.NoError(t, d.Memset(0xAB))
	got := make([]byte, n)
	require.NoError(t, d.CopyToHost(got, 0))
	assert.Equal(t, bytes.Repeat([]byte{0xAB}, n), got)

	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i * 7)
	}
	require.NoError(t, d.CopyFromHost(0, src))
	d2, err := ctx.Alloc(n)
	require.NoError(t, err)
	require.NoError(t, d2.CopyFromDevice(0, d, 0, n))
	require.NoError(t, d2.CopyToHost(got, 0))
	assert.Equal(t, src, got)

	// Length checks: nothing reaches the driver.
	assert.ErrorIs(t, d.CopyFromHost(1, src), ErrLength)
	assert.ErrorIs(t, d.CopyToHost(make([]byte, n+1), 0), ErrLength)
	assert.ErrorIs(t, d.CopyFromDevice(0, d2, 1, n), ErrLength)

	h, err := ctx.AllocHost(n, HostAllocOptions{Portable: true})
	require.NoError(t, err)
	defer h.Close()
	assert.Equal(t, HostAllocOptions{Portable: true}, h.Options())
	assert.Len(t, h.Float32s(), n/4)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.Memset(d2, 0, n, 0))
	require.NoError(t, s.CopyDevice(d2, 0, d, 0, n/2))
	require.NoError(t, s.CopyToHost(h, 0, d2, 0, n))
	require.NoError(t, s.Synchronize())
	assert.Equal(t, src[:n/2], h.Bytes()[:n/2])
	assert.Equal(t, make([]byte, n/2), h.Bytes()[n/2:])
	assert.ErrorIs(t, s.CopyToHost(h, 1, d2, 0, n), ErrLength)
	assert.ErrorIs(t, s.CopyToDevice(d2, 0, h, 0, n+1), ErrLength)
	done, err := s.Done()
	require.NoError(t, err)
	assert.True(t, done)

	for _, opts := range []HostAllocOptions{{WriteCombined: true}, {Mapped: true}} {
		hb, err := ctx.AllocHost(4096, opts)
		require.NoError(t, err, "%+v", opts)
		require.NoError(t, hb.Close())
	}

	require.NoError(t, d2.Close())
	require.NoError(t, d2.Close())
	assert.ErrorIs(t, d2.Memset(0), ErrClosed)
	assert.Zero(t, d2.Ptr())
	_, err = ctx.Alloc(0)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// roundTrip copies src to the device and back into dst through s.
func roundTrip(t *testing.T, ctx *Context, src, dst HostMemory, n int) {
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	d, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, s.CopyToDevice(d, 0, src, 0, n))
	require.NoError(t, s.CopyToHost(dst, 0, d, 0, n))
	require.NoError(t, s.Synchronize())
	if !bytes.Equal(src.Bytes(), dst.Bytes()) {
		t.Fatalf("1 GiB round trip differs")
	}
}

func fillPattern(b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		*(*uint64)(unsafe.Pointer(&b[i])) = uint64(i)*0x9E3779B97F4A7C15 + 1
	}
}

func TestGPURoundTrip1GiBPinned(t *testing.T) {
	ctx := requireGPU(t)
	const n = 1 << 30
	src, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer src.Close()
	dst, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer dst.Close()
	fillPattern(src.Bytes())
	roundTrip(t, ctx, src, dst, n)
}

func TestGPURoundTrip1GiBRegistered(t *testing.T) {
	ctx := requireGPU(t)
	const n = 1 << 30
	a, b := make([]byte, n), make([]byte, n)
	fillPattern(a)
	ra, err := ctx.RegisterHost(a, RegisterOptions{})
	require.NoError(t, err)
	rb, err := ctx.RegisterHost(b, RegisterOptions{})
	require.NoError(t, err)
	assert.Equal(t, n, ra.Len())
	roundTrip(t, ctx, ra, rb, n)
	require.NoError(t, ra.Close())
	require.NoError(t, rb.Close())
	require.NoError(t, rb.Close())
	assert.Nil(t, ra.Bytes())
	// Registering the same memory twice is the driver's error, reported.
	r1, err := ctx.RegisterHost(a[:4096], RegisterOptions{})
	require.NoError(t, err)
	_, err = ctx.RegisterHost(a[:4096], RegisterOptions{})
	assert.ErrorIs(t, err, ErrHostMemoryRegistered)
	require.NoError(t, r1.Close())
}

func TestGPUKernelLaunch(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)
	assert.Equal(t, "add_scalar", f.Name())
	params, known := f.Params()
	require.True(t, known, "the H200's driver has cuFuncGetParamInfo")
	assert.Equal(t, []ParamInfo{{0, 8}, {8, 8}, {16, 4}, {20, 4}}, params)
	regs, err := f.Attribute(FuncNumRegs)
	require.NoError(t, err)
	assert.Greater(t, regs, 0)
	maxT, err := f.Attribute(FuncMaxThreadsPerBlock)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, maxT, 256)

	const n = 1<<20 + 3
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) * 0.5
	}
	dx, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer dx.Close()
	dy, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer dy.Close()
	require.NoError(t, dx.CopyFromHost(0, Bytes(x)))
	s, err := ctx.NewStream(StreamOptions{Priority: -1})
	require.NoError(t, err)
	defer s.Close()
	args := NewArgs().Buffer(dy, 0).Buffer(dx, 0).Float32(1.25).Uint32(n)
	require.NoError(t, f.Launch(s, GridFor(n, 256), args))
	require.NoError(t, s.Synchronize())
	y := make([]float32, n)
	require.NoError(t, dy.CopyToHost(Bytes(y), 0))
	for i := range y {
		if y[i] != x[i]+1.25 { // exact: one IEEE add on both sides
			t.Fatalf("y[%d] = %v, want %v", i, y[i], x[i]+1.25)
		}
	}

	// Wrong argument count or size: an error, never a launch.
	err = f.Launch(s, GridFor(n, 256), NewArgs().Buffer(dy, 0))
	assert.ErrorIs(t, err, ErrArguments)
	assert.EqualError(t, err, "cuda: Function.Launch: kernel arguments do not match parameters: kernel add_scalar takes 4 argument(s), got 1")
	err = f.Launch(s, GridFor(n, 256), NewArgs().Buffer(dy, 0).Buffer(dx, 0).Float64(1).Uint32(n))
	assert.ErrorIs(t, err, ErrArguments)
	assert.ErrorIs(t, f.Launch(s, LaunchConfig{}, args), ErrInvalidArgument)
	assert.ErrorIs(t, f.Launch(nil, GridFor(n, 256), args), ErrInvalidArgument)
	assert.ErrorIs(t, f.Launch(s, GridFor(n, 256), nil), ErrInvalidArgument)
	// Too many threads per block is the driver's error, reported.
	assert.Error(t, f.Launch(s, LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 4096}}, args))
	require.NoError(t, s.Synchronize())

	_, err = m.Function("no_such_kernel")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Contains(t, err.Error(), `no kernel named "no_such_kernel"`)
	require.NoError(t, m.Close())
	assert.ErrorIs(t, f.Launch(s, GridFor(n, 256), args), ErrClosed)
	_, err = m.Function("add_scalar")
	assert.ErrorIs(t, err, ErrClosed)
}

func TestGPUModuleErrors(t *testing.T) {
	ctx := requireGPU(t)
	bad := ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry k()\n{\n\tfrobnicate.u32 %r1;\n\tret;\n}\n"
	_, err := ctx.LoadModule([]byte(bad), ModuleOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrInvalidPTX)
	assert.Contains(t, err.Error(), "line 6", "the JIT log's line must be in the error: %v", err)
	t.Logf("syntax error gives: %v", err)

	_, err = ctx.LoadModule(nil, ModuleOptions{})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = ctx.LoadModule([]byte("\x7fELF garbage"), ModuleOptions{})
	assert.Error(t, err)
	m, err := ctx.LoadModule([]byte(".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry e()\n{\n\tret;\n}"), ModuleOptions{OptimizationLevel: 2, Verbose: true})
	require.NoError(t, err, "PTX without a trailing NUL loads")
	t.Logf("info log: %q", m.InfoLog())
	require.NoError(t, m.Close())
	assert.Equal(t, 0, ctx.OpenObjects())
}

func TestGPUEventsAndOverlap(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	spin, err := m.Function("spin")
	require.NoError(t, err)

	newEv := func() *Event {
		e, err := ctx.NewEvent(EventOptions{Timing: true})
		require.NoError(t, err)
		t.Cleanup(func() { e.Close() })
		return e
	}
	s1, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s1.Close()
	s2, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s2.Close()

	origin, a0, a1, b0, b1 := newEv(), newEv(), newEv(), newEv(), newEv()
	const cycles = 20_000_000 // about 10 ms at 2 GHz
	args := NewArgs().Uint64(cycles)
	require.NoError(t, origin.Record(s1))
	require.NoError(t, s2.WaitEvent(origin))
	require.NoError(t, a0.Record(s1))
	require.NoError(t, spin.Launch(s1, LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, args))
	require.NoError(t, a1.Record(s1))
	require.NoError(t, b0.Record(s2))
	require.NoError(t, spin.Launch(s2, LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, args))
	require.NoError(t, b1.Record(s2))
	done, err := b1.Done()
	require.NoError(t, err)
	assert.False(t, done, "10 ms of work cannot be done already")
	require.NoError(t, a1.Synchronize())
	require.NoError(t, b1.Synchronize())
	done, err = b1.Done()
	require.NoError(t, err)
	assert.True(t, done)

	at := func(e *Event) time.Duration {
		d, err := origin.Elapsed(e)
		require.NoError(t, err)
		return d
	}
	sa, ea, sb, eb := at(a0), at(a1), at(b0), at(b1)
	t.Logf("stream 1 ran %v..%v, stream 2 ran %v..%v", sa, ea, sb, eb)
	assert.Greater(t, ea-sa, 2*time.Millisecond)
	assert.True(t, sb < ea && sa < eb, "the two streams' kernels must overlap in time")
	total := max(ea, eb) - min(sa, sb)
	assert.Less(t, total, (ea-sa)+(eb-sb)-(ea-sa)/2, "overlapped total must be well under the serial sum")

	plain, err := ctx.NewEvent(EventOptions{})
	require.NoError(t, err)
	defer plain.Close()
	_, err = plain.Elapsed(a1)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, plain.Close())
	assert.ErrorIs(t, plain.Record(s1), ErrClosed)
	assert.ErrorIs(t, s1.WaitEvent(plain), ErrClosed)
	assert.ErrorIs(t, s1.WaitEvent(nil), ErrInvalidArgument)
}

// TestGPUContextFromManyGoroutines runs 64 goroutines on one context with
// GOMAXPROCS of at least 8, clearing the current context on their threads
// between calls, and requires that none sees CUDA_ERROR_INVALID_CONTEXT.
func TestGPUContextFromManyGoroutines(t *testing.T) {
	ctx := requireGPU(t)
	prev := runtime.GOMAXPROCS(max(8, runtime.NumCPU()))
	defer runtime.GOMAXPROCS(prev)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 64*50)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			const n = 4096
			s, err := ctx.NewStream(StreamOptions{})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			d, err := ctx.Alloc(n * 4)
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			h, err := ctx.AllocHost(n*4, HostAllocOptions{})
			if err != nil {
				errs <- err
				return
			}
			defer h.Close()
			args := NewArgs()
			for i := 0; i < 50; i++ {
				// Forget the current context on this thread, as foreign code might.
				runtime.LockOSThread()
				_ = call(symCtxSetCurrent, 0)
				runtime.UnlockOSThread()
				hv := h.Float32s()
				for j := range hv {
					hv[j] = float32(g)
				}
				args.Reset().Buffer(d, 0).Buffer(d, 0).Float32(1).Uint32(n)
				for _, e := range []error{
					s.CopyToDevice(d, 0, h, 0, n*4),
					f.Launch(s, GridFor(n, 128), args),
					s.CopyToHost(h, 0, d, 0, n*4),
					s.Synchronize(),
				} {
					if e != nil {
						errs <- e
					}
				}
				for _, v := range h.Float32s() {
					if v != float32(g)+1 {
						errs <- errors.New("wrong result from a goroutine")
						break
					}
				}
				runtime.Gosched()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NotErrorIs(t, err, ErrInvalidContext)
		t.Error(err)
	}
}

func TestGPUOutOfMemory(t *testing.T) {
	ctx := requireGPU(t)
	free0, total, err := ctx.MemoryInfo()
	require.NoError(t, err)
	var bufs []*DeviceBuffer
	var oom error
	for i := 0; i < 1024; i++ {
		b, err := ctx.Alloc(4 << 30)
		if err != nil {
			oom = err
			break
		}
		bufs = append(bufs, b)
	}
	require.ErrorIs(t, oom, ErrOutOfMemory, "allocating %d GiB of a %d GiB card", 4*len(bufs), total>>30)
	assert.Equal(t, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", oom.Error())
	for _, b := range bufs {
		require.NoError(t, b.Close())
	}
	free1, _, err := ctx.MemoryInfo()
	require.NoError(t, err)
	assert.InDelta(t, float64(free0), float64(free1), 64<<20, "everything must be freed: %d before, %d after", free0, free1)
	t.Logf("allocated %d x 4 GiB before out of memory; free %d MiB before, %d MiB after", len(bufs), free0>>20, free1>>20)
}

func TestGPUBound(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)
	const n = 1000
	h, err := ctx.AllocHost(n*4, HostAllocOptions{})
	require.NoError(t, err)
	defer h.Close()
	hv := h.Float32s()
	for i := range hv {
		hv[i] = float32(i)
	}
	d, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer d.Close()
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	e, err := ctx.NewEvent(EventOptions{})
	require.NoError(t, err)
	defer e.Close()

	b, err := ctx.Bind()
	require.NoError(t, err)
	require.NoError(t, b.CopyToDevice(s, d, 0, h, 0, n*4))
	require.NoError(t, b.Launch(f, s, GridFor(n, 128), NewArgs().Buffer(d, 0).Buffer(d, 0).Float32(2).Uint32(n)))
	require.NoError(t, b.Record(e, s))
	require.NoError(t, b.WaitEvent(s, e))
	require.NoError(t, b.CopyToHost(s, h, 0, d, 0, n*4))
	assert.ErrorIs(t, b.CopyToHost(s, h, 4, d, 0, n*4), ErrLength)
	b.Release()
	b.Release()
	require.NoError(t, s.Synchronize())
	for i, v := range h.Float32s() {
		require.Equal(t, float32(i)+2, v, "element %d", i)
	}
	// After Release the Bound still works, with full checks.
	require.NoError(t, b.Record(e, s))
}
