//go:build !ppc64le

package cublas

// maxCallArgs is the most arguments purego.SyscallN passes here.
const maxCallArgs = 32
