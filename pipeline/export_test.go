package pipeline

// SetSkipWAR lets the external tests drop the write-after-read waits, to
// show that the hazard detector sees what they prevent.
func SetSkipWAR(p *Pipeline, skip bool) { p.skipWAR = skip }

// SetSkipStaging makes the issuer stop waiting for the stage-in (in) or
// stage-out (out) goroutine: host-side races the detector must name.
func SetSkipStaging(p *Pipeline, in, out bool) { p.skipStaged, p.skipUnstaged = in, out }

// LocalSubset exposes localSubset to the tests.
var LocalSubset = localSubset

// SetShareScratch makes every slot of p use slot 0's scratch buffers, a
// hazard the detector must name.
func SetShareScratch(p *Pipeline, share bool) { p.shareScratch = share }

// GroupPipeline is device d's pipeline in g.
func GroupPipeline(g *Group, d int) *Pipeline { return g.pipes[d] }

// TimeRun exposes timeRun, the tuner's timing of a candidate, to the tests.
var TimeRun = timeRun

// SlotBuffers is every device buffer of p's slots: the inputs', the
// outputs' and the scratch buffers, as PoisonSlots fills them.
func SlotBuffers(p *Pipeline) []DeviceMem {
	bufs := append(append([]DeviceMem(nil), p.dinAll...), p.doutAll...)
	for _, slot := range p.scratch {
		bufs = append(bufs, slot...)
	}
	return bufs
}

// StagingSlots is every pinned staging slot of p, inputs' and outputs'.
func StagingSlots(p *Pipeline) []PinnedMem {
	var out []PinnedMem
	for _, slots := range [2][][]PinnedMem{p.sin, p.sout} {
		for _, slot := range slots {
			out = append(out, slot...)
		}
	}
	return out
}
