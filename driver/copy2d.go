package driver

import (
	"math"
	"runtime"
	"unsafe"
)

// memcpy2D is CUDA_MEMCPY2D (CUDA_MEMCPY2D_v2) on 64-bit hosts: 128
// bytes, TestCopy2DStructLayouts checks each field's offset.
type memcpy2D struct {
	srcXInBytes, srcY            uint64
	srcMemoryType                uint32 // CUmemorytype
	_                            uint32
	srcHost, srcDevice, srcArray uint64
	srcPitch                     uint64
	dstXInBytes, dstY            uint64
	dstMemoryType                uint32
	_                            uint32
	dstHost, dstDevice, dstArray uint64
	dstPitch                     uint64
	widthInBytes, height         uint64
}

// Copy2D describes a copy of Height rows of Width bytes between two
// pitched regions: row r of the source starts at byte SrcOff+r*SrcPitch of
// its memory, and lands at DstOff+r*DstPitch of the destination's. Each
// pitch must be at least Width, and the last row must end inside its
// memory (ErrLength otherwise). A copy with a zero Width or Height copies
// nothing.
type Copy2D struct {
	Width, Height    int
	DstOff, DstPitch int
	SrcOff, SrcPitch int
}

// Copy3D describes a copy of Depth slices of Height rows of Width bytes:
// row r of slice z of the source starts at byte
// SrcOff+(z*SrcHeight+r)*SrcPitch, SrcHeight being the source's rows per
// slice (at least Height), and the same with the Dst fields for the
// destination. Its other rules are [Copy2D]'s.
type Copy3D struct {
	Width, Height, Depth        int
	DstOff, DstPitch, DstHeight int
	SrcOff, SrcPitch, SrcHeight int
}

// region is one side of a pitched copy: where it starts, its pitch and its
// rows per slice.
type region struct{ off, pitch, rows int }

// box is a pitched copy: its extent and its two sides.
type box struct {
	w, h, d  int
	dst, src region
	threeD   bool
}

func (c Copy2D) box() box {
	return box{w: c.Width, h: c.Height, d: 1,
		dst: region{c.DstOff, c.DstPitch, c.Height}, src: region{c.SrcOff, c.SrcPitch, c.Height}}
}

func (c Copy3D) box() box {
	return box{w: c.Width, h: c.Height, d: c.Depth, threeD: true,
		dst: region{c.DstOff, c.DstPitch, c.DstHeight}, src: region{c.SrcOff, c.SrcPitch, c.SrcHeight}}
}

// empty reports a box that copies nothing.
func (b box) empty() bool { return b.w == 0 || b.h == 0 || b.d == 0 }

// check checks the box's sizes, and that each side fits in the memory of
// its size, before any driver call.
func (b box) check(op string, dstSize, srcSize int) error {
	if b.w < 0 || b.h < 0 || b.d < 0 {
		return argError(op, "width %d, height %d, depth %d: must not be negative", b.w, b.h, b.d)
	}
	if b.empty() {
		return nil
	}
	if err := b.dst.check(op, "destination", b, dstSize); err != nil {
		return err
	}
	return b.src.check(op, "source", b, srcSize)
}

func (r region) check(op, role string, b box, size int) error {
	if r.off < 0 {
		return argError(op, "%s offset %d: must not be negative", role, r.off)
	}
	if r.pitch < b.w {
		return argError(op, "%s pitch %d: less than the width %d", role, r.pitch, b.w)
	}
	if b.threeD && r.rows < b.h {
		return argError(op, "%s height %d: less than the copy's %d rows", role, r.rows, b.h)
	}
	// The last row of the last slice is row (d-1)*rows + h-1.
	rows := b.h - 1
	if b.d > 1 {
		if r.rows > (math.MaxInt-rows)/(b.d-1) {
			return lengthError(op, role, r.off, math.MaxInt-r.off, size)
		}
		rows += (b.d - 1) * r.rows
	}
	if rows > 0 && r.pitch > (math.MaxInt-r.off-b.w)/rows {
		return lengthError(op, role, r.off, math.MaxInt-r.off, size)
	}
	return checkSpan(op, role, r.off, rows*r.pitch+b.w, size)
}

