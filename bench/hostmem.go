package bench

import (
	"fmt"

	"github.com/purecuda/overlap/internal/procfs"
	"github.com/purecuda/overlap/internal/units"
)

// MemoryError is host memory that a job would need and the host does not
// have available: the check that [CheckHostMemory] makes, so that an
// allocation Go cannot satisfy is refused with an error rather than a
// fatal error and a stack trace, or swap.
type MemoryError struct {
	// What is what needs the memory: "the job's 2 input and output arrays".
	What string
	// Need and Available are in bytes; Available is Linux's MemAvailable,
	// bounded by the process's cgroup and address-space limits.
	Need, Available int64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("%s need %s of host memory, more than the %s available", e.What, Bytes(e.Need), Bytes(e.Available))
}

// CheckHostMemory returns a *[MemoryError] in a *[Error] when bytes of
// host memory for what are more than the host has available, and nil when
// they fit or where the available memory is unknown (off Linux).
func CheckHostMemory(bytes int64, what string) error {
	if err := checkHostMemory(bytes, what); err != nil {
		return &Error{Op: "CheckHostMemory", Err: err}
	}
	return nil
}

func checkHostMemory(bytes int64, what string) error {
	avail, ok := procfs.AvailableMemory()
	if !ok || bytes <= avail {
		return nil
	}
	return &MemoryError{What: what, Need: bytes, Available: avail}
}

// Bytes writes a byte count as overlap's tables do: 1.5 GiB, 12.0 MiB,
// 3.0 KiB or 12 B.
func Bytes(b int64) string { return units.Bytes(b) }
