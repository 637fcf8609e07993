// Package bench holds overlap's benchmarks and its CUDA C++ reference
// programs, and runs those programs for side-by-side comparisons.
//
// The Go benchmarks (go test -bench) cover the pipeline on the lecture's
// workload in every host mode; package driver's own benchmarks cover call
// cost, launch cost and bandwidth. The reference programs in reference/
// are hand-written, hazard-correct CUDA C++: pipeline.cu (pinned memory,
// three streams, events), launch.cu (launch cost and bandwidth), multi.cu
// and smalljobs.cu; dlopen.c measures launch and copies, and dljobs.c a
// small job, in plain C with the driver loaded by dlopen, as purego loads
// it (both built by hand with cc; dlload.h is what they share), and
// cloops.c holds their loops for a Go process to call too.
// [BuildReference] compiles them with nvcc where it exists; `overlap bench
// --reference` runs them on the same configurations as the Go pipeline and
// reports the ratio. bench/RESULTS.md records the figures.
//
// # Concurrency
//
// The functions here run external programs and are safe to call from any
// goroutine.
//
// # Memory
//
// Nothing here holds GPU memory between calls.
package bench
