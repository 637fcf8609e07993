package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tables' exact text: each golden file under testdata/tables is what
// overlap printed for the fixture before its rendering moved here from
// the CLI, so a change to one is a change to the CLI's output.

// TestTables writes each fixture with its writer and compares the text
// with its golden file; OVERLAP_UPDATE_GOLDEN=1 rewrites the golden files
// first (review their diff: it is the CLI's output changing).
func TestTables(t *testing.T) {
	tr, m := fixtureTune()
	trGPU, _ := fixtureTune()
	trGPU.Candidates, trGPU.Verified, trGPU.Model.PerChunkInStream, trGPU.Measured = trGPU.Candidates[:2], false, 0, 0
	plain := fixtureSmallJobs()[1:2]
	plain[0].Cpp, plain[0].Rounds = nil, 1
	cached := AutoChunk{Choice: pipeline.Choice{ChunkElems: 64 << 10, Slots: 2, ComputeStreams: 1, Predicted: 1100 * time.Microsecond}, Cached: true, CachePath: "/tmp/cache.json"}
	chosen := AutoChunk{Choice: tr.Candidates[0], Model: m}
	chosen.Measured = 950 * time.Microsecond
	flags := map[string]string{"DirectCalls": "--direct-calls"}
	for _, tc := range []struct {
		golden string
		write  func(w *bytes.Buffer) error
	}{
		{"run_sim", func(w *bytes.Buffer) error { r := fixtureRunSim(); return r.WriteTable(w) }},
		{"run_gpu", func(w *bytes.Buffer) error { r := fixtureRunGPU(); return r.WriteTable(w) }},
		{"sweep_sim", func(w *bytes.Buffer) error {
			return WriteSweepTable(w, fixtureSweep(), SweepTable{Backend: "simulator (H200)", Elems: 1 << 20, Simulated: true})
		}},
		{"sweep_empty", func(w *bytes.Buffer) error {
			return WriteSweepTable(w, nil, SweepTable{Backend: "NVIDIA H200", Elems: 128 << 20})
		}},
		{"scaling_sim", func(w *bytes.Buffer) error {
			return WriteScalingTable(w, fixtureScaling(), ScalingTable{Options: fixtureScalingOptions(), Backend: "simulator ×2", Ordinals: []int{0, 1}, Simulated: true})
		}},
		{"scaling_gpu", func(w *bytes.Buffer) error {
			return WriteScalingTable(w, fixtureScaling()[:1], ScalingTable{Options: fixtureScalingOptions(), Backend: "simulator", Ordinals: []int{3}})
		}},
		{"scaling_default_chunks", func(w *bytes.Buffer) error {
			o := fixtureScalingOptions()
			o.ChunkElems = 0 // each size's own, as overlap run takes it
			return WriteScalingTable(w, fixtureScaling(), ScalingTable{Options: o, Backend: "NVIDIA H200 ×2", Ordinals: []int{0, 1}})
		}},
		{"smalljobs_cpp", func(w *bytes.Buffer) error {
			r := &SmallJobsResult{Backend: "NVIDIA H200", Rows: fixtureSmallJobs()}
			o := SmallJobsOptions{Sim: true, Iters: 100, Seconds: 0.5, DirectCalls: true, Reference: &Reference{}}
			return r.WriteTable(w, o, func(field string) string { return flags[field] })
		}},
		{"smalljobs_plain", func(w *bytes.Buffer) error {
			r := &SmallJobsResult{Backend: "NVIDIA H200", Rows: plain}
			return r.WriteTable(w, SmallJobsOptions{Jobs: 3}, nil)
		}},
		{"stream_sim", func(w *bytes.Buffer) error { r := fixtureStream(); return r.WriteTable(w) }},
		{"stream_pipe", func(w *bytes.Buffer) error { r := fixtureStreamPipe(); return r.WriteTable(w) }},
		{"tune_sim", func(w *bytes.Buffer) error {
			return tr.WriteTable(w, TuneTable{Workload: "seed (100 iterations)", Backend: "simulator (H200)", Elems: 1 << 20, Host: pipeline.HostStaged, Repeat: 3, Simulated: true})
		}},
		{"tune_gpu", func(w *bytes.Buffer) error {
			return trGPU.WriteTable(w, TuneTable{Workload: "user.ptx:k", Backend: "NVIDIA H200", Elems: 4096, Host: pipeline.HostPinned, Repeat: 1})
		}},
		{"autochunk", func(w *bytes.Buffer) error {
			w.WriteString(cached.String() + "\n" + chosen.String() + "\n")
			return nil
		}},
		{"devices", func(w *bytes.Buffer) error { return WriteDevicesTable(w, fixtureDevices()) }},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			path := filepath.Join("testdata", "tables", tc.golden+".txt")
			var b bytes.Buffer
			require.NoError(t, tc.write(&b))
			if os.Getenv("OVERLAP_UPDATE_GOLDEN") == "1" {
				require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), b.String())
		})
	}
}

