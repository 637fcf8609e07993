package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// CUmemAllocationProp, CUmemAccessDesc and CUmemLocation as cuda.h lays
// them out on 64-bit hosts.
func TestVirtualStructLayouts(t *testing.T) {
	var p memAllocationProp
	assert.Equal(t, uintptr(32), unsafe.Sizeof(p))
	assert.Equal(t, uintptr(4), unsafe.Offsetof(p.requestedHandleTypes))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(p.locationType))
	assert.Equal(t, uintptr(12), unsafe.Offsetof(p.locationID))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(p.win32HandleMetaData))
	assert.Equal(t, uintptr(24), unsafe.Offsetof(p.compressionType))
	assert.Equal(t, uintptr(25), unsafe.Offsetof(p.gpuDirectRDMACapable))
	assert.Equal(t, uintptr(26), unsafe.Offsetof(p.usage))
	assert.Equal(t, uintptr(28), unsafe.Offsetof(p.reserved))
	var d memAccessDesc
	assert.Equal(t, uintptr(12), unsafe.Sizeof(d))
	assert.Equal(t, uintptr(4), unsafe.Offsetof(d.locationID))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(d.flags))
	// CUmemLocation {int type; int id;} travels by value as one 64-bit
	// word, type in the low half.
	l, err := Location{Device: Device{ordinal: 3, valid: true}}.cu("op")
	assert.NoError(t, err)
	assert.Equal(t, uint64(3)<<32|1, l)
	l, err = Location{Host: true}.cu("op")
	assert.NoError(t, err)
	assert.Equal(t, uint64(2), l)
}
