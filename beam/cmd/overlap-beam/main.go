// Command overlap-beam runs overlap's engine over a set of shard files as an
// Apache Beam pipeline: each shard (a file of raw little-endian float32
// rows) goes through an embedded kernel, or a PyTorch-trained MLP, on a GPU
// of whichever worker takes it, and its output goes to
// OUTPUT/<shard's base name>.out.
//
//	overlap-beam --input 'data/*.f32' --output out/ [--sim] [--kernel seed --iters N]
//	overlap-beam --input 'rows/*.f32' --output out/ --model mlp.safetensors [--precision fp32|tf32] [--activation relu|gelu] [--chunk ROWS]
//
// It runs on prism, Beam's embedded runner, in this process unless Beam's
// --runner flag names another (dataflow, flink, universal, direct, …); the
// same binary is the worker that such a runner starts. Shards that are not
// a whole number of rows are listed in OUTPUT/_failed.jsonl and make the
// exit status 1, after every other shard is done. Exit status 2 is a
// mistake in the flags.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"
	"github.com/purecuda/overlap/beam/shard"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// options are overlap-beam's own flags; Beam's (--runner and the runners'
// own) are on the same command line.
type options struct {
	input, output  string
	sim            bool
	kernel         string
	iters          int
	model          string
	precision      string
	activation     string
	devices        string
	chunk          sizeValue
	slots          int
	computeStreams int
	verify         bool
	closeWait      time.Duration
}

func defineFlags(fs *flag.FlagSet) *options {
	o := &options{}
	fs.StringVar(&o.input, "input", "", "glob of shard files, as the workers see them (required)")
	fs.StringVar(&o.output, "output", "", "directory for the outputs (<shard>.out) and the dead letter "+shard.FailedFile+" (required)")
	fs.BoolVar(&o.sim, "sim", false, "run on the CPU simulator of an H200 instead of a GPU")
	fs.StringVar(&o.kernel, "kernel", "", "embedded kernel with one input and one output: seed or axpb (default seed)")
	fs.IntVar(&o.iters, "iters", 0, "the seed kernel's iterations (default 100)")
	fs.StringVar(&o.model, "model", "", "run this MLP instead of a kernel: a safetensors `FILE` of nn.Sequential Linear layers, as the workers see it; a row is its input width of float32")
	fs.StringVar(&o.precision, "precision", "", "with --model, the layers' arithmetic, `fp32|tf32` (default fp32)")
	fs.StringVar(&o.activation, "activation", "", "with --model, the activation between layers, `relu|gelu` (default: the file's \"activation\" metadata, else relu)")
	fs.StringVar(&o.devices, "devices", "", "GPUs each worker opens an engine on: all, or ordinals such as 0,1 (default: $"+shard.DevicesEnv+" on the worker, else all it sees)")
	fs.Var(&o.chunk, "chunk", "elements per chunk, K and M binary (default 1M); with --model, `ROWS` per chunk (default 16384, fewer for rows wider than 1K values)")
	fs.IntVar(&o.slots, "slots", 0, "pipeline buffer slots (default compute-streams+2)")
	fs.IntVar(&o.computeStreams, "compute-streams", 0, "streams kernels go to (default 4)")
	fs.BoolVar(&o.verify, "verify", false, "after the run, read every input and output back here and check each element against the CPU reference (local files only)")
	fs.DurationVar(&o.closeWait, "close-wait", 30*time.Second, "how long to wait after the run for the in-process engines to close")
	return o
}

// sizeValue is a count of elements with an optional K or M (binary) suffix.
type sizeValue int

func (s *sizeValue) String() string { return strconv.Itoa(int(*s)) }

func (s *sizeValue) Set(v string) error {
	mult := 1
	switch {
	case strings.HasSuffix(v, "K"):
		mult, v = 1<<10, strings.TrimSuffix(v, "K")
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<20, strings.TrimSuffix(v, "M")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > (1<<30)/mult {
		return errors.New("want a positive count of elements, such as 65536, 64K or 1M, at most 1G")
	}
	*s = sizeValue(n * mult)
	return nil
}

func main() {
	o := defineFlags(flag.CommandLine)
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: overlap-beam --input GLOB --output DIR [--sim] [--kernel seed --iters N | --model FILE [--precision fp32|tf32] [--activation relu|gelu]] [Beam flags such as --runner]")
		flag.PrintDefaults()
	}
	flag.Parse()
	// A worker started by a runner (--worker) runs the Beam harness here
	// and never returns.
	beam.Init()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o, flag.Args(), os.Stdout, os.Stderr))
}

