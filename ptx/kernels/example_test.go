package kernels_test

import (
	"fmt"

	"github.com/purecuda/overlap/ptx/kernels"
)

// Each row of the table knows its shape and scalars.
func ExampleAll() {
	for _, k := range kernels.All() {
		fmt.Printf("%-5s %d in, %d out, scalars %v\n", k.Name, k.Inputs, k.Outputs, k.Defaults())
	}
	// Output:
	// seed  1 in, 1 out, scalars [100]
	// saxpy 2 in, 1 out, scalars [2.5]
	// lerp  2 in, 1 out, scalars [0.25 1.5]
	// empty 0 in, 0 out, scalars []
}

// CPU computes a kernel as the simulator does; Verify checks every element
// against the float64 reference and says which ones are off.
func ExampleKernel_Verify() {
	x, y, out := make([]float32, 1000), make([]float32, 1000), make([]float32, 1000)
	kernels.FillPattern(x, 0)
	kernels.FillPattern(y, 1)
	if err := kernels.Saxpy.CPU([][]float32{out}, [][]float32{x, y}, 3); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(kernels.Saxpy.Verify([][]float32{x, y}, out, 3))
	out[7] = 0
	fmt.Println(kernels.Saxpy.Verify([][]float32{x, y}, out, 3) != nil)
	// Output:
	// <nil>
	// true
}
