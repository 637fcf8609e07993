package driver

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The GPU tests of issue 14's pools and graphs: they skip without a driver
// and run on the H200 from the bundle
// (cd driver && ../.gpu/driver.test -test.run 'GPU.*(Pool|Graph)' -test.v).

// addScalarJob is the test kernel add_scalar (y = x + a over n floats)
// with its host and device buffers.
type addScalarJob struct {
	fn      *Function
	n       int
	in, out *HostBuffer
	dx, dy  *DeviceBuffer
	a       float32
}

func (j *addScalarJob) args() *Args {
	return NewArgs().Buffer(j.dy, 0).Buffer(j.dx, 0).Float32(j.a).Uint32(uint32(j.n))
}

// issue queues H2D, kernel and D2H through b.
func (j *addScalarJob) issue(b *Bound, s *Stream, args *Args) error {
	if err := b.CopyToDevice(s, j.dx, 0, j.in, 0, j.n*4); err != nil {
		return err
	}
	if err := b.Launch(j.fn, s, GridFor(j.n, 256), args); err != nil {
		return err
	}
	return b.CopyToHost(s, j.out, 0, j.dy, 0, j.n*4)
}

// fill writes a pattern that depends on round into in and clears out.
func (j *addScalarJob) fill(round int) {
	x := j.in.Float32s()
	for i := range x {
		x[i] = float32(i%4099)*0.25 + float32(round)
	}
	clear(j.out.Bytes())
}

// check compares every element of out with in + a: exact, one IEEE add on
// both sides.
func (j *addScalarJob) check(what string) error {
	x, y := j.in.Float32s(), j.out.Float32s()
	for i := range y {
		if y[i] != x[i]+j.a {
			return fmt.Errorf("%s: y[%d] = %v, want %v", what, i, y[i], x[i]+j.a)
		}
	}
	return nil
}

func newAddScalarJob(t testing.TB, ctx *Context, fn *Function, n int, a float32) *addScalarJob {
	t.Helper()
	j := &addScalarJob{fn: fn, n: n, a: a}
	var err error
	j.in, err = ctx.AllocHost(n*4, HostAllocOptions{})
	require.NoError(t, err)
	j.out, err = ctx.AllocHost(n*4, HostAllocOptions{})
	require.NoError(t, err)
	j.dx, err = ctx.Alloc(n * 4)
	require.NoError(t, err)
	j.dy, err = ctx.Alloc(n * 4)
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, c := range []interface{ Close() error }{j.in, j.out, j.dx, j.dy} {
			assert.NoError(t, c.Close())
		}
	})
	return j
}

// TestGPUPool allocates and frees on a stream in a loop, from the default
// pool and from a created one, runs the kernel on the buffers and checks
// every element; it checks the release thresholds the driver reports.
func TestGPUPool(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	fn, err := m.Function("add_scalar")
	require.NoError(t, err)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()

	saved, err := ctx.DefaultPoolReleaseThreshold()
	require.NoError(t, err)
	require.NoError(t, ctx.SetDefaultPoolReleaseThreshold(KeepAll))
	th, err := ctx.DefaultPoolReleaseThreshold()
	require.NoError(t, err)
	assert.Equal(t, uint64(KeepAll), th)
	defer func() { assert.NoError(t, ctx.SetDefaultPoolReleaseThreshold(saved)) }()

	pool, err := ctx.NewMemPool(MemPoolOptions{ReleaseThreshold: 256 << 20})
	require.NoError(t, err)
	defer pool.Close()
	th, err = pool.ReleaseThreshold()
	require.NoError(t, err)
	assert.Equal(t, uint64(256<<20), th)

	const n = 1<<18 + 5
	j := newAddScalarJob(t, ctx, fn, n, 1.5)
	open := ctx.OpenObjects()
	for _, from := range []*MemPool{nil, pool} {
		for round := range 100 {
			alloc := func() *DeviceBuffer {
				var b *DeviceBuffer
				var err error
				if from == nil {
					b, err = s.AllocAsync(n * 4)
				} else {
					b, err = s.AllocFromPool(from, n*4)
				}
				require.NoError(t, err)
				return b
			}
			dx, dy := alloc(), alloc()
			j.fill(round)
			require.NoError(t, s.CopyToDevice(dx, 0, j.in, 0, n*4))
			require.NoError(t, fn.Launch(s, GridFor(n, 256), NewArgs().Buffer(dy, 0).Buffer(dx, 0).Float32(j.a).Uint32(n)))
			require.NoError(t, s.CopyToHost(j.out, 0, dy, 0, n*4))
			require.NoError(t, s.FreeAsync(dx))
			require.NoError(t, s.FreeAsync(dy))
			require.NoError(t, s.Synchronize())
			require.NoError(t, j.check(fmt.Sprintf("pool %v, round %d", from != nil, round)))
		}
	}
	// A buffer never freed on the stream: Close waits, then frees.
	b, err := s.AllocAsync(64)
	require.NoError(t, err)
	require.NoError(t, s.Memset(b, 0, 64, 3))
	require.NoError(t, b.Close())
	assert.Equal(t, open, ctx.OpenObjects(), "every pool buffer closed")
}

