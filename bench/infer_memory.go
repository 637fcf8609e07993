package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The in-memory run of a model: the rows (generated, or the caller's) in
// Go memory, registered in place once, so that every chunk size runs
// from the same page-locked memory, as PyTorch's pinned tensors do; each
// chunk size's runs, the median kept; then, at the fastest chunk size,
// each stage alone and the copies in both directions at once, the bound.

// InferResult is what [InferInMemory] measured, as overlap infer prints
// it and as JSON.
type InferResult struct {
	Simulated bool `json:"simulated"`
	// TimingOnly says that the simulator moved no bytes and computed
	// nothing.
	TimingOnly bool `json:"timing_only,omitempty"`
	// Profile names the simulator's profile; the caller fills it in.
	Profile string `json:"profile,omitempty"`
	Backend string `json:"backend"`
	Model   string `json:"model"`
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
	Chunks []InferChunk `json:"chunks"`
	Modes  []InferRow   `json:"modes"`
	Stages Stages       `json:"stage_bound"`
	// Efficiency is the stage bound over the pipeline's median time.
	Efficiency float64 `json:"efficiency"`
	// Notes are what the simulator says about kernels its profile has no
	// cost for (Report.Notes).
	Notes    []string `json:"notes,omitempty"`
	UploadMs float64  `json:"upload_ms"`
	Verified string   `json:"verified"`
	// VerifyMs is the wall time that the verification took on the CPU.
	VerifyMs float64 `json:"verify_ms,omitempty"`
	// Tolerance says how the verification bounds each value's error.
	Tolerance string  `json:"tolerance,omitempty"`
	WarmUpMs  float64 `json:"warm_up_ms,omitempty"`
	// X are the input rows and Y the output of a run at the fastest chunk
	// size (with Verify or KeepOutput; else of the last run).
	X, Y []float32 `json:"-"`
}

// InferChunk is one chunk size's timed runs.
type InferChunk struct {
	ChunkRows  int       `json:"chunk_rows"`
	Ms         float64   `json:"ms"` // the median
	MinMs      float64   `json:"min_ms"`
	RowsPerSec float64   `json:"rows_per_s"`
	GBps       float64   `json:"gb_per_s"`
	RunsMs     []float64 `json:"runs_ms"`
}

// InferRow is one way of running the rows: the synchronous baseline or
// the pipeline at its fastest chunk size.
type InferRow struct {
	Mode       string  `json:"mode"`
	Ms         float64 `json:"ms"`
	GBps       float64 `json:"gb_per_s"`
	Speedup    float64 `json:"speedup"`
	Efficiency float64 `json:"efficiency,omitempty"`
	MinMs      float64 `json:"min_ms,omitempty"`
	RowsPerSec float64 `json:"rows_per_s"`
	ChunkRows  int     `json:"chunk_rows,omitempty"`
}

// InferOptions say what [InferInMemory] runs. Rows is required; the
// other zero fields run one chunk size (model.Model.ChunkRowsFor), once, with
// the baseline, on generated rows, unverified.
type InferOptions struct {
	Rows int
	// Chunks are the chunk sizes in rows, each run and the fastest kept
	// (nil: one, m.ChunkRowsFor the rows over the backends).
	Chunks []int
	// Repeat is each chunk size's timed runs, the median kept (0: 1).
	Repeat    int
	Precision model.Precision
	// X, when not nil, are the input rows (Rows × the model's input
	// width), and InputName where they came from; else overlap's pattern
	// is generated.
	X         []float32
	InputName string
	// NoBaseline skips the synchronous baseline.
	NoBaseline bool
	// TimingOnly says that the backends are timing-only simulated devices,
	// which move no bytes: no rows are generated, none verified.
	TimingOnly bool
	// Verify checks every value of each run against the float64 CPU
	// reference; KeepOutput runs the fastest chunk size once more at the
	// end, so that Y is its output.
	Verify, KeepOutput bool
	// Warm is the untimed work on the GPU before each chunk size and the
	// stages, which an idle GPU needs to raise its clocks (0: none).
	Warm time.Duration
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// InferInMemory runs o.Rows rows through m (its kernel k, from m.Kernel)
// on the group of backends: the synchronous baseline from pageable
// memory, then the rows registered in place once and each chunk size's
// runs, then at the fastest chunk size each stage alone and (on one
// device) the copies both ways at once, the stage bound.
func InferInMemory(ctx context.Context, backends []pipeline.Backend, k *pipeline.Kernel, m *model.Model, o InferOptions) (*InferResult, error) {
	res, err := inferInMemory(ctx, backends, k, m, o)
	if err != nil {
		return nil, &Error{Op: "InferInMemory", Err: err}
	}
	return res, nil
}

func inferInMemory(ctx context.Context, backends []pipeline.Backend, k *pipeline.Kernel, m *model.Model, o InferOptions) (*InferResult, error) {
	switch {
	case len(backends) == 0 || backends[0] == nil || k == nil || m == nil:
		return nil, errors.New("no backend, kernel or model")
	case o.Rows < 1:
		return nil, fmt.Errorf("%d rows: want at least 1", o.Rows)
	case o.X != nil && len(o.X) != o.Rows*m.In():
		return nil, fmt.Errorf("%d input values: %d rows of %d need %d", len(o.X), o.Rows, m.In(), o.Rows*m.In())
	}
	rows := o.Rows
	repeat := max(1, o.Repeat)
	inBytes, outBytes := int64(rows)*int64(m.In())*4, int64(rows)*int64(m.Out())*4
	chunks := o.Chunks
	if len(chunks) == 0 {
		chunks = []int{m.ChunkRowsFor(rows, len(backends))}
	}
	cfgs := make([]pipeline.Config, len(chunks))
	for i, c := range chunks {
		cfg, err := m.Config(c)
		if err != nil {
			return nil, err
		}
		// The runs use registered rows in place: no staging slots.
		cfg.Host = pipeline.HostPinned
		cfgs[i] = cfg
	}
	b := backends[0]
	_, sim := b.(*sim.Sim)
	res := &InferResult{Simulated: sim, TimingOnly: o.TimingOnly, Backend: BackendName(backends), Model: m.String(), Widths: m.Widths(),
		Activation: m.Activation.String(), From: m.ActivationFrom, Precision: o.Precision.String(), Rows: rows,
		InBytes: inBytes, OutBytes: outBytes, ParamBytes: m.ParamBytes(), FLOPsPerRow: m.FLOPsPerRow(), Input: "generated: overlap's standard pattern"}
	x := o.X
	switch {
	case x != nil:
		res.Input = o.InputName
	case o.TimingOnly:
		x = make([]float32, rows*m.In())
		res.Input = "none: the simulator moved no bytes (TimingOnly)"
	default:
		x = make([]float32, rows*m.In())
		say(o.Progress, "generating %d rows…", rows)
		kernels.FillPattern(x, 0)
	}
	y := make([]float32, rows*m.Out())
	res.X, res.Y = x, y
	slice := pipeline.Job{N: rows, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(x, m.In())}, Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())}}
	if o.Warm > 0 {
		res.WarmUpMs = ms(o.Warm)
	}
	warm := func(g *pipeline.Group, job pipeline.Job) error {
		if o.Warm <= 0 {
			return nil
		}
		say(o.Progress, "warming up the GPU…")
		return g.Warm(ctx, job, o.Warm)
	}
	verified := 0
	check := func(what string) error {
		if !o.Verify {
			return nil
		}
		say(o.Progress, "verifying %s…", what)
		t0 := time.Now()
		err := m.Verify(x, y, model.VerifyOptions{Precision: o.Precision})
		res.VerifyMs += ms(time.Since(t0))
		if err != nil {
			return fmt.Errorf("%s gave wrong results: %w", what, err)
		}
		verified++
		return nil
	}
	row := func(mode string, d time.Duration) InferRow {
		r := InferRow{Mode: mode, Ms: ms(d), GBps: gbps(inBytes+outBytes, d)}
		if d > 0 {
			r.RowsPerSec = float64(rows) / d.Seconds()
		}
		return r
	}

	// The synchronous baseline, from pageable memory: before the rows
	// are registered.
	g, err := pipeline.NewGroup(backends, cfgs[0])
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
	if !o.NoBaseline {
		if err := warm(g, slice); err != nil {
			return nil, err
		}
		say(o.Progress, "synchronous baseline…")
		if baseline, err = pipeline.Synchronous(ctx, b, cfgs[0], slice); err != nil {
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
	say(o.Progress, "registering the rows…")
	t0 := time.Now()
	xr, err := b.Register(driver.Bytes(x))
	if err != nil {
		return nil, fmt.Errorf("registering the input: %w", err)
	}
	defer xr.Close()
	yr, err := b.Register(driver.Bytes(y))
	if err != nil {
		return nil, fmt.Errorf("registering the output: %w", err)
	}
	defer yr.Close()
	res.RegisterMs = ms(time.Since(t0))
	if sim {
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
			if g, err = pipeline.NewGroup(backends, cfg); err != nil {
				return nil, err
			}
		}
		if err := warm(g, job); err != nil {
			return nil, err
		}
		if !sim {
			say(o.Progress, "chunk %d: an untimed run…", chunks[i])
			if _, err := g.Run(ctx, job); err != nil {
				return nil, err
			}
		}
		var runs []time.Duration
		for r := 0; r < repeat; r++ {
			say(o.Progress, "chunk %d: run %d of %d…", chunks[i], r+1, repeat)
			rep, err := g.Run(ctx, job)
			if err != nil {
				return nil, err
			}
			runs = append(runs, rep.Elapsed)
			notes = appendNew(notes, rep.Notes...)
			res.UploadMs = max(res.UploadMs, ms(rep.Upload))
		}
		c := InferChunk{ChunkRows: g.Config().ChunkElems}
		sorted := slices.Clone(runs)
		slices.Sort(sorted)
		med := median(sorted)
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
	say(o.Progress, "timing each stage alone…")
	gst, err := best.StageTimes(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("stage timing: %w", err)
	}
	st := gst.StageTimes
	if len(backends) == 1 {
		// A group of one measures no copies both ways (one device's copy
		// engines overlap at full speed), but the H200's host link gives
		// both directions at once less than each alone (101.5 against
		// 2 × 54.9 GB/s): it bounds a job whose copies are as long.
		say(o.Progress, "timing the copies both ways at once…")
		if st.Copies, err = copiesAtOnce(ctx, b, xr, yr, 4*m.In(), 4*m.Out(), bc.ChunkRows, rows); err != nil {
			return nil, fmt.Errorf("timing the copies both ways at once: %w", err)
		}
	}
	res.Stages = stagesOf(st)
	pr := InferRow{Mode: "pipeline", Ms: bc.Ms, GBps: bc.GBps, MinMs: bc.MinMs, RowsPerSec: bc.RowsPerSec, ChunkRows: bc.ChunkRows}
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
	if o.Verify || o.KeepOutput {
		clear(y)
		say(o.Progress, "chunk %d: a run to verify…", bc.ChunkRows)
		if _, err := best.Run(ctx, job); err != nil {
			return nil, err
		}
		if err := check(fmt.Sprintf("the pipeline (chunk %d)", bc.ChunkRows)); err != nil {
			return nil, err
		}
	}
	switch {
	case o.TimingOnly:
		res.Verified = "not verified: the simulator computed nothing (TimingOnly)"
	case o.Verify:
		res.Verified = fmt.Sprintf("every value of %d run(s) matched the float64 CPU reference within the %s error bound (verified in %.1f s on %d CPUs)", verified, o.Precision, res.VerifyMs/1e3, runtime.GOMAXPROCS(0))
		res.Tolerance = o.Precision.Tolerance()
	default:
		res.Verified = "not verified (Verify checks every value against the float64 CPU reference)"
	}
	return res, nil
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
