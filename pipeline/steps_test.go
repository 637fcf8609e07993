package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of kernels of several launches (Kernel.Steps) with resident
// parameters and scratch buffers run a two-step kernel over rows of
// rowWidth float32 values, the shape of a model's layer on a batch:
//
//	scale: scratch[r][j] = in[r][j] · w[j]       (w: a parameter of rowWidth values)
//	sum:   out[r] = Σ_j scratch[r][j] + b         (b: a parameter of one value)
//
// Every element is checked against the same arithmetic on the CPU.

const rowWidth = 8

// rowsKernel is the two-step kernel, with weights w and bias b.
func rowsKernel(name string, w []float32, b float32) *pipeline.Kernel {
	return &pipeline.Kernel{
		Name:    name,
		Params:  []pipeline.Param{{Name: "w", Data: driver.Bytes(append([]float32(nil), w...))}, {Name: "b", Data: driver.Bytes([]float32{b})}},
		Scratch: []int{4 * rowWidth},
		Steps: []pipeline.Step{{
			Name:   "scale",
			Reads:  []pipeline.Ref{{pipeline.RefInput, 0}, {pipeline.RefParam, 0}},
			Writes: []pipeline.Ref{{pipeline.RefScratch, 0}},
			Args: func(a *driver.Args, c pipeline.Chunk) {
				a.Pointer(c.Scratch[0]).Pointer(c.Inputs[0]).Pointer(c.Params[0]).Uint32(uint32(c.N))
			},
			CPU: func(c pipeline.HostChunk) {
				in, w, s := f32s(c.Inputs[0]), f32s(c.Params[0]), f32s(c.Scratch[0])
				for i := range in {
					s[i] = in[i] * w[i%rowWidth]
				}
			},
			FlopsPerElem: rowWidth,
		}, {
			Name:   "sum",
			Reads:  []pipeline.Ref{{pipeline.RefScratch, 0}, {pipeline.RefParam, 1}},
			Writes: []pipeline.Ref{{pipeline.RefOutput, 0}},
			Args: func(a *driver.Args, c pipeline.Chunk) {
				a.Pointer(c.Outputs[0]).Pointer(c.Scratch[0]).Pointer(c.Params[1]).Uint32(uint32(c.N))
			},
			CPU: func(c pipeline.HostChunk) {
				s, b, out := f32s(c.Scratch[0]), f32s(c.Params[1])[0], f32s(c.Outputs[0])
				for r := range out {
					out[r] = rowSum(s[r*rowWidth:(r+1)*rowWidth], b)
				}
			},
			FlopsPerElem: rowWidth,
		}},
	}
}

func rowSum(row []float32, b float32) float32 {
	var sum float32
	for _, v := range row {
		sum += v
	}
	return sum + b
}

// f32s views bytes as float32s.
func f32s(b []byte) []float32 { return driver.View[float32](b) }

// rowsData returns n rows of inputs and what rowsKernel(w, b) makes of them.
func rowsData(n int, w []float32, b float32) (in, want []float32) {
	in, want = make([]float32, n*rowWidth), make([]float32, n)
	for i := range in {
		in[i] = float32(i%97) - 48
	}
	for r := range want {
		row := make([]float32, rowWidth)
		for j := range row {
			row[j] = in[r*rowWidth+j] * w[j]
		}
		want[r] = rowSum(row, b)
	}
	return in, want
}

var (
	rowW = []float32{1, 2, 3, 4, 0.5, -1, -2, 0.25}
	rowB = float32(3)
)

// rowsConfig is the Config of rowsKernel: rows in, one value a row out.
func rowsConfig(chunk int) pipeline.Config {
	return pipeline.Config{ChunkElems: chunk, Slots: 3, ComputeStreams: 2, Inputs: []int{4 * rowWidth}, Outputs: []int{4}}
}

// rowsPipeline is a pipeline of rowsConfig on a fresh simulator, checked
// for hazards and leaks when the test ends.
func rowsPipeline(t *testing.T, seed uint64, chunk int) (*pipeline.Pipeline, *sim.Sim) {
	t.Helper()
	dev := sim.New(seed, 20*time.Microsecond)
	p, err := pipeline.New(dev, rowsConfig(chunk))
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		assert.Empty(t, dev.Live(), "objects left after Close")
		assert.Empty(t, dev.Hazards())
	})
	return p, dev
}

