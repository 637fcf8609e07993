//go:build !linux

package bench

import "time"

// processCPU reports the process's CPU time only on Linux.
func processCPU() (time.Duration, bool) { return 0, false }
