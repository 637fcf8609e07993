package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// overlap infer runs a PyTorch-trained MLP (a safetensors file of
// nn.Sequential Linear layers) over rows of float32: streaming files with
// bounded memory (--in, --out), or in memory over generated rows (--rows)
// against the synchronous baseline, as overlap run does for a kernel, and
// with --reference beside the PyTorch twin. The in-memory run and the
// twin are infer_memory.go, the stream infer_stream.go.

// inferCmd is overlap infer.
var inferCmd = &command{
	name: "infer",
	usageLine: "overlap infer --model FILE (--rows N [--reference] | --in FILE --out FILE | --gen-input FILE --rows N) [flags]\n" +
		"       overlap infer --gen-model FILE --widths 768,256,16 [--activation relu|gelu] [--seed N]",
	short: "run a PyTorch-trained MLP (a safetensors state_dict) over rows of float32, in memory against a synchronous baseline or streamed with bounded memory",
	long:  inferLong,
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o := &inferOptions{}
		inferFlags(fs, o)
		return checkedRun("infer", func() error { return checkInferOptions(fs, o) }, func(stdout, stderr io.Writer) int { return runInfer(o, stdout, stderr) })
	},
}

const inferLong = "Runs an MLP saved by safetensors.torch.save_file(model.state_dict(), FILE) over rows of raw\n" +
	"little-endian float32 (row-major, the model's input width per row; in PyTorch, x.numpy().tofile(F)).\n" +
	"--rows N runs N generated rows in memory: the synchronous baseline, then the pipeline at each --chunk,\n" +
	"each stage alone and the copies both ways at once; --reference runs the PyTorch twin on the same model\n" +
	"and rows first and compares; --in/--out streams a file (- for stdin/stdout) with bounded memory."

// inferOptions are overlap infer's parsed flags.
type inferOptions struct {
	model, in, out     string
	genModel, genInput string
	widths             []int
	seed               uint64
	rows               int
	precision          model.Precision
	activation         model.Activation
	// chunks are --chunk's sizes: in memory each is run and the fastest
	// kept; a stream takes one. Empty: bench's default (in memory,
	// model.ChunkRowsFor the rows over the devices).
	chunks         []int
	repeat         int
	verify         bool
	jsonOut, quiet bool
	// jsonFile is --json-out: the JSON written to a file too.
	jsonFile   string
	noBaseline bool
	// bound measures a stream's bound (--bound).
	bound bool
	// timingOnly is --timing-only: the simulator moves no bytes and
	// computes nothing.
	timingOnly bool
	// reference runs the PyTorch twin first (--reference), with python
	// (--python), keeping its files in referenceDir when set.
	reference    bool
	python       string
	referenceDir string
	// run holds the machine's flags, shared with overlap run: --sim,
	// --devices and --profile.
	run runOptions
}

