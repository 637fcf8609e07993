package pipeline

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/hostcpu"
	"github.com/purecuda/overlap/internal/parallel"
)

// gpuBackend runs the pipeline on a real GPU through package driver.
type gpuBackend struct {
	ctx  *driver.Context
	name string
	// pin are the CPUs local to the GPU (Linux) that the process may use,
	// where a run's issuing thread runs; nil when unknown, or when every
	// CPU the process may use is local, so that no run pays for pinning.
	pin []int
	// issuers holds issuers between runs, each with its Bound and its
	// argument slab, so that a run allocates none (bench/RESULTS.md,
	// "Small jobs without allocations").
	issuers sync.Pool
	// bind is how the issuer of a run of one chunk binds its thread
	// (singleIssuer); every other issuer binds with the zero options.
	bind driver.BindOptions
}

// GPUOptions are a GPU backend's choices; the zero value is GPU's.
type GPUOptions struct {
	// DirectCalls issues the copies and the launch of each run of one
	// chunk (a small job: one chunk, nothing staged, untimed) as
	// [driver.BindOptions].DirectCalls does: without the Go scheduler's
	// system-call transition, 55–134 ns less per launch on an H200 host,
	// at the price that a call that blocks in the driver holds up the
	// garbage collector's stop-the-world until it returns. Such a run
	// queues three operations on a stream it has drained, so its calls
	// have no full queue to block on. Runs of several chunks queue many
	// operations without waiting and keep the safe path, as do all waits.
	// It needs a build with the overlap_directcalls tag on linux/amd64
	// ([driver.DirectCallsAvailable]); elsewhere it changes nothing.
	// overlap bench --small-jobs --direct-calls measures it.
	DirectCalls bool
}

// GPU returns the backend for a driver context. The context stays owned by
// the caller. On Linux the goroutine that issues a run's work is pinned,
// for the run, to the CPUs local to the GPU, as sysfs names them for the
// GPU's PCI bus id; elsewhere, or where sysfs does not say, no thread is
// pinned.
func GPU(ctx *driver.Context) Backend { return GPUWith(ctx, GPUOptions{}) }

// GPUWith is [GPU] with options.
//
// A nil ctx gives a backend whose every call fails.
func GPUWith(ctx *driver.Context, opts GPUOptions) Backend {
	if ctx == nil {
		return &gpuBackend{name: "no GPU (nil *driver.Context)"}
	}
	name, err := ctx.Device().Name()
	if err != nil {
		name = ctx.Device().String()
	}
	g := &gpuBackend{ctx: ctx, name: name, bind: driver.BindOptions{DirectCalls: opts.DirectCalls}}
	if id, err := ctx.Device().PCIBusID(); err == nil {
		if loc, err := hostcpu.Of(id); err == nil {
			if allowed, err := hostcpu.ThreadCPUs(); err == nil {
				g.pin = localSubset(loc.CPUs, allowed)
			}
		}
	}
	return g
}

// localSubset returns the CPUs of allowed that are local, or nil when none
// is or all are: pinning to them would change nothing or starve the
// thread.
func localSubset(local, allowed []int) []int {
	isLocal := map[int]bool{}
	for _, c := range local {
		isLocal[c] = true
	}
	var target []int
	for _, c := range allowed {
		if isLocal[c] {
			target = append(target, c)
		}
	}
	if len(target) == 0 || len(target) == len(allowed) {
		return nil
	}
	return target
}

func (g *gpuBackend) Name() string { return g.name }

type gpuStream struct{ *driver.Stream }
type gpuEvent struct{ *driver.Event }
type gpuDevice struct{ *driver.DeviceBuffer }

// gpuStreamOf, gpuEventOf and gpuDeviceOf refuse objects that are not the
// GPU backend's (nil ones included) with an error, not a panic.
func gpuStreamOf(s Stream) (*driver.Stream, error) {
	if gs, ok := s.(gpuStream); ok {
		return gs.Stream, nil
	}
	return nil, fmt.Errorf("pipeline: stream %T is not a GPU stream", s)
}

func gpuEventOf(e Event) (*driver.Event, error) {
	if ge, ok := e.(gpuEvent); ok {
		return ge.Event, nil
	}
	return nil, fmt.Errorf("pipeline: event %T is not a GPU event", e)
}

