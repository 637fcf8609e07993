// Package procfs reads figures from Linux's /proc files, and the cgroup
// files under /sys/fs/cgroup, for overlap's commands and benchmarks: a
// process's peak memory, and how much more it can allocate. Off Linux the
// files are missing, and every function reports that it found nothing.
package procfs

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// Field reads a "Name:   123 kB" line of a /proc file (meminfo,
// status), in bytes; false off Linux or when the line is missing.
func Field(file, name string) (int64, bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil || kb < 0 {
			return 0, false
		}
		return kb << 10, true
	}
	return 0, false
}

// PeakRSS reads the process's peak resident memory (VmHWM) on Linux.
func PeakRSS() (int64, bool) { return Field("/proc/self/status", "VmHWM:") }