// unknownNotes are the notes of the built-in profile on rowsKernel's steps.
func unknownNotes(t *testing.T) []string {
	_, _, scale, err := sim.BuiltinProfile().LaunchTime("scale", 0, 0, 1)
	require.NoError(t, err)
	_, _, sum, err := sim.BuiltinProfile().LaunchTime("sum", 0, 0, 1)
	require.NoError(t, err)
	return []string{scale, sum}
}

// TestStepsRun runs the two-step kernel through Run at lengths around the
// chunk, in each host mode, and checks every row; the parameters are
// uploaded by the first run only, once, and every run's report says that
// the built-in profile has no cost for the steps.
func TestStepsRun(t *testing.T) {
	const chunk = 16
	p, dev := rowsPipeline(t, 1, chunk)
	k := rowsKernel("rows", rowW, rowB)
	first := true
	var devices int
	for _, mode := range []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered, pipeline.HostPinned} {
		for _, n := range []int{1, chunk - 1, chunk, 3*chunk + 5} {
			in, want := rowsData(n, rowW, rowB)
			out := make([]float32, n)
			job := pipeline.Job{N: n, Kernel: k, Host: mode, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			var hout pipeline.PinnedMem
			if mode == pipeline.HostPinned {
				hin, err := dev.AllocPinned(4 * len(in))
				require.NoError(t, err)
				copy(hin.Bytes(), driver.Bytes(in))
				hout, err = dev.AllocPinned(4 * n)
				require.NoError(t, err)
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Pinned(hin)}, []pipeline.Buffer{pipeline.Pinned(hout)}
				defer hin.Close()
				defer hout.Close()
			}
			rep, err := p.Run(context.Background(), job)
			require.NoError(t, err, "%s n=%d", mode, n)
			if hout != nil {
				copy(driver.Bytes(out), hout.Bytes())
			}
			assert.Equal(t, want, out, "%s n=%d", mode, n)
			assert.Equal(t, unknownNotes(t), rep.Notes)
			if first {
				assert.Positive(t, rep.Upload, "the first run uploads the parameters")
				devices = dev.Live()["device"]
				first = false
			} else {
				assert.Zero(t, rep.Upload, "%s n=%d: the parameters stay resident", mode, n)
				assert.Equal(t, devices, dev.Live()["device"], "no device memory allocated after the first run")
			}
		}
	}
	// One buffer for the slots' inputs and one for their outputs, two
	// parameters, a scratch buffer a slot.
	assert.Equal(t, 2+2+3, devices)
}