// TestTablesSmallJobsFieldNames: the small-jobs table names DirectCalls
// by its field unless the caller names it otherwise.
func TestTablesSmallJobsFieldNames(t *testing.T) {
	r := &SmallJobsResult{Backend: "NVIDIA H200"}
	var b bytes.Buffer
	require.NoError(t, r.WriteTable(&b, SmallJobsOptions{Iters: 100, Seconds: 0.5, DirectCalls: true}, nil))
	assert.Equal(t, "overlap bench small-jobs: seed kernel (100 iterations) on NVIDIA H200; each job H2D, kernel, D2H, wait; a pipeline per goroutine, pinned buffers; 0.5 s per cell; direct calls (DirectCalls)\n\n"+
		"WAIT     ELEMS GORS     JOBS     JOBS/s        P50        P99   CPU/JOB\n\n"+
		"GORS: goroutines, each with its own pipeline on one context; P50/P99: latency of one job; CPU/JOB: the process's CPU time over the jobs; every element of each goroutine's last job verified; direct calls (DirectCalls)\n", b.String())
}

// TestTablesBeyondTheBound: a row above 100% of its bound comes with a
// line that says why (issue 11), and one below it with none.
func TestTablesBeyondTheBound(t *testing.T) {
	run := RunSummary{Backend: "NVIDIA H200", Kernel: "seed", Iters: 100, Elems: 1 << 20, HostMode: "staged",
		Stages: Stages{StageInMs: 2, H2DMs: 1, ComputeMs: 1.5, D2HMs: 1, StageOutMs: 1.9, BoundMs: 2, Slowest: "stage-in"},
		Rows:   []RunMode{{Mode: "pipeline (staged)", Ms: 2.2, Efficiency: 0.9}}}
	var b bytes.Buffer
	require.NoError(t, run.WriteTable(&b))
	assert.NotContains(t, b.String(), "note:")
	// An 8 GiB stream on the H200 took 2.33 s while its write alone,
	// measured after it, took 3.19 s (136.9%).
	for _, tc := range []struct {
		eff  float64
		want bool
	}{{1.369, true}, {0.96, false}} {
		b.Reset()
		r := &StreamResult{Ms: 2332, Bound: &StreamBound{BoundMs: 3193, Slowest: "write", WriteMs: 3193, Efficiency: tc.eff}}
		require.NoError(t, r.WriteTable(&b))
		assert.Equal(t, tc.want, bytes.Contains(b.Bytes(), []byte("above 100%: the write stage alone (the faster of two passes before the run) took longer than the whole run")), b.String())
	}
}

// TestTablesErrors: a writer returns its writer's first error, and a
// nil result or a tune with no candidates is an error, not a panic.
func TestTablesErrors(t *testing.T) {
	fail := failWriter{} // "disk full" (pattern_test.go)
	r := fixtureRunSim()
	st := fixtureStream()
	tr, _ := fixtureTune()
	for name, err := range map[string]error{
		"run":       r.WriteTable(fail),
		"sweep":     WriteSweepTable(fail, fixtureSweep(), SweepTable{}),
		"scaling":   WriteScalingTable(fail, fixtureScaling(), ScalingTable{}),
		"smalljobs": (&SmallJobsResult{Rows: fixtureSmallJobs()}).WriteTable(fail, SmallJobsOptions{}, nil),
		"stream":    st.WriteTable(fail),
		"tune":      tr.WriteTable(fail, TuneTable{}),
		"devices":   WriteDevicesTable(fail, fixtureDevices()),
	} {
		assert.EqualError(t, err, "disk full", name)
	}
	var b bytes.Buffer
	assert.EqualError(t, (*RunSummary)(nil).WriteTable(&b), "bench: RunSummary.WriteTable: no summary")
	assert.EqualError(t, (*SmallJobsResult)(nil).WriteTable(&b, SmallJobsOptions{}, nil), "bench: SmallJobsResult.WriteTable: no result")
	assert.EqualError(t, (*StreamResult)(nil).WriteTable(&b), "bench: StreamResult.WriteTable: no result")
	assert.EqualError(t, (*TuneResult)(nil).WriteTable(&b, TuneTable{}), "bench: TuneResult.WriteTable: no candidates")
	assert.EqualError(t, (&TuneResult{}).WriteTable(&b, TuneTable{}), "bench: TuneResult.WriteTable: no candidates")
	assert.Zero(t, b.Len())
}

