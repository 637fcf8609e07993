package main

import (
	"errors"
	"fmt"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/internal/procfs"
)

// checkHostMemory refuses, as a usage error, bytes of host memory for what
// that the host does not have available (as bench.CheckHostMemory does,
// but through availableMemory).
func checkHostMemory(bytes int64, what string) error {
	if avail, ok := availableMemory(); ok && bytes > avail {
		return memoryError(&bench.MemoryError{What: what, Need: bytes, Available: avail})
	}
	return nil
}

// memoryError makes a *bench.MemoryError in err a usage error that names
// the flag to change; other errors are returned as they are.
func memoryError(err error) error {
	var me *bench.MemoryError
	if !errors.As(err, &me) {
		return err
	}
	return usageError{fmt.Errorf("%s need %s of host memory, more than the %s available; use a smaller --elems", me.What, humanBytes(me.Need), humanBytes(me.Available))}
}

// availableMemory is how much more this process can allocate, where known
// (procfs.AvailableMemory). It is a variable so that a test can hold it
// still (holdAvailableMemory): the host's figure moves from one read to
// the next while other processes allocate and free, and a test that reads
// it once and then expects the check's own read to agree fails whenever
// memory was freed between the two.
var availableMemory = procfs.AvailableMemory
