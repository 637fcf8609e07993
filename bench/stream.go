package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/parallel"
	"github.com/purecuda/overlap/internal/procfs"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The streaming bound's measurement: files (or stdin) through a kernel
// into a file (or stdout), chunk by chunk, through pinned slots whose
// size does not depend on the stream's; each stage's rate while
// streaming, and with Bound the stream's bound measured in the same run.

// StreamResult is what [Stream] measured, as overlap run --in prints it
// and as JSON.
type StreamResult struct {
	Simulated bool     `json:"simulated"`
	Backend   string   `json:"backend"`
	Kernel    string   `json:"kernel"`
	Iters     int      `json:"iters,omitempty"`
	Inputs    []string `json:"inputs"`
	Output    string   `json:"output"`
	// Direct says the inputs were read with O_DIRECT, DirectOutput the
	// output written with it, and Preallocated is the bytes allocated for
	// the output up front (0: none, or the file system cannot).
	Direct         bool          `json:"direct"`
	DirectOutput   bool          `json:"direct_output"`
	Preallocated   int64         `json:"preallocated_bytes"`
	Elems          int64         `json:"elems"`
	InBytes        int64         `json:"in_bytes"`
	OutBytes       int64         `json:"out_bytes"`
	ChunkElems     int           `json:"chunk_elems"`
	Slots          int           `json:"slots"`
	ComputeStreams int           `json:"compute_streams"`
	Readers        int           `json:"readers"`
	Writers        int           `json:"writers"`
	Ms             float64       `json:"ms"`
	Stages         []StreamStage `json:"stages"`
	BoundStage     string        `json:"bounded_by"`
	PeakRSS        int64         `json:"peak_rss_bytes,omitempty"`
	// PinnedBytes is the page-locked host memory of the run's slots (a
	// slot per input and output of each of Slots chunks), which the driver
	// maps into the process; it is fixed by the chunk, the slots and the
	// number of inputs and outputs, whatever the length of the streams.
	PinnedBytes int64        `json:"pinned_slot_bytes"`
	Bound       *StreamBound `json:"bound,omitempty"`
	Verified    string       `json:"verified"`
}

// StreamStage is one stage's rate and its time over the whole stream.
type StreamStage struct {
	Stage string  `json:"stage"`
	GBps  float64 `json:"gb_per_s"`
	Ms    float64 `json:"ms"`
	How   string  `json:"how"`
}

// StreamBound is the bound measured in the same run.
type StreamBound struct {
	ReadMs     float64 `json:"read_ms"`
	PipelineMs float64 `json:"in_memory_pipeline_ms"`
	WriteMs    float64 `json:"write_ms"`
	// WriteMeasured is false when the output is not a regular file (a
	// device or a pipe), which nothing can be written alone to.
	WriteMeasured bool    `json:"write_measured"`
	BoundMs       float64 `json:"bound_ms"`
	Slowest       string  `json:"slowest"`
	Efficiency    float64 `json:"efficiency"`
}

