package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/procfs"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The streaming run of a model: a file (or stdin) through the model into
// a file (or stdout), chunk by chunk, through pinned slots whose size
// does not depend on the stream's, on every device of the group
// (Group.RunStream); with Bound, beside the stream's bound measured in
// the same run, as Stream measures it, but after the stream, so that the
// stream's peak memory is its own.

// InferStreamResult is what [InferStream] measured, as overlap infer
// --in prints it and as JSON.
type InferStreamResult struct {
	Simulated  bool    `json:"simulated"`
	Backend    string  `json:"backend"`
	Model      string  `json:"model"`
	Widths     []int   `json:"widths"`
	Activation string  `json:"activation"`
	From       string  `json:"activation_from"`
	Precision  string  `json:"precision"`
	Input      string  `json:"input"`
	Output     string  `json:"output"`
	Rows       int64   `json:"rows"`
	InBytes    int64   `json:"in_bytes"`
	OutBytes   int64   `json:"out_bytes"`
	ChunkRows  int     `json:"chunk_rows"`
	Slots      int     `json:"slots"`
	Ms         float64 `json:"ms"`
	RowsPerSec float64 `json:"rows_per_s"`
	GBps       float64 `json:"gb_per_s"`
	ReadMs     float64 `json:"read_ms"`
	WriteMs    float64 `json:"write_ms"`
	Readers    int     `json:"readers"`
	Writers    int     `json:"writers"`
	// Devices are each device's chunks, for a group of several.
	Devices []StreamDeviceRow `json:"devices,omitempty"`
	// PeakRSS is the process's peak resident memory (VmHWM) right after
	// the stream (its warm-up included), before the bound's parts and
	// the verification.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
	// PinnedBytes is the page-locked memory of the slots, fixed by the
	// chunk, the slots and the devices whatever the length of the stream.
	PinnedBytes int64        `json:"pinned_slot_bytes"`
	Bound       *StreamBound `json:"bound,omitempty"`
	BoundStages *Stages      `json:"bound_stages,omitempty"`
	Notes       []string     `json:"notes,omitempty"`
	Verified    string       `json:"verified"`
	Tolerance   string       `json:"tolerance,omitempty"`
	// VerifyMs is the wall time that the verification took, reading the
	// files back and checking on the CPU.
	VerifyMs float64 `json:"verify_ms,omitempty"`
}

// StreamDeviceRow is one device's part of a stream.
type StreamDeviceRow struct {
	Device int    `json:"device"`
	Name   string `json:"name"`
	Chunks int    `json:"chunks"`
}

// Stages are a pipeline's stages alone and the bound they make, in
// milliseconds.
type Stages struct {
	StageInMs  float64 `json:"stage_in_ms,omitempty"`
	H2DMs      float64 `json:"h2d_ms"`
	ComputeMs  float64 `json:"compute_ms"`
	D2HMs      float64 `json:"d2h_ms"`
	StageOutMs float64 `json:"stage_out_ms,omitempty"`
	// CopiesMs and StagingMs are measured for several devices: the copies,
	// and the staging copies, in both directions at once.
	CopiesMs  float64 `json:"copies_ms,omitempty"`
	StagingMs float64 `json:"staging_ms,omitempty"`
	BoundMs   float64 `json:"bound_ms"`
	Slowest   string  `json:"slowest"`
}

// stagesOf is st in milliseconds.
func stagesOf(st pipeline.StageTimes) Stages {
	return Stages{StageInMs: ms(st.In), H2DMs: ms(st.H2D), ComputeMs: ms(st.Compute), D2HMs: ms(st.D2H),
		StageOutMs: ms(st.Out), CopiesMs: ms(st.Copies), StagingMs: ms(st.Staging), BoundMs: ms(st.Bound()), Slowest: st.Slowest().String()}
}

