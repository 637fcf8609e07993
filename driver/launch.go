package driver

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

const (
	maxArgs     = 64
	maxArgBytes = 4096 // the classic kernel parameter limit
)

// Args is a kernel's argument list: the values, marshalled as the kernel's
// parameter buffer lays them out. It is plain Go memory, held by value: an
// Args may be a package-level variable, a local or a field, and copying one
// copies its values. At each launch the values are copied into a slab that
// is pinned for the life of the process, so nothing the driver reads is
// ever moved or collected, and launching allocates nothing. Build it once,
// Reset it between launches, and reuse it. The zero value is ready to use.
// Building an Args must not race with using it; launching the same Args
// from several goroutines at once is safe.
type Args struct {
	vals  [maxArgBytes / 8]uint64 // 8-byte aligned storage
	offs  [maxArgs]uint16
	sizes [maxArgs]uint16
	n     int
	used  int
	err   error
}

// argSlab is the memory the driver reads during cuLaunchKernel: a copy of
// the argument values and the kernelParams array of pointers into them,
// and the launch's own argument block and out-parameters for purego, so
// that a launch needs nothing from scratchPool.
type argSlab struct {
	vals [maxArgBytes / 8]uint64
	ptrs [maxArgs]unsafe.Pointer
	call scratch
	busy atomic.Bool // taken (slabs in argSlabs.slots only)
	slot bool        // lives in argSlabs.slots, not on the overflow list
}

// slabSlots is how many slabs can be taken without a lock at once; more
// concurrent launches share an overflow list under a mutex.
const slabSlots = 64

// argSlabs holds the slabs. Each is pinned once when made and never
// unpinned: there are only as many as launches ever ran at once. A launch
// takes a slot's slab with one compare-and-swap, starting at a slot chosen
// by its goroutine's stack address, so that concurrent launches from
// several goroutines rarely meet on one slot: a mutex that guarded a
// single free list was a measurable part of a bound launch's own cost
// (bench/RESULTS.md, "The hot path after ccall").
var argSlabs struct {
	slots [slabSlots]atomic.Pointer[argSlab]
	mu    sync.Mutex // guards free and pins, and fills empty slots
	free  []*argSlab
	pins  runtime.Pinner // reachable forever, so never reported as leaking
}

// newSlab makes and pins a slab; the caller holds argSlabs.mu.
func newSlab() *argSlab {
	s := new(argSlab)
	argSlabs.pins.Pin(s)
	return s
}

// slotSlab returns slot i's slab, making it on first use.
func slotSlab(i int) *argSlab {
	if s := argSlabs.slots[i].Load(); s != nil {
		return s
	}
	argSlabs.mu.Lock()
	defer argSlabs.mu.Unlock()
	if s := argSlabs.slots[i].Load(); s != nil {
		return s
	}
	s := newSlab()
	s.slot = true
	argSlabs.slots[i].Store(s)
	return s
}

func getSlab() *argSlab {
	// Goroutines run on distinct stacks: the address of a local spreads
	// them over the slots without a shared counter. It is only a hint.
	var probe byte
	h := uint64(uintptr(unsafe.Pointer(&probe)) >> 10)
	start := int((h * 0x9E3779B97F4A7C15) >> (64 - 6)) // 0..63: slabSlots is 1<<6
	for n := 0; n < slabSlots; n++ {
		s := slotSlab((start + n) % slabSlots)
		if !s.busy.Load() && s.busy.CompareAndSwap(false, true) {
			return s
		}
	}
	argSlabs.mu.Lock()
	defer argSlabs.mu.Unlock()
	if n := len(argSlabs.free); n > 0 {
		s := argSlabs.free[n-1]
		argSlabs.free = argSlabs.free[:n-1]
		return s
	}
	return newSlab()
}

func putSlab(s *argSlab) {
	if s.slot {
		s.busy.Store(false)
		return
	}
	argSlabs.mu.Lock()
	argSlabs.free = append(argSlabs.free, s)
	argSlabs.mu.Unlock()
}

// NewArgs returns an empty argument list.
func NewArgs() *Args { return new(Args) }

// Reset empties the list for reuse. On a nil *Args it, like every method
// that appends, does nothing and returns nil, which a launch refuses.
func (a *Args) Reset() *Args {
	if a == nil {
		return nil
	}
	a.n, a.used, a.err = 0, 0, nil
	return a
}

// Len returns the number of arguments; 0 for a nil *Args.
func (a *Args) Len() int {
	if a == nil {
		return 0
	}
	return a.n
}