// StreamOptions say what [Stream] runs. Inputs and Output are required;
// the other zero fields take defaults: the seed kernel (at 0
// iterations), the pipeline's chunk, slots and compute streams, a reader
// per CPU, one writer, 1 MiB pieces.
type StreamOptions struct {
	// Inputs are the input files, one per kernel input, and Output the
	// output file; "-" reads Stdin or writes Stdout.
	Inputs []string
	Output string
	Stdin  io.Reader
	Stdout io.Writer
	// Kernel is the embedded kernel by name: seed (the default) or axpb
	// with one input, saxpy or lerp with two; it runs with the table's
	// default scalars (saxpy's a = 2.5; lerp's t = 0.25, scale = 1.5;
	// axpb's a = 2, b = -1) and the seed's Iters. Modules holds it loaded
	// on the GPU; nil on the simulator.
	Kernel  string
	Iters   int
	Modules *kernels.Modules
	// ChunkElems, Slots and ComputeStreams shape the pipeline (0: its
	// defaults).
	ChunkElems, Slots, ComputeStreams int
	// Readers and Writers are the goroutines reading the input files with
	// pread and writing a file output with pwrite (0: one per CPU, and 1:
	// buffered writes to one file serialise in the kernel); PieceBytes is
	// the bytes of each (0: 1 MiB), rounded up to whole pages and at most
	// a chunk.
	Readers, Writers, PieceBytes int
	// Direct opens the input files with O_DIRECT (pipeline.OpenDirect).
	Direct bool
	// DirectOutput creates the output file with O_DIRECT
	// (pipeline.CreateDirect): the writes go from the pinned slots to the
	// disk, past the page cache; the chunk's bytes must be whole pages.
	// Preallocate allocates the output's final size (the input's) before
	// the first write (pipeline.StreamJob.Preallocate: fallocate, best
	// effort). Both need a file output, and Preallocate file inputs; the
	// bound's write alone is done the same way.
	DirectOutput, Preallocate bool
	// Verify reads the inputs and the output back from their files and
	// checks every element against the CPU reference.
	Verify bool
	// Bound measures the bound in the same run: reading the inputs and
	// writing as much output alone (to a scratch file beside a regular
	// output; each twice, the faster kept), and the in-memory pinned
	// pipeline over as many elements.
	Bound bool
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// OpenError is a streaming run's failure to open or create one of its
// files: an input, or (Output) the output.
type OpenError struct {
	Output bool
	Err    error
}

func (e *OpenError) Error() string {
	if e.Output {
		return "creating the output: " + e.Err.Error()
	}
	return "opening an input: " + e.Err.Error()
}

func (e *OpenError) Unwrap() error { return e.Err }

// PartialOutput is a streaming run's failure with what its output file
// holds: an exact prefix of the correct output, Bytes long, or all of it
// (Complete) when what failed came after the run.
type PartialOutput struct {
	Err      error
	Name     string
	Bytes    int64
	Complete bool
}

func (e *PartialOutput) Error() string {
	if e.Complete {
		return e.Err.Error() + " (after the output was complete)"
	}
	return fmt.Sprintf("%v (the output holds the first %d bytes of the correct output)", e.Err, e.Bytes)
}

func (e *PartialOutput) Unwrap() error { return e.Err }

// streamKernel is the kernel of the run, with the table's default
// scalars and the seed's iters.
func streamKernel(name string, iters int, mods *kernels.Modules) (*pipeline.Kernel, error) {
	switch name {
	case "saxpy":
		return kernels.Saxpy.Pipeline(mods, 2.5)
	case "lerp":
		return kernels.Lerp.Pipeline(mods, 0.25, 1.5)
	case "axpb":
		return kernels.Axpb.Pipeline(mods, 2, -1)
	case "", "seed":
		return kernels.Seed.Pipeline(mods, float64(iters))
	}
	return nil, fmt.Errorf("kernel %q: not one that streams (seed, axpb, saxpy, lerp)", name)
}

// Stream streams o's input files through the kernel into its output on
// b, after an untimed warm-up over 2·Slots chunks of zeros, and measures
// each stage's rate while streaming (the device's stages alone over the
// same elements with Bound, else over a probe of a few chunks, scaled),
// the peak resident memory, and with Bound the stream's bound. A failure
// once the output exists is a *PartialOutput (inside the *Error), and a
// file that cannot be opened an *OpenError.
func Stream(ctx context.Context, b pipeline.Backend, o StreamOptions) (*StreamResult, error) {
	res, err := stream(ctx, b, o)
	if err != nil {
		return nil, &Error{Op: "Stream", Err: err}
	}
	return res, nil
}

func stream(ctx context.Context, b pipeline.Backend, o StreamOptions) (*StreamResult, error) {
	switch {
	case b == nil:
		return nil, errors.New("no backend")
	case len(o.Inputs) == 0 || o.Output == "":
		return nil, errors.New("no input or no output file")
	}
	if o.Kernel == "" {
		o.Kernel = "seed"
	}
	for _, f := range o.Inputs {
		switch {
		case f == "-" && o.Stdin == nil:
			return nil, errors.New("input - (stdin) but no Stdin")
		case f == "-" && (o.Verify || o.Bound):
			return nil, errors.New("the options Verify and Bound read the inputs back from their files: an input is stdin (-)")
		}
	}
	switch {
	case o.Output == "-" && o.Stdout == nil:
		return nil, errors.New("output - (stdout) but no Stdout")
	case o.Verify && !RegularOrNew(o.Output):
		return nil, fmt.Errorf("the option Verify reads the output back from its file: %s is not a regular file", o.Output)
	case (o.DirectOutput || o.Preallocate) && !RegularOrNew(o.Output):
		return nil, fmt.Errorf("the options DirectOutput and Preallocate write a file: %s is not a regular file", o.Output)
	case o.Preallocate && o.Inputs[0] == "-":
		return nil, errors.New("the option Preallocate takes the output's size from the input file's: the input is stdin (-)")
	}
	_, isSim := b.(*sim.Sim)
	if err := CheckStream(o, isSim); err != nil {
		return nil, err
	}
	cfg := pipeline.Float32Config(len(o.Inputs), 1)
	// HostAuto has New allocate the pinned slots, so that the streaming
	// run's time does not include them.
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = o.ChunkElems, streamSlots(o.Slots, o.ComputeStreams), o.ComputeStreams, pipeline.HostAuto
	p, err := pipeline.New(b, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	pc := p.Config()
	k, err := streamKernel(o.Kernel, o.Iters, o.Modules)
	if err != nil {
		return nil, err
	}
	readers, writers := o.Readers, o.Writers
	if readers == 0 {
		readers = runtime.GOMAXPROCS(0)
	}
	if writers == 0 {
		writers = 1 // as pipeline.StreamJob's default, which says why
	}
	piece := o.PieceBytes
	if piece == 0 {
		piece = 1 << 20
	}
	piece = (piece + pipeline.DirectAlign - 1) &^ (pipeline.DirectAlign - 1)
	// A run reads and writes at most a chunk per call, through Slots
	// chunks of pinned memory per stream; the bound does the same.
	piece = min(piece, (pc.ChunkElems*4+pipeline.DirectAlign-1)&^(pipeline.DirectAlign-1))
	ringBytes := pc.Slots * pc.ChunkElems * 4
	res := &StreamResult{Backend: b.Name(), Kernel: o.Kernel, Inputs: o.Inputs, Output: o.Output, Direct: o.Direct,
		ChunkElems: pc.ChunkElems, Slots: pc.Slots, ComputeStreams: pc.ComputeStreams}
	_, res.Simulated = b.(*sim.Sim)
	if o.Kernel == "seed" {
		res.Iters = o.Iters
	}

	// The bound's host parts go first: the write's scratch file is
	// removed before the run, so its dirty pages do not slow the run.
	var bound *StreamBound
	if o.Bound {
		var err error
		bound, err = hostBound(b, o.Inputs, o.Direct, outMode{o.DirectOutput, o.Preallocate}, o.Output, func() (int64, error) {
			size, err := inputElems(o.Inputs[0])
			return size * 4, err
		}, readers, writers, piece, ringBytes, ringBytes, "inputs", o.Progress)
		if err != nil {
			return nil, err
		}
	}

	// A warm-up over 2·Slots chunks of zeros, not timed: the first run of
	// a process pays for first touches (of the slots, the goroutines, the
	// first launches) that the bound, measured warm, does not. It runs
	// before the output is created, so that a failure here (or a signal)
	// leaves no file behind.
	say(o.Progress, "warming up…")
	warm := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, Outputs: []io.Writer{io.Discard}}
	for range o.Inputs {
		warm.Inputs = append(warm.Inputs, &zeros{size: int64(2 * pc.Slots * pc.ChunkElems * 4)})
	}
	if _, err := p.RunStream(ctx, warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	// The streaming run.
	job := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, InputNames: o.Inputs, OutputNames: []string{o.Output}}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, name := range o.Inputs {
		if name == "-" {
			job.Inputs = append(job.Inputs, o.Stdin) // read straight into the slots
			continue
		}
		open := os.Open
		if o.Direct {
			open = pipeline.OpenDirect
		}
		f, err := open(name)
		if err != nil {
			return nil, &OpenError{Err: err}
		}
		files = append(files, f)
		job.Inputs = append(job.Inputs, f)
	}
	var outFile *os.File
	if o.Output == "-" {
		job.Outputs = []io.Writer{o.Stdout}
	} else {
		create := os.Create
		if o.DirectOutput {
			create = pipeline.CreateDirect
		}
		if outFile, err = create(o.Output); err != nil {
			return nil, &OpenError{Output: true, Err: err}
		}
		files = append(files, outFile)
		job.Outputs = []io.Writer{outFile}
		if o.Preallocate {
			elems, err := inputElems(o.Inputs[0])
			if err != nil {
				return nil, &OpenError{Err: err}
			}
			if elems > 0 {
				job.Preallocate = []int64{elems * 4}
			}
		}
	}
	say(o.Progress, "streaming…")
	rep, err := p.RunStream(ctx, job)
	if err != nil {
		if rep != nil && len(rep.OutputBytes) == 1 {
			return nil, &PartialOutput{Err: err, Name: o.Output, Bytes: rep.OutputBytes[0]}
		}
		return nil, err
	}
	if outFile != nil {
		if err := outFile.Close(); err != nil {
			return nil, fmt.Errorf("closing %s: %w", o.Output, err)
		}
	}
	// written marks a failure after the run: the output is complete.
	written := func(err error) error {
		return &PartialOutput{Err: err, Name: o.Output, Bytes: rep.OutputBytes[0], Complete: true}
	}
	res.PeakRSS, _ = procfs.PeakRSS()
	res.PinnedBytes = int64(ringBytes) * int64(len(o.Inputs)+1)
	res.Elems, res.Ms = rep.N, ms(rep.Elapsed)
	res.InBytes, res.OutBytes = rep.N*4*int64(len(o.Inputs)), rep.OutputBytes[0]
	res.Readers, res.Writers = rep.Readers, rep.Writers
	res.DirectOutput, res.Preallocated = o.DirectOutput && outFile != nil, rep.Preallocated[0]

	// The device's stages: alone over the same N when measuring the
	// bound, else over a probe of a few chunks, scaled to N.
	var st pipeline.StageTimes
	scale := 1.0
	if rep.N > 0 {
		n := rep.N
		if !o.Bound {
			n = min(rep.N, int64(2*pc.Slots*pc.ChunkElems))
			scale = float64(rep.N) / float64(n)
		}
		say(o.Progress, "timing the device's stages alone…")
		var pipe time.Duration
		st, pipe, err = inMemory(ctx, p, b, k, len(o.Inputs), int(n), o.Bound)
		if err != nil {
			return nil, written(fmt.Errorf("in-memory pipeline: %w", err))
		}
		if bound != nil {
			bound.PipelineMs = ms(pipe)
		}
	}
	secs := func(bytes int64, d time.Duration) (float64, float64) { return gbps(bytes, d), ms(d) }
	add := func(stage string, bytes int64, d time.Duration, how string) {
		g, m := secs(bytes, d)
		res.Stages = append(res.Stages, StreamStage{Stage: stage, GBps: g, Ms: m, How: how})
	}
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	probe := "alone, same N"
	if !o.Bound {
		probe = "alone over a probe, scaled to N"
	}
	readHow := fmt.Sprintf("while reading, %d pread goroutine(s)", rep.Readers)
	if rep.Readers == 0 {
		readHow = "while reading, in order"
	}
	writeHow := fmt.Sprintf("while writing, %d pwrite goroutine(s)", rep.Writers)
	if rep.Writers == 0 {
		writeHow = "while writing, in order"
	}
	if res.DirectOutput {
		writeHow += ", O_DIRECT"
	}
	switch {
	case res.Preallocated > 0:
		writeHow += ", preallocated"
	case o.Preallocate:
		writeHow += ", not preallocated (the file system cannot)"
	}
	add("read", res.InBytes, rep.Read, readHow)
	add("H2D", res.InBytes, scaled(st.H2D), probe)
	add("compute", res.InBytes, scaled(st.Compute), probe+" (rate: input bytes)")
	add("D2H", res.OutBytes, scaled(st.D2H), probe)
	add("write", res.OutBytes, rep.Write, writeHow)
	slowest := 0
	for i, s := range res.Stages {
		if s.Ms > res.Stages[slowest].Ms {
			slowest = i
		}
	}
	res.BoundStage = res.Stages[slowest].Stage
	if bound != nil {
		bound.settle(res.Ms)
		res.Bound = bound
	}

	switch {
	case !o.Verify:
		res.Verified = "not verified (Verify reads the files back and checks every element)"
	default: // stream made sure that the files can be read back
		say(o.Progress, "verifying every element from %s…", o.Output)
		if err := verifyFiles(ctx, o, rep.N); err != nil {
			return nil, written(fmt.Errorf("verifying %s: %w", o.Output, err))
		}
		res.Verified = fmt.Sprintf("every one of the %d output elements, read back from %s, matched the CPU reference", rep.N, o.Output)
	}
	return res, nil
}

// hostBound times a bound's host parts: reading the inputs alone into a
// pinned ring of ringIn bytes a stream, with the run's readers, pieces
// and open mode, and, beside a regular (or new) output, writing
// outBytes() bytes alone from a ring of ringOut bytes. Each is timed
// twice and the faster kept: on the H200 host a first pass of reading
// from disk or writing a new file through the page cache varied by up to
// 3× from the next. inputs names the inputs in the progress lines and
// errors ("the inputs", "the input").
func hostBound(b pipeline.Backend, ins []string, direct bool, mode outMode, out string, outBytes func() (int64, error), readers, writers, piece, ringIn, ringOut int,
	inputs string, progress func(string)) (*StreamBound, error) {
	bound := &StreamBound{}
	say(progress, "bound: reading the %s alone (twice)…", inputs)
	d, err := bestOfTwo(func() (time.Duration, error) { return readAlone(b, ins, direct, readers, piece, ringIn) })
	if err != nil {
		return nil, fmt.Errorf("bound: reading the %s alone: %w", inputs, err)
	}
	bound.ReadMs = ms(d)
	if !RegularOrNew(out) {
		return bound, nil
	}
	size, err := outBytes()
	if err != nil {
		return nil, err
	}
	say(progress, "bound: writing the output alone (twice)…")
	d, err = bestOfTwo(func() (time.Duration, error) { return writeAlone(b, out, mode, size, writers, piece, ringOut) })
	if err != nil {
		return nil, fmt.Errorf("bound: writing alone: %w", err)
	}
	bound.WriteMs, bound.WriteMeasured = ms(d), true
	return bound, nil
}

// settle makes the bound the slowest of its parts, and its efficiency
// the bound over the run's runMs.
func (b *StreamBound) settle(runMs float64) {
	b.BoundMs, b.Slowest = b.ReadMs, "read"
	if b.PipelineMs > b.BoundMs {
		b.BoundMs, b.Slowest = b.PipelineMs, "in-memory pipeline"
	}
	if b.WriteMs > b.BoundMs {
		b.BoundMs, b.Slowest = b.WriteMs, "write"
	}
	if runMs > 0 {
		b.Efficiency = b.BoundMs / runMs
	}
}

// zeros is a positional input of size zero bytes that holds no memory.
type zeros struct{ size, off int64 }

func (z *zeros) ReadAt(b []byte, off int64) (int, error) {
	if off >= z.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(b)), z.size-off))
	clear(b[:n])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (z *zeros) Read(b []byte) (int, error) {
	n, err := z.ReadAt(b, z.off)
	z.off += int64(n)
	return n, err
}