// TestPredictionText: tune states the comparison in words. Issue 10: it
// printed "off by -84.3%".
func TestPredictionText(t *testing.T) {
	cases := []struct {
		measured, predicted time.Duration
		want                string
	}{
		{100 * time.Millisecond, 15700 * time.Microsecond, "84.3% below the measurement"},
		{100 * time.Millisecond, 112 * time.Millisecond, "12.0% above the measurement"},
		{100 * time.Millisecond, 100 * time.Millisecond, "equal to the measurement"},
		{0, time.Millisecond, "nothing measured"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, predictionText(c.measured, c.predicted))
	}
}

// TestLocalityColumns: overlap devices shows each GPU's NUMA node and local
// CPUs where the host says, and "-" where it does not (issue 12).
func TestLocalityColumns(t *testing.T) {
	cases := []struct {
		info       DeviceInfo
		numa, cpus string
	}{
		{DeviceInfo{Located: true, NUMANode: 1, LocalCPUs: []int{16, 17, 18, 19, 40}}, "1", "16-19,40"},
		{DeviceInfo{Located: true, NUMANode: -1, LocalCPUs: []int{0, 1, 2, 3}}, "-", "0-3"},
		{DeviceInfo{NUMANode: -1}, "-", "-"},
	}
	for _, c := range cases {
		numa, cpus := localityColumns(c.info)
		assert.Equal(t, c.numa, numa)
		assert.Equal(t, c.cpus, cpus)
	}
}

// fixtures of the table tests: each covers every branch of its writer.

func fixtureRunSim() RunSummary {
	return RunSummary{Simulated: true, Profile: "NVIDIA H200 (built-in profile)", Backend: "simulator (H200)", Kernel: "seed", Iters: 100,
		Elems: 1 << 20, Bytes: 8 << 20, ChunkElems: 256 << 10, ChunkChoice: "chunk 262144, 3 slots, 1 compute stream(s), events: predicted 1.00 ms",
		Slots: 3, ComputeStreams: 1, HostMode: "staged",
		Rows:     []RunMode{{Mode: "synchronous", Ms: 3.456, GBps: 2.43, Speedup: 1}, {Mode: "pipeline (staged)", Ms: 1.9, GBps: 4.41, Speedup: 1.82, Efficiency: 2 / 1.9}},
		Stages:   Stages{StageInMs: 2, H2DMs: 1, ComputeMs: 1.5, D2HMs: 1, StageOutMs: 1.9, CopiesMs: 1.25, StagingMs: 2.5, BoundMs: 2, Slowest: "stage-in"},
		Devices:  []RunDevice{{Device: 0, Name: "NVIDIA H200", Chunks: 3, BusyMs: 1.5, Share: 0.75, BoundShare: 0.5}, {Device: 1, Name: "NVIDIA H200", Chunks: 1, BusyMs: 0.5, Share: 0.25, BoundShare: 0.5}},
		Verified: "every element of all 4 runs matched the CPU reference (tolerance 1e-05)"}
}

func fixtureRunGPU() RunSummary {
	return RunSummary{Backend: "NVIDIA H200", Kernel: "axpb", Elems: 1 << 20, Bytes: 8 << 20, ChunkElems: 1 << 20, Slots: 2, ComputeStreams: 1, HostMode: "pinned",
		Rows:   []RunMode{{Mode: "pipeline (pinned)", Ms: 0.61, GBps: 13.75, Efficiency: 0.9}},
		Stages: Stages{H2DMs: 0.3, ComputeMs: 0.1, D2HMs: 0.3, BoundMs: 0.3, Slowest: "H2D"}, Verified: "not verified", WarmUpMs: 500, Rehearsed: true}
}

