package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// overlap infer runs a PyTorch-trained MLP (a safetensors file of
// nn.Sequential Linear layers) over rows of float32: streaming files with
// bounded memory (--in, --out), or in memory over generated rows (--rows)
// against the synchronous baseline, as overlap run does for a kernel.

const inferUsage = "overlap infer --model FILE (--rows N | --in FILE --out FILE | --gen-input FILE --rows N) [flags]\n" +
	"       overlap infer --gen-model FILE --widths 768,256,16 [--activation relu|gelu] [--seed N]\n\n" +
	"Runs an MLP saved by safetensors.torch.save_file(model.state_dict(), FILE) over rows of raw\n" +
	"little-endian float32 (row-major, the model's input width per row; in PyTorch, x.numpy().tofile(F)).\n" +
	"--rows N runs N generated rows in memory: the synchronous baseline, then the pipeline, and each stage\n" +
	"alone; --in/--out streams a file (- for stdin/stdout) through the model with bounded memory."

// inferOptions are overlap infer's parsed flags.
type inferOptions struct {
	model, in, out     string
	genModel, genInput string
	widths             []int
	seed               uint64
	rows               int
	precision          model.Precision
	activation         model.Activation
	chunk              int
	repeat             int
	verify             bool
	jsonOut, quiet     bool
	noBaseline         bool
	// run holds the machine's flags, shared with overlap run: --sim and
	// --devices.
	run runOptions
}

// precisionFlag reads --precision.
type precisionFlag struct{ p *model.Precision }

func (f precisionFlag) String() string {
	if f.p == nil {
		return model.FP32.String()
	}
	return f.p.String()
}

func (f precisionFlag) Set(s string) error {
	p, err := model.ParsePrecision(s)
	if err != nil {
		return fmt.Errorf("want fp32 or tf32, not %q", s)
	}
	*f.p = p
	return nil
}

// activationFlag reads --activation.
type activationFlag struct{ a *model.Activation }

func (f activationFlag) String() string {
	if f.a == nil || *f.a == 0 {
		return ""
	}
	return f.a.String()
}

func (f activationFlag) Set(s string) error {
	a, err := model.ParseActivation(s)
	if err != nil {
		return fmt.Errorf("want relu or gelu, not %q", s)
	}
	*f.a = a
	return nil
}

// widthsFlag reads --widths 768,256,16.
type widthsFlag struct{ w *[]int }

func (f widthsFlag) String() string {
	if f.w == nil {
		return ""
	}
	parts := make([]string, len(*f.w))
	for i, v := range *f.w {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}

func (f widthsFlag) Set(s string) error {
	var ws []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v <= 0 || v > 1<<20 {
			return fmt.Errorf("%q is not a width (want positive integers up to %d, such as 768,256,16)", strings.TrimSpace(p), 1<<20)
		}
		ws = append(ws, v)
	}
	if len(ws) < 2 {
		return fmt.Errorf("%q: want the input width and at least one layer's, such as 768,256,16", s)
	}
	*f.w = ws
	return nil
}

