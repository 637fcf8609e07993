package driver

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"
)

// memcpyAttributes is CUmemcpyAttributes (CUmemcpyAttributes_v1): 24
// bytes, TestBatchStructLayout checks its offsets.
type memcpyAttributes struct {
	srcAccessOrder uint32 // CUmemcpySrcAccessOrder
	srcLocType     uint32 // srcLocHint, a CUmemLocation
	srcLocID       int32
	dstLocType     uint32 // dstLocHint
	dstLocID       int32
	flags          uint32 // CUmemcpyFlags
}

const (
	memcpySrcAccessOrderStream     = 0x1 // CU_MEMCPY_SRC_ACCESS_ORDER_STREAM
	memcpyPreferOverlapWithCompute = 0x1 // CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE
)

// BatchCopy is one copy of a [Stream.CopyBatch]: N bytes from the source
// at SrcOff to the destination at DstOff. Each side is a device buffer of
// the stream's context or pinned host memory ([HostMemory]): exactly one
// of DstDevice and DstHost, and of SrcDevice and SrcHost, is set.
type BatchCopy struct {
	DstDevice *DeviceBuffer
	DstHost   HostMemory
	DstOff    int
	SrcDevice *DeviceBuffer
	SrcHost   HostMemory
	SrcOff    int
	N         int
}

// BatchOptions configure [Stream.CopyBatch]. The zero value orders every
// source's reads in the stream, as any queued copy.
type BatchOptions struct {
	// PreferOverlap asks the driver to run the copies so that they
	// overlap kernels, rather than as fast as they can
	// (CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE).
	PreferOverlap bool
}

// CopyBatch queues copies, in one call, on s (cuMemcpyBatchAsync_v2, CUDA
// 13.0): the batch runs after the work queued on s before it, and before
// the work queued after, but its copies run in no set order among
// themselves, so no copy's destination may overlap another copy's source
// or destination. Every
// span is checked first (ErrLength), and every object of the batch must
// be open and of s's context (or portable host memory); the host memory
// is kept alive until the host has seen the copies complete, as with
// [Stream.CopyToDevice]. Copies of 0 bytes are left out; a batch of none
// calls nothing.
func (s *Stream) CopyBatch(copies []BatchCopy, opts BatchOptions) error {
	const op = "Stream.CopyBatch"
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	// Check every copy's arguments before locking anything.
	for i, c := range copies {
		for _, side := range []struct {
			role string
			dev  *DeviceBuffer
			host HostMemory
		}{{"destination", c.DstDevice, c.DstHost}, {"source", c.SrcDevice, c.SrcHost}} {
			hostSet := side.host != nil && !isNilHost(side.host)
			switch {
			case side.dev == nil && !hostSet:
				return argError(op, "copy %d: no %s", i, side.role)
			case side.dev != nil && hostSet:
				return argError(op, "copy %d: both a device and a host %s", i, side.role)
			case side.dev != nil && side.dev.res == nil:
				return argError(op, "copy %d: zero %s *DeviceBuffer", i, side.role)
			}
		}
		if c.N < 0 {
			return argError(op, "copy %d: size %d: must not be negative", i, c.N)
		}
	}
	// Lock every object once, in a fixed order (by resource address), so
	// that two batches locking the same objects cannot deadlock against
	// Closes; then the stream.
	type held struct {
		res  *resource
		keep any
		host bool
		size int
	}
	var objs []held
	add := func(dev *DeviceBuffer, host HostMemory) {
		if dev != nil {
			objs = append(objs, held{res: dev.res, keep: dev, size: dev.size})
			return
		}
		// The host memory's resource is what lockSpan returns; size is
		// its length.
		objs = append(objs, held{keep: host, host: true, size: len(host.Bytes())})
	}
	for _, c := range copies {
		add(c.DstDevice, c.DstHost)
		add(c.SrcDevice, c.SrcHost)
	}
	var locked []*resource
	unlock := func() {
		for _, r := range locked {
			r.mu.RUnlock()
		}
	}
	defer unlock()
	// Host memory: lockSpan finds the resource; lock it at once and let go,
	// only to learn it (a closed one is an error now).
	for i := range objs {
		if objs[i].host {
			_, mem, _, err := objs[i].keep.(HostMemory).lockSpan(op, "host", 0, 0)
			if err != nil {
				return err
			}
			mem.mu.RUnlock()
			objs[i].res = mem
		}
	}
	order := slices.Clone(objs)
	slices.SortFunc(order, func(a, b held) int {
		return cmp.Compare(uintptr(unsafe.Pointer(a.res)), uintptr(unsafe.Pointer(b.res)))
	})
	order = slices.CompactFunc(order, func(a, b held) bool { return a.res == b.res })
	base := map[*resource]uintptr{}
	for _, o := range order {
		h, err := o.res.acquire(op)
		if err != nil {
			return err
		}
		locked = append(locked, o.res)
		base[o.res] = h
	}
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	k := s.res.core
	for _, o := range order {
		if o.host && o.res.portable {
			continue
		}
		if err := sameContext(op, o.res.core, k); err != nil {
			return err
		}
	}
	dsts := make([]DevicePtr, 0, len(copies))
	srcs := make([]DevicePtr, 0, len(copies))
	sizes := make([]uintptr, 0, len(copies))
	for i, c := range copies {
		d, sr := objs[2*i], objs[2*i+1]
		if err := checkSpan(op, fmt.Sprintf("copy %d's destination", i), c.DstOff, c.N, d.size); err != nil {
			return err
		}
		if err := checkSpan(op, fmt.Sprintf("copy %d's source", i), c.SrcOff, c.N, sr.size); err != nil {
			return err
		}
		if c.N == 0 {
			continue
		}
		dsts = append(dsts, DevicePtr(base[d.res]+uintptr(c.DstOff)))
		srcs = append(srcs, DevicePtr(base[sr.res]+uintptr(c.SrcOff)))
		sizes = append(sizes, uintptr(c.N))
	}
	if len(sizes) == 0 {
		return nil
	}
	attrs := &memcpyAttributes{srcAccessOrder: memcpySrcAccessOrderStream}
	if opts.PreferOverlap {
		attrs.flags = memcpyPreferOverlapWithCompute
	}
	idx := new(uintptr) // the one attribute applies from copy 0 on
	sc, err := s.issuing(op, via{})
	if err != nil {
		return err
	}
	err = cuMemcpyBatchAsync(&dsts[0], &srcs[0], &sizes[0], uintptr(len(sizes)), attrs, idx, 1, h)
	via{}.issued(sc)
	if err != nil {
		return err
	}
	c := s.capt.Load()
	for _, o := range order {
		switch {
		case c != nil:
			c.add(o.res, o.keep, o.host)
		case o.host:
			s.res.uses.add(o.res, o.keep)
		}
	}
	return nil
}

// isNilHost reports a HostMemory interface that holds a nil pointer.
func isNilHost(h HostMemory) bool {
	switch v := h.(type) {
	case *HostBuffer:
		return v == nil
	case *HostRegistration:
		return v == nil
	}
	return false
}
