//go:build linux

package driver_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() { fakeCases = append(fakeCases, reliabilityCases...) }

// reliabilityCases are the reliability audit's cheaper cases, run inside
// TestFakeDriver (and so by `make stackmove` and `make directcalls`).
var reliabilityCases = []fakeCase{
	// The audit's finding 2: GraphExec.Update did not record its new
	// source graph. After Update(g2) the nodes of g2 identify e's nodes
	// for the Set methods and those of g1 are refused; g1 may be closed;
	// a re-pointed copy of g2's node lets go of what that node used. On
	// the H200, the driver named e's nodes by g1's handles only (as its
	// documentation says: nodes of the graph e was instantiated from);
	// the fake does the same, and records a violation when those nodes
	// are used after g1 was destroyed: g1's Close leaves it for e's.
	{"GraphExecUpdateSource", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		fn := fakeKernel(t, f, c)
		const n = 64
		cfg := driver.GridFor(n, 32)
		type built struct {
			g              *driver.Graph
			h2d, kern, d2h driver.GraphNode
			d              *driver.DeviceBuffer
			in, out        *driver.HostBuffer
		}
		build := func(seed byte, v int32) built {
			var b built
			var err error
			b.d, err = c.Alloc(n)
			require.NoError(t, err)
			b.in, b.out = pinned(t, c, n, seed), pinned(t, c, n, 0)
			clear(b.out.Bytes())
			b.g, err = c.NewGraph()
			require.NoError(t, err)
			b.h2d, err = b.g.AddCopyToDevice(b.d, 0, b.in, 0, n)
			require.NoError(t, err)
			b.kern, err = b.g.AddKernel(fn, cfg, driver.NewArgs().Buffer(b.d, 0).Int32(v), b.h2d)
			require.NoError(t, err)
			b.d2h, err = b.g.AddCopyToHost(b.out, 0, b.d, 0, n, b.kern)
			require.NoError(t, err)
			return b
		}
		g1, g2 := build(10, 1), build(20, 2)
		e, err := g1.g.Instantiate()
		require.NoError(t, err)
		require.NoError(t, e.Update(g2.g))

		require.NoError(t, e.SetKernel(g2.kern, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(3)),
			"a node of the graph e was last updated from")
		assert.EqualError(t, e.SetKernel(g1.kern, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(3)),
			"cuda: GraphExec.SetKernel: invalid argument: the node is not of the graph the exec was instantiated or last updated from")
		require.NoError(t, g1.g.Close())
		require.NoError(t, e.SetKernel(g2.kern, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(4)),
			"the graph e was instantiated from is closed")
		_, err = g1.g.Instantiate()
		assert.ErrorIs(t, err, driver.ErrClosed, "g1 is closed for its user")
		late, err := g2.g.AddKernel(fn, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(9), g2.d2h)
		require.NoError(t, err)
		assert.EqualError(t, e.SetKernel(late, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(9)),
			"cuda: GraphExec.SetKernel: invalid argument: the node was added after the exec was instantiated or updated, or the exec was instantiated from a captured graph")

		// Re-point g2's H2D at other memory: g2's old source may go, the
		// new one may not.
		in3 := pinned(t, c, n, 30)
		require.NoError(t, e.SetCopyToDevice(g2.h2d, g2.d, 0, in3, 0, n))
		require.NoError(t, g2.in.Close())
		require.NoError(t, g1.in.Close(), "g1's memory is not e's since the update")
		require.NoError(t, g1.out.Close())
		require.NoError(t, e.Launch(s))
		require.NoError(t, s.Synchronize())
		assert.Equal(t, in3.Bytes(), g2.out.Bytes(), "the data came from the re-pointed source")
		p, _ := f.LastParam(1, 4)
		assert.Equal(t, []byte{4, 0, 0, 0}, p, "the argument set through g2's node")
		require.NoError(t, in3.Close())
		assert.ErrorIs(t, e.Launch(s), driver.ErrClosed, "the new source is checked at launch")

		// A failed update leaves the source as it was.
		g3 := build(40, 5)
		_, err = g3.g.AddKernel(fn, cfg, driver.NewArgs().Buffer(g3.d, 0).Int32(6), g3.d2h)
		require.NoError(t, err)
		assert.ErrorIs(t, e.Update(g3.g), driver.ErrGraphUpdate)
		require.NoError(t, e.SetKernel(g2.kern, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(7)))
		assert.ErrorIs(t, e.SetKernel(g3.kern, cfg, driver.NewArgs().Buffer(g3.d, 0).Int32(7)), driver.ErrInvalidArgument)
		require.NoError(t, g2.g.Close())
		assert.ErrorIs(t, e.SetKernel(g2.kern, cfg, driver.NewArgs().Buffer(g2.d, 0).Int32(8)), driver.ErrClosed,
			"the source graph closed: its nodes are gone")
		graphs := f.Live(fakecuda.Graphs) // g1, kept for e, and g3
		require.NoError(t, e.Close())
		assert.Equal(t, graphs-1, f.Live(fakecuda.Graphs), "e's Close destroyed g1")
		require.NoError(t, g3.g.Close())
	}},

	// On the H200, Close mid-capture failed: the driver refuses to wait
	// for a context, or a stream, while a stream of it is capturing
	// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, in every capture mode and
	// from every thread) and invalidates the capture; the fake now does
	// the same. Mid-capture, a Close of host memory that a copy queued
	// before the capture used must return nil without such a wait
	// (Capture waited for that copy before it began), a Stream.Close
	// waits for the capture and its graph, and a Context.Close waits for
	// the capture to end, which then returns ErrClosed. So does the Close
	// of another Context of the device: they share its primary context.
	{"CloseWhileCapturing", func(t *testing.T, f *fakecuda.Fake) {
		dev, err := driver.DeviceAt(0)
		require.NoError(t, err)
		const n = 256
		const hold = 20 * time.Millisecond
		for _, closing := range []string{"the stream", "the context", "another context"} {
			c, err := driver.NewContext(dev)
			require.NoError(t, err)
			other, err := driver.NewContext(dev)
			require.NoError(t, err)
			_, err = other.Alloc(n) // an object: its Close waits for the context
			require.NoError(t, err)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			d, err := c.Alloc(n)
			require.NoError(t, err)
			in, out := pinned(t, c, n, 1), pinned(t, c, n, 0)
			f.ExecDelay(hold)
			require.NoError(t, s.CopyToDevice(d, 0, in, 0, n)) // pending for hold
			started, proceed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var g *driver.Graph
			var capErr error
			go func() {
				defer close(done)
				g, capErr = s.Capture(func(b *driver.Bound) error {
					close(started)
					<-proceed
					return b.CopyToHost(s, out, 0, d, 0, n)
				})
			}()
			<-started
			f.ExecDelay(0)
			assert.Zero(t, f.Pending(), "Capture waited for the copy queued before it")
			require.NoError(t, in.Close(), "closing memory that a copy before the capture used")
			closer := map[string]func() error{"the stream": s.Close, "the context": c.Close, "another context": other.Close}[closing]
			closed := make(chan error, 1)
			go func() { closed <- closer() }()
			time.Sleep(hold)
			select {
			case err := <-closed:
				t.Fatalf("closing %s returned %v mid-capture", closing, err)
			default:
			}
			close(proceed)
			require.NoError(t, <-closed, "closing %s mid-capture", closing)
			<-done
			if closing == "the context" {
				require.ErrorIs(t, capErr, driver.ErrClosed)
			} else {
				require.NoError(t, capErr, "closing %s", closing)
				require.NoError(t, g.Close())
			}
			require.NoError(t, c.Close())
			require.NoError(t, other.Close())
			assert.Zero(t, f.CapturingThreads())
		}
	}},

	// The audit's missing test 4a: host memory that a queued graph launch
	// copies from or into stays pinned or registered until the launch's
	// copies have run; its Close waits for them. The fake records a
	// violation when memory is freed or unregistered with a copy on it
	// pending, or a copy runs on memory no longer pinned.
	{"GraphLaunchHostMemoryClose", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		const n = 4096
		d, err := c.Alloc(n)
		require.NoError(t, err)
		const opDelay = 20 * time.Millisecond
		for _, tc := range []struct {
			name      string
			built     bool
			closeSrc  bool // close the H2D's source, else the D2H's destination
			registerd bool // the closed memory is a registration, else pinned
		}{
			{"captured/pinned source", false, true, false},
			{"captured/registered source", false, true, true},
			{"captured/pinned destination", false, false, false},
			{"captured/registered destination", false, false, true},
			{"built/pinned source", true, true, false},
			{"built/registered destination", true, false, true},
		} {
			mem := func() (driver.HostMemory, func() error) {
				if tc.registerd {
					r, err := c.RegisterHost(make([]byte, n), driver.RegisterOptions{})
					require.NoError(t, err)
					return r, r.Close
				}
				h := pinned(t, c, n, 0)
				return h, h.Close
			}
			src, closeSrc := mem()
			dst, closeDst := mem()
			var g *driver.Graph
			if tc.built {
				g, err = c.NewGraph()
				require.NoError(t, err)
				h2d, err := g.AddCopyToDevice(d, 0, src, 0, n)
				require.NoError(t, err)
				_, err = g.AddCopyToHost(dst, 0, d, 0, n, h2d)
				require.NoError(t, err)
			} else {
				g, err = s.Capture(func(b *driver.Bound) error {
					if err := b.CopyToDevice(s, d, 0, src, 0, n); err != nil {
						return err
					}
					return b.CopyToHost(s, dst, 0, d, 0, n)
				})
				require.NoError(t, err)
			}
			e, err := g.Instantiate()
			require.NoError(t, err)
			require.NoError(t, g.Close())
			// Nothing from the capture or an earlier row is left to wait
			// for: only the launch's own bookkeeping can make Close wait.
			require.NoError(t, s.Synchronize())
			f.ExecDelay(opDelay)
			require.NoError(t, e.Launch(s), tc.name)
			closing, other := closeSrc, closeDst
			if !tc.closeSrc {
				closing, other = closeDst, closeSrc
			}
			start := time.Now()
			require.NoError(t, closing(), tc.name)
			took := time.Since(start)
			assert.GreaterOrEqual(t, took, opDelay*3/4, "%s: Close returned before the launch's copies ran", tc.name)
			f.ExecDelay(0)
			require.NoError(t, s.Synchronize())
			f.Clean(t)
			assert.ErrorIs(t, e.Launch(s), driver.ErrClosed, "%s: the closed memory is refused at the next launch", tc.name)
			require.NoError(t, e.Close())
			require.NoError(t, other())
		}
	}},

	// The audit's missing test 4b: seeing an event done lets go of the
	// host memory that copies queued before its Record used, and nothing
	// more. A Record of the same event that lands after the driver's wait
	// and before Synchronize (or Done) returns must not let go of the
	// memory of the copies queued before that later Record, which may
	// still be pending: the memory's Close must wait for them.
	{"EventRecordRacesWait", func(t *testing.T, f *fakecuda.Fake) {
		c := gputest.FakeContext(t, 0)
		s, err := c.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		const n = 4096
		d, err := c.Alloc(n)
		require.NoError(t, err)
		e, err := c.NewEvent(driver.EventOptions{})
		require.NoError(t, err)
		const hold, opDelay = 60 * time.Millisecond, 80 * time.Millisecond
		for _, wait := range []struct {
			name   string
			export string
			call   func() error
		}{
			{"Synchronize", "cuEventSynchronize.return", e.Synchronize},
			{"Done", "cuEventQuery.return", func() error {
				done, err := e.Done()
				if err == nil && !done {
					err = errors.New("the event is not done")
				}
				return err
			}},
		} {
			h := pinned(t, c, n, 0)
			require.NoError(t, s.CopyToDevice(d, 0, h, 0, n))
			require.NoError(t, e.Record(s))
			require.NoError(t, s.Synchronize(), "the first copy and record have run")
			require.NoError(t, s.CopyToDevice(d, 0, h, 0, n))
			require.NoError(t, e.Record(s))
			for f.Pending() > 0 { // run, unseen by the binding
				time.Sleep(100 * time.Microsecond)
			}

			f.Delay(wait.export, hold)
			entered := f.Calls(wait.export)
			waited := make(chan error, 1)
			go func() { waited <- wait.call() }()
			// The fake counts the call at the start of the delay after its
			// wait: from then on, the wait is done and the call has not
			// returned.
			for deadline := time.Now().Add(10 * time.Second); f.Calls(wait.export) == entered; {
				require.True(t, time.Now().Before(deadline), "%s never reached the driver", wait.name)
				time.Sleep(100 * time.Microsecond)
			}
			f.ExecDelay(opDelay)
			require.NoError(t, s.CopyToDevice(d, 0, h, 0, n), wait.name) // pending for opDelay
			require.NoError(t, e.Record(s), wait.name)
			require.NoError(t, <-waited, wait.name)
			f.Delay(wait.export, 0)

			// The fake records a violation if Close frees the memory with
			// the last copy pending.
			require.NoError(t, h.Close(), wait.name)
			f.ExecDelay(0)
			require.NoError(t, s.Synchronize())
			f.Clean(t)
		}
	}},

	// The audit's missing test 4c: a Bound with DirectCalls under the same
	// adversarial load as the safe path: every object it issues on, and
	// its context, closed while it issues, and the collector running all
	// the while. Each call returns nil or ErrClosed; the fake records no
	// handle used after it was destroyed and no host memory freed under a
	// pending copy; nothing leaks. Without the overlap_directcalls tag the
	// same load runs on the safe path.
	{"DirectCallsUnderClose", func(t *testing.T, f *fakecuda.Fake) {
		dev, err := driver.DeviceAt(0)
		require.NoError(t, err)
		f.SetParams(8, 4)
		const n = 1024
		rounds := 160
		if testing.Short() {
			rounds = 40
		}
		victims := []string{"stream", "device buffer", "pinned source", "registered destination", "event", "module", "graph exec", "context"}
		gputest.WhileCollecting(func() {
			for i := range rounds {
				c, err := driver.NewContext(dev)
				require.NoError(t, err)
				s, err := c.NewStream(driver.StreamOptions{})
				require.NoError(t, err)
				d, err := c.Alloc(n)
				require.NoError(t, err)
				in := pinned(t, c, n, byte(i))
				out, err := c.RegisterHost(make([]byte, n), driver.RegisterOptions{})
				require.NoError(t, err)
				ev, err := c.NewEvent(driver.EventOptions{})
				require.NoError(t, err)
				m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
				require.NoError(t, err)
				fn, err := m.Function("k")
				require.NoError(t, err)
				g, err := s.Capture(func(b *driver.Bound) error { return b.CopyToDevice(s, d, 0, in, 0, n) })
				require.NoError(t, err)
				e, err := g.Instantiate()
				require.NoError(t, err)
				require.NoError(t, g.Close())
				victim := victims[i%len(victims)]
				closers := map[string]func() error{
					"stream": s.Close, "device buffer": d.Close, "pinned source": in.Close,
					"registered destination": out.Close, "event": ev.Close, "module": m.Close,
					"graph exec": e.Close, "context": c.Close,
				}
				args := driver.NewArgs().Buffer(d, 0).Int32(int32(i))
				f.ExecDelay(time.Duration(i%3) * 20 * time.Microsecond)
				if victim == "context" {
					// Copies queued after Close's wait for the context,
					// before it closes the memory, must still be waited for.
					f.Delay("cuCtxSynchronize.return", 2*time.Millisecond)
				}
				issued := make(chan int, 1)
				var issueErr error
				started := make(chan struct{})
				go func() {
					var b driver.Bound
					if err := c.BindWith(&b, driver.BindOptions{DirectCalls: true}); err != nil {
						issueErr = err
						close(started)
						issued <- 0
						return
					}
					defer b.Release()
					close(started)
					k := 0
					for ; k < 400; k++ {
						for _, err := range []error{
							b.CopyToDevice(s, d, 0, in, 0, n),
							b.Launch(fn, s, driver.GridFor(n, 64), args),
							b.Record(ev, s),
							b.WaitEvent(s, ev),
							b.LaunchGraph(e, s),
							b.CopyToHost(s, out, 0, d, 0, n),
						} {
							if err != nil && issueErr == nil {
								issueErr = err
							}
						}
						if k%8 == 7 {
							if err := b.Synchronize(s); err != nil && issueErr == nil {
								issueErr = err
							}
						}
						if issueErr != nil {
							break
						}
					}
					issued <- k
				}()
				<-started
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				require.NoError(t, closers[victim](), "round %d: closing the %s", i, victim)
				k := <-issued
				if issueErr != nil {
					require.ErrorIs(t, issueErr, driver.ErrClosed, "round %d: closing the %s after %d rounds of calls", i, victim, k)
				}
				f.ExecDelay(0)
				f.Delay("cuCtxSynchronize.return", 0)
				require.NoError(t, c.Close(), "round %d", i)
				if v, msg := f.Violations(); v > 0 {
					t.Fatalf("round %d (closing the %s): the fake driver recorded %d violation(s); the last: %s", i, victim, v, msg)
				}
				require.Zero(t, f.PrimaryRefs(0), "round %d", i)
			}
		})
	}},
}
