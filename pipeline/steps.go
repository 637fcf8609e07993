package pipeline

import (
	"fmt"

	"github.com/purecuda/overlap/driver"
)

// A kernel of several launches, with resident parameters and scratch
// buffers, is how a model layer stack runs through the pipeline: each
// chunk of rows goes through every layer's launch in turn on the chunk's
// compute stream, reading the weights that each device holds once and
// writing its intermediate activations to the slot's scratch buffers.
//
//	k := &pipeline.Kernel{
//		Name:    "mlp",
//		Params:  []pipeline.Param{{Name: "0.weight", Data: w0}, {Name: "0.bias", Data: b0}, ...},
//		Scratch: []int{4 * hidden}, // bytes per row
//		Steps:   []pipeline.Step{layer0, layer1},
//	}

// Param is one resident parameter buffer of a [Kernel]: read-only device
// memory that each device of a pipeline or group uploads once, before the
// first chunk of the first run that uses the kernel, and frees when the
// pipeline closes. Every chunk on that device shares it.
type Param struct {
	// Name labels the buffer in errors and hazard reports ("0.weight").
	Name string
	// Data is what the device holds. The pipeline copies it at upload;
	// later changes to Data are not seen, so a kernel with other
	// weights is another *Kernel.
	Data []byte
}

// RefKind says which of a chunk's buffers a [Ref] names.
type RefKind int

// The kinds of buffer a step may read or write.
const (
	RefInput   RefKind = iota // Chunk.Inputs[Index]
	RefOutput                 // Chunk.Outputs[Index]
	RefParam                  // Chunk.Params[Index]
	RefScratch                // Chunk.Scratch[Index]
)

func (k RefKind) String() string {
	switch k {
	case RefInput:
		return "input"
	case RefOutput:
		return "output"
	case RefParam:
		return "param"
	case RefScratch:
		return "scratch"
	}
	return fmt.Sprintf("RefKind(%d)", int(k))
}

// Ref names one buffer of a chunk.
type Ref struct {
	Kind  RefKind
	Index int
}

// Step is one launch of a [Kernel] with Steps. Steps run in order on the
// chunk's compute stream, so each sees the writes of the ones before it.
type Step struct {
	// Name labels the launch in reports, errors and traces; the
	// simulator costs the step from its device profile's entry of this
	// name (KernelCost), and says so in the report when there is none.
	Name string
	// Function resolves the step's GPU kernel on a context, as
	// Kernel.Function does; it must be safe for concurrent use.
	Function func(ctx *driver.Context) (*driver.Function, error)
	// Args appends the launch's arguments for chunk c to a.
	Args func(a *driver.Args, c Chunk)
	// Launch gives the launch's shape for chunk c. Nil means one
	// dimension: BlockSize threads a block (256 when 0), enough blocks
	// to cover c.N.
	Launch    func(c Chunk) driver.LaunchConfig
	BlockSize int
	// Reads and Writes name every buffer the launch reads and writes.
	// The simulator checks that each device address among the launch's
	// arguments is one of them, and its hazard detector orders the
	// step's accesses by them.
	Reads, Writes []Ref
	// CPU computes the step on the host, the simulator's stand-in; the
	// chunk's buffers are in c (HostChunk.Params, HostChunk.Scratch).
	CPU func(c HostChunk)
	// FlopsPerElem is the step's arithmetic per element (row) of the
	// chunk. The simulator charges it at its profile's rate for Name
	// (KernelCost.NsPerFlop), in addition to the per-element cost.
	FlopsPerElem float64
}

// Progress is how far a streaming run has got, for [StreamJob].Progress:
// what has been read from the inputs, and what has been written to the
// outputs, both in bytes and elements (rows) counted from the run's start.
type Progress struct {
	BytesRead, BytesWritten int64
	ElemsRead, ElemsWritten int64
}