func (z *zeros) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		z.off = off
	case io.SeekCurrent:
		z.off += off
	case io.SeekEnd:
		z.off = z.size + off
	}
	return z.off, nil
}

// RegularOrNew reports whether name is a regular file or does not exist
// yet: not stdout ("-"), not a device such as /dev/null. A streaming
// run's bound writes alone beside such an output, and Verify reads it
// back.
func RegularOrNew(name string) bool {
	if name == "-" {
		return false
	}
	st, err := os.Stat(name)
	return err != nil || st.Mode().IsRegular()
}

// inputElems is the elements in an input file.
func inputElems(name string) (int64, error) {
	if name == "-" {
		return 0, errors.New("the bound needs file inputs, not stdin")
	}
	st, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return st.Size() / 4, nil
}

// pinnedRing is pinned memory as large as a streaming run's slots for one
// stream (Slots × chunk bytes), cut into pieces that a bound's reads or
// writes cycle through: measured alone, the host moves bytes through as
// much memory as the run does, not through one piece that stays in the
// CPU's cache. Each goroutine cycles through a part of its own.
type pinnedRing struct {
	mem    pipeline.PinnedMem
	piece  int
	pieces int // per goroutine
}

func newPinnedRing(b pipeline.Backend, ringBytes, piece, goroutines int) (*pinnedRing, error) {
	pieces := max(1, ringBytes/piece/goroutines)
	m, err := b.AllocPinned(goroutines * pieces * piece)
	if err != nil {
		return nil, err
	}
	return &pinnedRing{mem: m, piece: piece, pieces: pieces}, nil
}

