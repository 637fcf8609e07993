package bench

import (
	"errors"
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// WorkloadOptions say what data [Machine.NewWorkload] makes. The zero
// value has no elements, which NewWorkload refuses.
type WorkloadOptions struct {
	// Elems is the elements of each input and output.
	Elems int
	// Pinned allocates the arrays in pinned memory of the first backend;
	// otherwise they are Go slices.
	Pinned bool
	// Scalars set an embedded kernel's scalars by name ("iters"), over its
	// defaults; names it does not take are ignored.
	Scalars map[string]float64
}

// Workload is one job's host data on a machine: its inputs filled with
// the standard pattern (kernels.FillPattern), its outputs, the kernel, and
// a verifier that checks every element. Close frees its pinned memory.
type Workload struct {
	// Name is the embedded kernel's name, or the user's entry.
	Name   string
	Kernel *pipeline.Kernel
	// Config is the job's float32 shape; its chunk, slots and streams are
	// left to the caller.
	Config          pipeline.Config
	Inputs, Outputs [][]float32
	Job             pipeline.Job
	// Verify checks the first output against the CPU reference; nil for a
	// user's kernel, which has none. Tolerance is the reference's
	// tolerance, in words.
	Verify    func(out []float32) error
	Tolerance string

	closers []func() error
}

// NewWorkload builds the data for the machine's kernel: the embedded one
// that MachineOptions.Kernel names, or the user's element-wise kernel with
// m.UserInputs inputs. Arrays that need more host memory than the host has
// available are refused with a *[MemoryError]. Its errors are a *[Error].
func (m *Machine) NewWorkload(o WorkloadOptions) (*Workload, error) {
	fail := func(err error) (*Workload, error) { return nil, &Error{Op: "NewWorkload", Err: err} }
	if m == nil {
		return fail(errors.New("nil machine"))
	}
	if o.Elems <= 0 {
		return fail(fmt.Errorf("%d elements: want at least 1", o.Elems))
	}
	w := &Workload{Name: m.opts.Kernel}
	ins, outs := m.UserInputs, 1
	var k *kernels.Kernel
	var scalars []float64
	if m.userKernel() {
		w.Name = m.opts.Entry
		w.Kernel = kernels.Elementwise(m.opts.Entry, m.UserFunction)
	} else {
		var err error
		if k, err = kernels.ByName(m.opts.Kernel); err != nil {
			return fail(err)
		}
		scalars = k.Defaults()
		for i, sc := range k.Scalars {
			if v, ok := o.Scalars[sc.Name]; ok {
				scalars[i] = v
			}
		}
		if w.Kernel, err = k.Pipeline(m.Modules, scalars...); err != nil {
			return fail(err)
		}
		ins, outs = k.Inputs, k.Outputs
		w.Tolerance = k.Tolerance
	}
	n := o.Elems
	if err := checkHostMemory(int64(n)*4*int64(ins+outs), fmt.Sprintf("the job's %d input and output arrays", ins+outs)); err != nil {
		return fail(err)
	}
	w.Config = pipeline.Float32Config(ins, outs)
	w.Job = pipeline.Job{N: n, Kernel: w.Kernel}
	for i := 0; i < ins+outs; i++ {
		s, buf, err := w.alloc(n, o.Pinned, m.Backends[0])
		if err != nil {
			w.Close()
			return fail(err)
		}
		if i < ins {
			kernels.FillPattern(s, i*7919)
			w.Inputs = append(w.Inputs, s)
			w.Job.Inputs = append(w.Job.Inputs, buf)
			continue
		}
		// Touch the output once, so page faults are not timed as copies.
		clear(s)
		w.Outputs = append(w.Outputs, s)
		w.Job.Outputs = append(w.Job.Outputs, buf)
	}
	if k != nil {
		in := w.Inputs
		w.Verify = func(out []float32) error { return k.Verify(in, out, scalars...) }
	}
	return w, nil
}

// alloc returns n float32s: pinned memory from b when pinned, else a Go
// slice.
func (w *Workload) alloc(n int, pinned bool, b pipeline.Backend) ([]float32, pipeline.Buffer, error) {
	return allocFloats(b, n, pinned, &w.closers)
}

// allocFloats returns n float32s: pinned memory from b, whose Close it
// adds to closers, when pinned, else a Go slice.
func allocFloats(b pipeline.Backend, n int, pinned bool, closers *[]func() error) ([]float32, pipeline.Buffer, error) {
	if !pinned {
		s := make([]float32, n)
		return s, pipeline.Slice(s), nil
	}
	h, err := b.AllocPinned(n * 4)
	if err != nil {
		return nil, pipeline.Buffer{}, err
	}
	*closers = append(*closers, h.Close)
	return driver.View[float32](h.Bytes())[:n], pipeline.Pinned(h), nil
}

// Close frees the workload's pinned memory; a second Close does nothing.
func (w *Workload) Close() error {
	if w == nil {
		return nil
	}
	var errs []error
	for _, c := range w.closers {
		errs = append(errs, c())
	}
	w.closers = nil
	return errors.Join(errs...)
}
