package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInferInMemoryDefaultChunk: without Chunks, InferInMemory runs
// model.Model.ChunkRowsFor the rows over its backends: about 8 chunks a
// device when the rows are few.
func TestInferInMemoryDefaultChunk(t *testing.T) {
	m, k := testModel(t)
	for _, tc := range []struct{ devices, want int }{{1, 256}, {2, 128}} {
		res, err := InferInMemory(context.Background(), simDevices(tc.devices), k, m, InferOptions{Rows: 2048, NoBaseline: true})
		require.NoError(t, err)
		assert.Equal(t, tc.want, res.ChunkRows, "%d devices", tc.devices)
		assert.Equal(t, []int{tc.want}, []int{res.Chunks[0].ChunkRows})
	}
}
