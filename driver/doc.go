// Package driver is a typed, checked Go binding to the CUDA driver API,
// with no cgo: it calls libcuda through purego.
//
// It has three layers, as cudarc does:
//
//   - raw: one prototype line per driver entry point (prototypes.go) is
//     the source of truth for its name, parameters, ABI version, export
//     name and call path; go generate turns the list into the symbol
//     table (zsymbols.go) and one typed wrapper per entry point
//     (zcalls.go), the only code that packs a call's arguments, as
//     golang.org/x/sys/unix does with its //sys lines (README.md says how
//     to add a call). Each entry point is resolved lazily through package
//     loader and cached, and called with purego.SyscallN, with no
//     reflection and no allocation on hot paths.
//     On linux/amd64 the hot calls (launches, asynchronous copies, events,
//     stream waits and synchronisations, the context check) skip
//     purego.SyscallN's wrapper and call runtime.cgocall, as it does, on a
//     small trampoline of the package's own (ccall_linux_amd64.s): the
//     same system-call semantics without purego's argument copying and
//     pooled block, because many small jobs pay the binding's own cost on
//     every call (bench/RESULTS.md, "Notes moved from the package docs
//     (2026-12-01)", has the figures).
//     A [Bound] bound with [BindOptions].DirectCalls makes its calls that
//     do not wait (launches, asynchronous copies, event records, stream
//     waits, graph launches) through the same trampoline without
//     runtime.cgocall, which saves the scheduler's system-call transition,
//     at the price that such a call that blocks in the driver holds up
//     every stop-the-world of the garbage collector until it returns. It
//     is off unless asked for, and built only with the overlap_directcalls
//     tag;
//   - checked: every CUresult becomes a *Error naming the entry point, the
//     code and the driver's text (see Errors below), and errors.Is matches
//     it against sentinels like ErrOutOfMemory;
//   - owning: Context, DeviceBuffer, HostBuffer, HostRegistration,
//     ManagedBuffer, Stream, Event, Module, Function, Linker, Library,
//     Kernel, MemPool, Graph and GraphExec are what the rest of overlap
//     uses. No other package touches a raw handle.
//
// Arguments are checked before they reach the driver: sizes must be
// positive, copy spans must fit both sides (ErrLength), nil and closed
// objects are errors (ErrInvalidArgument, ErrClosed), and kernel arguments
// are checked against the kernel's parameter layout (ErrArguments).
//
// # Errors
//
// Every error says "cuda: " once, then the operation, as package os's
// *PathError does. A failed driver call is an [*Error] named after the
// driver function, its export name: "cuda: cuMemAlloc_v2:
// CUDA_ERROR_OUT_OF_MEMORY (2): out of memory". An error of the binding's
// own, raised before any driver call, names what the caller called, as
// Type.Method for a method or the function's name, then the sentinel and
// the detail: "cuda: Stream.Synchronize: invalid argument: nil *Stream",
// "cuda: Context.Alloc: invalid argument: size 0: must be positive",
// "cuda: NewContextWith: invalid argument: zero Device; use DeviceAt". The
// sentinels (ErrInvalidArgument, ErrClosed, ErrLength, ErrArguments,
// ErrWrongContext, ErrWaitMode, and the Results such as ErrOutOfMemory)
// carry no package word: errors.Is finds them through every wrapper, and
// the wrapper says "cuda: " for them. A Close that fails names the type's
// Close ("cuda: Stream.Close: cuStreamDestroy_v2: ...").
//
// One rule for nil: a method called on a nil or zero object (a nil *Stream,
// a zero Context or Device), or given one as an argument, returns an error
// naming the method (ErrInvalidArgument) and never panics; accessors such
// as Len, Ptr or Handle return zero; Close on nil or on a closed object is
// a no-op that returns nil. TestNilAndZeroReceivers and the fake driver's
// NilAndZeroArguments test hold every exported method to it.
//
// # Concurrency
//
// Every method may be called from any goroutine. A CUDA context is current
// per OS thread, and goroutines move between threads, so each method locks
// its goroutine to its thread, makes the object's context current there
// (skipping that when it already is), calls the driver and unlocks. The only
// global state is the loaded library and its symbol table.
//
// Close may race any other method of the same object, and Context.Close may
// race everything made from the context: a call that is using a handle holds
// the object (a read lock) for the length of the driver call, and Close waits
// for it, so no handle is ever destroyed under a call. Calls that start after
// Close return ErrClosed. Objects made while their Context closes are closed
// at once and their maker gets ErrClosed. A [Stream.Capture] holds its
// stream for the whole capture: the stream's Close waits for the capture
// to end, and so does the Close of every Context of the device, since the
// driver refuses to wait for a context (all of a device's Contexts share
// its primary context) while a stream of it is capturing.
//
// Objects of two contexts never mix: a stream of one GPU with a buffer of
// another is ErrWrongContext, never undefined behaviour. Pinned memory
// allocated or registered with Portable set is usable with every context's
// streams. A [Bound] refuses another context's objects and keeps its own
// context current.
//
// An [Args] must not be changed while another goroutine uses it; launching
// one Args from several goroutines at once is safe.
//
// How a thread waits in Synchronize is the primary context's choice, set
// when the context is created: [NewContextWith] with [ContextOptions].Wait
// spins (lowest latency, a core busy for the whole wait), yields, or blocks
// on the driver (no CPU time, a wake-up's latency). The zero value keeps
// the driver's default, which spins while the process has fewer active
// contexts than CPUs. The mode is per device and process: a second Context
// asking for another mode while the first is open gets ErrWaitMode.
// overlap bench --small-jobs --wait all measures the trade-off. For many
// goroutines that each wait for small jobs, ask for WaitYield: when as
// many threads spin as there are CPUs, they starve the Go runtime's own
// threads and the latency's tail grows, while yielding keeps it at the
// same throughput (bench/RESULTS.md, "Small jobs without allocations"). The zero value stays the driver's choice, since the mode
// is the whole process's.
//
// # Code and launches
//
// [Context.LoadModule] JIT-compiles PTX; [Context.LoadImage] also loads a
// cubin or a fatbin, whose kind [CheckImage] tells by its magic, refusing
// anything else. A [Linker] links PTX, cubins and fatbins into a cubin with
// the driver's own JIT, no nvcc needed. A [Library] is loaded once for every
// context ([LoadLibrary]): its [Kernel] gives a Function on each Context.
// [Function.LaunchEx] launches with attributes (thread block clusters, a
// cooperative grid, a priority), [Function.LaunchCooperative] launches a
// cooperative grid, and the occupancy calculations
// ([Function.MaxActiveBlocksPerSM] and others) size grids.
// [Stream.LaunchHostFunc] queues a Go function in a stream's order; every
// host function shares one C callback, whatever their number.
//
// # Memory
//
// Asynchronous copies take [HostMemory]: pinned memory ([HostBuffer]) or Go
// memory page-locked in place ([HostRegistration], kept alive and pinned
// with runtime.Pinner while registered). Plain Go slices are accepted only
// by the synchronous copies, which finish before they return.
//
// A queued copy keeps its host memory alive, open and registered until the
// host has seen the copy complete: Stream.Synchronize or Stream.Done on its
// stream, Event.Synchronize or Event.Done on an event recorded on that
// stream after it, or Context.Synchronize. Dropping the memory meanwhile is
// safe, and its Close waits for the streams that still use it. Stream.Close
// and the stream's cleanup wait for such copies too. The device still owns
// the bytes until the copy completes: writing a source or reading a
// destination before then is a data race with the device.
//
// Kernel arguments are copied, at each launch, into slabs pinned for the
// life of the process; an Args itself is plain Go memory.
//
// Beyond plain buffers: pitched 2D and 3D copies ([Copy2D], [Copy3D]),
// copies between devices' contexts and peer access
// ([Context.EnablePeerAccess], [Stream.CopyPeer]), managed memory
// ([Context.AllocManaged], only when asked, never past the device's free
// memory), memory and events shared with other processes
// ([DeviceBuffer.IPCHandle], [Context.OpenIPCMem]), memory mapped through
// the virtual memory calls ([Context.AllocVirtual]) and batched copies
// ([Stream.CopyBatch]). Each is a DeviceBuffer, or takes DeviceBuffers and
// HostMemory, under the rules above.
//
// Stream-ordered buffers ([Stream.AllocAsync], [Stream.AllocFromPool]) are
// DeviceBuffers that a stream allocates and [Stream.FreeAsync] frees in
// its order, without the device-wide wait of cuMemFree; FreeAsync closes
// the Go object at once. Closing such a buffer instead (or its Context)
// first waits for the whole context, since cuMemFree does not order itself
// after stream work on pool memory.
//
// # Graphs
//
// [Stream.Capture] records what a function queues on a stream into a
// [Graph], on a thread locked for the capture, in thread-local mode; a
// [GraphExec] replays it with one call per launch, and
// [GraphExec.Update] swaps in a new capture of the same shape (other
// buffers, other kernel arguments) without instantiating again.
// [Context.NewGraph] builds a graph node by node instead
// ([Graph.AddKernel], [Graph.AddCopyToDevice], [Graph.AddCopyToHost]), and
// the GraphExec Set methods change one node's kernel arguments or copy
// buffers in place. The host memory and device buffers that a graph's
// copies use are kept reachable by the graph and its executables, checked
// open at each launch (ErrClosed otherwise), and kept alive after a launch
// like a queued copy's. Buffers passed to kernels as raw addresses are not
// tracked: keep them open while a GraphExec that uses them may run.
//
// # Lifetimes
//
// What New..., Alloc..., Register... and Load... return, the caller owns
// and must Close. Close is idempotent; use after Close returns ErrClosed.
// Closing a Context waits for its queued work, then closes every object
// still open on it. Every object keeps its Context reachable.
//
// A runtime cleanup releases an object dropped without Close (a safety net,
// not the contract), with one exception: a [HostBuffer], whose views
// (Bytes, Float32s) point into memory the collector cannot see, is freed
// only by Close, of the buffer or of its Context. A view must not be used
// after that. A HostBuffer dropped without Close stays allocated until its
// Context is closed, and a Context dropped while such buffers remain stays
// retained until the process ends: a leak, never a dangling view. A
// [HostRegistration]'s memory is Go's own, so its views stay valid after
// it is unregistered.
//
// When the driver refuses to unregister memory, the memory stays pinned for
// the life of the process rather than be reused while the device may still
// write it. Handles borrowed through Handle methods are never destroyed by
// their borrowers.
package driver
