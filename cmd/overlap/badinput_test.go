package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/require"
)

// badInput is one row of the bad-input table in docs/RELIABILITY.md: what
// a user might get wrong, and the error they get. try returns the error
// (and, for the CLI, the exit code).
type badInput struct {
	area, input string
	try         func(t *testing.T) (string, int)
}

func cli(args ...string) func(t *testing.T) (string, int) {
	return func(t *testing.T) (string, int) {
		code, _, errOut := runCLI(args...)
		return strings.TrimSpace(errOut), code
	}
}

// cliTmp runs a command line whose files are under tmp, and writes tmp as
// $TMP in the error.
func cliTmp(tmp string, args ...string) func(t *testing.T) (string, int) {
	return func(t *testing.T) (string, int) {
		code, _, errOut := runCLI(args...)
		return strings.ReplaceAll(strings.TrimSpace(errOut), tmp, "$TMP"), code
	}
}

func apiErr(f func() error) func(t *testing.T) (string, int) {
	return func(t *testing.T) (string, int) {
		err := f()
		if err == nil {
			return "", 0
		}
		return err.Error(), -1
	}
}

func mustPipeline(k *kernels.Kernel, scalars ...float64) *pipeline.Kernel {
	pk, err := k.Pipeline(nil, scalars...)
	if err != nil {
		panic(err)
	}
	return pk
}

func parseErr(src []byte) func(t *testing.T) (string, int) {
	return apiErr(func() error { _, err := ptx.Parse(src); return err })
}