// TestStepsSynchronousAndStageTimes runs the two-step kernel through the
// synchronous baseline and times its stages alone.
func TestStepsSynchronousAndStageTimes(t *testing.T) {
	p, dev := rowsPipeline(t, 2, 16)
	k := rowsKernel("rows", rowW, rowB)
	in, want := rowsData(50, rowW, rowB)
	out := make([]float32, 50)
	job := pipeline.Job{N: 50, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	d, err := pipeline.Synchronous(context.Background(), dev, rowsConfig(16), job)
	require.NoError(t, err)
	assert.Positive(t, d)
	assert.Equal(t, want, out)
	st, err := p.StageTimes(context.Background(), job)
	require.NoError(t, err)
	assert.Positive(t, st.Compute)
}

// TestRowsRefused: Run refuses a slice that is not a whole number of rows,
// and rows whose size differs from the Config's element, with the reason.
func TestRowsRefused(t *testing.T) {
	p, _ := rowsPipeline(t, 3, 16)
	k := rowsKernel("rows", rowW, rowB)
	out := make([]float32, 4)
	for _, tc := range []struct {
		in   pipeline.Buffer
		want string
	}{
		{pipeline.Rows(make([]float32, 30), rowWidth), "pipeline: input 0: 30 float32 values are not a whole number of rows of 8"},
		{pipeline.Rows(make([]float32, 32), 0), "pipeline: input 0: rows of width 0: want at least 1 value a row"},
		{pipeline.Rows(make([]float32, 32), 4), "pipeline: input 0 holds rows of 16 bytes (4 values), but the pipeline's Config says 32-byte elements"},
		{pipeline.Rows(make([]float64, 32), rowWidth), "pipeline: input 0 holds rows of 64 bytes (8 values), but the pipeline's Config says 32-byte elements"},
		{pipeline.Slice(make([]float32, 32)), "pipeline: input 0 is a slice of 4-byte elements, but the pipeline's Config says 32-byte elements"},
	} {
		_, err := p.Run(context.Background(), pipeline.Job{N: 4, Kernel: k, Inputs: []pipeline.Buffer{tc.in}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		assert.EqualError(t, err, tc.want)
	}
	in, want := rowsData(4, rowW, rowB)
	_, err := p.Run(context.Background(), pipeline.Job{N: 4, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Rows(out, 1)}})
	require.NoError(t, err, "whole rows of the Config's size")
	assert.Equal(t, want, out)
}

// progressLog records a run's progress calls and checks that none
// overlaps another.
type progressLog struct {
	mu      sync.Mutex
	calls   []pipeline.Progress
	active  atomic.Int32
	overlap bool
}

func (l *progressLog) record(pr pipeline.Progress) {
	if l.active.Add(1) != 1 {
		l.overlap = true
	}
	time.Sleep(time.Millisecond)
	l.mu.Lock()
	l.calls = append(l.calls, pr)
	l.mu.Unlock()
	l.active.Add(-1)
}

func (l *progressLog) last(t *testing.T) pipeline.Progress {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NotEmpty(t, l.calls, "progress was reported")
	assert.False(t, l.overlap, "progress calls overlapped")
	for i := 1; i < len(l.calls); i++ {
		a, b := l.calls[i-1], l.calls[i]
		assert.True(t, a.BytesRead <= b.BytesRead && a.BytesWritten <= b.BytesWritten && a.ElemsRead <= b.ElemsRead && a.ElemsWritten <= b.ElemsWritten,
			"progress went back: %+v then %+v", a, b)
	}
	return l.calls[len(l.calls)-1]
}

// TestStepsRunStream streams rows through the two-step kernel from each
// kind of reader to each kind of writer, checks every byte written, and
// that the last progress report is the run's totals.
func TestStepsRunStream(t *testing.T) {
	const chunk = 16
	p, _ := rowsPipeline(t, 4, chunk)
	k := rowsKernel("rows", rowW, rowB)
	for _, n := range []int{0, 1, chunk, 5*chunk + 3} {
		in, want := rowsData(n, rowW, rowB)
		for _, rk := range readerKinds[:4] {
			for _, wk := range writerKinds[:2] {
				w, got := wk.make(t)
				var log progressLog
				rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{rk.make(t, driver.Bytes(in))}, Outputs: []io.Writer{w},
					Kernel: k, Progress: log.record})
				require.NoError(t, err, "%s to %s, %d rows", rk.name, wk.name, n)
				sameBytes(t, driver.Bytes(want), got())
				assert.Equal(t, int64(n), rep.N)
				assert.Equal(t, pipeline.Progress{BytesRead: int64(4 * rowWidth * n), BytesWritten: int64(4 * n), ElemsRead: int64(n), ElemsWritten: int64(n)}, log.last(t))
				assert.Equal(t, unknownNotes(t), rep.Notes)
			}
		}
	}
}

// TestStepsBatches feeds batches of rows (empty ones, ones smaller and
// larger than a chunk) through BatchesWith and checks each result, and
// the last progress report; a batch that is not a whole number of rows
// ends the sequence with an error naming it.
func TestStepsBatches(t *testing.T) {
	const chunk = 16
	p, _ := rowsPipeline(t, 5, chunk)
	k := rowsKernel("rows", rowW, rowB)
	lens := []int{0, 3, 40, 1, 0, 17}
	total := 0
	for _, l := range lens {
		total += l
	}
	in, want := rowsData(total, rowW, rowB)
	batches := func(lens []int, values func(rows int) int) func(yield func([]float32) bool) {
		return func(yield func([]float32) bool) {
			off := 0
			for _, l := range lens {
				if !yield(in[off*rowWidth : off*rowWidth+values(l)]) {
					return
				}
				off += l
			}
		}
	}
	var log progressLog
	i, off := 0, 0
	for out, err := range pipeline.BatchesWith[float32, float32](context.Background(), p, k, batches(lens, func(r int) int { return r * rowWidth }), pipeline.BatchOptions{Progress: log.record}) {
		require.NoError(t, err)
		require.Less(t, i, len(lens))
		assert.Equal(t, want[off:off+lens[i]], out, "batch %d", i)
		off += lens[i]
		i++
	}
	assert.Equal(t, len(lens), i)
	assert.Equal(t, pipeline.Progress{BytesRead: int64(4 * rowWidth * total), BytesWritten: int64(4 * total), ElemsRead: int64(total), ElemsWritten: int64(total)}, log.last(t))

	// Batch 2 holds a row and a half.
	var last error
	for _, err := range pipeline.Batches[float32, float32](context.Background(), p, k, batches([]int{3, 2, 1}, func(r int) int {
		if r == 1 {
			return 12
		}
		return r * rowWidth
	})) {
		last = err
	}
	require.Error(t, last)
	assert.Contains(t, last.Error(), "batch 2 holds 12 values, not a whole number of rows of 8")
}

