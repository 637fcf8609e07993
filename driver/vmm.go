package driver

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// memAllocationProp is CUmemAllocationProp on 64-bit hosts: 32 bytes,
// its allocFlags struct flattened (TestVirtualStructLayouts).
type memAllocationProp struct {
	typ                  uint32 // CUmemAllocationType
	requestedHandleTypes uint32 // CUmemAllocationHandleType
	locationType         uint32 // CUmemLocation.type
	locationID           int32  // CUmemLocation.id
	win32HandleMetaData  uint64
	compressionType      uint8
	gpuDirectRDMACapable uint8
	usage                uint16
	reserved             [4]uint8
}

// memAccessDesc is CUmemAccessDesc: 12 bytes.
type memAccessDesc struct {
	locationType uint32
	locationID   int32
	flags        uint32 // CUmemAccess_flags
}

const (
	memAllocationPinned    = 1 // CU_MEM_ALLOCATION_TYPE_PINNED
	memAllocGranularityMin = 0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
	memAccessProtReadWrite = 3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
)

// AttrVirtualMemoryManagementSupported is
// CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: 1 when
// [Context.AllocVirtual] can work on the device.
const AttrVirtualMemoryManagementSupported DeviceAttribute = 102

// virtualMapping is what a virtual buffer's Close needs besides its
// address: the mapped size and the physical allocation's handle.
type virtualMapping struct {
	size  uintptr
	alloc uint64 // CUmemGenericAllocationHandle
}

// virtualMappings holds every open virtual buffer's mapping, by address.
var virtualMappings sync.Map // DevicePtr's uintptr -> virtualMapping

// devicePropOf returns the allocation properties of pinned device memory
// on k's device.
func devicePropOf(k *ctxCore) *memAllocationProp {
	return &memAllocationProp{typ: memAllocationPinned, locationType: memLocationDevice, locationID: k.dev.cu()}
}

// VirtualGranularity returns the size that [Context.AllocVirtual] rounds
// allocations up to on c's device (cuMemGetAllocationGranularity, the
// minimum granularity of pinned device memory).
func (c *Context) VirtualGranularity() (int, error) {
	const op = "Context.VirtualGranularity"
	k, err := c.begin(op)
	if err != nil {
		return 0, err
	}
	defer k.end()
	return granularity(op, k)
}

// granularity asks the driver for k's device's granularity, for op.
func granularity(op string, k *ctxCore) (int, error) {
	g := new(uintptr)
	if err := cuMemGetAllocationGranularity(g, devicePropOf(k), memAllocGranularityMin); err != nil {
		return 0, err
	}
	if *g == 0 || *g > math.MaxInt32 {
		return 0, fmt.Errorf("cuda: %s: cuMemGetAllocationGranularity answered a granularity of %d", op, *g)
	}
	return int(*g), nil
}

// AllocVirtual allocates n bytes of device memory through the virtual
// memory calls: it creates a physical allocation of n bytes rounded up to
// [Context.VirtualGranularity] (cuMemCreate), reserves an address range
// for it (cuMemAddressReserve), maps it there (cuMemMap) and lets the
// context's device read and write it (cuMemSetAccess); a failed step
// undoes the ones before it. The result is a DeviceBuffer of n bytes, for
// every copy and kernel; the caller owns it and must Close it, which
// waits for the context's work (cuCtxSynchronize), then unmaps the range
// (cuMemUnmap), releases the allocation (cuMemRelease) and frees the range
// (cuMemAddressFree), in that order.
func (c *Context) AllocVirtual(n int) (*DeviceBuffer, error) {
	const op = "Context.AllocVirtual"
	if n <= 0 {
		return nil, argError(op, "size %d: must be positive", n)
	}
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	g, err := granularity(op, k)
	if err != nil {
		return nil, err
	}
	if n > math.MaxInt-g {
		return nil, argError(op, "size %d: too large", n)
	}
	size := uintptr((n + g - 1) / g * g)
	alloc := new(uint64)
	if err := cuMemCreate(alloc, size, devicePropOf(k), 0); err != nil {
		return nil, err
	}
	p := new(DevicePtr)
	if err := cuMemAddressReserve(p, size, 0, 0, 0); err != nil {
		return nil, errors.Join(err, cuMemRelease(*alloc))
	}
	if err := cuMemMap(*p, size, 0, *alloc, 0); err != nil {
		return nil, errors.Join(err, cuMemRelease(*alloc), cuMemAddressFree(*p, size))
	}
	desc := &memAccessDesc{locationType: memLocationDevice, locationID: k.dev.cu(), flags: memAccessProtReadWrite}
	if err := cuMemSetAccess(*p, size, desc, 1); err != nil {
		return nil, errors.Join(err, cuMemUnmap(*p, size), cuMemRelease(*alloc), cuMemAddressFree(*p, size))
	}
	virtualMappings.Store(uintptr(*p), virtualMapping{size: size, alloc: *alloc})
	r, err := k.adopt(op, kindVirtualMemory, uintptr(*p), nil)
	if err != nil {
		return nil, err
	}
	b := &DeviceBuffer{size: n}
	own(b, &b.owned, c, r, true)
	return b, nil
}

// freeVirtual undoes AllocVirtual for the buffer at h, with its context
// current: it waits for the context's work, which may still use the
// memory (cuMemFree_v2 waits so too), then unmaps, releases and frees the
// range. Each step runs even when an earlier one failed; the errors are
// joined.
func freeVirtual(h uintptr) error {
	v, ok := virtualMappings.LoadAndDelete(h)
	if !ok {
		return fmt.Errorf("cuda: virtual buffer %#x: no mapping recorded", h)
	}
	m := v.(virtualMapping)
	p := DevicePtr(h)
	return errors.Join(cuCtxSynchronize(), cuMemUnmap(p, m.size), cuMemRelease(m.alloc), cuMemAddressFree(p, m.size))
}
