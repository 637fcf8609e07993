// Package ntstore fills host memory with non-temporal stores, which leave
// the lines they write out of the CPU's caches.
//
// Why: a device's copy into host memory whose lines a CPU holds modified
// in its caches waits for those lines to be written back. On an H200
// host, 1M elements in 128K chunks ran in 235–264 µs when the host had
// just filled the output with plain stores, 188–199 µs when it had
// filled it with Fill, and 164–167 µs back to back, where the device
// wrote the output last (bench/RESULTS.md, "Small whole jobs: what the
// first run after a warm-up waits on"). A benchmark that fills an
// output with a value no reference matches, to see that the timed run
// writes every element, uses Fill to do it without putting those lines
// in the caches.
//
// # Concurrency
//
// Fill writes dst and nothing else; callers keep others off dst while it
// runs, as for any write.
//
// # Memory
//
// Fill allocates nothing. On amd64 it uses MOVNTI and ends with SFENCE,
// so that its stores are visible to the device and to other CPUs before
// it returns; elsewhere (NonTemporal false) it makes plain stores.
package ntstore

import "math"

// Fill sets every element of dst to v.
func Fill(dst []float32, v float32) {
	if len(dst) == 0 {
		return
	}
	fill(dst, math.Float32bits(v))
}