// spec is the shard Spec the flags ask for: the mlp processor with
// --model, else the kernel processor.
func (o *options) spec() (shard.Spec, error) {
	s := shard.Spec{Sim: o.sim, Kernel: o.kernel, Iters: o.iters, ChunkElems: int(o.chunk), Slots: o.slots, ComputeStreams: o.computeStreams}
	if o.model != "" {
		s.Processor, s.Model, s.Precision, s.Activation = "mlp", o.model, o.precision, o.activation
	}
	if o.devices != "" {
		ds, err := shard.ParseDevices(o.devices)
		if err != nil {
			return s, fmt.Errorf("--devices: %w", err)
		}
		s.Devices = ds
	}
	return s, nil
}

// job is what the flags run: the Spec, and with --model the model as the
// launcher read it (for --verify and the summary) and its precision.
type job struct {
	spec shard.Spec
	m    *model.Model
	prec model.Precision
}

// check validates the flags before any work starts.
func (o *options) check(args []string) (job, error) {
	spec, err := o.checkSpec(args)
	j := job{spec: spec}
	if err != nil || o.model == "" {
		return j, err
	}
	// The launcher reads the model too, so that a bad file, flag or
	// chunk is reported here rather than by every worker.
	if o.precision != "" {
		if j.prec, err = model.ParsePrecision(o.precision); err != nil {
			return j, fmt.Errorf("--precision: want fp32 or tf32, not %q", o.precision)
		}
	}
	var act model.Activation
	if o.activation != "" {
		if act, err = model.ParseActivation(o.activation); err != nil {
			return j, fmt.Errorf("--activation: want relu or gelu, not %q", o.activation)
		}
	}
	if j.m, err = model.Load(o.model, model.Options{Activation: act}); err != nil {
		return j, fmt.Errorf("--model: %s", strings.TrimPrefix(err.Error(), "model: "))
	}
	if _, err := j.m.Config(int(o.chunk)); err != nil {
		return j, fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))
	}
	return j, nil
}

func (o *options) checkSpec(args []string) (shard.Spec, error) {
	switch {
	case len(args) > 0:
		return shard.Spec{}, fmt.Errorf("unexpected argument %q", args[0])
	case o.input == "":
		return shard.Spec{}, errors.New("--input GLOB is required")
	case o.output == "":
		return shard.Spec{}, errors.New("--output DIR is required")
	case o.iters < 0:
		return shard.Spec{}, fmt.Errorf("--iters %d: must not be negative", o.iters)
	case o.slots < 0 || o.computeStreams < 0:
		return shard.Spec{}, errors.New("--slots and --compute-streams must not be negative")
	case o.model != "" && (o.kernel != "" || o.iters != 0):
		return shard.Spec{}, errors.New("--kernel and --iters choose an embedded kernel; --model runs the model instead")
	case o.model == "" && (o.precision != "" || o.activation != ""):
		return shard.Spec{}, errors.New("--precision and --activation go with --model FILE")
	}
	spec, err := o.spec()
	if err != nil {
		return spec, err
	}
	if o.model == "" {
		if _, _, err := shard.KernelScalars(spec); err != nil {
			return spec, fmt.Errorf("--kernel: %w", err)
		}
	}
	// Outputs are named after their shards' base names: two shards of one
	// name would write one output. The check sees local files only.
	if matches, err := filepath.Glob(o.input); err != nil {
		return spec, fmt.Errorf("--input: %w", err)
	} else {
		seen := map[string]string{}
		for _, m := range matches {
			b := filepath.Base(m)
			if prev, ok := seen[b]; ok {
				return spec, fmt.Errorf("--input: %s and %s have one base name, so one output name (%s)", prev, m, filepath.Base(shard.OutputName("", m)))
			}
			seen[b] = m
		}
	}
	return spec, nil
}

