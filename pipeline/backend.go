package pipeline

import (
	"errors"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
)

// Backend is the narrow interface through which the pipeline drives a GPU:
// streams, events, memory, copies and launches. [GPU] implements it with
// package driver; package pipeline/sim implements it on the CPU, with a hazard
// detector, for tests and for machines without a GPU.
type Backend interface {
	// Name says what runs the work, such as "NVIDIA H200" or "simulator".
	Name() string
	NewStream() (Stream, error)
	NewEvent(timing bool) (Event, error)
	AllocDevice(bytes int) (DeviceMem, error)
	// AllocPinned allocates page-locked host memory.
	AllocPinned(bytes int) (PinnedMem, error)
	// Register page-locks Go memory in place. When mem is already
	// page-locked by someone else, the error wraps [ErrRegistered].
	Register(mem []byte) (PinnedMem, error)
	// Prepare checks, before any work is issued, that this backend can run
	// k, and readies what it needs: the GPU backend resolves k's function
	// on its context (loading it there on first use), the simulator needs
	// k's CPU stand-in.
	Prepare(k *Kernel) error
	// Issuer returns the hot-path issuer for the calling goroutine, which
	// must use it alone and Release it.
	Issuer() (Issuer, error)
	// StageIn copies src into dst at dstOff on the host, in parallel.
	StageIn(dst HostMemory, dstOff int, src []byte) error
	// StageOut fills dst from src at srcOff on the host, in parallel.
	StageOut(dst []byte, src HostMemory, srcOff int) error
	// CopyToDeviceSync and CopyToHostSync are blocking copies from and to
	// pageable memory, for the synchronous baseline.
	CopyToDeviceSync(dst DeviceMem, dstOff int, src []byte) error
	CopyToHostSync(dst []byte, src DeviceMem, srcOff int) error
}

// The optional interfaces below are how a backend says more than Backend
// does, the way an http.ResponseWriter may be an http.Flusher: the engine
// asks for each with a type assertion and does without it when the
// backend is not one. [HostTracker] (handoff.go) is another.

// MemoryReporter is a backend that says how much of its device's memory
// is free: the GPU (cuMemGetInfo) and the simulator. Before it uploads a
// kernel's parameters, the pipeline checks that they fit.
type MemoryReporter interface {
	FreeMemory() (free, total int64, err error)
}

// KernelNoter is a backend with something to say about how it runs a
// kernel, for Report.Notes: the simulator, about the kernels and steps
// that its profile has no cost for.
type KernelNoter interface {
	KernelNotes(k *Kernel) []string
}

// HostAccessor is a backend that checks the host's own accesses to its
// pinned memory for hazards (the simulator). A streaming run reads into
// pinned slots and writes out of them itself, so on such a backend it
// does so through HostAccess: do gets a buffer standing for n bytes of
// mem at off (the host writes them when write), returns how many it
// filled or used, and what names the access in a hazard.
type HostAccessor interface {
	HostAccess(mem HostMemory, off, n int, write bool, what string, do func(b []byte) (int, error)) (int, error)
}

// HostSharer is a backend whose device belongs to a host of the backend's
// own making, such as a simulated host with several simulated devices.
// SharedHost identifies that host (comparable with ==), or is nil when the
// backend is unusable (a nil simulator). A [Group]'s devices are all
// HostSharers of one host, or all devices of the real host (none is a
// HostSharer).
type HostSharer interface {
	SharedHost() any
}

// TogetherStarter is a backend whose host goroutines must be started
// through it to run side by side in its time, such as the simulator's,
// whose goroutines are actors on a virtual clock. [GoTogether] uses it.
type TogetherStarter interface {
	GoTogether(name string, n int, fn func(i int))
}