// Layout returns each argument's offset and size in the slab; nil for a
// nil *Args.
func (a *Args) Layout() []ParamInfo {
	if a == nil {
		return nil
	}
	out := make([]ParamInfo, a.n)
	for i := range out {
		out[i] = ParamInfo{Offset: int(a.offs[i]), Size: int(a.sizes[i])}
	}
	return out
}

// Err returns the first error met while building the list; for a nil
// *Args, an error that says so (ErrInvalidArgument).
func (a *Args) Err() error {
	if a == nil {
		return argError("Args.Err", "nil *Args")
	}
	return a.err
}

// add reserves size bytes aligned to align for op, the method that appends
// (Args.Uint32, say), and returns them; nil on a nil *Args.
func (a *Args) add(op string, size, align int) []byte {
	if a == nil || a.err != nil {
		return nil
	}
	if a.n == maxArgs {
		a.err = argumentsError(op, "more than %d arguments", maxArgs)
		return nil
	}
	off := (a.used + align - 1) &^ (align - 1)
	if off+size > maxArgBytes {
		a.err = argumentsError(op, "arguments exceed %d bytes", maxArgBytes)
		return nil
	}
	a.offs[a.n], a.sizes[a.n] = uint16(off), uint16(size)
	a.n++
	a.used = off + size
	return a.bytes()[off : off+size]
}

func (a *Args) bytes() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&a.vals[0])), maxArgBytes)
}

// Pointer appends a device address (a CUdeviceptr, 8 bytes).
func (a *Args) Pointer(p DevicePtr) *Args { return a.pointer("Args.Pointer", p) }

func (a *Args) pointer(op string, p DevicePtr) *Args {
	if b := a.add(op, 8, 8); b != nil {
		binary.NativeEndian.PutUint64(b, uint64(p))
	}
	return a
}

// Buffer appends the address of b at byte offset off. A nil or closed
// buffer is recorded as an error and reported by the launch.
func (a *Args) Buffer(b *DeviceBuffer, off int) *Args {
	if a == nil {
		return nil
	}
	if b == nil || b.Ptr() == 0 {
		if a.err == nil {
			a.err = argError("Args.Buffer", "nil or closed buffer")
		}
		return a
	}
	if off < 0 || off > b.Len() {
		if a.err == nil {
			a.err = lengthError("Args.Buffer", "buffer", off, 0, b.Len())
		}
		return a
	}
	return a.pointer("Args.Buffer", b.Ptr()+DevicePtr(off))
}

// Int32 appends a 32-bit signed integer.
func (a *Args) Int32(v int32) *Args { return a.uint32("Args.Int32", uint32(v)) }

// Uint32 appends a 32-bit unsigned integer.
func (a *Args) Uint32(v uint32) *Args { return a.uint32("Args.Uint32", v) }

func (a *Args) uint32(op string, v uint32) *Args {
	if b := a.add(op, 4, 4); b != nil {
		binary.NativeEndian.PutUint32(b, v)
	}
	return a
}

// Int64 appends a 64-bit signed integer.
func (a *Args) Int64(v int64) *Args { return a.uint64("Args.Int64", uint64(v)) }

// Uint64 appends a 64-bit unsigned integer.
func (a *Args) Uint64(v uint64) *Args { return a.uint64("Args.Uint64", v) }

func (a *Args) uint64(op string, v uint64) *Args {
	if b := a.add(op, 8, 8); b != nil {
		binary.NativeEndian.PutUint64(b, v)
	}
	return a
}

// Float32 appends a float.
func (a *Args) Float32(v float32) *Args { return a.uint32("Args.Float32", math.Float32bits(v)) }

// Float64 appends a double.
func (a *Args) Float64(v float64) *Args { return a.uint64("Args.Float64", math.Float64bits(v)) }

// Raw appends an arbitrary by-value argument (a struct, say) with the
// given alignment, which must be a power of two no larger than 8.
func (a *Args) Raw(v []byte, align int) *Args {
	if a == nil {
		return nil
	}
	if align <= 0 || align > 8 || align&(align-1) != 0 || len(v) == 0 {
		if a.err == nil {
			a.err = argError("Args.Raw", "size %d, align %d", len(v), align)
		}
		return a
	}
	if b := a.add("Args.Raw", len(v), align); b != nil {
		copy(b, v)
	}
	return a
}

// Dim3 is a grid or block size. Zero Y or Z count as 1.
type Dim3 struct{ X, Y, Z int }

func (d Dim3) norm() (x, y, z uintptr, ok bool) {
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	if d.X <= 0 || d.Y <= 0 || d.Z <= 0 || int64(d.X) > math.MaxUint32 || int64(d.Y) > math.MaxUint32 || int64(d.Z) > math.MaxUint32 {
		return 0, 0, 0, false
	}
	return uintptr(d.X), uintptr(d.Y), uintptr(d.Z), true
}

