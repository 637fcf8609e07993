//go:build linux

package driver_test

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/require"
)

// TestFakeDriverAdversarial runs the reliability audit's adversarial cases
// against the fake driver: many rounds of calls racing Close, under the
// race detector in `make race`, with the collector running all the while.
// They are kept out of TestFakeDriver, which `make stackmove` runs with
// every call moving the stack, where a thousand rounds would take minutes.
func TestFakeDriverAdversarial(t *testing.T) {
	s := gputest.Fake(t)
	if s == nil {
		return
	}
	runFakeCases(t, s, adversarialCases)
}

// captureRounds is how many rounds the capture-versus-Close case runs: the
// audit's reproducer ran a thousand.
func captureRounds() int {
	if testing.Short() {
		return 200
	}
	return 1000
}

var adversarialCases = []fakeCase{
	// The reliability audit's finding 1: Capture raced Stream.Close and
	// Context.Close. The stream was not held while the capture function
	// ran, so Close destroyed it mid-capture; the capture then never ended
	// and its OS thread went back to the scheduler in capture mode, where
	// cuMemAlloc fails; and the graph was untracked between the end of the
	// capture and its adoption, so Context.Close released the context with
	// the graph alive and Capture destroyed it once more. Each round, one
	// goroutine captures H2D, kernel and D2H while another closes the
	// stream (even rounds) or the context (odd rounds) after a random
	// delay. Capture must return a graph or ErrClosed, every Close nil; the
	// fake must record no violation and no thread may be left in capture
	// mode; afterwards cuMemAlloc works on every thread.
	{"CaptureRacesClose", func(t *testing.T, f *fakecuda.Fake) {
		dev, err := driver.DeviceAt(0)
		require.NoError(t, err)
		f.SetParams(8, 4)
		// A captured copy takes a little while, so that Close often lands
		// in the middle of the capture.
		f.Delay("cuMemcpyHtoDAsync_v2", 30*time.Microsecond)
		const n = 256
		rounds := captureRounds()
		var captured, refused int
		gputest.WhileCollecting(func() {
			for i := range rounds {
				c, err := driver.NewContext(dev)
				require.NoError(t, err)
				s, err := c.NewStream(driver.StreamOptions{})
				require.NoError(t, err)
				d, err := c.Alloc(n)
				require.NoError(t, err)
				h, err := c.AllocHost(n, driver.HostAllocOptions{})
				require.NoError(t, err)
				m, err := c.LoadModule([]byte("// any"), driver.ModuleOptions{})
				require.NoError(t, err)
				fn, err := m.Function("k")
				require.NoError(t, err)
				args := driver.NewArgs().Buffer(d, 0).Int32(int32(i))
				closer := c.Close
				if i%2 == 0 {
					closer = s.Close
				}
				delay := time.Duration(rand.IntN(120)) * time.Microsecond
				var g *driver.Graph
				var capErr, closeErr error
				var wg sync.WaitGroup
				wg.Add(2)
				go func() {
					defer wg.Done()
					g, capErr = s.Capture(func(b *driver.Bound) error {
						if err := b.CopyToDevice(s, d, 0, h, 0, n); err != nil {
							return err
						}
						if err := b.Launch(fn, s, driver.GridFor(n, 64), args); err != nil {
							return err
						}
						runtime.Gosched()
						return b.CopyToHost(s, h, 0, d, 0, n)
					})
				}()
				go func() {
					defer wg.Done()
					time.Sleep(delay)
					closeErr = closer()
				}()
				wg.Wait()
				require.NoError(t, closeErr, "round %d: Close", i)
				if capErr == nil {
					captured++
					require.NotNil(t, g)
					require.NoError(t, g.Close(), "round %d", i)
				} else {
					refused++
					require.ErrorIs(t, capErr, driver.ErrClosed, "round %d: Capture", i)
				}
				require.NoError(t, c.Close(), "round %d", i)
				if v, msg := f.Violations(); v > 0 {
					t.Fatalf("round %d: the fake driver recorded %d violation(s); the last: %s", i, v, msg)
				}
				require.Zero(t, f.CapturingThreads(), "round %d: threads left in capture mode", i)
				require.Zero(t, f.PrimaryRefs(0), "round %d", i)
			}
		})
		t.Logf("%d rounds: %d captures finished, %d refused with ErrClosed", rounds, captured, refused)

		// Fresh contexts allocate from every thread the captures ran on.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var failed []error
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 64 {
					c, err := driver.NewContext(dev)
					if err == nil {
						var b *driver.DeviceBuffer
						if b, err = c.Alloc(16); err == nil {
							err = b.Close()
						}
						err = errors.Join(err, c.Close())
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
		require.Empty(t, failed, "1024 allocations on fresh contexts after the captures")
	}},

	// A capture of a stream whose host memory and device buffer its
	// context closes mid-capture: the context's Close must not wait for
	// the capturing stream itself (a wait that capture forbids), and the
	// capture must fail cleanly or finish.
	{"CaptureRacesContextCloseOfItsMemory", func(t *testing.T, f *fakecuda.Fake) {
		dev, err := driver.DeviceAt(0)
		require.NoError(t, err)
		const n = 256
		rounds := captureRounds() / 4
		gputest.WhileCollecting(func() {
			for i := range rounds {
				c, err := driver.NewContext(dev)
				require.NoError(t, err)
				s, err := c.NewStream(driver.StreamOptions{})
				require.NoError(t, err)
				d, err := c.Alloc(n)
				require.NoError(t, err)
				h, err := c.AllocHost(n, driver.HostAllocOptions{})
				require.NoError(t, err)
				// A real copy first, so that the memory is in use on the
				// stream when its Close comes.
				f.ExecDelay(200 * time.Microsecond)
				require.NoError(t, s.CopyToDevice(d, 0, h, 0, n))
				started := make(chan struct{})
				var capErr error
				var g *driver.Graph
				done := make(chan struct{})
				go func() {
					defer close(done)
					g, capErr = s.Capture(func(b *driver.Bound) error {
						close(started)
						for range 20 {
							if err := b.CopyToHost(s, h, 0, d, 0, n); err != nil {
								return err
							}
							time.Sleep(10 * time.Microsecond)
						}
						return nil
					})
				}()
				<-started
				require.NoError(t, h.Close(), "round %d: closing memory a capture uses", i)
				require.NoError(t, c.Close(), "round %d: closing the context mid-capture", i)
				<-done
				if capErr == nil {
					require.NoError(t, g.Close())
				} else {
					require.ErrorIs(t, capErr, driver.ErrClosed, "round %d", i)
				}
				f.ExecDelay(0)
				if v, msg := f.Violations(); v > 0 {
					t.Fatalf("round %d: the fake driver recorded %d violation(s); the last: %s", i, v, msg)
				}
				require.Zero(t, f.CapturingThreads(), "round %d", i)
			}
		})
	}},
}
