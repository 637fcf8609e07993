package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTouchCostsWhatOverlaps: a simulated run of 16K one-element chunks
// took 19 s (64K, minutes), because every access scanned all the accesses
// its memory had recorded, and nothing could be pruned while the
// goroutine that called Run waited, ordered after none of them. A touch
// now looks only at the accesses that can overlap it, and an access of the
// same actor, bytes and kind supersedes the earlier one, so that neither
// the scan nor the list grows with the chunks; the hazards are found as
// before.
func TestTouchCostsWhatOverlaps(t *testing.T) {
	h := NewHost(HostOptions{})
	const writer, reader, chunks = 0, 1, 16 << 10
	h.mu.Lock()
	defer h.mu.Unlock()
	var clock uint64
	write := func(mem, lo, hi int) {
		clock++
		h.touch(writer, vclock{clock}, "write", []memSpan{{mem: mem, name: "m", lo: lo, hi: hi, write: true}})
	}
	// One memory written chunk by chunk, another (a slot) rewritten over
	// the same bytes: nothing is pruned, as the reader never syncs.
	h.all = append(h.all, &actor{idx: reader, name: "reader", vc: vclock{0, 1}})
	for c := range chunks {
		write(1, 4*c, 4*c+4)
		write(2, 0, 4)
	}
	assert.Len(t, h.accesses[1].items, chunks, "distinct bytes: each access kept")
	assert.Len(t, h.accesses[2].items, 1, "the same bytes by the same actor: superseded")
	assert.Len(t, h.accesses[1].window(400, 404), 1, "one access can overlap 4 bytes")
	assert.Empty(t, h.hazards)

	read := func(mem, lo, hi int, seen uint64) []Hazard {
		h.hazards = nil
		h.touch(reader, vclock{seen, 2}, "read", []memSpan{{mem: mem, name: "m", lo: lo, hi: hi}})
		return h.hazards
	}
	// The reader saw the writer up to clock 2c+1 (chunk c's write of
	// memory 1 and everything before).
	c := 100
	assert.Empty(t, read(1, 4*c, 4*c+4, uint64(2*c+1)), "ordered after chunk c's write")
	require.Len(t, read(1, 4*c, 4*c+4, uint64(2*c)), 1, "not ordered after it")
	assert.Len(t, read(1, 4*c+1, 4*c+3, uint64(2*c)), 1, "inside chunk c's bytes, which start before the read's")
	assert.Len(t, read(1, 4*c-2, 4*c+6, uint64(2*c)), 2, "across chunks c-1, c and c+1: ordered after c-1's write only")
	// The slot's superseded writes: a read ordered after an early one but
	// not after the last is still a hazard, named by the last.
	hz := read(2, 0, 4, uint64(2*c+1))
	require.Len(t, hz, 1, "unordered with the slot's last write")
	assert.Equal(t, Hazard{Memory: "m", First: "write", Later: "read"}, hz[0])
	assert.Empty(t, read(2, 0, 4, clock), "ordered after every write")
}
