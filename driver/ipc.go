package driver

import (
	"errors"
	"runtime"
)

// IPCMemHandle is a CUipcMemHandle: 64 opaque bytes that name device
// memory of one process to another ([DeviceBuffer.IPCHandle],
// [Context.OpenIPCMem]). Send its bytes as they are.
type IPCMemHandle [64]byte

// IPCEventHandle is a CUipcEventHandle: 64 opaque bytes that name an
// interprocess event to another process ([Event.IPCHandle],
// [Context.OpenIPCEvent]).
type IPCEventHandle [64]byte

const (
	ipcLazyEnablePeerAccess = 0x1 // CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
	eventInterprocess       = 0x4 // CU_EVENT_INTERPROCESS
)

// IPCHandle returns the handle that lets another process open the buffer
// (cuIpcGetMemHandle). Only memory from [Context.Alloc] can be shared so;
// the buffer must stay open while other processes use it.
func (b *DeviceBuffer) IPCHandle() (IPCMemHandle, error) {
	const op = "DeviceBuffer.IPCHandle"
	var out IPCMemHandle
	if b == nil || b.res == nil {
		return out, argError(op, "nil *DeviceBuffer")
	}
	if b.res.kind != kindDeviceMemory {
		return out, argError(op, "a %s cannot be shared between processes: only Alloc's memory can", b.res.kind)
	}
	p, err := b.use(op)
	if err != nil {
		return out, err
	}
	defer b.done()
	if err := b.res.core.enter(op); err != nil {
		return out, err
	}
	defer leave()
	h := new(IPCMemHandle)
	if err := cuIpcGetMemHandle(h, DevicePtr(p)); err != nil {
		return out, err
	}
	return *h, nil
}

// OpenIPCMem maps the device memory of another process that h names into
// c (cuIpcOpenMemHandle_v2, with peer access enabled lazily when the
// memory is another device's), as a DeviceBuffer of n bytes: n, the
// exporter's length, must be positive and fit in the memory the handle
// names (cuMemGetAddressRange_v2). The caller owns the buffer and must
// Close it, which waits for c's work and unmaps the memory
// (cuIpcCloseMemHandle); the exporter's memory is not freed. Handles are
// for other processes: the driver need not open the caller's own.
func (c *Context) OpenIPCMem(h IPCMemHandle, n int) (*DeviceBuffer, error) {
	const op = "Context.OpenIPCMem"
	if n <= 0 {
		return nil, argError(op, "size %d: must be positive", n)
	}
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	var pin runtime.Pinner
	defer pin.Unpin()
	p := new(DevicePtr)
	w := byValue64((*[64]byte)(&h), ipcLazyEnablePeerAccess, &pin)
	if err := cuIpcOpenMemHandle(p, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12]); err != nil {
		return nil, err
	}
	base, size := new(DevicePtr), new(uintptr)
	if err := cuMemGetAddressRange(base, size, *p); err != nil {
		return nil, errors.Join(err, cuIpcCloseMemHandle(*p))
	}
	if end := uint64(*base) + uint64(*size); uint64(n) > end-uint64(*p) {
		return nil, errors.Join(
			lengthError(op, "shared memory", 0, n, int(end-uint64(*p))),
			cuIpcCloseMemHandle(*p))
	}
	r, err := k.adopt(op, kindIPCMemory, uintptr(*p), nil)
	if err != nil {
		return nil, err
	}
	b := &DeviceBuffer{size: n}
	own(b, &b.owned, c, r, true)
	return b, nil
}

// closeIPC unmaps memory that OpenIPCMem mapped, with its context
// current, after the context's work, which may still use it.
func closeIPC(h uintptr) error {
	return errors.Join(cuCtxSynchronize(), cuIpcCloseMemHandle(DevicePtr(h)))
}

// NewIPCEvent creates an event that other processes can open
// ([Event.IPCHandle]): without timing, as interprocess events must be
// (cuEventCreate with CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING).
func (c *Context) NewIPCEvent() (*Event, error) {
	const op = "Context.NewIPCEvent"
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	var h uintptr
	if err := cuEventCreate(&h, eventInterprocess|eventDisableTiming); err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindEvent, h, nil)
	if err != nil {
		return nil, err
	}
	e := &Event{}
	own(e, &e.owned, c, r, true)
	return e, nil
}

// IPCHandle returns the handle that lets another process open the event
// (cuIpcGetEventHandle). The event must come from [Context.NewIPCEvent].
func (e *Event) IPCHandle() (IPCEventHandle, error) {
	const op = "Event.IPCHandle"
	var out IPCEventHandle
	if e == nil || e.res == nil {
		return out, argError(op, "nil *Event")
	}
	h, err := e.use(op)
	if err != nil {
		return out, err
	}
	defer e.done()
	if err := e.res.core.enter(op); err != nil {
		return out, err
	}
	defer leave()
	p := new(IPCEventHandle)
	if err := cuIpcGetEventHandle(p, h); err != nil {
		return out, err
	}
	return *p, nil
}

// OpenIPCEvent opens the event of another process that h names
// (cuIpcOpenEventHandle): records and waits on it are the exporter's
// event's. The caller owns the Event and must Close it, which destroys
// this process's reference only (cuEventDestroy_v2).
func (c *Context) OpenIPCEvent(h IPCEventHandle) (*Event, error) {
	const op = "Context.OpenIPCEvent"
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	var pin runtime.Pinner
	defer pin.Unpin()
	ev := new(uintptr)
	w := byValue64((*[64]byte)(&h), 0, &pin)
	if err := cuIpcOpenEventHandle(ev, w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12]); err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindEvent, *ev, nil)
	if err != nil {
		return nil, err
	}
	e := &Event{}
	own(e, &e.owned, c, r, true)
	return e, nil
}
