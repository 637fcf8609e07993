package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The CLI's streaming runs (issue 13), on the simulator.

// seedFile is what the simulator writes for n pattern elements from
// offset through the seed kernel.
func seedFile(n, offset, iters int) []byte {
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, offset)
	kernels.SeedCPU(out, in, iters)
	return driver.Bytes(out)
}

func TestGenWritesThePattern(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.f32")
	n := 3<<20 + 5 // more than one block per goroutine, and a tail
	code, out, errOut := runCLI("gen", "--size", "12582932", "--out", path, "--offset", "7")
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, out)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want := make([]float32, n)
	kernels.FillPattern(want, 7)
	assert.True(t, bytes.Equal(driver.Bytes(want), got), "gen wrote the pattern from element 7")

	code, out, _ = runCLI("gen", "--size", "40", "--out", "-")
	require.Equal(t, exitOK, code)
	first := make([]float32, 10)
	kernels.FillPattern(first, 0)
	assert.Equal(t, string(driver.Bytes(first)), out, "gen to stdout")
}

func TestGenBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--out", "x"}, "overlap gen: --size is required"},
		{[]string{"--size", "6", "--out", "x"}, "overlap gen: --size 6 is not a multiple of 4 bytes (one float32)"},
		{[]string{"--size", "8"}, "overlap gen: --out FILE is required (- for stdout)"},
		{[]string{"--size", "8", "--out", "x", "--offset", "-1"}, "overlap gen: --offset -1: must not be negative"},
		{[]string{"--size", "8", "--out", "x", "y"}, `overlap gen: unexpected argument "y"`},
		{[]string{"--size", "lots"}, `overlap gen: --size "lots" is not a size (use a number, optionally with K, M or G)`},
	} {
		code, _, errOut := runCLI(append([]string{"gen"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, tc.want)
		assert.Equal(t, tc.want+"\n", errOut)
	}
}

// TestGenRefusesMoreThanTheDisk: gen refuses a file larger than the room
// on its file system, before writing anything; the trial's gen --size
// 100G filled the disk and left a 64.8 GB partial file. An existing file's
// size counts as room (it is truncated first), on its own file system;
// /dev/null takes anything. The room is a stand-in's, 1 MiB, so that the
// test does not depend on the disk it runs on.
func TestGenRefusesMoreThanTheDisk(t *testing.T) {
	defer func(f func(string) (int64, bool)) { freeSpace = f }(freeSpace)
	var asked []string
	freeSpace = func(path string) (int64, bool) { asked = append(asked, path); return 1 << 20, true }
	dir := t.TempDir()
	out := filepath.Join(dir, "huge.f32")
	code, stdout, errOut := runCLI("gen", "--size", "2M", "--out", out)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "overlap gen: --size 2097152 (2.0 MiB): more than the 1.0 MiB free on the file system of "+dir+"\n", errOut)
	assert.NoFileExists(t, out)
	assert.Equal(t, []string{dir}, asked, "a new file: its folder's file system")

	// 1.5 MiB there already: 2.5 MiB of room for it.
	require.NoError(t, os.WriteFile(out, make([]byte, 3<<19), 0o644))
	asked = nil
	code, _, errOut = runCLI("gen", "--size", "2M", "--out", out)
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, []string{out}, asked, "an existing file: its own file system")
	st, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, int64(2<<20), st.Size())

	if _, err := os.Stat("/dev/null"); err == nil {
		asked = nil
		code, _, errOut = runCLI("gen", "--size", "2M", "--out", "/dev/null")
		assert.Equal(t, exitOK, code, errOut)
		assert.Empty(t, asked, "a device takes what it takes")
	}
}