func run(ctx context.Context, o *options, args []string, stdout, stderr io.Writer) int {
	j, err := o.check(args)
	spec := j.spec
	if err != nil {
		fmt.Fprintf(stderr, "overlap-beam: %v\n", err)
		return exitUsage
	}
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		fmt.Fprintf(stderr, "overlap-beam: --output: %v\n", err)
		return exitUsage
	}
	donePath, failedPath := filepath.Join(o.output, shard.DoneFile), filepath.Join(o.output, shard.FailedFile)
	// Each list is written only when it has a line: one left from an
	// earlier run would be read as this run's.
	for _, f := range []string{donePath, failedPath} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "overlap-beam: %v\n", err)
			return exitFail
		}
	}

	p, s := beam.NewPipelineWithRoot()
	shard.Build(s, shard.Options{Input: o.input, Output: o.output, Spec: spec})
	t0 := time.Now()
	runErr := beamx.Run(ctx, p)
	wall := time.Since(t0)

	// On prism and the direct runner the workers ran in this process: their
	// engines close as the run ends. Wait for them, so that none outlives
	// the run unnoticed.
	wctx, cancel := context.WithTimeout(context.Background(), o.closeWait)
	closeErr := shard.WaitClosed(wctx)
	cancel()

	done, derr := readLines[shard.Result](donePath)
	failures, ferr := readLines[shard.Failure](failedPath)
	printSummary(stdout, o, j, summarize(done, failures), wall)
	code := exitOK
	if runErr != nil {
		fmt.Fprintf(stderr, "overlap-beam: the pipeline failed: %v\n", runErr)
		code = exitFail
	}
	if err := errors.Join(derr, ferr); err != nil {
		fmt.Fprintf(stderr, "overlap-beam: reading the lists of shards: %v\n", err)
		code = exitFail
	}
	if closeErr != nil {
		fmt.Fprintf(stderr, "overlap-beam: %v\n", closeErr)
		code = exitFail
	}
	if len(failures) > 0 {
		code = exitFail
	}
	if o.verify && runErr == nil {
		if j.m != nil {
			n, err := verifyModel(o, j, failures)
			if err != nil {
				fmt.Fprintf(stderr, "overlap-beam: --verify: %v\n", err)
				return exitFail
			}
			fmt.Fprintf(stdout, "verified: every value of the %d output(s), read back from %s, matched the float64 CPU reference within the %s error bound\n", n, o.output, j.prec)
			return code
		}
		n, err := verify(o, spec, failures)
		if err != nil {
			fmt.Fprintf(stderr, "overlap-beam: --verify: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "verified: every element of the %d output(s), read back from %s, matched the CPU reference\n", n, o.output)
	}
	return code
}

// summary is what the run did, from its lists of shards done and failed.
type summary struct {
	done                    []shard.Result
	failed                  []shard.Failure
	rows, bytesIn, bytesOut int64
	engine, wall            [3]int64 // min, mean, max µs
	bounds                  map[string]int
}

func summarize(done []shard.Result, failed []shard.Failure) summary {
	s := summary{done: done, failed: failed, bounds: map[string]int{}}
	var engineSum, wallSum int64
	for i, r := range done {
		s.rows += r.Rows
		s.bytesIn += r.InBytes
		s.bytesOut += r.OutBytes
		engineSum += r.EngineMicros
		wallSum += r.WallMicros
		if i == 0 {
			s.engine = [3]int64{r.EngineMicros, 0, r.EngineMicros}
			s.wall = [3]int64{r.WallMicros, 0, r.WallMicros}
		}
		s.engine[0], s.engine[2] = min(s.engine[0], r.EngineMicros), max(s.engine[2], r.EngineMicros)
		s.wall[0], s.wall[2] = min(s.wall[0], r.WallMicros), max(s.wall[2], r.WallMicros)
		if r.Bound != "" {
			s.bounds[r.Bound]++
		}
	}
	if n := int64(len(done)); n > 0 {
		s.engine[1], s.wall[1] = engineSum/n, wallSum/n
	}
	return s
}

// readLines reads a file of one JSON object a line; no file is no line.
func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

func runnerName() string {
	if *runners.Runner == "" {
		return "prism (in this process)"
	}
	return *runners.Runner
}

// modelLine describes the model and where its activation came from.
func modelLine(m *model.Model, prec model.Precision) string {
	s := "MLP " + m.String()
	if len(m.Layers) > 1 {
		switch m.ActivationFrom {
		case "file":
			s += " (activation from the file)"
		case "default":
			s += " (the file names no activation: relu by default)"
		default:
			s += " (activation from --activation)"
		}
	}
	return s + " in " + prec.String()
}

func printSummary(w io.Writer, o *options, j job, s summary, wall time.Duration) {
	kernel := j.spec.Kernel
	if j.m != nil {
		kernel = modelLine(j.m, j.prec)
	} else if k, scalars, err := shard.KernelScalars(j.spec); err == nil {
		kernel = k.Name
		for i, sc := range k.Scalars {
			if sc.Name == "iters" {
				kernel = fmt.Sprintf("%s (%d iterations)", k.Name, int(scalars[i]))
			}
		}
	}
	where := "every GPU each worker sees ($" + shard.DevicesEnv + " where set)"
	switch {
	case o.sim:
		where = "the simulator (times predicted for an NVIDIA H200)"
	case o.devices != "":
		where = "GPU(s) " + o.devices + " of each worker"
	}
	fmt.Fprintf(w, "overlap-beam: %s on %s, runner %s\n", kernel, where, runnerName())
	fmt.Fprintf(w, "%s → %s (each output <shard>%s)\n", o.input, o.output, shard.OutputSuffix)
	fmt.Fprintf(w, "%d shard(s) done, %d failed: %d rows, %s in, %s out; wall time %.2f s\n",
		len(s.done), len(s.failed), s.rows, humanBytes(s.bytesIn), humanBytes(s.bytesOut), wall.Seconds())
	if len(s.done) > 0 {
		clock := "engine clock"
		if o.sim {
			clock = "simulated clock"
		}
		fmt.Fprintf(w, "per shard (%s): min %s, mean %s, max %s; wall clock: min %s, mean %s, max %s\n", clock,
			micros(s.engine[0]), micros(s.engine[1]), micros(s.engine[2]), micros(s.wall[0]), micros(s.wall[1]), micros(s.wall[2]))
	}
	if len(s.bounds) > 0 {
		var parts []string
		for _, st := range shard.StageNames() {
			if n := s.bounds[st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", st, n))
			}
		}
		fmt.Fprintf(w, "shards bounded by: %s\n", strings.Join(parts, ", "))
	}
	if len(s.failed) > 0 {
		fmt.Fprintf(w, "failed shard(s), listed in %s:\n", filepath.Join(o.output, shard.FailedFile))
		const most = 20
		for i, f := range s.failed {
			if i == most {
				fmt.Fprintf(w, "  … and %d more\n", len(s.failed)-most)
				break
			}
			fmt.Fprintf(w, "  %s\n", f.Error)
		}
	}
}

func micros(us int64) string {
	d := time.Duration(us) * time.Microsecond
	if d < time.Second {
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// localInputs is the local inputs, --input's matches, less the shards
// that failed.
func localInputs(o *options, failures []shard.Failure) ([]string, error) {
	matches, err := filepath.Glob(o.input)
	if err != nil {
		return nil, err
	}
	failed := map[string]bool{}
	for _, f := range failures {
		failed[f.Shard] = true
	}
	var ins []string
	for _, in := range matches {
		if !failed[in] {
			ins = append(ins, in)
		}
	}
	return ins, nil
}

// verify reads every local input that did not fail and its output, and
// checks each element against the kernel's reference.
func verify(o *options, spec shard.Spec, failures []shard.Failure) (int, error) {
	k, scalars, err := shard.KernelScalars(spec)
	if err != nil {
		return 0, err
	}
	ins, err := localInputs(o, failures)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range ins {
		x, err := os.ReadFile(in)
		if err != nil {
			return n, err
		}
		out := shard.OutputName(o.output, in)
		y, err := os.ReadFile(out)
		if err != nil {
			return n, err
		}
		if len(y) != len(x) {
			return n, fmt.Errorf("%s holds %d bytes; %s has %d", out, len(y), in, len(x))
		}
		if err := k.Verify([][]float32{driver.View[float32](x)}, driver.View[float32](y), scalars...); err != nil {
			return n, fmt.Errorf("%s: %w", out, err)
		}
		n++
	}
	return n, nil
}

// verifyRows is the rows verifyModel reads at a time.
const verifyRows = 1 << 16

// verifyModel reads every local input that did not fail and its output, a
// block of rows at a time, and checks each value against the model's
// float64 reference.
func verifyModel(o *options, j job, failures []shard.Failure) (int, error) {
	ins, err := localInputs(o, failures)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, in := range ins {
		if err := verifyModelFile(j, in, shard.OutputName(o.output, in)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func verifyModelFile(j job, inPath, outPath string) error {
	m := j.m
	in, err := os.Open(inPath)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Open(outPath)
	if err != nil {
		return err
	}
	defer out.Close()
	ist, err := in.Stat()
	if err != nil {
		return err
	}
	rows, err := m.CheckInputBytes(ist.Size())
	if err != nil {
		return fmt.Errorf("%s: %s", inPath, strings.TrimPrefix(err.Error(), "model: "))
	}
	ost, err := out.Stat()
	if err != nil {
		return err
	}
	if want := rows * int64(4*m.Out()); ost.Size() != want {
		return fmt.Errorf("%s holds %d bytes; the %d rows of %s need %d", outPath, ost.Size(), rows, inPath, want)
	}
	x := make([]float32, min(rows, verifyRows)*int64(m.In()))
	y := make([]float32, min(rows, verifyRows)*int64(m.Out()))
	for lo := int64(0); lo < rows; lo += verifyRows {
		k := int(min(verifyRows, rows-lo))
		xb, yb := x[:k*m.In()], y[:k*m.Out()]
		if _, err := in.ReadAt(driver.Bytes(xb), lo*int64(4*m.In())); err != nil {
			return fmt.Errorf("%s: %w", inPath, err)
		}
		if _, err := out.ReadAt(driver.Bytes(yb), lo*int64(4*m.Out())); err != nil {
			return fmt.Errorf("%s: %w", outPath, err)
		}
		if err := m.Verify(xb, yb, model.VerifyOptions{Precision: j.prec, FirstRow: lo}); err != nil {
			return fmt.Errorf("%s: %w", outPath, err)
		}
	}
	return nil
}
