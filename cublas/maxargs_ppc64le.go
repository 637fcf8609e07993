package cublas

// maxCallArgs is the most arguments purego.SyscallN passes on ppc64le:
// cublasGemmEx's 19 are too many there, and it says so.
const maxCallArgs = 15