// InferStreamOptions say what [InferStream] runs. Input and Output are
// required; Ordinals name the backends' devices in Devices (nil: 0, 1, …).
type InferStreamOptions struct {
	// Input is the file of float32 rows and Output the file the outputs
	// go to; "-" reads Stdin or writes Stdout.
	Input, Output string
	Stdin         io.Reader
	Stdout        io.Writer
	// ChunkRows is each chunk's rows (0: the model's default).
	ChunkRows int
	Precision model.Precision
	// Bound measures the stream's bound after it; Verify reads the input
	// and the output back and checks every value (regular files only).
	Bound, Verify bool
	Ordinals      []int
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// ErrNoRows reports an empty input: a stream of no rows.
var ErrNoRows = errors.New("the input is empty: no rows")

// BackendName names the machine of a run: one device's name, or "2
// devices (NVIDIA H200 ×2)".
func BackendName(backends []pipeline.Backend) string {
	if len(backends) > 1 {
		return fmt.Sprintf("%d devices (%s)", len(backends), pipeline.Names(backends))
	}
	return backends[0].Name()
}

// InferStream streams o.Input's rows through m (its kernel k, from
// m.Kernel) on the group of backends into o.Output, after an untimed
// warm-up, and measures the stream, the peak resident memory and with
// Bound its bound. A file that cannot be opened is an *OpenError, a
// failure once the output exists a *PartialOutput, and an empty input
// ErrNoRows (each inside the *Error).
func InferStream(ctx context.Context, backends []pipeline.Backend, k *pipeline.Kernel, m *model.Model, o InferStreamOptions) (*InferStreamResult, error) {
	res, err := inferStream(ctx, backends, k, m, o)
	if err != nil {
		return nil, &Error{Op: "InferStream", Err: err}
	}
	return res, nil
}

func inferStream(ctx context.Context, backends []pipeline.Backend, k *pipeline.Kernel, m *model.Model, o InferStreamOptions) (*InferStreamResult, error) {
	switch {
	case len(backends) == 0 || backends[0] == nil || k == nil || m == nil:
		return nil, errors.New("no backend, kernel or model")
	case o.Input == "" || o.Output == "":
		return nil, errors.New("no input or no output file")
	case o.Input == "-" && o.Stdin == nil, o.Output == "-" && o.Stdout == nil:
		return nil, errors.New("stdin or stdout (-) but no Stdin or Stdout")
	}
	var total int64 = -1 // rows, when the input's size is known
	if st, err := os.Stat(o.Input); o.Input != "-" && err == nil && st.Mode().IsRegular() {
		if total, err = m.CheckInputBytes(st.Size()); err != nil {
			return nil, err
		}
	}
	cfg, err := m.Config(o.ChunkRows)
	if err != nil {
		return nil, err
	}
	cfg.Slots = streamSlots(cfg.Slots, cfg.ComputeStreams)
	b := backends[0]
	g, err := pipeline.NewGroup(backends, cfg)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	pc := g.Config()
	inRow, outRow := 4*m.In(), 4*m.Out()
	readers, writers, piece := runtime.GOMAXPROCS(0), 1, 1<<20
	// A read or write moves at most a chunk of the stream; the bound's
	// do the same.
	piece = min(piece, (pc.ChunkElems*inRow+pipeline.DirectAlign-1)&^(pipeline.DirectAlign-1))
	res := &InferStreamResult{Backend: BackendName(backends), Model: m.String(), Widths: m.Widths(),
		Activation: m.Activation.String(), From: m.ActivationFrom, Precision: o.Precision.String(), Input: o.Input, Output: o.Output,
		ChunkRows: pc.ChunkElems, Slots: pc.Slots,
		PinnedBytes: int64(len(backends)) * int64(pc.Slots) * int64(pc.ChunkElems) * int64(inRow+outRow)}
	_, res.Simulated = b.(*sim.Sim)

	// An untimed warm-up over 2·Slots chunks of zeros a device: the first
	// stream of a process pays for first touches (of the slots, the
	// goroutines, the first launches) that the bound, measured warm, does
	// not. It runs before the output is created, so that a failure here
	// (or a signal) leaves no file behind.
	say(o.Progress, "warming up…")
	warm := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, Outputs: []io.Writer{io.Discard},
		Inputs: []io.Reader{&zeros{size: int64(2*len(backends)*pc.Slots*pc.ChunkElems) * int64(inRow)}}}
	if _, err := g.RunStream(ctx, warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	job := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, InputNames: []string{o.Input}, OutputNames: []string{o.Output}}
	if o.Progress != nil {
		job.Progress = func(pr pipeline.Progress) {
			if total > 0 {
				say(o.Progress, "%d of %d rows (%.0f%%)", pr.ElemsWritten, total, 100*float64(pr.ElemsWritten)/float64(total))
			} else {
				say(o.Progress, "%d rows read, %d written", pr.ElemsRead, pr.ElemsWritten)
			}
		}
	}
	if o.Input == "-" {
		job.Inputs = []io.Reader{o.Stdin}
	} else {
		f, err := os.Open(o.Input)
		if err != nil {
			return nil, &OpenError{Err: err}
		}
		defer f.Close()
		job.Inputs = []io.Reader{f}
	}
	var outFile *os.File
	if o.Output == "-" {
		job.Outputs = []io.Writer{o.Stdout}
	} else {
		if outFile, err = os.Create(o.Output); err != nil {
			return nil, &OpenError{Output: true, Err: err}
		}
		defer outFile.Close()
		job.Outputs = []io.Writer{outFile}
	}
	rep, err := g.RunStream(ctx, job)
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
	res.PeakRSS, _ = procfs.PeakRSS()
	if rep.N == 0 {
		return nil, ErrNoRows
	}
	res.Rows, res.InBytes, res.OutBytes = rep.N, rep.N*int64(inRow), rep.OutputBytes[0]
	res.Ms, res.ReadMs, res.WriteMs, res.Readers, res.Writers = ms(rep.Elapsed), ms(rep.Read), ms(rep.Write), rep.Readers, rep.Writers
	res.Notes = rep.Notes
	if rep.Elapsed > 0 {
		res.RowsPerSec = float64(rep.N) / rep.Elapsed.Seconds()
		res.GBps = gbps(res.InBytes+res.OutBytes, rep.Elapsed)
	}
	if len(rep.Devices) > 1 {
		for i, d := range rep.Devices {
			dev := i
			if i < len(o.Ordinals) {
				dev = o.Ordinals[i]
			}
			res.Devices = append(res.Devices, StreamDeviceRow{Device: dev, Name: d.Backend, Chunks: d.Chunks})
		}
	}

	// The bound, after the stream, so that the peak RSS above is the
	// stream's own: reading the input alone and writing as much output
	// alone (to a scratch file beside a regular output, removed), each
	// timed twice, the faster kept; and the in-memory pinned pipeline over
	// as many rows, each stage alone and the whole pipeline (the faster of
	// two).
	if o.Bound {
		bound, err := hostBound(b, []string{o.Input}, false, outMode{}, o.Output, func() (int64, error) { return rep.N * int64(outRow), nil },
			readers, writers, piece, pc.Slots*pc.ChunkElems*inRow, pc.Slots*pc.ChunkElems*outRow, "input", o.Progress)
		if err != nil {
			return nil, err
		}
		say(o.Progress, "bound: the in-memory pipeline over %d rows…", rep.N)
		st, pipe, err := inferInMemoryBound(ctx, g, b, k, int(rep.N), inRow, outRow)
		if err != nil {
			return nil, fmt.Errorf("bound: the in-memory pipeline: %w", err)
		}
		bound.PipelineMs = ms(pipe)
		bound.settle(res.Ms)
		res.Bound = bound
		res.BoundStages = &Stages{H2DMs: ms(st.H2D), ComputeMs: ms(st.Compute), D2HMs: ms(st.D2H), CopiesMs: ms(st.Copies),
			BoundMs: ms(st.Bound()), Slowest: st.Slowest().String()}
	}
	switch {
	case !o.Verify:
		res.Verified = "not verified (Verify reads the files back and checks every value)"
	case o.Input == "-" || o.Output == "-":
		res.Verified = "not verified: stdin or stdout cannot be read back"
	case !RegularOrNew(o.Output) || total < 0:
		res.Verified = "not verified: the input or the output is not a regular file"
	default:
		say(o.Progress, "verifying every value of %s…", o.Output)
		t0 := time.Now()
		if err := verifyInferFiles(ctx, o, m, rep.N); err != nil {
			return nil, fmt.Errorf("verifying %s: %w", o.Output, err)
		}
		res.VerifyMs = ms(time.Since(t0))
		res.Verified = fmt.Sprintf("every one of the %d rows' %d values, read back from %s, matched the float64 CPU reference within the %s error bound (verified in %.1f s on %d CPUs)",
			rep.N, rep.N*int64(m.Out()), o.Output, o.Precision, res.VerifyMs/1e3, runtime.GOMAXPROCS(0))
		res.Tolerance = o.Precision.Tolerance()
	}
	return res, nil
}

