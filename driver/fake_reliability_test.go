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
	"github.com/stretchr/testify/require"
)

func init() { fakeCases = append(fakeCases, reliabilityCases...) }

// reliabilityCases are the reliability audit's cheaper cases, run inside
// TestFakeDriver (and so by `make stackmove` and `make directcalls`).
var reliabilityCases = []fakeCase{
	// The audit's missing test 4b: seeing an event done lets go of the
	// host memory that copies queued before its Record used, and nothing
	// more. A Record of the same event that lands after the driver's wait
	// and before Synchronize (or Done) returns must not let go of the
	// memory of the copies queued before that later Record, which may
	// still be pending: the memory's Close must wait for them.
	{"EventRecordRacesWait", func(t *testing.T, f *fakecuda.Fake) {
		c := fakeContext(t, 0)
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
