package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
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

// returnMemory gives the heap of a closed workload back to the system
// before a sweep builds its next one, so that the next one's
// checkHostMemory does not count the last one's arrays as in use.
func returnMemory() { debug.FreeOSMemory() }

// procField reads a "Name:   123 kB" line of a /proc file (meminfo,
// status), in bytes; false off Linux or when the line is missing.
func procField(file, name string) (int64, bool) {
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
