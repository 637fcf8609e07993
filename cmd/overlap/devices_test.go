package main

import (
	"testing"

	"github.com/purecuda/overlap/bench"
	"github.com/stretchr/testify/assert"
)

// TestLocalityColumns: overlap devices shows each GPU's NUMA node and local
// CPUs where the host says, and "-" where it does not (issue 12).
func TestLocalityColumns(t *testing.T) {
	cases := []struct {
		info       bench.DeviceInfo
		numa, cpus string
	}{
		{bench.DeviceInfo{Located: true, NUMANode: 1, LocalCPUs: []int{16, 17, 18, 19, 40}}, "1", "16-19,40"},
		{bench.DeviceInfo{Located: true, NUMANode: -1, LocalCPUs: []int{0, 1, 2, 3}}, "-", "0-3"},
		{bench.DeviceInfo{NUMANode: -1}, "-", "-"},
	}
	for _, c := range cases {
		numa, cpus := localityColumns(c.info)
		assert.Equal(t, c.numa, numa)
		assert.Equal(t, c.cpus, cpus)
	}
}
