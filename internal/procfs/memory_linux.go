package procfs

import (
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
)

// AvailableMemory estimates how much more memory this process can
// allocate: the least of the host's MemAvailable (/proc/meminfo), the
// room under the memory limits of its cgroup and the cgroup's ancestors
// (v2 memory.max, v1 memory.limit_in_bytes), and the room under its
// address-space limit (ulimit -v) above its present size. False where
// MemAvailable is unknown. It is an estimate: a job that fits it may
// still need more than its arrays.
func AvailableMemory() (int64, bool) {
	avail, ok := Field("/proc/meminfo", "MemAvailable:")
	if !ok {
		return 0, false
	}
	if room, ok := cgroupRoom(); ok {
		avail = min(avail, room)
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil && lim.Cur != ^uint64(0) && lim.Cur < 1<<62 {
		if size, ok := Field("/proc/self/status", "VmSize:"); ok {
			avail = min(avail, max(0, int64(lim.Cur)-size))
		}
	}
	return avail, true
}

// cgroupRoom is the least room under a memory limit of this process's
// cgroup or any of its ancestors; false when none is limited or the
// files cannot be read.
func cgroupRoom() (int64, bool) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	best, found := int64(0), false
	consider := func(limit, usage string, inactiveFile int64) {
		if room, ok := roomUnder(limit, usage, inactiveFile); ok && (!found || room < best) {
			best, found = room, true
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "": // cgroup v2
			for dir := parts[2]; ; dir = path.Dir(dir) {
				base := path.Join("/sys/fs/cgroup", dir)
				consider(readTrim(path.Join(base, "memory.max")), readTrim(path.Join(base, "memory.current")), statValue(readTrim(path.Join(base, "memory.stat")), "inactive_file"))
				if dir == "/" || dir == "." {
					break
				}
			}
		case strings.Contains(","+parts[1]+",", ",memory,"): // cgroup v1
			for _, base := range []string{path.Join("/sys/fs/cgroup/memory", parts[2]), "/sys/fs/cgroup/memory"} {
				consider(readTrim(path.Join(base, "memory.limit_in_bytes")), readTrim(path.Join(base, "memory.usage_in_bytes")), statValue(readTrim(path.Join(base, "memory.stat")), "total_inactive_file"))
			}
		}
	}
	return best, found
}

// roomUnder is limit − (usage − inactiveFile), limit and usage in bytes
// as a cgroup file writes them; false for "max", no limit, or anything
// unreadable. cgroup v1 writes a page-rounded maximum int64 for no limit.
// A cgroup's usage counts its page cache, so that after a large write it
// reads as nearly full; the inactive part of that cache (memory.stat's
// inactive_file) is what the kernel reclaims first, and counts as room,
// as MemAvailable counts it for the whole machine.
func roomUnder(limit, usage string, inactiveFile int64) (int64, bool) {
	l, err := strconv.ParseInt(limit, 10, 64)
	if err != nil || l <= 0 || l >= 1<<62 {
		return 0, false
	}
	u, err := strconv.ParseInt(usage, 10, 64)
	if err != nil || u < 0 {
		return 0, false
	}
	return max(0, l-(u-min(u, max(0, inactiveFile)))), true
}

// statValue is the value of key in a cgroup's memory.stat (lines of a
// key and a number of bytes); 0 where it is absent or unreadable.
func statValue(stat, key string) int64 {
	for _, line := range strings.Split(stat, "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return 0
}

func readTrim(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
