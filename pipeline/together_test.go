package pipeline_test

import (
	"sync/atomic"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"

	"github.com/stretchr/testify/assert"
)

// starter is a backend that starts goroutines itself (TogetherStarter),
// counting the calls.
type starter struct {
	pipeline.Backend
	calls atomic.Int32
}

func (s *starter) GoTogether(name string, n int, fn func(i int)) {
	s.calls.Add(1)
	for i := range n {
		fn(i)
	}
}

// TestGoTogether checks that GoTogether runs every index once and returns
// after all of them, plainly and through a TogetherStarter backend (the
// simulator among them), so that benchmarks may start their workers
// through it instead of testing for the simulator.
func TestGoTogether(t *testing.T) {
	run := func(b pipeline.Backend) []int32 {
		seen := make([]int32, 7)
		pipeline.GoTogether(b, "worker", len(seen), func(i int) { atomic.AddInt32(&seen[i], 1) })
		return seen
	}
	ones := []int32{1, 1, 1, 1, 1, 1, 1}
	assert.Equal(t, ones, run(nil), "plain goroutines")
	st := &starter{}
	assert.Equal(t, ones, run(st))
	assert.Equal(t, int32(1), st.calls.Load(), "a TogetherStarter starts them itself")
	assert.Equal(t, ones, run(sim.New(1, 0)), "on the simulator")
	var zero sim.Sim
	assert.Equal(t, ones, run(&zero), "a zero simulator runs them plainly")
}