func inferFlags(fs *flag.FlagSet, o *inferOptions) {
	fs.StringVar(&o.model, "model", "", "the model: a safetensors `FILE` of nn.Sequential Linear layers (N.weight [out, in], N.bias)")
	fs.StringVar(&o.in, "in", "", "stream this `FILE` of float32 rows through the model (- for stdin)")
	fs.StringVar(&o.out, "out", "", "write the outputs to this `FILE` (- for stdout; the report then goes to stderr)")
	fs.Var(sizeFlag{v: &o.rows}, "rows", "run `N` generated rows in memory (sizes take K, M, G); with --gen-input, the rows to write")
	fs.Func("precision", "the layers' arithmetic, `fp32|tf32`: tf32 runs on the tensor cores, each product's factors rounded to a 10-bit mantissa (default fp32)", func(s string) (err error) {
		if o.precision, err = model.ParsePrecision(s); err != nil {
			return fmt.Errorf("want fp32 or tf32, not %q", s)
		}
		return nil
	})
	fs.Func("activation", "the activation between layers, `relu|gelu` (default: the file's \"activation\" metadata, else relu)", func(s string) (err error) {
		if o.activation, err = model.ParseActivation(s); err != nil {
			return fmt.Errorf("want relu or gelu, not %q", s)
		}
		return nil
	})
	// --chunk: one size, or several comma-separated (8K,16K,32K,64K), each
	// at most once, kept in the order given.
	fs.Func("chunk", "`ROWS` per chunk (default 16384, fewer for rows wider than 1K values); in memory several, such as 8K,16K,32K,64K: each is run and the fastest kept", func(s string) error {
		o.chunks = nil
		for _, p := range strings.Split(s, ",") {
			v, err := parseSize(p)
			if err != nil {
				return err
			} else if slices.Contains(o.chunks, v) {
				return fmt.Errorf("%s is listed twice", formatSize(v))
			}
			o.chunks = append(o.chunks, v)
		}
		return nil
	})
	fs.IntVar(&o.repeat, "repeat", 3, "timed pipeline runs in memory per chunk size, after an untimed one on a GPU (the median is reported, and the fastest)")
	fs.BoolVar(&o.verify, "verify", false, "check every output value against the float64 CPU reference (with --in, read back from the files)")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "skip the synchronous baseline")
	fs.BoolVar(&o.bound, "bound", false, "with --in: measure the stream's bound in the same run: reading the input alone, writing as much output alone (beside a regular --out), and the in-memory pinned pipeline over the same rows (allocates them in pinned memory); the slowest bounds the stream")
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.StringVar(&o.jsonFile, "json-out", "", "also write the results as JSON to `FILE` (beside the table)")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors")
	o.run.addMachineFlags(fs, flagSim|flagDevices|flagProfile, map[string]string{
		"sim":     "run on the CPU simulator instead of a GPU (times predicted from the built-in H200 profile, or --profile)",
		"profile": "with --sim: the device profile (JSON from overlap profile) to predict times from"})
	fs.BoolVar(&o.timingOnly, "timing-only", false, "with --sim, in memory: move no bytes and compute nothing, only the times (for jobs too large to compute on the CPU; nothing to verify)")
	fs.BoolVar(&o.reference, "reference", false, "with --rows: run the PyTorch twin (bench/reference/mlp_torch.py, embedded) on the same model first, then ours on its input rows, and compare the times and every output value")
	fs.StringVar(&o.python, "python", "python3", "with --reference: the Python `COMMAND` that has torch")
	fs.StringVar(&o.referenceDir, "reference-dir", "", "with --reference: keep the twin's files (input.f32, output_torch.f32, torch.json) in this `DIR` (default: a temporary one, removed)")
	fs.StringVar(&o.genModel, "gen-model", "", "write a random model (PyTorch's initialisation) to this safetensors `FILE` and exit")
	fs.Func("widths", "with --gen-model: the input width and each layer's output width, `W,W,...` such as 768,256,16", func(s string) error {
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
		o.widths = ws
		return nil
	})
	fs.Uint64Var(&o.seed, "seed", 1, "with --gen-model: the random seed")
	fs.StringVar(&o.genInput, "gen-input", "", "write --rows rows of overlap's standard pattern, the model's width, to this `FILE` and exit")
}

