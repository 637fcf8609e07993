package bench_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/purecuda/overlap/bench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inferFixtures are in-memory results that take every branch of the
// table: a GPU run of several chunk sizes with a baseline, and simulated
// runs, one timing only, with stage-in and stage-out.
func inferFixtures() map[string]*bench.InferResult {
	return map[string]*bench.InferResult{
		"gpu": {Backend: "NVIDIA H200 (GPU 0)", Model: "768→256→16", Widths: []int{768, 256, 16}, From: "option", Precision: "tf32",
			Rows: 1 << 20, InBytes: 3 << 30, OutBytes: 64 << 20, ParamBytes: 800 << 10, Input: "overlap's pattern", ChunkRows: 16384, Slots: 4,
			HostMode: "registered in place", RegisterMs: 12.34,
			Chunks: []bench.InferChunk{{ChunkRows: 8192, Ms: 20.5, MinMs: 19.25, RowsPerSec: 5.1e7, GBps: 160.25}, {ChunkRows: 16384, Ms: 18.125, MinMs: 18, RowsPerSec: 5.8e7, GBps: 180.5}},
			Modes:  []bench.InferRow{{Mode: "synchronous", Ms: 40.5, GBps: 80.1, RowsPerSec: 2.6e7}, {Mode: "pipeline", Ms: 18.125, GBps: 180.5, Speedup: 2.234, Efficiency: 0.9123, RowsPerSec: 5.8e7, ChunkRows: 16384}},
			Stages: bench.Stages{H2DMs: 16.5, ComputeMs: 3.25, D2HMs: 0.5, CopiesMs: 16.75, BoundMs: 16.75, Slowest: "H2D+D2H"},
			Notes:  []string{"a note", "another"}, Verified: "every value of 3 run(s) matched", WarmUpMs: 50},
		"sim": {Simulated: true, Profile: "the built-in H200 profile", Backend: "the CPU simulator (2 devices)", Model: "4→8", Widths: []int{4, 8}, From: "default",
			Precision: "fp32", Rows: 1000, InBytes: 16000, OutBytes: 32000, ParamBytes: 160, Input: "overlap's pattern", ChunkRows: 500, Slots: 3, HostMode: "staged",
			Chunks:   []bench.InferChunk{{ChunkRows: 500, Ms: 0.004, MinMs: 0.003, RowsPerSec: 999, GBps: 0.04}},
			Modes:    []bench.InferRow{{Mode: "pipeline", Ms: 0.004, GBps: 0.04, RowsPerSec: 999, ChunkRows: 500}},
			Stages:   bench.Stages{StageInMs: 1, H2DMs: 2, ComputeMs: 3, D2HMs: 4, StageOutMs: 5, StagingMs: 6, BoundMs: 6, Slowest: "stage-in+out"},
			Verified: "not verified"},
		"timing": {Simulated: true, TimingOnly: true, Profile: "h100.json", Backend: "the CPU simulator", Model: "4→8→2", Widths: []int{4, 8, 2}, From: "file",
			Precision: "fp32", Rows: 3 << 30, InBytes: 48 << 30, OutBytes: 24 << 30, ParamBytes: 1 << 10, Input: "none", ChunkRows: 65536, Slots: 4, HostMode: "pinned",
			Chunks: []bench.InferChunk{{ChunkRows: 65536, Ms: 1234.5, MinMs: 1200, RowsPerSec: 2.5e9, GBps: 40}},
			Modes:  []bench.InferRow{{Mode: "synchronous", Ms: 3000, GBps: 20, RowsPerSec: 1e9}, {Mode: "pipeline", Ms: 1234.5, GBps: 40, Speedup: 2.43, RowsPerSec: 2.5e9, ChunkRows: 65536}},
			Stages: bench.Stages{H2DMs: 1000, ComputeMs: 10, D2HMs: 500, BoundMs: 1000, Slowest: "H2D"}, Verified: "not verified: the simulator computed nothing (--timing-only)"},
	}
}

