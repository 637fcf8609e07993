package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// stdin is what --in - reads; tests replace it.
var stdin io.Reader = os.Stdin

// streamOptions are the flags of overlap stream.
type streamOptions struct {
	ins, outs      []string
	kernel         string
	iters          int
	chunk          int
	slots          int
	computeStreams int
	readers        int
	writers        int
	piece          int
	direct         bool
	verify         bool
	bound          bool
	sim            bool
	device         int
	jsonOut        bool
	quiet          bool
}

// streamCmd is overlap stream (overlap run --in in earlier releases).
var streamCmd = &command{
	name:      "stream",
	usageLine: "overlap stream --in FILE[,FILE] --out FILE [flags]",
	short:     "stream raw float32 files (- for stdin/stdout) through a kernel with bounded memory",
	long:      "Streams raw little-endian float32 files (- for stdin/stdout) through a kernel with memory bounded by the pinned slots.",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o := &streamOptions{kernel: "seed", iters: 100, chunk: pipeline.DefaultChunkElems, computeStreams: pipeline.DefaultComputeStreams, piece: 1 << 20}
		check := streamFlags(fs, o)
		return func(stdout, stderr io.Writer) int {
			if err := check(stdout); err != nil {
				return reportError("stream", usageError{err}, stderr)
			}
			return runStream(o, stdout, stderr)
		}
	},
}

// streamFlags registers overlap stream's flags on fs, writing into o;
// check checks them once parsed (stdout is what --out - writes to).
func streamFlags(fs *flag.FlagSet, o *streamOptions) (check func(stdout io.Writer) error) {
	var m machine
	m.addMachineFlags(fs, flagSim|flagDevice, map[string]string{"sim": "run on the CPU simulator instead of a GPU"})
	in := fs.String("in", "", "input files, comma-separated, one per kernel input (- for stdin)")
	out := fs.String("out", "", "output file (- for stdout; the report then goes to stderr)")
	fs.StringVar(&o.kernel, "kernel", "seed", "embedded kernel: seed or axpb (1 input), saxpy or lerp (2 inputs)")
	fs.IntVar(&o.iters, "iters", 100, "seed kernel iterations")
	fs.Var(sizeFlag{v: &o.chunk}, "chunk", "elements per chunk (at least 1K)")
	fs.IntVar(&o.slots, "slots", 0, "buffer slots (default compute-streams+2)")
	fs.IntVar(&o.computeStreams, "compute-streams", pipeline.DefaultComputeStreams, "streams for kernels")
	fs.IntVar(&o.readers, "readers", 0, "goroutines reading file inputs with pread (default: one per CPU)")
	fs.IntVar(&o.writers, "writers", 0, "goroutines writing a file output with pwrite (default 1: buffered writes to one file serialise in the kernel)")
	fs.Var(sizeFlag{v: &o.piece}, "piece", "bytes per pread or pwrite")
	fs.BoolVar(&o.direct, "direct", false, "open input files with O_DIRECT (Linux; chunks must be whole 4 KiB pages)")
	fs.BoolVar(&o.verify, "verify", false, "read the inputs and the output file back and check every element against the CPU reference")
	fs.BoolVar(&o.bound, "bound", false, "measure the bound in the same run: reading the inputs and writing as much output alone (to a scratch file beside a regular output file; each twice, the faster kept), and the in-memory pinned pipeline for the same N (allocates N elements of pinned memory per input and output)")
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors")
	return func(stdout io.Writer) error {
		if err := m.check(fs, false, false); err != nil {
			return err
		}
		o.sim, o.device = m.sim, m.device
		return checkStreamOptions(fs, o, *in, *out, stdout)
	}
}

// streamKernels names the embedded kernels that a streaming run takes:
// those with inputs and one output.
func streamKernels() []string {
	var names []string
	for _, name := range kernels.Pipelinable() {
		if k, err := kernels.ByName(name); err == nil && k.Inputs > 0 && k.Outputs == 1 {
			names = append(names, name)
		}
	}
	return names
}

