// Package driver is a typed, checked Go binding to the CUDA driver API,
// with no cgo: it calls libcuda through purego.
//
// It has three layers, as cudarc does:
//
//   - raw: one table of driver symbols (symbols.go) is the source of truth
//     for every entry point's name, ABI version and export name; each is
//     resolved lazily through package loader and cached, and called with
//     purego.SyscallN, with no reflection and no allocation on hot paths;
//   - checked: every CUresult becomes a *Error naming the entry point, the
//     code and the driver's text, such as
//     "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory",
//     and errors.Is matches it against sentinels like ErrOutOfMemory;
//   - owning: Context, DeviceBuffer, HostBuffer, HostRegistration, Stream,
//     Event, Module and Function are what the rest of overlap uses. No other
//     package touches a raw handle.
//
// Arguments are checked before they reach the driver: sizes must be
// positive, copy spans must fit both sides (ErrLength), nil and closed
// objects are errors (ErrInvalidArgument, ErrClosed), and kernel arguments
// are checked against the kernel's parameter layout (ErrArguments).
//
// # Concurrency
//
// Every method may be called from any goroutine. A CUDA context is current
// per OS thread, and goroutines move between threads, so each method locks
// its goroutine to its thread, makes the object's context current there
// (skipping that when it already is), calls the driver and unlocks. The only
// global state is the loaded library and its symbol table.
//
// An [Args] is the exception: it is a reusable buffer and must not be used by
// two goroutines at once.
//
// # Memory
//
// Asynchronous copies take [HostMemory]: pinned memory ([HostBuffer]) or Go
// memory page-locked in place ([HostRegistration], kept alive and pinned
// with runtime.Pinner while registered). Plain Go slices are accepted only
// by the synchronous copies, which finish before they return.
//
// # Lifetimes
//
// What New..., Alloc... and Load... return, the caller owns and must Close.
// Close is idempotent; use after Close returns ErrClosed. Closing a Context
// closes every object still open on it first. A runtime cleanup releases
// objects that are dropped without Close, but that is a safety net, not the
// contract. Handles borrowed through Handle methods are never destroyed by
// their borrowers.
package driver
