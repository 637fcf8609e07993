//go:build !linux

package procfs

// AvailableMemory is unknown off Linux: it reports false.
func AvailableMemory() (int64, bool) { return 0, false }