// end is one side's memory, as the copy structs name it.
type end struct {
	memoryType uint32
	host, dev  uint64
	pitch      uint64
	rows       uint64
}

func hostEnd(p uintptr, r region) end {
	return end{memoryType: memoryTypeHost, host: uint64(p), pitch: uint64(r.pitch), rows: uint64(r.rows)}
}

func deviceEnd(p DevicePtr, r region) end {
	return end{memoryType: memoryTypeDevice, dev: uint64(p) + uint64(r.off), pitch: uint64(r.pitch), rows: uint64(r.rows)}
}

// copy2D and copy3D fill the driver's struct for the box from dst to src.
func (b box) copy2D(dst, src end) *memcpy2D {
	return &memcpy2D{
		srcMemoryType: src.memoryType, srcHost: src.host, srcDevice: src.dev, srcPitch: src.pitch,
		dstMemoryType: dst.memoryType, dstHost: dst.host, dstDevice: dst.dev, dstPitch: dst.pitch,
		widthInBytes: uint64(b.w), height: uint64(b.h),
	}
}

func (b box) copy3D(dst, src end) *memcpy3D {
	return &memcpy3D{
		srcMemoryType: src.memoryType, srcHost: src.host, srcDevice: src.dev, srcPitch: src.pitch, srcHeight: src.rows,
		dstMemoryType: dst.memoryType, dstHost: dst.host, dstDevice: dst.dev, dstPitch: dst.pitch, dstHeight: dst.rows,
		widthInBytes: uint64(b.w), height: uint64(b.h), depth: uint64(b.d),
	}
}

// run makes the synchronous copy (cuMemcpy2D_v2 or cuMemcpy3D_v2).
func (b box) run(dst, src end) error {
	if b.threeD {
		return cuMemcpy3D(b.copy3D(dst, src))
	}
	return cuMemcpy2D(b.copy2D(dst, src))
}

// queue queues the copy on the stream h (cuMemcpy2DAsync_v2 or
// cuMemcpy3DAsync_v2).
func (b box) queue(dst, src end, h uintptr) error {
	if b.threeD {
		return cuMemcpy3DAsync(b.copy3D(dst, src), h)
	}
	return cuMemcpy2DAsync(b.copy2D(dst, src), h)
}

// Copy2DFromHost copies c's rows from src into the buffer and returns when
// done (cuMemcpy2D_v2): c's Dst fields are the buffer's, its Src fields
// src's. src may be any Go memory.
func (b *DeviceBuffer) Copy2DFromHost(c Copy2D, src []byte) error {
	return b.syncHost("DeviceBuffer.Copy2DFromHost", c.box(), true, src)
}

// Copy2DToHost copies c's rows from the buffer into dst and returns when
// done (cuMemcpy2D_v2): c's Dst fields are dst's, its Src fields the
// buffer's.
func (b *DeviceBuffer) Copy2DToHost(dst []byte, c Copy2D) error {
	return b.syncHost("DeviceBuffer.Copy2DToHost", c.box(), false, dst)
}

// Copy2DFromDevice copies c's rows from src into the buffer and returns
// when done (cuMemcpy2D_v2). Both buffers must belong to the same context.
// Between two device buffers the driver may refuse pitches that
// cuMemAllocPitch would not give (multiples of the device's pitch
// alignment, 512 bytes always being one).
func (b *DeviceBuffer) Copy2DFromDevice(c Copy2D, src *DeviceBuffer) error {
	return b.syncDevice("DeviceBuffer.Copy2DFromDevice", c.box(), src)
}

// Copy3DFromHost is [DeviceBuffer.Copy2DFromHost] for a [Copy3D]
// (cuMemcpy3D_v2).
func (b *DeviceBuffer) Copy3DFromHost(c Copy3D, src []byte) error {
	return b.syncHost("DeviceBuffer.Copy3DFromHost", c.box(), true, src)
}

// Copy3DToHost is [DeviceBuffer.Copy2DToHost] for a [Copy3D]
// (cuMemcpy3D_v2).
func (b *DeviceBuffer) Copy3DToHost(dst []byte, c Copy3D) error {
	return b.syncHost("DeviceBuffer.Copy3DToHost", c.box(), false, dst)
}