func gpuDeviceOf(d DeviceMem) (gpuDevice, error) {
	if gd, ok := d.(gpuDevice); ok {
		return gd, nil
	}
	return gpuDevice{}, fmt.Errorf("pipeline: device memory %T is not GPU memory", d)
}

func (g *gpuBackend) NewStream() (Stream, error) {
	s, err := g.ctx.NewStream(driver.StreamOptions{})
	if err != nil {
		return nil, err
	}
	return gpuStream{s}, nil
}

func (g *gpuBackend) NewEvent(timing bool) (Event, error) {
	e, err := g.ctx.NewEvent(driver.EventOptions{Timing: timing})
	if err != nil {
		return nil, err
	}
	return gpuEvent{e}, nil
}

func (e gpuEvent) Elapsed(end Event) (time.Duration, error) {
	ge, ok := end.(gpuEvent)
	if !ok {
		return 0, fmt.Errorf("pipeline: event from another backend")
	}
	return e.Event.Elapsed(ge.Event)
}

func (g *gpuBackend) AllocDevice(n int) (DeviceMem, error) {
	b, err := g.ctx.Alloc(n)
	if err != nil {
		return nil, err
	}
	return gpuDevice{b}, nil
}

// AllocPinned and Register make portable memory, usable by every
// context, so that one registration serves every device of a Group; it
// costs nothing more than memory pinned for one context.
func (g *gpuBackend) AllocPinned(n int) (PinnedMem, error) {
	return g.ctx.AllocHost(n, driver.HostAllocOptions{Portable: true})
}

