package pipeline

// Coalesced copies. A copy engine spends about 2 µs between copies
// whatever their size (bench/RESULTS.md, "64K-element chunks: what the copy
// engines wait on"): a 256 KiB copy moves at two thirds of the rate of a
// large one. The slots of each buffer are one allocation, back to back
// (Pipeline.din), and neighbouring chunks are neighbours in the job's host
// memory too, so on ScheduleEvents the H2D copies of several chunks in
// neighbouring slots are one copy, and so are their D2H copies: the
// kernels still run one a chunk.

// coalesceBytes is the size from which a chunk's copies move on their
// own: a 1 MiB copy takes about 19 µs at 55 GB/s, and the gap between
// copies costs little beside it.
const coalesceBytes = 1 << 20

// coalesceTarget is what a coalesced copy of smaller chunks moves at
// least. 1 MiB was the first target; on the H200, 128M elements in
// 64K-element chunks (pinned, 4 compute streams) took 18.0–21.8 ms in
// groups of four chunks on 24 slots, 16.2–23.7 ms in groups of eight on
// 48 slots, and 14.3–18.5 ms in groups of sixteen, 4 MiB, on 48 slots
// (every run of three pipelines of each in turn, two processes), against
// a 13.6 ms bound (bench/RESULTS.md, "64K-element chunks: one process,
// nine pipelines"): copies in both directions at once, at 64K chunks,
// took about what the kernels take, and larger ones leave a margin.
const coalesceTarget = 4 << 20

// copyGroup is how many chunks one copy of a run on ScheduleEvents moves:
// 1 when a chunk's copies are coalesceBytes already, else the fewest that
// make a copy of coalesceTarget, at most a third of the slots and a
// divisor of them, so that the ring holds at least three groups, one
// copied in while one computes and one is copied out (with two, each
// group's copy in waits for the other's kernels, and 64K-element chunks
// in groups of four reached 74% of the bound on 8 slots against 93% on
// 12: bench/RESULTS.md, "Coalesced copies"), and a group's slots never
// wrap around the ring. The default slots give small chunks room for
// that (defaultSlots): 48 slots and three groups of sixteen for 64K
// float32 elements.
func (p *Pipeline) copyGroup() int { return copyGroupOf(p.cfg) }

func copyGroupOf(cfg Config) int {
	if cfg.CopyChunks > 0 {
		return cfg.CopyChunks
	}
	if !slotsBackToBack(cfg) {
		return 1
	}
	per := smallestCopy(cfg)
	if per >= coalesceBytes {
		return 1
	}
	g := 1
	for c := 2; c <= cfg.Slots/3 && per*g < coalesceTarget; c++ {
		if cfg.Slots%c == 0 {
			g = c
		}
	}
	return g
}

// slotsBackToBack says that every buffer's slots follow one another with
// no padding (slotStride), so that one copy can fill several.
func slotsBackToBack(cfg Config) bool {
	for _, sizes := range [2][]int{cfg.Inputs, cfg.Outputs} {
		for _, s := range sizes {
			if b := s * cfg.ChunkElems; slotStride(b) != b {
				return false
			}
		}
	}
	return true
}

// largestCopy is the bytes of the largest of a chunk's copies.
func largestCopy(cfg Config) int {
	per := 0
	for _, sizes := range [2][]int{cfg.Inputs, cfg.Outputs} {
		for _, s := range sizes {
			per = max(per, s*cfg.ChunkElems)
		}
	}
	return per
}

// smallestCopy is the bytes of the smallest of a chunk's copies.
func smallestCopy(cfg Config) int {
	per := 0
	for _, sizes := range [2][]int{cfg.Inputs, cfg.Outputs} {
		for _, s := range sizes {
			if b := s * cfg.ChunkElems; per == 0 || b < per {
				per = b
			}
		}
	}
	return per
}

// copiesFor is plan pl's chunks per copy when it runs on schedule sched:
// copyGroup for a run on ScheduleEvents that stages nothing and takes no
// chunks from a group's queue, else 1. p.mu held.
func (p *Pipeline) copiesFor(pl *plan, sched Schedule) int {
	if sched != ScheduleEvents || pl.staging || pl.queue != nil || p.skipWAR {
		return 1
	}
	return p.copyGroup()
}