// Copy3DFromDevice is [DeviceBuffer.Copy2DFromDevice] for a [Copy3D]
// (cuMemcpy3D_v2).
func (b *DeviceBuffer) Copy3DFromDevice(c Copy3D, src *DeviceBuffer) error {
	return b.syncDevice("DeviceBuffer.Copy3DFromDevice", c.box(), src)
}

// syncHost makes a synchronous pitched copy between the buffer and the Go
// memory host, to the buffer when toDevice.
func (b *DeviceBuffer) syncHost(op string, x box, toDevice bool, host []byte) error {
	if b == nil || b.res == nil {
		return argError(op, "nil *DeviceBuffer")
	}
	dstSize, srcSize := len(host), b.size
	if toDevice {
		dstSize, srcSize = b.size, len(host)
	}
	if err := x.check(op, dstSize, srcSize); err != nil {
		return err
	}
	p, err := b.use(op)
	if err != nil {
		return err
	}
	defer b.done()
	if x.empty() {
		return nil
	}
	// The struct holds the host address as an integer: pin the memory, so
	// that it stays where it is, and alive, for the call.
	var pin runtime.Pinner
	pin.Pin(&host[0])
	defer pin.Unpin()
	hp := uintptr(unsafe.Pointer(&host[0]))
	var dst, src end
	if toDevice {
		dst, src = deviceEnd(DevicePtr(p), x.dst), hostEnd(hp+uintptr(x.src.off), x.src)
	} else {
		dst, src = hostEnd(hp+uintptr(x.dst.off), x.dst), deviceEnd(DevicePtr(p), x.src)
	}
	if err := b.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	err = x.run(dst, src)
	runtime.KeepAlive(host)
	return err
}

// syncDevice makes a synchronous pitched copy from src into the buffer.
func (b *DeviceBuffer) syncDevice(op string, x box, src *DeviceBuffer) error {
	if b == nil || b.res == nil || src == nil || src.res == nil {
		return argError(op, "nil *DeviceBuffer")
	}
	if err := usePair(op, &b.owned, &src.owned); err != nil {
		return err
	}
	defer donePair(&b.owned, &src.owned)
	if err := sameContext(op, b.res.core, src.res.core); err != nil {
		return err
	}
	if err := x.check(op, b.size, src.size); err != nil {
		return err
	}
	if x.empty() {
		return nil
	}
	if err := b.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	return x.run(deviceEnd(b.Ptr(), x.dst), deviceEnd(src.Ptr(), x.src))
}

// Copy2DToDevice queues a copy of c's rows from src to dst
// (cuMemcpy2DAsync_v2): c's Dst fields are dst's, its Src fields src's.
// src is kept alive until the host has seen the copy complete, as with
// [Stream.CopyToDevice].
func (s *Stream) Copy2DToDevice(dst *DeviceBuffer, src HostMemory, c Copy2D) error {
	return s.pitchedHost("Stream.Copy2DToDevice", c.box(), true, dst, src)
}

// Copy2DToHost queues a copy of c's rows from src to dst
// (cuMemcpy2DAsync_v2), dst kept alive as with [Stream.CopyToHost].
func (s *Stream) Copy2DToHost(dst HostMemory, src *DeviceBuffer, c Copy2D) error {
	return s.pitchedHost("Stream.Copy2DToHost", c.box(), false, src, dst)
}

// Copy2DDevice queues a copy of c's rows between two device buffers of the
// stream's context (cuMemcpy2DAsync_v2), with the pitches that
// [DeviceBuffer.Copy2DFromDevice] says.
func (s *Stream) Copy2DDevice(dst, src *DeviceBuffer, c Copy2D) error {
	return s.pitchedDevice("Stream.Copy2DDevice", c.box(), dst, src)
}

// Copy3DToDevice is [Stream.Copy2DToDevice] for a [Copy3D]
// (cuMemcpy3DAsync_v2).
func (s *Stream) Copy3DToDevice(dst *DeviceBuffer, src HostMemory, c Copy3D) error {
	return s.pitchedHost("Stream.Copy3DToDevice", c.box(), true, dst, src)
}

