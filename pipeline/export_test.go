package pipeline

import "time"

// SetSkipWAR lets the external tests drop the write-after-read waits, to
// show that the hazard detector sees what they prevent.
func SetSkipWAR(p *Pipeline, skip bool) { p.skipWAR = skip }

// SetSkipStaging makes the issuer stop waiting for the stage-in (in) or
// stage-out (out) goroutine: host-side races the detector must name.
func SetSkipStaging(p *Pipeline, in, out bool) { p.skipStaged, p.skipUnstaged = in, out }

// ProfileKernelCost is a profile's fixed and per-chunk cost of k over n
// elements.
func ProfileKernelCost(p *Profile, k *Kernel, n int) (fixed, work time.Duration, err error) {
	return p.kernel(k, n)
}

// ProfileStagingRate is a profile's host staging rate for copies of n
// bytes, alone and two at once, in bytes per nanosecond.
func ProfileStagingRate(p *Profile, n int) (alone, pair float64) { return p.stagingRate(n) }

// LocalSubset exposes localSubset to the tests.
var LocalSubset = localSubset

// ProfileStagingDMA is the share of their rate that staging copies of n
// bytes keep while DMA copies run in the directions given.
func ProfileStagingDMA(p *Profile, n int, h2d, d2h bool) float64 { return p.stagingDMA(n, h2d, d2h) }

// ProfileStagingInRun is a profile's in-run staging rate for copies of n
// bytes into pinned memory (in) or out of it, in bytes per nanosecond.
func ProfileStagingInRun(p *Profile, n int, in bool) float64 { return p.stagingInRun(n, in) }

// SetShareScratch makes every slot of p use slot 0's scratch buffers, a
// hazard the detector must name.
func SetShareScratch(p *Pipeline, share bool) { p.shareScratch = share }

// ProfileLaunchCost is a profile's cost of a launch named name over n
// elements, with iters iterations and flops FLOPs per element, and the
// note it adds when it has no cost of that name.
func ProfileLaunchCost(p *Profile, name string, iters int, flops float64, n int) (fixed, work time.Duration, note string, err error) {
	return p.launchCost(name, iters, flops, n)
}

// SimFreeMemory is a simulated device's free and total memory.
func SimFreeMemory(s *Sim) (free, total int64, err error) { return s.FreeMemory() }

// GroupPipeline is device d's pipeline in g.
func GroupPipeline(g *Group, d int) *Pipeline { return g.pipes[d] }
