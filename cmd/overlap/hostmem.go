package main

import (
	"fmt"

	"github.com/purecuda/overlap/internal/procfs"
)

// checkHostMemory refuses, as a usage error, to allocate bytes of host
// memory for what when the host has less available (Linux's
// MemAvailable): Go would otherwise die of it with a fatal error and a
// stack trace, or push the machine into swap first. Where the available
// memory is unknown it lets the allocation go ahead.
func checkHostMemory(bytes int64, what string) error {
	avail, ok := availableMemory()
	if !ok || bytes <= avail {
		return nil
	}
	return usageError{fmt.Errorf("%s need %s of host memory, more than the %s available; use a smaller --elems", what, humanBytes(bytes), humanBytes(avail))}
}

// procField reads a "Name:   123 kB" line of a /proc file (meminfo,
// status), in bytes; false off Linux or when the line is missing.
func procField(file, name string) (int64, bool) { return procfs.Field(file, name) }
