package bench

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// MaxSimDevices bounds [MachineOptions.SimDevices]: each simulated device
// is a simulator of its own, with its goroutines and its memory, on one
// CPU.
const MaxSimDevices = 16

// SimLinkGBps bounds the copies of several simulated devices together:
// the host link measured on a two-H200 host (bench/RESULTS.md; each GPU 55
// GB/s one way, but both GPUs copying both ways at once 148 GB/s in all).
const SimLinkGBps = 148

// ErrNo32Bit refuses the GPU on a 32-bit build: NVIDIA ships no 32-bit
// driver API. Such a build compiles and runs the simulator.
var ErrNo32Bit = errors.New("bench: this is a 32-bit build, and NVIDIA's driver API is 64-bit only: build for amd64 or arm64, or use the simulator")

// MachineOptions say which machine [OpenMachine] opens: GPUs, or
// simulated devices, and the kernel that its jobs run. The zero value is
// GPU 0, with no kernel loaded yet.
type MachineOptions struct {
	// Sim opens simulated devices, SimDevices of them (0: 1; at most
	// MaxSimDevices), on Profile (nil: sim.BuiltinProfile()). Several
	// share a host link of SimLinkGBps. TimingOnly devices move no bytes
	// and compute nothing: their times are all there is.
	Sim        bool
	SimDevices int
	Profile    *sim.Profile
	TimingOnly bool
	// Ordinals are the GPUs to open, in order (nil: GPU 0); AllDevices
	// opens every GPU present instead. Wait is how the host waits for each
	// context.
	Ordinals   []int
	AllDevices bool
	Wait       driver.Wait
	// Kernel names an embedded kernel (kernels.ByName) that is loaded on
	// every GPU context as the machine opens, so that a JIT error comes
	// before any run; "" loads none.
	Kernel string
	// PTXFile, or CUFile compiled with NVRTC for each GPU, is instead a
	// user's element-wise kernel, Entry, loaded on every context: it must
	// take (float *out, const float *in..., unsigned n). GPUs only.
	PTXFile, CUFile, Entry string
}

// NoDeviceError is a GPU index that the host does not have.
type NoDeviceError struct {
	// Ordinal is the index asked for; Count the GPUs present.
	Ordinal, Count int
}

func (e *NoDeviceError) Error() string {
	return fmt.Sprintf("GPU %d is out of range (%d GPU(s) present)", e.Ordinal, e.Count)
}

// Machine is the devices that jobs run on, as [OpenMachine] opened them:
// GPU contexts or simulated devices, with the kernel modules loaded on
// each. Its fields are for reading; Close frees what it opened.
type Machine struct {
	// Backends are the devices, as a pipeline group takes them.
	Backends []pipeline.Backend
	// Ordinals are the GPU indexes of Backends (0, 1, … on the simulator).
	Ordinals []int
	// Context is the first GPU's context, and Sim the first simulated
	// device; the other is nil.
	Context *driver.Context
	Sim     *sim.Sim
	// Modules loads the embedded kernels on each context; nil on the
	// simulator and for a user's kernel.
	Modules *kernels.Modules
	// UserInputs is a user's kernel's number of inputs.
	UserInputs int

	opts    MachineOptions
	userFns map[*driver.Context]*driver.Function
	closers []func() error
}

// OpenMachine opens the machine that o describes. Its errors are a
// *[Error]; a GPU index that is not present is a *[NoDeviceError] in it.
func OpenMachine(o MachineOptions) (*Machine, error) {
	m, err := openMachine(o)
	if err != nil {
		return nil, &Error{Op: "OpenMachine", Err: err}
	}
	return m, nil
}

func openMachine(o MachineOptions) (*Machine, error) {
	m := &Machine{opts: o}
	if o.Sim {
		return m.openSim()
	}
	if strconv.IntSize < 64 {
		return nil, ErrNo32Bit
	}
	if err := driver.Load(); err != nil {
		return nil, err
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return nil, err
	}
	switch {
	case o.AllDevices:
		for d := 0; d < n; d++ {
			m.Ordinals = append(m.Ordinals, d)
		}
	case o.Ordinals != nil:
		m.Ordinals = append([]int(nil), o.Ordinals...)
	default:
		m.Ordinals = []int{0}
	}
	for _, d := range m.Ordinals {
		if d < 0 || d >= n {
			return nil, &NoDeviceError{Ordinal: d, Count: n}
		}
	}
	if len(m.Ordinals) == 0 {
		return nil, errors.New("no GPU is present")
	}
	if o.CUFile != "" {
		// Before any context: an absent NVRTC names what was looked for.
		if err := nvrtc.Load(); err != nil {
			return nil, fmt.Errorf("%s: %w", o.CUFile, err)
		}
	}
	var builtin *kernels.Kernel
	if !m.userKernel() {
		if o.Kernel != "" {
			if builtin, err = kernels.ByName(o.Kernel); err != nil {
				return nil, err
			}
		}
		m.Modules = new(kernels.Modules)
	}
	if err := m.openGPUs(builtin); err != nil {
		if m.Modules != nil {
			m.Modules.Close() // before the contexts close
		}
		m.closeAll()
		return nil, err
	}
	if m.Modules != nil {
		m.closers = append(m.closers, m.Modules.Close) // closed first, before the contexts
	}
	return m, nil
}