func inferFlags(o *inferOptions) *flag.FlagSet {
	fs := newFlags("infer")
	fs.StringVar(&o.model, "model", "", "the model: a safetensors `FILE` of nn.Sequential Linear layers (N.weight [out, in], N.bias)")
	fs.StringVar(&o.in, "in", "", "stream this `FILE` of float32 rows through the model (- for stdin)")
	fs.StringVar(&o.out, "out", "", "write the outputs to this `FILE` (- for stdout; the report then goes to stderr)")
	fs.Var(sizeFlag{v: &o.rows}, "rows", "run `N` generated rows in memory (sizes take K, M, G); with --gen-input, the rows to write")
	fs.Var(precisionFlag{&o.precision}, "precision", "the layers' arithmetic, `fp32|tf32`: tf32 runs on the tensor cores, each product's factors rounded to a 10-bit mantissa (default fp32)")
	fs.Var(activationFlag{&o.activation}, "activation", "the activation between layers, `relu|gelu` (default: the file's \"activation\" metadata, else relu)")
	fs.Var(sizeFlag{v: &o.chunk}, "chunk", "`ROWS` per chunk (default 16384, fewer for rows wider than 1K values)")
	fs.IntVar(&o.repeat, "repeat", 3, "pipeline runs in memory (the best is reported)")
	fs.BoolVar(&o.verify, "verify", false, "check every output value against the float64 CPU reference (with --in, read back from the files)")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "skip the synchronous baseline")
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors")
	fs.BoolVar(&o.run.sim, "sim", false, "run on the CPU simulator instead of a GPU (times predicted from the built-in H200 profile)")
	fs.Var(devicesFlag{&o.run}, "devices", "GPUs that share the job in memory: all, or indexes such as 0,1 (a stream runs on one; with --sim: how many simulated H200s, as 0,1)")
	fs.StringVar(&o.genModel, "gen-model", "", "write a random model (PyTorch's initialisation) to this safetensors `FILE` and exit")
	fs.Var(widthsFlag{&o.widths}, "widths", "with --gen-model: the input width and each layer's output width, `W,W,...` such as 768,256,16")
	fs.Uint64Var(&o.seed, "seed", 1, "with --gen-model: the random seed")
	fs.StringVar(&o.genInput, "gen-input", "", "write --rows rows of overlap's standard pattern, the model's width, to this `FILE` and exit")
	return fs
}

func parseInferFlags(args []string, stdout io.Writer) (*inferOptions, error) {
	o := &inferOptions{}
	o.run.allDevices = true
	fs := inferFlags(o)
	if err := parseFlags(fs, inferUsage, args, stdout); err != nil {
		return nil, err
	}
	return o, checkInferOptions(fs, o)
}

func checkInferOptions(fs *flag.FlagSet, o *inferOptions) error {
	stream := o.in != "" || o.out != ""
	given := func(names ...string) string {
		for _, n := range names {
			if isSet(fs, n) {
				return n
			}
		}
		return ""
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.genModel != "":
		if f := given("model", "in", "out", "rows", "gen-input", "precision", "chunk", "repeat", "verify", "sim", "devices", "no-baseline", "json"); f != "" {
			return fmt.Errorf("--%s does not apply to --gen-model, which only writes a model", f)
		}
		if o.widths == nil {
			return errors.New("--gen-model needs --widths, such as --widths 768,256,16")
		}
		return checkWritable("gen-model", o.genModel)
	case isSet(fs, "widths") || isSet(fs, "seed"):
		return errors.New("--widths and --seed go with --gen-model FILE")
	case o.model == "":
		return errors.New("--model FILE is required (or --gen-model FILE to write one)")
	case o.genInput != "":
		if f := given("in", "out", "precision", "chunk", "repeat", "verify", "sim", "devices", "no-baseline", "json"); f != "" {
			return fmt.Errorf("--%s does not apply to --gen-input, which only writes rows", f)
		}
		if o.rows == 0 {
			return errors.New("--gen-input needs --rows N")
		}
		return checkWritable("gen-input", o.genInput)
	case stream && (o.in == "" || o.out == ""):
		return errors.New("a stream needs both --in FILE and --out FILE")
	case stream && isSet(fs, "rows"):
		return errors.New("--rows runs generated rows in memory; a stream's rows are its --in file's")
	case stream && (isSet(fs, "repeat") || isSet(fs, "no-baseline")):
		return errors.New("--repeat and --no-baseline apply to the in-memory run (--rows), not to a stream")
	case !stream && o.rows == 0:
		return errors.New("give --rows N (generated rows, in memory) or --in FILE --out FILE (a stream)")
	case o.repeat < 1 || o.repeat > 1000:
		return fmt.Errorf("--repeat %d: want 1 to 1000", o.repeat)
	case stream && o.in != "-" && o.in == o.out:
		return fmt.Errorf("--out %s is also the input", o.out)
	}
	if int64(o.rows) > maxElems {
		return fmt.Errorf("--rows %d: at most %d", o.rows, int64(maxElems))
	}
	if o.run.sim && o.run.allDevices {
		o.run.devices, o.run.allDevices = []int{0}, false
	}
	if stream {
		if len(o.run.devices) > 1 || isSet(fs, "devices") && o.run.allDevices {
			return errors.New("--devices: a stream runs on one GPU; several share an in-memory run (--rows)")
		}
		if o.run.allDevices {
			o.run.devices, o.run.allDevices = []int{0}, false
		}
		if o.out != "-" {
			if err := checkWritable("out", o.out); err != nil {
				return err
			}
		}
	}
	if o.quiet && o.jsonOut {
		o.quiet = false
	}
	return nil
}

