//go:build !amd64

package ntstore

import "math"

// NonTemporal says whether Fill's stores bypass the CPU's caches here.
const NonTemporal = false

func fill(dst []float32, bits uint32) {
	for i := range dst {
		dst[i] = math.Float32frombits(bits)
	}
}