// TestStepCosts guards the simulator's cost of a launch: a step named in
// the profile costs FixedNs + n·(NsPerElem + Iters·NsPerElemPerIter +
// FlopsPerElem·NsPerFlop); a name it lacks is charged the profile's most
// expensive cost of each kind and a note says so.
func TestStepCosts(t *testing.T) {
	prof := sim.BuiltinProfile()
	prof.Kernels["layer"] = sim.KernelCost{FixedNs: 1000, NsPerElem: 0.5, NsPerElemPerIter: 0.25, NsPerFlop: 0.01}
	fixed, work, note, err := prof.LaunchTime("layer", 2, 100, 1000)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(1000), fixed)
	assert.Equal(t, time.Duration(1000*(0.5+2*0.25+100*0.01)), work)
	assert.Empty(t, note)

	// The built-in profile's kernels: saxpy has the largest fixed cost,
	// seed the largest per element and per iteration, gemm_f32 the
	// slowest FLOP rate.
	b := sim.BuiltinProfile()
	fixed, work, note, err = b.LaunchTime("mystery", 3, 1e6, 1000)
	require.NoError(t, err)
	s, sd, g := b.Kernels["saxpy"], b.Kernels["seed"], b.Kernels["gemm_f32"]
	assert.Equal(t, time.Duration(s.FixedNs), fixed)
	assert.Equal(t, time.Duration(1000*(sd.NsPerElem+3*sd.NsPerElemPerIter+1e6*g.NsPerFlop)), work)
	assert.Equal(t, fmt.Sprintf(`simulator: the profile of NVIDIA H200 has no cost for kernel "mystery"; it was charged the profile's most expensive: %.0f ns + %.3g ns per element (+ %.3g per iteration) + 2.38e-05 ns per FLOP (42 TFLOP/s)`,
		s.FixedNs, sd.NsPerElem, sd.NsPerElemPerIter), note)
	// Where no kernel has a FLOP rate, the fallback's is an H200's FP32
	// peak.
	delete(b.Kernels, "gemm_f32")
	delete(b.Kernels, "gemm_tf32")
	fixed, work, note, err = b.LaunchTime("mystery", 3, 1e6, 1000)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(s.FixedNs), fixed)
	assert.Equal(t, time.Duration(1000*(sd.NsPerElem+3*sd.NsPerElemPerIter+1e6*sim.FallbackNsPerFlop)), work)
	assert.Equal(t, fmt.Sprintf(`simulator: the profile of NVIDIA H200 has no cost for kernel "mystery"; it was charged the profile's most expensive: %.0f ns + %.3g ns per element (+ %.3g per iteration) + 1.49e-05 ns per FLOP (67 TFLOP/s)`,
		s.FixedNs, sd.NsPerElem, sd.NsPerElemPerIter), note)

	// The cheapest kernel is no longer what an unknown kernel costs.
	_, cheap, _, err := b.LaunchTime("saxpy", 0, 0, 1<<20)
	require.NoError(t, err)
	_, unknown, _, err := b.LaunchTime("mine", 0, 0, 1<<20)
	require.NoError(t, err)
	assert.Greater(t, unknown, cheap)

	// A step the profile names is charged its entry, and the report has no
	// note for it; the other step's note remains.
	prof.Kernels["scale"] = sim.KernelCost{FixedNs: 500, NsPerElem: 1}
	dev := sim.NewHost(sim.HostOptions{}).NewDevice(prof)
	p, err := pipeline.New(dev, rowsConfig(16))
	require.NoError(t, err)
	defer p.Close()
	in, want := rowsData(20, rowW, rowB)
	out := make([]float32, 20)
	rep, err := p.Run(context.Background(), pipeline.Job{N: 20, Kernel: rowsKernel("rows", rowW, rowB), Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	assert.Equal(t, want, out)
	require.Len(t, rep.Notes, 1)
	assert.Contains(t, rep.Notes[0], `no cost for kernel "sum"`)
}

// TestStepsParamsDoNotFit guards "a weights file larger than the device's
// memory": parameters larger than the simulated device's free memory are
// refused before anything is allocated for them, naming the kernel and the
// sizes; an allocation beyond the device's memory fails as out of memory.
func TestStepsParamsDoNotFit(t *testing.T) {
	prof := sim.BuiltinProfile()
	prof.DeviceMemoryBytes = 1 << 20
	dev := sim.NewHost(sim.HostOptions{}).NewDevice(prof)
	p, err := pipeline.New(dev, rowsConfig(16)) // 3 slots of 512 + 64 bytes
	require.NoError(t, err)
	defer p.Close()
	k := rowsKernel("mlp", rowW, rowB)
	k.Params = append(k.Params, pipeline.Param{Name: "big", Data: make([]byte, 3<<19)})
	in, _ := rowsData(4, rowW, rowB)
	_, err = p.Run(context.Background(), pipeline.Job{N: 4, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 4))}})
	free := 1<<20 - 3*(16*32+256) // each slot's 64 bytes of output padded to 256
	assert.EqualError(t, err, fmt.Sprintf("pipeline: setup: kernel mlp: parameters of 1.5 MiB do not fit in the device's %.1f KiB free", float64(free)/1024))
	assert.Equal(t, 2, dev.Live()["device"], "nothing allocated for the parameters")

	_, err = pipeline.New(dev, pipeline.Config{ChunkElems: 1 << 20, Inputs: []int{4}, Outputs: []int{4}}) // 6 slots of 4 MiB, in one buffer
	require.ErrorIs(t, err, driver.ErrOutOfMemory)
	assert.Contains(t, err.Error(), "pipeline: setup: sim: device allocation of 24 MiB with 2.2 KiB of the device's 1 MiB in use")
	assert.Equal(t, 2, dev.Live()["device"], "the failed pipeline freed what it had")

	_, total, err := sim.New(1, 0).FreeMemory()
	require.NoError(t, err)
	assert.Equal(t, int64(143771<<20), total, "the built-in profile's device memory: an H200's 143771 MiB")
}