func cmdInfer(args []string, stdout, stderr io.Writer) int {
	o, err := parseInferFlags(args, stdout)
	if code, done := flagFailure("infer", err, stderr); done {
		return code
	}
	if o.genModel != "" {
		act := o.activation
		if act == 0 {
			act = model.ReLU
		}
		m, err := model.Random(o.widths, act, o.seed)
		if err == nil {
			err = m.WriteFile(o.genModel)
		}
		if err != nil {
			return reportError("infer", err, stderr)
		}
		if !o.quiet {
			fmt.Fprintf(stdout, "wrote %s: a random MLP %s, %d parameters (%s), seed %d\n", o.genModel, m, m.ParamBytes()/4, humanBytes(m.ParamBytes()), o.seed)
		}
		return exitOK
	}
	m, err := loadModel(o)
	if err != nil {
		return reportError("infer", err, stderr)
	}
	if o.genInput != "" {
		if err := writeRows(o.genInput, o.rows*m.In()); err != nil {
			return reportError("infer", err, stderr)
		}
		if !o.quiet {
			fmt.Fprintf(stdout, "wrote %s: %d rows of %d float32 (%s), overlap's standard pattern\n", o.genInput, o.rows, m.In(), humanBytes(int64(o.rows)*int64(m.In())*4))
		}
		return exitOK
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if o.in != "" {
		report := stdout
		if o.out == "-" {
			report = stderr
		}
		res, err := executeInferStream(ctx, o, m, stdout, stderr)
		if err != nil {
			return reportError("infer", err, stderr)
		}
		if o.jsonOut {
			writeJSON(report, res)
		} else if !o.quiet {
			printInferStream(report, res)
		}
		return exitOK
	}
	res, err := executeInfer(ctx, o, m, stderr)
	if err != nil {
		return reportError("infer", err, stderr)
	}
	if o.jsonOut {
		writeJSON(stdout, res)
	} else if !o.quiet {
		printInfer(stdout, res)
	}
	return exitOK
}

// loadModel reads --model with --activation, refusing weights larger
// than the host can hold (the device's memory is checked once a device is
// open).
func loadModel(o *inferOptions) (*model.Model, error) {
	opts := model.Options{Activation: o.activation}
	if avail, ok := availableMemory(); ok {
		opts.MaxParamBytes = avail
	}
	m, err := model.Load(o.model, opts)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, usageError{fmt.Errorf("--model %s: %v", o.model, pe.Err)}
		}
		return nil, usageError{fmt.Errorf("--model: %s", strings.TrimPrefix(err.Error(), "model: "))}
	}
	return m, nil
}

