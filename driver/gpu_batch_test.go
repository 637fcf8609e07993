package driver

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGPUCopyBatch queues, in one cuMemcpyBatchAsync_v2 call each, 1000
// scattered host-to-device copies of odd sizes, then as many
// device-to-device ones that gather them back in order, then one batch
// that copies the result to pinned memory in 10 pieces; every byte is
// checked against the CPU's gather.
func TestGPUCopyBatch(t *testing.T) {
	ctx := requireGPU(t)
	const pieces, n = 1000, 4 << 20
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	h, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer h.Close()
	fillPattern(h.Bytes())
	out, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer out.Close()
	scattered, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer scattered.Close()
	gathered, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer gathered.Close()
	require.NoError(t, gathered.Memset(0))

	// Piece i: size 97+i%1000 bytes from host offset off(i), to the same
	// offset of scattered, then to the next free offset of gathered.
	want := make([]byte, n)
	var up, gather []BatchCopy
	at := 0
	for i := range pieces {
		size := 97 + i%1000
		off := (i * 4099) % (n - 2000)
		up = append(up, BatchCopy{DstDevice: scattered, DstOff: off, SrcHost: h, SrcOff: off, N: size})
		gather = append(gather, BatchCopy{DstDevice: gathered, DstOff: at, SrcDevice: scattered, SrcOff: off, N: size})
		at += size
	}
	// The pieces do not overlap (4099 bytes apart, at most 1096 long):
	// the copies of one batch run in no set order.
	ref := make([]byte, n)
	for _, c := range up {
		copy(ref[c.DstOff:c.DstOff+c.N], h.Bytes()[c.SrcOff:])
	}
	for _, c := range gather {
		copy(want[c.DstOff:c.DstOff+c.N], ref[c.SrcOff:])
	}
	require.NoError(t, s.CopyBatch(up, BatchOptions{}))
	require.NoError(t, s.CopyBatch(gather, BatchOptions{PreferOverlap: true}))
	var down []BatchCopy
	for i := range 10 {
		down = append(down, BatchCopy{DstHost: out, DstOff: i * n / 10, SrcDevice: gathered, SrcOff: i * n / 10, N: n / 10})
	}
	require.NoError(t, s.CopyBatch(down, BatchOptions{}))
	require.NoError(t, s.Synchronize())
	firstDiff(t, "CopyBatch", out.Bytes()[:n/10*10], want[:n/10*10])
}