// at is goroutine w's memory for its k-th piece.
func (r *pinnedRing) at(w, k int) []byte {
	o := (w*r.pieces + k%r.pieces) * r.piece
	return r.mem.Bytes()[o : o+r.piece]
}

// access lets goroutine w's k-th piece take n bytes from a file (into,
// do reading into the slice) or give them to one (do writing from it).
// On a backend that costs host memory access itself (the simulator, a
// pipeline.HostAccessor) it goes through the backend, so that it takes the
// virtual time that the streaming run's reads and writes take; elsewhere
// do gets the ring's memory.
func (r *pinnedRing) access(b pipeline.Backend, w, k, n int, into bool, what string, do func([]byte) (int, error)) (int, error) {
	if ha, ok := b.(pipeline.HostAccessor); ok {
		return ha.HostAccess(r.mem, (w*r.pieces+k%r.pieces)*r.piece, n, into, what, do)
	}
	return do(r.at(w, k)[:n])
}

// timedWorkers runs work(w) for w in [0, n) on goroutines of their own,
// started together (pipeline.GoTogether), and returns how long they took
// on b's clock. On the simulator the time is virtual, as the streaming
// run's is: timed on the wall clock, the bound's reads and writes made
// efficiencies of 2000% beside a simulated run.
func timedWorkers(b pipeline.Backend, n int, work func(w int)) time.Duration {
	t0 := pipeline.Now(b)
	pipeline.GoTogether(b, "bound worker", n, work)
	return pipeline.Now(b) - t0
}

