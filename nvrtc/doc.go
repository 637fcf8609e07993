// Package nvrtc compiles CUDA C++ to PTX (and, for a real architecture,
// a CUBIN) at run time with NVIDIA's runtime compiler, NVRTC, opened
// through purego without cgo.
//
// NVRTC is optional: overlap's core never needs it, and nothing here is
// loaded until a function of this package is called. The library is
// found as package loader finds it ([loader.NVRTC]): the path in
// OVERLAP_NVRTC_LIBRARY when set, else libnvrtc.so.13, .12 or libnvrtc.so
// through the dynamic loader, $CUDA_PATH and $CUDA_HOME, /usr/local/cuda
// and /usr/local/cuda-* (the newest first) and the pip wheels
// (site-packages/nvidia/cuda_nvrtc/lib, as PyTorch installs them); on
// Windows nvrtc64_130_0.dll or nvrtc64_120_0.dll under %CUDA_PATH%. When
// none is found, every call returns the loader's error, which names the
// files looked for and every path tried (errors.Is(err,
// loader.ErrNoLibrary)).
//
// [Compile] turns source into a [Result]: PTX for driver.Context's
// LoadModule or package ptx's Load, and the compiler's log. The
// architecture is [Options].Arch, else the compute capability of
// [Options].Device, else compute_80. A compilation error is an *Error
// whose text ends with the compiler's log. [CompileKernelFile] is what
// overlap run's --cu FILE --entry NAME calls: a .cu file compiled for
// the GPU, checked to define the kernel.
//
// PTX from an NVRTC newer than the driver may use a PTX ISA that the
// driver cannot read: ptx.Load says so; use an NVRTC no newer than the
// driver (OVERLAP_NVRTC_LIBRARY), or compile for a real architecture
// (sm_XY), whose CUBIN the driver loads without its JIT.
//
// # Concurrency
//
// Every function may be called from any goroutine: each compilation has
// its own NVRTC program. The only global state is the opened library,
// set up once.
//
// # Memory
//
// Strings and arrays passed to NVRTC are copied into NUL-terminated Go
// memory pinned (runtime.Pinner) for the length of the call; NVRTC keeps
// no pointer to them. A program is destroyed (nvrtcDestroyProgram)
// before Compile returns, on every path, errors included. The library
// stays loaded for the life of the process.
package nvrtc
