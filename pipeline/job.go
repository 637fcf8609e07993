package pipeline

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/purecuda/overlap/driver"
)

// HostMode says how a job's host memory reaches the device.
type HostMode int

const (
	// HostAuto picks per run: pinned buffers are used in place; a Go slice
	// already registered (or seen in an earlier run of this pipeline, so
	// likely to be reused) is registered and cached; any other Go slice is
	// staged. Registration costs about 25 ms per 512 MiB once and is then
	// free; staging costs a parallel host copy every run but nothing up
	// front.
	HostAuto HostMode = iota
	// HostPinned requires every buffer to be pinned memory and copies
	// straight from and to it.
	HostPinned
	// HostStaged copies Go slices through pinned slots, with parallel
	// goroutines, as pipeline stages of their own.
	HostStaged
	// HostRegistered page-locks Go slices in place (cuMemHostRegister) and
	// caches the registration for later runs.
	HostRegistered
)

var hostModeNames = [...]string{"auto", "pinned", "staged", "registered"}

func (m HostMode) String() string {
	if m < 0 || int(m) >= len(hostModeNames) {
		return fmt.Sprintf("HostMode(%d)", int(m))
	}
	return hostModeNames[m]
}

// ParseHostMode reads "auto", "pinned", "staged" or "registered".
func ParseHostMode(s string) (HostMode, error) {
	for i, n := range hostModeNames {
		if s == n {
			return HostMode(i), nil
		}
	}
	return 0, fmt.Errorf("pipeline: unknown host mode %q (want %s)", s, strings.Join(hostModeNames[:], ", "))
}

// Buffer is one input or output of a job: plain Go memory (Data) or pinned
// memory (Pinned), exactly one of them.
type Buffer struct {
	Data   []byte
	Pinned HostMemory
	// elem is the size of the slice's elements when Slice made the Buffer,
	// or of its rows when Rows did (0 when unknown), so that a []float64
	// is refused where the Config says float32; -1 for rows that Run
	// refuses, for the reason in bad.
	elem int
	// width is the values per row when Rows made the Buffer, else 0.
	width int
	bad   string
}

// Slice wraps a Go slice as a Buffer. Run refuses it when its element size
// differs from the Config's.
func Slice[T driver.Element](s []T) Buffer {
	var z T
	return Buffer{Data: driver.Bytes(s), elem: int(unsafe.Sizeof(z))}
}

// Rows wraps a Go slice of rows of width values each as a Buffer whose
// elements are rows: a job's N then counts rows, and its Config gives the
// row's bytes (width·size of T) as the element size. Run refuses it when
// the row size differs from the Config's, or when len(s) is not a whole
// number of rows.
func Rows[T driver.Element](s []T, width int) Buffer {
	var z T
	b := Buffer{Data: driver.Bytes(s), elem: int(unsafe.Sizeof(z)) * width, width: width}
	switch {
	case width <= 0:
		b.elem, b.bad = -1, fmt.Sprintf("rows of width %d: want at least 1 value a row", width)
	case len(s)%width != 0:
		b.elem, b.bad = -1, fmt.Sprintf("%d %T values are not a whole number of rows of %d", len(s), z, width)
	}
	return b
}

// Pinned wraps pinned memory (a *driver.HostBuffer, say) as a Buffer.
func Pinned(h HostMemory) Buffer { return Buffer{Pinned: h} }

func (b Buffer) bytes() []byte {
	if b.Pinned != nil {
		return b.Pinned.Bytes()
	}
	return b.Data
}

// Job is one run's work: N elements of each input, through Kernel, into
// each output. Inputs and Outputs must match the pipeline's Config.
type Job struct {
	N               int
	Inputs, Outputs []Buffer
	Kernel          *Kernel
	// Host overrides Config.Host for this run when not HostAuto.
	Host HostMode
}

// Stage names a step of a chunk's journey.
type Stage int

