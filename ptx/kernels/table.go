package kernels

import (
	"embed"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
)

//go:embed *.ptx *.cu
var files embed.FS

// Scalar is one scalar parameter of a kernel: the values after its arrays.
type Scalar struct {
	// Name is the parameter's name in the .cu source.
	Name string
	// Default is the value the CLI and the benchmarks use.
	Default float64
	// Int marks an integer parameter (int in C); others are float.
	Int bool
	// Doc says what the parameter does.
	Doc string
}

// Kernel is one row of the table: everything overlap knows about one
// embedded kernel. Its PTX parameter list is its outputs, then its inputs
// (float32 arrays), then its scalars and the element count in the order
// that the .cu declares them.
type Kernel struct {
	// Name is the kernel's name, its PTX entry and the stem of its files.
	Name string
	// Doc says what it computes.
	Doc string
	// Inputs and Outputs count its float32 arrays.
	Inputs, Outputs int
	// Scalars are its scalar parameters.
	Scalars []Scalar
	// Tolerance says how Verify compares with the float64 reference, in
	// words for reports.
	Tolerance string

	// args appends the launch arguments for chunk c with scalars s.
	args func(a *driver.Args, c pipeline.Chunk, s []float64)
	// cpu computes outs from ins in float32, as the GPU does: the
	// simulator's stand-in.
	cpu func(outs, ins [][]float32, s []float64)
	// reference returns a function (one per goroutine, which may keep
	// state) giving an element's float64 reference and tolerance from the
	// inputs x at that element.
	reference func(s []float64) func(x []float32) (want, tol float64)
}

// The table. Adding a kernel is one .cu file in this directory, its PTX
// (make ptx, on a machine with nvcc), and one row here; the tests check
// the row against the PTX's parameters and the CPU stand-in against the
// reference.
var (
	// Seed is the lecture's kernel: out = in*0.5 + in*in*0.1, then
	// out += sinf(out*0.01) iters times; parameters (out, in, n, iters).
	Seed = &Kernel{
		Name: "seed", Doc: "out = in*0.5 + in*in*0.1, then out += sin(out*0.01) iters times",
		Inputs: 1, Outputs: 1,
		Scalars:   []Scalar{{Name: "iters", Default: 100, Int: true, Doc: "sine iterations per element (the intensity)"}},
		Tolerance: "4·(iters+2)·2⁻²³ relative",
		args: func(a *driver.Args, c pipeline.Chunk, s []float64) {
			a.Pointer(c.Outputs[0]).Pointer(c.Inputs[0]).Uint32(uint32(c.N)).Int32(int32(s[0]))
		},
		cpu: func(outs, ins [][]float32, s []float64) { SeedCPU(outs[0], ins[0], int(s[0])) },
		reference: func(s []float64) func(x []float32) (float64, float64) {
			iters := int(s[0])
			m := new(seedMemo)
			return func(x []float32) (float64, float64) {
				want := m.get(x[0], iters)
				return want, SeedTolerance(want, iters)
			}
		},
	}
	// Saxpy is memory-bound: out = a*x + y; parameters (out, x, y, a, n).
	Saxpy = &Kernel{
		Name: "saxpy", Doc: "out = a*x + y (memory-bound)",
		Inputs: 2, Outputs: 1,
		Scalars:   []Scalar{{Name: "a", Default: 2.5, Doc: "the factor of x"}},
		Tolerance: "2·2⁻²³·(|a·x|+|y|)",
		args: func(args *driver.Args, c pipeline.Chunk, s []float64) {
			args.Pointer(c.Outputs[0]).Pointer(c.Inputs[0]).Pointer(c.Inputs[1]).Float32(float32(s[0])).Uint32(uint32(c.N))
		},
		cpu: func(outs, ins [][]float32, s []float64) {
			a, out, x, y := float32(s[0]), outs[0], ins[0], ins[1]
			for i := range out {
				out[i] = a*x[i] + y[i]
			}
		},
		reference: func(s []float64) func(x []float32) (float64, float64) {
			a := float32(s[0])
			return func(x []float32) (float64, float64) {
				return SaxpyReference(a, x[0], x[1]), SaxpyTolerance(a, x[0], x[1])
			}
		},
	}
	// Lerp has two inputs and two scalars: out = (a + t*(b-a)) * scale;
	// parameters (out, a, b, t, scale, n).
	Lerp = &Kernel{
		Name: "lerp", Doc: "out = (a + t*(b-a)) * scale",
		Inputs: 2, Outputs: 1,
		Scalars: []Scalar{
			{Name: "t", Default: 0.25, Doc: "where between a and b"},
			{Name: "scale", Default: 1.5, Doc: "the factor of the result"},
		},
		Tolerance: "4·2⁻²³ of the terms",
		args: func(args *driver.Args, c pipeline.Chunk, s []float64) {
			args.Pointer(c.Outputs[0]).Pointer(c.Inputs[0]).Pointer(c.Inputs[1]).Float32(float32(s[0])).Float32(float32(s[1])).Uint32(uint32(c.N))
		},
		cpu: func(outs, ins [][]float32, s []float64) {
			t, scale, out, a, b := float32(s[0]), float32(s[1]), outs[0], ins[0], ins[1]
			for i := range out {
				out[i] = (a[i] + t*(b[i]-a[i])) * scale
			}
		},
		reference: func(s []float64) func(x []float32) (float64, float64) {
			t, scale := float32(s[0]), float32(s[1])
			return func(x []float32) (float64, float64) {
				return LerpReference(x[0], x[1], t, scale), LerpTolerance(x[0], x[1], t, scale)
			}
		},
	}
	// Empty does nothing; for launch-overhead benchmarks. It has no arrays,
	// so it cannot be pipelined.
	Empty = &Kernel{Name: "empty", Doc: "does nothing (launch overhead)"}
)

