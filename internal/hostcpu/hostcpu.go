// Package hostcpu tells where a PCI device, such as a GPU, sits in the host
// (its NUMA node and the CPUs local to it) and pins the calling OS thread
// to a set of CPUs. On Linux it reads sysfs and calls sched_setaffinity; on
// other systems Of and PinThread return ErrUnsupported and nothing is
// pinned.
//
// # Concurrency
//
// Of may be called from any goroutine. PinThread affects the calling OS
// thread only: lock the goroutine to its thread (runtime.LockOSThread)
// before calling it, and keep it locked while the pinning matters.
//
// # Memory
//
// Nothing is retained between calls.
package hostcpu

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrUnsupported reports a system where locality is not read or threads
// are not pinned.
var ErrUnsupported = errors.New("hostcpu: not supported on this system")

// Locality is where a PCI device sits in the host.
type Locality struct {
	// NUMANode is the device's NUMA node, or -1 when the system does not
	// say (a single-node host often reports -1).
	NUMANode int
	// CPUs are the CPUs local to the device, in increasing order.
	CPUs []int
}

// SysfsRoot is where Of reads PCI devices on Linux.
const SysfsRoot = "/sys/bus/pci/devices"

// Of returns the locality of the PCI device with the given bus id, as the
// CUDA driver writes it ("0000:19:00.0").
func Of(busID string) (Locality, error) { return of(SysfsRoot, busID) }

// ofRoot reads the locality under root, a directory laid out as sysfs's
// /sys/bus/pci/devices.
func ofRoot(root, busID string) (Locality, error) {
	id, err := normalizeBusID(busID)
	if err != nil {
		return Locality{}, err
	}
	dir := filepath.Join(root, id)
	node := -1
	if b, err := os.ReadFile(filepath.Join(dir, "numa_node")); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			node = v
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Locality{}, fmt.Errorf("hostcpu: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "local_cpulist"))
	if err != nil {
		return Locality{}, fmt.Errorf("hostcpu: PCI device %s: %w", id, err)
	}
	cpus, err := ParseCPUList(string(b))
	if err != nil {
		return Locality{}, fmt.Errorf("hostcpu: PCI device %s: local_cpulist: %w", id, err)
	}
	return Locality{NUMANode: node, CPUs: cpus}, nil
}

// normalizeBusID lower-cases a bus id and trims an 8-digit domain to sysfs's
// 4 digits.
func normalizeBusID(id string) (string, error) {
	id = strings.ToLower(strings.TrimSpace(id))
	parts := strings.Split(id, ":")
	if len(parts) != 3 || !strings.Contains(parts[2], ".") {
		return "", fmt.Errorf("hostcpu: %q is not a PCI bus id (want domain:bus:device.function)", id)
	}
	if d := parts[0]; len(d) > 4 {
		if strings.TrimLeft(d[:len(d)-4], "0") != "" {
			return "", fmt.Errorf("hostcpu: PCI domain %q does not fit sysfs's 4 digits", d)
		}
		parts[0] = d[len(d)-4:]
	}
	for _, p := range parts {
		if strings.ContainsAny(p, "/\\") {
			return "", fmt.Errorf("hostcpu: %q is not a PCI bus id", id)
		}
	}
	return strings.Join(parts, ":"), nil
}

// ParseCPUList reads a Linux CPU list such as "0-7,16-23".
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty CPU list")
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU range %q", part)
			}
		}
		if b >= 1<<16 {
			return nil, fmt.Errorf("CPU %d out of range", b)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nil
}

// FormatCPUList writes cpus (sorted, without duplicates) as a Linux CPU
// list such as "0-7,16-23".
func FormatCPUList(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", cpus[i], cpus[j])
		} else {
			fmt.Fprintf(&b, "%d", cpus[i])
		}
		i = j + 1
	}
	return b.String()
}
