package driver

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// pitched3D applies c to dst from src on the CPU: the reference the GPU's
// 2D and 3D copies must match, byte for byte.
func pitched3D(dst, src []byte, c Copy3D) {
	for z := 0; z < c.Depth; z++ {
		for r := 0; r < c.Height; r++ {
			d := c.DstOff + (z*c.DstHeight+r)*c.DstPitch
			s := c.SrcOff + (z*c.SrcHeight+r)*c.SrcPitch
			copy(dst[d:d+c.Width], src[s:s+c.Width])
		}
	}
}

func flat(c Copy2D) Copy3D {
	return Copy3D{Width: c.Width, Height: c.Height, Depth: 1, DstOff: c.DstOff, DstPitch: c.DstPitch,
		DstHeight: c.Height, SrcOff: c.SrcOff, SrcPitch: c.SrcPitch, SrcHeight: c.Height}
}

// firstDiff fails t at the first byte where got and want differ.
func firstDiff(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: byte %d is %#x, want %#x", what, i, got[i], want[i])
		}
	}
}

// TestGPUCopy2D3D runs each 2D and 3D copy, synchronous and queued, in
// each direction, over odd widths, offsets and pitches, and checks every
// byte of each destination (the rows copied and the bytes between and
// around them) against the CPU's copy.
func TestGPUCopy2D3D(t *testing.T) {
	ctx := requireGPU(t)
	const n = 3 << 20
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	src := make([]byte, n)
	fillPattern(src)
	before := make([]byte, n)
	for i := range before {
		before[i] = byte(i*13 + 5)
	}
	dA, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer dA.Close()
	dB, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer dB.Close()
	h, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer h.Close()
	got := make([]byte, n)

	// Odd offsets and pitches between host and device; between two
	// device buffers, pitches as cuMemAllocPitch gives them (multiples of
	// 512), since the driver may refuse others for intra-device copies.
	c2 := Copy2D{Width: 1001, Height: 1500, DstOff: 7, DstPitch: 1024, SrcOff: 3, SrcPitch: 1999}
	c3 := Copy3D{Width: 301, Height: 97, Depth: 29, DstOff: 11, DstPitch: 320, DstHeight: 101,
		SrcOff: 5, SrcPitch: 333, SrcHeight: 100}
	d2 := Copy2D{Width: 1001, Height: 1500, DstOff: 512, DstPitch: 1024, SrcOff: 0, SrcPitch: 2048}
	d3 := Copy3D{Width: 301, Height: 97, Depth: 29, DstOff: 1024, DstPitch: 512, DstHeight: 101,
		SrcOff: 0, SrcPitch: 1024, SrcHeight: 100}
	for _, tc := range []struct {
		name string
		c    Copy3D
		// run copies from the source (src in Go memory, or dA, or h) to
		// the destination, which check reads back.
		run func() error
		dev bool // the destination is dB (else h, or got for Go memory)
		goM bool
	}{
		{"Copy2DFromHost", flat(c2), func() error { return dB.Copy2DFromHost(c2, src) }, true, false},
		{"Copy2DToHost", flat(c2), func() error { return dA.Copy2DToHost(got, c2) }, false, true},
		{"Copy2DFromDevice", flat(d2), func() error { return dB.Copy2DFromDevice(d2, dA) }, true, false},
		{"Stream.Copy2DToDevice", flat(c2), func() error { return s.Copy2DToDevice(dB, h, c2) }, true, false},
		{"Stream.Copy2DToHost", flat(c2), func() error { return s.Copy2DToHost(h, dA, c2) }, false, false},
		{"Stream.Copy2DDevice", flat(d2), func() error { return s.Copy2DDevice(dB, dA, d2) }, true, false},
		{"Copy3DFromHost", c3, func() error { return dB.Copy3DFromHost(c3, src) }, true, false},
		{"Copy3DToHost", c3, func() error { return dA.Copy3DToHost(got, c3) }, false, true},
		{"Copy3DFromDevice", d3, func() error { return dB.Copy3DFromDevice(d3, dA) }, true, false},
		{"Stream.Copy3DToDevice", c3, func() error { return s.Copy3DToDevice(dB, h, c3) }, true, false},
		{"Stream.Copy3DToHost", c3, func() error { return s.Copy3DToHost(h, dA, c3) }, false, false},
		{"Stream.Copy3DDevice", d3, func() error { return s.Copy3DDevice(dB, dA, d3) }, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, dA.CopyFromHost(0, src))
			require.NoError(t, dB.CopyFromHost(0, before))
			copy(got, before)
			// h is the source of the queued copies to the device, and the
			// destination of those to the host.
			if tc.dev {
				copy(h.Bytes(), src)
			} else {
				copy(h.Bytes(), before)
			}
			require.NoError(t, tc.run())
			require.NoError(t, s.Synchronize())
			want := append([]byte(nil), before...)
			pitched3D(want, src, tc.c)
			switch {
			case tc.dev:
				require.NoError(t, dB.CopyToHost(got, 0))
				firstDiff(t, tc.name, got, want)
			case tc.goM:
				firstDiff(t, tc.name, got, want)
			default:
				firstDiff(t, tc.name, h.Bytes(), want)
			}
		})
	}
}
