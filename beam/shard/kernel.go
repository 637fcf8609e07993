package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

func init() {
	if err := Register("kernel", func(spec Spec, device int) (Processor, error) { return NewKernel(spec, device) }); err != nil {
		panic(err)
	}
}

// gpuCount loads the driver and counts the GPUs the process sees.
func gpuCount() (int, error) {
	if err := driver.Load(); err != nil {
		return 0, err
	}
	return driver.DeviceCount()
}

// kernelDefaults fills in spec's kernel ("seed") and its iterations (the
// kernel's default, 100 for seed) and returns the kernel's row. A kernel
// qualifies when it has one input and one output: a shard is one stream.
func kernelDefaults(spec *Spec) (*kernels.Kernel, error) {
	if spec.Model != "" || spec.Precision != "" || spec.Activation != "" {
		return nil, fmt.Errorf("shard: the kernel processor runs no model (model %q, precision %q, activation %q): the mlp processor does", spec.Model, spec.Precision, spec.Activation)
	}
	if spec.Kernel == "" {
		spec.Kernel = "seed"
	}
	k, err := kernels.ByName(spec.Kernel)
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	if k.Inputs != 1 || k.Outputs != 1 {
		return nil, fmt.Errorf("shard: kernel %s has %d input(s) and %d output(s); a shard is one input and one output (%s qualify)", k.Name, k.Inputs, k.Outputs, singleStream())
	}
	i := slices.IndexFunc(k.Scalars, func(s kernels.Scalar) bool { return s.Name == "iters" })
	switch {
	case i < 0 && spec.Iters != 0:
		return nil, fmt.Errorf("shard: kernel %s has no iterations to set (iters %d)", k.Name, spec.Iters)
	case i >= 0 && spec.Iters == 0:
		spec.Iters = int(k.Scalars[i].Default)
	}
	return k, nil
}

// singleStream lists the kernels with one input and one output.
func singleStream() string {
	var names []string
	for _, k := range kernels.All() {
		if k.Inputs == 1 && k.Outputs == 1 {
			names = append(names, k.Name)
		}
	}
	slices.Sort(names)
	return fmt.Sprint(names)
}

// Kernel is the Processor of an embedded kernel on one device: a pipeline
// of package pipeline on a GPU's primary context, or on a simulated H200
// (sim.New) when the Spec says Sim. A row is one float32. Process
// streams a shard through Pipeline.RunStream; shards given to one Kernel
// at once run one after another on its pipeline.
type Kernel struct {
	e engine
}

// NewKernel opens the kernel processor of spec on a device: the GPU with
// that ordinal, or with spec.Sim a simulator of its own (device only seeds
// it). On a GPU it loads the driver, retains the device's primary context
// and JIT-compiles the kernel there, so that a bad kernel or a missing GPU
// is reported here, not by the first shard. On error nothing stays open.
func NewKernel(spec Spec, device int) (*Kernel, error) {
	row, err := kernelDefaults(&spec)
	if err != nil {
		return nil, err
	}
	if device < 0 {
		return nil, fmt.Errorf("shard: device %d: must not be negative", device)
	}
	kp := &Kernel{e: engine{inRow: 4, outRow: 4}}
	e := &kp.e
	fail := func(err error) (*Kernel, error) {
		return nil, errors.Join(err, kp.Close())
	}
	var mods *kernels.Modules
	if spec.Sim {
		e.backend = sim.New(uint64(device)+1, 0)
	} else {
		ctx, err := openContext(device)
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, ctx.Close)
		mods = new(kernels.Modules)
		// The modules unload before the context is released.
		e.closers = append([]func() error{mods.Close}, e.closers...)
		if _, err := mods.Function(ctx, row); err != nil {
			return fail(err)
		}
		e.backend = pipeline.GPU(ctx)
	}
	_, scalars, err := KernelScalars(spec)
	if err != nil {
		return fail(err)
	}
	if e.k, err = row.Pipeline(mods, scalars...); err != nil {
		return fail(err)
	}
	cfg := pipeline.Float32Config(1, 1)
	// HostAuto has New allocate the pinned slots that streaming runs
	// read into and write from.
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = spec.ChunkElems, spec.Slots, spec.ComputeStreams, pipeline.HostAuto
	p, err := pipeline.New(e.backend, cfg)
	if err != nil {
		return fail(err)
	}
	e.p = p
	e.closers = append([]func() error{p.Close}, e.closers...)
	return kp, nil
}

// openContext loads the driver and retains the primary context of the GPU
// with that ordinal.
func openContext(device int) (*driver.Context, error) {
	if err := driver.Load(); err != nil {
		return nil, err
	}
	dev, err := driver.DeviceAt(device)
	if err != nil {
		return nil, err
	}
	return driver.NewContext(dev)
}

// Backend returns the pipeline's backend: a *sim.Sim with Sim, whose
// Live counts tests check after Close.
func (kp *Kernel) Backend() pipeline.Backend { return kp.e.backend }

// RowBytes is 4: a row is one float32.
func (kp *Kernel) RowBytes() int { return 4 }

// Process streams in through the kernel into out. An input that ends inside
// a float32 is a *RowError at the offset where that float32 starts.
func (kp *Kernel) Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	return kp.e.process(ctx, in, out)
}

// stageOrder is the order stages are reported in, and ties broken by.
var stageOrder = []string{StageRead, StageH2D, StageCompute, StageD2H, StageWrite}

// slowest names the stage with the longest time; ties go to the earlier.
func slowest(stages map[string]time.Duration) string {
	best := ""
	for _, s := range stageOrder {
		if d, ok := stages[s]; ok && (best == "" || d > stages[best]) {
			best = s
		}
	}
	return best
}

// streamName is the name of a file (anything with Name), else what.
func streamName(v any, what string) string {
	if n, ok := v.(interface{ Name() string }); ok {
		return n.Name()
	}
	return what
}

// Close frees the pipeline, unloads the kernel and releases the context.
// It is safe to call twice.
func (kp *Kernel) Close() error { return kp.e.close() }

// KernelScalars returns the embedded kernel that spec runs and its scalars
// (the seed kernel's iterations, the table's defaults for the others), as
// the kernel processor runs it: what a check of its output against the
// kernel's reference (kernels.Kernel.Verify) needs.
func KernelScalars(spec Spec) (*kernels.Kernel, []float64, error) {
	row, err := kernelDefaults(&spec)
	if err != nil {
		return nil, nil, err
	}
	scalars := row.Defaults()
	for i, s := range row.Scalars {
		if s.Name == "iters" {
			scalars[i] = float64(spec.Iters)
		}
	}
	return row, scalars, nil
}

// StageNames lists the stage names in the order they are reported.
func StageNames() []string { return slices.Clone(stageOrder) }
