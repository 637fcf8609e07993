package bench

import (
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/hostcpu"
)

// DeviceInfo is what overlap devices lists about a GPU.
type DeviceInfo struct {
	Ordinal int
	Name    string
	// Major and Minor are the compute capability (9.0 on an H200).
	Major, Minor int
	// Memory is the GPU's memory in bytes.
	Memory            uint64
	Multiprocessors   int
	CopyEngines       int
	ConcurrentKernels bool
	PCIBusID          string
	// Located says that the host told where the GPU sits (Linux's sysfs):
	// its NUMANode (-1 where a single-node host does not say) and the
	// CPUs local to it, in increasing order.
	Located   bool
	NUMANode  int
	LocalCPUs []int
}

// DescribeDevice reads d's properties from the driver, and where it sits
// in the host. Its error is a *[Error]: a property the driver did not
// give (where the host does not say where the GPU sits is no error).
func DescribeDevice(d driver.Device) (DeviceInfo, error) {
	info, err := describeDevice(d)
	if err != nil {
		return DeviceInfo{}, &Error{Op: "DescribeDevice", Err: err}
	}
	return info, nil
}

// DescribeDevices describes every GPU the driver lists, in order
// ([DescribeDevice]). Its error is a *[Error]: the driver's, or a
// property it did not give, after "GPU N: ".
func DescribeDevices() ([]DeviceInfo, error) {
	fail := func(err error) ([]DeviceInfo, error) { return nil, &Error{Op: "DescribeDevices", Err: err} }
	n, err := driver.DeviceCount()
	if err != nil {
		return fail(err)
	}
	devs := make([]DeviceInfo, n)
	for i := range devs {
		d, err := driver.DeviceAt(i)
		if err != nil {
			return fail(err)
		}
		if devs[i], err = describeDevice(d); err != nil {
			return fail(fmt.Errorf("GPU %d: %w", i, err))
		}
	}
	return devs, nil
}

func describeDevice(d driver.Device) (DeviceInfo, error) {
	info := DeviceInfo{Ordinal: d.Ordinal(), NUMANode: -1}
	var err error
	if info.Name, err = d.Name(); err != nil {
		return info, err
	}
	if info.Major, info.Minor, err = d.ComputeCapability(); err != nil {
		return info, err
	}
	if info.Memory, err = d.TotalMemory(); err != nil {
		return info, err
	}
	if info.Multiprocessors, err = d.Multiprocessors(); err != nil {
		return info, err
	}
	if info.CopyEngines, err = d.CopyEngines(); err != nil {
		return info, err
	}
	if info.ConcurrentKernels, err = d.ConcurrentKernels(); err != nil {
		return info, err
	}
	if info.PCIBusID, err = d.PCIBusID(); err != nil {
		return info, err
	}
	if l, err := hostcpu.Of(info.PCIBusID); err == nil {
		info.Located, info.NUMANode, info.LocalCPUs = true, l.NUMANode, l.CPUs
	}
	return info, nil
}
