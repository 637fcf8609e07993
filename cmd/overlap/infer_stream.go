package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The streaming run of overlap infer: a file (or stdin) through the model
// into a file (or stdout), chunk by chunk, through pinned slots whose size
// does not depend on the stream's, on every device of the group
// (Group.RunStream); with --bound, beside the stream's bound measured in
// the same run, as overlap run --in --bound measures it, but after the
// stream, so that the stream's peak memory is its own.

// inferStreamResult is what a streaming overlap infer measured.
type inferStreamResult struct {
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
	Devices []streamDeviceRow `json:"devices,omitempty"`
	// PeakRSS is the process's peak resident memory (VmHWM) right after
	// the stream (its warm-up included), before --bound's parts and
	// --verify.
	PeakRSS int64 `json:"peak_rss_bytes,omitempty"`
	// PinnedBytes is the page-locked memory of the slots, fixed by the
	// chunk, the slots and the devices whatever the length of the stream.
	PinnedBytes int64        `json:"pinned_slot_bytes"`
	Bound       *streamBound `json:"bound,omitempty"`
	BoundStages *stagesJSON  `json:"bound_stages,omitempty"`
	Notes       []string     `json:"notes,omitempty"`
	Verified    string       `json:"verified"`
	Tolerance   string       `json:"tolerance,omitempty"`
	// VerifyMs is the wall time that --verify took, reading the files
	// back and checking on the CPU.
	VerifyMs float64 `json:"verify_ms,omitempty"`
}

// streamDeviceRow is one device's part of a stream.
type streamDeviceRow struct {
	Device int    `json:"device"`
	Name   string `json:"name"`
	Chunks int    `json:"chunks"`
}

