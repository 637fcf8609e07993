package sim

// ProfileStagingDMA is the share of their rate that staging copies of n
// bytes keep while DMA copies run in the directions given.
func ProfileStagingDMA(p *Profile, n int, h2d, d2h bool) float64 { return p.stagingDMA(n, h2d, d2h) }

// ProfileStagingInRun is a profile's in-run staging rate for copies of n
// bytes into pinned memory (in) or out of it, in bytes per nanosecond.
func ProfileStagingInRun(p *Profile, n int, in bool) float64 { return p.stagingInRun(n, in) }