// TestStepsParamsCache runs more kernels than a pipeline keeps resident:
// the least recently used kernel's parameters go, the rest stay, and
// Close frees them all. A kernel with larger scratch buffers grows them.
func TestStepsParamsCache(t *testing.T) {
	p, dev := rowsPipeline(t, 6, 16)
	base := 2 // the slots' inputs, and their outputs
	var ks []*pipeline.Kernel
	for i := range 6 {
		w := append([]float32(nil), rowW...)
		w[0] = float32(i)
		ks = append(ks, rowsKernel(fmt.Sprintf("rows%d", i), w, rowB))
	}
	run := func(k *pipeline.Kernel, w []float32) *pipeline.Report {
		in, want := rowsData(40, w, rowB)
		out := make([]float32, 40)
		rep, err := p.Run(context.Background(), pipeline.Job{N: 40, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err, k.Name)
		assert.Equal(t, want, out, k.Name)
		return rep
	}
	weights := func(i int) []float32 { w := append([]float32(nil), rowW...); w[0] = float32(i); return w }
	for i, k := range ks {
		run(k, weights(i))
		assert.Equal(t, base+3+2*min(i+1, 4), dev.Live()["device"], "after kernel %d: at most 4 kernels' parameters resident", i)
	}
	assert.Zero(t, run(ks[5], weights(5)).Upload, "the last kernel's parameters are resident")
	assert.Zero(t, run(ks[2], weights(2)).Upload, "so are those of the 3 before")
	assert.Positive(t, run(ks[0], weights(0)).Upload, "the first kernel's were dropped")

	wide := rowsKernel("wide", rowW, rowB)
	wide.Scratch = []int{8 * rowWidth} // twice what it uses
	run(wide, rowW)
	assert.Equal(t, base+3+2*4, dev.Live()["device"], "the scratch buffers grew in place")
	run(ks[0], weights(0))
}

// TestStepsHazards shows that the hazard detector sees each step's
// accesses: with the slots sharing one scratch buffer, chunks on two
// compute streams write it at once; without the write-after-read waits,
// the sum step of a later chunk writes an output slot that a D2H copy
// still reads.
func TestStepsHazards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(p *pipeline.Pipeline)
		memory string // in a hazard's Memory
		access string // in a hazard's accesses
		other  string // in the other access
	}{
		{"shared scratch", func(p *pipeline.Pipeline) { pipeline.SetShareScratch(p, true) }, "scratch 0 of kernel rows", "kernel rows, step 0 (scale)", "kernel rows, step"},
		{"no WAR waits", func(p *pipeline.Pipeline) { pipeline.SetSkipWAR(p, true) }, "device buffer", "kernel rows, step 1 (sum)", "D2H copy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := sim.New(7, 50*time.Microsecond)
			p, err := pipeline.New(dev, rowsConfig(16))
			require.NoError(t, err)
			tc.set(p)
			in, _ := rowsData(16*20, rowW, rowB)
			out := make([]float32, 16*20)
			_, err = p.Run(context.Background(), pipeline.Job{N: 16 * 20, Kernel: rowsKernel("rows", rowW, rowB), Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
			require.NoError(t, err)
			require.NoError(t, p.Close())
			found := false
			for _, h := range dev.Hazards() {
				pair := func(a, b string) bool { return strings.Contains(a, tc.access) && strings.Contains(b, tc.other) }
				found = found || strings.Contains(h.Memory, tc.memory) && (pair(h.First, h.Later) || pair(h.Later, h.First))
			}
			assert.True(t, found, "a hazard on %q by %q among %v", tc.memory, tc.access, dev.Hazards())
		})
	}
}

