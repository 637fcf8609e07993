package driver

import "unsafe"

// Results of the peer-access calls, for errors.Is.
const (
	ErrPeerAccessUnsupported    Result = 217
	ErrPeerAccessAlreadyEnabled Result = 704
	ErrPeerAccessNotEnabled     Result = 705
)

// CanAccessPeer reports whether kernels and copies of d's contexts can
// address peer's memory directly once [Context.EnablePeerAccess] allows
// it (cuDeviceCanAccessPeer). A device is never its own peer: d and peer
// the same device is false.
func (d Device) CanAccessPeer(peer Device) (bool, error) {
	const op = "Device.CanAccessPeer"
	if err := d.check(op); err != nil {
		return false, err
	}
	if err := peer.check(op); err != nil {
		return false, err
	}
	var can int32
	if err := cuDeviceCanAccessPeer(&can, d.cu(), peer.cu()); err != nil {
		return false, err
	}
	return can != 0, nil
}

// EnablePeerAccess lets c's kernels and copies address the memory of
// peer's device directly (cuCtxEnablePeerAccess), one way: enable it on
// both Contexts for both ways. Access lasts while both devices' primary
// contexts stay retained (while a Context of each is open). Enabling it
// twice is ErrPeerAccessAlreadyEnabled; devices that cannot
// ([Device.CanAccessPeer]) get ErrPeerAccessUnsupported from the driver.
// c and peer must be Contexts of two devices.
func (c *Context) EnablePeerAccess(peer *Context) error {
	return c.peerAccess("Context.EnablePeerAccess", peer, func(h uintptr) error { return cuCtxEnablePeerAccess(h, 0) })
}

// DisablePeerAccess ends the access that [Context.EnablePeerAccess] gave c
// to peer's memory (cuCtxDisablePeerAccess); ErrPeerAccessNotEnabled when
// there is none.
func (c *Context) DisablePeerAccess(peer *Context) error {
	return c.peerAccess("Context.DisablePeerAccess", peer, cuCtxDisablePeerAccess)
}

// peerAccess calls set with peer's CUcontext, with c current and both
// contexts held open for the call.
func (c *Context) peerAccess(op string, peer *Context, set func(peer uintptr) error) error {
	if c == nil || c.core == nil {
		return argError(op, "nil *Context")
	}
	if peer == nil || peer.core == nil {
		return argError(op, "nil peer *Context")
	}
	k, p := c.core, peer.core
	if k.dev == p.dev {
		return argError(op, "a context of GPU %d is not its own peer", k.dev.ordinal)
	}
	// Both lives are read-held, in a fixed order, so that two calls
	// crossing each other cannot deadlock against two Closes.
	first, second := k, p
	if uintptr(unsafe.Pointer(first)) > uintptr(unsafe.Pointer(second)) {
		first, second = second, first
	}
	if err := first.alive(op); err != nil {
		return err
	}
	defer first.life.RUnlock()
	if err := second.alive(op); err != nil {
		return err
	}
	defer second.life.RUnlock()
	if err := k.enter(op); err != nil {
		return err
	}
	defer leave()
	return set(p.handle.Load())
}

// CopyFromPeer copies n bytes from src at srcOff into the buffer at off
// and returns when done (cuMemcpyPeer): src may belong to another device's
// context, and needs no peer access (the driver stages the copy when
// there is none).
func (b *DeviceBuffer) CopyFromPeer(off int, src *DeviceBuffer, srcOff, n int) error {
	const op = "DeviceBuffer.CopyFromPeer"
	if b == nil || b.res == nil || src == nil || src.res == nil {
		return argError(op, "nil *DeviceBuffer")
	}
	if err := usePair(op, &b.owned, &src.owned); err != nil {
		return err
	}
	defer donePair(&b.owned, &src.owned)
	if err := checkSpan(op, "destination", off, n, b.size); err != nil {
		return err
	}
	if err := checkSpan(op, "source", srcOff, n, src.size); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	dk, sk := b.res.core, src.res.core
	if err := dk.enter(op); err != nil {
		return err
	}
	defer leave()
	return cuMemcpyPeer(b.Ptr()+DevicePtr(off), dk.handle.Load(), src.Ptr()+DevicePtr(srcOff), sk.handle.Load(), uintptr(n))
}

// CopyPeer queues a copy of n bytes from src at srcOff to dst at dstOff
// (cuMemcpyPeerAsync), between buffers that may belong to two devices'
// contexts; the stream must belong to one of them. A copy of 0 bytes
// between open objects does nothing.
func (s *Stream) CopyPeer(dst *DeviceBuffer, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	const op = "Stream.CopyPeer"
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	if dst == nil || dst.res == nil {
		return argError(op, "nil destination *DeviceBuffer")
	}
	if src == nil || src.res == nil {
		return argError(op, "nil source *DeviceBuffer")
	}
	if err := usePair(op, &dst.owned, &src.owned); err != nil {
		return err
	}
	defer donePair(&dst.owned, &src.owned)
	if err := checkSpan(op, "destination", dstOff, n, dst.size); err != nil {
		return err
	}
	if err := checkSpan(op, "source", srcOff, n, src.size); err != nil {
		return err
	}
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	k, dk, sk := s.res.core, dst.res.core, src.res.core
	if k != dk && k != sk {
		return sameContext(op, dk, k)
	}
	if n == 0 {
		return nil
	}
	sc, err := s.issuing(op, via{})
	if err != nil {
		return err
	}
	err = cuMemcpyPeerAsync(dst.Ptr()+DevicePtr(dstOff), dk.handle.Load(), src.Ptr()+DevicePtr(srcOff), sk.handle.Load(), uintptr(n), h)
	via{}.issued(sc)
	if c := s.capt.Load(); c != nil && err == nil {
		c.add(dst.res, dst, false)
		c.add(src.res, src, false)
	}
	return err
}
