package ptx

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed kernels/*.ptx
var kernelFiles embed.FS

// Kernel is one of overlap's embedded kernels.
type Kernel struct {
	// Name is the kernel's name and its PTX entry.
	Name string
	// Doc says what it computes.
	Doc string
	// Inputs and Outputs count its float32 array parameters, which come
	// first in its parameter list, outputs before inputs.
	Inputs, Outputs int
}

// The embedded kernels.
var (
	// Seed is the lecture's kernel: out = in*0.5 + in*in*0.1, then
	// out += sinf(out*0.01) repeated; parameters (out, in, n, iters).
	Seed = Kernel{Name: "seed", Doc: "out = in*0.5 + in*in*0.1, then out += sin(out*0.01) iters times", Inputs: 1, Outputs: 1}
	// Saxpy is memory-bound: out = a*x + y; parameters (out, x, y, a, n).
	Saxpy = Kernel{Name: "saxpy", Doc: "out = a*x + y (memory-bound)", Inputs: 2, Outputs: 1}
	// Lerp has two inputs and two scalars: out = (a + t*(b-a)) * scale;
	// parameters (out, a, b, t, scale, n).
	Lerp = Kernel{Name: "lerp", Doc: "out = (a + t*(b-a)) * scale", Inputs: 2, Outputs: 1}
	// Empty does nothing; for launch-overhead benchmarks.
	Empty = Kernel{Name: "empty", Doc: "does nothing (launch overhead)", Inputs: 0, Outputs: 0}
)

// Kernels lists the embedded kernels.
func Kernels() []Kernel { return []Kernel{Seed, Saxpy, Lerp, Empty} }

// KernelByName finds an embedded kernel. Its error lists the names that exist.
func KernelByName(name string) (Kernel, error) {
	var names []string
	for _, k := range Kernels() {
		if k.Name == name {
			return k, nil
		}
		names = append(names, k.Name)
	}
	sort.Strings(names)
	return Kernel{}, fmt.Errorf("ptx: unknown kernel %q (have %s)", name, strings.Join(names, ", "))
}

// PTX returns the kernel's embedded PTX text.
func (k Kernel) PTX() []byte {
	b, err := kernelFiles.ReadFile("kernels/" + k.Name + ".ptx")
	if err != nil {
		return nil
	}
	return b
}

//go:embed kernels/*.cu
var sourceFiles embed.FS

// Source returns the CUDA C source of the kernel, as embedded.
func (k Kernel) Source() []byte {
	b, err := sourceFiles.ReadFile("kernels/" + k.Name + ".cu")
	if err != nil {
		return nil
	}
	return b
}