// TestStepsArgsChecked: the simulator builds every launch's arguments
// and refuses a device address that the launch's Reads and Writes do not
// name, or that is no live buffer of the device, for steps and for a
// kernel without steps alike.
func TestStepsArgsChecked(t *testing.T) {
	p, dev := rowsPipeline(t, 8, 16)
	other := dev.Host().NewDevice(sim.BuiltinProfile()) // another device of the host
	stray, err := other.AllocDevice(64)
	require.NoError(t, err)
	defer stray.Close()
	in, _ := rowsData(20, rowW, rowB)
	run := func(k *pipeline.Kernel) error {
		_, err := p.Run(context.Background(), pipeline.Job{N: 20, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 20))}})
		return err
	}
	undeclared := rowsKernel("rows", rowW, rowB)
	undeclared.Steps[1].Reads = undeclared.Steps[1].Reads[:1] // not the bias
	err = run(undeclared)
	require.Error(t, err)
	assert.Regexp(t, `^pipeline: chunk 0, compute: sim: kernel rows, step 1 \(sum\): argument 2 is the address of device buffer \d+, which the launch's Reads and Writes do not name$`, err.Error())

	foreign := rowsKernel("rows", rowW, rowB)
	foreign.Steps[0].Args = func(a *driver.Args, c pipeline.Chunk) {
		a.Pointer(c.Scratch[0]).Pointer(stray.Ptr()).Pointer(c.Params[0]).Uint32(uint32(c.N))
	}
	err = run(foreign)
	require.Error(t, err)
	assert.Regexp(t, `^pipeline: chunk 0, compute: sim: kernel rows, step 0 \(scale\): argument 1 \(0x[0-9a-f]+\) is not a live device buffer of this device$`, err.Error())

	beyond := rowsKernel("rows", rowW, rowB)
	beyond.Steps[0].Args = func(a *driver.Args, c pipeline.Chunk) {
		a.Pointer(c.Scratch[0]).Pointer(c.Inputs[0] + 1<<20).Pointer(c.Params[0]).Uint32(uint32(c.N))
	}
	err = run(beyond)
	require.Error(t, err)
	assert.Regexp(t, `argument 1 \(0x[0-9a-f]+\) lies beyond the end of device buffer \d+$`, err.Error())

	// A kernel without steps: its Args, which the simulator did not call
	// before, are checked against the chunk's buffers.
	single := &pipeline.Kernel{Name: "copy", CPU: func(c pipeline.HostChunk) {},
		Args: func(a *driver.Args, c pipeline.Chunk) { a.Pointer(c.Outputs[0]).Pointer(stray.Ptr()) }}
	_, err = p.Run(context.Background(), pipeline.Job{N: 20, Kernel: single, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 20))}})
	require.Error(t, err)
	assert.Regexp(t, `^pipeline: chunk 0, compute: sim: kernel copy: argument 1 \(0x[0-9a-f]+\) is not a live device buffer of this device$`, err.Error())
}

