package driver

import (
	"bytes"
	"fmt"
)

// DeviceAttribute is a CUdevice_attribute id, for [Device.Attribute].
type DeviceAttribute int32

// Device attributes used by overlap. Any other id from cuda.h works with
// [Device.Attribute] too.
const (
	AttrMaxThreadsPerBlock     DeviceAttribute = 1
	AttrMultiprocessorCount    DeviceAttribute = 16
	AttrConcurrentKernels      DeviceAttribute = 31
	AttrPCIBusID               DeviceAttribute = 33
	AttrPCIDeviceID            DeviceAttribute = 34
	AttrAsyncEngineCount       DeviceAttribute = 40
	AttrUnifiedAddressing      DeviceAttribute = 41
	AttrPCIDomainID            DeviceAttribute = 50
	AttrComputeCapabilityMajor DeviceAttribute = 75
	AttrComputeCapabilityMinor DeviceAttribute = 76
	AttrHostRegisterSupported  DeviceAttribute = 99
)

// Device is a CUDA device, named by its ordinal. It owns nothing and needs
// no Close; [NewContext] gives the context through which work is done.
type Device struct {
	ordinal int
	valid   bool
}

// DeviceCount returns the number of CUDA devices (cuDeviceGetCount).
func DeviceCount() (int, error) {
	var n int32
	if err := cuDeviceGetCount(&n); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceAt returns the device with the given ordinal (cuDeviceGet). An
// ordinal out of range is an error that says how many devices there are.
func DeviceAt(ordinal int) (Device, error) {
	n, err := DeviceCount()
	if err != nil {
		return Device{}, err
	}
	if ordinal < 0 || ordinal >= n {
		return Device{}, argError("DeviceAt", "device %d out of range: %d device(s) present", ordinal, n)
	}
	var dev int32
	if err := cuDeviceGet(&dev, int32(ordinal)); err != nil {
		return Device{}, err
	}
	return Device{ordinal: int(dev), valid: true}, nil
}

func (d Device) check(op string) error {
	if !d.valid {
		return argError(op, "zero Device; use DeviceAt")
	}
	return nil
}

// cu returns the device as a CUdevice.
func (d Device) cu() int32 { return int32(d.ordinal) }

// Ordinal returns the device's index.
func (d Device) Ordinal() int { return d.ordinal }

// Name returns the device's product name (cuDeviceGetName).
func (d Device) Name() (string, error) {
	if err := d.check("Device.Name"); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	if err := cuDeviceGetName(&buf[0], int32(len(buf)), d.cu()); err != nil {
		return "", err
	}
	return cTrim(buf), nil
}

// Attribute returns any CUdevice_attribute (cuDeviceGetAttribute).
func (d Device) Attribute(a DeviceAttribute) (int, error) { return d.attribute("Device.Attribute", a) }

// attribute is Attribute for op, the method that asks.
func (d Device) attribute(op string, a DeviceAttribute) (int, error) {
	if err := d.check(op); err != nil {
		return 0, err
	}
	var v int32
	if err := cuDeviceGetAttribute(&v, a, d.cu()); err != nil {
		return 0, err
	}
	return int(v), nil
}

// ComputeCapability returns the major and minor compute capability.
func (d Device) ComputeCapability() (major, minor int, err error) {
	if major, err = d.attribute("Device.ComputeCapability", AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	minor, err = d.attribute("Device.ComputeCapability", AttrComputeCapabilityMinor)
	return major, minor, err
}

// TotalMemory returns the device memory in bytes (cuDeviceTotalMem_v2).
func (d Device) TotalMemory() (uint64, error) {
	if err := d.check("Device.TotalMemory"); err != nil {
		return 0, err
	}
	var n uint64
	if err := cuDeviceTotalMem(&n, d.cu()); err != nil {
		return 0, err
	}
	return n, nil
}

// PCIBusID returns the device's PCI address, such as "0000:19:00.0"
// (cuDeviceGetPCIBusId).
func (d Device) PCIBusID() (string, error) {
	if err := d.check("Device.PCIBusID"); err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	if err := cuDeviceGetPCIBusId(&buf[0], int32(len(buf)), d.cu()); err != nil {
		return "", err
	}
	return cTrim(buf), nil
}

// Multiprocessors returns the number of streaming multiprocessors.
func (d Device) Multiprocessors() (int, error) {
	return d.attribute("Device.Multiprocessors", AttrMultiprocessorCount)
}

// CopyEngines returns the number of asynchronous copy engines
// (CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT): 2 means copies in both
// directions can overlap each other and kernels.
func (d Device) CopyEngines() (int, error) {
	return d.attribute("Device.CopyEngines", AttrAsyncEngineCount)
}

// ConcurrentKernels reports whether the device can run kernels concurrently.
func (d Device) ConcurrentKernels() (bool, error) {
	v, err := d.attribute("Device.ConcurrentKernels", AttrConcurrentKernels)
	return v != 0, err
}

// String returns "GPU N".
func (d Device) String() string { return fmt.Sprintf("GPU %d", d.ordinal) }

func cTrim(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