// bestOfTwo runs a timed pass twice and returns the faster time.
func bestOfTwo(pass func() (time.Duration, error)) (time.Duration, error) {
	a, err := pass()
	if err != nil {
		return 0, err
	}
	b, err := pass()
	if err != nil {
		return 0, err
	}
	return min(a, b), nil
}

// readAlone reads every input file in full into a pinned ring, with the
// run's readers, pieces and open mode, and returns the time taken.
func readAlone(b pipeline.Backend, ins []string, direct bool, readers, piece, ringBytes int) (time.Duration, error) {
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	type task struct {
		f   *os.File
		off int64
	}
	var tasks []task
	for _, name := range ins {
		if name == "-" {
			return 0, errors.New("the bound needs file inputs, not stdin")
		}
		open := os.Open
		if direct {
			open = pipeline.OpenDirect
		}
		f, err := open(name)
		if err != nil {
			return 0, err
		}
		files = append(files, f)
		st, err := f.Stat()
		if err != nil {
			return 0, err
		}
		for off := int64(0); off < st.Size(); off += int64(piece) {
			tasks = append(tasks, task{f, off})
		}
	}
	ring, err := newPinnedRing(b, ringBytes*len(ins), piece, readers)
	if err != nil {
		return 0, err
	}
	defer ring.mem.Close()
	var next atomic.Int64
	errs := make([]error, readers)
	took := timedWorkers(b, readers, func(w int) {
		for k := 0; ; k++ {
			i := next.Add(1) - 1
			if i >= int64(len(tasks)) {
				return
			}
			t := tasks[i]
			if _, err := ring.access(b, w, k, piece, true, "bound read", func(p []byte) (int, error) {
				n, err := t.f.ReadAt(p, t.off)
				if err == io.EOF {
					err = nil
				}
				return n, err
			}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	return took, errors.Join(errs...)
}

// outMode is how a run writes its output file: with O_DIRECT, and
// preallocated.
type outMode struct{ direct, prealloc bool }

// writeAlone writes bytes to a scratch file beside out from a pinned ring,
// with the run's writers, pieces and output mode, removes it, and returns
// the time the writes (and the preallocation) took.
func writeAlone(b pipeline.Backend, out string, mode outMode, bytes int64, writers, piece, ringBytes int) (time.Duration, error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".overlap-bound-*")
	if err != nil {
		return 0, err
	}
	name := f.Name()
	defer func() {
		f.Close()
		os.Remove(name)
	}()
	if mode.direct {
		// The same file, opened again with O_DIRECT.
		g, err := pipeline.CreateDirect(name)
		if err != nil {
			return 0, err
		}
		f.Close()
		f = g
	}
	if runtime.GOOS != "windows" {
		// Unlinked while open, where the system allows it, so that no
		// scratch file of the output's size is left however the process
		// ends (overlap exits without its deferred calls when a signal's
		// grace runs out). Nothing reads it back.
		os.Remove(name)
	}
	ring, err := newPinnedRing(b, ringBytes, piece, writers)
	if err != nil {
		return 0, err
	}
	defer ring.mem.Close()
	var pre time.Duration
	if mode.prealloc && bytes > 0 {
		t0 := pipeline.Now(b)
		if _, err := pipeline.Preallocate(f, 0, bytes); err != nil {
			return 0, err
		}
		pre = pipeline.Now(b) - t0
	}
	pieces := (bytes + int64(piece) - 1) / int64(piece)
	var next atomic.Int64
	errs := make([]error, writers)
	took := timedWorkers(b, writers, func(w int) {
		for k := 0; ; k++ {
			i := next.Add(1) - 1
			if i >= pieces {
				return
			}
			n := min(int64(piece), bytes-i*int64(piece))
			if mode.direct {
				// A scratch file: the last piece is written in whole pages.
				n = (n + pipeline.DirectAlign - 1) &^ (pipeline.DirectAlign - 1)
			}
			if _, err := ring.access(b, w, k, int(n), false, "bound write", func(p []byte) (int, error) {
				return f.WriteAt(p, i*int64(piece))
			}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	return pre + took, errors.Join(errs...)
}

// inMemory runs the pipeline over n elements in pinned memory: each stage
// alone (StageTimes) and, when full, the whole pipeline (best of two).
func inMemory(ctx context.Context, p *pipeline.Pipeline, b pipeline.Backend, k *pipeline.Kernel, ins, n int, full bool) (pipeline.StageTimes, time.Duration, error) {
	var st pipeline.StageTimes
	var mems []pipeline.PinnedMem
	defer func() {
		for _, m := range mems {
			m.Close()
		}
	}()
	job := pipeline.Job{N: n, Kernel: k, Host: pipeline.HostPinned}
	for i := 0; i <= ins; i++ {
		m, err := b.AllocPinned(n * 4)
		if err != nil {
			return st, 0, err
		}
		mems = append(mems, m)
		if i < ins {
			kernels.FillPattern(driver.View[float32](m.Bytes())[:n], i*7919)
			job.Inputs = append(job.Inputs, pipeline.Pinned(m))
		} else {
			clear(m.Bytes())
			job.Outputs = []pipeline.Buffer{pipeline.Pinned(m)}
		}
	}
	st, err := p.StageTimes(ctx, job)
	if err != nil || !full {
		return st, 0, err
	}
	best, err := fasterRun(ctx, p.Run, job)
	if err != nil {
		return st, 0, err
	}
	return st, best, nil
}

// fasterRun runs job twice through run (a Pipeline's or a Group's Run)
// and gives the shorter elapsed time; unlike bestOfTwo, a first run that
// reports no elapsed time does not count.
func fasterRun(ctx context.Context, run func(context.Context, pipeline.Job) (*pipeline.Report, error), job pipeline.Job) (time.Duration, error) {
	var best time.Duration
	for range 2 {
		rep, err := run(ctx, job)
		if err != nil {
			return 0, err
		}
		if best == 0 || rep.Elapsed < best {
			best = rep.Elapsed
		}
	}
	return best, nil
}

// verifyBlock is the elements one verifying goroutine reads at a time.
const verifyBlock = 1 << 20

// verifyFiles reads the inputs and the output back, in parallel blocks,
// and checks every output element against the CPU reference.
func verifyFiles(ctx context.Context, o StreamOptions, n int64) error {
	out, err := os.Open(o.Output)
	if err != nil {
		return err
	}
	defer out.Close()
	if st, err := out.Stat(); err != nil {
		return err
	} else if st.Size() != n*4 {
		return fmt.Errorf("the file holds %d bytes; %d elements need %d", st.Size(), n, n*4)
	}
	var ins []*os.File
	defer func() {
		for _, f := range ins {
			f.Close()
		}
	}()
	for _, name := range o.Inputs {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		ins = append(ins, f)
	}
	check := checker(o.Kernel, o.Iters)
	blocks := (n + verifyBlock - 1) / verifyBlock
	var next atomic.Int64
	var mu sync.Mutex
	verr := &kernels.VerifyError{Kernel: o.Kernel, Total: int(n)}
	var ioErr error
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := make([][]float32, len(ins)+1)
			for i := range bufs {
				bufs[i] = make([]float32, verifyBlock)
			}
			for {
				blk := next.Add(1) - 1
				if blk >= blocks || ctx.Err() != nil {
					return
				}
				lo := blk * verifyBlock
				m := int(min(verifyBlock, n-lo))
				for i, f := range append(append([]*os.File(nil), ins...), out) {
					if _, err := f.ReadAt(driver.Bytes(bufs[i][:m]), lo*4); err != nil {
						mu.Lock()
						ioErr = errors.Join(ioErr, err)
						mu.Unlock()
						return
					}
				}
				got := bufs[len(ins)]
				bad := 0
				var first []kernels.Mismatch
				for j := 0; j < m; j++ {
					want, tol := check(bufs, j)
					if !(math.Abs(float64(got[j])-want) <= tol) {
						bad++
						if len(first) < 5 {
							first = append(first, kernels.Mismatch{Index: int(lo) + j, Got: got[j], Want: want, Tol: tol})
						}
					}
				}
				if bad > 0 {
					mu.Lock()
					verr.Count += bad
					verr.First = append(verr.First, first...)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if ioErr != nil {
		return ioErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if verr.Count > 0 {
		if len(verr.First) > 5 {
			verr.First = verr.First[:5]
		}
		return verr
	}
	return nil
}

// checker returns the reference and tolerance of element j of a block,
// whose inputs are bufs[0:len(ins)].
func checker(kernel string, iters int) func(bufs [][]float32, j int) (float64, float64) {
	switch kernel {
	case "saxpy":
		return func(b [][]float32, j int) (float64, float64) {
			return kernels.SaxpyReference(2.5, b[0][j], b[1][j]), kernels.SaxpyTolerance(2.5, b[0][j], b[1][j])
		}
	case "lerp":
		return func(b [][]float32, j int) (float64, float64) {
			return kernels.LerpReference(b[0][j], b[1][j], 0.25, 1.5), kernels.LerpTolerance(b[0][j], b[1][j], 0.25, 1.5)
		}
	case "axpb": // a*x + b, saxpy's form with b for y
		return func(b [][]float32, j int) (float64, float64) {
			return kernels.SaxpyReference(2, b[0][j], -1), kernels.SaxpyTolerance(2, b[0][j], -1)
		}
	}
	// The seed's reference costs 100 sines; overlap's standard input has
	// 65536 values, (k-32768)/32768, so a table of them serves every
	// element of a generated file, shared by every goroutine.
	table := make([]float64, 1<<16)
	parallel.For(len(table), 1024, func(lo, hi int) {
		for k := lo; k < hi; k++ {
			table[k] = kernels.SeedReference(float32(k-32768)/32768, iters)
		}
	})
	return func(b [][]float32, j int) (float64, float64) {
		x := b[0][j]
		want := 0.0
		if k := x*32768 + 32768; k >= 0 && k < 1<<16 && k == float32(int32(k)) && float32(int32(k)-32768)/32768 == x {
			want = table[int32(k)]
		} else {
			want = kernels.SeedReference(x, iters)
		}
		return want, kernels.SeedTolerance(want, iters)
	}
}

// streamSlots is the slots of a streaming pipeline: slots when given, else
// computeStreams+2 (the pipeline's default for large chunks) whatever the
// chunk's size. A stream stages every chunk through pinned slots of its
// own, where copies never coalesce, so the more slots the pipeline gives
// small chunks by default, for coalesced copies, would only hold more
// pinned memory (an 8→4 model streamed in 16K-row chunks: 18 MiB
// instead of 4.5).
func streamSlots(slots, computeStreams int) int {
	if slots != 0 {
		return slots
	}
	return cmp0(computeStreams, pipeline.DefaultComputeStreams) + 2
}
