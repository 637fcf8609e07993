package procfs

import "syscall"

// FreeSpace is how many bytes an unprivileged writer may still write to
// the file system that holds path (statfs's available blocks), where
// known.
func FreeSpace(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
