package bench

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionErrorText: an option's error names fields as they are
// called, or as a caller names them.
func TestOptionErrorText(t *testing.T) {
	err := optionErr("{Slots} %d: want 2 to 1024, and at least {ComputeStreams} %d (file {x}.f32)", 1, 4)
	assert.Equal(t, "Slots", err.Option)
	assert.EqualError(t, err, "Slots 1: want 2 to 1024, and at least ComputeStreams 4 (file {x}.f32)")
	flags := map[string]string{"Slots": "--slots"}
	assert.Equal(t, "--slots 1: want 2 to 1024, and at least ComputeStreams 4 (file {x}.f32)", err.Text(func(f string) string { return flags[f] }))
	// A file name with braces in it is an argument, never renamed.
	err = optionErr("{Inputs} %s: no such file", "{Slots}")
	assert.Equal(t, "--in {Slots}: no such file", err.Text(func(string) string { return "--in" }))
}

func TestCheckWorkAndChunks(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{CheckWork(4<<20, 100, true), ""},
		{CheckWork(1<<30, 1000, true), "Iters 1000 over 1073741824 elements is 1.1e12 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower Iters or Elems"},
		// Just over the limit: the count does not print as the limit.
		{CheckWork(64<<20, 3000, true), "Iters 3000 over 67108864 elements is 2.01e11 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower Iters or Elems"},
		{CheckWork(2000004000, 100, true), "Iters 100 over 2000004000 elements is 2.000004e11 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower Iters or Elems"},
		{CheckWork(1<<30, 1000, false), ""},
		{CheckWork(1<<32-1, 1<<20, false), "Iters 1048576 over 4294967295 elements is 4.5e15 kernel iterations per pass; a run takes at most 1e14 per pass (about 100 s on an NVIDIA H200): lower Iters or Elems"},
		{CheckChunks(1<<30, 1<<10, true), ""},
		{CheckChunks(1<<30, 1<<9, true), "ChunkElems 512 cuts Elems 1073741824 into 2097152 chunks; the simulator takes at most 1048576 (about 0.1 ms of CPU each): use a larger ChunkElems"},
		{CheckChunks(1<<30, 1<<9, false), ""},
		{CheckChunks(1<<32-1, 1<<9, false), "ChunkElems 512 cuts Elems 4294967295 into 8388608 chunks; a run takes at most 4194304 (several driver calls each): use a larger ChunkElems"},
		{CheckChunks(10, 0, false), "ChunkElems 0: must be positive"},
	} {
		if tc.want == "" {
			assert.NoError(t, tc.err)
			continue
		}
		assert.EqualError(t, tc.err, tc.want)
		var oe *OptionError
		assert.True(t, errors.As(tc.err, &oe), tc.want)
	}
}