func badInputs(tmp string) []badInput {
	seed := string(kernels.Seed.PTX())
	junk := filepath.Join(tmp, "junk.so")
	os.WriteFile(junk, []byte("not a library"), 0o644)
	f32 := func(name string, size int) string {
		path := filepath.Join(tmp, name)
		os.WriteFile(path, make([]byte, size), 0o644)
		return path
	}
	same, other, odd := f32("same.f32", 4096), f32("long.f32", 8192), f32("odd.f32", 4098)
	os.Link(same, filepath.Join(tmp, "hard.f32"))
	dir := filepath.Join(tmp, "dir")
	os.Mkdir(dir, 0o755)
	kptx := filepath.Join(tmp, "k.ptx")
	if src, err := os.ReadFile(filepath.Join("testdata", "double.ptx")); err == nil {
		os.WriteFile(kptx, src, 0o644)
	}
	sdev := sim.New(1, 0)
	cfg := pipeline.Config{ChunkElems: 8, Inputs: []int{4}, Outputs: []int{4}}
	in, out := make([]float32, 10), make([]float32, 10)
	job := pipeline.Job{N: 10, Kernel: mustPipeline(kernels.Seed, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	run := func(mutate func(*pipeline.Job)) func() error {
		return func() error {
			p, err := pipeline.New(sdev, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			j := job
			mutate(&j)
			_, err = p.Run(context.Background(), j)
			return err
		}
	}
	return []badInput{
		{"CLI", "`overlap` with no command", cli()},
		{"CLI", "`overlap frobnicate`", cli("frobnicate")},
		{"CLI", "`overlap devices extra`", cli("devices", "extra")},
		{"CLI", "`overlap run --elems 0`", cli("run", "--elems", "0")},
		{"CLI", "`overlap run --elems -5`", cli("run", "--elems", "-5")},
		{"CLI", "`overlap run --elems lots`", cli("run", "--elems", "lots")},
		{"CLI", "`overlap run --elems 5G`", cli("run", "--elems", "5G")},
		{"CLI", "`overlap run --elems 1M --chunk 2M`", cli("run", "--elems", "1M", "--chunk", "2M")},
		{"CLI", "`overlap run --chunk 0`", cli("run", "--chunk", "0")},
		{"CLI", "`overlap run --device abc`", cli("run", "--device", "abc")},
		{"CLI", "`overlap run --no-baseline=maybe`", cli("run", "--no-baseline=maybe")},
		{"CLI", "`overlap bench small-jobs --workers 1,abc`", cli("bench", "small-jobs", "--workers", "1,abc")},
		{"CLI", "`overlap run --chunk auto --slots 8`", cli("run", "--chunk", "auto", "--slots", "8")},
		{"CLI", "`overlap run --chunk auto --compute-streams 2 --schedule events`", cli("run", "--chunk", "auto", "--compute-streams", "2", "--schedule", "events")},
		{"CLI", "`overlap run --chunk auto --slots 8 --compute-streams 2 --schedule in-stream`", cli("run", "--chunk", "auto", "--slots", "8", "--compute-streams", "2", "--schedule", "in-stream")},
		{"CLI", "`overlap run --slots 1`", cli("run", "--slots", "1")},
		{"CLI", "`overlap run --slots 0`", cli("run", "--slots", "0")},
		{"CLI", "`overlap run --slots 2 --compute-streams 3`", cli("run", "--slots", "2", "--compute-streams", "3")},
		{"CLI", "`overlap run --compute-streams 0`", cli("run", "--compute-streams", "0")},
		{"CLI", "`overlap run --iters -1`", cli("run", "--iters", "-1")},
		{"CLI", "`overlap run --repeat 0`", cli("run", "--repeat", "0")},
		{"CLI", "`overlap run --kernel fft`", cli("run", "--kernel", "fft")},
		{"CLI", "`overlap run --kernel empty`", cli("run", "--kernel", "empty")},
		{"CLI", "`overlap run --host magic`", cli("run", "--host", "magic")},
		{"CLI", "`overlap run --device -1`", cli("run", "--device", "-1")},
		{"CLI", "`overlap run --ptx k.ptx` without `--entry`", cli("run", "--ptx", "k.ptx")},
		{"CLI", "`overlap run --ptx missing.ptx --entry k`", cli("run", "--ptx", "missing.ptx", "--entry", "k")},
		{"CLI", "`overlap run --entry k` without `--ptx` or `--cu`", cli("run", "--entry", "k")},
		{"CLI", "`overlap run --sim --ptx k.ptx --entry k`", cli("run", "--sim", "--ptx", "k.ptx", "--entry", "k")},
		{"CLI", "`overlap run --cu k.cu` without `--entry`", cli("run", "--cu", "k.cu")},
		{"CLI", "`overlap run --cu missing.cu --entry k`", cli("run", "--cu", "missing.cu", "--entry", "k")},
		{"CLI", "`overlap run --cu k.cu --ptx k.ptx --entry k`", cli("run", "--cu", "k.cu", "--ptx", "k.ptx", "--entry", "k")},
		{"CLI", "`overlap run --sim --cu k.cu --entry k`", cli("run", "--sim", "--cu", "k.cu", "--entry", "k")},
		{"CLI", "`overlap run --bogus`", cli("run", "--bogus")},
		{"CLI", "`overlap run --readers 4` without `--in`", cli("run", "--readers", "4")},
		{"CLI", "`overlap stream --in a --out b --elems 1K`", cli("stream", "--in", "a", "--out", "b", "--elems", "1K")},
		{"CLI", "`overlap stream --in a --out b --bogus`", cli("stream", "--in", "a", "--out", "b", "--bogus")},
		{"CLI", "`overlap run extra`", cli("run", "extra")},
		{"CLI", "`overlap run --sim --device 7`", cli("run", "--sim", "--device", "7")},
		{"CLI", "`overlap profile --sim --device 1`", cli("profile", "--sim", "--device", "1")},
		{"CLI", "`overlap run --kernel saxpy --iters 5`", cli("run", "--kernel", "saxpy", "--iters", "5")},
		{"CLI", "`overlap run --svg .`, a directory", cli("run", "--sim", "--svg", ".")},
		{"CLI", "`overlap run --elems 1G --chunk 1K --trace t.json`", cli("run", "--sim", "--elems", "1G", "--chunk", "1K", "--trace", filepath.Join(tmp, "t.json"))},
		{"CLI", "`overlap tune --json`", cli("tune", "--json")},
		{"CLI", "`overlap bench --chunks 1M,zero`", cli("bench", "--chunks", "1M,zero")},
		{"CLI", "`overlap bench --slots 2,2`", cli("bench", "--slots", "2,2")},
		{"CLI", "`overlap bench --slots 1`", cli("bench", "--slots", "1")},
		{"CLI", "`overlap bench --host auto`", cli("bench", "--host", "auto")},
		{"CLI", "`overlap bench --sim --reference`", cli("bench", "--sim", "--reference")},
		{"CLI", "`overlap run --wait often`", cli("run", "--wait", "often")},
		{"CLI", "`overlap run --sim --wait block`", cli("run", "--sim", "--wait", "block")},
		{"CLI", "`overlap run --warm -1s`", cli("run", "--warm", "-1s")},
		{"CLI", "`overlap run --warm often`", cli("run", "--warm", "often")},
		{"CLI", "`overlap run --sim --warm 1s`", cli("run", "--sim", "--warm", "1s")},
		{"CLI", "`overlap bench --wait spin` without `small-jobs`", cli("bench", "--wait", "spin")},
		{"CLI", "`overlap bench small-jobs --workers 0`", cli("bench", "small-jobs", "--workers", "0")},
		{"CLI", "`overlap bench small-jobs --slots 3`", cli("bench", "small-jobs", "--slots", "3")},
		{"CLI", "`overlap stream --in same.f32 --out ./same.f32`, the input under another name", cliTmp(tmp, "stream", "--sim", "--in", same, "--out", tmp+"/./same.f32")},
		{"CLI", "`overlap stream --in same.f32 --out hard.f32`, a hard link to the input", cliTmp(tmp, "stream", "--sim", "--in", same, "--out", filepath.Join(tmp, "hard.f32"))},
		{"CLI", "`overlap infer --model m --in same.f32 --out ./same.f32`, the input under another name", cliTmp(tmp, "infer", "--sim", "--model", filepath.Join(tmp, "m.safetensors"), "--in", same, "--out", tmp+"/./same.f32")},
		{"CLI", "`overlap infer --model m --in a.f32 --out m`, the model file", cliTmp(tmp, "infer", "--sim", "--model", same, "--in", other, "--out", tmp+"/./same.f32")},
		{"CLI", "`overlap infer --model m --in - --out b.f32 --verify`", cliTmp(tmp, "infer", "--sim", "--model", filepath.Join(tmp, "m.safetensors"), "--in", "-", "--out", filepath.Join(tmp, "b.f32"), "--verify")},
		{"CLI", "`overlap infer --model m --in a.f32 --out - --verify`", cliTmp(tmp, "infer", "--sim", "--model", filepath.Join(tmp, "m.safetensors"), "--in", other, "--out", "-", "--verify")},
		{"CLI", "`overlap infer --model m --in a.f32 --out /dev/null --verify`", cliTmp(tmp, "infer", "--sim", "--model", filepath.Join(tmp, "m.safetensors"), "--in", other, "--out", "/dev/null", "--verify")},
		{"CLI", "`overlap infer --model m --in /dev/zero --out b.f32`", cliTmp(tmp, "infer", "--sim", "--model", filepath.Join(tmp, "m.safetensors"), "--in", "/dev/zero", "--out", filepath.Join(tmp, "b.f32"))},
		{"CLI", "`overlap stream --in /dev/zero --out b.f32`", cliTmp(tmp, "stream", "--sim", "--in", "/dev/zero", "--out", filepath.Join(tmp, "b.f32"))},
		{"CLI", "`overlap stream --in a.f32 --out - > a.f32`, stdout the input", func(t *testing.T) (string, int) {
			f, err := os.OpenFile(same, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err.Error(), -1
			}
			defer f.Close()
			var errOut strings.Builder
			code := streamCmd.run([]string{"--sim", "--in", same, "--out", "-"}, f, &errOut)
			return strings.ReplaceAll(strings.TrimSpace(errOut.String()), tmp, "$TMP"), code
		}},
		{"CLI", "`overlap run --ptx k.ptx --entry double_it --trace k.ptx`", cliTmp(tmp, "run", "--gpu", "--ptx", kptx, "--entry", "double_it", "--trace", kptx)},
		{"CLI", "`overlap run --trace t --svg t`", cliTmp(tmp, "run", "--sim", "--trace", filepath.Join(tmp, "t"), "--svg", filepath.Join(tmp, "t"))},
		{"CLI", "`overlap stream --in dir --out o`, a directory", cliTmp(tmp, "stream", "--sim", "--in", dir, "--out", filepath.Join(tmp, "o"))},
		{"CLI", "`overlap stream --in odd.f32 --out o`, not whole elements", cliTmp(tmp, "stream", "--sim", "--in", odd, "--out", filepath.Join(tmp, "o"))},
		{"CLI", "`overlap stream --kernel saxpy --in a,b --out o`, of different lengths", cliTmp(tmp, "stream", "--sim", "--kernel", "saxpy", "--in", same+","+other, "--out", filepath.Join(tmp, "o"))},
		{"CLI", "`overlap stream --in a --out - --verify`", cli("stream", "--in", "a", "--out", "-", "--verify")},
		{"CLI", "`overlap stream --in - --out o --verify`", cli("stream", "--in", "-", "--out", "o", "--verify")},
		{"CLI", "`overlap stream --in - --out o --bound`", cli("stream", "--in", "-", "--out", "o", "--bound")},
		{"CLI", "`overlap stream --in a --out /dev/null --verify`", cliTmp(tmp, "stream", "--sim", "--in", same, "--out", os.DevNull, "--verify")},
		{"CLI", "`overlap stream --in a --out b --kernel fft`", cli("stream", "--in", "a", "--out", "b", "--kernel", "fft")},
		{"CLI", "`overlap stream --in a --out b --chunk 3`", cli("stream", "--in", "a", "--out", "b", "--chunk", "3")},
		{"CLI", "`overlap stream --sim --in a.f32 --out o --iters 2000000000`", cliTmp(tmp, "stream", "--sim", "--in", same, "--out", filepath.Join(tmp, "o"), "--iters", "2000000000")},
		{"CLI", "`overlap run --gpu --iters 2000000000`", cli("run", "--gpu", "--iters", "2000000000")},
		{"CLI", "`overlap run --sim --iters 2000000000`", cli("run", "--sim", "--iters", "2000000000")},
		{"CLI", "`overlap run --gpu --chunk 3`", cli("run", "--gpu", "--chunk", "3")},
		{"CLI", "`overlap run --sim --elems 1G --chunk 3`", cli("run", "--sim", "--elems", "1G", "--chunk", "3", "--iters", "1")},
		{"CLI", "`overlap run --warm 1h`", cli("run", "--warm", "1h")},
		{"CLI", "`overlap run --ptx double.ptx --entry wrong`, without a GPU too", cli("run", "--ptx", filepath.Join("testdata", "double.ptx"), "--entry", "wrong")},
		{"CLI", "`overlap run --sim --devices 1000`", cli("run", "--sim", "--devices", "1000")},
		{"CLI", "`overlap run --sim --profile dir`, a directory", cliTmp(tmp, "run", "--sim", "--profile", dir)},
		{"CLI", "`overlap run --sim --gpu`", cli("run", "--sim", "--gpu")},
		{"CLI", "`overlap ptx describe missing.ptx`", cli("ptx", "describe", "missing.ptx")},
		{"CLI", "`overlap ptx describe \"\"`", cli("ptx", "describe", "")},
		{"CLI", "`overlap ptx explain k.ptx`", cli("ptx", "explain", "k.ptx")},
		{"CLI", "`overlap ptx describe /dev/zero`", cli("ptx", "describe", "/dev/zero")},
		{"PTX", "empty file", parseErr(nil)},
		{"PTX", "binary garbage", parseErr([]byte("\x7fELF\x02\x01\x01\x00junk"))},
		{"PTX", "text that is not UTF-8", parseErr([]byte("\xff\xfe.version 7.0"))},
		{"PTX", "truncated PTX", parseErr([]byte(seed[:len(seed)/2]))},
		{"PTX", "no `.version`", parseErr([]byte(".target sm_75\n"))},
		{"PTX", "no `.target`", parseErr([]byte(".version 7.0\n"))},
		{"PTX", "an entry defined twice", parseErr([]byte(".version 7.0\n.target sm_75\n.entry k()\n{ret;}\n.entry k()\n{ret;}\n"))},
		{"PTX", "an unclosed comment", parseErr([]byte(".version 7.0\n/* oops\n"))},
		{"PTX", "100 MB of junk text", parseErr(bytes.Repeat([]byte("junk "), 100<<20/5))},
		{"PTX", "an unknown embedded kernel", apiErr(func() error { _, err := kernels.ByName("fft"); return err })},
		{"driver API", "`Alloc(0)`", apiErr(func() error { _, err := (*driver.Context)(nil).Alloc(0); return err })},
		{"driver API", "a nil `*Context`", apiErr(func() error { _, err := (*driver.Context)(nil).Alloc(16); return err })},
		{"driver API", "a nil `*Stream`", apiErr(func() error { return (*driver.Stream)(nil).Synchronize() })},
		{"driver API", "a nil source in an async copy", apiErr(func() error { return (*driver.Stream)(nil).CopyToDevice(nil, 0, nil, 0, 1) })},
		{"driver API", "a launch of a nil `*Function`", apiErr(func() error {
			return (*driver.Function)(nil).Launch(nil, driver.GridFor(1, 1), driver.NewArgs())
		})},
		{"driver API", "65 kernel arguments", apiErr(func() error {
			a := driver.NewArgs()
			for i := 0; i < 65; i++ {
				a.Int32(0)
			}
			return a.Err()
		})},
		{"driver API", "a by-value argument aligned to 3", apiErr(func() error { return driver.NewArgs().Raw([]byte{1, 2, 3}, 3).Err() })},
		{"driver API", "an unknown wait mode", apiErr(func() error {
			_, err := driver.NewContextWith(driver.Device{}, driver.ContextOptions{Wait: driver.Wait(9)})
			return err
		})},
		{"driver API", "a zero `Device`", apiErr(func() error { _, err := driver.NewContext(driver.Device{}); return err })},
		{"driver API", "`BindInto` a nil `*Bound`", apiErr(func() error { return (*driver.Context)(nil).BindInto(nil) })},
		{"loader", "no library at the paths tried", apiErr(func() error {
			_, err := loader.OpenFirst([]string{"/nonexistent/libcuda.so.1"})
			return err
		})},
		{"loader", "`OVERLAP_CUDA_LIBRARY` naming a file that is not a library", apiErr(func() error {
			_, err := loader.OpenFirst([]string{junk})
			if err != nil {
				return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), tmp, "$TMP"))
			}
			return nil
		})},
		{"pipeline API", "a nil `Backend`", apiErr(func() error { _, err := pipeline.New(nil, cfg); return err })},
		{"pipeline API", "one slot", apiErr(func() error { _, err := pipeline.New(sdev, pipeline.Config{Slots: 1, Outputs: []int{4}}); return err })},
		{"pipeline API", "no outputs", apiErr(func() error { _, err := pipeline.New(sdev, pipeline.Config{Inputs: []int{4}}); return err })},
		{"pipeline API", "an element size of 0", apiErr(func() error { _, err := pipeline.New(sdev, pipeline.Config{Outputs: []int{0}}); return err })},
		{"pipeline API", "a job without a kernel", apiErr(run(func(j *pipeline.Job) { j.Kernel = nil }))},
		{"pipeline API", "a negative element count", apiErr(run(func(j *pipeline.Job) { j.N = -1 }))},
		{"pipeline API", "an input shorter than N elements", apiErr(run(func(j *pipeline.Job) { j.N = 11 }))},
		{"pipeline API", "a buffer with neither Data nor Pinned", apiErr(run(func(j *pipeline.Job) { j.Inputs = []pipeline.Buffer{{}} }))},
		{"pipeline API", "the wrong number of inputs", apiErr(run(func(j *pipeline.Job) { j.Inputs = nil }))},
		{"pipeline API", "a `[]float64` in a `Float32Config` job", apiErr(run(func(j *pipeline.Job) { j.Inputs = []pipeline.Buffer{pipeline.Slice(make([]float64, 10))} }))},
		{"pipeline API", "a kernel without a CPU stand-in on the simulator", apiErr(run(func(j *pipeline.Job) { j.Kernel = &pipeline.Kernel{Name: "gpu-only"} }))},
		{"pipeline API", "host mode pinned with Go slices", apiErr(run(func(j *pipeline.Job) { j.Host = pipeline.HostPinned }))},
		{"pipeline API", "`Run` after `Close`", apiErr(func() error {
			p, err := pipeline.New(sdev, cfg)
			if err != nil {
				return err
			}
			p.Close()
			_, err = p.Run(context.Background(), job)
			return err
		})},
		{"pipeline API", "`RunInto` with a nil `*Report`", apiErr(func() error {
			p, err := pipeline.New(sdev, cfg)
			if err != nil {
				return err
			}
			defer p.Close()
			return p.RunInto(context.Background(), job, nil)
		})},
		{"pipeline API", "an unknown host mode name", apiErr(func() error { _, err := pipeline.ParseHostMode("sometimes"); return err })},
	}
}

