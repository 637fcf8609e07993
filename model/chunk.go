package model

import "github.com/purecuda/overlap/ptx/kernels"

// ChunkRowsFor returns the chunk, in rows, for a run of rows rows shared
// by devices devices: [Model.DefaultChunkRows], but when the rows are
// few, small enough that each device gets about 8 chunks (in whole tiles
// of the GEMM's rows), so that one chunk's copies overlap another's
// compute; never more than rows, and at least 1. A devices below 1 counts
// as 1.
func (m *Model) ChunkRowsFor(rows, devices int) int {
	devices = max(1, devices)
	tile := kernels.Gemm.TileM
	few := (rows/(8*devices) + tile - 1) / tile * tile
	return max(1, min(m.DefaultChunkRows(), max(tile, few), rows))
}
