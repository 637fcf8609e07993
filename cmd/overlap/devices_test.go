package main

import (
	"errors"
	"testing"

	"github.com/purecuda/overlap/internal/hostcpu"
	"github.com/stretchr/testify/assert"
)

// TestLocalityColumns: overlap devices shows each GPU's NUMA node and local
// CPUs where the host says, and "-" where it does not (issue 12).
func TestLocalityColumns(t *testing.T) {
	cases := []struct {
		l          hostcpu.Locality
		err        error
		numa, cpus string
	}{
		{hostcpu.Locality{NUMANode: 1, CPUs: []int{16, 17, 18, 19, 40}}, nil, "1", "16-19,40"},
		{hostcpu.Locality{NUMANode: -1, CPUs: []int{0, 1, 2, 3}}, nil, "-", "0-3"},
		{hostcpu.Locality{}, errors.New("no sysfs entry"), "-", "-"},
	}
	for _, c := range cases {
		var asked string
		numa, cpus := localityColumns("0000:19:00.0", func(bus string) (hostcpu.Locality, error) {
			asked = bus
			return c.l, c.err
		})
		assert.Equal(t, "0000:19:00.0", asked)
		assert.Equal(t, c.numa, numa)
		assert.Equal(t, c.cpus, cpus)
	}
}
