//go:build !linux

package procfs

// FreeSpace is unknown off Linux: it reports false.
func FreeSpace(path string) (int64, bool) { return 0, false }
