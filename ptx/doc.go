// Package ptx reads PTX text without a GPU and loads PTX onto a context
// with errors a user can act on. It knows nothing of particular kernels:
// overlap's own, with their CPU references, live in package
// [github.com/purecuda/overlap/ptx/kernels].
//
// It sits above package driver and beside package pipeline; neither
// imports the other.
//
// [Parse] reads PTX text: its version, target, address size and entries
// with their parameters, including PTX from nvcc -lineinfo and -G (.file,
// .loc and .section .debug_* directives). It never panics, on any input.
// [ReadFile], and so [LoadFile], reads at most [MaxFileSize] bytes of a
// file; [Describe] gives a parsed file's header, entries and parameter
// offsets ready to encode as JSON.
//
// # Concurrency
//
// Everything here is safe for concurrent use. A [Program] is as safe as the
// driver objects it holds.
//
// # Memory
//
// Load copies what it hands to the driver. A Program owns its
// driver.Module and must be closed.
package ptx
