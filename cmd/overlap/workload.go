package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// workload is one kernel's data: inputs filled with the standard pattern,
// outputs, the kernel, and a verifier that checks every element.
type workload = bench.Workload

// newWorkload builds the data for o's job on e (bench.Machine.NewWorkload):
// the embedded kernel o.kernel with --iters, or a user's element-wise one.
// Arrays that the host has no memory for are a usage error of --elems.
func newWorkload(o *runOptions, e *env) (*workload, error) {
	w, err := e.m.NewWorkload(bench.WorkloadOptions{Elems: o.elems, Pinned: o.host == pipeline.HostPinned,
		Scalars: map[string]float64{"iters": float64(o.iters)}})
	var me *bench.MemoryError
	if errors.As(err, &me) {
		me.What = fmt.Sprintf("--elems %d: %s", o.elems, me.What)
	}
	return w, memoryError(benchError(err))
}

// hasScalar reports whether kernel name (an embedded one) takes a scalar
// called scalar.
func hasScalar(name, scalar string) bool {
	k, err := kernels.ByName(name)
	return err == nil && slices.ContainsFunc(k.Scalars, func(s kernels.Scalar) bool { return s.Name == scalar })
}