func checkInferOptions(fs *flag.FlagSet, o *inferOptions) error {
	stream := o.in != "" || o.out != ""
	runFlags := []string{"precision", "chunk", "repeat", "verify", "sim", "devices", "no-baseline", "json", "json-out", "bound", "profile", "timing-only", "reference", "python", "reference-dir"}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.genModel != "":
		if f := firstSet(fs, append([]string{"model", "in", "out", "rows", "gen-input"}, runFlags...)...); f != "" {
			return fmt.Errorf("--%s does not apply to --gen-model, which only writes a model", f)
		}
		if o.widths == nil {
			return errors.New("--gen-model needs --widths, such as --widths 768,256,16")
		}
		// The model is made in memory before it is written: a make of
		// more than the host has ends the process (Go's "out of memory").
		if need := model.ParamBytesOf(o.widths); need > 0 {
			if avail, ok := availableMemory(); ok && need > avail {
				return usageError{fmt.Errorf("--widths %s: the model's parameters need %s of host memory, more than the %s available; use smaller widths", widthsText(o.widths), humanBytes(need), humanBytes(avail))}
			}
		}
		return checkWritable("gen-model", o.genModel)
	case isSet(fs, "widths") || isSet(fs, "seed"):
		return errors.New("--widths and --seed go with --gen-model FILE")
	case o.model == "":
		return errors.New("--model FILE is required (or --gen-model FILE to write one)")
	case o.genInput != "":
		if f := firstSet(fs, append([]string{"in", "out"}, runFlags...)...); f != "" {
			return fmt.Errorf("--%s does not apply to --gen-input, which only writes rows", f)
		}
		if o.rows == 0 {
			return errors.New("--gen-input needs --rows N")
		}
		if sameFile(o.genInput, o.model) {
			return fmt.Errorf("--gen-input %s is the model file %s: writing it would erase the model", o.genInput, o.model)
		}
		return checkWritable("gen-input", o.genInput)
	}
	if err := refuse([]refusal{
		{stream && (o.in == "" || o.out == ""), "a stream needs both --in FILE and --out FILE"},
		{stream && isSet(fs, "rows"), "--rows runs generated rows in memory; a stream's rows are its --in file's"},
		{stream && (isSet(fs, "repeat") || isSet(fs, "no-baseline")), "--repeat and --no-baseline apply to the in-memory run (--rows), not to a stream"},
		{stream && len(o.chunks) > 1, "--chunk: a stream runs one chunk size; several are for the in-memory run (--rows)"},
		{stream && o.timingOnly, "--timing-only is for the in-memory run (--rows): a stream's bytes come from its files"},
		{stream && o.reference, "--reference compares an in-memory run (--rows) with PyTorch's, not a stream"},
		{!stream && o.bound, "--bound measures a stream's bound (--in FILE --out FILE); the in-memory run measures each stage alone anyway"},
		{o.bound && o.in == "-", "--bound reads the input alone: it needs a file, not stdin (--in -)"},
		// As overlap stream refuses them: a verification that cannot be
		// made must not end in success with nothing checked.
		{stream && o.verify && o.in == "-", "--verify reads the input back from its file: it cannot read stdin (--in -)"},
		{stream && o.verify && o.out == "-", "--verify reads the output back from its file: it cannot read stdout (--out -)"},
		{stream && o.verify && o.in != "-" && !bench.RegularOrNew(o.in), fmt.Sprintf("--verify reads the input back from its file: %s is not a regular file", o.in)},
		{stream && o.verify && o.out != "-" && !bench.RegularOrNew(o.out), fmt.Sprintf("--verify reads the output back from its file: %s is not a regular file", o.out)},
		{!stream && o.rows == 0, "give --rows N (generated rows, in memory) or --in FILE --out FILE (a stream)"},
		{o.repeat < 1 || o.repeat > 1000, fmt.Sprintf("--repeat %d: want 1 to 1000", o.repeat)},
		// The same file by any spelling (a relative or absolute path, a
		// symbolic or hard link): creating the output would erase the input.
		{stream && o.in != "-" && o.out != "-" && sameFile(o.in, o.out), fmt.Sprintf("--out %s is the input file %s: writing it would erase the input", o.out, o.in)},
		{stream && o.out != "-" && sameFile(o.model, o.out), fmt.Sprintf("--out %s is the model file %s: writing it would erase the model", o.out, o.model)},
		{o.timingOnly && !o.run.sim, "--timing-only needs --sim: a GPU always moves the bytes"},
		{o.timingOnly && (o.verify || o.reference), "--timing-only computes nothing, so there is nothing to --verify or compare with --reference"},
		{!o.reference && (isSet(fs, "python") || isSet(fs, "reference-dir")), "--python and --reference-dir go with --reference"},
		{int64(o.rows) > maxElems, fmt.Sprintf("--rows %d: at most %d", o.rows, int64(maxElems))},
	}); err != nil {
		return err
	}
	if err := o.run.check(fs, false, false); err != nil {
		return err
	}
	if stream {
		if err := checkEndless([]string{o.in}); err != nil {
			return err
		}
	}
	if o.reference {
		if _, err := exec.LookPath(o.python); err != nil {
			return fmt.Errorf("--reference runs the PyTorch twin with %s, which is not found (--python names another): %v", o.python, unwrapPath(err))
		}
		if st, err := os.Stat(o.referenceDir); err == nil && !st.IsDir() { // "" is no file
			return fmt.Errorf("--reference-dir %s: not a directory", o.referenceDir)
		}
	}
	if stream && o.out != "-" {
		if err := checkWritable("out", o.out); err != nil {
			return err
		}
	}
	if o.jsonFile != "" && (sameFile(o.jsonFile, o.model) || o.in != "" && sameFile(o.jsonFile, o.in) || o.out != "" && sameFile(o.jsonFile, o.out)) {
		return fmt.Errorf("--json-out %s is also the model, the input or the output", o.jsonFile)
	}
	if err := checkWritable("json-out", o.jsonFile); err != nil {
		return err
	}
	o.quiet = o.quiet && !o.jsonOut // JSON is the requested output
	return nil
}