// writeRows writes n values of overlap's standard pattern to path.
func writeRows(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = genParallel(f, n, 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// inferEnv opens the machine and readies the model's kernel on it: the
// GEMM module loaded on every GPU (a missing gemm.ptx is reported here,
// before any run) and the weights checked against each device's free
// memory.
func inferEnv(o *inferOptions, m *model.Model) (*env, *pipeline.Kernel, error) {
	ro := o.run
	ro.kernel = "seed" // openEnv loads a table kernel on each GPU; the model's GEMM is loaded below
	e, err := openEnv(&ro)
	if err != nil {
		return nil, nil, err
	}
	kopts := model.KernelOptions{Precision: o.precision}
	if !o.run.sim {
		// The first GPU loads the GEMM now, so that a missing gemm.ptx or
		// a JIT error is reported before any run; the others load it as
		// the run first launches there, and the engine checks that the
		// weights fit on each.
		g := new(kernels.GemmModules)
		e.closers = append(e.closers, g.Close) // closed before the contexts
		if _, err := g.Functions(e.ctx); err != nil {
			e.close()
			return nil, nil, err
		}
		if free, _, err := e.ctx.MemoryInfo(); err == nil {
			if err := m.CheckFits(int64(free)); err != nil {
				e.close()
				return nil, nil, usageError{fmt.Errorf("--model on GPU %d: %s", e.ordinals[0], strings.TrimPrefix(err.Error(), "model: "))}
			}
		}
		kopts.Gemm = g
	}
	k, err := m.Kernel(kopts)
	if err != nil {
		e.close()
		return nil, nil, err
	}
	return e, k, nil
}

// inferResult is what overlap infer measured in memory.
type inferResult struct {
	Simulated bool   `json:"simulated"`
	Profile   string `json:"profile,omitempty"`
	Backend   string `json:"backend"`
	Model     string `json:"model"`
	// Widths are the input width and each layer's output width.
	Widths     []int      `json:"widths"`
	Activation string     `json:"activation"`
	From       string     `json:"activation_from"`
	Precision  string     `json:"precision"`
	Rows       int        `json:"rows"`
	InBytes    int64      `json:"in_bytes"`
	OutBytes   int64      `json:"out_bytes"`
	ParamBytes int64      `json:"param_bytes"`
	ChunkRows  int        `json:"chunk_rows"`
	Slots      int        `json:"slots"`
	HostMode   string     `json:"host_mode"`
	Modes      []inferRow `json:"modes"`
	Stages     stagesJSON `json:"stage_bound"`
	Verified   string     `json:"verified"`
	// Tolerance says how --verify bounds each value's error.
	Tolerance string  `json:"tolerance,omitempty"`
	WarmUpMs  float64 `json:"warm_up_ms,omitempty"`
}

// inferRow is one way of running the rows.
type inferRow struct {
	modeRow
	RowsPerSec float64 `json:"rows_per_s"`
}

func executeInfer(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*inferResult, error) {
	rows := o.rows
	inBytes, outBytes := int64(rows)*int64(m.In())*4, int64(rows)*int64(m.Out())*4
	need := inBytes + outBytes
	if o.run.sim && !o.noBaseline {
		need += inBytes + outBytes // the baseline's simulated device arrays
	}
	if avail, ok := availableMemory(); ok && need > avail {
		return nil, usageError{fmt.Errorf("--rows %d: the rows in and out need %s of host memory, more than the %s available; use fewer --rows", rows, humanBytes(need), humanBytes(avail))}
	}
	chunk := o.chunk
	if chunk == 0 {
		// The model's default, but at least 8 chunks a device when the
		// rows are few, so that something overlaps.
		devices := max(1, len(o.run.devices))
		if o.run.allDevices {
			if n, err := driver.DeviceCount(); err == nil {
				devices = max(1, n)
			}
		}
		tile := kernels.Gemm.TileM
		few := (rows/(8*devices) + tile - 1) / tile * tile
		chunk = min(m.DefaultChunkRows(), max(tile, few), rows)
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

	res := &inferResult{Simulated: o.run.sim, Backend: e.backend.Name(), Model: m.String(), Widths: m.Widths(),
		Activation: m.Activation.String(), From: m.ActivationFrom, Precision: o.precision.String(), Rows: rows,
		InBytes: inBytes, OutBytes: outBytes, ParamBytes: m.ParamBytes()}
	if e.sim != nil {
		res.Profile = profileLabel(&o.run, e.sim.Profile())
	}
	if len(e.backends) > 1 {
		res.Backend = fmt.Sprintf("%d devices (%s)", len(e.backends), e.deviceNames())
	}
	prog.say("generating %d rows…", rows)
	x := make([]float32, rows*m.In())
	kernels.FillPattern(x, 0)
	y := make([]float32, rows*m.Out())
	job := pipeline.Job{N: rows, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(x, m.In())}, Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())}}
	g, err := pipeline.NewGroup(e.backends, cfg)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	pc := g.Config()
	res.ChunkRows, res.Slots = pc.ChunkElems, pc.Slots
	if !o.run.sim {
		res.WarmUpMs = ms(defaultWarm)
	}
	warm := func() error {
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
		if err := m.Verify(x, y, model.VerifyOptions{Precision: o.precision}); err != nil {
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
	var baseline time.Duration
	if !o.noBaseline {
		if err := warm(); err != nil {
			return nil, err
		}
		prog.say("synchronous baseline…")
		if baseline, err = pipeline.Synchronous(ctx, e.backend, cfg, job); err != nil {
			return nil, fmt.Errorf("synchronous baseline: %w", err)
		}
		if err := check("the synchronous baseline"); err != nil {
			return nil, err
		}
		r := row("synchronous", baseline)
		r.Speedup = 1
		res.Modes = append(res.Modes, r)
	}
	var best *pipeline.Report
	for r := 0; r < o.repeat; r++ {
		clear(y)
		if err := warm(); err != nil {
			return nil, err
		}
		prog.say("pipeline run %d of %d…", r+1, o.repeat)
		rep, err := g.Run(ctx, job)
		if err != nil {
			return nil, err
		}
		if best == nil || rep.Elapsed < best.Elapsed {
			best = rep
		}
	}
	if err := check("the last pipeline run"); err != nil {
		return nil, err
	}
	res.HostMode = best.Mode.String()
	stJob := job
	stJob.Host = best.Mode
	if err := warm(); err != nil {
		return nil, err
	}
	prog.say("timing each stage alone…")
	st, err := g.StageTimes(ctx, stJob)
	if err != nil {
		return nil, fmt.Errorf("stage timing: %w", err)
	}
	res.Stages = stagesJSON{StageInMs: ms(st.In), H2DMs: ms(st.H2D), ComputeMs: ms(st.Compute), D2HMs: ms(st.D2H),
		StageOutMs: ms(st.Out), CopiesMs: ms(st.Copies), StagingMs: ms(st.Staging), BoundMs: ms(st.Bound()), Slowest: st.Slowest().String()}
	pr := row("pipeline ("+best.Mode.String()+")", best.Elapsed)
	if baseline > 0 {
		pr.Speedup = float64(baseline) / float64(best.Elapsed)
	}
	if st.Bound() > 0 {
		pr.Efficiency = float64(st.Bound()) / float64(best.Elapsed)
	}
	res.Modes = append(res.Modes, pr)
	res.Verified = "not verified (--verify checks every value against the float64 CPU reference)"
	if o.verify {
		res.Verified = fmt.Sprintf("every value of %d run(s) matched the float64 CPU reference within the %s error bound", verified, o.precision)
		res.Tolerance = o.precision.Tolerance()
	}
	return res, nil
}

// modelLine describes the model and where its activation came from.
func modelLine(s, from string, layers int) string {
	if layers < 2 {
		return s
	}
	switch from {
	case "file":
		return s + " (activation from the file)"
	case "default":
		return s + " (the file names no activation: relu by default)"
	}
	return s + " (activation from --activation)"
}

func printInfer(w io.Writer, r *inferResult) {
	label := ""
	if r.Simulated {
		label = fmt.Sprintf(" [simulated on the CPU: times predicted for %s]", r.Profile)
	}
	fmt.Fprintf(w, "overlap infer: MLP %s in %s on %s, %d rows (%s in, %s out, weights %s)%s\n",
		modelLine(r.Model, r.From, len(r.Widths)-1), r.Precision, r.Backend, r.Rows, humanBytes(r.InBytes), humanBytes(r.OutBytes), humanBytes(r.ParamBytes), label)
	fmt.Fprintf(w, "chunk %d rows, %d slots, host memory %s\n\n", r.ChunkRows, r.Slots, r.HostMode)
	fmt.Fprintf(w, "%-24s %10s %12s %8s %8s %11s\n", "MODE", "TIME", "ROWS/s", "GB/s", "SPEEDUP", "EFFICIENCY")
	for _, row := range r.Modes {
		sp, eff := "-", "-"
		if row.Speedup > 0 {
			sp = fmt.Sprintf("%.2fx", row.Speedup)
		}
		if row.Efficiency > 0 {
			eff = fmt.Sprintf("%.1f%%", 100*row.Efficiency)
		}
		fmt.Fprintf(w, "%-24s %7.2f ms %12s %8.1f %8s %11s\n", row.Mode, row.Ms, humanRate(row.RowsPerSec), row.GBps, sp, eff)
	}
	fmt.Fprintln(w)
	s := r.Stages
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
	fmt.Fprintf(w, "stage bound (slowest stage alone, %s): %.2f ms (%s)\n", s.Slowest, s.BoundMs, stages)
	fmt.Fprintf(w, "efficiency = stage bound / pipeline time; %s%s\n", r.Verified, label)
	if r.WarmUpMs > 0 {
		fmt.Fprintf(w, "each timed part ran right after %.0f ms of untimed work on the GPU, which an idle GPU needs to raise its clocks\n", r.WarmUpMs)
	}
}

// humanRate renders rows per second: 12.3M/s.
func humanRate(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG/s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK/s", v/1e3)
	}
	return fmt.Sprintf("%.0f/s", v)
}

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
	PeakRSS    int64   `json:"peak_rss_bytes,omitempty"`
	// PinnedBytes is the page-locked memory of the slots, fixed by the
	// chunk and the slots whatever the length of the stream.
	PinnedBytes int64  `json:"pinned_slot_bytes"`
	Verified    string `json:"verified"`
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
	cfg, err := m.Config(o.chunk)
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
	p, err := pipeline.New(e.backend, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	pc := p.Config()
	job := pipeline.StreamJob{Kernel: k, Readers: runtime.GOMAXPROCS(0), InputNames: []string{o.in}, OutputNames: []string{o.out}}
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
	rep, err := p.RunStream(ctx, job)
	if err != nil {
		if rep != nil && len(rep.OutputBytes) == 1 {
			return nil, fmt.Errorf("%w (%s holds the first %d bytes of the correct output, %d rows)", err, o.out, rep.OutputBytes[0], rep.OutputBytes[0]/int64(4*m.Out()))
		}
		return nil, err
	}
	if outFile != nil {
		if err := outFile.Close(); err != nil {
			return nil, fmt.Errorf("closing %s: %w", o.out, err)
		}
	}
	if rep.N == 0 {
		return nil, usageError{fmt.Errorf("--in %s: the input is empty: no rows", o.in)}
	}
	res := &inferStreamResult{Simulated: o.run.sim, Backend: e.backend.Name(), Model: m.String(), Widths: m.Widths(),
		Activation: m.Activation.String(), From: m.ActivationFrom, Precision: o.precision.String(), Input: o.in, Output: o.out,
		Rows: rep.N, InBytes: rep.N * int64(4*m.In()), OutBytes: rep.OutputBytes[0], ChunkRows: pc.ChunkElems, Slots: pc.Slots,
		Ms: ms(rep.Elapsed), ReadMs: ms(rep.Read), WriteMs: ms(rep.Write), Readers: rep.Readers, Writers: rep.Writers,
		PinnedBytes: int64(pc.Slots) * int64(pc.ChunkElems) * int64(4*(m.In()+m.Out()))}
	if rep.Elapsed > 0 {
		res.RowsPerSec = float64(rep.N) / rep.Elapsed.Seconds()
		res.GBps = gbps(res.InBytes+res.OutBytes, rep.Elapsed)
	}
	res.PeakRSS, _ = peakRSS()
	switch {
	case !o.verify:
		res.Verified = "not verified (--verify reads the files back and checks every value)"
	case o.in == "-" || o.out == "-":
		res.Verified = "not verified: stdin or stdout cannot be read back"
	case !regularOrNew(o.out) || total < 0:
		res.Verified = "not verified: the input or the output is not a regular file"
	default:
		prog.say("verifying every value of %s…", o.out)
		if err := verifyInferFiles(o, m, rep.N); err != nil {
			return nil, fmt.Errorf("verifying %s: %w", o.out, err)
		}
		res.Verified = fmt.Sprintf("every one of the %d rows' %d values, read back from %s, matched the float64 CPU reference within the %s error bound", rep.N, rep.N*int64(m.Out()), o.out, o.precision)
	}
	return res, nil
}

// inferVerifyRows is the rows verifyInferFiles reads at a time.
const inferVerifyRows = 1 << 16

// verifyInferFiles reads the input and the output back, a block of rows
// at a time, and checks every output value against the reference.
func verifyInferFiles(o *inferOptions, m *model.Model, rows int64) error {
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
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + humanBytes(r.PeakRSS)
	}
	fmt.Fprintf(w, "%s; pinned slots %s\n%s%s\n", rss, humanBytes(r.PinnedBytes), r.Verified, label)
}
