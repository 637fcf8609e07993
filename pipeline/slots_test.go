package pipeline

import (
	"math"
	"testing"
)

// TestSlotsAligned: every slot of every buffer starts on a 256-byte
// boundary, as a buffer of its own from cuMemAlloc does (a kernel with
// vector loads relies on it), and slots are back to back, so coalescible,
// exactly when a chunk's bytes are a multiple of 256 for every buffer.
func TestSlotsAligned(t *testing.T) {
	for _, c := range []struct {
		chunk      int
		sizes      []int
		stride     []int
		backToBack bool
	}{
		{999, []int{4, 4}, []int{4096, 4096}, false},
		{1024, []int{4, 12}, []int{4096, 12288}, true},
		{64, []int{4}, []int{256}, true},
		{65, []int{4}, []int{512}, false},
		{1, []int{4, 4}, []int{256, 256}, false},
	} {
		cfg := Config{ChunkElems: c.chunk, Slots: 5, Inputs: c.sizes[:1], Outputs: c.sizes[1:]}
		if len(c.sizes) == 1 {
			cfg.Outputs = c.sizes
		}
		all := []DeviceMem{nil}
		for j, size := range c.sizes[:1] {
			slots := slotsOf(all, []int{size}, cfg)
			for s := range slots {
				if off := slots[s][0].off; off%slotAlign != 0 || off != s*c.stride[j] {
					t.Errorf("chunk %d of %d bytes: slot %d at %d, want %d", c.chunk, size, s, off, s*c.stride[j])
				}
			}
		}
		for j, size := range c.sizes {
			if got := slotStride(size * c.chunk); got != c.stride[j] {
				t.Errorf("slotStride(%d) = %d, want %d", size*c.chunk, got, c.stride[j])
			}
		}
		if got := slotsBackToBack(cfg); got != c.backToBack {
			t.Errorf("chunk %d, sizes %v: back to back %v, want %v", c.chunk, c.sizes, got, c.backToBack)
		}
	}
}

// TestDefaultSlots: Slots 0 is ComputeStreams+2, or for chunks whose
// smallest copy is under 1 MiB in back-to-back slots, room for six
// coalesced copies of 4 MiB, at most 48 and never fewer than
// ComputeStreams+2; a Slots given is kept.
func TestDefaultSlots(t *testing.T) {
	for _, c := range []struct {
		chunk, slots, streams int
		in, out               []int
		want                  int
	}{
		{1 << 20, 0, 0, []int{4}, []int{4}, 6},      // the default chunk
		{256 << 10, 0, 0, []int{4}, []int{4}, 6},    // copies of 1 MiB already
		{128 << 10, 0, 0, []int{4}, []int{4}, 48},   // groups of eight, 4 MiB
		{64 << 10, 0, 0, []int{4}, []int{4}, 48},    // groups of sixteen, at most 48 slots
		{64 << 10, 0, 1, []int{4}, []int{4}, 48},    // one stream
		{64 << 10, 0, 60, []int{4}, []int{4}, 62},   // streams+2 is more
		{64 << 10, 0, 0, []int{8, 4}, []int{2}, 48}, // the smallest copy, 128 KiB, sets it
		{4 << 10, 0, 0, []int{4}, []int{4}, 48},     // at most 48
		{1000, 0, 0, []int{4}, []int{4}, 6},         // slots not back to back: no groups
		{64 << 10, 6, 0, []int{4}, []int{4}, 6},     // given
		{96 << 10, 0, 0, []int{4}, []int{4}, 48},    // 384 KiB: groups of twelve, rounded up
		{64 << 10, 0, 0, []int{32}, []int{4}, 12},   // the 2 MiB input's slots within 24 MiB
		{64 << 10, 0, 0, []int{1024}, []int{4}, 6},  // a 64 MiB input: the byte bound
	} {
		cfg, err := Config{ChunkElems: c.chunk, Slots: c.slots, ComputeStreams: c.streams, Inputs: c.in, Outputs: c.out}.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Slots != c.want {
			t.Errorf("chunk %d, inputs %v, outputs %v, slots %d, streams %d: %d slots by default, want %d", c.chunk, c.in, c.out, c.slots, c.streams, cfg.Slots, c.want)
		}
		if g := copyGroupOf(cfg); c.slots == 0 && cfg.Slots > c.streams+2 && cfg.Slots/g < 3 {
			t.Errorf("chunk %d: groups of %d on %d slots: fewer than three groups", c.chunk, g, cfg.Slots)
		}
	}
}

// TestDefaultChunkFor: 1M elements a chunk, or a sixteenth of a job of
// under 16M (a multiple of 64 elements), at least 128K and at most the job.
func TestDefaultChunkFor(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{128 << 20, 1 << 20},
		{16 << 20, 1 << 20},
		{16<<20 - 1, 1 << 20},
		{8 << 20, 512 << 10},
		{4 << 20, 256 << 10},
		{3 << 20, 192 << 10},
		{1000003, 131072},
		{1 << 20, 128 << 10},
		{100000, 100000},
		{1, 1},
		{0, DefaultChunkElems},
		{-5, DefaultChunkElems},
		{2_500_000, 156288}, // 156250.0 rounded up to 64
		{4<<20 + 1, 262208}, // 262144.06 rounded up, then to 64
		{math.MaxInt, 1 << 20},
	} {
		if got := DefaultChunkFor(c.n); got != c.want {
			t.Errorf("DefaultChunkFor(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestDefaultSlotsWhereCopiesDoNotCoalesce: a Config whose copies never
// coalesce keeps ComputeStreams+2 slots, and one that names CopyChunks
// validates as it did with that default (13 streams and groups of 5 on 15
// slots; on the small-chunk default of 24, 5 does not divide them).
func TestDefaultSlotsWhereCopiesDoNotCoalesce(t *testing.T) {
	for name, c := range map[string]Config{
		"staged":         {Host: HostStaged},
		"in-stream":      {Schedule: ScheduleInStream},
		"copy each":      {CopyChunks: 1},
		"groups of five": {CopyChunks: 5, ComputeStreams: 13},
	} {
		c.ChunkElems, c.Inputs, c.Outputs = 64<<10, []int{4}, []int{4}
		cfg, err := c.withDefaults()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if want := cfg.ComputeStreams + 2; cfg.Slots != want {
			t.Errorf("%s: %d slots by default, want %d", name, cfg.Slots, want)
		}
	}
}