// TestStreamRefusesEndlessInputAndFullDisk: overlap stream refuses, before
// it writes anything, a character device as input (the trial's
// `--in /dev/zero` wrote 75 GB until the disk was full) and an output
// that the file system has no room for, as long as the input file; an
// output that fits, stdout, /dev/null (as output and as an input of no
// elements) go ahead.
func TestStreamRefusesEndlessInputAndFullDisk(t *testing.T) {
	defer func(f func(string) (int64, bool)) { freeSpace = f }(freeSpace)
	freeSpace = func(string) (int64, bool) { return 1 << 20, true }
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	require.NoError(t, os.WriteFile(in, make([]byte, 2<<20), 0o644))
	code, _, errOut := runCLI("stream", "--sim", "--in", in, "--out", out)
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap stream: --out "+out+" would take 2.0 MiB, the length of --in "+in+", more than the 1.0 MiB free on the file system of "+dir+"\n", errOut)
	assert.NoFileExists(t, out)
	code, stdout, errOut := runCLI("stream", "--sim", "--in", in, "--out", "-", "--iters", "1", "--quiet")
	assert.Equal(t, exitOK, code, errOut)
	assert.Len(t, stdout, 2<<20, "stdout takes what it takes")
	if _, err := os.Stat(os.DevNull); err == nil {
		code, _, errOut = runCLI("stream", "--sim", "--in", in, "--out", os.DevNull, "--iters", "1", "--quiet")
		assert.Equal(t, exitOK, code, "a device takes what it takes: %s", errOut)
		code, _, errOut = runCLI("stream", "--sim", "--in", os.DevNull, "--out", filepath.Join(dir, "none.f32"), "--quiet")
		assert.Equal(t, exitOK, code, "the null device ends at once: %s", errOut)
	}
	freeSpace = func(string) (int64, bool) { return 4 << 20, true }
	code, _, errOut = runCLI("stream", "--sim", "--in", in, "--out", out, "--iters", "1", "--quiet")
	assert.Equal(t, exitOK, code, errOut)
	if st, err := os.Stat("/dev/zero"); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		code, _, errOut = runCLI("stream", "--sim", "--in", "/dev/zero", "--out", filepath.Join(dir, "zero.f32"))
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap stream: --in /dev/zero is a character device, which need not end: give a file, or pipe as much as you mean through --in - (head -c SIZE /dev/zero | overlap ... --in -)\n", errOut)
		assert.NoFileExists(t, filepath.Join(dir, "zero.f32"))
	}
}

// TestRunStreamFileToFile generates a file, streams it through the seed
// kernel on the simulator with every option of the measurement, and
// checks the output file byte for byte and the report's shape.
func TestRunStreamFileToFile(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	const n = 100_003
	code, _, errOut := runCLI("gen", "--size", "400012", "--out", in)
	require.Equal(t, exitOK, code, errOut)
	code, stdout, errOut := runCLI("stream", "--sim", "--in", in, "--out", out, "--chunk", "8K", "--iters", "3", "--verify", "--bound", "--readers", "3", "--writers", "2", "--piece", "8K")
	require.Equal(t, exitOK, code, errOut)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(seedFile(n, 0, 3), got), "the output file holds the seed of every element")
	for _, line := range []string{
		"overlap stream: seed (3 iterations) on simulator, streaming " + in + " → " + out + " [simulated",
		"100003 float32 elements (390.6 KiB in, 390.6 KiB out); chunk 8192 elements, 6 slots, 4 compute stream(s)\n",
		"while reading, 3 pread goroutine(s)",
		"while writing, 2 pwrite goroutine(s)",
		"← bounds the run",
		"peak RSS (VmHWM)",
		"; pinned slots 384.0 KiB\n", // 6 slots of 8192 float32, for the input and the output
		"bound, measured in this run (slowest alone):",
		"efficiency = bound / streaming time:",
		"every one of the 100003 output elements, read back from " + out + ", matched the CPU reference",
	} {
		assert.Contains(t, stdout, line)
	}
	assert.Equal(t, 1, strings.Count(stdout, "← bounds the run"))
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".overlap-bound-*"))
	assert.Empty(t, leftovers, "the bound's scratch file is removed")

	code, stdout, errOut = runCLI("stream", "--sim", "--in", in, "--out", out, "--chunk", "8K", "--iters", "3", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res bench.StreamResult
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Equal(t, int64(n), res.Elems)
	assert.Equal(t, int64(4*n), res.OutBytes)
	require.Len(t, res.Stages, 5)
	for i, s := range []string{"read", "H2D", "compute", "D2H", "write"} {
		assert.Equal(t, s, res.Stages[i].Stage)
	}

	// The bound's reads and writes are timed on the simulator's virtual
	// clock, as the run's are: each part alone takes no longer than the
	// run that does them all at once, and the efficiency is at most 100%.
	// Timed on the wall clock, they made efficiencies of 2000% and more.
	code, stdout, errOut = runCLI("stream", "--sim", "--in", in, "--out", out, "--chunk", "8K", "--iters", "3", "--bound", "--json")
	require.Equal(t, exitOK, code, errOut)
	res = bench.StreamResult{}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	require.NotNil(t, res.Bound)
	b := res.Bound
	for name, ms := range map[string]float64{"read": b.ReadMs, "write": b.WriteMs, "in-memory pipeline": b.PipelineMs} {
		assert.Positive(t, ms, name)
		assert.LessOrEqual(t, ms, res.Ms, "%s alone against the run", name)
	}
	assert.LessOrEqual(t, b.Efficiency, 1.0)
	assert.Greater(t, b.Efficiency, 0.2)
}