func fixtureSweep() []SweepRow {
	return []SweepRow{
		{Iters: 10, Host: "pinned", Chunk: 1 << 20, Slots: 2, Ms: 1.234, GBps: 6.8, BoundMs: 1.1, Efficiency: 0.891, CppMs: 1.2, Ratio: 1.0283},
		{Iters: 10, Host: "registered", Chunk: 4 << 20, Slots: 3, Ms: 1.01, GBps: 8.3, BoundMs: 1.1, Efficiency: 1.089},
	}
}

func fixtureScaling() []ScalingRow {
	return []ScalingRow{
		{Elems: 1 << 20, ChunkElems: 1 << 18, Host: "pinned", Devices: 1, Ms: 2, GBps: 4.2, BoundMs: 1.8, Slowest: "H2D", Efficiency: 0.9, Speedup: 1, Chunks: []int{4}, CppMs: 2.1, Ratio: 0.952},
		{Elems: 1 << 20, ChunkElems: 1 << 18, Host: "auto (registered)", Devices: 2, Ms: 0.9, GBps: 9.3, BoundMs: 0.95, Slowest: "D2H", Efficiency: 0.95 / 0.9, Speedup: 2.22, Chunks: []int{2, 3}},
		{Elems: 3000, ChunkElems: 3000, Host: "registered", Devices: 2, Ms: 0.1, GBps: 0.2, BoundMs: 0.05, Slowest: "compute", Efficiency: 0.5, Speedup: 1.5, Chunks: []int{1, 1}},
	}
}

func fixtureScalingOptions() ScalingOptions {
	return ScalingOptions{Sizes: []int{1 << 20}, Iters: 100, ChunkElems: 1 << 18, Slots: 3, ComputeStreams: 1, Repeat: 1}
}

func fixtureSmallJobs() []SmallJobsRow {
	rows := []SmallJobsRow{
		{Wait: "spin", Elems: 4096, Workers: 1, Jobs: 900, JobsPerSec: 900, P50us: 20, P99us: 30, CPUusPerJob: 12, Rounds: 2},
		{Wait: "block", Elems: 4096, Workers: 1, Jobs: 500, JobsPerSec: 500, P50us: 40, P99us: 60, CPUusPerJob: -1, Rounds: 2},
		{Wait: "spin", Elems: 64 << 10, Workers: 16, Jobs: 12345, JobsPerSec: 123456.7, P50us: 120.55, P99us: 999.94, CPUusPerJob: 3.25, Rounds: 2},
	}
	cpp := []RefSmallJobs{
		{Wait: "spin", Elems: 4096, Workers: 1, JobsPerSec: 1000, P99us: 25, CPUusPerJob: 10},
		{Wait: "spin", Elems: 64 << 10, Workers: 16, JobsPerSec: 100000, P99us: 800, CPUusPerJob: 0},
	}
	if err := AttachCpp(rows, cpp); err != nil {
		panic(err)
	}
	return rows
}

func fixtureStream() StreamResult {
	return StreamResult{Simulated: true, Backend: "simulator (H200)", Kernel: "seed", Iters: 100, Inputs: []string{"a.f32", "b.f32"}, Output: "c.f32",
		Direct: true, DirectOutput: true, Elems: 1 << 20, InBytes: 8 << 20, OutBytes: 4 << 20, ChunkElems: 1 << 18, Slots: 3, ComputeStreams: 1, Ms: 12.5,
		Stages:     []StreamStage{{Stage: "read", GBps: 1.5, Ms: 5.6, How: "pread, 4 goroutines"}, {Stage: "write", GBps: 0.5, Ms: 8.4, How: "pwrite, 1 goroutine"}},
		BoundStage: "write", PeakRSS: 123 << 20, PinnedBytes: 3 << 20,
		Bound:    &StreamBound{ReadMs: 5, PipelineMs: 2, WriteMs: 13, WriteMeasured: true, BoundMs: 13, Slowest: "write", Efficiency: 1.04},
		Verified: "every element verified (--verify reads the files back)"}
}