// inferStreamFixtures are streamed results: a group of GPUs with its
// bound measured, and a simulated run with neither.
func inferStreamFixtures() map[string]*bench.InferStreamResult {
	return map[string]*bench.InferStreamResult{
		"gpus": {Backend: "2 GPUs", Model: "768→16", Widths: []int{768, 16}, From: "option", Precision: "fp32", Input: "in.f32", Output: "out.f32",
			Rows: 1 << 20, InBytes: 3 << 30, OutBytes: 64 << 20, ChunkRows: 16384, Slots: 4, Ms: 250.5, RowsPerSec: 4.2e6, GBps: 13.1, ReadMs: 200.25, WriteMs: 30.5,
			Devices: []bench.StreamDeviceRow{{Device: 0, Name: "NVIDIA H200", Chunks: 33}, {Device: 1, Name: "NVIDIA H200", Chunks: 31}},
			PeakRSS: 300 << 20, PinnedBytes: 200 << 20,
			Bound:       &bench.StreamBound{ReadMs: 260, PipelineMs: 20, WriteMs: 25, WriteMeasured: true, BoundMs: 260, Slowest: "read", Efficiency: 1.04},
			BoundStages: &bench.Stages{H2DMs: 18, ComputeMs: 2, D2HMs: 1, BoundMs: 18, Slowest: "H2D"},
			Notes:       []string{"a note"}, Verified: "every one of the rows matched"},
		"sim": {Simulated: true, Backend: "the CPU simulator", Model: "4→8→2", Widths: []int{4, 8, 2}, From: "default", Precision: "fp32", Input: "-", Output: "-",
			Rows: 10, InBytes: 160, OutBytes: 80, ChunkRows: 1024, Slots: 3, Ms: 0.5, RowsPerSec: 20000, GBps: 0.0005, PinnedBytes: 48 << 10, Verified: "not verified: stdin or stdout cannot be read back"},
		"unmeasured": {Backend: "NVIDIA H200 (GPU 0)", Model: "4→8", Widths: []int{4, 8}, From: "file", Precision: "tf32", Input: "in.f32", Output: "/dev/null",
			Rows: 10, InBytes: 160, OutBytes: 320, ChunkRows: 1024, Slots: 3, Ms: 1.5, RowsPerSec: 6666, GBps: 0.3,
			Bound:    &bench.StreamBound{ReadMs: 0.5, PipelineMs: 0.25, BoundMs: 0.5, Slowest: "read", Efficiency: 0.333},
			Verified: "not verified: the input or the output is not a regular file"},
	}
}

// inferReferenceFixtures are comparisons with the PyTorch twin: on a
// GPU, and simulated beside the twin on the CPU with its variants'
// outputs apart and its files kept.
func inferReferenceFixtures() map[string]*bench.InferReferenceResult {
	gpu, sim := *inferFixtures()["gpu"], *inferFixtures()["sim"]
	gpu.FLOPsPerRow, sim.FLOPsPerRow = 2*(768*256+256*16), 2*4*8
	torch := &bench.TorchResult{Device: "cuda:0 (NVIDIA H200)", Torch: "2.5.1", CUDA: "12.4", AllowTF32: true, Passes: 5,
		Variants: []bench.TorchVariant{{Key: "whole", Name: "whole arrays, one stream", MedianMs: 30.5, MinMs: 30}, {Key: "chunked", Name: "chunks on 2 streams", ChunkRows: 16384, MedianMs: 20.25, MinMs: 19.5},
			{Key: "h2d_alone", Name: "H2D alone", ChunkRows: 16384, MedianMs: 15.5, MinMs: 15}, {Key: "d2h_alone", Name: "D2H alone", ChunkRows: 16384, MedianMs: 0.75},
			{Key: "h2d_d2h_at_once", Name: "H2D + D2H at once", ChunkRows: 16384, MedianMs: 16}, {Key: "compute_alone", Name: "compute alone", ChunkRows: 16384, MedianMs: 2.5}},
		BoundMs: 16, OutputsEqual: true}
	torch.Best = torch.Variants[1]
	cpu := &bench.TorchResult{Device: "cpu", Torch: "2.5.1", Passes: 1, Variants: []bench.TorchVariant{{Key: "whole", Name: "whole", MedianMs: 3, MinMs: 2}},
		OutputsEqual: false, MaxDiff: 1.5e-7}
	cpu.Best = cpu.Variants[0]
	return map[string]*bench.InferReferenceResult{
		"gpu": {PyTorch: torch, Ours: &gpu, SpeedVsPyTorch: 1.117, OursOfBound: 0.9241, PyTorchOfBound: 0.79,
			Comparison: bench.ReferenceComparison{Against: "output_torch.f32", Values: 16 << 20, MaxAbs: 1.25e-6, MaxRatio: 0.0123, Tolerance: "tf32's bound"}},
		"sim": {PyTorch: cpu, Ours: &sim, SpeedVsPyTorch: 750, Comparison: bench.ReferenceComparison{Against: "out.f32", Values: 8000, Outside: 3, MaxAbs: 2, MaxRatio: 4, Tolerance: "fp32's"},
			Dir: "/tmp/twin"},
	}
}