// LaunchConfig is a kernel launch's shape.
type LaunchConfig struct {
	Grid, Block Dim3
	// SharedMem is the dynamic shared memory per block in bytes.
	SharedMem int
}

// GridFor returns a one-dimensional config covering n threads with blocks
// of block threads.
func GridFor(n, block int) LaunchConfig {
	if block <= 0 {
		block = 256
	}
	g := (n + block - 1) / block
	if g < 1 {
		g = 1
	}
	return LaunchConfig{Grid: Dim3{X: g}, Block: Dim3{X: block}}
}

// checkArgs compares args with the function's known parameter layout, for
// Function.Launch.
func (f *Function) checkArgs(a *Args) error { return f.checkArgsFor("Function.Launch", a) }

// checkArgsFor is checkArgs for op.
func (f *Function) checkArgsFor(op string, a *Args) error {
	if a.err != nil {
		return a.err
	}
	pp := f.params.Load()
	if pp == nil {
		return nil
	}
	params := *pp
	if a.n != len(params) {
		return argumentsError(op, "kernel %s takes %d argument(s), got %d", f.name, len(params), a.n)
	}
	for i := 0; i < a.n; i++ {
		if int(a.sizes[i]) != params[i].Size {
			return argumentsError(op, "kernel %s: argument %d is %d bytes, it expects %d", f.name, i, a.sizes[i], params[i].Size)
		}
	}
	return nil
}

// Launch queues the kernel on s (cuLaunchKernel). Where the parameter
// layout is known, the argument count and each argument's size are checked
// first, and a mismatch never reaches the driver. The function and the
// stream must belong to the same context. Launch allocates nothing.
func (f *Function) Launch(s *Stream, cfg LaunchConfig, args *Args) error {
	return f.launch(via{}, s, cfg, args)
}

// launch is Function.Launch through bound.
func (f *Function) launch(bound via, s *Stream, cfg LaunchConfig, args *Args) error {
	return f.launchFor("Function.Launch", bound, s, cfg, args)
}

// launchFor is the launch that op (Function.Launch, Bound.Launch) makes.
func (f *Function) launchFor(op string, bound via, s *Stream, cfg LaunchConfig, args *Args) error {
	if f == nil || f.mod == nil {
		return argError(op, "nil *Function")
	}
	if args == nil {
		return argError(op, "nil *Args (use NewArgs() for a kernel without parameters)")
	}
	var dims [7]uintptr // grid, block, shared memory: cuLaunchKernel's order
	var ok bool
	if dims[0], dims[1], dims[2], ok = cfg.Grid.norm(); !ok {
		return argError(op, "grid %+v: sizes must be positive", cfg.Grid)
	}
	if dims[3], dims[4], dims[5], ok = cfg.Block.norm(); !ok {
		return argError(op, "block %+v: sizes must be positive", cfg.Block)
	}
	if cfg.SharedMem < 0 {
		return argError(op, "shared memory %d: must not be negative", cfg.SharedMem)
	}
	dims[6] = uintptr(cfg.SharedMem)
	// The module first, then the stream, as every call locks. No defers on
	// this hot path (a function with many returns gets no open-coded
	// defers): each lock is let go on every path below, and nothing
	// between a lock and its release can panic.
	if _, err := f.mod.use(op); err != nil {
		return err
	}
	err := f.checkArgsFor(op, args)
	if err == nil {
		var h uintptr
		if h, err = s.lock(op); err == nil {
			err = f.launchOn(op, bound, s.res.core, h, &dims, args)
			s.done()
		}
	}
	f.mod.done()
	return err
}

// launchOn launches f on the stream whose handle is h and whose context is
// k, with f's module and the stream locked by the caller.
func (f *Function) launchOn(op string, bound via, k *ctxCore, h uintptr, dims *[7]uintptr, args *Args) error {
	if err := sameContext(op, f.mod.res.core, k); err != nil {
		return err
	}
	if bound.k != nil && bound.k != k {
		return sameContext(op+" (bound)", bound.k, k)
	}
	slab := getSlab()
	copy(slab.vals[:(args.used+7)/8], args.vals[:])
	base := unsafe.Pointer(&slab.vals[0])
	for i := 0; i < args.n; i++ {
		slab.ptrs[i] = unsafe.Add(base, args.offs[i])
	}
	sc := &slab.call
	if bound.k == nil {
		if err := k.enterWith(op, sc); err != nil {
			putSlab(slab)
			return err
		}
	}
	err := cuLaunchKernel(sc, bound.direct, f.handle, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], h,
		&slab.ptrs[0], nil)
	if bound.k == nil {
		leave()
	}
	putSlab(slab)
	return err
}
