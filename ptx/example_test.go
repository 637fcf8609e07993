package ptx_test

import (
	"fmt"

	"github.com/purecuda/overlap/ptx"
)

// A kernel as nvcc -lineinfo writes it, cut down: its .file and .loc
// directives are read and skipped.
const scalePTX = `
.version 8.0
.target sm_80
.address_size 64

.visible .entry scale(
	.param .u64 .ptr .global .align 16 scale_out,
	.param .u64 scale_in,
	.param .f32 scale_k,
	.param .u32 scale_n
)
{
	.loc	1 3 0
	ret;
}
	.file	1 "scale.cu"
`

// Parse reads a PTX module without a GPU: its header, its entries and
// each parameter's place in the launch's parameter buffer.
func ExampleParse() {
	f, err := ptx.Parse([]byte(scalePTX))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("PTX ISA", f.Version, "for", f.Target())
	e, _ := f.Entry("scale")
	for i, l := range ptx.Layout(e.Params) {
		p := e.Params[i]
		fmt.Printf("%-9s %s at offset %2d, %d bytes\n", p.Name, p.Type, l.Offset, l.Size)
	}
	// Output:
	// PTX ISA 8.0 for sm_80
	// scale_out .u64 at offset  0, 8 bytes
	// scale_in  .u64 at offset  8, 8 bytes
	// scale_k   .f32 at offset 16, 4 bytes
	// scale_n   .u32 at offset 20, 4 bytes
}

// A parse error names the line.
func ExampleParse_error() {
	_, err := ptx.Parse([]byte(".version 7.0\n.target sm_75\n.entry k(.param .u32 n)\n{\n\tret;\n"))
	fmt.Println(err)
	// Output:
	// ptx: line 4: body opened here is never closed (truncated PTX?)
}