// The stages, in the order a chunk goes through them.
const (
	StageIn Stage = iota // host copy into a pinned slot (staged mode)
	StageH2D
	StageCompute
	StageD2H
	StageOut // host copy out of a pinned slot (staged mode)
	StageSetup
	StageDrain
	// StageCopies is the H2D and D2H copies at once, the stage that
	// bounds a group of devices whose host link cannot feed every copy
	// engine (StageTimes.Copies).
	StageCopies
	// StageStaging is the host's staging copies in both directions at
	// once (StageTimes.Staging).
	StageStaging
)

func (s Stage) String() string {
	if s < 0 || s > StageStaging {
		return fmt.Sprintf("Stage(%d)", int(s))
	}
	return [...]string{"stage-in", "H2D", "compute", "D2H", "stage-out", "setup", "drain", "H2D+D2H", "stage-in+out"}[s]
}

// StageError is a failure in one stage of one chunk.
type StageError struct {
	Chunk int // -1 when no chunk is involved
	Stage Stage
	Err   error
}

func (e *StageError) Error() string {
	if e == nil {
		return "<nil>"
	}
	// The inner error's own "pipeline: " is not repeated.
	msg := strings.TrimPrefix(fmt.Sprint(e.Err), "pipeline: ")
	if e.Chunk < 0 {
		return fmt.Sprintf("pipeline: %s: %s", e.Stage, msg)
	}
	return fmt.Sprintf("pipeline: chunk %d, %s: %s", e.Chunk, e.Stage, msg)
}

func (e *StageError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Span is when one stage of one chunk ran, against the run's origin.
type Span struct {
	Chunk      int
	Stage      Stage
	Lane       string // "H2D", "compute 0", "D2H", "stage-in", "stage-out"
	Start, End time.Duration
}

// Report describes a finished run.
type Report struct {
	Backend    string
	Mode       HostMode
	N          int
	ChunkElems int
	Chunks     int
	// Schedule is the schedule the run took (Config.Schedule): never
	// ScheduleAuto in the report of a run that issued anything.
	Schedule Schedule
	// Elapsed is the run's time, less the readying of its kernel: the
	// upload of its parameters (Upload) and the allocation of its scratch
	// buffers (Kernel.Scratch), which a run does once per pipeline.
	Elapsed time.Duration
	// Register is the time this run spent registering memory.
	Register time.Duration
	// Spans holds every stage of every chunk when Config.Timing is on; a
	// group's lanes are named for their device ("device 1 H2D").
	Spans []Span
	// Origin is where the spans' origin lies on the run's clock, from its
	// start: a span's Start+Origin is on the clock of Elapsed (to within
	// the origin event's synchronisation, a µs or two on a GPU). It is 0
	// without Config.Timing, and for a group of several devices, whose
	// spans are on the run's clock already.
	Origin time.Duration
	// Devices says what each device of a group did (Group.Run).
	Devices []DeviceReport
	// Upload is the time this run spent uploading its kernel's
	// parameters (Kernel.Params), once per pipeline and kernel; it is not
	// part of Elapsed. In a group the devices upload at once, and Upload
	// is the longest.
	Upload time.Duration
	// Notes says what the reader of the times should know: on the
	// simulator, the kernels and steps that its profile has no cost for
	// and what they were charged instead.
	Notes []string
}

// Float32Config is the Config for float32 kernels with the given numbers of
// inputs and outputs.
func Float32Config(inputs, outputs int) Config {
	c := Config{}
	for i := 0; i < inputs; i++ {
		c.Inputs = append(c.Inputs, 4)
	}
	for i := 0; i < outputs; i++ {
		c.Outputs = append(c.Outputs, 4)
	}
	return c
}

// checkedMul multiplies non-negative ints and reports overflow.
func checkedMul(a, b int) (int, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a != 0 && b > math.MaxInt/a {
		return 0, false
	}
	return a * b, true
}

// MaxTimedChunks is the most chunks a run with Config.Timing may have:
// each chunk's stages take six timing events.
const MaxTimedChunks = maxTimedChunks
