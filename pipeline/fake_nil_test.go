//go:build linux

package pipeline_test

import (
	"slices"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNilAndZeroArgumentsOnFakeDriver is TestNilAndZeroArguments for what
// the GPU backend hands out, which needs a driver: its streams, events,
// device and pinned buffers, and issuer, each method called with zero
// arguments (nil streams, events and buffers among them) must return an
// error, never panic, as their type assertions did (issue 28). The fake
// driver then sees no misuse and nothing left alive (gputest.Fake).
func TestNilAndZeroArgumentsOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	b := pipeline.GPU(ctx)
	var made []interface{ Close() error }
	keep := func(v any, err error) any {
		require.NoError(t, err)
		if c, ok := v.(interface{ Close() error }); ok {
			made = append(made, c)
		}
		return v
	}
	var issuers []pipeline.Issuer
	covered := map[string]bool{}
	for _, r := range []struct {
		inline bool
		mk     func() any
	}{
		{false, func() any { return b }},
		{false, func() any { return keep(b.NewStream()) }},
		{false, func() any { return keep(b.NewEvent(true)) }},
		{false, func() any { return keep(b.AllocDevice(64)) }},
		{false, func() any { return keep(b.AllocPinned(64)) }},
		{true, func() any {
			iss, err := b.Issuer()
			require.NoError(t, err)
			issuers = append(issuers, iss)
			return iss
		}},
	} {
		for _, m := range callAll(t, "GPU", false, r.inline, r.mk) {
			covered[m] = true
		}
	}
	for _, iss := range issuers {
		iss.Release() // twice for one of them: a no-op
	}
	for _, c := range made {
		assert.NoError(t, c.Close())
	}
	for _, m := range []string{"gpuEvent.Elapsed", "gpuIssuer.CopyToDevice", "gpuIssuer.CopyToHost", "gpuIssuer.Launch",
		"gpuIssuer.Record", "gpuIssuer.Release", "gpuIssuer.Synchronize", "gpuIssuer.Wait"} {
		assert.True(t, covered[m], "%s not called", m)
	}
	assert.True(t, slices.Contains(exportedDecls(t), "gpuIssuer.Launch"))
}
