// Package ptx holds overlap's kernels as embedded PTX, reads PTX text
// without a GPU, and loads PTX onto a context with errors a user can act on.
//
// It sits above package driver and below package pipeline. The kernels'
// CUDA C sources live in kernels/ beside the PTX that nvcc generated from
// them (make ptx, on a machine with nvcc); each PTX file records the
// SHA-256 of its source, and a test fails when the two drift apart. The PTX
// headers are lowered to ISA 7.0 and target sm_75, so any driver of CUDA
// 11.0 or newer can JIT them (overlap itself needs CUDA 12.0).
//
// [Parse] reads PTX text: its version, target, address size and entries
// with their parameters. It never panics, on any input.
//
// Each kernel has a CPU reference in float64 and a documented tolerance;
// the Verify functions check every element, in parallel.
//
// # Concurrency
//
// Everything here is safe for concurrent use. A [Program] is as safe as the
// driver objects it holds.
//
// # Memory
//
// Embedded PTX is read-only and shared; Load copies what it hands to the
// driver. A Program owns its driver.Module and must be closed.
package ptx