// GoTogether runs fn(0) … fn(n-1) on n goroutines of their own, started
// together, and returns once every one has returned. On a
// [TogetherStarter] backend it starts them through the backend, so that
// they run side by side in its time; on a GPU, plainly. Benchmarks and
// calibration start their workers through it instead of testing for the
// simulator. name labels the goroutines where the backend keeps names.
// With n <= 0 or a nil fn it runs nothing.
func GoTogether(b Backend, name string, n int, fn func(i int)) {
	if n <= 0 || fn == nil {
		return // nothing to run: a nil fn is no work, not a crash in n goroutines
	}
	if ts, ok := b.(TogetherStarter); ok {
		ts.GoTogether(name, n, fn)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}

// ErrRegistered reports Go memory that is already page-locked by someone
// else (another pipeline, say), so that it cannot be registered again.
var ErrRegistered = errors.New("pipeline: memory is already registered")

// HostMemory is host memory that asynchronous copies may use: a pinned
// buffer or a registration from the same backend. *driver.HostBuffer and
// *driver.HostRegistration are HostMemory for the GPU backend.
type HostMemory interface {
	Bytes() []byte
}

// PinnedMem is HostMemory the pipeline owns and closes.
type PinnedMem interface {
	HostMemory
	Close() error
}

// DeviceMem is device memory.
type DeviceMem interface {
	Len() int
	// Ptr is the device address handed to kernels.
	Ptr() driver.DevicePtr
	Close() error
}

// Stream is an ordered queue of device work.
type Stream interface {
	Synchronize() error
	Close() error
}

// Event marks a point in a stream.
type Event interface {
	// Synchronize blocks the host until the recorded work is done.
	Synchronize() error
	// Elapsed is the device time from this event to end; both need timing.
	Elapsed(end Event) (time.Duration, error)
	Close() error
}

// Issuer queues work without blocking the host, but for Synchronize. It
// belongs to one goroutine (the GPU backend locks it to its OS thread),
// which calls Release once when done and does not use it after: the GPU
// backend hands the same issuer to its next caller.
type Issuer interface {
	CopyToDevice(s Stream, dst DeviceMem, dstOff int, src HostMemory, srcOff, n int) error
	CopyToHost(s Stream, dst HostMemory, dstOff int, src DeviceMem, srcOff, n int) error
	// Launch queues k's work on chunk c on s: its kernel, or for a
	// kernel with Steps each step's launch, in order.
	Launch(s Stream, k *Kernel, c Chunk) error
	Record(e Event, s Stream) error
	Wait(s Stream, e Event) error
	// Synchronize blocks until the work queued on s is done, as
	// s.Synchronize does; the GPU issuer waits on its bound thread
	// without making the context current again, so that a job of one
	// chunk checks the context once.
	Synchronize(s Stream) error
	Release()
}

// Chunk is one kernel launch's view of the job: which chunk, where it
// starts, how many elements, and the device addresses of its inputs and
// outputs, in the job's order.
type Chunk struct {
	Index, Offset, N int
	Inputs, Outputs  []driver.DevicePtr
	// InBytes and OutBytes are each input's and output's bytes in this chunk.
	InBytes, OutBytes []int
	// Params are the device addresses of the kernel's resident
	// parameters (Kernel.Params) on the chunk's device, in order.
	Params []driver.DevicePtr
	// Scratch are the device addresses of the slot's scratch buffers
	// (Kernel.Scratch), and ScratchBytes each one's bytes for this chunk
	// (Kernel.Scratch[j]·N).
	Scratch      []driver.DevicePtr
	ScratchBytes []int
}

// HostChunk is a chunk as the simulator hands it to Kernel.CPU: the chunk's
// input and output bytes.
type HostChunk struct {
	Index, Offset, N int
	Inputs, Outputs  [][]byte
	// Params and Scratch are the kernel's resident parameters and the
	// slot's scratch buffers, for a Kernel with Params or Scratch.
	Params, Scratch [][]byte
	// A step's CPU (Step.CPU) sees only the buffers that its Reads and
	// Writes name; the others are nil, so that a stand-in cannot touch
	// memory that the hazard detector does not know it touches.
}

// Kernel is the computation applied to each chunk. Package ptx/kernels
// builds one for each embedded kernel.
type Kernel struct {
	// Name labels the kernel in reports.
	Name string
	// Function resolves the GPU kernel on a context; the GPU backend needs
	// it. A function belongs to the context that loaded it, so a kernel
	// that may run on several GPUs loads itself on each (as
	// kernels.Modules does). The backend calls it before a run and once
	// per run while it issues; it must be safe for concurrent use. For a
	// function loaded on one context, use [FunctionOn].
	Function func(ctx *driver.Context) (*driver.Function, error)
	// Args appends the kernel's arguments for chunk c to a. It is called
	// once per chunk from the issuing goroutine.
	Args func(a *driver.Args, c Chunk)
	// BlockSize is the threads per block; 0 means 256. The grid covers
	// c.N threads.
	BlockSize int
	// CPU computes one chunk on the host; the simulator needs it.
	CPU func(c HostChunk)
	// Iters is the kernel's intensity where it has one (the seed kernel's
	// loop count). Only the simulator reads it: a device profile's cost
	// for the kernel named Name scales with it (KernelCost).
	Iters int

	// Steps, when set, makes each chunk's work a sequence of launches,
	// one per step, in order on the chunk's compute stream (a model's
	// layers). Function, Args, BlockSize and CPU are then unused: each
	// step has its own.
	Steps []Step
	// Params are the resident parameters (a model's weights), uploaded
	// once per device and shared by every chunk; see [Param]. Before the
	// upload the pipeline checks that they fit in the device's free memory
	// and refuses them with an error that names the kernel and the sizes.
	// A pipeline keeps the parameters of the last 4 kernels it ran with
	// Params; running a fifth frees those of the one used least recently
	// (and the others' too when the fifth's would not fit beside them).
	Params []Param
	// Scratch gives the per-slot device buffers for intermediate
	// results, each in bytes per element (row) of the chunk: each slot
	// holds Scratch[j]·ChunkElems bytes for buffer j, allocated on the
	// first run that needs it, kept for later kernels (grown when one
	// needs more) and freed with the pipeline.
	Scratch []int
}

// FunctionOn returns a Kernel.Function for fn, loaded on ctx: it hands fn
// to ctx and refuses every other context with an error, since a function
// cannot run on a context that did not load it. With a nil ctx or fn it
// refuses every context.
func FunctionOn(ctx *driver.Context, fn *driver.Function) func(*driver.Context) (*driver.Function, error) {
	return func(c *driver.Context) (*driver.Function, error) {
		if ctx == nil || fn == nil {
			return nil, errors.New("pipeline: FunctionOn: nil *driver.Context or *driver.Function")
		}
		if c != ctx {
			return nil, errors.New("pipeline: kernel function was loaded on another context")
		}
		return fn, nil
	}
}