// Copy3DToHost is [Stream.Copy2DToHost] for a [Copy3D]
// (cuMemcpy3DAsync_v2).
func (s *Stream) Copy3DToHost(dst HostMemory, src *DeviceBuffer, c Copy3D) error {
	return s.pitchedHost("Stream.Copy3DToHost", c.box(), false, src, dst)
}

// Copy3DDevice is [Stream.Copy2DDevice] for a [Copy3D]
// (cuMemcpy3DAsync_v2).
func (s *Stream) Copy3DDevice(dst, src *DeviceBuffer, c Copy3D) error {
	return s.pitchedDevice("Stream.Copy3DDevice", c.box(), dst, src)
}

// pitchedHost queues a pitched copy between dev and host memory on s, to
// dev when toDevice, and records the host memory as in use until the host
// sees the copy done.
func (s *Stream) pitchedHost(op string, x box, toDevice bool, dev *DeviceBuffer, host HostMemory) error {
	devRole, hostRole := "source", "destination"
	devSide, hostSide := x.src, x.dst
	if toDevice {
		devRole, hostRole = "destination", "source"
		devSide, hostSide = x.dst, x.src
	}
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	if dev == nil || dev.res == nil {
		return argError(op, "nil %s *DeviceBuffer", devRole)
	}
	if host == nil {
		return argError(op, "nil %s HostMemory", hostRole)
	}
	hostSize := len(host.Bytes())
	if hostSize == 0 {
		// Closed (or nil inside the interface): lockSpan says which.
		_, mem, _, err := host.lockSpan(op, hostRole, 0, 0)
		if err != nil {
			return err
		}
		mem.mu.RUnlock()
	}
	dstSize, srcSize := hostSize, dev.size
	if toDevice {
		dstSize, srcSize = dev.size, hostSize
	}
	if err := x.check(op, dstSize, srcSize); err != nil {
		return err
	}
	d, err := dev.use(op)
	if err != nil {
		return err
	}
	defer dev.done()
	p, mem, keep, err := host.lockSpan(op, hostRole, 0, 0)
	if err != nil {
		return err
	}
	defer mem.mu.RUnlock()
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	k := s.res.core
	if err := sameContext(op, dev.res.core, k); err != nil {
		return err
	}
	if !mem.portable {
		if err := sameContext(op, mem.core, k); err != nil {
			return err
		}
	}
	if x.empty() {
		return nil
	}
	de := deviceEnd(DevicePtr(d), devSide)
	he := hostEnd(p+uintptr(hostSide.off), hostSide)
	dst, src := he, de
	if toDevice {
		dst, src = de, he
	}
	sc, err := s.issuing(op, via{})
	if err != nil {
		return err
	}
	err = x.queue(dst, src, h)
	via{}.issued(sc)
	if err == nil {
		if c := s.capt.Load(); c != nil {
			c.add(mem, keep, true)
			c.add(dev.res, dev, false)
		} else {
			s.res.uses.add(mem, keep)
		}
	}
	return err
}

// pitchedDevice queues a pitched copy between two device buffers on s.
func (s *Stream) pitchedDevice(op string, x box, dst, src *DeviceBuffer) error {
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	if dst == nil || dst.res == nil {
		return argError(op, "nil destination *DeviceBuffer")
	}
	if src == nil || src.res == nil {
		return argError(op, "nil source *DeviceBuffer")
	}
	if err := x.check(op, dst.size, src.size); err != nil {
		return err
	}
	if err := usePair(op, &dst.owned, &src.owned); err != nil {
		return err
	}
	defer donePair(&dst.owned, &src.owned)
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	k := s.res.core
	if err := sameContext(op, dst.res.core, k); err != nil {
		return err
	}
	if err := sameContext(op, src.res.core, k); err != nil {
		return err
	}
	if x.empty() {
		return nil
	}
	sc, err := s.issuing(op, via{})
	if err != nil {
		return err
	}
	err = x.queue(deviceEnd(dst.Ptr(), x.dst), deviceEnd(src.Ptr(), x.src), h)
	via{}.issued(sc)
	if c := s.capt.Load(); c != nil && err == nil {
		c.add(dst.res, dst, false)
		c.add(src.res, src, false)
	}
	return err
}