// flagName names the Activation option as overlap infer does, by its
// flag.
func flagName(field string) string { return "--" + strings.ToLower(field) }

// TestInferTables checks each table byte for byte: these are the tables
// that overlap infer printed before they moved here.
func TestInferTables(t *testing.T) {
	im, sm, rm := inferFixtures(), inferStreamFixtures(), inferReferenceFixtures()
	for _, tc := range []struct {
		name  string
		write func(*strings.Builder) error
		want  string
	}{
		{"infer gpu", func(b *strings.Builder) error { return im["gpu"].WriteTable(b, flagName) }, `overlap infer: MLP 768→256→16 (activation from --activation) in tf32 on NVIDIA H200 (GPU 0), 1048576 rows (3.0 GiB in, 64.0 MiB out, weights 800.0 KiB)
input overlap's pattern; host memory registered in place in 12.3 ms; 4 slots

CHUNK           MEDIAN         MIN       ROWS/s     GB/s
8192          20.50 ms    19.25 ms     51.00M/s    160.2
16384         18.12 ms    18.00 ms     58.00M/s    180.5  ← fastest

MODE                            TIME       ROWS/s     GB/s  SPEEDUP  EFFICIENCY
synchronous                 40.50 ms     26.00M/s     80.1        -           -
pipeline (chunk 16384)      18.12 ms     58.00M/s    180.5    2.23x       91.2%

stage bound (slowest stage alone, H2D+D2H): 16.75 ms (H2D 16.50 ms, compute 3.25 ms, D2H 0.50 ms, H2D+D2H at once 16.75 ms)
efficiency = stage bound / the pipeline's median time; every value of 3 run(s) matched
note: a note
note: another
each chunk size, and the stages, ran right after 50 ms of untimed work on the GPU, which an idle GPU needs to raise its clocks, and each chunk size after an untimed run
`},
		{"infer sim", func(b *strings.Builder) error { return im["sim"].WriteTable(b, flagName) }, `overlap infer: MLP 4→8 in fp32 on the CPU simulator (2 devices), 1000 rows (15.6 KiB in, 31.2 KiB out, weights 160 B) [simulated on the CPU: times predicted for the built-in H200 profile]
input overlap's pattern; host memory staged; 3 slots

CHUNK           MEDIAN         MIN       ROWS/s     GB/s
500            0.00 ms     0.00 ms        999/s      0.0

MODE                            TIME       ROWS/s     GB/s  SPEEDUP  EFFICIENCY
pipeline (chunk 500)         0.00 ms        999/s      0.0        -           -

stage bound (slowest stage alone, stage-in+out): 6.00 ms (stage-in 1.00 ms, H2D 2.00 ms, compute 3.00 ms, D2H 4.00 ms, stage-out 5.00 ms, stage-in+out at once 6.00 ms)
efficiency = stage bound / the pipeline's median time; not verified [simulated on the CPU: times predicted for the built-in H200 profile]
`},
		{"infer timing", func(b *strings.Builder) error { return im["timing"].WriteTable(b, flagName) }, `overlap infer: MLP 4→8→2 (activation from the file) in fp32 on the CPU simulator, 3221225472 rows (48.0 GiB in, 24.0 GiB out, weights 1.0 KiB) [simulated, timing only: times predicted for h100.json]
input none; host memory pinned; 4 slots

CHUNK           MEDIAN         MIN       ROWS/s     GB/s
65536       1234.50 ms  1200.00 ms      2.50G/s     40.0

MODE                            TIME       ROWS/s     GB/s  SPEEDUP  EFFICIENCY
synchronous               3000.00 ms      1.00G/s     20.0        -           -
pipeline (chunk 65536)    1234.50 ms      2.50G/s     40.0    2.43x           -

stage bound (slowest stage alone, H2D): 1000.00 ms (H2D 1000.00 ms, compute 10.00 ms, D2H 500.00 ms)
efficiency = stage bound / the pipeline's median time; not verified: the simulator computed nothing (--timing-only) [simulated, timing only: times predicted for h100.json]
`},
		{"stream gpus", func(b *strings.Builder) error { return sm["gpus"].WriteTable(b, flagName) }, `overlap infer: MLP 768→16 in fp32 on 2 GPUs, streaming in.f32 → out.f32
1048576 rows (3.0 GiB in, 64.0 MiB out); chunk 16384 rows, 4 slots

                 TIME       ROWS/s       GB/s
stream      250.50 ms      4.20M/s       13.1  (input and output bytes over the whole run)
read        200.25 ms                    16.1  (while reading the input)
write        30.50 ms                     2.2  (while writing the output)

DEVICE   NAME                          CHUNKS
0        NVIDIA H200                       33
1        NVIDIA H200                       31

peak RSS (VmHWM) 300.0 MiB after the stream; pinned slots 200.0 MiB (after an untimed warm-up over 2·slots chunks of zeros a device)
bound, measured in this run (slowest alone): 260.00 ms, read (read the input into pinned memory 260.00 ms, in-memory pinned pipeline 20.00 ms, write the output 25.00 ms)
the in-memory pipeline's stages alone: H2D 18.00 ms, compute 2.00 ms, D2H 1.00 ms (bound 18.00 ms, H2D)
efficiency = bound / streaming time: 104.0%
above 100%: the read stage alone took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor
note: a note
every one of the rows matched
`},
		{"stream sim", func(b *strings.Builder) error { return sm["sim"].WriteTable(b, flagName) }, `overlap infer: MLP 4→8→2 (the file names no activation: relu by default) in fp32 on the CPU simulator, streaming - → - [simulated: every time is the simulator's clock, reads and writes too; no GPU or disk rate]
10 rows (160 B in, 80 B out); chunk 1024 rows, 3 slots

                 TIME       ROWS/s       GB/s
stream        0.50 ms      20.0K/s        0.0  (input and output bytes over the whole run)
read          0.00 ms                     0.0  (while reading the input)
write         0.00 ms                     0.0  (while writing the output)

peak RSS (VmHWM) not available on this system; pinned slots 48.0 KiB (after an untimed warm-up over 2·slots chunks of zeros a device)
not verified: stdin or stdout cannot be read back [simulated: every time is the simulator's clock, reads and writes too; no GPU or disk rate]
`},
		{"stream unmeasured", func(b *strings.Builder) error { return sm["unmeasured"].WriteTable(b, flagName) }, `overlap infer: MLP 4→8 in tf32 on NVIDIA H200 (GPU 0), streaming in.f32 → /dev/null
10 rows (160 B in, 320 B out); chunk 1024 rows, 3 slots

                 TIME       ROWS/s       GB/s
stream        1.50 ms       6.7K/s        0.3  (input and output bytes over the whole run)
read          0.00 ms                     0.0  (while reading the input)
write         0.00 ms                     0.0  (while writing the output)

peak RSS (VmHWM) not available on this system; pinned slots 0 B (after an untimed warm-up over 2·slots chunks of zeros a device)
bound, measured in this run (slowest alone): 0.50 ms, read (read the input into pinned memory 0.50 ms, in-memory pinned pipeline 0.25 ms, the write not measured: the output is not a regular file)
efficiency = bound / streaming time: 33.3%
not verified: the input or the output is not a regular file
`},
		{"reference gpu", func(b *strings.Builder) error { return rm["gpu"].WriteTable(b) }, `overlap infer --reference: MLP 768→256→16 in tf32, 1048576 rows (3.0 GiB in, 64.0 MiB out), the same model file and input rows on both sides
PyTorch 2.5.1 (CUDA 12.4, allow_tf32=true) on cuda:0 (NVIDIA H200), pinned host tensors; ours on NVIDIA H200 (GPU 0), host memory registered in place; the median of 5 passes each

SIDE     VARIANT                                            CHUNK      MEDIAN         MIN     ROWS/s  NOTE
pytorch  whole arrays, one stream                               -    30.50 ms    30.00 ms   34.38M/s  52.5% of its bound
pytorch  chunks on 2 streams                                16384    20.25 ms    19.50 ms   51.78M/s  79.0% of its bound  ← PyTorch's fastest
pytorch  H2D alone                                          16384    15.50 ms    15.00 ms   67.65M/s  207.8 GB/s
pytorch  D2H alone                                          16384     0.75 ms           -    1.40G/s  89.5 GB/s
pytorch  H2D + D2H at once                                  16384    16.00 ms           -   65.54M/s  205.5 GB/s in all
pytorch  compute alone                                      16384     2.50 ms           -  419.43M/s  168.4 TFLOP/s
ours     synchronous (pageable, whole arrays, one stream)       -    40.50 ms           -   25.89M/s  41.4% of our bound
ours     pipeline (4 slots)                                  8192    20.50 ms    19.25 ms   51.15M/s  81.7% of our bound
ours     pipeline (4 slots)                                 16384    18.12 ms    18.00 ms   57.85M/s  92.4% of our bound  ← our fastest
ours     H2D alone (registered)                             16384    16.50 ms           -   63.55M/s  195.2 GB/s
ours     compute alone (input resident)                     16384     3.25 ms           -  322.64M/s  129.5 TFLOP/s
ours     D2H alone                                          16384     0.50 ms           -    2.10G/s  134.2 GB/s
ours     H2D + D2H at once (2 streams)                      16384    16.75 ms           -   62.60M/s  196.3 GB/s in all

PyTorch's fastest: chunks on 2 streams, chunk 16384: 20.25 ms; its bound (slowest stage alone, H2D + D2H at once included) 16.00 ms: 79.0% of it
ours fastest: chunk 16384: 18.12 ms; our bound (slowest stage alone, H2D+D2H) 16.75 ms: 92.4% of it
speed, ours / PyTorch's fastest: 1.117× (20.25 ms / 18.12 ms, medians)
ours vs PyTorch's output (output_torch.f32), value by value: 16777216 values, max |ours − PyTorch| 1.25e-06, max |ours − PyTorch| / tolerance 0.0123, 0 outside the tolerance
tolerance: tf32's bound
ours: every value of 3 run(s) matched
note: a note
note: another
`},
		{"reference sim", func(b *strings.Builder) error { return rm["sim"].WriteTable(b) }, `overlap infer --reference: MLP 4→8 in fp32, 1000 rows (15.6 KiB in, 31.2 KiB out), the same model file and input rows on both sides [ours simulated on the CPU: times predicted for the built-in H200 profile; PyTorch's on the CPU, a smoke test]
PyTorch 2.5.1 (CUDA none, allow_tf32=false) on cpu, pinned host tensors; ours on the CPU simulator (2 devices), host memory staged; the median of 1 passes each

SIDE     VARIANT                                            CHUNK      MEDIAN         MIN     ROWS/s  NOTE
pytorch  whole                                                  -     3.00 ms     2.00 ms   333.3K/s    ← PyTorch's fastest
ours     pipeline (3 slots)                                   500     0.00 ms     0.00 ms  250.00M/s  150000.0% of our bound  ← our fastest
ours     H2D alone (staged)                                   500     2.00 ms           -   500.0K/s  0.0 GB/s
ours     compute alone (input resident)                       500     3.00 ms           -   333.3K/s  0.0 TFLOP/s
ours     D2H alone                                            500     4.00 ms           -   250.0K/s  0.0 GB/s

PyTorch's fastest: whole, chunk 0: 3.00 ms; its bound (slowest stage alone, H2D + D2H at once included) 0.00 ms: 0.0% of it
ours fastest: chunk 500: 0.00 ms; our bound (slowest stage alone, stage-in+out) 6.00 ms: 0.0% of it
speed, ours / PyTorch's fastest: 750.000× (3.00 ms / 0.00 ms, medians)
ours vs PyTorch's output (out.f32), value by value: 8000 values, max |ours − PyTorch| 2, max |ours − PyTorch| / tolerance 4, 3 outside the tolerance
tolerance: fp32's
ours: not verified
note: PyTorch's own variants' outputs differ by up to 1.5e-07
the twin's files are in /tmp/twin
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, tc.write(&b))
			assert.Equal(t, tc.want, b.String())
		})
	}
}

// TestRowRate checks each unit of the rate and its rounding.
func TestRowRate(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0/s"},
		{999.4, "999/s"},
		{1000, "1.0K/s"},
		{12345, "12.3K/s"},
		{999999, "1000.0K/s"},
		{1e6, "1.00M/s"},
		{2.345e7, "23.45M/s"},
		{1e9, "1.00G/s"},
		{3.14159e10, "31.42G/s"},
	} {
		assert.Equal(t, tc.want, bench.RowRate(tc.v), "%g", tc.v)
	}
}

// TestInferTableOptionName checks that a nil optionName names the
// Activation option by its field, and that one returning "" keeps it.
func TestInferTableOptionName(t *testing.T) {
	for _, name := range []func(string) string{nil, func(string) string { return "" }} {
		var b strings.Builder
		require.NoError(t, inferFixtures()["gpu"].WriteTable(&b, name))
		first, _, _ := strings.Cut(b.String(), "\n")
		assert.Equal(t, "overlap infer: MLP 768→256→16 (activation from Activation) in tf32 on NVIDIA H200 (GPU 0), 1048576 rows (3.0 GiB in, 64.0 MiB out, weights 800.0 KiB)", first)
		b.Reset()
		require.NoError(t, inferStreamFixtures()["gpus"].WriteTable(&b, name))
		first, _, _ = strings.Cut(b.String(), "\n")
		assert.Equal(t, "overlap infer: MLP 768→16 in fp32 on 2 GPUs, streaming in.f32 → out.f32", first, "one layer: no activation")
	}
}

// TestStagesString checks each optional part of the stages' line.
func TestStagesString(t *testing.T) {
	for _, tc := range []struct {
		s    bench.Stages
		want string
	}{
		{bench.Stages{H2DMs: 1, ComputeMs: 2.5, D2HMs: 0.125}, "H2D 1.00 ms, compute 2.50 ms, D2H 0.12 ms"},
		{bench.Stages{StageOutMs: 4, H2DMs: 1}, "stage-in 0.00 ms, H2D 1.00 ms, compute 0.00 ms, D2H 0.00 ms, stage-out 4.00 ms"},
		{bench.Stages{CopiesMs: 3}, "H2D 0.00 ms, compute 0.00 ms, D2H 0.00 ms, H2D+D2H at once 3.00 ms"},
		{bench.Stages{StageInMs: 1, StagingMs: 2}, "stage-in 1.00 ms, H2D 0.00 ms, compute 0.00 ms, D2H 0.00 ms, stage-out 0.00 ms, stage-in+out at once 2.00 ms"},
	} {
		assert.Equal(t, tc.want, tc.s.String())
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestInferTableErrors checks that a nil or incomplete result and a
// failed write are a *bench.Error naming the writer, never a panic.
func TestInferTableErrors(t *testing.T) {
	ref := inferReferenceFixtures()["gpu"]
	noModes := *ref
	noModes.Ours = &bench.InferResult{}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil infer", (*bench.InferResult)(nil).WriteTable(failWriter{}, nil), "bench: InferResult.WriteTable: nil result"},
		{"nil stream", (*bench.InferStreamResult)(nil).WriteTable(failWriter{}, nil), "bench: InferStreamResult.WriteTable: nil result"},
		{"nil reference", (*bench.InferReferenceResult)(nil).WriteTable(failWriter{}), "bench: InferReferenceResult.WriteTable: nil result"},
		{"no pytorch", (&bench.InferReferenceResult{Ours: ref.Ours}).WriteTable(failWriter{}), "bench: InferReferenceResult.WriteTable: the result lacks PyTorch's side or ours"},
		{"no modes", noModes.WriteTable(failWriter{}), "bench: InferReferenceResult.WriteTable: the result lacks PyTorch's side or ours"},
		{"write infer", inferFixtures()["sim"].WriteTable(failWriter{}, nil), "bench: InferResult.WriteTable: disk full"},
		{"write stream", inferStreamFixtures()["sim"].WriteTable(failWriter{}, nil), "bench: InferStreamResult.WriteTable: disk full"},
		{"write reference", ref.WriteTable(failWriter{}), "bench: InferReferenceResult.WriteTable: disk full"},
	} {
		var be *bench.Error
		require.ErrorAs(t, tc.err, &be, tc.name)
		assert.EqualError(t, tc.err, tc.want, tc.name)
	}
}