// TestCheckStream: the streaming run's options and files are checked
// before anything is opened for writing, in the options' words.
func TestCheckStream(t *testing.T) {
	dir := t.TempDir()
	in, long := filepath.Join(dir, "in.f32"), filepath.Join(dir, "long.f32")
	require.NoError(t, os.WriteFile(in, make([]byte, 4096), 0o644))
	require.NoError(t, os.WriteFile(long, make([]byte, 8192), 0o644))
	out, link := filepath.Join(dir, "out.f32"), filepath.Join(dir, "link.f32")
	require.NoError(t, os.Symlink(in, link))
	for _, tc := range []struct {
		o    StreamOptions
		want string
	}{
		{StreamOptions{Inputs: []string{in}, Output: out}, ""},
		{StreamOptions{Inputs: []string{in}, Output: out, Kernel: "gemm"}, `Kernel "gemm": unknown (have axpb, lerp, saxpy, seed)`},
		{StreamOptions{Inputs: []string{in}, Output: out, Kernel: "saxpy"}, "Inputs: kernel saxpy takes 2 input(s), got 1"},
		{StreamOptions{Inputs: []string{in}}, "Output: kernel seed has 1 output, got 0"},
		{StreamOptions{Inputs: []string{in}, Output: out, ChunkElems: 3}, "ChunkElems 3: a streaming run's chunks are at least 1024 elements (4 KiB): each costs a read, a write and several driver calls"},
		{StreamOptions{Inputs: []string{in}, Output: out, Slots: 3}, "Slots 3: want 2 to 1024, and at least ComputeStreams 4"},
		{StreamOptions{Inputs: []string{in}, Output: out, ComputeStreams: 65}, "ComputeStreams 65: want 1 to 64"},
		{StreamOptions{Inputs: []string{in}, Output: out, PieceBytes: -1}, "PieceBytes -1: must not be negative"},
		{StreamOptions{Inputs: []string{in}, Output: out, Direct: true, ChunkElems: 1500}, "Direct: a chunk of 1500 float32 is not a whole number of 4096-byte pages"},
		{StreamOptions{Inputs: []string{"-"}, Output: out, Verify: true}, "Verify reads the inputs back from their files: it cannot read stdin (Inputs -)"},
		{StreamOptions{Inputs: []string{in, long}, Output: out, Kernel: "lerp"}, "Inputs: " + in + " holds 1024 elements and " + long + " 2048; the inputs must be as long"},
		{StreamOptions{Inputs: []string{in}, Output: filepath.Join(dir, ".", "in.f32")}, "Output " + filepath.Join(dir, "in.f32") + " is the input " + in + " (the same file): writing it would destroy the input as it is read"},
		{StreamOptions{Inputs: []string{dir}, Output: out}, "Inputs " + dir + ": is a directory"},
		{StreamOptions{Inputs: []string{in}, Output: link}, "Output " + link + " is the input " + in + " (the same file): writing it would destroy the input as it is read"},
		{StreamOptions{Inputs: []string{in}, Output: out, Iters: 1 << 30}, "Iters 1073741824 over the 1024 elements of " + in + " is 1.1e12 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower Iters"},
		{StreamOptions{Inputs: []string{"-"}, Output: out, Iters: 1 << 30}, "Iters 1073741824 over one chunk of 1048576 elements is 1.1e15 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower Iters or ChunkElems"},
	} {
		err := CheckStream(tc.o, true)
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.EqualError(t, err, tc.want)
	}
	err := CheckStream(StreamOptions{Inputs: []string{filepath.Join(dir, "none")}, Output: out}, false)
	var oe *OpenError
	require.ErrorAs(t, err, &oe, "an input that cannot be opened")
	assert.EqualError(t, oe.Err, "Inputs "+filepath.Join(dir, "none")+": no such file")
}

func TestFitChunks(t *testing.T) {
	assert.Equal(t, []int{1 << 20, 4 << 20}, FitChunks([]int{1 << 20, 4 << 20, 16 << 20}, 4<<20))
	assert.Equal(t, []int{512 << 10}, FitChunks([]int{1 << 20, 4 << 20}, 512<<10), "the job as one chunk when none fits")
}

