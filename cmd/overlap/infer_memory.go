package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The in-memory run of overlap infer: the rows (generated, or a file's)
// in Go memory, registered in place once, so that every chunk size runs
// from the same page-locked memory, as PyTorch's pinned tensors do; each
// chunk size's runs, the median kept; then, at the fastest chunk size,
// each stage alone and the copies in both directions at once, the
// bound.

// inferResult is what overlap infer measured in memory
// (bench.InferResult).
type inferResult = bench.InferResult

// inMemoryRun is an in-memory run's result and its rows (X and Y).
type inMemoryRun struct{ *inferResult }

// defaultInferChunk is the chunk when --chunk is not given: the model's
// default, but at least 8 chunks a device when the rows are few, so that
// something overlaps.
func defaultInferChunk(o *inferOptions, m *model.Model, rows int) int {
	devices := max(1, len(o.run.devices))
	if o.run.allDevices {
		if n, err := driver.DeviceCount(); err == nil {
			devices = max(1, n)
		}
	}
	tile := kernels.Gemm.TileM
	few := (rows/(8*devices) + tile - 1) / tile * tile
	return max(1, min(m.DefaultChunkRows(), max(tile, few), rows))
}

// executeInfer runs overlap infer --rows in memory on the machine that
// the flags choose (bench.InferInMemory).
func executeInfer(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*inMemoryRun, error) {
	rows := o.rows
	inBytes, outBytes := int64(rows)*int64(m.In())*4, int64(rows)*int64(m.Out())*4
	need := inBytes + outBytes
	if o.run.sim && !o.noBaseline && !o.timingOnly {
		need += inBytes + outBytes // the baseline's simulated device arrays
	}
	if avail, ok := availableMemory(); ok && need > avail && !o.timingOnly {
		return nil, usageError{fmt.Errorf("--rows %d: the rows in and out need %s of host memory, more than the %s available; use fewer --rows", rows, humanBytes(need), humanBytes(avail))}
	}
	chunks := o.chunks
	if len(chunks) == 0 {
		chunks = []int{defaultInferChunk(o, m, rows)}
	}
	for _, c := range chunks {
		if _, err := m.Config(c); err != nil {
			return nil, usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
		}
		if n := (int64(rows) + int64(c) - 1) / int64(c); o.run.sim && n > maxSimChunks {
			return nil, usageError{fmt.Errorf("--chunk %d cuts --rows %d into %d chunks; the simulator takes at most %d: use a larger --chunk", c, rows, n, maxSimChunks)}
		}
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	opts := bench.InferOptions{Rows: rows, Chunks: chunks, Repeat: o.repeat, Precision: o.precision, NoBaseline: o.noBaseline,
		TimingOnly: o.timingOnly, Verify: o.verify, KeepOutput: o.reference, Progress: prog.line}
	if !o.run.sim {
		opts.Warm = defaultWarm
	}
	if o.inputFile != "" {
		prog.say("reading %d rows from %s…", rows, o.inputFile)
		opts.X, opts.InputName = make([]float32, rows*m.In()), o.inputFile
		if err := readRowsFile(o.inputFile, opts.X); err != nil {
			return nil, err
		}
	}
	res, err := bench.InferInMemory(ctx, e.backends, k, m, opts)
	if err != nil {
		return nil, benchError(err)
	}
	if e.sim != nil {
		res.Profile = profileLabel(&o.run, e.sim.Profile())
	}
	res.Input, res.Verified = flagWords(res.Input), flagWords(res.Verified)
	return &inMemoryRun{res}, nil
}

// parallelPieces runs fn(i) for i in [0, n) on every CPU.
func parallelPieces(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// stageLine lists the stages' times, as overlap run prints them.
func stageLine(s stagesJSON) string {
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

func printInfer(w io.Writer, r *inferResult) {
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