const (
	tableStart = "<!-- bad-inputs:start -->"
	tableEnd   = "<!-- bad-inputs:end -->"
)

// TestBadInputTable walks the table of bad inputs: every one must give an
// error (a one-line error and exit code 2 for the CLI), and the table in
// docs/RELIABILITY.md must list exactly these errors. Run with
// OVERLAP_UPDATE_DOCS=1 to rewrite the table.
func TestBadInputTable(t *testing.T) {
	tmp := t.TempDir()
	var b strings.Builder
	b.WriteString("| area | bad input | exit code | error |\n| --- | --- | --- | --- |\n")
	for _, c := range badInputs(tmp) {
		msg, code := c.try(t)
		require.NotEmpty(t, msg, "%s: %s gave no error", c.area, c.input)
		exit := "-"
		if code >= 0 {
			require.Equal(t, exitUsage, code, "%s: %s", c.area, c.input)
			require.NotContains(t, msg, "\n", "%s: %s: one line", c.area, c.input)
			exit = "2"
		}
		first := strings.ReplaceAll(strings.ReplaceAll(msg, "\n\t", " "), "\n", " ")
		if len(first) > 240 {
			first = first[:240] + "…"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` |\n", c.area, c.input, exit, strings.ReplaceAll(first, "|", `\|`))
	}
	table := b.String()
	path := filepath.Join("..", "..", "docs", "RELIABILITY.md")
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	start := bytes.Index(doc, []byte(tableStart))
	end := bytes.Index(doc, []byte(tableEnd))
	require.True(t, start >= 0 && end > start, "docs/RELIABILITY.md needs the %s and %s markers", tableStart, tableEnd)
	current := string(doc[start+len(tableStart) : end])
	want := "\n" + table
	if os.Getenv("OVERLAP_UPDATE_DOCS") == "1" {
		updated := string(doc[:start+len(tableStart)]) + want + string(doc[end:])
		require.NoError(t, os.WriteFile(path, []byte(updated), 0o644))
		return
	}
	require.Equal(t, want, current, "docs/RELIABILITY.md's bad-input table is stale: run OVERLAP_UPDATE_DOCS=1 go test ./cmd/overlap -run BadInputTable")
}
