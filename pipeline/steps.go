package pipeline

import (
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/units"
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
	// step's accesses by them. A step may not write a parameter: Run
	// refuses it, as it refuses a Ref to a buffer that does not exist.
	Reads, Writes []Ref
	// CPU computes the step on the host, the simulator's stand-in; the
	// chunk's buffers are in c (HostChunk.Params, HostChunk.Scratch),
	// those that Reads and Writes do not name nil.
	CPU func(c HostChunk)
	// FlopsPerElem is the step's arithmetic per element (row) of the
	// chunk. The simulator charges it at its profile's rate for Name
	// (KernelCost.NsPerFlop), in addition to the per-element cost; for a
	// name the profile lacks, at the fallback rate that the profile's Kernels
	// describes, and Report.Notes says so.
	FlopsPerElem float64
}

// Progress is how far a streaming run has got, for [StreamJob].Progress:
// what has been read from the inputs, and what has been written to the
// outputs, both in bytes and elements (rows) counted from the run's start.
type Progress struct {
	BytesRead, BytesWritten int64
	ElemsRead, ElemsWritten int64
}

// stepLabel names step i of k in errors: "kernel mlp, step 1 (layer1)".
func stepLabel(k *Kernel, i int) string {
	if n := k.Steps[i].Name; n != "" {
		return fmt.Sprintf("kernel %s, step %d (%s)", k.Name, i, n)
	}
	return fmt.Sprintf("kernel %s, step %d", k.Name, i)
}

// checkKernel checks k's Steps, Params and Scratch against a pipeline of
// inputs inputs and outputs outputs in chunks of chunk elements, before
// anything is uploaded or issued: every Ref names a buffer that exists, no
// step writes a parameter, and every parameter and scratch buffer has
// bytes.
func checkKernel(k *Kernel, inputs, outputs, chunk int) error {
	for j, per := range k.Scratch {
		if per <= 0 {
			return fmt.Errorf("pipeline: kernel %s: scratch buffer %d of %d bytes per element: want at least 1", k.Name, j, per)
		}
		if _, ok := checkedMul(per, chunk); !ok {
			return fmt.Errorf("pipeline: kernel %s: scratch buffer %d of %d bytes per element is too large for chunks of %d elements", k.Name, j, per, chunk)
		}
	}
	for j, pr := range k.Params {
		if len(pr.Data) == 0 {
			return fmt.Errorf("pipeline: kernel %s: parameter %d (%s) is empty", k.Name, j, pr.Name)
		}
	}
	count := [...]int{RefInput: inputs, RefOutput: outputs, RefParam: len(k.Params), RefScratch: len(k.Scratch)}
	for i, st := range k.Steps {
		for _, list := range [2][]Ref{st.Reads, st.Writes} {
			for _, r := range list {
				if r.Kind < RefInput || r.Kind > RefScratch {
					return fmt.Errorf("pipeline: %s: unknown buffer kind %v", stepLabel(k, i), r.Kind)
				}
				if r.Index < 0 || r.Index >= count[r.Kind] {
					return fmt.Errorf("pipeline: %s: names %s %d, but there are %d", stepLabel(k, i), r.Kind, r.Index, count[r.Kind])
				}
			}
		}
		for _, r := range st.Writes {
			if r.Kind == RefParam {
				return fmt.Errorf("pipeline: %s: writes param %d (%s), which is read-only", stepLabel(k, i), r.Index, k.Params[r.Index].Name)
			}
		}
	}
	return nil
}

// sizeString writes a byte count for errors: "150 GiB", "1.5 MiB", "12 B".
func sizeString(b int64) string { return units.Short(b) }

// notesOf is what b has to say about k, for Report.Notes.
func notesOf(b Backend, k *Kernel) []string {
	if n, ok := b.(KernelNoter); ok {
		return n.KernelNotes(k)
	}
	return nil
}