func executeInferStream(ctx context.Context, o *inferOptions, m *model.Model, stdout, stderr io.Writer) (*inferStreamResult, error) {
	var total int64 = -1 // rows, when the input's size is known
	if o.in != "-" {
		st, err := os.Stat(o.in)
		if err != nil {
			return nil, usageError{fmt.Errorf("--in: %v", err)}
		}
		if st.Mode().IsRegular() {
			if total, err = m.CheckInputBytes(st.Size()); err != nil {
				return nil, usageError{fmt.Errorf("--in %s: %s", o.in, strings.TrimPrefix(err.Error(), "model: "))}
			}
		}
	}
	chunk := 0
	if len(o.chunks) == 1 {
		chunk = o.chunks[0]
	}
	cfg, err := m.Config(chunk)
	if err != nil {
		return nil, usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	g, err := pipeline.NewGroup(e.backends, cfg)
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
	res := &inferStreamResult{Simulated: o.run.sim, Backend: envBackend(e), Model: m.String(), Widths: m.Widths(),
		Activation: m.Activation.String(), From: m.ActivationFrom, Precision: o.precision.String(), Input: o.in, Output: o.out,
		ChunkRows: pc.ChunkElems, Slots: pc.Slots,
		PinnedBytes: int64(len(e.backends)) * int64(pc.Slots) * int64(pc.ChunkElems) * int64(inRow+outRow)}

	// An untimed warm-up over 2·Slots chunks of zeros a device: the first
	// stream of a process pays for first touches (of the slots, the
	// goroutines, the first launches) that the bound, measured warm, does
	// not. It runs before the output is created, so that a failure here
	// (or a signal) leaves no file behind.
	prog.say("warming up…")
	warm := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, Outputs: []io.Writer{io.Discard},
		Inputs: []io.Reader{&zeros{size: int64(2*len(e.backends)*pc.Slots*pc.ChunkElems) * int64(inRow)}}}
	if _, err := g.RunStream(ctx, warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	job := pipeline.StreamJob{Kernel: k, Readers: readers, Writers: writers, PieceBytes: piece, InputNames: []string{o.in}, OutputNames: []string{o.out}}
	if prog.on {
		job.Progress = func(pr pipeline.Progress) {
			if total > 0 {
				prog.say("%d of %d rows (%.0f%%)", pr.ElemsWritten, total, 100*float64(pr.ElemsWritten)/float64(total))
			} else {
				prog.say("%d rows read, %d written", pr.ElemsRead, pr.ElemsWritten)
			}
		}
	}
	if o.in == "-" {
		job.Inputs = []io.Reader{stdin}
	} else {
		f, err := os.Open(o.in)
		if err != nil {
			return nil, usageError{fmt.Errorf("--in: %w", err)}
		}
		defer f.Close()
		job.Inputs = []io.Reader{f}
	}
	var outFile *os.File
	if o.out == "-" {
		job.Outputs = []io.Writer{stdout}
	} else {
		if outFile, err = os.Create(o.out); err != nil {
			return nil, usageError{fmt.Errorf("--out: %w", err)}
		}
		defer outFile.Close()
		job.Outputs = []io.Writer{outFile}
	}
	rep, err := g.RunStream(ctx, job)
	if err != nil {
		if rep != nil && len(rep.OutputBytes) == 1 {
			return nil, fmt.Errorf("%w (%s holds the first %d bytes of the correct output, %d rows)", err, o.out, rep.OutputBytes[0], rep.OutputBytes[0]/int64(outRow))
		}
		return nil, err
	}
	if outFile != nil {
		if err := outFile.Close(); err != nil {
			return nil, fmt.Errorf("closing %s: %w", o.out, err)
		}
	}
	res.PeakRSS, _ = peakRSS()
	if rep.N == 0 {
		return nil, usageError{fmt.Errorf("--in %s: the input is empty: no rows", o.in)}
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
			res.Devices = append(res.Devices, streamDeviceRow{Device: e.ordinals[i], Name: d.Backend, Chunks: d.Chunks})
		}
	}

	// The bound, after the stream, so that the peak RSS above is the
	// stream's own: reading the input alone and writing as much output
	// alone (to a scratch file beside a regular output, removed), each
	// timed twice, the faster kept; and the in-memory pinned pipeline over
	// as many rows, each stage alone and the whole pipeline (the faster of
	// two).
	var bound *streamBound
	if o.bound {
		bound = &streamBound{}
		prog.say("bound: reading the input alone (twice)…")
		d, err := bestOfTwo(func() (time.Duration, error) {
			return readAlone(e.backend, &streamOptions{ins: []string{o.in}}, readers, piece, pc.Slots*pc.ChunkElems*inRow)
		})
		if err != nil {
			return nil, fmt.Errorf("bound: reading the input alone: %w", err)
		}
		bound.ReadMs = ms(d)
		if regularOrNew(o.out) {
			prog.say("bound: writing the output alone (twice)…")
			d, err := bestOfTwo(func() (time.Duration, error) {
				return writeAlone(e.backend, o.out, rep.N*int64(outRow), writers, piece, pc.Slots*pc.ChunkElems*outRow)
			})
			if err != nil {
				return nil, fmt.Errorf("bound: writing alone: %w", err)
			}
			bound.WriteMs, bound.WriteMeasured = ms(d), true
		}
		prog.say("bound: the in-memory pipeline over %d rows…", rep.N)
		st, pipe, err := inferInMemoryBound(ctx, g, e.backend, k, int(rep.N), inRow, outRow)
		if err != nil {
			return nil, fmt.Errorf("bound: the in-memory pipeline: %w", err)
		}
		bound.PipelineMs = ms(pipe)
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
		res.BoundStages = &stagesJSON{H2DMs: ms(st.H2D), ComputeMs: ms(st.Compute), D2HMs: ms(st.D2H), CopiesMs: ms(st.Copies),
			BoundMs: ms(st.Bound()), Slowest: st.Slowest().String()}
	}
	switch {
	case !o.verify:
		res.Verified = "not verified (--verify reads the files back and checks every value)"
	case o.in == "-" || o.out == "-":
		res.Verified = "not verified: stdin or stdout cannot be read back"
	case !regularOrNew(o.out) || total < 0:
		res.Verified = "not verified: the input or the output is not a regular file"
	default:
		prog.say("verifying every value of %s…", o.out)
		t0 := time.Now()
		if err := verifyInferFiles(ctx, o, m, rep.N); err != nil {
			return nil, fmt.Errorf("verifying %s: %w", o.out, err)
		}
		res.VerifyMs = ms(time.Since(t0))
		res.Verified = fmt.Sprintf("every one of the %d rows' %d values, read back from %s, matched the float64 CPU reference within the %s error bound (verified in %.1f s on %d CPUs)",
			rep.N, rep.N*int64(m.Out()), o.out, o.precision, res.VerifyMs/1e3, runtime.GOMAXPROCS(0))
		res.Tolerance = o.precision.Tolerance()
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
func verifyInferFiles(ctx context.Context, o *inferOptions, m *model.Model, rows int64) error {
	in, err := os.Open(o.in)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Open(o.out)
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
		if err := m.Verify(xb, yb, model.VerifyOptions{Precision: o.precision, FirstRow: lo}); err != nil {
			return err
		}
	}
	return nil
}

func printInferStream(w io.Writer, r *inferStreamResult) {
	label := ""
	if r.Simulated {
		label = " [simulated: CPU simulator, not a GPU; rates are not GPU rates]"
	}
	fmt.Fprintf(w, "overlap infer: MLP %s in %s on %s, streaming %s → %s%s\n",
		modelLine(r.Model, r.From, len(r.Widths)-1), r.Precision, r.Backend, r.Input, r.Output, label)
	fmt.Fprintf(w, "%d rows (%s in, %s out); chunk %d rows, %d slots\n\n", r.Rows, humanBytes(r.InBytes), humanBytes(r.OutBytes), r.ChunkRows, r.Slots)
	fmt.Fprintf(w, "%-8s %12s %12s %10s\n", "", "TIME", "ROWS/s", "GB/s")
	fmt.Fprintf(w, "%-8s %9.2f ms %12s %10.1f  (input and output bytes over the whole run)\n", "stream", r.Ms, humanRate(r.RowsPerSec), r.GBps)
	rate := func(bytes int64, msv float64) float64 {
		if msv <= 0 {
			return 0
		}
		return float64(bytes) / (msv / 1e3) / 1e9
	}
	fmt.Fprintf(w, "%-8s %9.2f ms %12s %10.1f  (while reading the input)\n", "read", r.ReadMs, "", rate(r.InBytes, r.ReadMs))
	fmt.Fprintf(w, "%-8s %9.2f ms %12s %10.1f  (while writing the output)\n\n", "write", r.WriteMs, "", rate(r.OutBytes, r.WriteMs))
	if len(r.Devices) > 0 {
		fmt.Fprintf(w, "%-8s %-28s %7s\n", "DEVICE", "NAME", "CHUNKS")
		for _, d := range r.Devices {
			fmt.Fprintf(w, "%-8d %-28s %7d\n", d.Device, d.Name, d.Chunks)
		}
		fmt.Fprintln(w)
	}
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + humanBytes(r.PeakRSS) + " after the stream"
	}
	fmt.Fprintf(w, "%s; pinned slots %s (after an untimed warm-up over 2·slots chunks of zeros a device)\n", rss, humanBytes(r.PinnedBytes))
	if b := r.Bound; b != nil {
		write := fmt.Sprintf("write the output %.2f ms", b.WriteMs)
		if !b.WriteMeasured {
			write = "the write not measured: the output is not a regular file"
		}
		fmt.Fprintf(w, "bound, measured in this run (slowest alone): %.2f ms, %s (read the input into pinned memory %.2f ms, in-memory pinned pipeline %.2f ms, %s)\n",
			b.BoundMs, b.Slowest, b.ReadMs, b.PipelineMs, write)
		if s := r.BoundStages; s != nil {
			fmt.Fprintf(w, "the in-memory pipeline's stages alone: %s (bound %.2f ms, %s)\n", stageLine(*s), s.BoundMs, s.Slowest)
		}
		fmt.Fprintf(w, "efficiency = bound / streaming time: %.1f%%\n", 100*b.Efficiency)
		if b.Efficiency > 1 {
			fmt.Fprintf(w, "above 100%%: the %s stage alone took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor\n", b.Slowest)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "%s%s\n", r.Verified, label)
}
