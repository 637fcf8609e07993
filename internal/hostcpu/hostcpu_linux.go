//go:build linux

package hostcpu

import (
	"fmt"
	"syscall"
	"unsafe"
)

func of(root, busID string) (Locality, error) { return ofRoot(root, busID) }

// PinThread restricts the calling OS thread to cpus
// (sched_setaffinity). The caller must have locked its goroutine to the
// thread.
func PinThread(cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("hostcpu: PinThread: no CPUs")
	}
	max := 0
	for _, c := range cpus {
		if c < 0 || c >= 1<<16 {
			return fmt.Errorf("hostcpu: PinThread: CPU %d out of range", c)
		}
		max = maxInt(max, c)
	}
	mask := make([]uint64, maxInt(16, max/64+1))
	for _, c := range cpus {
		mask[c/64] |= 1 << (c % 64)
	}
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return fmt.Errorf("hostcpu: sched_setaffinity: %w", errno)
	}
	return nil
}

// ThreadCPUs returns the CPUs the calling OS thread may run on
// (sched_getaffinity).
func ThreadCPUs() ([]int, error) {
	mask := make([]uint64, 1024)
	n, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, uintptr(len(mask)*8), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return nil, fmt.Errorf("hostcpu: sched_getaffinity: %w", errno)
	}
	var out []int
	for i := 0; i < int(n)/8; i++ {
		for b := 0; b < 64; b++ {
			if mask[i]&(1<<b) != 0 {
				out = append(out, i*64+b)
			}
		}
	}
	return out, nil
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}