func fixtureStreamPipe() StreamResult {
	return StreamResult{Backend: "NVIDIA H200", Kernel: "axpb", Inputs: []string{"-"}, Output: "-", Elems: 1000, InBytes: 4000, OutBytes: 4000,
		ChunkElems: 1024, Slots: 2, ComputeStreams: 1, Ms: 0.5, Stages: []StreamStage{{Stage: "read", GBps: 0.01, Ms: 0.4, How: "stdin"}},
		BoundStage: "read", PinnedBytes: 16 << 10, Bound: &StreamBound{ReadMs: 0.4, PipelineMs: 0.1, BoundMs: 0.4, Slowest: "read", Efficiency: 0.8},
		Verified: "not verified"}
}

func fixtureTune() (*TuneResult, pipeline.Model) {
	m := pipeline.Model{H2D: pipeline.StageCost{Fixed: 12345 * time.Nanosecond, PerElem: 0.0567}, Compute: pipeline.StageCost{Fixed: 4 * time.Microsecond, PerElem: 0.1},
		D2H: pipeline.StageCost{Fixed: 11 * time.Microsecond, PerElem: 0.0555}, PerChunk: 25 * time.Microsecond, PerChunkInStream: 8760 * time.Nanosecond}
	r := &TuneResult{Model: m, Measured: 1100 * time.Microsecond, Verified: true}
	for i := 0; i < 10; i++ {
		r.Candidates = append(r.Candidates, pipeline.Choice{ChunkElems: 64 << 10 << (i % 5), Slots: 2 + i%3, ComputeStreams: 1 + i%2,
			Schedule: [...]pipeline.Schedule{pipeline.ScheduleEvents, pipeline.ScheduleInStream}[i/3%2], Predicted: time.Duration(1000+100*i) * time.Microsecond})
	}
	return r, m
}

func fixtureDevices() []DeviceInfo {
	return []DeviceInfo{
		{Ordinal: 0, Name: "NVIDIA H200", Major: 9, Minor: 0, Memory: 150 << 30, Multiprocessors: 132, CopyEngines: 5, ConcurrentKernels: true, PCIBusID: "0000:18:00.0",
			Located: true, NUMANode: 0, LocalCPUs: []int{0, 1, 2, 3, 8}},
		{Ordinal: 1, Name: "NVIDIA GeForce RTX 4090 with a long name", Major: 8, Minor: 9, Memory: 24 << 30, Multiprocessors: 128, CopyEngines: 2, PCIBusID: "0000:9a:00.0", NUMANode: -1},
	}
}

// TestModelTextWithoutAFloor: a model with no per-chunk floor fitted (a
// job too small to probe one) says so; the trial's tune --elems 1K said
// "at least 0s a chunk".
func TestModelTextWithoutAFloor(t *testing.T) {
	_, m := fixtureTune()
	m.PerChunk, m.PerChunkInStream = 0, 0
	s := ModelText(m)
	assert.Contains(t, s, "no per-chunk floor fitted (the job is too small to probe one)")
	assert.NotContains(t, s, "at least 0s")
}

// TestSweepTableBestPerIters: the best line is per iteration count, each
// another job; the trial's sweep over two counts named the fewer
// iterations best, which is no comparison.
func TestSweepTableBestPerIters(t *testing.T) {
	rows := []SweepRow{
		{Iters: 10, Host: "pinned", Chunk: 1 << 20, Slots: 2, Ms: 2.0, Efficiency: 0.9},
		{Iters: 10, Host: "pinned", Chunk: 1 << 21, Slots: 3, Ms: 1.5, Efficiency: 0.95},
		{Iters: 100, Host: "pinned", Chunk: 1 << 20, Slots: 2, Ms: 9.0, Efficiency: 0.97},
		{Iters: 100, Host: "pinned", Chunk: 1 << 21, Slots: 3, Ms: 9.5, Efficiency: 0.92},
	}
	var b bytes.Buffer
	require.NoError(t, WriteSweepTable(&b, rows, SweepTable{Backend: "NVIDIA H200", Elems: 1 << 24}))
	assert.Contains(t, b.String(), "\nbest: chunk 2097152, 3 slots, host pinned, iters 10: 1.50 ms (95.0% of the stage bound)\nbest: chunk 1048576, 2 slots, host pinned, iters 100: 9.00 ms (97.0% of the stage bound)\n")
}
