package pipeline

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTracker is a HostTracker whose clocks are the order of the
// HostPublish calls (ints; HostMerge keeps the larger), and which records
// what the engine tells it.
type fakeTracker struct {
	Backend // nil: only the tracking methods are called
	mu      sync.Mutex
	seq     int
	joined  []HostClock // HostJoin's clocks, in order
	release []HostClock // HostRelease's clocks, in order
	blocked int         // HostBlock calls
	forked  []string
	exited  int
}

func (f *fakeTracker) HostPublish() HostClock {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	return f.seq
}

func (f *fakeTracker) HostMerge(a, b HostClock) HostClock {
	x, _ := a.(int)
	y, _ := b.(int)
	return max(x, y)
}

func (f *fakeTracker) HostJoin(c HostClock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.joined = append(f.joined, c)
}

func (f *fakeTracker) HostBlock() HostGoroutine {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.blocked++
	return f.blocked
}

func (f *fakeTracker) HostRelease(_ HostGoroutine, c HostClock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.release = append(f.release, c)
}

func (f *fakeTracker) HostFork(name string) HostGoroutine {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forked = append(f.forked, name)
	return name
}

func (f *fakeTracker) HostExit() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exited++
}

func (f *fakeTracker) HostStart(HostGoroutine) {}
func (f *fakeTracker) HostNow() time.Duration  { return 0 }
func (f *fakeTracker) HostRun() time.Duration  { return 0 }
func (f *fakeTracker) HostRunEnd()             {}
func (f *fakeTracker) HostTimeKernels(bool)    {}
func (f *fakeTracker) HostStager()             {}
func (f *fakeTracker) HostStagingChunk()       {}

func (f *fakeTracker) snapshot() (joined, released []HostClock) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]HostClock(nil), f.joined...), append([]HostClock(nil), f.release...)
}

func (f *fakeTracker) counts() (blocked, exited int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked, f.exited
}

func (f *fakeTracker) forks() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.forked...)
}

// untilBlocked spins until f has seen n HostBlock calls.
func untilBlocked(f *fakeTracker, n int) {
	for {
		if b, _ := f.counts(); b >= n {
			return
		}
		runtime.Gosched()
	}
}

var _ HostTracker = (*fakeTracker)(nil)

// TestHandoffPlain: without a tracker, a counter advanced on one goroutine
// ends another's wait, a stop ends every wait with false, join waits for
// every spawned goroutine, and a wait that is already satisfied
// allocates nothing.
func TestHandoffPlain(t *testing.T) {
	var h handoff
	h.init(nil, 0)
	require.False(t, h.tracked())
	var n int
	h.spawn("advancer", func() {
		for i := 1; i <= 3; i++ {
			h.advance(&n, i)
		}
	})
	assert.True(t, h.waitFor(&n, 2), "n reaches 3")
	h.join()
	assert.Equal(t, 1, h.exited)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.waitFor(&n, 0) }), "a satisfied wait allocates")

	done := make(chan bool)
	go func() { done <- h.waitFor(&n, 10) }()
	h.mu.Lock()
	h.stopLocked()
	h.mu.Unlock()
	assert.False(t, <-done, "a stop ends the wait")
	assert.True(t, h.stopping())

	h.init(nil, 0)
	assert.False(t, h.stopping(), "init resets the stop")
}

// TestHandoffTracked: with a tracker, a wait is announced (HostBlock), the
// goroutine that advances the counter lets it go with its own clock, and
// the waiter joins the clock that made the counter exceed what it waited
// for, even when the counter has moved on; a stop lets waiters go with no
// clock; join orders the caller after every exited goroutine.
func TestHandoffTracked(t *testing.T) {
	for _, ring := range []int{0, 2} {
		f := &fakeTracker{}
		var h handoff
		h.init(f, ring)
		require.True(t, h.tracked())
		var n int
		step := make(chan struct{})
		h.spawn("advancer", func() {
			<-step
			h.advance(&n, 1) // clock 1
			h.advance(&n, 3) // clock 2: made it 2 and 3
		})
		go func() {
			untilBlocked(f, 1) // the main goroutine waits: advance now
			close(step)
		}()
		require.True(t, h.waitFor(&n, 0))
		h.join()
		joined, released := f.snapshot()
		assert.Equal(t, []HostClock{1}, released[:1], "ring %d: released by the advance that made n 1", ring)
		assert.Equal(t, HostClock(1), joined[0], "ring %d: joined the clock that made n exceed 0", ring)
		h.mu.Lock()
		assert.Equal(t, HostClock(2), h.clockAt(&n, 1), "ring %d: the clock that made n 2", ring)
		assert.Equal(t, HostClock(2), h.clockAt(&n, 2), "ring %d: the clock that made n 3", ring)
		h.mu.Unlock()
		// The exiting goroutine publishes clock 3; join joins it.
		assert.Equal(t, HostClock(3), joined[len(joined)-1], "ring %d: join orders after the exit", ring)
		assert.Equal(t, []string{"advancer"}, f.forks())
		// The goroutine leaves the tracker (HostExit) after it counted
		// out, which is what join waits for, so it may come just after.
		assert.Eventually(t, func() bool { _, exited := f.counts(); return exited == 1 }, 5*time.Second, time.Millisecond, "ring %d: the goroutine exited the tracker", ring)

		// The waiter's block comes after those so far: join blocks too
		// when the goroutine has not counted out yet, and a fixed count
		// of 2 then let the stop come before the waiter blocked.
		blockedBefore, _ := f.counts()
		done := make(chan bool)
		go func() { done <- h.waitFor(&n, 10) }()
		untilBlocked(f, blockedBefore+1)
		h.mu.Lock()
		h.stopLocked()
		h.mu.Unlock()
		assert.False(t, <-done)
		_, released = f.snapshot()
		assert.Nil(t, released[len(released)-1], "ring %d: a stop releases with no clock", ring)
	}
}
