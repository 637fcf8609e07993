// Package loader finds and opens the NVIDIA driver library (libcuda.so.1 on
// Linux, nvcuda.dll on Windows) without cgo, and resolves driver entry points
// by name.
//
// It is the lowest layer of overlap. It knows how to search for the library,
// how to ask the driver for an entry point through cuGetProcAddress_v2 with an
// explicit CUDA version, and how to read the driver's version. It knows
// nothing about CUDA objects: contexts, streams and memory live in package
// driver.
//
// # Search order
//
// [Open] tries, in order: the path in the OVERLAP_CUDA_LIBRARY environment
// variable (when set, it is the only candidate), then the platform's defaults
// listed by [Candidates]. If nothing opens, the error lists every path tried
// and why each failed, and errors.Is(err, [ErrNoDriver]) holds.
//
// # Optional libraries
//
// [OpenOptional] opens a library that the core never needs, for packages
// nvrtc and cublas: [NVRTC], [CUBLAS] or [CUBLASLt]. Each has an override
// (OVERLAP_NVRTC_LIBRARY, OVERLAP_CUBLAS_LIBRARY, OVERLAP_CUBLASLT_LIBRARY)
// that is then the only path tried, and otherwise the places that
// [Optional.Candidates] lists: the dynamic loader's own search, the CUDA
// toolkits ($CUDA_PATH, $CUDA_HOME, /usr/local/cuda, /usr/local/cuda-*,
// the newest first) and the pip wheels' folders. A library that is not
// found is an *OptionalError naming the library, the file names looked
// for and every path tried, and errors.Is(err, [ErrNoLibrary]) holds.
//
// # Concurrency
//
// A *Library is safe for use by many goroutines. Symbols are resolved lazily,
// on first use, and cached by the caller (package driver keeps one cached
// entry point per symbol).
//
// # Memory
//
// The library stays loaded for the life of the process: the driver cannot be
// unloaded safely while any CUDA object may still exist.
package loader
