package driver

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// CUmemcpyAttributes as cuda.h of CUDA 12.8..13.0 lays it out.
func TestBatchStructLayout(t *testing.T) {
	var a memcpyAttributes
	assert.Equal(t, uintptr(24), unsafe.Sizeof(a))
	assert.Equal(t, uintptr(4), unsafe.Offsetof(a.srcLocType))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(a.srcLocID))
	assert.Equal(t, uintptr(12), unsafe.Offsetof(a.dstLocType))
	assert.Equal(t, uintptr(16), unsafe.Offsetof(a.dstLocID))
	assert.Equal(t, uintptr(20), unsafe.Offsetof(a.flags))
}