func (g *gpuBackend) Register(mem []byte) (PinnedMem, error) {
	r, err := g.ctx.RegisterHost(mem, driver.RegisterOptions{Portable: true})
	if errors.Is(err, driver.ErrHostMemoryRegistered) {
		return nil, fmt.Errorf("%w: %w", ErrRegistered, err)
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (g *gpuBackend) Prepare(k *Kernel) error {
	if k == nil {
		return errors.New("pipeline: nil *Kernel")
	}
	for i, st := range k.Steps {
		if st.Function == nil || st.Args == nil {
			return fmt.Errorf("pipeline: %s has no GPU function or argument builder", stepLabel(k, i))
		}
		if _, err := st.Function(g.ctx); err != nil {
			return fmt.Errorf("pipeline: %s: %w", stepLabel(k, i), err)
		}
	}
	if len(k.Steps) > 0 {
		return nil
	}
	if k.Function == nil || k.Args == nil {
		return fmt.Errorf("pipeline: kernel %q has no GPU function or argument builder", k.Name)
	}
	if _, err := k.Function(g.ctx); err != nil {
		return fmt.Errorf("pipeline: kernel %q: %w", k.Name, err)
	}
	return nil
}

// FreeMemory is the context's free and total device memory (cuMemGetInfo).
func (g *gpuBackend) FreeMemory() (free, total int64, err error) {
	f, t, err := g.ctx.MemoryInfo()
	return int64(f), int64(t), err
}

func (g *gpuBackend) StageIn(dst HostMemory, dstOff int, src []byte) error {
	if dst == nil {
		return errors.New("pipeline: staging into nil HostMemory")
	}
	d := dst.Bytes()
	if dstOff < 0 || len(src) > len(d)-dstOff {
		return fmt.Errorf("pipeline: staging %d bytes at %d into %d", len(src), dstOff, len(d))
	}
	parallelCopy(d[dstOff:dstOff+len(src)], src)
	return nil
}

func (g *gpuBackend) StageOut(dst []byte, src HostMemory, srcOff int) error {
	if src == nil {
		return errors.New("pipeline: unstaging from nil HostMemory")
	}
	s := src.Bytes()
	if srcOff < 0 || len(dst) > len(s)-srcOff {
		return fmt.Errorf("pipeline: unstaging %d bytes at %d from %d", len(dst), srcOff, len(s))
	}
	parallelCopy(dst, s[srcOff:srcOff+len(dst)])
	return nil
}

func (g *gpuBackend) CopyToDeviceSync(dst DeviceMem, off int, src []byte) error {
	d, err := gpuDeviceOf(dst)
	if err != nil {
		return err
	}
	return d.CopyFromHost(off, src)
}

func (g *gpuBackend) CopyToHostSync(dst []byte, src DeviceMem, off int) error {
	d, err := gpuDeviceOf(src)
	if err != nil {
		return err
	}
	return d.CopyToHost(dst, off)
}

// gpuIssuer issues on a goroutine bound to the context's OS thread.
type gpuIssuer struct {
	g    *gpuBackend
	ctx  *driver.Context
	b    driver.Bound
	args *driver.Args
	// k and fn remember the last kernel's function on ctx; fns, for a
	// kernel with Steps, each step's.
	k   *Kernel
	fn  *driver.Function
	fns []*driver.Function
	// restore is the thread's CPUs before the issuer pinned it.
	restore []int
	// held is set from Issuer to Release: a second Release must not put
	// the issuer back in the pool twice.
	held bool
}

func (g *gpuBackend) Issuer() (Issuer, error) { return g.issuer(driver.BindOptions{}) }

// singleIssuer is the issuer of a run of one chunk (executeSingle), bound
// with the backend's direct calls if it has them (GPUOptions).
func (g *gpuBackend) singleIssuer() (Issuer, error) { return g.issuer(g.bind) }

func (g *gpuBackend) issuer(opts driver.BindOptions) (Issuer, error) {
	i, _ := g.issuers.Get().(*gpuIssuer)
	if i == nil {
		i = &gpuIssuer{g: g, ctx: g.ctx, args: driver.NewArgs()}
	}
	if err := g.ctx.BindWith(&i.b, opts); err != nil {
		g.issuers.Put(i)
		return nil, err
	}
	i.held = true
	i.restore = pinToLocal(g.pin)
	return i, nil
}

// pinToLocal pins the calling thread, which Bind has locked, to pin, and
// returns the CPUs to restore; nil when nothing was pinned. Pinning is an
// optimisation: a failure leaves the thread as it was.
func pinToLocal(pin []int) []int {
	if len(pin) == 0 {
		return nil
	}
	allowed, err := hostcpu.ThreadCPUs()
	if err != nil || hostcpu.PinThread(pin) != nil {
		return nil
	}
	return allowed
}

func hostOf(h HostMemory) (driver.HostMemory, error) {
	if d, ok := h.(driver.HostMemory); ok {
		return d, nil
	}
	return nil, fmt.Errorf("pipeline: host memory %T is not pinned driver memory", h)
}

func (i *gpuIssuer) CopyToDevice(s Stream, dst DeviceMem, dstOff int, src HostMemory, srcOff, n int) error {
	h, err := hostOf(src)
	if err != nil {
		return err
	}
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	d, err := gpuDeviceOf(dst)
	if err != nil {
		return err
	}
	return i.b.CopyToDevice(st, d.DeviceBuffer, dstOff, h, srcOff, n)
}

func (i *gpuIssuer) CopyToHost(s Stream, dst HostMemory, dstOff int, src DeviceMem, srcOff, n int) error {
	h, err := hostOf(dst)
	if err != nil {
		return err
	}
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	d, err := gpuDeviceOf(src)
	if err != nil {
		return err
	}
	return i.b.CopyToHost(st, h, dstOff, d.DeviceBuffer, srcOff, n)
}

func (i *gpuIssuer) Launch(s Stream, k *Kernel, c Chunk) error {
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	if k == nil {
		return errors.New("pipeline: launch of a nil *Kernel")
	}
	if len(k.Steps) > 0 {
		return i.launchSteps(s, k, c)
	}
	if k != i.k {
		if k.Function == nil || k.Args == nil {
			return fmt.Errorf("kernel %q has no GPU function or argument builder", k.Name)
		}
		fn, err := k.Function(i.ctx)
		if err != nil {
			return fmt.Errorf("kernel %q: %w", k.Name, err)
		}
		i.k, i.fn = k, fn
	}
	i.args.Reset()
	k.Args(i.args, c)
	block := k.BlockSize
	if block <= 0 {
		block = 256
	}
	return i.b.Launch(i.fn, st, driver.GridFor(c.N, block), i.args)
}

// launchSteps launches each of k's steps on s, in order.
func (i *gpuIssuer) launchSteps(s Stream, k *Kernel, c Chunk) error {
	if k != i.k {
		i.k, i.fn, i.fns = nil, nil, i.fns[:0]
		for j := range k.Steps {
			st := &k.Steps[j]
			if st.Function == nil || st.Args == nil {
				return fmt.Errorf("%s has no GPU function or argument builder", stepLabel(k, j))
			}
			fn, err := st.Function(i.ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", stepLabel(k, j), err)
			}
			i.fns = append(i.fns, fn)
		}
		i.k = k
	}
	stream := s.(gpuStream).Stream
	for j := range k.Steps {
		st := &k.Steps[j]
		i.args.Reset()
		st.Args(i.args, c)
		var cfg driver.LaunchConfig
		if st.Launch != nil {
			cfg = st.Launch(c)
		} else {
			cfg = driver.GridFor(c.N, st.BlockSize)
		}
		if err := i.b.Launch(i.fns[j], stream, cfg, i.args); err != nil {
			return fmt.Errorf("%s: %w", stepLabel(k, j), err)
		}
	}
	return nil
}

// Fill32 queues the fill on s (cuMemsetD32Async), for PoisonSlots.
func (i *gpuIssuer) Fill32(s Stream, dst DeviceMem, off, n int, word uint32) error {
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	d, err := gpuDeviceOf(dst)
	if err != nil {
		return err
	}
	return st.Memset32(d.DeviceBuffer, off, n, word)
}

func (i *gpuIssuer) Record(e Event, s Stream) error {
	ev, err := gpuEventOf(e)
	if err != nil {
		return err
	}
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	return i.b.Record(ev, st)
}

func (i *gpuIssuer) Wait(s Stream, e Event) error {
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	ev, err := gpuEventOf(e)
	if err != nil {
		return err
	}
	return i.b.WaitEvent(st, ev)
}

// Synchronize waits for s on the issuer's bound thread.
func (i *gpuIssuer) Synchronize(s Stream) error {
	st, err := gpuStreamOf(s)
	if err != nil {
		return err
	}
	return i.b.Synchronize(st)
}

func (i *gpuIssuer) Release() {
	if !i.held {
		return
	}
	i.held = false
	if i.restore != nil {
		// The thread goes back to the runtime as it came.
		hostcpu.PinThread(i.restore)
		i.restore = nil
	}
	i.b.Release()
	// Every launch has copied its arguments (cuLaunchKernel does). The
	// next run looks its kernel's function up again: a module may have
	// been closed and loaded anew in between.
	i.args.Reset()
	clear(i.fns)
	i.k, i.fn, i.fns = nil, nil, i.fns[:0]
	i.g.issuers.Put(i)
}

// parallelCopy copies src into dst with up to GOMAXPROCS goroutines, each
// taking at least 256 KiB: one core copies into pinned memory at about
// 9 GB/s, far below PCIe's 55 GB/s, while 16 reach about 37 GB/s (both
// measured on an H200 host). Each goroutine copies its share in blocks of
// copyYieldBytes and yields between them.
func parallelCopy(dst, src []byte) {
	parallel.For(len(src), 256<<10, func(lo, hi int) {
		for lo+copyYieldBytes < hi {
			copy(dst[lo:lo+copyYieldBytes], src[lo:lo+copyYieldBytes])
			lo += copyYieldBytes
			runtime.Gosched()
		}
		copy(dst[lo:hi], src[lo:hi])
	})
}

// copyYieldBytes is how much a goroutine of parallelCopy copies before it
// yields its P. In a staged run the stage-in and stage-out goroutines
// each copy with up to GOMAXPROCS goroutines, so every P can be busy, and
// Go preempts a running goroutine only after 10 ms: the issuer, woken
// when a chunk is staged, waits for a P. On the H200 a staged chunk's H2D
// began a mean 165-247 µs after the last thing it waited for (2 µs on
// the simulator); with these yields, 133 µs against 170 in a traced pair,
// and the default staged shape ran faster in 8 of 11 pairs of processes,
// by a median 1.09x, evidence that is weak (bench/RESULTS.md, "Staging
// copies that yield every 128 KiB, beside the tree"). 128 KiB takes about
// 15 µs at the 9 GB/s of one goroutine alone and 90 µs at the 1.5 GB/s
// each of 16 reaches in a staged run.
const copyYieldBytes = 128 << 10
