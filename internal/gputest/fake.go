//go:build linux

package gputest

import (
	"runtime"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FakeDevices is how many devices the fake driver has in the child process
// that [fakecuda.Run] starts.
const FakeDevices = 2

// FakeSession is a test's session on the fake CUDA driver: the fake's
// controls, with the checks that end every test on it. With [FakeContext]
// it is the preamble that the fake-driver tests of several packages share:
// run on the fake, reset it, open contexts, and check when the test ends
// that nothing was misused or left behind.
type FakeSession struct {
	*fakecuda.Fake
	before int // driver objects alive when Watch last reset the fake
}

// Fake runs the calling test on the fake driver ([fakecuda.Run]). In the
// test's own process it runs the test again in a child and returns nil:
// the caller returns. Without a C compiler it skips the test, saying so in
// one line. In the child it resets the fake and watches t ([FakeSession.Watch]).
//
//	func TestThingOnFakeDriver(t *testing.T) {
//		s := gputest.Fake(t)
//		if s == nil {
//			return
//		}
//		ctx := gputest.FakeContext(t, 0)
//		...
//	}
func Fake(t *testing.T) *FakeSession {
	t.Helper()
	f := fakecuda.Run(t)
	if f == nil {
		return nil
	}
	s := &FakeSession{Fake: f}
	s.Watch(t)
	return s
}

// Watch resets the fake and, when t ends, after t's own cleanups (which
// close what it made), collects garbage for a few milliseconds, so that
// runtime cleanups of dropped objects run, and then fails t if the fake
// recorded a violation, if driver objects made during t are still alive,
// if a primary context is still retained, or if a thread is left in graph
// capture mode. Call it first in each subtest of a session whose subtests
// must each leave the fake as they found it.
func (s *FakeSession) Watch(t testing.TB) {
	t.Helper()
	s.Reset()
	before := s.Live(fakecuda.AllObjects)
	s.before = before
	// Registered before the test's own cleanups, so that it runs after
	// them.
	t.Cleanup(func() {
		collect()
		s.Clean(t)
		assert.Equal(t, before, s.Live(fakecuda.AllObjects), "driver objects left alive")
		for dev := range FakeDevices {
			assert.Equal(t, 0, s.PrimaryRefs(dev), "device %d's primary context still retained", dev)
		}
		assert.Equal(t, 0, s.CapturingThreads(), "threads left in capture mode")
	})
}

// ClosedBeforeContexts fails t if, when t's cleanups reach the contexts
// opened before this call, driver objects made since Watch are still
// alive (after a collection, as Watch's check). Context.Close frees what
// is left on a context, so Watch's check, made after the contexts close,
// cannot see an object that the code under test still holds but forgot
// to close; this one can (a dropped one is collected by the driver's
// safety net, here as in Watch). Call it after opening the test's contexts ([FakeContext]) and
// before making anything else.
func (s *FakeSession) ClosedBeforeContexts(t testing.TB) {
	t.Helper()
	t.Cleanup(func() {
		collect()
		assert.Equal(t, s.before, s.Live(fakecuda.AllObjects), "driver objects left for Context.Close to free")
	})
}

// collect collects garbage for a few milliseconds, so that the runtime
// cleanups of dropped driver objects run.
func collect() {
	for end := time.Now().Add(5 * time.Millisecond); time.Now().Before(end); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// FakeContext opens a context on fake device dev, in a test that runs on
// the fake driver ([Fake]); it is closed, and must close without error,
// when t ends.
func FakeContext(t testing.TB, dev int) *driver.Context {
	t.Helper()
	d, err := driver.DeviceAt(dev)
	require.NoError(t, err)
	c, err := driver.NewContext(d)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

// FakeContexts opens a context on each of the fake's devices, as
// FakeContext does.
func FakeContexts(t testing.TB) [FakeDevices]*driver.Context {
	t.Helper()
	var out [FakeDevices]*driver.Context
	for i := range out {
		out[i] = FakeContext(t, i)
	}
	return out
}
