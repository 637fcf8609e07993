package driver

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The GPU tests of the reliability audit's driver findings; they skip
// without a driver and run on the H200 from the bundle
// (cd driver && ../.gpu/driver.test -test.run 'GPU(Capture|GraphUpdate|GraphLaunchHost)' -test.v).

// whileCollecting runs fn while another goroutine collects garbage in a
// loop (gputest.WhileCollecting, which this package's own tests cannot
// import).
func whileCollecting(fn func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
}

// makeAddScalarJob is newAddScalarJob without the test's cleanups: the
// buffers are closed with their context.
func makeAddScalarJob(ctx *Context, fn *Function, n int, a float32) (*addScalarJob, error) {
	j := &addScalarJob{fn: fn, n: n, a: a}
	var err error
	if j.in, err = ctx.AllocHost(n*4, HostAllocOptions{}); err != nil {
		return nil, err
	}
	if j.out, err = ctx.AllocHost(n*4, HostAllocOptions{}); err != nil {
		return nil, err
	}
	if j.dx, err = ctx.Alloc(n * 4); err != nil {
		return nil, err
	}
	if j.dy, err = ctx.Alloc(n * 4); err != nil {
		return nil, err
	}
	return j, nil
}

// TestGPUCaptureRacesClose is the audit's finding 1 on the GPU: each
// round, one goroutine captures H2D, add_scalar and D2H on a stream while
// another closes the stream, its Context or another Context of the device
// (in turn) after a random delay, with the collector running all the
// while. Close must return nil, and Capture a graph or ErrClosed; a graph
// whose context is still open must run and give exact results. On the
// H200 (run 1), Context.Close failed here: it waited for the context (and
// closed host memory that the capture's copies use, by waiting for the
// context too) while another thread captured, which the driver refuses
// in every capture mode; the Contexts of a device share its primary
// context, so another Context's Close must wait for the capture as well.
// Afterwards cuMemAlloc must work from every thread: a thread left in
// capture mode fails it with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
func TestGPUCaptureRacesClose(t *testing.T) {
	base := requireGPU(t) // keeps the primary context retained: each round's Context is cheap
	dev := base.Device()
	const n = 1 << 14
	rounds := 200
	if testing.Short() {
		rounds = 40
	}
	var captured, refused, checked int
	whileCollecting(func() {
		for i := range rounds {
			ctx, err := NewContext(dev)
			require.NoError(t, err)
			s, err := ctx.NewStream(StreamOptions{})
			require.NoError(t, err)
			m := loadTestKernels(t, ctx)
			fn, err := m.Function("add_scalar")
			require.NoError(t, err)
			j, err := makeAddScalarJob(ctx, fn, n, float32(i%7)+0.5)
			require.NoError(t, err)
			args := j.args()
			other, err := NewContext(dev)
			require.NoError(t, err)
			_, err = other.Alloc(4096) // an object: its Close waits for the context
			require.NoError(t, err)
			closer := [...]func() error{s.Close, ctx.Close, other.Close}[i%3]
			delay := time.Duration(rand.IntN(150)) * time.Microsecond
			var g *Graph
			var capErr, closeErr error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				g, capErr = s.Capture(func(b *Bound) error { return j.issue(b, s, args) })
			}()
			go func() {
				defer wg.Done()
				time.Sleep(delay)
				closeErr = closer()
			}()
			wg.Wait()
			require.NoError(t, closeErr, "round %d: Close", i)
			if capErr != nil {
				refused++
				require.ErrorIs(t, capErr, ErrClosed, "round %d: Capture", i)
			} else {
				captured++
				if ctx.Handle() != 0 { // the stream or the other Context was closed, not this one
					e, err := g.Instantiate()
					require.NoError(t, err, "round %d", i)
					s2, err := ctx.NewStream(StreamOptions{})
					require.NoError(t, err)
					j.fill(i)
					require.NoError(t, e.Launch(s2), "round %d", i)
					require.NoError(t, s2.Synchronize(), "round %d", i)
					require.NoError(t, j.check(fmt.Sprintf("round %d", i)))
					checked++
				}
				require.NoError(t, g.Close())
			}
			require.NoError(t, ctx.Close(), "round %d", i)
			require.NoError(t, other.Close(), "round %d", i)
		}
	})
	t.Logf("%d rounds: %d captures finished (%d of them run and checked), %d refused with ErrClosed", rounds, captured, checked, refused)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []error
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 32 {
				b, err := base.Alloc(4096)
				if err == nil {
					err = b.Close()
				}
				if err != nil {
					mu.Lock()
					failed = append(failed, err)
					mu.Unlock()
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
	require.Empty(t, failed, "1024 allocations from every thread after the captures")
	assert.Zero(t, base.OpenObjects())
}

// TestGPUGraphUpdateThenSetNodes is the audit's finding 2 on the GPU:
// after GraphExec.Update(g2), the nodes of g2 identify the exec's nodes,
// also once the graph it was instantiated from is closed; those of that
// graph are refused. The exec's copies and kernel are re-pointed through
// g2's nodes at a third set of buffers and checked element by element. On
// the H200 (run 1), the first Set through g2's nodes failed: the driver
// names the exec's nodes by the handles of the graph it was instantiated
// from, so the binding now passes those (g1's Close leaves g1 for e).
func TestGPUGraphUpdateThenSetNodes(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	fn, err := m.Function("add_scalar")
	require.NoError(t, err)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	const n = 1<<16 + 3
	cfg := GridFor(n, 256)
	type built struct {
		g              *Graph
		h2d, kern, d2h GraphNode
	}
	build := func(j *addScalarJob) built {
		var b built
		var err error
		b.g, err = ctx.NewGraph()
		require.NoError(t, err)
		b.h2d, err = b.g.AddCopyToDevice(j.dx, 0, j.in, 0, n*4)
		require.NoError(t, err)
		b.kern, err = b.g.AddKernel(fn, cfg, j.args(), b.h2d)
		require.NoError(t, err)
		b.d2h, err = b.g.AddCopyToHost(j.out, 0, j.dy, 0, n*4, b.kern)
		require.NoError(t, err)
		return b
	}
	j1, j2, j3 := newAddScalarJob(t, ctx, fn, n, 1), newAddScalarJob(t, ctx, fn, n, 2), newAddScalarJob(t, ctx, fn, n, -3.5)
	g1, g2 := build(j1), build(j2)
	defer g2.g.Close()
	e, err := g1.g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	j1.fill(1)
	require.NoError(t, e.Launch(s))
	require.NoError(t, s.Synchronize())
	require.NoError(t, j1.check("instantiated"))

	require.NoError(t, e.Update(g2.g))
	require.NoError(t, g1.g.Close())
	j2.fill(2)
	require.NoError(t, e.Launch(s))
	require.NoError(t, s.Synchronize())
	require.NoError(t, j2.check("updated"))

	assert.ErrorIs(t, e.SetKernel(g1.kern, cfg, j3.args()), ErrInvalidArgument, "a node of the graph e was made from")
	require.NoError(t, e.SetCopyToDevice(g2.h2d, j3.dx, 0, j3.in, 0, n*4))
	require.NoError(t, e.SetKernel(g2.kern, cfg, j3.args()))
	require.NoError(t, e.SetCopyToHost(g2.d2h, j3.out, 0, j3.dy, 0, n*4))
	j2.fill(0)
	for round := range 10 {
		j3.fill(100 + round)
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		require.NoError(t, j3.check(fmt.Sprintf("re-pointed through g2's nodes, launch %d", round)))
	}
	assert.Equal(t, make([]byte, n*4), j2.out.Bytes(), "g2's output is no longer written")
}

// TestGPUGraphLaunchHostMemoryClose is the audit's missing test 4a on the
// GPU: a graph that spins for about 20 ms, then copies 64 MiB from host
// memory and back into other host memory, is launched, and the host
// memory (pinned or registered, the source or the destination) is closed
// at once. Close must return only once the launch is done: an event
// recorded after the launch is done when Close returns.
func TestGPUGraphLaunchHostMemoryClose(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	spin, err := m.Function("spin")
	require.NoError(t, err)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	ev, err := ctx.NewEvent(EventOptions{})
	require.NoError(t, err)
	defer ev.Close()
	const size = 64 << 20
	d, err := ctx.Alloc(size)
	require.NoError(t, err)
	defer d.Close()
	for _, tc := range []struct {
		name       string
		registered bool
		closeSrc   bool
	}{
		{"pinned source", false, true},
		{"registered source", true, true},
		{"pinned destination", false, false},
		{"registered destination", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := func() (HostMemory, func() error) {
				if tc.registered {
					r, err := ctx.RegisterHost(make([]byte, size), RegisterOptions{})
					require.NoError(t, err)
					return r, r.Close
				}
				h, err := ctx.AllocHost(size, HostAllocOptions{})
				require.NoError(t, err)
				return h, h.Close
			}
			src, closeSrc := mem()
			dst, closeDst := mem()
			g, err := ctx.NewGraph()
			require.NoError(t, err)
			k, err := g.AddKernel(spin, LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 1}}, NewArgs().Uint64(40_000_000))
			require.NoError(t, err)
			h2d, err := g.AddCopyToDevice(d, 0, src, 0, size, k)
			require.NoError(t, err)
			_, err = g.AddCopyToHost(dst, 0, d, 0, size, h2d)
			require.NoError(t, err)
			e, err := g.Instantiate()
			require.NoError(t, err)
			require.NoError(t, g.Close())
			defer e.Close()

			require.NoError(t, e.Launch(s))
			require.NoError(t, ev.Record(s))
			closing, other := closeSrc, closeDst
			if !tc.closeSrc {
				closing, other = closeDst, closeSrc
			}
			start := time.Now()
			require.NoError(t, closing())
			took := time.Since(start)
			done, err := ev.Done()
			require.NoError(t, err)
			assert.True(t, done, "Close returned after %v, before the launch that uses the memory was done", took)
			t.Logf("Close waited %v for the launch", took)
			assert.ErrorIs(t, e.Launch(s), ErrClosed, "the closed memory is refused at the next launch")
			require.NoError(t, other())
		})
	}
}
