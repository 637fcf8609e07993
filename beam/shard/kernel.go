package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
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
// (pipeline.NewSim) when the Spec says Sim. A row is one float32. Process
// streams a shard through Pipeline.RunStream; shards given to one Kernel
// at once run one after another on its pipeline.
type Kernel struct {
	backend pipeline.Backend
	p       *pipeline.Pipeline
	k       *pipeline.Kernel
	closers []func() error // in the order they close

	probeMu sync.Mutex
	perElem map[string]float64 // device stages' ns per element, once probed

	closeOnce sync.Once
	closeErr  error
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
	kp := &Kernel{}
	fail := func(err error) (*Kernel, error) {
		return nil, errors.Join(err, kp.Close())
	}
	var mods *kernels.Modules
	if spec.Sim {
		kp.backend = pipeline.NewSim(uint64(device)+1, 0)
	} else {
		if err := driver.Load(); err != nil {
			return nil, err
		}
		dev, err := driver.DeviceAt(device)
		if err != nil {
			return nil, err
		}
		ctx, err := driver.NewContext(dev)
		if err != nil {
			return nil, err
		}
		kp.closers = append(kp.closers, ctx.Close)
		mods = new(kernels.Modules)
		// The modules unload before the context is released.
		kp.closers = append([]func() error{mods.Close}, kp.closers...)
		if _, err := mods.Function(ctx, row); err != nil {
			return fail(err)
		}
		kp.backend = pipeline.GPU(ctx)
	}
	_, scalars, err := KernelScalars(spec)
	if err != nil {
		return fail(err)
	}
	if kp.k, err = row.Pipeline(mods, scalars...); err != nil {
		return fail(err)
	}
	cfg := pipeline.Float32Config(1, 1)
	// HostAuto has New allocate the pinned slots that streaming runs
	// read into and write from.
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = spec.ChunkElems, spec.Slots, spec.ComputeStreams, pipeline.HostAuto
	p, err := pipeline.New(kp.backend, cfg)
	if err != nil {
		return fail(err)
	}
	kp.p = p
	kp.closers = append([]func() error{p.Close}, kp.closers...)
	return kp, nil
}

// Backend returns the pipeline's backend: a *pipeline.Sim with Sim, whose
// Live counts tests check after Close.
func (kp *Kernel) Backend() pipeline.Backend { return kp.backend }

// RowBytes is 4: a row is one float32.
func (kp *Kernel) RowBytes() int { return 4 }

// Process streams in through the kernel into out. An input that ends inside
// a float32 is a *RowError at the offset where that float32 starts.
func (kp *Kernel) Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	if in == nil || out == nil {
		return Stats{}, errors.New("shard: Process needs an input and an output")
	}
	inName, outName := streamName(in, "input"), streamName(out, "output")
	job := pipeline.StreamJob{
		Inputs: []io.Reader{in}, Outputs: []io.Writer{out}, Kernel: kp.k,
		InputNames: []string{inName}, OutputNames: []string{outName},
	}
	st := Stats{Backend: kp.backend.Name()}
	rep, err := kp.p.RunStream(ctx, job)
	if rep != nil {
		st.Rows, st.Elapsed = rep.N, rep.Elapsed
		if len(rep.InputBytes) == 1 && len(rep.OutputBytes) == 1 {
			st.InBytes, st.OutBytes = rep.InputBytes[0], rep.OutputBytes[0]
		}
	}
	if err != nil {
		var se *pipeline.StreamError
		if errors.As(err, &se) && errors.Is(err, pipeline.ErrPartialElement) {
			return st, &RowError{Shard: inName, Offset: se.Offset, Size: -1, RowBytes: 4}
		}
		return st, err
	}
	per, err := kp.perElement(ctx)
	if err != nil {
		return st, fmt.Errorf("shard: timing the device's stages: %w", err)
	}
	n := float64(rep.N)
	st.Stages = map[string]time.Duration{
		StageRead:    rep.Read,
		StageH2D:     time.Duration(per[StageH2D] * n),
		StageCompute: time.Duration(per[StageCompute] * n),
		StageD2H:     time.Duration(per[StageD2H] * n),
		StageWrite:   rep.Write,
	}
	st.Bound = slowest(st.Stages)
	return st, nil
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

// perElement returns the device stages' cost per element, measured once
// per Kernel: each stage alone (Pipeline.StageTimes) over 2·Slots chunks of
// overlap's standard pattern in pinned memory. A shard's device stages are
// these times its elements, as overlap run --in reckons them; its read and
// write are measured in the run itself.
func (kp *Kernel) perElement(ctx context.Context) (map[string]float64, error) {
	kp.probeMu.Lock()
	defer kp.probeMu.Unlock()
	if kp.perElem != nil {
		return kp.perElem, nil
	}
	cfg := kp.p.Config()
	n := 2 * cfg.Slots * cfg.ChunkElems
	in, err := kp.backend.AllocPinned(4 * n)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out, err := kp.backend.AllocPinned(4 * n)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	kernels.FillPattern(driver.View[float32](in.Bytes())[:n], 0)
	st, err := kp.p.StageTimes(ctx, pipeline.Job{
		N: n, Kernel: kp.k, Host: pipeline.HostPinned,
		Inputs: []pipeline.Buffer{pipeline.Pinned(in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)},
	})
	if err != nil {
		return nil, err
	}
	kp.perElem = map[string]float64{
		StageH2D:     float64(st.H2D) / float64(n),
		StageCompute: float64(st.Compute) / float64(n),
		StageD2H:     float64(st.D2H) / float64(n),
	}
	return kp.perElem, nil
}

// Close frees the pipeline, unloads the kernel and releases the context.
// It is safe to call twice.
func (kp *Kernel) Close() error {
	kp.closeOnce.Do(func() {
		for _, c := range kp.closers {
			kp.closeErr = errors.Join(kp.closeErr, c())
		}
	})
	return kp.closeErr
}

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
