package ntstore

// NonTemporal says whether Fill's stores bypass the CPU's caches here.
const NonTemporal = true

func fill(dst []float32, bits uint32) { fillNT(&dst[0], len(dst), bits) }

// fillNT stores bits to n 4-byte elements from p with MOVNTI, then SFENCE.
//
//go:noescape
func fillNT(p *float32, n int, bits uint32)
