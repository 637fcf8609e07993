package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLaunchLayouts checks launchConfig and launchAttribute against
// cuda.h's CUlaunchConfig and CUlaunchAttribute (CUDA 13.0, 64-bit): the
// fake's C structs assert the same sizes.
func TestLaunchLayouts(t *testing.T) {
	var c launchConfig
	assert.Equal(t, uintptr(56), unsafe.Sizeof(c))
	for _, f := range []struct {
		name      string
		off, want uintptr
	}{
		{"gridDimX", unsafe.Offsetof(c.gridDimX), 0}, {"gridDimY", unsafe.Offsetof(c.gridDimY), 4},
		{"gridDimZ", unsafe.Offsetof(c.gridDimZ), 8}, {"blockDimX", unsafe.Offsetof(c.blockDimX), 12},
		{"blockDimY", unsafe.Offsetof(c.blockDimY), 16}, {"blockDimZ", unsafe.Offsetof(c.blockDimZ), 20},
		{"sharedMemBytes", unsafe.Offsetof(c.sharedMemBytes), 24}, {"hStream", unsafe.Offsetof(c.hStream), 32},
		{"attrs", unsafe.Offsetof(c.attrs), 40}, {"numAttrs", unsafe.Offsetof(c.numAttrs), 48},
	} {
		assert.Equal(t, f.want, f.off, "CUlaunchConfig.%s", f.name)
	}
	var a launchAttribute
	assert.Equal(t, uintptr(72), unsafe.Sizeof(a))
	assert.Equal(t, uintptr(0), unsafe.Offsetof(a.id))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(a.val))
	assert.Equal(t, uintptr(8), unsafe.Alignof(a.val))
	var s exSlab
	assert.Equal(t, uintptr(0), unsafe.Offsetof(s.attrs)%8)
}

// TestLaunchAttributesFill checks the values written into each attribute's
// union: the cluster's x, y, z at bytes 0, 4, 8, the cooperative flag and
// the priority as ints at byte 0.
func TestLaunchAttributesFill(t *testing.T) {
	var attrs [maxLaunchAttrs]launchAttribute
	a := LaunchAttributes{Cluster: Dim3{X: 2, Y: 3}, Cooperative: true, Priority: -2, SetPriority: true}
	n, err := a.fill("t", [3]uintptr{4, 6, 5}, &attrs)
	require.NoError(t, err)
	require.Equal(t, uint32(3), n)
	assert.Equal(t, uint32(launchAttrClusterDimension), attrs[0].id)
	assert.Equal(t, [3]uint32{2, 3, 1}, *(*[3]uint32)(unsafe.Pointer(&attrs[0].val)))
	assert.Equal(t, uint32(launchAttrCooperative), attrs[1].id)
	assert.Equal(t, int32(1), *(*int32)(unsafe.Pointer(&attrs[1].val)))
	assert.Equal(t, uint32(launchAttrPriority), attrs[2].id)
	assert.Equal(t, int32(-2), *(*int32)(unsafe.Pointer(&attrs[2].val)))

	n, err = (&LaunchAttributes{}).fill("t", [3]uintptr{1, 1, 1}, &attrs)
	assert.NoError(t, err)
	assert.Zero(t, n)
	_, err = (&LaunchAttributes{Cluster: Dim3{X: 2}}).fill("Function.LaunchEx", [3]uintptr{3, 1, 1}, &attrs)
	assert.EqualError(t, err, "cuda: Function.LaunchEx: invalid argument: grid 3x1x1 is not a multiple of cluster 2x1x1")
	_, err = (&LaunchAttributes{Cluster: Dim3{X: -1}}).fill("Function.LaunchEx", [3]uintptr{3, 1, 1}, &attrs)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = (&LaunchAttributes{Priority: 1 << 40, SetPriority: true}).fill("Function.LaunchEx", [3]uintptr{1, 1, 1}, &attrs)
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

// TestHostFuncTable checks the dispatch table: slots are reused once
// freed, a slot is taken once, and unknown ids are nil.
func TestHostFuncTable(t *testing.T) {
	before := hostFuncsQueued()
	ran := 0
	a := addHostFunc(func() { ran++ })
	b := addHostFunc(func() { ran += 10 })
	assert.Equal(t, before+2, hostFuncsQueued())
	takeHostFunc(a)()
	assert.Nil(t, takeHostFunc(a), "a slot runs once")
	c := addHostFunc(func() { ran += 100 })
	assert.Equal(t, a, c, "a freed slot is reused")
	takeHostFunc(b)()
	takeHostFunc(c)()
	assert.Equal(t, 111, ran)
	assert.Nil(t, takeHostFunc(0))
	assert.Nil(t, takeHostFunc(1<<40))
	assert.Equal(t, before, hostFuncsQueued())
}