// TestStepsValidation checks the errors for malformed kernels of steps,
// before anything runs.
func TestStepsValidation(t *testing.T) {
	p, _ := rowsPipeline(t, 10, 16)
	in := make([]float32, 4*rowWidth)
	for _, tc := range []struct {
		edit func(k *pipeline.Kernel)
		want string
	}{
		{func(k *pipeline.Kernel) {
			k.Steps[0].Reads = append(k.Steps[0].Reads, pipeline.Ref{pipeline.RefInput, 1})
		}, "pipeline: kernel rows, step 0 (scale): names input 1, but there are 1"},
		{func(k *pipeline.Kernel) { k.Steps[1].Reads[1] = pipeline.Ref{pipeline.RefParam, 2} }, "pipeline: kernel rows, step 1 (sum): names param 2, but there are 2"},
		{func(k *pipeline.Kernel) {
			k.Steps[0].Writes = append(k.Steps[0].Writes, pipeline.Ref{pipeline.RefScratch, 1})
		}, "pipeline: kernel rows, step 0 (scale): names scratch 1, but there are 1"},
		{func(k *pipeline.Kernel) {
			k.Steps[0].Writes = append(k.Steps[0].Writes, pipeline.Ref{pipeline.RefParam, 0})
		}, "pipeline: kernel rows, step 0 (scale): writes param 0 (w), which is read-only"},
		{func(k *pipeline.Kernel) { k.Steps[0].Reads[0] = pipeline.Ref{pipeline.RefKind(7), 0} }, "pipeline: kernel rows, step 0 (scale): unknown buffer kind RefKind(7)"},
		{func(k *pipeline.Kernel) { k.Params[1].Data = nil }, "pipeline: kernel rows: parameter 1 (b) is empty"},
		{func(k *pipeline.Kernel) { k.Scratch[0] = 0 }, "pipeline: kernel rows: scratch buffer 0 of 0 bytes per element: want at least 1"},
		{func(k *pipeline.Kernel) { k.Steps[1].CPU = nil }, "sim: kernel rows, step 1 (sum) has no CPU stand-in, so the simulator cannot run it"},
		{func(k *pipeline.Kernel) { k.Steps[1].Name = "" }, ""},
	} {
		k := rowsKernel("rows", rowW, rowB)
		tc.edit(k)
		_, err := p.Run(context.Background(), pipeline.Job{N: 4, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 4))}})
		if tc.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.EqualError(t, err, tc.want)
		_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{io.Discard}, Kernel: k})
		assert.EqualError(t, err, tc.want, "RunStream")
	}
}

// TestGPURowsKernelOnSim checks, without a GPU, the kernel that the GPU
// tests build from PTX written by hand (gpu_steps_test.go): the PTX parses,
// each step's arguments have its entry's layout, and on the simulator,
// which checks every address among them against the step's Reads and
// Writes, its CPU stand-ins give what the GPU test expects.
func TestGPURowsKernelOnSim(t *testing.T) {
	f, err := ptx.Parse([]byte(rowsPTX))
	require.NoError(t, err)
	k := gpuRowsKernel(func(string) func(*driver.Context) (*driver.Function, error) { return nil }, []float32{1.5, -2, 0.25, 3}, []float32{10, -1, 0.5, 7})
	c := pipeline.Chunk{N: 3, Inputs: []driver.DevicePtr{1}, Outputs: []driver.DevicePtr{2}, Params: []driver.DevicePtr{3, 4}, Scratch: []driver.DevicePtr{5}}
	for i, entry := range []string{"rows_scale", "rows_shift"} {
		e, ok := f.Entry(entry)
		require.True(t, ok, entry)
		var a driver.Args
		k.Steps[i].Args(&a, c)
		assert.Equal(t, ptx.Layout(e.Params), a.Layout(), entry)
	}

	dev := sim.New(11, 20*time.Microsecond)
	const chunk = 64
	p, err := pipeline.New(dev, gpuRowsConfig(chunk))
	require.NoError(t, err)
	defer func() {
		require.NoError(t, p.Close())
		assert.Empty(t, dev.Hazards())
	}()
	n := 3*chunk + 17
	in := make([]float32, gpuRowWidth*n)
	kernels.FillPattern(in, n)
	out := make([]float32, len(in))
	_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, gpuRowWidth)}, Outputs: []pipeline.Buffer{pipeline.Rows(out, gpuRowWidth)}})
	require.NoError(t, err)
	assert.Equal(t, gpuRowsWant(in, []float32{1.5, -2, 0.25, 3}, []float32{10, -1, 0.5, 7}), out)
}