// TestGPUGraph captures H2D, kernel and D2H, instantiates the graph, and
// launches it 100 times, checking every element each time; then updates
// the exec from a capture with other buffers and another scalar, without
// instantiating again, and checks again.
func TestGPUGraph(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	fn, err := m.Function("add_scalar")
	require.NoError(t, err)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()

	const n = 1<<16 + 3
	capture := func(j *addScalarJob) *Graph {
		args := j.args()
		g, err := s.Capture(func(b *Bound) error {
			capturing, err := s.Capturing()
			if err != nil {
				return err
			}
			if !capturing {
				return fmt.Errorf("the driver says the stream is not capturing")
			}
			return j.issue(b, s, args)
		})
		require.NoError(t, err)
		return g
	}
	j1 := newAddScalarJob(t, ctx, fn, n, 1.25)
	g1 := capture(j1)
	defer g1.Close()
	e, err := g1.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	for round := range 100 {
		j1.fill(round)
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		require.NoError(t, j1.check(fmt.Sprintf("launch %d", round)))
	}

	j2 := newAddScalarJob(t, ctx, fn, n, -2.5)
	g2 := capture(j2)
	defer g2.Close()
	require.NoError(t, e.Update(g2))
	j1.fill(0)
	for round := range 20 {
		j2.fill(1000 + round)
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		require.NoError(t, j2.check(fmt.Sprintf("updated launch %d", round)))
	}
	assert.Equal(t, make([]byte, n*4), j1.out.Bytes(), "the old output is no longer written")

	// Another topology (no D2H) is refused and changes nothing.
	args := j1.args()
	g3, err := s.Capture(func(b *Bound) error {
		if err := b.CopyToDevice(s, j1.dx, 0, j1.in, 0, n*4); err != nil {
			return err
		}
		return b.Launch(fn, s, GridFor(n, 256), args)
	})
	require.NoError(t, err)
	defer g3.Close()
	err = e.Update(g3)
	require.ErrorIs(t, err, ErrGraphUpdate)
	t.Log(err)
	j2.fill(7)
	require.NoError(t, e.Launch(s))
	require.NoError(t, s.Synchronize())
	require.NoError(t, j2.check("after a refused update"))

	// A forbidden call inside the capture is the driver's error, and the
	// stream works afterwards.
	_, err = s.Capture(func(b *Bound) error {
		buf, err := ctx.Alloc(16) // cuMemAlloc is not allowed while capturing
		if err == nil {
			_ = buf.Close()
		}
		return err
	})
	require.Error(t, err)
	t.Log(err)
	require.NoError(t, j1.issue(nil, s, j1.args()))
	require.NoError(t, s.Synchronize())
	require.NoError(t, j1.check("stream issue after a failed capture"))
}

// TestGPUGraphNodes builds H2D, kernel and D2H node by node, launches the
// graph 100 times checking every element, then points its copies and its
// kernel at other buffers and another scalar, per node and without
// instantiating again, and checks again.
func TestGPUGraphNodes(t *testing.T) {
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
	j1 := newAddScalarJob(t, ctx, fn, n, 0.75)
	g, err := ctx.NewGraph()
	require.NoError(t, err)
	defer g.Close()
	h2d, err := g.AddCopyToDevice(j1.dx, 0, j1.in, 0, n*4)
	require.NoError(t, err)
	kern, err := g.AddKernel(fn, cfg, j1.args(), h2d)
	require.NoError(t, err)
	d2h, err := g.AddCopyToHost(j1.out, 0, j1.dy, 0, n*4, kern)
	require.NoError(t, err)
	e, err := g.Instantiate()
	require.NoError(t, err)
	defer e.Close()
	for round := range 100 {
		j1.fill(round)
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		require.NoError(t, j1.check(fmt.Sprintf("launch %d", round)))
	}

	j2 := newAddScalarJob(t, ctx, fn, n, 3)
	require.NoError(t, e.SetCopyToDevice(h2d, j2.dx, 0, j2.in, 0, n*4))
	require.NoError(t, e.SetKernel(kern, cfg, j2.args()))
	require.NoError(t, e.SetCopyToHost(d2h, j2.out, 0, j2.dy, 0, n*4))
	j1.fill(0)
	for round := range 20 {
		j2.fill(500 + round)
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		require.NoError(t, j2.check(fmt.Sprintf("re-pointed launch %d", round)))
	}
	assert.Equal(t, make([]byte, n*4), j1.out.Bytes(), "the old output is no longer written")
}

// BenchmarkGraph compares one job (H2D, kernel, D2H of 4096 floats), issued
// as three stream calls or as one graph launch: "job" waits for each job,
// "issue" measures the host's issue cost alone (waiting every 256 jobs).
func BenchmarkGraph(b *testing.B) {
	for _, mode := range []string{"job", "issue"} {
		for _, how := range []string{"stream", "graph"} {
			b.Run(mode+"/"+how, func(b *testing.B) { benchGraph(b, how == "graph", mode == "job") })
		}
	}
}

func benchGraph(b *testing.B, useGraph, wait bool) {
	ctx := requireGPU(b)
	m := loadTestKernels(b, ctx)
	defer m.Close()
	fn, err := m.Function("add_scalar")
	require.NoError(b, err)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(b, err)
	defer s.Close()
	j := newAddScalarJob(b, ctx, fn, 4096, 1)
	args := j.args()
	bd, err := ctx.Bind()
	require.NoError(b, err)
	defer bd.Release()
	run := func() error { return j.issue(bd, s, args) }
	if useGraph {
		g, err := s.Capture(func(b *Bound) error { return j.issue(b, s, args) })
		require.NoError(b, err)
		defer g.Close()
		e, err := g.Instantiate()
		require.NoError(b, err)
		defer e.Close()
		run = func() error { return bd.LaunchGraph(e, s) }
	}
	for range 100 {
		require.NoError(b, run())
	}
	require.NoError(b, s.Synchronize())
	j.fill(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := run(); err != nil {
			b.Fatal(err)
		}
		if wait || i%256 == 255 {
			if err := s.Synchronize(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Synchronize(); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := j.check("after the benchmark"); err != nil {
		b.Fatal(err)
	}
}
