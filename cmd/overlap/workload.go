package main

import (
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// workload is one kernel's data: inputs filled with the standard pattern,
// outputs, the Kernel, and a verifier that checks every element.
type workload struct {
	name    string
	kernel  *pipeline.Kernel
	cfg     pipeline.Config
	inputs  [][]float32
	outputs [][]float32
	job     pipeline.Job
	// verify checks the first output; nil for a user's kernel, which has
	// no CPU reference.
	verify  func(out []float32) error
	closers []func() error
	// tolerance is the CPU reference's tolerance text.
	tolerance string
}

func (w *workload) close() {
	for _, c := range w.closers {
		c()
	}
}

// allocFloats returns n float32s: pinned memory from alloc when pinned,
// else a Go slice.
func (w *workload) allocFloats(n int, pinned bool, alloc func(int) (pipeline.PinnedMem, error)) ([]float32, pipeline.Buffer, error) {
	if !pinned {
		s := make([]float32, n)
		return s, pipeline.Slice(s), nil
	}
	h, err := alloc(n * 4)
	if err != nil {
		return nil, pipeline.Buffer{}, err
	}
	w.closers = append(w.closers, h.Close)
	return driver.View[float32](h.Bytes())[:n], pipeline.Pinned(h), nil
}

// scalarsFor returns kernel k's scalars for the options: the table's
// defaults, with --iters for a scalar named iters.
func scalarsFor(k *kernels.Kernel, o *runOptions) []float64 {
	s := k.Defaults()
	for i, sc := range k.Scalars {
		if sc.Name == "iters" {
			s[i] = float64(o.iters)
		}
	}
	return s
}

// hasScalar reports whether kernel name (an embedded one) takes a scalar
// called scalar.
func hasScalar(name, scalar string) bool {
	k, err := kernels.ByName(name)
	if err != nil {
		return false
	}
	for _, s := range k.Scalars {
		if s.Name == scalar {
			return true
		}
	}
	return false
}

// newWorkload builds the data for the embedded kernel o.kernel, or for a
// user's element-wise kernel (--ptx) with e.userIns inputs.
func newWorkload(o *runOptions, e *env) (*workload, error) {
	n := o.elems
	pinned := o.host == pipeline.HostPinned
	w := &workload{name: o.kernel}
	ins, outs := e.userIns, 1
	var k *kernels.Kernel
	var scalars []float64
	if o.userKernel() {
		w.name = o.entry
		w.kernel = kernels.Elementwise(o.entry, e.userFn)
	} else {
		var err error
		if k, err = kernels.ByName(o.kernel); err != nil {
			return nil, err
		}
		scalars = scalarsFor(k, o)
		if w.kernel, err = k.Pipeline(e.mods, scalars...); err != nil {
			return nil, err
		}
		ins, outs = k.Inputs, k.Outputs
		w.tolerance = k.Tolerance
	}
	if err := checkHostMemory(int64(n)*4*int64(ins+outs), fmt.Sprintf("--elems %d: the job's %d input and output arrays", n, ins+outs)); err != nil {
		return nil, err
	}
	w.cfg = pipeline.Float32Config(ins, outs)
	w.job = pipeline.Job{N: n, Kernel: w.kernel}
	for i := 0; i < ins; i++ {
		s, buf, err := w.allocFloats(n, pinned, e.allocPinned)
		if err != nil {
			w.close()
			return nil, err
		}
		kernels.FillPattern(s, i*7919)
		w.inputs = append(w.inputs, s)
		w.job.Inputs = append(w.job.Inputs, buf)
	}
	for i := 0; i < outs; i++ {
		s, buf, err := w.allocFloats(n, pinned, e.allocPinned)
		if err != nil {
			w.close()
			return nil, err
		}
		// Touch the output once, so page faults are not timed as copies.
		clear(s)
		w.outputs = append(w.outputs, s)
		w.job.Outputs = append(w.job.Outputs, buf)
	}
	if k != nil {
		in := w.inputs
		w.verify = func(out []float32) error { return k.Verify(in, out, scalars...) }
	}
	return w, nil
}