// checkStreamOptions checks overlap run --in's parsed flags and, before
// any file is opened for writing, its files: each input exists, is not a
// directory and holds whole elements, files are as long as each other,
// the output is none of the inputs under any name, and what --verify and
// --bound read back can be read. stdout is what --out - writes to.
func checkStreamOptions(fs *flag.FlagSet, o *streamOptions, in, out string, stdout io.Writer) error {
	if in != "" {
		o.ins = strings.Split(in, ",")
	}
	if out != "" {
		o.outs = strings.Split(out, ",")
	}
	wantIns := 0
	if slices.Contains(streamKernels(), o.kernel) {
		k, _ := kernels.ByName(o.kernel)
		wantIns = k.Inputs
	}
	dashes := 0
	for _, f := range o.ins {
		if f == "-" {
			dashes++
		}
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case wantIns == 0:
		return fmt.Errorf("--kernel %q: unknown (have %s)", o.kernel, strings.Join(streamKernels(), ", "))
	case len(o.ins) != wantIns:
		return fmt.Errorf("--in: kernel %s takes %d input(s), got %d", o.kernel, wantIns, len(o.ins))
	case len(o.outs) != 1:
		return fmt.Errorf("--out: kernel %s has 1 output, got %d", o.kernel, len(o.outs))
	case dashes > 1:
		return errors.New("--in: stdin (-) can be only one input")
	case o.iters < 0:
		return fmt.Errorf("--iters %d: must not be negative", o.iters)
	case isSet(fs, "iters") && !hasScalar(o.kernel, "iters"):
		return fmt.Errorf("--iters is the seed kernel's; %s takes no iterations", o.kernel)
	case o.chunk < minStreamChunk:
		return fmt.Errorf("--chunk %d: a streaming run's chunks are at least %d elements (%d KiB): each costs a read, a write and several driver calls",
			o.chunk, minStreamChunk, 4*minStreamChunk/1024)
	case o.computeStreams < 1 || o.computeStreams > 64:
		return fmt.Errorf("--compute-streams %d: want 1 to 64", o.computeStreams)
	case (o.slots != 0 || isSet(fs, "slots")) && (o.slots < 2 || o.slots < o.computeStreams || o.slots > 1024):
		return fmt.Errorf("--slots %d: want 2 to 1024, and at least --compute-streams %d", o.slots, o.computeStreams)
	case o.readers < 0 || o.writers < 0 || o.readers > 1024 || o.writers > 1024:
		return errors.New("--readers and --writers: want 0 (the default) to 1024")
	case o.piece > 1<<30:
		return fmt.Errorf("--piece %d: at most 1G", o.piece)
	case o.direct && (o.chunk*4)%pipeline.DirectAlign != 0:
		return fmt.Errorf("--direct: a chunk of %d float32 is not a whole number of %d-byte pages", o.chunk, pipeline.DirectAlign)
	case o.verify && o.outs[0] == "-":
		return errors.New("--verify reads the output back from its file: it cannot read stdout (--out -)")
	case o.verify && dashes > 0:
		return errors.New("--verify reads the inputs back from their files: it cannot read stdin (--in -)")
	case o.bound && dashes > 0:
		return errors.New("--bound reads the inputs alone: it needs files, not stdin (--in -)")
	}
	// The inputs: each one readable, not a directory, whole elements, and
	// files as long as each other (a pipe's length shows only as it is
	// read, and the run then stops where it ends).
	elems := int64(-1)
	first := ""
	for _, f := range o.ins {
		if f == "" {
			return errors.New("--in: empty file name")
		}
		if f == "-" {
			continue
		}
		n, regular, err := inputFile(f)
		if err != nil {
			return err
		}
		if !regular {
			continue
		}
		if elems >= 0 && n != elems {
			return fmt.Errorf("--in: %s holds %d elements and %s %d; the inputs must be as long", first, elems, f, n)
		}
		elems, first = n, f
	}
	// The output: none of the inputs, under any name, nor the file that
	// stdin reads or stdout writes.
	for _, f := range o.ins {
		var same bool
		switch {
		case f == "-" && o.outs[0] == "-":
			continue // a pipe through: nothing is overwritten
		case f == "-":
			same = sameAsOpen(o.outs[0], stdin)
		case o.outs[0] == "-":
			same = sameAsOpen(f, stdout)
		default:
			same = sameFile(o.outs[0], f)
		}
		if same {
			return fmt.Errorf("--out %s is the input %s (the same file): writing it would destroy the input as it is read", o.outs[0], f)
		}
	}
	if o.verify && !regularOrNew(o.outs[0]) {
		return fmt.Errorf("--verify reads the output back from its file: %s is not a regular file", o.outs[0])
	}
	if hasScalar(o.kernel, "iters") {
		// Over the input files' elements; from stdin, whose length is not
		// known, over one chunk, which alone must be able to finish.
		n, what, lower := int64(o.chunk), fmt.Sprintf("one chunk of %d elements", o.chunk), "--iters or --chunk"
		if elems >= 0 {
			n, what, lower = elems, fmt.Sprintf("the %d elements of %s", elems, first), "--iters"
		}
		if err := checkWork(n, o.iters, o.sim, what, lower); err != nil {
			return err
		}
	}
	if o.outs[0] != "-" {
		if err := checkWritable("out", o.outs[0]); err != nil {
			return err
		}
	}
	if o.quiet && o.jsonOut {
		o.quiet = false
	}
	return nil
}