// inferInMemoryBound runs n rows of overlap's pattern through g from
// pinned memory: each stage alone (with a single device, its copies both
// ways at once too, as a group measures them) and the whole pipeline, the
// faster of two runs.
func inferInMemoryBound(ctx context.Context, g *pipeline.Group, b pipeline.Backend, k *pipeline.Kernel, n, inRow, outRow int) (pipeline.StageTimes, time.Duration, error) {
	var st pipeline.StageTimes
	in, err := b.AllocPinned(n * inRow)
	if err != nil {
		return st, 0, err
	}
	defer in.Close()
	out, err := b.AllocPinned(n * outRow)
	if err != nil {
		return st, 0, err
	}
	defer out.Close()
	kernels.FillPattern(driver.View[float32](in.Bytes())[:n*inRow/4], 0)
	job := pipeline.Job{N: n, Kernel: k, Host: pipeline.HostPinned, Inputs: []pipeline.Buffer{pipeline.Pinned(in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)}}
	gst, err := g.StageTimes(ctx, job)
	if err != nil {
		return st, 0, err
	}
	st = gst.StageTimes
	if g.Devices() == 1 {
		if st.Copies, err = copiesAtOnce(ctx, b, in, out, inRow, outRow, g.Config().ChunkElems, n); err != nil {
			return st, 0, err
		}
	}
	best, err := fasterRun(ctx, g.Run, job)
	if err != nil {
		return st, 0, err
	}
	return st, best, nil
}

