//go:build linux

package driver_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pool and graph cases of issue 14 run inside TestFakeDriver, so that
// `make stackmove` runs them too.
func init() { fakeCases = append(fakeCases, poolGraphCases...) }

// pinned allocates n bytes of pinned memory filled with bytes from seed on.
func pinned(t *testing.T, c *driver.Context, n int, seed byte) *driver.HostBuffer {
	t.Helper()
	h, err := c.AllocHost(n, driver.HostAllocOptions{})
	require.NoError(t, err)
	for i := range h.Bytes() {
		h.Bytes()[i] = seed + byte(i)
	}
	return h
}

var poolGraphCases = []fakeCase{
	// Issue 14: stream-ordered buffers allocated and freed on a stream in a
	// loop carry data, are closed by FreeAsync, and leave nothing behind.
	// The fake runs each free only after the stream's earlier work and
	// records a violation if a copy touches the memory after it.
	{"PoolAllocFreeAsyncLoop", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		const n = 256
		in := pinned(t, c, n, 3)
		out := pinned(t, c, n, 0)
		devBefore := f.Live(fakecuda.DeviceMemory)
		f.ExecDelay(200 * time.Microsecond) // frees are queued behind pending copies
		for i := range 20 {
			b, err := s.AllocAsync(n)
			require.NoError(t, err)
			require.NotZero(t, b.Ptr())
			assert.Equal(t, n, b.Len())
			in.Bytes()[0] = byte(i)
			require.NoError(t, s.CopyToDevice(b, 0, in, 0, n))
			require.NoError(t, s.CopyToHost(out, 0, b, 0, n))
			require.NoError(t, s.FreeAsync(b))
			assert.Zero(t, b.Ptr(), "a freed buffer has no address")
			assert.ErrorIs(t, s.CopyToDevice(b, 0, in, 0, n), driver.ErrClosed)
			assert.ErrorIs(t, s.FreeAsync(b), driver.ErrClosed, "a second free")
			assert.NoError(t, b.Close(), "Close after FreeAsync does nothing")
			require.NoError(t, s.Synchronize())
			require.Equal(t, in.Bytes(), out.Bytes(), "round %d", i)
		}
		assert.Equal(t, 20, f.Calls("cuMemAllocAsync"))
		assert.Equal(t, 20, f.Calls("cuMemFreeAsync"))
		assert.Zero(t, f.Calls("cuMemFree_v2"))
		assert.Equal(t, devBefore, f.Live(fakecuda.DeviceMemory))
		assert.Equal(t, 3, c.OpenObjects(), "the stream and two host buffers")
	}},

	// Issue 14: FreeAsync's argument checks, before any driver call.
	{"PoolFreeAsyncChecks", func(t *testing.T, f *fakecuda.Fake) {
		c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
		s0, err := c0.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		s1, err := c1.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		plain, err := c0.Alloc(16)
		require.NoError(t, err)
		err = s0.FreeAsync(plain)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.EqualError(t, err, "cuda: Stream.FreeAsync: invalid argument: the buffer is not from AllocAsync or AllocFromPool: Close it instead")
		assert.ErrorIs(t, s0.FreeAsync(nil), driver.ErrInvalidArgument)
		b, err := s0.AllocAsync(16)
		require.NoError(t, err)
		assert.ErrorIs(t, s1.FreeAsync(b), driver.ErrWrongContext)
		assert.NotZero(t, b.Ptr(), "a refused free leaves the buffer open")
		_, err = s0.AllocAsync(0)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.Zero(t, f.Calls("cuMemFreeAsync"))
		require.NoError(t, s0.FreeAsync(b))
		require.NoError(t, s0.Close())
		_, err = s0.AllocAsync(16)
		assert.ErrorIs(t, err, driver.ErrClosed)
		assert.Equal(t, 1, f.Calls("cuMemAllocAsync"))
	}},

	// Issue 14: cuMemFree does not wait for stream work on pool memory, so
	// Close of a buffer that was never freed with FreeAsync must wait for
	// the context first. The fake records a violation when pool memory is
	// freed with operations on it still pending.
	{"PoolBufferCloseWaits", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		in := pinned(t, c, 64, 1)
		b, err := s.AllocAsync(64)
		require.NoError(t, err)
		f.ExecDelay(2 * time.Millisecond)
		require.NoError(t, s.CopyToDevice(b, 0, in, 0, 64))
		require.NoError(t, s.Memset(b, 0, 64, 7))
		syncs := f.Calls("cuCtxSynchronize")
		require.NoError(t, b.Close())
		assert.Equal(t, syncs+1, f.Calls("cuCtxSynchronize"))
		assert.Equal(t, 1, f.Calls("cuMemFree_v2"))
		assert.Zero(t, f.Pending())
		// One left for the context's Close to free, with work pending too.
		b2, err := s.AllocAsync(64)
		require.NoError(t, err)
		require.NoError(t, s.Memset(b2, 0, 64, 1))
	}},

	// Issue 14: a created pool has the release threshold it was made with,
	// as the driver reports it; allocations from it round-trip data; the
	// default pool's threshold can be set and read back.
	{"MemPool", func(t *testing.T, f *fakecuda.Fake) {
		c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
		s, err := c0.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		p0, err := c0.NewMemPool(driver.MemPoolOptions{})
		require.NoError(t, err)
		assert.Zero(t, f.Calls("cuMemPoolSetAttribute"), "the zero value sets nothing")
		th, err := p0.ReleaseThreshold()
		require.NoError(t, err)
		assert.Zero(t, th)
		require.NoError(t, p0.Close())

		p, err := c0.NewMemPool(driver.MemPoolOptions{ReleaseThreshold: 64 << 20})
		require.NoError(t, err)
		assert.Equal(t, 1, f.Live(fakecuda.MemPools))
		th, err = p.ReleaseThreshold()
		require.NoError(t, err)
		assert.Equal(t, uint64(64<<20), th)
		require.NoError(t, p.SetReleaseThreshold(driver.KeepAll))
		th, err = p.ReleaseThreshold()
		require.NoError(t, err)
		assert.Equal(t, uint64(driver.KeepAll), th)

		in := pinned(t, c0, 100, 9)
		out := pinned(t, c0, 100, 0)
		for range 5 {
			b, err := s.AllocFromPool(p, 100)
			require.NoError(t, err)
			require.NoError(t, s.CopyToDevice(b, 0, in, 0, 100))
			require.NoError(t, s.CopyToHost(out, 0, b, 0, 100))
			require.NoError(t, s.FreeAsync(b))
		}
		require.NoError(t, s.Synchronize())
		assert.Equal(t, in.Bytes(), out.Bytes())
		assert.Equal(t, 5, f.Calls("cuMemAllocFromPoolAsync"))

		p1, err := c1.NewMemPool(driver.MemPoolOptions{})
		require.NoError(t, err)
		_, err = s.AllocFromPool(p1, 16)
		assert.ErrorIs(t, err, driver.ErrWrongContext)
		_, err = s.AllocFromPool(nil, 16)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		require.NoError(t, p.Close())
		assert.NoError(t, p.Close())
		_, err = s.AllocFromPool(p, 16)
		assert.ErrorIs(t, err, driver.ErrClosed)
		_, err = p.ReleaseThreshold()
		assert.ErrorIs(t, err, driver.ErrClosed)

		require.NoError(t, c0.SetDefaultPoolReleaseThreshold(1<<30))
		th, err = c0.DefaultPoolReleaseThreshold()
		require.NoError(t, err)
		assert.Equal(t, uint64(1<<30), th)
		require.NoError(t, c0.SetDefaultPoolReleaseThreshold(0))
		// p1 is left for its context's Close.
	}},

	// Issue 14: capture H2D, kernel, D2H; instantiate; launch many times;
	// update the exec from a capture with other buffers and arguments; a
	// different topology is refused; closed memory is refused at launch.
	{"GraphCaptureLaunchUpdate", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		fn := fakeKernel(t, f, c)
		const n = 128
		capture := func(d *driver.DeviceBuffer, in, out driver.HostMemory, v int32, copies int) (*driver.Graph, error) {
			args := driver.NewArgs().Buffer(d, 0).Int32(v)
			return s.Capture(func(b *driver.Bound) error {
				if err := b.CopyToDevice(s, d, 0, in, 0, n); err != nil {
					return err
				}
				if err := b.Launch(fn, s, driver.GridFor(n, 64), args); err != nil {
					return err
				}
				if copies == 1 {
					return nil
				}
				return b.CopyToHost(s, out, 0, d, 0, n)
			})
		}
		d1, err := c.Alloc(n)
		require.NoError(t, err)
		in1, out1 := pinned(t, c, n, 5), pinned(t, c, n, 0)
		clear(out1.Bytes())
		g1, err := capture(d1, in1, out1, 7, 2)
		require.NoError(t, err)
		assert.Zero(t, f.Pending(), "captured work is not run")
		assert.Equal(t, 1, f.Calls("cuStreamBeginCapture_v2"))
		capturing, err := s.Capturing()
		require.NoError(t, err)
		assert.False(t, capturing)
		assert.Equal(t, make([]byte, n), out1.Bytes(), "nothing ran at capture")

		e, err := g1.Instantiate()
		require.NoError(t, err)
		require.NoError(t, g1.Close(), "the exec outlives its graph")
		for i := range 100 {
			in1.Bytes()[1] = byte(i)
			require.NoError(t, e.Launch(s))
			require.NoError(t, s.Synchronize())
			require.Equal(t, in1.Bytes(), out1.Bytes(), "launch %d", i)
		}
		p, ok := f.LastParam(1, 4)
		require.True(t, ok)
		assert.Equal(t, int32(7), int32(binary.NativeEndian.Uint32(p)))
		p, _ = f.LastParam(0, 8)
		assert.Equal(t, uint64(d1.Ptr()), binary.NativeEndian.Uint64(p))

		// Same topology, new buffers and argument: update in place.
		d2, err := c.Alloc(n)
		require.NoError(t, err)
		in2, out2 := pinned(t, c, n, 100), pinned(t, c, n, 0)
		g2, err := capture(d2, in2, out2, 9, 2)
		require.NoError(t, err)
		require.NoError(t, e.Update(g2))
		clear(out1.Bytes())
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, in2.Bytes(), out2.Bytes())
		assert.Equal(t, make([]byte, n), out1.Bytes(), "the old buffers are no longer used")
		p, _ = f.LastParam(1, 4)
		assert.Equal(t, int32(9), int32(binary.NativeEndian.Uint32(p)))
		p, _ = f.LastParam(0, 8)
		assert.Equal(t, uint64(d2.Ptr()), binary.NativeEndian.Uint64(p))
		assert.Equal(t, 1, f.Calls("cuGraphInstantiateWithFlags"), "updated, not instantiated again")

		// Another topology: refused, and the exec runs as before.
		g3, err := capture(d1, in1, out1, 1, 1)
		require.NoError(t, err)
		err = e.Update(g3)
		assert.ErrorIs(t, err, driver.ErrGraphUpdate)
		assert.Contains(t, err.Error(), "cuda: cuGraphExecUpdate_v2: CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE (910)")
		assert.Contains(t, err.Error(), ": topology changed")
		clear(out2.Bytes())
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, in2.Bytes(), out2.Bytes())

		// Memory the graph uses, closed: the launch is refused.
		require.NoError(t, out2.Close())
		launches := f.Calls("cuGraphLaunch")
		err = e.Launch(s)
		assert.ErrorIs(t, err, driver.ErrClosed)
		assert.EqualError(t, err, "cuda: GraphExec.Launch: use of closed object: a host buffer that the graph uses was closed")
		assert.Equal(t, launches, f.Calls("cuGraphLaunch"))
		require.NoError(t, e.Close())
		assert.ErrorIs(t, e.Launch(s), driver.ErrClosed)
		assert.ErrorIs(t, e.Update(g2), driver.ErrClosed)
		assert.NoError(t, e.Close())
		// g2 and g3 are left for the context's Close.
		assert.Equal(t, 2, f.Live(fakecuda.Graphs))
	}},

	// Issue 14: a graph built node by node runs its copies and kernel in
	// order, and an exec's kernel arguments and copy buffers change per
	// node without instantiating again; a copy re-pointed at other memory
	// no longer needs its old memory open.
	{"GraphBuiltNodeByNode", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
		require.NoError(t, err)
		f.SetParams(8, 4) // before Function, which reads the layout
		fn, err := m.Function("k")
		require.NoError(t, err)
		const n = 96
		d, err := c.Alloc(n)
		require.NoError(t, err)
		in, out := pinned(t, c, n, 11), pinned(t, c, n, 0)
		clear(out.Bytes())
		g, err := c.NewGraph()
		require.NoError(t, err)
		n1, err := g.AddCopyToDevice(d, 0, in, 0, n)
		require.NoError(t, err)
		cfg := driver.GridFor(n, 32)
		n2, err := g.AddKernel(fn, cfg, driver.NewArgs().Buffer(d, 0).Int32(7), n1)
		require.NoError(t, err)
		n3, err := g.AddCopyToHost(out, 0, d, 0, n, n2)
		require.NoError(t, err)
		other, err := c.NewGraph()
		require.NoError(t, err)
		_, err = other.AddCopyToHost(out, 0, d, 0, n, n2)
		assert.EqualError(t, err, "cuda: Graph.AddCopyToHost: invalid argument: dependency 0 is not a node of this graph")
		_, err = g.AddKernel(fn, cfg, driver.NewArgs().Int32(1))
		assert.ErrorIs(t, err, driver.ErrArguments)
		_, err = g.AddCopyToDevice(d, 1, in, 0, n)
		assert.ErrorIs(t, err, driver.ErrLength)
		assert.Zero(t, f.Pending(), "building runs nothing")

		e, err := g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, in.Bytes(), out.Bytes())
		p, _ := f.LastParam(1, 4)
		assert.Equal(t, int32(7), int32(binary.NativeEndian.Uint32(p)))

		require.NoError(t, e.SetKernel(n2, cfg, driver.NewArgs().Buffer(d, 0).Int32(9)))
		in2, out2 := pinned(t, c, n, 50), pinned(t, c, n, 0)
		clear(out2.Bytes())
		require.NoError(t, e.SetCopyToDevice(n1, d, 0, in2, 0, n))
		require.NoError(t, e.SetCopyToHost(n3, out2, 0, d, 0, n))
		clear(out.Bytes())
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, in2.Bytes(), out2.Bytes())
		assert.Equal(t, make([]byte, n), out.Bytes(), "the old destination is no longer written")
		p, _ = f.LastParam(1, 4)
		assert.Equal(t, int32(9), int32(binary.NativeEndian.Uint32(p)))
		assert.Equal(t, 1, f.Calls("cuGraphInstantiateWithFlags"))

		// The old buffers may go; the new ones may not.
		require.NoError(t, in.Close())
		require.NoError(t, out.Close())
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		require.NoError(t, in2.Close())
		assert.ErrorIs(t, e.Launch(s), driver.ErrClosed)

		assert.ErrorIs(t, e.SetKernel(n1, cfg, driver.NewArgs()), driver.ErrInvalidArgument, "a copy node")
		assert.ErrorIs(t, e.SetCopyToHost(n1, out2, 0, d, 0, n), driver.ErrInvalidArgument, "the other direction")
		o1, err := other.AddCopyToHost(out2, 0, d, 0, n)
		require.NoError(t, err)
		assert.EqualError(t, e.SetCopyToHost(o1, out2, 0, d, 0, n), "cuda: GraphExec.SetCopyToHost: invalid argument: the node is not of the graph the exec was instantiated or last updated from")
		require.NoError(t, g.Close())
		assert.ErrorIs(t, e.SetKernel(n2, cfg, driver.NewArgs().Buffer(d, 0).Int32(1)), driver.ErrClosed)
		require.NoError(t, e.Close())
		assert.ErrorIs(t, e.SetKernel(n2, cfg, driver.NewArgs().Buffer(d, 0).Int32(1)), driver.ErrClosed)
		assert.Equal(t, 1, f.Live(fakecuda.Graphs), "other, left for the context's Close")
	}},

	// Issue 14: a graph's host memory stays registered while an exec made
	// from it may run, even when nothing else references it: the fake
	// records a violation when a launch copies memory no longer registered.
	{"GraphKeepsHostMemory", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		d, err := c.Alloc(64)
		require.NoError(t, err)
		out := pinned(t, c, 64, 0)
		exec := func() *driver.GraphExec {
			mem := make([]byte, 64)
			for i := range mem {
				mem[i] = byte(200 + i)
			}
			reg, err := c.RegisterHost(mem, driver.RegisterOptions{})
			require.NoError(t, err)
			g, err := s.Capture(func(b *driver.Bound) error {
				if err := b.CopyToDevice(s, d, 0, reg, 0, 64); err != nil {
					return err
				}
				return b.CopyToHost(s, out, 0, d, 0, 64)
			})
			require.NoError(t, err)
			e, err := g.Instantiate()
			require.NoError(t, err)
			require.NoError(t, g.Close())
			return e
		}()
		collect(20 * time.Millisecond)
		assert.Equal(t, 1, f.Live(fakecuda.Registrations), "kept registered by the exec")
		require.NoError(t, exec.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, byte(200), out.Bytes()[0])
		assert.Equal(t, byte(200+63-256), out.Bytes()[63])
		require.NoError(t, exec.Close())
	}},

	// Issue 14: capture's errors name the call, end the capture, discard
	// its graph and leave the stream usable.
	{"GraphCaptureErrors", func(t *testing.T, f *fakecuda.Fake) {
		c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
		s, err := c0.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		s1, err := c1.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		d, err := c0.Alloc(64)
		require.NoError(t, err)
		h := pinned(t, c0, 64, 0)
		var nilStream *driver.Stream
		_, err = nilStream.Capture(func(*driver.Bound) error { return nil })
		assert.EqualError(t, err, "cuda: Stream.Capture: invalid argument: nil *Stream")
		_, err = s.Capture(nil)
		assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		assert.Zero(t, f.Calls("cuStreamBeginCapture_v2"))

		mine := errors.New("mine")
		_, err = s.Capture(func(b *driver.Bound) error {
			capturing, err := s.Capturing()
			require.NoError(t, err)
			assert.True(t, capturing)
			_, err = s.Capture(func(*driver.Bound) error { return nil })
			assert.EqualError(t, err, "cuda: Stream.Capture: invalid argument: the stream is already capturing")
			_, err = s.AllocAsync(64)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			require.NoError(t, b.CopyToDevice(s, d, 0, h, 0, 64))
			return mine
		})
		assert.Same(t, mine, err)
		assert.Zero(t, f.Live(fakecuda.Graphs), "the graph of a failed capture is destroyed")

		// A call that capture forbids on the capturing thread invalidates it.
		_, err = s.Capture(func(*driver.Bound) error {
			_, err := c0.Alloc(16)
			return err
		})
		var ce *driver.Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "cuMemAlloc_v2", ce.Op)
		assert.Equal(t, driver.Result(900), ce.Code)
		// Returning nil anyway: the driver's invalidation is reported.
		_, err = s.Capture(func(*driver.Bound) error {
			_, _ = c0.Alloc(16)
			return nil
		})
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "cuStreamEndCapture", ce.Op)
		assert.Equal(t, driver.Result(901), ce.Code)

		// A panic ends the capture too.
		func() {
			defer func() { assert.Equal(t, "boom", recover()) }()
			_, _ = s.Capture(func(*driver.Bound) error { panic("boom") })
		}()
		capturing, err := s.Capturing()
		require.NoError(t, err)
		assert.False(t, capturing)
		assert.Zero(t, f.Live(fakecuda.Graphs))
		// The stream works as before.
		require.NoError(t, s.CopyToHost(h, 0, d, 0, 64))
		require.NoError(t, s.Synchronize())

		// Objects of two contexts.
		g, err := s.Capture(func(b *driver.Bound) error { return b.CopyToDevice(s, d, 0, h, 0, 64) })
		require.NoError(t, err)
		e, err := g.Instantiate()
		require.NoError(t, err)
		assert.ErrorIs(t, e.Launch(s1), driver.ErrWrongContext)
		g1, err := s1.Capture(func(*driver.Bound) error { return nil })
		require.NoError(t, err)
		assert.ErrorIs(t, e.Update(g1), driver.ErrWrongContext)
		assert.ErrorIs(t, e.Launch(nil), driver.ErrInvalidArgument)
		var nilExec *driver.GraphExec
		assert.EqualError(t, nilExec.Launch(s), "cuda: GraphExec.Launch: invalid argument: nil *GraphExec")
		assert.ErrorIs(t, e.Update(nil), driver.ErrInvalidArgument)
		require.NoError(t, g.Close())
		_, err = g.Instantiate()
		assert.ErrorIs(t, err, driver.ErrClosed)
		assert.ErrorIs(t, e.Update(g), driver.ErrClosed)
		assert.Zero(t, f.Calls("cuGraphLaunch"))
		// e and g1 are left for their contexts' Close.
	}},
}
