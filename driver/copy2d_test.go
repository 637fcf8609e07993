package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// CUDA_MEMCPY2D as cuda.h lays it out on 64-bit hosts (CUDA_MEMCPY3D's
// layout is TestPoolGraphStructLayouts').
func TestCopy2DStructLayouts(t *testing.T) {
	var m memcpy2D
	assert.Equal(t, uintptr(128), unsafe.Sizeof(m))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(m.srcY))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(m.srcMemoryType))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(m.srcHost))
	assert.Equal(t, uintptr(32), unsafe.Offsetof(m.srcDevice))
	assert.Equal(t, uintptr(40), unsafe.Offsetof(m.srcArray))
	assert.Equal(t, uintptr(48), unsafe.Offsetof(m.srcPitch))
	assert.Equal(t, uintptr(56), unsafe.Offsetof(m.dstXInBytes))
	assert.Equal(t, uintptr(64), unsafe.Offsetof(m.dstY))
	assert.Equal(t, uintptr(72), unsafe.Offsetof(m.dstMemoryType))
	assert.Equal(t, uintptr(80), unsafe.Offsetof(m.dstHost))
	assert.Equal(t, uintptr(88), unsafe.Offsetof(m.dstDevice))
	assert.Equal(t, uintptr(96), unsafe.Offsetof(m.dstArray))
	assert.Equal(t, uintptr(104), unsafe.Offsetof(m.dstPitch))
	assert.Equal(t, uintptr(112), unsafe.Offsetof(m.widthInBytes))
	assert.Equal(t, uintptr(120), unsafe.Offsetof(m.height))
	var m3 memcpy3D
	assert.Equal(t, uintptr(80), unsafe.Offsetof(m3.srcHeight))
	assert.Equal(t, uintptr(168), unsafe.Offsetof(m3.dstHeight))
	assert.Equal(t, uintptr(184), unsafe.Offsetof(m3.height))
}

// The span checks of a pitched copy, before any driver call: exact texts.
func TestCopy2DChecks(t *testing.T) {
	cases := []struct {
		name    string
		b       box
		dst     int
		src     int
		wantErr string
	}{
		{"fits exactly", Copy2D{Width: 4, Height: 3, DstPitch: 8, SrcPitch: 4}.box(), 20, 12, ""},
		{"empty", Copy2D{Width: 0, Height: 3}.box(), 0, 0, ""},
		{"negative", Copy2D{Width: -1, Height: 3}.box(), 0, 0,
			"cuda: op: invalid argument: width -1, height 3, depth 1: must not be negative"},
		{"pitch below width", Copy2D{Width: 4, Height: 2, DstPitch: 3, SrcPitch: 4}.box(), 64, 64,
			"cuda: op: invalid argument: destination pitch 3: less than the width 4"},
		{"last row past the end", Copy2D{Width: 4, Height: 3, DstPitch: 8, SrcPitch: 4}.box(), 19, 12,
			"cuda: op: length mismatch: destination span [0, 0+20) does not fit in 19 bytes"},
		{"source offset", Copy2D{Width: 4, Height: 2, DstPitch: 4, SrcOff: 5, SrcPitch: 4}.box(), 8, 12,
			"cuda: op: length mismatch: source span [5, 5+8) does not fit in 12 bytes"},
		{"negative offset", Copy2D{Width: 4, Height: 1, DstOff: -4, DstPitch: 4, SrcPitch: 4}.box(), 8, 8,
			"cuda: op: invalid argument: destination offset -4: must not be negative"},
		{"3D fits", Copy3D{Width: 2, Height: 2, Depth: 2, DstPitch: 2, DstHeight: 3, SrcPitch: 2, SrcHeight: 2}.box(), 2*(3+1) + 2, 8, ""},
		{"3D slice past the end", Copy3D{Width: 2, Height: 2, Depth: 2, DstPitch: 2, DstHeight: 3, SrcPitch: 2, SrcHeight: 2}.box(), 9, 8,
			"cuda: op: length mismatch: destination span [0, 0+10) does not fit in 9 bytes"},
		{"3D rows per slice", Copy3D{Width: 2, Height: 3, Depth: 2, DstPitch: 2, DstHeight: 2, SrcPitch: 2, SrcHeight: 3}.box(), 64, 64,
			"cuda: op: invalid argument: destination height 2: less than the copy's 3 rows"},
		{"overflow", Copy2D{Width: 1, Height: 1 << 40, DstPitch: 1 << 40, SrcPitch: 1}.box(), 8, 1 << 41,
			"cuda: op: length mismatch: destination span [0, 0+9223372036854775807) does not fit in 8 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.b.check("op", tc.dst, tc.src)
			if tc.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.EqualError(t, err, tc.wantErr)
			}
		})
	}
}