// TestStepsKernelNotKeptAlive: a pipeline that keeps a kernel's
// parameters resident does not keep the kernel itself, or the Go memory
// of its parameters, alive once the caller drops it.
func TestStepsKernelNotKeptAlive(t *testing.T) {
	p, _ := rowsPipeline(t, 12, 16)
	var freed atomic.Int32
	func() {
		k := rowsKernel("rows", rowW, rowB)
		runtime.AddCleanup(k, func(int) { freed.Add(1) }, 0)
		runtime.AddCleanup(&k.Params[0].Data[0], func(int) { freed.Add(1) }, 0)
		in, want := rowsData(40, rowW, rowB)
		out := make([]float32, 40)
		_, err := p.Run(context.Background(), pipeline.Job{N: 40, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		require.Equal(t, want, out)
	}()
	for end := time.Now().Add(2 * time.Second); freed.Load() < 2 && time.Now().Before(end); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int32(2), freed.Load(), "the kernel and its parameters' memory were freed")
}

// TestUploadLeftOutOfElapsed: a run that uploads its kernel's parameters
// reports the upload in Upload and leaves it out of Elapsed, and nothing
// more: on a simulator without jitter its Elapsed is the next run's,
// whose parameters are resident, through a Pipeline, a Group and a
// stream. The restart after the upload dropped the run's fixed cost
// (Profile.RunNs, 8 µs), which the simulator charges as the run begins.
func TestUploadLeftOutOfElapsed(t *testing.T) {
	const chunk, n = 16, 40
	in, _ := rowsData(n, rowW, rowB)
	dev := sim.New(1, 0)
	hin, err := dev.AllocPinned(4 * len(in))
	require.NoError(t, err)
	defer hin.Close()
	copy(hin.Bytes(), driver.Bytes(in))
	hout, err := dev.AllocPinned(4 * n)
	require.NoError(t, err)
	defer hout.Close()
	job := func(k *pipeline.Kernel) pipeline.Job {
		return pipeline.Job{N: n, Kernel: k, Host: pipeline.HostPinned, Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}}
	}
	twice := func(what string, run func(pipeline.Job) (*pipeline.Report, error)) {
		k := rowsKernel("rows", rowW, rowB)
		first, err := run(job(k))
		require.NoError(t, err, what)
		second, err := run(job(k))
		require.NoError(t, err, what)
		require.Positive(t, first.Upload, what)
		require.Zero(t, second.Upload, what)
		assert.InDelta(t, second.Elapsed.Seconds()*1e6, first.Elapsed.Seconds()*1e6, 0.5, "%s: Elapsed in µs of the run that uploaded and of the next", what)
	}
	p, err := pipeline.New(dev, rowsConfig(chunk))
	require.NoError(t, err)
	defer p.Close()
	twice("pipeline", func(j pipeline.Job) (*pipeline.Report, error) { return p.Run(context.Background(), j) })
	g, err := pipeline.NewGroup([]pipeline.Backend{dev}, rowsConfig(chunk))
	require.NoError(t, err)
	defer g.Close()
	twice("group", func(j pipeline.Job) (*pipeline.Report, error) { return g.Run(context.Background(), j) })
	twice("stream", func(j pipeline.Job) (*pipeline.Report, error) {
		var out bytes.Buffer
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Kernel: j.Kernel, Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&out}})
		if err != nil {
			return nil, err
		}
		return &pipeline.Report{Elapsed: rep.Elapsed, Upload: rep.Upload}, nil
	})
}
