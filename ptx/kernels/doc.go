// Package kernels is overlap's kernel table: one row per embedded kernel,
// holding everything known about it in one place. A row ([Kernel]) has
// the kernel's PTX and CUDA C source (embedded from this directory), its
// inputs, outputs and scalar parameters, the argument builder and CPU
// stand-in that make it a [pipeline.Kernel], its float64 reference and
// verifier, and the tolerance text for reports. The CLI, the benchmarks
// and the tests read the table.
//
// Adding a kernel is one .cu file here, its PTX (make ptx, on a machine
// with nvcc: each PTX file records the SHA-256 of its source, and a test
// fails when they drift apart), and one row in table.go. The tests check
// the row's arguments against the PTX's parameter layout and its CPU
// stand-in against its float64 reference. The PTX headers are lowered to
// ISA 7.0 and target sm_75, so any driver of CUDA 11.0 or newer can JIT
// them (overlap itself needs CUDA 12.0).
//
// It sits above packages ptx (which loads the PTX) and pipeline (which
// runs the kernels); nothing below imports it.
//
// A function belongs to the context that loaded it. [Modules] loads each
// kernel on each context as it is first needed, so that one job can run
// on several GPUs.
//
// # Concurrency
//
// The table is read-only; [Modules] and everything else here are safe for
// concurrent use. Verify and the CPU stand-ins use every CPU.
//
// # Memory
//
// Embedded PTX is read-only and shared. [Modules] owns the modules it
// loads and unloads them on Close; a Program from [Kernel.Load] is the
// caller's to close.
package kernels
