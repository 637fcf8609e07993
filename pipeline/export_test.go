package pipeline

// SetSkipWAR lets the external tests drop the write-after-read waits, to
// show that the hazard detector sees what they prevent.
func SetSkipWAR(p *Pipeline, skip bool) { p.skipWAR = skip }
