package main

import (
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
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
	verify  func(out []float32) error
	closers []func() error
	// reference, when set, is the CPU reference's tolerance text.
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

// newWorkload builds the data for kernel name (or a user's element-wise
// kernel fn with ins inputs when name is "").
func newWorkload(o *runOptions, fn *driver.Function, userIns int, alloc func(int) (pipeline.PinnedMem, error)) (*workload, error) {
	n := o.elems
	pinned := o.host == pipeline.HostPinned
	w := &workload{name: o.kernel}
	ins := 1
	switch {
	case o.ptxFile != "":
		w.name, ins = o.entry, userIns
		w.kernel = pipeline.ElementwiseKernel(o.entry, fn)
	case o.kernel == "seed":
		w.kernel = pipeline.SeedKernel(fn, o.iters)
		w.tolerance = "4·(iters+2)·2⁻²³ relative"
	case o.kernel == "saxpy":
		ins = 2
		w.kernel = pipeline.SaxpyKernel(fn, 2.5)
		w.tolerance = "2·2⁻²³·(|a·x|+|y|)"
	case o.kernel == "lerp":
		ins = 2
		w.kernel = pipeline.LerpKernel(fn, 0.25, 1.5)
		w.tolerance = "4·2⁻²³ of the terms"
	default:
		return nil, fmt.Errorf("unknown kernel %q", o.kernel)
	}
	w.cfg = pipeline.Float32Config(ins, 1)
	w.job = pipeline.Job{N: n, Kernel: w.kernel}
	for i := 0; i < ins; i++ {
		s, buf, err := w.allocFloats(n, pinned, alloc)
		if err != nil {
			w.close()
			return nil, err
		}
		ptx.FillPattern(s, i*7919)
		w.inputs = append(w.inputs, s)
		w.job.Inputs = append(w.job.Inputs, buf)
	}
	s, buf, err := w.allocFloats(n, pinned, alloc)
	if err != nil {
		w.close()
		return nil, err
	}
	// Touch the output once, so page faults are not timed as copies.
	clear(s)
	w.outputs = [][]float32{s}
	w.job.Outputs = []pipeline.Buffer{buf}
	in := w.inputs
	switch {
	case o.ptxFile != "":
		w.verify = nil // no CPU reference for a user's kernel
	case o.kernel == "seed":
		w.verify = func(out []float32) error { return ptx.VerifySeed(in[0], out, o.iters) }
	case o.kernel == "saxpy":
		w.verify = func(out []float32) error { return ptx.VerifySaxpy(in[0], in[1], out, 2.5) }
	case o.kernel == "lerp":
		w.verify = func(out []float32) error { return ptx.VerifyLerp(in[0], in[1], out, 0.25, 1.5) }
	}
	return w, nil
}