func TestRunStreamTwoInputs(t *testing.T) {
	dir := t.TempDir()
	a, b, out := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "out")
	require.Equal(t, exitOK, runCLIcode("gen", "--size", "40000", "--out", a))
	require.Equal(t, exitOK, runCLIcode("gen", "--size", "40000", "--out", b, "--offset", "99"))
	for _, k := range []string{"saxpy", "lerp"} {
		code, stdout, errOut := runCLI("stream", "--sim", "--kernel", k, "--in", a+","+b, "--out", out, "--chunk", "1K", "--verify")
		require.Equal(t, exitOK, code, errOut)
		assert.Contains(t, stdout, "every one of the 10000 output elements")
	}
}

// TestRunStreamToDevice writes to a device file: nothing to measure a
// write against, and the report says so (--verify, which cannot read it
// back, is refused: TestErrorsBeforeWork).
func TestRunStreamToDevice(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil || os.DevNull != "/dev/null" {
		t.Skip("skipping: no /dev/null")
	}
	in := filepath.Join(t.TempDir(), "in")
	require.Equal(t, exitOK, runCLIcode("gen", "--size", "4000", "--out", in))
	code, stdout, errOut := runCLI("stream", "--sim", "--in", in, "--out", os.DevNull, "--chunk", "1K", "--bound")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, stdout, "the write not measured: the output is not a regular file")
}

// TestRunStreamEmptyBound: an empty input's bound says its write took
// no time, not that the output is not a regular file (the bound's write
// is timed on the simulator's clock, where writing nothing takes 0 ms).
func TestRunStreamEmptyBound(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(in, nil, 0o644))
	code, stdout, errOut := runCLI("stream", "--sim", "--in", in, "--out", filepath.Join(dir, "out"), "--chunk", "1K", "--bound")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, stdout, "write the output 0.00 ms")
	assert.NotContains(t, stdout, "not a regular file")
}

func runCLIcode(args ...string) int {
	code, _, _ := runCLI(args...)
	return code
}

// TestRunStreamStdio streams stdin to stdout; the report goes to stderr.
func TestRunStreamStdio(t *testing.T) {
	const n = 5000
	x := make([]float32, n)
	kernels.FillPattern(x, 0)
	stdin = struct{ io.Reader }{bytes.NewReader(driver.Bytes(x))} // a pipe: no ReadAt
	defer func() { stdin = os.Stdin }()
	code, stdout, errOut := runCLI("stream", "--sim", "--in", "-", "--out", "-", "--chunk", "1K", "--iters", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, bytes.Equal(seedFile(n, 0, 2), []byte(stdout)), "stdout holds the output alone")
	assert.Contains(t, errOut, "streaming - → -")
	assert.Contains(t, errOut, "while reading, in order")
	assert.Contains(t, errOut, "while writing, in order")
}

// TestRunStreamBadInput: a stream ending inside an element fails with one
// line naming the stream, the byte offset and what the output holds, and
// the output file holds exactly that prefix of the correct output. Issue
// 13. (A regular file whose length is not whole elements is refused before
// the run: TestErrorsBeforeWork; a pipe's length shows only as it is read.)
func TestRunStreamBadInput(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.f32")
	x := make([]float32, 5000)
	kernels.FillPattern(x, 0)
	stdin = struct{ io.Reader }{bytes.NewReader(append(driver.Bytes(x), 1, 2))} // a pipe: no ReadAt
	defer func() { stdin = os.Stdin }()
	code, stdout, errOut := runCLI("stream", "--sim", "--in", "-", "--out", out, "--chunk", "1K", "--iters", "2")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "overlap stream: pipeline: - at byte 20000: the stream ends inside an element: 2 trailing bytes of a 4-byte element ("+
		out+" holds the first 16384 bytes of the correct output, 4096 elements)\n", errOut)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(seedFile(5000, 0, 2)[:16384], got), "an exact prefix")
}

