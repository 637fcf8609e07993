package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The in-memory run of overlap infer: the rows (generated, or a file's)
// in Go memory, registered in place once, so that every chunk size runs
// from the same page-locked memory, as PyTorch's pinned tensors do; each
// chunk size's runs, the median kept; then, at the fastest chunk size,
// each stage alone and the copies in both directions at once, the
// bound.

// inferResult is what overlap infer measured in memory, as printed and
// as JSON.
type inferResult struct {
	Simulated bool `json:"simulated"`
	// TimingOnly says that the simulator moved no bytes and computed
	// nothing (--timing-only).
	TimingOnly bool   `json:"timing_only,omitempty"`
	Profile    string `json:"profile,omitempty"`
	Backend    string `json:"backend"`
	Model      string `json:"model"`
	// Widths are the input width and each layer's output width.
	Widths      []int   `json:"widths"`
	Activation  string  `json:"activation"`
	From        string  `json:"activation_from"`
	Precision   string  `json:"precision"`
	Rows        int     `json:"rows"`
	InBytes     int64   `json:"in_bytes"`
	OutBytes    int64   `json:"out_bytes"`
	ParamBytes  int64   `json:"param_bytes"`
	FLOPsPerRow float64 `json:"flops_per_row"`
	// Input says where the rows came from: overlap's pattern, or a file.
	Input string `json:"input"`
	// ChunkRows is the fastest chunk size, whose run is the pipeline's
	// row of Modes and whose stages bound it.
	ChunkRows int    `json:"chunk_rows"`
	Slots     int    `json:"slots"`
	HostMode  string `json:"host_mode"`
	// RegisterMs is the time taken to page-lock the rows in place, once
	// (not part of any run's time).
	RegisterMs float64 `json:"register_ms"`
	// Chunks are each chunk size's runs.
	Chunks []inferChunk `json:"chunks"`
	Modes  []inferRow   `json:"modes"`
	Stages stagesJSON   `json:"stage_bound"`
	// Efficiency is the stage bound over the pipeline's median time.
	Efficiency float64 `json:"efficiency"`
	// Notes are what the simulator says about kernels its profile has no
	// cost for (Report.Notes).
	Notes    []string `json:"notes,omitempty"`
	UploadMs float64  `json:"upload_ms"`
	Verified string   `json:"verified"`
	// VerifyMs is the wall time that --verify took on the CPU.
	VerifyMs float64 `json:"verify_ms,omitempty"`
	// Tolerance says how --verify bounds each value's error.
	Tolerance string  `json:"tolerance,omitempty"`
	WarmUpMs  float64 `json:"warm_up_ms,omitempty"`
}

// inferChunk is one chunk size's timed runs.
type inferChunk struct {
	ChunkRows  int       `json:"chunk_rows"`
	Ms         float64   `json:"ms"` // the median
	MinMs      float64   `json:"min_ms"`
	RowsPerSec float64   `json:"rows_per_s"`
	GBps       float64   `json:"gb_per_s"`
	RunsMs     []float64 `json:"runs_ms"`
}

// inferRow is one way of running the rows.
type inferRow struct {
	modeRow
	MinMs      float64 `json:"min_ms,omitempty"`
	RowsPerSec float64 `json:"rows_per_s"`
	ChunkRows  int     `json:"chunk_rows,omitempty"`
}

// inMemoryRun is an in-memory run's result and its rows: x the input,
// y the output of a run at the fastest chunk size (when verified or
// compared; else of the last run).
type inMemoryRun struct {
	*inferResult
	x, y []float32
}

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
	cfgs := make([]pipeline.Config, len(chunks))
	for i, c := range chunks {
		cfg, err := m.Config(c)
		if err != nil {
			return nil, usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
		}
		if n := (int64(rows) + int64(c) - 1) / int64(c); o.run.sim && n > maxSimChunks {
			return nil, usageError{fmt.Errorf("--chunk %d cuts --rows %d into %d chunks; the simulator takes at most %d: use a larger --chunk", c, rows, n, maxSimChunks)}
		}
		// The runs use registered rows in place: no staging slots.
		cfg.Host = pipeline.HostPinned
		cfgs[i] = cfg
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()

	res := &inferResult{Simulated: o.run.sim, TimingOnly: o.timingOnly, Backend: envBackend(e), Model: m.String(), Widths: m.Widths(),
		Activation: m.Activation.String(), From: m.ActivationFrom, Precision: o.precision.String(), Rows: rows,
		InBytes: inBytes, OutBytes: outBytes, ParamBytes: m.ParamBytes(), FLOPsPerRow: m.FLOPsPerRow(), Input: "generated: overlap's standard pattern"}
	if e.sim != nil {
		res.Profile = profileLabel(&o.run, e.sim.Profile())
	}
	x := make([]float32, rows*m.In())
	switch {
	case o.inputFile != "":
		prog.say("reading %d rows from %s…", rows, o.inputFile)
		if err := readRowsFile(o.inputFile, x); err != nil {
			return nil, err
		}
		res.Input = o.inputFile
	case o.timingOnly:
		res.Input = "none: the simulator moved no bytes (--timing-only)"
	default:
		prog.say("generating %d rows…", rows)
		kernels.FillPattern(x, 0)
	}
	y := make([]float32, rows*m.Out())
	run := &inMemoryRun{inferResult: res, x: x, y: y}
	slice := pipeline.Job{N: rows, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(x, m.In())}, Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())}}
	if !o.run.sim {
		res.WarmUpMs = ms(defaultWarm)
	}
	warm := func(g *pipeline.Group, job pipeline.Job) error {
		if o.run.sim {
			return nil
		}
		prog.say("warming up the GPU…")
		return g.Warm(ctx, job, defaultWarm)
	}
	verified := 0
	check := func(what string) error {
		if !o.verify {
			return nil
		}
		prog.say("verifying %s…", what)
		t0 := time.Now()
		err := m.Verify(x, y, model.VerifyOptions{Precision: o.precision})
		res.VerifyMs += ms(time.Since(t0))
		if err != nil {
			return fmt.Errorf("%s gave wrong results: %w", what, err)
		}
		verified++
		return nil
	}
	row := func(mode string, d time.Duration) inferRow {
		r := inferRow{modeRow: modeRow{Mode: mode, Ms: ms(d), GBps: gbps(inBytes+outBytes, d)}}
		if d > 0 {
			r.RowsPerSec = float64(rows) / d.Seconds()
		}
		return r
	}

	// The synchronous baseline, from pageable memory: before the rows
	// are registered.
	g, err := pipeline.NewGroup(e.backends, cfgs[0])
	if err != nil {
		return nil, err
	}
	closeG := func() {
		if g != nil {
			g.Close()
			g = nil
		}
	}
	defer func() { closeG() }()
	var baseline time.Duration
	if !o.noBaseline {
		if err := warm(g, slice); err != nil {
			return nil, err
		}
		prog.say("synchronous baseline…")
		if baseline, err = pipeline.Synchronous(ctx, e.backend, cfgs[0], slice); err != nil {
			return nil, fmt.Errorf("synchronous baseline: %w", err)
		}
		if err := check("the synchronous baseline"); err != nil {
			return nil, err
		}
		r := row("synchronous", baseline)
		r.Speedup = 1
		res.Modes = append(res.Modes, r)
	}

	// The rows, page-locked once for every run.
	prog.say("registering the rows…")
	t0 := time.Now()
	xr, err := e.backend.Register(driver.Bytes(x))
	if err != nil {
		return nil, fmt.Errorf("registering the input: %w", err)
	}
	defer xr.Close()
	yr, err := e.backend.Register(driver.Bytes(y))
	if err != nil {
		return nil, fmt.Errorf("registering the output: %w", err)
	}
	defer yr.Close()
	res.RegisterMs = ms(time.Since(t0))
	if o.run.sim {
		res.RegisterMs = 0 // the simulator's registration takes virtual time only
	}
	res.HostMode = "registered (page-locked once, in place)"
	job := pipeline.Job{N: rows, Kernel: k, Host: pipeline.HostPinned, Inputs: []pipeline.Buffer{pipeline.Pinned(xr)}, Outputs: []pipeline.Buffer{pipeline.Pinned(yr)}}

	// Each chunk size: an untimed run on a GPU, then --repeat timed runs;
	// the fastest median is kept, with its group.
	var best *pipeline.Group
	defer func() {
		if best != nil {
			best.Close()
		}
	}()
	bestAt := -1
	var notes []string
	for i, cfg := range cfgs {
		if g == nil {
			if g, err = pipeline.NewGroup(e.backends, cfg); err != nil {
				return nil, err
			}
		}
		if err := warm(g, job); err != nil {
			return nil, err
		}
		if !o.run.sim {
			prog.say("chunk %d: an untimed run…", chunks[i])
			if _, err := g.Run(ctx, job); err != nil {
				return nil, err
			}
		}
		var runs []time.Duration
		for r := 0; r < o.repeat; r++ {
			prog.say("chunk %d: run %d of %d…", chunks[i], r+1, o.repeat)
			rep, err := g.Run(ctx, job)
			if err != nil {
				return nil, err
			}
			runs = append(runs, rep.Elapsed)
			notes = appendNew(notes, rep.Notes...)
			res.UploadMs = max(res.UploadMs, ms(rep.Upload))
		}
		c := inferChunk{ChunkRows: g.Config().ChunkElems}
		sorted := slices.Clone(runs)
		slices.Sort(sorted)
		med := medianDuration(sorted)
		c.Ms, c.MinMs, c.GBps = ms(med), ms(sorted[0]), gbps(inBytes+outBytes, med)
		if med > 0 {
			c.RowsPerSec = float64(rows) / med.Seconds()
		}
		for _, d := range runs {
			c.RunsMs = append(c.RunsMs, ms(d))
		}
		res.Chunks = append(res.Chunks, c)
		if bestAt < 0 || c.Ms < res.Chunks[bestAt].Ms {
			if best != nil {
				best.Close()
			}
			best, g, bestAt = g, nil, i
		} else {
			closeG()
		}
	}
	res.Notes = notes
	bc := res.Chunks[bestAt]
	res.ChunkRows, res.Slots = bc.ChunkRows, best.Config().Slots

	// The stages alone at the fastest chunk size, and the copies in both
	// directions at once.
	if err := warm(best, job); err != nil {
		return nil, err
	}
	prog.say("timing each stage alone…")
	gst, err := best.StageTimes(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("stage timing: %w", err)
	}
	st := gst.StageTimes
	if len(e.backends) == 1 {
		// A group of one measures no copies both ways (one device's copy
		// engines overlap at full speed), but the H200's host link gives
		// both directions at once less than each alone (101.5 against
		// 2 × 54.9 GB/s): it bounds a job whose copies are as long.
		prog.say("timing the copies both ways at once…")
		if st.Copies, err = copiesAtOnce(ctx, e.backend, xr, yr, 4*m.In(), 4*m.Out(), bc.ChunkRows, rows); err != nil {
			return nil, fmt.Errorf("timing the copies both ways at once: %w", err)
		}
	}
	res.Stages = stagesJSON{StageInMs: ms(st.In), H2DMs: ms(st.H2D), ComputeMs: ms(st.Compute), D2HMs: ms(st.D2H),
		StageOutMs: ms(st.Out), CopiesMs: ms(st.Copies), StagingMs: ms(st.Staging), BoundMs: ms(st.Bound()), Slowest: st.Slowest().String()}
	pr := inferRow{modeRow: modeRow{Mode: "pipeline", Ms: bc.Ms, GBps: bc.GBps}, MinMs: bc.MinMs, RowsPerSec: bc.RowsPerSec, ChunkRows: bc.ChunkRows}
	if baseline > 0 && bc.Ms > 0 {
		pr.Speedup = ms(baseline) / bc.Ms
	}
	if st.Bound() > 0 && bc.Ms > 0 {
		pr.Efficiency = ms(st.Bound()) / bc.Ms
		res.Efficiency = pr.Efficiency
	}
	res.Modes = append(res.Modes, pr)

	// The output checked, or compared by the caller, is the fastest chunk
	// size's: one more run (the copies timed above wrote over the output).
	if o.verify || o.reference {
		clear(y)
		prog.say("chunk %d: a run to verify…", bc.ChunkRows)
		if _, err := best.Run(ctx, job); err != nil {
			return nil, err
		}
		if err := check(fmt.Sprintf("the pipeline (chunk %d)", bc.ChunkRows)); err != nil {
			return nil, err
		}
	}
	switch {
	case o.timingOnly:
		res.Verified = "not verified: the simulator computed nothing (--timing-only)"
	case o.verify:
		res.Verified = fmt.Sprintf("every value of %d run(s) matched the float64 CPU reference within the %s error bound (verified in %.1f s on %d CPUs)", verified, o.precision, res.VerifyMs/1e3, runtime.GOMAXPROCS(0))
		res.Tolerance = o.precision.Tolerance()
	default:
		res.Verified = "not verified (--verify checks every value against the float64 CPU reference)"
	}
	return run, nil
}

// medianDuration is the middle of sorted durations (the mean of the two middle
// ones for an even count).
func medianDuration(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// appendNew appends each of vs that list does not hold yet.
func appendNew(list []string, vs ...string) []string {
	for _, v := range vs {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
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
