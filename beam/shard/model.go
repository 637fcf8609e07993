package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

func init() {
	if err := Register("mlp", func(spec Spec, device int) (Processor, error) { return NewMLP(spec, device) }); err != nil {
		panic(err)
	}
}

// mlpDefaults checks spec's settings for the mlp processor, fills in its
// precision ("fp32") and spells its precision and activation as package
// model does, and returns them (the activation 0 when the file decides).
func mlpDefaults(spec *Spec) (model.Precision, model.Activation, error) {
	switch {
	case spec.Model == "":
		return 0, 0, errors.New("shard: the mlp processor needs a model (Spec.Model: a safetensors file)")
	case spec.Kernel != "" || spec.Iters != 0:
		return 0, 0, fmt.Errorf("shard: the mlp processor runs a model, not an embedded kernel (kernel %q, iters %d)", spec.Kernel, spec.Iters)
	}
	prec := model.FP32
	if spec.Precision != "" {
		p, err := model.ParsePrecision(spec.Precision)
		if err != nil {
			return 0, 0, fmt.Errorf("shard: precision %q: want fp32 or tf32", spec.Precision)
		}
		prec = p
	}
	spec.Precision = prec.String()
	var act model.Activation
	if spec.Activation != "" {
		a, err := model.ParseActivation(spec.Activation)
		if err != nil {
			return 0, 0, fmt.Errorf("shard: activation %q: want relu or gelu", spec.Activation)
		}
		act = a
		spec.Activation = a.String()
	}
	return prec, act, nil
}

// loadModel reads a model file; a variable so that tests can count the
// loads.
var loadModel = model.Load

// The models open in this process, shared by the mlp processors of every
// device of a Spec (the registry opens them one after another), each
// loaded once and freed when the last of them closes.
var models = struct {
	mu sync.Mutex
	m  map[modelKey]*sharedModel
}{m: map[modelKey]*sharedModel{}}

type modelKey struct {
	path string
	act  model.Activation
}

type sharedModel struct {
	m    *model.Model
	refs int
}

// acquireModel returns the model at path with act (0: the file's), loading
// it unless it is open, and the function that gives it back.
func acquireModel(path string, act model.Activation) (*model.Model, func(), error) {
	key := modelKey{path, act}
	models.mu.Lock()
	defer models.mu.Unlock()
	s := models.m[key]
	if s == nil {
		m, err := loadModel(path, model.Options{Activation: act})
		if err != nil {
			return nil, nil, fmt.Errorf("shard: %w", err)
		}
		s = &sharedModel{m: m}
		models.m[key] = s
	}
	s.refs++
	var once sync.Once
	return s.m, func() {
		once.Do(func() {
			models.mu.Lock()
			defer models.mu.Unlock()
			if s.refs--; s.refs == 0 && models.m[key] == s {
				delete(models.m, key)
			}
		})
	}, nil
}

// MLP is the Processor of a PyTorch-trained multilayer perceptron (package
// model) on one device: the model's layers as the steps of one pipeline
// kernel, its weights resident on the device, on a GPU's primary context
// (the GEMM kernels of package ptx/kernels) or on a simulated H200
// (sim.New, each layer's CPU stand-in) when the Spec says Sim. A
// row is the model's In float32 in and its Out float32 out. Process
// streams a shard through Pipeline.RunStream; shards given to one MLP at
// once run one after another on its pipeline.
type MLP struct {
	e    engine
	m    *model.Model
	prec model.Precision
}

// NewMLP opens the mlp processor of spec on a device: the GPU with that
// ordinal, or with spec.Sim a simulator of its own (device only seeds it).
// It loads spec.Model, unless an open MLP of this process holds the same
// file with the same activation (the devices of one Spec share one model);
// on a GPU it retains the device's primary context and loads the GEMM
// module there; and it uploads the weights and measures the device's
// stages (over 2·Slots chunks, at most 512 MiB of pinned memory), so that a
// bad model or chunk, a missing GPU or weights that do not fit in its
// memory are reported here, not by the first shard. On error nothing stays
// open.
func NewMLP(spec Spec, device int) (*MLP, error) {
	prec, act, err := mlpDefaults(&spec)
	if err != nil {
		return nil, err
	}
	if device < 0 {
		return nil, fmt.Errorf("shard: device %d: must not be negative", device)
	}
	m, release, err := acquireModel(spec.Model, act)
	if err != nil {
		return nil, err
	}
	mp := &MLP{m: m, prec: prec, e: engine{inRow: 4 * m.In(), outRow: 4 * m.Out()}}
	e := &mp.e
	e.closers = []func() error{func() error { release(); return nil }}
	fail := func(err error) (*MLP, error) {
		return nil, errors.Join(err, mp.Close())
	}
	cfg, err := m.Config(spec.ChunkElems)
	if err != nil {
		return fail(fmt.Errorf("shard: %w", err))
	}
	kopts := model.KernelOptions{Precision: prec}
	if spec.Sim {
		e.backend = sim.New(uint64(device)+1, 0)
	} else {
		ctx, err := openContext(device)
		if err != nil {
			return fail(err)
		}
		e.closers = append([]func() error{ctx.Close}, e.closers...)
		g := new(kernels.GemmModules)
		// The GEMM module unloads before the context is released.
		e.closers = append([]func() error{g.Close}, e.closers...)
		if _, err := g.Functions(ctx); err != nil {
			return fail(err)
		}
		kopts.Gemm = g
		e.backend = pipeline.GPU(ctx)
	}
	if e.k, err = m.Kernel(kopts); err != nil {
		return fail(fmt.Errorf("shard: %w", err))
	}
	// HostAuto has New allocate the pinned slots that streaming runs
	// read into and write from.
	cfg.Slots, cfg.ComputeStreams, cfg.Host = spec.Slots, spec.ComputeStreams, pipeline.HostAuto
	p, err := pipeline.New(e.backend, cfg)
	if err != nil {
		return fail(err)
	}
	e.p = p
	e.closers = append([]func() error{p.Close}, e.closers...)
	if _, err := e.perElement(context.Background()); err != nil {
		return fail(fmt.Errorf("shard: model %s on device %d: %w", m, device, err))
	}
	return mp, nil
}

// Model returns the model the processor runs.
func (mp *MLP) Model() *model.Model { return mp.m }

// Precision returns the precision the layers run in.
func (mp *MLP) Precision() model.Precision { return mp.prec }

// Backend returns the pipeline's backend: a *sim.Sim with Sim, whose
// Live counts tests check after Close.
func (mp *MLP) Backend() pipeline.Backend { return mp.e.backend }

// RowBytes is 4·In: a row is the model's input, In float32.
func (mp *MLP) RowBytes() int { return mp.e.inRow }

// DescribeRow says that a row is the model's input.
func (mp *MLP) DescribeRow() string {
	return fmt.Sprintf("%d float32, the input of the model %s", mp.m.In(), mp.m)
}

// Process streams in, rows of In float32, through the model into out, rows
// of Out float32. An input that ends inside a row is a *RowError at the
// offset where that row starts.
func (mp *MLP) Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	st, err := mp.e.process(ctx, in, out)
	var re *RowError
	if errors.As(err, &re) {
		re.Row = mp.DescribeRow()
	}
	return st, err
}

// Close frees the pipeline and the weights on the device, unloads the GEMM
// module, releases the context and gives the model back. It is safe to
// call twice.
func (mp *MLP) Close() error { return mp.e.close() }
