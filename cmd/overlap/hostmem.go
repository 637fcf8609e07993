package main

import (
	"errors"
	"fmt"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/internal/procfs"
)

// checkHostMemory refuses, as a usage error, bytes of host memory for what
// that the host does not have available (bench.CheckHostMemory).
func checkHostMemory(bytes int64, what string) error {
	return memoryError(bench.CheckHostMemory(bytes, what))
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

// availableMemory is how much more this process can allocate, where known.
func availableMemory() (int64, bool) { return procfs.AvailableMemory() }