// issueGrouped is issue for a run whose copies are coalesced (pl.copies >
// 1), a group of G = pl.copies chunks at a time, chunk i in slot i mod
// Slots as in issue; the group starting at chunk g0 fills slots s0 = g0
// mod Slots to s0+G-1:
//
//	H2D:     wait d2hDone[s0] (g0 ≥ Slots: the D2H of the group that last
//	         used the slots, which waited for its kernels, the last
//	         readers of the input slots), one copy per input of the
//	         group's elements, record h2dDone[s0]
//	compute: for each chunk: wait h2dDone[s0], which follows that D2H,
//	         the last reader of the output slots; launch; record
//	         compDone[s]
//	D2H:     wait compDone[s0+k] for each k, one copy per output, record
//	         d2hDone[s0]
//
// Waiting for the D2H of the group a ring back (Slots/G groups, at least
// three: copyGroup) rather than for each kernel costs no overlap, and a
// small chunk's run is bound by its calls: a group makes 4G+5 of them
// (4.3 a chunk in groups of sixteen, 5.25 in groups of four), where
// issue makes 10 a chunk. It returns how many chunks it issued.
func (p *Pipeline) issueGrouped(pl *plan, rs *runState, iss Issuer, tm *timing) (int, error) {
	S, G := p.cfg.Slots, pl.copies
	for g0 := 0; g0 < pl.chunks; g0 += G {
		if rs.ended() {
			return g0, nil
		}
		gn := min(G, pl.chunks-g0)
		s0 := g0 % S
		off0, _ := p.chunkBounds(pl, g0)
		offL, nL := p.chunkBounds(pl, g0+gn-1)
		total := offL + nL - off0
		if err := p.issueGroupH2D(pl, iss, tm, g0, gn, s0, off0, total); err != nil {
			return g0, &StageError{Chunk: g0, Stage: StageH2D, Err: err}
		}
		for k := range gn {
			i, s := g0+k, s0+k
			off, n := p.chunkBounds(pl, i)
			at := issueAt{i: i, c: i, s: s, k: i % len(p.comp), off: off, n: n}
			if err := p.issueGroupCompute(pl, iss, tm, at, s0); err != nil {
				return g0, &StageError{Chunk: i, Stage: StageCompute, Err: err}
			}
		}
		if err := p.issueGroupD2H(pl, iss, tm, g0, gn, s0, off0, total); err != nil {
			return g0, &StageError{Chunk: g0, Stage: StageD2H, Err: err}
		}
	}
	return pl.chunks, nil
}

// issueGroupH2D issues the H2D phase of the gn chunks from g0, in slots
// from s0, elements [off0, off0+total) of the job.
func (p *Pipeline) issueGroupH2D(pl *plan, iss Issuer, tm *timing, g0, gn, s0, off0, total int) error {
	if g0 >= p.cfg.Slots {
		if err := iss.Wait(p.h2d, p.d2hDone[s0]); err != nil {
			return err
		}
	}
	if err := tm.markGroup(iss, p.h2d, g0, gn, StageH2D, 0); err != nil {
		return err
	}
	for j, src := range pl.ins {
		if err := iss.CopyToDevice(p.h2d, p.din[s0][j].all, p.din[s0][j].off, src.mem, off0*src.elem, total*src.elem); err != nil {
			return err
		}
	}
	if err := tm.markGroup(iss, p.h2d, g0, gn, StageH2D, 1); err != nil {
		return err
	}
	return iss.Record(p.h2dDone[s0], p.h2d)
}

// issueGroupCompute issues one chunk's compute phase in a group whose
// slots start at s0.
func (p *Pipeline) issueGroupCompute(pl *plan, iss Issuer, tm *timing, at issueAt, s0 int) error {
	cs := p.comp[at.k]
	if err := iss.Wait(cs, p.h2dDone[s0]); err != nil {
		return err
	}
	if err := tm.mark(iss, cs, at.c, StageCompute, 0); err != nil {
		return err
	}
	chunk := &p.chunk
	p.fillChunk(chunk, at.c, at.s, at.off, at.n)
	if err := iss.Launch(cs, pl.job.Kernel, *chunk); err != nil {
		return err
	}
	if err := tm.mark(iss, cs, at.c, StageCompute, 1); err != nil {
		return err
	}
	return iss.Record(p.compDone[at.s], cs)
}

// issueGroupD2H issues the D2H phase of the gn chunks from g0.
func (p *Pipeline) issueGroupD2H(pl *plan, iss Issuer, tm *timing, g0, gn, s0, off0, total int) error {
	for k := range gn {
		if err := iss.Wait(p.d2h, p.compDone[s0+k]); err != nil {
			return err
		}
	}
	if err := tm.markGroup(iss, p.d2h, g0, gn, StageD2H, 0); err != nil {
		return err
	}
	for j, dst := range pl.outs {
		if err := iss.CopyToHost(p.d2h, dst.mem, off0*dst.elem, p.dout[s0][j].all, p.dout[s0][j].off, total*dst.elem); err != nil {
			return err
		}
	}
	if err := tm.markGroup(iss, p.d2h, g0, gn, StageD2H, 1); err != nil {
		return err
	}
	return iss.Record(p.d2hDone[s0], p.d2h)
}
