package procfs

import (
	"os"
	"syscall"
)

// FreeSpace is how many bytes this process may still write to the file
// system that holds path (statfs follows a symbolic link), where known:
// the blocks available to an unprivileged writer, or every free block
// for root, which may use the reserved ones, in statfs's fragment size.
func FreeSpace(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	blocks := uint64(st.Bavail)
	if os.Geteuid() == 0 {
		blocks = uint64(st.Bfree)
	}
	size := int64(st.Frsize) // the unit of the block counts
	if size <= 0 {
		size = int64(st.Bsize)
	}
	return int64(blocks) * size, true
}
