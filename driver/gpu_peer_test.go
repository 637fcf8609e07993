package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUPeer checks the peer calls on the machine's GPUs. With one GPU:
// a device is not its own peer, a Context of it is refused as its own
// peer before the driver, and the peer copies (cuMemcpyPeer,
// cuMemcpyPeerAsync) between two buffers of the one context move every
// byte. With two or more, GPU 0 and 1 also enable access both ways when
// they can, and copy 32 MiB each way, checked byte for byte.
func TestGPUPeer(t *testing.T) {
	ctx := requireGPU(t)
	dev := ctx.Device()
	can, err := dev.CanAccessPeer(dev)
	require.NoError(t, err)
	assert.False(t, can, "a device is not its own peer")
	other, err := NewContext(dev)
	require.NoError(t, err)
	defer other.Close()
	assert.ErrorIs(t, ctx.EnablePeerAccess(other), ErrInvalidArgument)

	const n = 32<<20 + 4
	src := make([]byte, n)
	fillPattern(src)
	check := func(t *testing.T, what string, from, to *Context, async bool) {
		a, err := from.Alloc(n)
		require.NoError(t, err)
		defer a.Close()
		b, err := to.Alloc(n)
		require.NoError(t, err)
		defer b.Close()
		require.NoError(t, a.CopyFromHost(0, src))
		require.NoError(t, b.Memset(0x5A))
		if async {
			s, err := to.NewStream(StreamOptions{})
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.CopyPeer(b, 4, a, 0, n-4))
			require.NoError(t, s.Synchronize())
		} else {
			require.NoError(t, b.CopyFromPeer(4, a, 0, n-4))
		}
		got := make([]byte, n)
		require.NoError(t, b.CopyToHost(got, 0))
		want := append([]byte{0x5A, 0x5A, 0x5A, 0x5A}, src[:n-4]...)
		firstDiff(t, what, got, want)
	}
	check(t, "CopyFromPeer, one context", ctx, ctx, false)
	check(t, "Stream.CopyPeer, one context", ctx, ctx, true)

	count, err := DeviceCount()
	require.NoError(t, err)
	if count < 2 {
		t.Log("one GPU: the two-device paths run on the fake only")
		return
	}
	d1, err := DeviceAt(1)
	require.NoError(t, err)
	c1, err := NewContext(d1)
	require.NoError(t, err)
	defer c1.Close()
	can, err = dev.CanAccessPeer(d1)
	require.NoError(t, err)
	if can {
		require.NoError(t, ctx.EnablePeerAccess(c1))
		assert.ErrorIs(t, ctx.EnablePeerAccess(c1), ErrPeerAccessAlreadyEnabled)
		require.NoError(t, c1.EnablePeerAccess(ctx))
		defer func() {
			assert.NoError(t, ctx.DisablePeerAccess(c1))
			assert.NoError(t, c1.DisablePeerAccess(ctx))
		}()
	}
	check(t, "CopyFromPeer, GPU 0 to 1", ctx, c1, false)
	check(t, "Stream.CopyPeer, GPU 1 to 0", c1, ctx, true)
}
