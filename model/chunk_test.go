package model

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestChunkRowsFor: many rows take the default chunk; few rows make about
// 8 chunks a device, in whole 128-row tiles, never more than the rows;
// devices below 1 count as 1, and a model without layers still gets a
// chunk.
func TestChunkRowsFor(t *testing.T) {
	m, err := Random([]int{8, 16, 4}, ReLU, 1)
	require.NoError(t, err)
	wide, err := Random([]int{1 << 15, 2}, ReLU, 1)
	require.NoError(t, err)
	require.Equal(t, 16384, m.DefaultChunkRows())
	require.Equal(t, 512, wide.DefaultChunkRows())
	for _, tc := range []struct {
		m             *Model
		rows, devices int
		want          int
	}{
		{m, 1 << 30, 1, 16384},
		{m, 3000, 1, 384},
		{m, 3000, 2, 256},
		{m, 3000, 0, 384},
		{m, 3000, -4, 384},
		{m, 1000, 1, 128},
		{m, 100, 1, 100},
		{m, 1, 8, 1},
		{m, 0, 1, 1},
		{wide, 1 << 20, 1, 512},
		{wide, 3000, 1, 384},
		{nil, 3000, 1, 384},
	} {
		t.Run(fmt.Sprintf("%v/%d/%d", tc.m.Widths(), tc.rows, tc.devices), func(t *testing.T) {
			assert.Equal(t, tc.want, tc.m.ChunkRowsFor(tc.rows, tc.devices))
		})
	}
}
