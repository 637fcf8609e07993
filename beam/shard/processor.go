package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Processor streams one shard's rows through a computation on one device
// (or a few, see [Acquire]). A shard is raw rows back to back; a row is
// RowBytes bytes (one little-endian float32 for the embedded kernels, N of
// them for a model whose rows are N-vectors).
//
// Process reads in until it ends and writes the result rows to out, in
// order. It is called with an *os.File on each side by [ProcessShard]: a
// Processor may read and write them positionally. It returns what it did
// even on failure; an input that ends inside a row is an error that wraps
// [ErrPartialRow] (a [*RowError] where the offset is known). On failure,
// out may hold a prefix of the output: ProcessShard never publishes it.
//
// Process may be called from several goroutines at once; a Processor that
// runs one shard at a time queues them. Close frees what the Processor
// holds; it is called once, by the registry, when the last user leaves.
type Processor interface {
	RowBytes() int
	Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error)
	Close() error
}

// Stats is what one shard's processing did.
type Stats struct {
	// Rows is the number of input rows processed in full.
	Rows int64
	// InBytes and OutBytes are the bytes read and written.
	InBytes, OutBytes int64
	// Elapsed is the shard's time on the engine's clock: the wall clock on
	// a GPU, the simulator's virtual clock (its prediction for the
	// profiled GPU) with --sim.
	Elapsed time.Duration
	// Stages is each stage's time over the shard, on the same clock, by
	// stage name (the Stage constants); Bound names the slowest. A
	// Processor that cannot tell leaves them empty.
	Stages map[string]time.Duration
	Bound  string
	// Backend names what ran it ("NVIDIA H200", "simulator").
	Backend string
}

// The stage names a Processor reports in Stats.Stages and Stats.Bound, and
// that the shard DoFn counts as bound_<name>.
const (
	StageRead    = "read"
	StageH2D     = "h2d"
	StageCompute = "compute"
	StageD2H     = "d2h"
	StageWrite   = "write"
)

// ErrPartialRow is the cause of a shard that does not hold a whole number
// of rows.
var ErrPartialRow = errors.New("the shard ends inside a row")

// RowError is a shard that is not a whole number of rows: its last row
// starts at byte Offset and is cut short.
type RowError struct {
	Shard    string
	Offset   int64 // where the incomplete row starts
	Size     int64 // the shard's bytes (-1 when unknown)
	RowBytes int
	// Row says what a row is, where the Processor says it
	// ([RowDescriber]): "8 float32, the input of the model 8→16→4, relu".
	Row string
}

func (e *RowError) Error() string {
	size, row := "", ""
	if e.Size >= 0 {
		size = fmt.Sprintf(" (%d bytes)", e.Size)
	}
	if e.Row != "" {
		row = " (" + e.Row + ")"
	}
	return fmt.Sprintf("shard: %s%s is not a whole number of %d-byte rows%s: the row at byte offset %d is cut short", e.Shard, size, e.RowBytes, row, e.Offset)
}

// RowDescriber is a Processor that says what its row is, for the error of
// a shard that is not a whole number of rows ([RowError].Row): a model's
// input width, say, which a shard written for another model will not
// divide. An empty description says nothing.
type RowDescriber interface {
	DescribeRow() string
}

// describeRow is p's description of its row, or "".
func describeRow(p Processor) string {
	if d, ok := p.(RowDescriber); ok {
		return d.DescribeRow()
	}
	return ""
}

// Unwrap returns ErrPartialRow.
func (e *RowError) Unwrap() error { return ErrPartialRow }

// ErrBadInput is the cause of a shard that cannot be read as one: it does
// not exist, is not a regular file, or cannot be opened.
var ErrBadInput = errors.New("the shard cannot be read")

// ErrReleased reports the use of a [Lease] after its Release.
var ErrReleased = errors.New("shard: lease released")

// Spec says which Processor a shard DoFn runs, and on what. It travels
// with the DoFn to every worker (as JSON), and the registry shares one
// Processor per distinct Spec in each worker process. The zero value runs
// the seed kernel with 100 iterations on every GPU the process sees.
type Spec struct {
	// Processor names a registered Factory; "" is "kernel", the embedded
	// element-wise kernels of package ptx/kernels.
	Processor string `json:"processor,omitempty"`
	// Sim runs on the CPU simulator of package pipeline instead of a GPU.
	Sim bool `json:"sim,omitempty"`
	// Devices are the GPUs (ordinals as the process sees them, after
	// CUDA_VISIBLE_DEVICES) that each worker process opens an engine on,
	// one per GPU. Empty means $OVERLAP_BEAM_DEVICES ("all" or "0,1") when
	// the worker has it, else every GPU the worker sees, or one simulated
	// device with Sim.
	Devices []int `json:"devices,omitempty"`
	// Kernel and Iters choose the embedded kernel ("" is "seed") and the
	// seed kernel's iterations (0 is 100); kernels with one input and one
	// output qualify (seed, axpb).
	Kernel string `json:"kernel,omitempty"`
	Iters  int    `json:"iters,omitempty"`
	// ChunkElems, Slots and ComputeStreams shape each engine's pipeline;
	// zero takes package pipeline's defaults.
	ChunkElems     int `json:"chunk_elems,omitempty"`
	Slots          int `json:"slots,omitempty"`
	ComputeStreams int `json:"compute_streams,omitempty"`
	// Model, Precision and Activation are the mlp processor's ([MLP]):
	// the safetensors file of the model, as the workers see it; the
	// layers' arithmetic, "fp32" ("" is fp32) or "tf32"; and the
	// activation between layers, "relu" or "gelu", where not the file's
	// ("" takes the file's "activation" metadata, else relu). Its
	// pipeline's elements are rows, so ChunkElems counts rows for it
	// (0 takes the model's default, 16384 or fewer for wide rows).
	Model      string `json:"model,omitempty"`
	Precision  string `json:"precision,omitempty"`
	Activation string `json:"activation,omitempty"`
	// Params are a registered Processor's own settings; the kernel and
	// mlp processors take none.
	Params map[string]string `json:"params,omitempty"`
}

