//go:build !linux

package hostcpu

func of(root, busID string) (Locality, error) { return Locality{NUMANode: -1}, ErrUnsupported }

// PinThread does nothing on this system and returns ErrUnsupported.
func PinThread(cpus []int) error { return ErrUnsupported }

// ThreadCPUs returns ErrUnsupported on this system.
func ThreadCPUs() ([]int, error) { return nil, ErrUnsupported }
