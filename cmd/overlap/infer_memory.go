package main

import (
	"context"
	"fmt"
	"io"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// The in-memory run of overlap infer (bench.InferInMemory says what it
// measures), and its table.

// executeInfer runs overlap infer --rows in memory on the machine that
// the flags choose (bench.InferInMemory).
func executeInfer(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*bench.InferResult, error) {
	if err := checkInferRows(o, m); err != nil {
		return nil, err
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	res, err := bench.InferInMemory(ctx, e.backends, k, m, inferRunOptions(o, prog))
	if err != nil {
		return nil, benchError(err)
	}
	labelInferResult(o, e, res)
	return res, nil
}

// stageLine lists the stages' times, as overlap run prints them.
func stageLine(s bench.Stages) string {
	stages := fmt.Sprintf("H2D %.2f ms, compute %.2f ms, D2H %.2f ms", s.H2DMs, s.ComputeMs, s.D2HMs)
	if s.StageInMs > 0 || s.StageOutMs > 0 {
		stages = fmt.Sprintf("stage-in %.2f ms, %s, stage-out %.2f ms", s.StageInMs, stages, s.StageOutMs)
	}
	if s.CopiesMs > 0 {
		stages += fmt.Sprintf(", H2D+D2H at once %.2f ms", s.CopiesMs)
	}
	if s.StagingMs > 0 {
		stages += fmt.Sprintf(", stage-in+out at once %.2f ms", s.StagingMs)
	}
	return stages
}

func printInfer(w io.Writer, r *bench.InferResult) {
	label := ""
	if r.Simulated {
		label = fmt.Sprintf(" [simulated on the CPU: times predicted for %s]", r.Profile)
		if r.TimingOnly {
			label = fmt.Sprintf(" [simulated, timing only: times predicted for %s]", r.Profile)
		}
	}
	fmt.Fprintf(w, "overlap infer: MLP %s in %s on %s, %d rows (%s in, %s out, weights %s)%s\n",
		modelLine(r.Model, r.From, len(r.Widths)-1), r.Precision, r.Backend, r.Rows, humanBytes(r.InBytes), humanBytes(r.OutBytes), humanBytes(r.ParamBytes), label)
	reg := ""
	if r.RegisterMs > 0 {
		reg = fmt.Sprintf(" in %.1f ms", r.RegisterMs)
	}
	fmt.Fprintf(w, "input %s; host memory %s%s; %d slots\n\n", r.Input, r.HostMode, reg, r.Slots)
	fmt.Fprintf(w, "%-10s %11s %11s %12s %8s\n", "CHUNK", "MEDIAN", "MIN", "ROWS/s", "GB/s")
	for _, c := range r.Chunks {
		mark := ""
		if c.ChunkRows == r.ChunkRows && len(r.Chunks) > 1 {
			mark = "  ← fastest"
		}
		fmt.Fprintf(w, "%-10d %8.2f ms %8.2f ms %12s %8.1f%s\n", c.ChunkRows, c.Ms, c.MinMs, humanRate(c.RowsPerSec), c.GBps, mark)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-24s %11s %12s %8s %8s %11s\n", "MODE", "TIME", "ROWS/s", "GB/s", "SPEEDUP", "EFFICIENCY")
	for _, row := range r.Modes {
		sp, eff := "-", "-"
		if row.Speedup > 0 {
			sp = fmt.Sprintf("%.2fx", row.Speedup)
		}
		if row.Efficiency > 0 {
			eff = fmt.Sprintf("%.1f%%", 100*row.Efficiency)
		}
		mode := row.Mode
		if row.ChunkRows > 0 {
			mode = fmt.Sprintf("%s (chunk %d)", row.Mode, row.ChunkRows)
		}
		fmt.Fprintf(w, "%-24s %8.2f ms %12s %8.1f %8s %11s\n", mode, row.Ms, humanRate(row.RowsPerSec), row.GBps, sp, eff)
	}
	fmt.Fprintln(w)
	s := r.Stages
	fmt.Fprintf(w, "stage bound (slowest stage alone, %s): %.2f ms (%s)\n", s.Slowest, s.BoundMs, stageLine(s))
	fmt.Fprintf(w, "efficiency = stage bound / the pipeline's median time; %s%s\n", r.Verified, label)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.WarmUpMs > 0 {
		fmt.Fprintf(w, "each chunk size, and the stages, ran right after %.0f ms of untimed work on the GPU, which an idle GPU needs to raise its clocks, and each chunk size after an untimed run\n", r.WarmUpMs)
	}
}
