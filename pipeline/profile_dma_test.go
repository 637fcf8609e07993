package pipeline_test

import (
	"encoding/json"
	"testing"

	. "github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStagingDMAShares guards how the simulator slows staging copies while
// DMA runs: by the directions in flight and the copy's size, measured
// shares exactly at the sizes measured, log-interpolated between them, the
// nearest outside, and the older single share for profiles without them.
func TestStagingDMAShares(t *testing.T) {
	p := BuiltinProfile()
	p.StagingDMA = 0.75
	p.StagingDMABySize = nil
	assert.Equal(t, 1.0, ProfileStagingDMA(p, 4<<20, false, false), "no DMA in flight")
	assert.Equal(t, 0.75, ProfileStagingDMA(p, 4<<20, true, false), "an older profile: one share for any DMA")
	assert.Equal(t, 0.75, ProfileStagingDMA(p, 64<<20, true, true))

	p.StagingDMABySize = []StagingDMAShare{
		{Bytes: 64 << 20, H2D: 0.7, D2H: 0.6, Both: 0.5},
		{Bytes: 4 << 20, H2D: 0.9, D2H: 0.8, Both: 0.7},
	}
	assert.Equal(t, 1.0, ProfileStagingDMA(p, 4<<20, false, false))
	assert.Equal(t, 0.9, ProfileStagingDMA(p, 4<<20, true, false))
	assert.Equal(t, 0.8, ProfileStagingDMA(p, 4<<20, false, true))
	assert.Equal(t, 0.7, ProfileStagingDMA(p, 4<<20, true, true))
	assert.Equal(t, 0.5, ProfileStagingDMA(p, 64<<20, true, true))
	assert.Equal(t, 0.7, ProfileStagingDMA(p, 1<<20, true, true), "below the smallest size measured")
	assert.Equal(t, 0.5, ProfileStagingDMA(p, 1<<30, true, true), "above the largest")
	// 16 MiB is halfway between 4 and 64 MiB on a log scale.
	assert.InDelta(t, 0.6, ProfileStagingDMA(p, 16<<20, true, true), 1e-9)
	assert.InDelta(t, 0.8, ProfileStagingDMA(p, 16<<20, true, false), 1e-9)
}

// TestStagingDMASharesValidated: a share outside (0, 1] or a size below one
// byte is refused by name when a profile is read.
func TestStagingDMASharesValidated(t *testing.T) {
	for _, c := range []struct {
		share StagingDMAShare
		want  string
	}{
		{StagingDMAShare{Bytes: 4 << 20, H2D: 0, D2H: 0.5, Both: 0.5}, "staging_dma_by_size h2d at 4194304 bytes is 0"},
		{StagingDMAShare{Bytes: 4 << 20, H2D: 0.5, D2H: 1.5, Both: 0.5}, "staging_dma_by_size d2h at 4194304 bytes is 1.5"},
		{StagingDMAShare{Bytes: 0, H2D: 0.5, D2H: 0.5, Both: 0.5}, "staging_dma_by_size has a size of 0 bytes"},
	} {
		p := BuiltinProfile()
		p.StagingDMABySize = []StagingDMAShare{c.share}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		_, err = ParseProfile(b)
		require.Error(t, err, "%+v", c.share)
		assert.Contains(t, err.Error(), c.want)
	}
}
