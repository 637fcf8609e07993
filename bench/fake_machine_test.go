//go:build linux

package bench

import (
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenMachineOnFakeDriver opens the fake driver's GPUs: the zero
// options open GPU 0; AllDevices both, with the seed kernel loaded on each
// and a pinned workload; a GPU that is not there is a *NoDeviceError, and
// a kernel that does not exist an error, each with nothing left open
// (gputest.Fake checks that every driver object is gone).
func TestOpenMachineOnFakeDriver(t *testing.T) {
	if gputest.Fake(t) == nil {
		return
	}
	m, err := OpenMachine(MachineOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int{0}, m.Ordinals)
	assert.NotNil(t, m.Modules)
	assert.NoError(t, m.Close())

	m, err = OpenMachine(MachineOptions{AllDevices: true, Kernel: "seed"})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, m.Ordinals)
	assert.Len(t, m.Backends, 2)
	assert.NotNil(t, m.Context)
	assert.Nil(t, m.Sim)
	assert.Equal(t, "Fake GPU 0 + Fake GPU 1", m.Names())
	w, err := m.NewWorkload(WorkloadOptions{Elems: 1 << 10, Pinned: true})
	require.NoError(t, err)
	assert.Len(t, w.Inputs[0], 1<<10)
	assert.NoError(t, w.Close())
	assert.NoError(t, w.Close(), "a second Close")
	assert.NoError(t, m.Close())
	assert.NoError(t, m.Close(), "a second Close")
	_, err = m.UserFunction(nil)
	assert.EqualError(t, err, "bench: UserFunction: the kernel  was not loaded on this context")

	d, err := driver.DeviceAt(1)
	require.NoError(t, err)
	info, err := DescribeDevice(d)
	require.NoError(t, err)
	assert.Equal(t, DeviceInfo{Ordinal: 1, Name: "Fake GPU 1", Major: 9, Memory: 4 << 30, Multiprocessors: 4, CopyEngines: 2,
		ConcurrentKernels: true, PCIBusID: "00fa:02:00.0", NUMANode: -1}, info, "no host has PCI domain 00fa: not located")
	all, err := DescribeDevices()
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, info, all[1])
	assert.Equal(t, "Fake GPU 0", all[0].Name)

	_, err = OpenMachine(MachineOptions{Ordinals: []int{0, 2}})
	var nd *NoDeviceError
	require.ErrorAs(t, err, &nd)
	assert.Equal(t, NoDeviceError{Ordinal: 2, Count: 2}, *nd)
	assert.EqualError(t, err, "bench: OpenMachine: GPU 2 is out of range (2 GPU(s) present)")
	_, err = OpenMachine(MachineOptions{Ordinals: []int{}})
	assert.EqualError(t, err, "bench: OpenMachine: no GPU is present")
	_, err = OpenMachine(MachineOptions{Kernel: "nope"})
	assert.ErrorContains(t, err, "bench: OpenMachine: ")
}