// TestChecksOfTheBenchmarks: each benchmark refuses options it cannot
// run, in the options' words, before it runs.
func TestChecksOfTheBenchmarks(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{CheckSweep(SweepOptions{Elems: 1 << 20, Iters: []int{100}, Chunks: []int{1 << 20}, Slots: []int{2, 3}}, true), ""},
		{CheckSweep(SweepOptions{Elems: -1}, false), "Elems -1: must not be negative"},
		{CheckSweep(SweepOptions{Elems: 1 << 20, Slots: []int{2, 1025}}, false), "Slots 1025: want 2 to 1024"},
		{CheckSweep(SweepOptions{Elems: 1 << 20, Chunks: []int{2 << 20}}, false), "Chunks 2097152 is larger than Elems 1048576"},
		{CheckSweep(SweepOptions{Elems: 1 << 33}, false), "Elems 8589934592: at most 4294967295"},
		{CheckSweep(SweepOptions{Elems: 1, Repeat: 1001}, false), "Repeat 1001: want 1 to 1000"},
		{CheckSweep(SweepOptions{Elems: 1, ComputeStreams: 65}, false), "ComputeStreams 65: want 1 to 64"},
		{CheckSweep(SweepOptions{Elems: 1, Iters: []int{-1}}, false), "Iters -1: must not be negative"},
		{CheckSweep(SweepOptions{Elems: 1 << 30, Iters: []int{1000}}, true), "Iters 1000 over 1073741824 elements is 1.1e12 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower Iters or Elems"},
		{CheckSweep(SweepOptions{Elems: 1 << 30, Chunks: []int{512}}, true), "ChunkElems 512 cuts Elems 1073741824 into 2097152 chunks; the simulator takes at most 1048576 (about 0.1 ms of CPU each): use a larger ChunkElems"},
		{CheckScaling(ScalingOptions{Slots: 3}), "Slots 3: fewer than the 4 compute streams"},
		{CheckScaling(ScalingOptions{Iters: -1}), "Iters -1: must not be negative"},
		{CheckSmallJobs(SmallJobsOptions{}), ""},
		{CheckSmallJobs(SmallJobsOptions{Sizes: []int{1 << 29}}), "Sizes 536870912: at most 268435456 per job"},
		{CheckSmallJobs(SmallJobsOptions{Workers: []int{257}}), "Workers 257: want 1 to 256"},
		{CheckSmallJobs(SmallJobsOptions{Seconds: 61}), "Seconds 61: want more than 0, at most 60"},
		{CheckSmallJobs(SmallJobsOptions{Jobs: -1}), "Jobs -1: want 0 (run for Seconds) to 16777216"},
		{CheckSmallJobs(SmallJobsOptions{Rounds: 101}), "Rounds 101: rounds from 1 to 100"},
		{CheckSmallJobs(SmallJobsOptions{Sim: true, DirectCalls: true}), "DirectCalls needs a GPU, not Sim: the simulator makes no driver calls"},
		{CheckSmallJobs(SmallJobsOptions{Sim: true, Waits: []driver.Wait{driver.WaitSpin}}), "Waits spin needs a GPU: the simulator has no host thread waiting on a driver"},
	} {
		if tc.want == "" {
			assert.NoError(t, tc.err)
			continue
		}
		assert.EqualError(t, tc.err, tc.want)
	}
}

// TestSmallJobsDefaults: on the simulator a cell runs a few jobs, not
// seconds, unless Seconds says otherwise.
func TestSmallJobsDefaults(t *testing.T) {
	o := SmallJobsOptions{Sim: true}.WithDefaults()
	assert.Equal(t, SmallJobsSimJobs, o.Jobs)
	assert.Equal(t, []driver.Wait{driver.WaitDefault}, o.Waits)
	o = SmallJobsOptions{Sim: true, Seconds: 0.1}.WithDefaults()
	assert.Zero(t, o.Jobs)
	o = SmallJobsOptions{}.WithDefaults()
	assert.Zero(t, o.Jobs)
	assert.Equal(t, SmallJobsSeconds, o.Seconds)
	assert.Equal(t, []driver.Wait{SmallJobsWait}, o.Waits)
	assert.Equal(t, 1, o.Rounds)
}

func TestWriteSweepFiles(t *testing.T) {
	dir := t.TempDir()
	csvPath, svgPath := filepath.Join(dir, "s.csv"), filepath.Join(dir, "s.svg")
	rows := []SweepRow{{Iters: 1, Host: "pinned", Chunk: 1024, Slots: 2, Ms: 1.5}}
	require.NoError(t, WriteSweepFiles(rows, true, csvPath, svgPath))
	got, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	assert.Equal(t, "iters,host,chunk_elems,slots,ms,gb_per_s,bound_ms,efficiency,cpp_ms,go_over_cpp,simulated\n1,pinned,1024,2,1.5000,0.000,0.0000,0.0000,,,true\n", string(got))
	svg, err := os.ReadFile(svgPath)
	require.NoError(t, err)
	assert.Equal(t, SweepSVG(rows, true), string(svg))
	require.NoError(t, WriteSweepFiles(rows, false, "", ""), "no paths, no files")
	var pe *os.PathError
	assert.ErrorAs(t, WriteSweepFiles(rows, false, filepath.Join(dir, "none", "s.csv"), ""), &pe)
}