// inputFile checks that an --in file exists, is not a directory and, when
// it is a regular file, can be opened and holds whole elements; it
// returns its length in elements then. A pipe or a device is not opened
// here: opening a named pipe would start its writer, and closing it again
// would end that writer's stream.
func inputFile(name string) (elems int64, regular bool, err error) {
	st, err := os.Stat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, false, fmt.Errorf("--in %s: no such file", name)
	case err != nil:
		return 0, false, fmt.Errorf("--in: %w", err)
	case st.IsDir():
		return 0, false, fmt.Errorf("--in %s: is a directory", name)
	case !st.Mode().IsRegular():
		return 0, false, nil
	case st.Size()%4 != 0:
		return 0, false, fmt.Errorf("--in %s: %d bytes is not a whole number of float32 elements (4 bytes each)", name, st.Size())
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, false, fmt.Errorf("--in %s: cannot be read: %v", name, unwrapPath(err))
	}
	f.Close()
	return st.Size() / 4, true, nil
}

// streamResult is what a streaming run measured, as printed and as JSON.
type streamResult struct {
	Simulated      bool          `json:"simulated"`
	Backend        string        `json:"backend"`
	Kernel         string        `json:"kernel"`
	Iters          int           `json:"iters,omitempty"`
	Inputs         []string      `json:"inputs"`
	Output         string        `json:"output"`
	Direct         bool          `json:"direct"`
	Elems          int64         `json:"elems"`
	InBytes        int64         `json:"in_bytes"`
	OutBytes       int64         `json:"out_bytes"`
	ChunkElems     int           `json:"chunk_elems"`
	Slots          int           `json:"slots"`
	ComputeStreams int           `json:"compute_streams"`
	Readers        int           `json:"readers"`
	Writers        int           `json:"writers"`
	Ms             float64       `json:"ms"`
	Stages         []streamStage `json:"stages"`
	BoundStage     string        `json:"bounded_by"`
	PeakRSS        int64         `json:"peak_rss_bytes,omitempty"`
	// PinnedBytes is the page-locked host memory of the run's slots (a
	// slot per input and output of each of Slots chunks), which the driver
	// maps into the process; it is fixed by --chunk, --slots and the number
	// of inputs and outputs, whatever the length of the streams.
	PinnedBytes int64        `json:"pinned_slot_bytes"`
	Bound       *streamBound `json:"bound,omitempty"`
	Verified    string       `json:"verified"`
}