func TestRunStreamBadFlags(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	require.NoError(t, os.WriteFile(in, make([]byte, 64), 0o644))
	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"--in", in}, "overlap stream: --out: kernel seed has 1 output, got 0", exitUsage},
		{[]string{"--in", in + "," + in, "--out", "o"}, "overlap stream: --in: kernel seed takes 1 input(s), got 2", exitUsage},
		{[]string{"--in", in, "--out", "o", "--kernel", "saxpy"}, "overlap stream: --in: kernel saxpy takes 2 input(s), got 1", exitUsage},
		{[]string{"--in", "-,-", "--out", "o", "--kernel", "lerp"}, "overlap stream: --in: stdin (-) can be only one input", exitUsage},
		{[]string{"--in", in, "--out", in}, "overlap stream: --out " + in + " is the input " + in + " (the same file): writing it would destroy the input as it is read", exitUsage},
		{[]string{"--in", in, "--out", "o", "--kernel", "fft"}, `overlap stream: --kernel "fft": unknown (have axpb, lerp, saxpy, seed)`, exitUsage},
		{[]string{"--in", in, "--out", "o", "--slots", "1"}, "overlap stream: --slots 1: want 2 to 1024, and at least --compute-streams 4", exitUsage},
		{[]string{"--in", in, "--out", "o", "--direct", "--chunk", "1500"}, "overlap stream: --direct: a chunk of 1500 float32 is not a whole number of 4096-byte pages", exitUsage},
		{[]string{"--in", in, "--out", "o", "--direct-out", "--chunk", "1500"}, "overlap stream: --direct-out: a chunk of 1500 float32 is not a whole number of 4096-byte pages", exitUsage},
		{[]string{"--in", in, "--out", "-", "--direct-out"}, "overlap stream: --direct-out and --preallocate write to a file: they cannot write stdout (--out -)", exitUsage},
		{[]string{"--in", "-", "--out", "o", "--preallocate"}, "overlap stream: --preallocate takes the output's size from the inputs' files: it cannot read stdin (--in -)", exitUsage},
		{[]string{"--in", in, "--out", "o", "--kernel", "axpb", "--iters", "3"}, "overlap stream: --iters is the seed kernel's; axpb takes no iterations", exitUsage},
		{[]string{"--in", filepath.Join(dir, "missing"), "--out", filepath.Join(dir, "o"), "--sim"}, "overlap stream: --in " + filepath.Join(dir, "missing") + ": no such file", exitUsage},
		{[]string{"--in", in, "--out", "o", "--elems", "5"}, "overlap stream: --elems is a flag of overlap run, not of overlap stream (overlap stream -h lists its flags)", exitUsage},
		{[]string{"--in", in, "--out", "o", "--readers", "-1"}, "overlap stream: --readers and --writers: want 0 (the default) to 1024", exitUsage},
		{[]string{"--in", in, "--out", "o", "--piece", "2G"}, "overlap stream: --piece 2147483648: at most 1G", exitUsage},
	} {
		code, _, errOut := runCLI(append([]string{"stream"}, tc.args...)...)
		assert.Equal(t, tc.code, code, tc.want)
		assert.Equal(t, tc.want+"\n", errOut)
	}
}

func TestRunStreamHelp(t *testing.T) {
	code, out, errOut := runCLI("stream", "--in", "-h")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, errOut)
	assert.True(t, strings.HasPrefix(out, "usage: "+streamCmd.usageLine+"\n"), out)
	assert.Contains(t, out, "-piece value\n    \tbytes per pread or pwrite (default 1M)")
	code, out, _ = runCLI("gen", "-h")
	assert.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(out, "usage: overlap gen --size BYTES --out FILE"), out)
}

// FuzzStreamFlags checks that whatever overlap run --in accepts is a
// runnable shape.
func FuzzStreamFlags(f *testing.F) {
	f.Add("--in", "a,b", "--kernel", "saxpy")
	f.Add("--in", "-", "--chunk", "1000")
	f.Add("--in", "a", "--direct", "--slots=3")
	f.Add("--in", "a", "--piece", "1K")
	f.Add("--in", "a", "--kernel", "axpb")
	// The files a and b exist, so that the checks of the files pass.
	dir := f.TempDir()
	for _, name := range []string{"a", "b"} {
		require.NoError(f, os.WriteFile(filepath.Join(dir, name), make([]byte, 4096), 0o644))
	}
	f.Chdir(dir)
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		o, err := parseStreamFlags([]string{"--out", "o", a, b, c, d}, io.Discard)
		if err != nil {
			return
		}
		want := map[string]int{"seed": 1, "axpb": 1, "saxpy": 2, "lerp": 2}[o.Kernel]
		if want == 0 || len(o.Inputs) != want || o.ChunkElems < minStreamChunk || o.ComputeStreams < 1 ||
			(o.Slots != 0 && o.Slots < o.ComputeStreams) || o.Readers < 0 || o.Writers < 0 || o.PieceBytes < 0 || o.PieceBytes > 1<<30 ||
			(o.Direct && o.ChunkElems*4%4096 != 0) {
			t.Fatalf("accepted bad options: %+v", o)
		}
		for _, in := range o.Inputs {
			if in == "" || in == o.Output && in != "-" {
				t.Fatalf("accepted bad files: %+v", o)
			}
		}
	})
}