// runInfer runs overlap infer once its flags are checked.
func runInfer(o *inferOptions, stdout, stderr io.Writer) int {
	if o.genModel != "" {
		m, err := model.Random(o.widths, cmp.Or(o.activation, model.ReLU), o.seed)
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
	if err == nil && o.genInput != "" {
		var f *os.File
		if f, err = os.Create(o.genInput); err == nil {
			err = cmp.Or(benchError(bench.WritePatternAt(context.Background(), f, o.rows*m.In(), 0)), f.Close())
		}
		if err == nil && !o.quiet {
			fmt.Fprintf(stdout, "wrote %s: %d rows of %d float32 (%s), overlap's standard pattern\n", o.genInput, o.rows, m.In(), humanBytes(int64(o.rows)*int64(m.In())*4))
		}
	}
	if err != nil {
		return reportError("infer", err, stderr)
	} else if o.genInput != "" {
		return exitOK
	}
	ctx, stop := signalContext("infer", stderr)
	defer stop()
	// report prints a result as the flags ask (its table is bench's, and
	// a failed write to stdout, as of the JSON, is not the run's failure),
	// and writes it to --json-out.
	report := func(w io.Writer, res any, print func()) error {
		stop() // the work has returned: a signal's grace no longer runs
		if o.jsonOut {
			writeJSON(w, res)
		} else if !o.quiet {
			print()
		}
		if o.jsonFile == "" {
			return nil
		}
		var b bytes.Buffer
		writeJSON(&b, res)
		if err := os.WriteFile(o.jsonFile, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("--json-out: %w", err)
		}
		return nil
	}
	switch {
	case o.in != "":
		w := stdout
		if o.out == "-" {
			w = stderr
		}
		var res *bench.InferStreamResult
		if res, err = executeInferStream(ctx, o, m, stdout, stderr); err == nil {
			err = report(w, res, func() { res.WriteTable(w, activationFlag) })
		}
	default:
		var res *bench.InferResult
		var ref *bench.InferReferenceResult
		switch res, ref, err = executeInferMemory(ctx, o, m, stderr); {
		case ref != nil:
			err = cmp.Or(err, report(stdout, ref, func() { ref.WriteTable(stdout) }))
		case err == nil:
			err = report(stdout, res, func() { res.WriteTable(stdout, activationFlag) })
		}
	}
	stop()
	if err := stoppedBy(ctx, err); err != nil {
		return reportError("infer", err, stderr)
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
	var pe *os.PathError
	switch {
	case errors.As(err, &pe):
		return nil, usageError{fmt.Errorf("--model %s: %v", o.model, pe.Err)}
	case err != nil:
		return nil, usageError{fmt.Errorf("--model: %s", strings.TrimPrefix(err.Error(), "model: "))}
	}
	return m, nil
}

// inferEnv opens the machine (on the simulator, for --timing-only
// devices that move no bytes and compute nothing) and readies the model's
// kernel on it: on a GPU, the GEMM module loaded on the first (a missing
// gemm.ptx or a JIT error is reported here, before any run; the others
// load it as the run first launches there) and the weights checked
// against its free memory.
func inferEnv(o *inferOptions, m *model.Model) (*env, *pipeline.Kernel, error) {
	ro := o.run
	ro.kernel = "seed" // openEnv loads a table kernel on each GPU; the model's GEMM is loaded here
	open := openEnv
	if o.timingOnly {
		open = func(ro *runOptions) (*env, error) { return openSimEnv(ro, true) }
	}
	e, err := open(&ro)
	if err != nil {
		return nil, nil, err
	}
	kopts := model.KernelOptions{Precision: o.precision}
	if !o.run.sim {
		g := new(kernels.GemmModules)
		e.closers = append(e.closers, g.Close) // closed before the contexts
		if _, err = g.Functions(e.ctx); err == nil {
			if free, _, merr := e.ctx.MemoryInfo(); merr == nil {
				if err = m.CheckFits(int64(free)); err != nil {
					err = usageError{fmt.Errorf("--model on GPU %d: %s", e.ordinals[0], strings.TrimPrefix(err.Error(), "model: "))}
				}
			}
		}
		kopts.Gemm = g
	}
	var k *pipeline.Kernel
	if err == nil {
		k, err = m.Kernel(kopts)
	}
	if err != nil {
		e.close()
		return nil, nil, err
	}
	return e, k, nil
}

// activationFlag names package bench's Activation option by its flag,
// where an infer table says where the activation came from.
func activationFlag(string) string { return "--activation" }

// widthsText is ws as --widths takes it: 768,256,16.
func widthsText(ws []int) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = strconv.Itoa(w)
	}
	return strings.Join(s, ",")
}