// openGPUs opens a context on each of m.Ordinals and loads the kernel on
// it: builtin, or the user's.
func (m *Machine) openGPUs(builtin *kernels.Kernel) error {
	m.userFns = map[*driver.Context]*driver.Function{}
	for _, d := range m.Ordinals {
		dev, err := driver.DeviceAt(d)
		if err != nil {
			return err
		}
		ctx, err := driver.NewContextWith(dev, driver.ContextOptions{Wait: m.opts.Wait})
		if err != nil {
			return err
		}
		m.closers = append(m.closers, ctx.Close)
		if m.Context == nil {
			m.Context = ctx
		}
		m.Backends = append(m.Backends, pipeline.GPU(ctx))
		switch {
		case m.userKernel():
			prog, err := m.loadUserKernel(ctx)
			if err != nil {
				return err
			}
			m.closers = append(m.closers, prog.Close)
			if m.UserInputs, err = elementwiseInputs(prog.Entry); err != nil {
				return err
			}
			m.userFns[ctx] = prog.Function
		case builtin != nil:
			// Load the kernel now: a JIT error is reported before any run.
			if _, err := m.Modules.Function(ctx, builtin); err != nil {
				return err
			}
		}
	}
	return nil
}

// openSim opens the simulated devices of m.opts.
func (m *Machine) openSim() (*Machine, error) {
	o := m.opts
	if m.userKernel() {
		return nil, errors.New("a user's kernel needs a GPU: the simulator has no CPU version of it")
	}
	prof := o.Profile
	if prof == nil {
		prof = sim.BuiltinProfile()
	}
	k := max(1, o.SimDevices)
	if k > MaxSimDevices {
		return nil, fmt.Errorf("%d simulated devices; at most %d", k, MaxSimDevices)
	}
	opts := sim.HostOptions{Seed: 1, TimingOnly: o.TimingOnly}
	if k > 1 {
		opts.LinkGBps = SimLinkGBps
	}
	host := sim.NewHost(opts)
	for d := 0; d < k; d++ {
		sdev := host.NewDevice(prof)
		if d == 0 {
			m.Sim = sdev
		}
		m.Backends = append(m.Backends, sdev)
		m.Ordinals = append(m.Ordinals, d)
	}
	return m, nil
}

func (m *Machine) userKernel() bool { return m.opts.PTXFile != "" || m.opts.CUFile != "" }

// loadUserKernel loads the user's PTX kernel on ctx, or compiles the CUDA
// C file with NVRTC for ctx's GPU and loads the PTX it gives.
func (m *Machine) loadUserKernel(ctx *driver.Context) (*ptx.Program, error) {
	o := m.opts
	if o.CUFile == "" {
		return ptx.LoadFile(ctx, o.PTXFile, o.Entry, driver.ModuleOptions{})
	}
	res, err := nvrtc.CompileKernelFile(o.CUFile, o.Entry, nvrtc.Options{Device: ctx.Device()})
	if err != nil {
		return nil, err
	}
	return ptx.Load(ctx, o.CUFile, res.PTX, o.Entry, driver.ModuleOptions{})
}

// UserFunction is the user's kernel as loaded on ctx, one of the
// machine's contexts.
func (m *Machine) UserFunction(ctx *driver.Context) (*driver.Function, error) {
	if m == nil {
		return nil, errors.New("bench: UserFunction: nil machine")
	}
	if fn, ok := m.userFns[ctx]; ok {
		return fn, nil
	}
	return nil, fmt.Errorf("bench: UserFunction: the kernel %s was not loaded on this context", m.opts.Entry)
}

// Names names the devices, "NVIDIA H200 ×2" for two alike.
func (m *Machine) Names() string { return pipeline.Names(m.Backends) }

// Close frees the kernels' modules and then the contexts; a second Close
// does nothing.
func (m *Machine) Close() error {
	if m == nil {
		return nil
	}
	return m.closeAll()
}

func (m *Machine) closeAll() error {
	var errs []error
	for i := len(m.closers) - 1; i >= 0; i-- {
		errs = append(errs, m.closers[i]())
	}
	m.closers = nil
	return errors.Join(errs...)
}

// ElementwiseInputs checks that a user's kernel is (out, in..., n) with
// 64-bit pointers and a 32-bit count, and returns its number of inputs.
// Its error is a *[Error].
func ElementwiseInputs(e ptx.Entry) (int, error) {
	n, err := elementwiseInputs(e)
	if err != nil {
		return 0, &Error{Op: "ElementwiseInputs", Err: err}
	}
	return n, nil
}

func elementwiseInputs(e ptx.Entry) (int, error) {
	ps := e.Params
	if len(ps) < 2 || ps[len(ps)-1].Size != 4 {
		return 0, fmt.Errorf("kernel %s must take (float *out, const float *in..., unsigned n); it has %d parameters", e.Name, len(ps))
	}
	for _, p := range ps[:len(ps)-1] {
		if p.Size != 8 {
			return 0, fmt.Errorf("kernel %s: parameter %s is %d bytes; every parameter but the last must be a pointer", e.Name, p.Name, p.Size)
		}
	}
	return len(ps) - 2, nil
}