// All lists the embedded kernels.
func All() []*Kernel { return []*Kernel{Seed, Saxpy, Lerp, Empty} }

// Pipelinable lists, sorted, the names of the kernels that have arrays to
// pipeline.
func Pipelinable() []string {
	var names []string
	for _, k := range All() {
		if k.Inputs+k.Outputs > 0 {
			names = append(names, k.Name)
		}
	}
	sort.Strings(names)
	return names
}

// ByName finds an embedded kernel. Its error lists the names that exist.
func ByName(name string) (*Kernel, error) {
	var names []string
	for _, k := range All() {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("ptx: unknown kernel %q (have %s)", name, strings.Join(names, ", "))
}

// PTX returns the kernel's embedded PTX text.
func (k *Kernel) PTX() []byte {
	b, err := files.ReadFile(k.Name + ".ptx")
	if err != nil {
		return nil
	}
	return b
}

// Source returns the kernel's CUDA C source, as embedded.
func (k *Kernel) Source() []byte {
	b, err := files.ReadFile(k.Name + ".cu")
	if err != nil {
		return nil
	}
	return b
}

// Load loads the kernel's PTX onto ctx. The caller closes the Program;
// [Modules] does that for kernels loaded per context.
func (k *Kernel) Load(ctx *driver.Context) (*ptx.Program, error) {
	src := k.PTX()
	if src == nil {
		return nil, fmt.Errorf("ptx: kernel %q has no embedded PTX", k.Name)
	}
	return ptx.Load(ctx, k.Name+".ptx", src, k.Name, driver.ModuleOptions{})
}

// Defaults returns the scalars' default values, in order.
func (k *Kernel) Defaults() []float64 {
	out := make([]float64, len(k.Scalars))
	for i, s := range k.Scalars {
		out[i] = s.Default
	}
	return out
}

// checkScalars returns the scalars to use: the defaults when none are
// given, else exactly one value per Scalar, integers where Int says so.
func (k *Kernel) checkScalars(s []float64) ([]float64, error) {
	if len(s) == 0 {
		return k.Defaults(), nil
	}
	if len(s) != len(k.Scalars) {
		return nil, fmt.Errorf("ptx: kernel %s takes %d scalar(s) (%s), got %d", k.Name, len(k.Scalars), k.scalarNames(), len(s))
	}
	for i, sc := range k.Scalars {
		v := s[i]
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return nil, fmt.Errorf("ptx: kernel %s: %s = %v is not a finite number", k.Name, sc.Name, v)
		case sc.Int && (v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32):
			return nil, fmt.Errorf("ptx: kernel %s: %s = %v is not a 32-bit integer", k.Name, sc.Name, v)
		case !sc.Int && math.Abs(v) > math.MaxFloat32:
			return nil, fmt.Errorf("ptx: kernel %s: %s = %v does not fit a float32", k.Name, sc.Name, v)
		}
	}
	return append([]float64(nil), s...), nil
}