// DevicesEnv is the environment variable a worker reads for its GPUs when
// Spec.Devices is empty: "all", or ordinals such as "0" or "0,1".
const DevicesEnv = "OVERLAP_BEAM_DEVICES"

// AllDevices is the Spec.Devices value (a single -1) for every GPU the
// worker process sees, whatever $OVERLAP_BEAM_DEVICES says.
var AllDevices = []int{-1}

// ParseDevices reads a device list: "all" (AllDevices), or comma-separated
// ordinals without repeats, such as "0" or "0,1".
func ParseDevices(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "all" {
		return slices.Clone(AllDevices), nil
	}
	if s == "" {
		return nil, errors.New("shard: empty device list (want all, or ordinals such as 0,1)")
	}
	var ds []int
	for _, f := range strings.Split(s, ",") {
		d, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("shard: device %q: want all, or ordinals such as 0,1", f)
		}
		if slices.Contains(ds, d) {
			return nil, fmt.Errorf("shard: device %d listed twice", d)
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// A Factory opens a Processor for spec on one device: a GPU ordinal, or
// the index of a simulated device when spec.Sim. The registry calls it
// once per device of a resolved Spec and closes what it returns.
type Factory func(spec Spec, device int) (Processor, error)

var (
	factoriesMu sync.Mutex
	factories   = map[string]Factory{}
)

// Register makes a Processor available to Specs by name, in every process
// that registers it: call it from an init function of a package that both
// the launcher and the workers link, as the kernel processor does. A name
// may be registered once.
func Register(name string, f Factory) error {
	if name == "" || f == nil {
		return errors.New("shard: Register needs a name and a factory")
	}
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	if _, ok := factories[name]; ok {
		return fmt.Errorf("shard: processor %q is already registered", name)
	}
	factories[name] = f
	return nil
}

// Registered lists the registered processor names, sorted.
func Registered() []string {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func factory(name string) (Factory, error) {
	factoriesMu.Lock()
	defer factoriesMu.Unlock()
	f, ok := factories[name]
	if !ok {
		return nil, fmt.Errorf("shard: no processor %q is registered in this process (have %s)", name, strings.Join(registeredLocked(), ", "))
	}
	return f, nil
}

func registeredLocked() []string {
	names := make([]string, 0, len(factories))
	for n := range factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// deviceCount reports the GPUs the process sees; a variable so that tests
// of resolution need no driver.
var deviceCount = gpuCount

// resolve fills in the Spec's defaults as this process sees them: the
// processor's name, the kernel and its iterations (the model's precision
// for the mlp processor), and the devices.
func (s Spec) resolve() (Spec, error) {
	r := s
	r.Devices = slices.Clone(s.Devices)
	if r.Processor == "" {
		r.Processor = "kernel"
	}
	switch {
	case r.Iters < 0:
		return Spec{}, fmt.Errorf("shard: iters %d: must not be negative", r.Iters)
	case r.ChunkElems < 0 || r.Slots < 0 || r.ComputeStreams < 0:
		return Spec{}, errors.New("shard: chunk, slots and compute streams must not be negative")
	}
	switch r.Processor {
	case "kernel":
		if _, err := kernelDefaults(&r); err != nil {
			return Spec{}, err
		}
	case "mlp":
		if _, _, err := mlpDefaults(&r); err != nil {
			return Spec{}, err
		}
	}
	if len(r.Devices) == 0 {
		if env := os.Getenv(DevicesEnv); env != "" {
			ds, err := ParseDevices(env)
			if err != nil {
				return Spec{}, fmt.Errorf("shard: $%s: %s", DevicesEnv, strings.TrimPrefix(err.Error(), "shard: "))
			}
			r.Devices = ds
		} else if r.Sim {
			r.Devices = []int{0}
		} else {
			r.Devices = slices.Clone(AllDevices)
		}
	}
	if slices.Equal(r.Devices, AllDevices) {
		if r.Sim {
			r.Devices = []int{0}
		} else {
			n, err := deviceCount()
			if err != nil {
				return Spec{}, err
			}
			if n == 0 {
				return Spec{}, errors.New("shard: no GPU is present")
			}
			r.Devices = make([]int, n)
			for i := range r.Devices {
				r.Devices[i] = i
			}
		}
	}
	for i, d := range r.Devices {
		if d < 0 || slices.Contains(r.Devices[:i], d) {
			return Spec{}, fmt.Errorf("shard: devices %v: want distinct ordinals, or all", r.Devices)
		}
	}
	return r, nil
}

// key is the registry's key for a resolved Spec.
func (s Spec) key() string {
	b, err := json.Marshal(s)
	if err != nil {
		// A Spec holds only strings, numbers and a string map.
		panic("shard: marshalling a Spec: " + err.Error())
	}
	return string(b)
}