// streamStage is one stage's rate and its time over the whole stream.
type streamStage struct {
	Stage string  `json:"stage"`
	GBps  float64 `json:"gb_per_s"`
	Ms    float64 `json:"ms"`
	How   string  `json:"how"`
}

// streamBound is the bound measured in the same run.
type streamBound struct {
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

// runStream runs overlap stream once its flags are checked.
func runStream(o *streamOptions, stdout, stderr io.Writer) int {
	ctx, stop := signalContext()
	defer stop()
	report := stdout
	if o.outs[0] == "-" {
		report = stderr
	}
	res, err := executeStream(ctx, o, stdout, stderr)
	if err != nil {
		return reportError("stream", stoppedBy(ctx, err), stderr)
	}
	if o.jsonOut {
		writeJSON(report, res)
	} else if !o.quiet {
		printStream(report, res)
	}
	return exitOK
}

// kernelFor is the kernel of the run, with the table's default scalars
// (saxpy's a = 2.5; lerp's t = 0.25, scale = 1.5; axpb's a = 2, b = -1)
// and the seed's --iters.
func (o *streamOptions) kernelFor(mods *kernels.Modules) (*pipeline.Kernel, error) {
	switch o.kernel {
	case "saxpy":
		return kernels.Saxpy.Pipeline(mods, 2.5)
	case "lerp":
		return kernels.Lerp.Pipeline(mods, 0.25, 1.5)
	case "axpb":
		return kernels.Axpb.Pipeline(mods, 2, -1)
	}
	return kernels.Seed.Pipeline(mods, float64(o.iters))
}

func executeStream(ctx context.Context, o *streamOptions, stdout, stderr io.Writer) (*streamResult, error) {
	e, err := openEnv(&runOptions{machine: machine{sim: o.sim, device: o.device}, kernel: o.kernel})
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	cfg := pipeline.Float32Config(len(o.ins), 1)
	// HostAuto has New allocate the pinned slots, so that the streaming
	// run's time does not include them.
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = o.chunk, o.slots, o.computeStreams, pipeline.HostAuto
	p, err := pipeline.New(e.backend, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	pc := p.Config()
	k, err := o.kernelFor(e.mods)
	if err != nil {
		return nil, err
	}
	readers, writers := o.readers, o.writers
	if readers == 0 {
		readers = runtime.GOMAXPROCS(0)
	}
	if writers == 0 {
		writers = 1 // as pipeline.StreamJob's default, which says why
	}
	piece := o.piece
	if piece == 0 {
		piece = 1 << 20
	}
	piece = (piece + pipeline.DirectAlign - 1) &^ (pipeline.DirectAlign - 1)
	// A run reads and writes at most a chunk per call, through Slots
	// chunks of pinned memory per stream; the bound does the same.
	piece = min(piece, (pc.ChunkElems*4+pipeline.DirectAlign-1)&^(pipeline.DirectAlign-1))
	ringBytes := pc.Slots * pc.ChunkElems * 4
	res := &streamResult{Simulated: o.sim, Backend: e.backend.Name(), Kernel: o.kernel, Inputs: o.ins, Output: o.outs[0], Direct: o.direct,
		ChunkElems: pc.ChunkElems, Slots: pc.Slots, ComputeStreams: pc.ComputeStreams}
	if o.kernel == "seed" {
		res.Iters = o.iters
	}

	// The bound's host parts go first: the write's scratch file is
	// removed before the run, so its dirty pages do not slow the run.
	var bound *streamBound
	if o.bound {
		bound = &streamBound{}
		// Each host part is timed twice and the faster kept: on the H200
		// host a first pass of reading from disk or writing a new file
		// through the page cache varied by up to 3× from the next.
		prog.say("bound: reading the inputs alone (twice)…")
		d, err := bestOfTwo(func() (time.Duration, error) { return readAlone(e.backend, o, readers, piece, ringBytes) })
		if err != nil {
			return nil, fmt.Errorf("bound: reading the inputs alone: %w", err)
		}
		bound.ReadMs = ms(d)
		if regularOrNew(o.outs[0]) {
			size, err := inputElems(o)
			if err != nil {
				return nil, err
			}
			prog.say("bound: writing the output alone (twice)…")
			d, err := bestOfTwo(func() (time.Duration, error) {
				return writeAlone(e.backend, o.outs[0], size*4, writers, piece, ringBytes)
			})
			if err != nil {
				return nil, fmt.Errorf("bound: writing alone: %w", err)
			}
			bound.WriteMs, bound.WriteMeasured = ms(d), true
		}
	}

	// A warm-up over 2·Slots chunks of zeros, not timed: the first run of
	// a process pays for first touches (of the slots, the goroutines, the
	// first launches) that the bound, measured warm, does not. It runs
	// before the output is created, so that a failure here (or a signal)
	// leaves no file behind.
	prog.say("warming up…")
	warm := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, Outputs: []io.Writer{io.Discard}}
	for range o.ins {
		warm.Inputs = append(warm.Inputs, &zeros{size: int64(2 * pc.Slots * pc.ChunkElems * 4)})
	}
	if _, err := p.RunStream(ctx, warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	// The streaming run.
	job := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, InputNames: o.ins, OutputNames: o.outs}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, name := range o.ins {
		if name == "-" {
			job.Inputs = append(job.Inputs, stdin) // read straight into the slots
			continue
		}
		open := os.Open
		if o.direct {
			open = pipeline.OpenDirect
		}
		f, err := open(name)
		if err != nil {
			return nil, usageError{fmt.Errorf("--in: %w", err)}
		}
		files = append(files, f)
		job.Inputs = append(job.Inputs, f)
	}
	var outFile *os.File
	if o.outs[0] == "-" {
		job.Outputs = []io.Writer{stdout}
	} else {
		if outFile, err = os.Create(o.outs[0]); err != nil {
			return nil, usageError{fmt.Errorf("--out: %w", err)}
		}
		files = append(files, outFile)
		job.Outputs = []io.Writer{outFile}
	}
	prog.say("streaming…")
	rep, err := p.RunStream(ctx, job)
	if err != nil {
		if rep != nil && len(rep.OutputBytes) == 1 {
			return nil, &partialOutput{err: err, name: o.outs[0], bytes: rep.OutputBytes[0]}
		}
		return nil, err
	}
	if outFile != nil {
		if err := outFile.Close(); err != nil {
			return nil, fmt.Errorf("closing %s: %w", o.outs[0], err)
		}
	}
	// written marks a failure after the run: the output is complete.
	written := func(err error) error {
		return &partialOutput{err: err, name: o.outs[0], bytes: rep.OutputBytes[0], complete: true}
	}
	res.PeakRSS, _ = peakRSS()
	res.PinnedBytes = int64(ringBytes) * int64(len(o.ins)+len(o.outs))
	res.Elems, res.Ms = rep.N, ms(rep.Elapsed)
	res.InBytes, res.OutBytes = rep.N*4*int64(len(o.ins)), rep.OutputBytes[0]
	res.Readers, res.Writers = rep.Readers, rep.Writers

	// The device's stages: alone over the same N when measuring the
	// bound, else over a probe of a few chunks, scaled to N.
	var st pipeline.StageTimes
	scale := 1.0
	if rep.N > 0 {
		n := rep.N
		if !o.bound {
			n = min(rep.N, int64(2*pc.Slots*pc.ChunkElems))
			scale = float64(rep.N) / float64(n)
		}
		prog.say("timing the device's stages alone…")
		var pipe time.Duration
		st, pipe, err = inMemory(ctx, p, e.backend, k, len(o.ins), int(n), o.bound)
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
		res.Stages = append(res.Stages, streamStage{Stage: stage, GBps: g, Ms: m, How: how})
	}
	scaled := func(d time.Duration) time.Duration { return time.Duration(float64(d) * scale) }
	probe := "alone, same N"
	if !o.bound {
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
		bound.BoundMs, bound.Slowest = bound.ReadMs, "read"
		if bound.PipelineMs > bound.BoundMs {
			bound.BoundMs, bound.Slowest = bound.PipelineMs, "in-memory pipeline"
		}
		if bound.WriteMs > bound.BoundMs {
			bound.BoundMs, bound.Slowest = bound.WriteMs, "write"
		}
		if res.Ms > 0 {
			bound.Efficiency = bound.BoundMs / res.Ms
		}
		res.Bound = bound
	}

	switch {
	case !o.verify:
		res.Verified = "not verified (--verify reads the files back and checks every element)"
	default: // checkStreamOptions made sure that the files can be read back
		prog.say("verifying every element from %s…", o.outs[0])
		if err := verifyFiles(ctx, o, rep.N); err != nil {
			return nil, written(fmt.Errorf("verifying %s: %w", o.outs[0], err))
		}
		res.Verified = fmt.Sprintf("every one of the %d output elements, read back from %s, matched the CPU reference", rep.N, o.outs[0])
	}
	return res, nil
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

// regularOrNew reports whether name is a regular file or does not exist
// yet: not stdout, not a device such as /dev/null.
func regularOrNew(name string) bool {
	if name == "-" {
		return false
	}
	st, err := os.Stat(name)
	return err != nil || st.Mode().IsRegular()
}

// inputElems is the elements in the first input file.
func inputElems(o *streamOptions) (int64, error) {
	if o.ins[0] == "-" {
		return 0, errors.New("--bound needs file inputs, not stdin")
	}
	st, err := os.Stat(o.ins[0])
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
// On the simulator it goes through Sim.HostAccess, so that it takes the
// virtual time that the streaming run's reads and writes take; elsewhere
// do gets the ring's memory.
func (r *pinnedRing) access(b pipeline.Backend, w, k, n int, into bool, what string, do func([]byte) (int, error)) (int, error) {
	if s, ok := b.(*pipeline.Sim); ok {
		return s.HostAccess(r.mem, (w*r.pieces+k%r.pieces)*r.piece, n, into, what, do)
	}
	return do(r.at(w, k)[:n])
}

// timedWorkers runs work(w) for w in [0, n) on goroutines of their own
// and returns how long they took on b's clock. On the simulator the
// goroutines are actors forked together, and the time is virtual, as the
// streaming run's is: timed on the wall clock, the bound's reads and
// writes made efficiencies of 2000% beside a simulated run.
func timedWorkers(b pipeline.Backend, n int, work func(w int)) time.Duration {
	if s, ok := b.(*pipeline.Sim); ok {
		t0 := pipeline.Now(b)
		s.Host().GoTogether("bound worker", n, work)
		return pipeline.Now(b) - t0
	}
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w)
		}()
	}
	wg.Wait()
	return time.Since(t0)
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
func readAlone(b pipeline.Backend, o *streamOptions, readers, piece, ringBytes int) (time.Duration, error) {
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
	for _, name := range o.ins {
		if name == "-" {
			return 0, errors.New("--bound needs file inputs, not stdin")
		}
		open := os.Open
		if o.direct {
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
	ring, err := newPinnedRing(b, ringBytes*len(o.ins), piece, readers)
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

// writeAlone writes bytes to a scratch file beside out from a pinned ring,
// with the run's writers and pieces, removes it, and returns the time the
// writes took.
func writeAlone(b pipeline.Backend, out string, bytes int64, writers, piece, ringBytes int) (time.Duration, error) {
	f, err := os.CreateTemp(filepath.Dir(out), ".overlap-bound-*")
	if err != nil {
		return 0, err
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	ring, err := newPinnedRing(b, ringBytes, piece, writers)
	if err != nil {
		return 0, err
	}
	defer ring.mem.Close()
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
			if _, err := ring.access(b, w, k, int(n), false, "bound write", func(p []byte) (int, error) {
				return f.WriteAt(p, i*int64(piece))
			}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	return took, errors.Join(errs...)
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

// peakRSS reads the process's peak resident memory (VmHWM) on Linux.
func peakRSS() (int64, bool) { return procField("/proc/self/status", "VmHWM:") }

// verifyBlock is the elements one verifying goroutine reads at a time.
const verifyBlock = 1 << 20

// verifyFiles reads the inputs and the output back, in parallel blocks,
// and checks every output element against the CPU reference.
func verifyFiles(ctx context.Context, o *streamOptions, n int64) error {
	out, err := os.Open(o.outs[0])
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
	for _, name := range o.ins {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		ins = append(ins, f)
	}
	check := o.checker()
	blocks := (n + verifyBlock - 1) / verifyBlock
	var next atomic.Int64
	var mu sync.Mutex
	verr := &kernels.VerifyError{Kernel: o.kernel, Total: int(n)}
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
func (o *streamOptions) checker() func(bufs [][]float32, j int) (float64, float64) {
	switch o.kernel {
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
	iters := o.iters
	table := make([]float64, 1<<16)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := w; k < len(table); k += workers {
				table[k] = kernels.SeedReference(float32(k-32768)/32768, iters)
			}
		}()
	}
	wg.Wait()
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

func printStream(w io.Writer, r *streamResult) {
	label := ""
	if r.Simulated {
		label = " [simulated: CPU simulator, not a GPU; rates are not GPU rates]"
	}
	kernel := r.Kernel
	if r.Iters > 0 {
		kernel = fmt.Sprintf("%s (%d iterations)", r.Kernel, r.Iters)
	}
	direct := ""
	if r.Direct {
		direct = ", inputs read with O_DIRECT"
	}
	fmt.Fprintf(w, "overlap run: %s on %s, streaming %s → %s%s\n", kernel, r.Backend, strings.Join(r.Inputs, ","), r.Output, label)
	fmt.Fprintf(w, "%d float32 elements (%s in, %s out); chunk %d elements, %d slots, %d compute stream(s)%s\n",
		r.Elems, humanBytes(r.InBytes), humanBytes(r.OutBytes), r.ChunkElems, r.Slots, r.ComputeStreams, direct)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-8s %10s %12s  %s\n", "STAGE", "GB/s", "TIME", "MEASURED")
	for _, s := range r.Stages {
		mark := ""
		if s.Stage == r.BoundStage {
			mark = "  ← bounds the run"
		}
		fmt.Fprintf(w, "%-8s %10.1f %9.2f ms  %s%s\n", s.Stage, s.GBps, s.Ms, s.How, mark)
	}
	fmt.Fprintln(w)
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + humanBytes(r.PeakRSS)
	}
	rss += "; pinned slots " + humanBytes(r.PinnedBytes)
	fmt.Fprintf(w, "streaming run (after an untimed warm-up over 2·slots chunks of zeros): %.2f ms, %.1f GB/s of input; %s\n", r.Ms, gbps(r.InBytes, time.Duration(r.Ms*float64(time.Millisecond))), rss)
	if b := r.Bound; b != nil {
		write := fmt.Sprintf("write the output %.2f ms", b.WriteMs)
		if !b.WriteMeasured {
			write = "the write not measured: the output is not a regular file"
		}
		fmt.Fprintf(w, "bound, measured in this run (slowest alone): %.2f ms, %s (read the inputs into pinned memory %.2f ms, in-memory pinned pipeline %.2f ms, %s)\n",
			b.BoundMs, b.Slowest, b.ReadMs, b.PipelineMs, write)
		fmt.Fprintf(w, "efficiency = bound / streaming time: %.1f%%\n", 100*b.Efficiency)
		if b.Efficiency > 1 {
			fmt.Fprintf(w, "above 100%%: the %s stage alone (the faster of two passes before the run) took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor\n", b.Slowest)
		}
	}
	fmt.Fprintf(w, "%s%s\n", r.Verified, label)
}
