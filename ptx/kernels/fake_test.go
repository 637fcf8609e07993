//go:build linux

package kernels

import (
	"sync"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestModulesOnFakeDriver: Modules loads a kernel once per context, and
// its lookup without the lock (the last entry found, issue 14) gives each
// context its own module when lookups alternate between two, and never
// outlives Close, even for the kernel found last.
func TestModulesOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctxs := gputest.FakeContexts(t)
	loads := f.Calls("cuModuleLoadDataEx")
	var m Modules
	var first [2]any
	for round := range 3 {
		for i, ctx := range ctxs {
			p, err := m.Program(ctx, Seed)
			require.NoError(t, err)
			if round == 0 {
				first[i] = p
				continue
			}
			assert.Same(t, first[i], p, "round %d, context %d: the module loaded for this context", round, i)
			again, err := m.Program(ctx, Seed)
			require.NoError(t, err)
			assert.Same(t, p, again, "the same kernel and context twice in a row")
		}
	}
	assert.NotSame(t, first[0], first[1], "one module per context")
	other, err := m.Program(ctxs[0], Saxpy)
	require.NoError(t, err)
	assert.NotSame(t, first[0], other, "one module per kernel")
	assert.Equal(t, loads+3, f.Calls("cuModuleLoadDataEx"), "each kernel loaded once per context")

	// Lookups racing Close (the race detector watches): each returns a
	// module or ErrClosed, and after Close only ErrClosed.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, err := m.Function(ctxs[0], Saxpy); err != nil {
					assert.ErrorIs(t, err, driver.ErrClosed)
				}
			}
		}()
	}
	require.NoError(t, m.Close())
	wg.Wait()
	_, err = m.Function(ctxs[0], Saxpy)
	assert.ErrorIs(t, err, driver.ErrClosed, "the kernel found last is not found after Close")
	_, err = m.Function(ctxs[1], Seed)
	assert.ErrorIs(t, err, driver.ErrClosed)
}
