// Package overlap is the root of a pure-Go (no cgo) binding to the NVIDIA
// CUDA driver API and of an engine that overlaps host-to-device copies,
// kernels and device-to-host copies on several CUDA streams. This package
// holds no code; it maps the packages, each of which imports only those
// listed before it:
//
//   - [github.com/purecuda/overlap/loader] finds and opens the driver
//     library (libcuda.so.1, nvcuda.dll) through purego and resolves entry
//     points; it knows nothing of CUDA objects.
//   - [github.com/purecuda/overlap/driver] is the typed, checked driver API:
//     contexts, memory, streams, events, modules and launches, each an
//     owning type with Close.
//   - [github.com/purecuda/overlap/ptx] reads PTX text without a GPU and
//     loads it onto a context with errors a user can act on.
//   - [github.com/purecuda/overlap/pipeline] is the engine: a job split
//     into chunks, each copied in, computed and copied out on its own
//     streams, on a GPU or on a CPU simulator with a hazard detector.
//   - [github.com/purecuda/overlap/ptx/kernels] is the kernel table: each
//     embedded kernel's PTX, arguments, CPU stand-in, reference and
//     verifier, as the engine runs it, and the GEMM module.
//   - [github.com/purecuda/overlap/model] runs a PyTorch-trained MLP from
//     a safetensors file as one pipeline kernel of a GEMM step per layer,
//     and checks it against a float64 reference.
//   - [github.com/purecuda/overlap/bench] holds the benchmarks and the CUDA
//     C++ reference programs.
//   - [github.com/purecuda/overlap/cmd/overlap] is the command-line tool.
//
// The directory beam/ is a module of its own, github.com/purecuda/overlap/beam,
// which runs the engine as a step of an Apache Beam pipeline; internal/ holds
// the fake driver and helpers that the tests share.
//
// Start with the pipeline package's examples, which run on the simulator
// without a GPU, and with README.md.
package overlap
