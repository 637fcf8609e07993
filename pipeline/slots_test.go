package pipeline

import "testing"

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