// inferVerifyRows is the rows verifyInferFiles reads at a time.
const inferVerifyRows = 1 << 16

// verifyInferFiles reads the input and the output back, a block of rows
// at a time, and checks every output value against the reference.
func verifyInferFiles(ctx context.Context, o InferStreamOptions, m *model.Model, rows int64) error {
	in, err := os.Open(o.Input)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Open(o.Output)
	if err != nil {
		return err
	}
	defer out.Close()
	if st, err := out.Stat(); err != nil {
		return err
	} else if want := rows * int64(4*m.Out()); st.Size() != want {
		return fmt.Errorf("the file holds %d bytes; %d rows of %d float32 need %d", st.Size(), rows, m.Out(), want)
	}
	x := make([]float32, inferVerifyRows*m.In())
	y := make([]float32, inferVerifyRows*m.Out())
	for lo := int64(0); lo < rows; lo += inferVerifyRows {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(inferVerifyRows, rows-lo))
		xb, yb := x[:n*m.In()], y[:n*m.Out()]
		if _, err := in.ReadAt(driver.Bytes(xb), lo*int64(4*m.In())); err != nil {
			return err
		}
		if _, err := out.ReadAt(driver.Bytes(yb), lo*int64(4*m.Out())); err != nil {
			return err
		}
		if err := m.Verify(xb, yb, model.VerifyOptions{Precision: o.Precision, FirstRow: lo}); err != nil {
			return err
		}
	}
	return nil
}