func (k *Kernel) scalarNames() string {
	if len(k.Scalars) == 0 {
		return "none"
	}
	names := make([]string, len(k.Scalars))
	for i, s := range k.Scalars {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Pipeline returns the kernel as the engine runs it, with the given
// scalars (the defaults when none are given). mods resolves the GPU
// function on each context that the pipeline launches on; it may be nil
// for a kernel that only runs on the simulator.
func (k *Kernel) Pipeline(mods *Modules, scalars ...float64) (*pipeline.Kernel, error) {
	if k.Inputs+k.Outputs == 0 || k.args == nil {
		return nil, fmt.Errorf("ptx: kernel %s has no arrays to pipeline", k.Name)
	}
	s, err := k.checkScalars(scalars)
	if err != nil {
		return nil, err
	}
	pk := &pipeline.Kernel{
		Name: k.Name,
		Args: func(a *driver.Args, c pipeline.Chunk) { k.args(a, c, s) },
		CPU: func(c pipeline.HostChunk) {
			k.cpu(floats(c.Outputs), floats(c.Inputs), s)
		},
	}
	if mods != nil {
		pk.Function = func(ctx *driver.Context) (*driver.Function, error) { return mods.Function(ctx, k) }
	}
	return pk, nil
}

// CPU computes the kernel on the host in float32, as the simulator does:
// outs from ins, with the given scalars (the defaults when none are given).
func (k *Kernel) CPU(outs, ins [][]float32, scalars ...float64) error {
	s, err := k.checkScalars(scalars)
	if err != nil {
		return err
	}
	if err := k.checkShape(outs, ins); err != nil {
		return err
	}
	if k.cpu != nil {
		k.cpu(outs, ins, s)
	}
	return nil
}

func (k *Kernel) checkShape(outs, ins [][]float32) error {
	if len(ins) != k.Inputs || len(outs) != k.Outputs {
		return fmt.Errorf("ptx: kernel %s takes %d input(s) and %d output(s), got %d and %d", k.Name, k.Inputs, k.Outputs, len(ins), len(outs))
	}
	if len(outs) == 0 {
		return nil
	}
	for _, arrs := range [][][]float32{ins, outs} {
		for _, a := range arrs {
			if len(a) != len(outs[0]) {
				return fmt.Errorf("ptx: kernel %s: arrays of %d and %d elements", k.Name, len(a), len(outs[0]))
			}
		}
	}
	return nil
}

// Verify checks every element of out against the kernel's float64
// reference computed from ins, within the kernel's tolerance, in parallel,
// with the given scalars (the defaults when none are given). It returns a
// *VerifyError listing the first elements that differ.
func (k *Kernel) Verify(ins [][]float32, out []float32, scalars ...float64) error {
	if k.reference == nil {
		return fmt.Errorf("ptx: kernel %s has no CPU reference", k.Name)
	}
	s, err := k.checkScalars(scalars)
	if err != nil {
		return err
	}
	if err := k.checkShape([][]float32{out}, ins); err != nil {
		return err
	}
	return verify(k.Name, out, func() func(i int) (float64, float64) {
		ref := k.reference(s)
		x := make([]float32, len(ins))
		return func(i int) (float64, float64) {
			for j, in := range ins {
				x[j] = in[i]
			}
			return ref(x)
		}
	})
}

// Elementwise is a user's kernel with the parameter list (out, in..., n)
// over float32 arrays, resolved on each context by fn. It has no CPU
// stand-in, so it runs on a GPU only.
func Elementwise(name string, fn func(*driver.Context) (*driver.Function, error)) *pipeline.Kernel {
	return &pipeline.Kernel{
		Name:     name,
		Function: fn,
		Args: func(a *driver.Args, c pipeline.Chunk) {
			for _, p := range c.Outputs {
				a.Pointer(p)
			}
			for _, p := range c.Inputs {
				a.Pointer(p)
			}
			a.Uint32(uint32(c.N))
		},
	}
}

func floats(bs [][]byte) [][]float32 {
	out := make([][]float32, len(bs))
	for i, b := range bs {
		out[i] = driver.View[float32](b)
	}
	return out
}
