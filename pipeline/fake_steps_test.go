//go:build linux

package pipeline_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeCopySteps returns two kernels of two steps each, built of the fake
// driver's copying kernel (fake_copy(out, in, n): n floats), which check
// through package driver that each step is launched with its own
// arguments: "through" copies each chunk's input into a scratch buffer
// and the scratch buffer into the output (out = in); "resident" copies a
// resident parameter of chunk floats into the scratch buffer and that
// into the output (out = the parameter, chunk after chunk). fn resolves
// the fake's function on each context.
func fakeCopySteps(fn func(*driver.Context) (*driver.Function, error), w []float32) (through, resident *pipeline.Kernel) {
	copyStep := func(name string, dst, src pipeline.Ref, ptr func(pipeline.Chunk, pipeline.Ref) driver.DevicePtr) pipeline.Step {
		return pipeline.Step{Name: name, Function: fn, Reads: []pipeline.Ref{src}, Writes: []pipeline.Ref{dst},
			Args: func(a *driver.Args, c pipeline.Chunk) {
				a.Pointer(ptr(c, dst)).Pointer(ptr(c, src)).Uint32(uint32(c.N))
			}}
	}
	ptr := func(c pipeline.Chunk, r pipeline.Ref) driver.DevicePtr {
		switch r.Kind {
		case pipeline.RefInput:
			return c.Inputs[r.Index]
		case pipeline.RefOutput:
			return c.Outputs[r.Index]
		case pipeline.RefParam:
			return c.Params[r.Index]
		}
		return c.Scratch[r.Index]
	}
	in, out, param, scratch := pipeline.Ref{pipeline.RefInput, 0}, pipeline.Ref{pipeline.RefOutput, 0}, pipeline.Ref{pipeline.RefParam, 0}, pipeline.Ref{pipeline.RefScratch, 0}
	through = &pipeline.Kernel{Name: "through", Scratch: []int{4},
		Steps: []pipeline.Step{copyStep("in", scratch, in, ptr), copyStep("out", out, scratch, ptr)}}
	resident = &pipeline.Kernel{Name: "resident", Scratch: []int{4}, Params: []pipeline.Param{{Name: "w", Data: driver.Bytes(w)}},
		Steps: []pipeline.Step{copyStep("weights", scratch, param, ptr), copyStep("out", out, scratch, ptr)}}
	return through, resident
}

// TestStepsOnFakeDriver runs kernels of several steps through the GPU
// backend and package driver on the fake driver: each step's launch gets
// its own arguments (the data arrives through the scratch buffers, and
// the parameter's bytes reach the output), a chunk makes one launch a
// step, a kernel's parameters are uploaded once per device, on the first
// run that uses them, and every parameter and scratch buffer is freed on
// Close; through a pipeline, a group of the fake's two GPUs, and their
// streaming runs.
func TestStepsOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctxs := gputest.FakeContexts(t)
	ctx0, ctx1 := ctxs[0], ctxs[1]
	f.ClosedBeforeContexts(t)
	f.SetParams(8, 8, 4)
	fns := map[*driver.Context]*driver.Function{}
	var mods []*driver.Module
	for _, ctx := range []*driver.Context{ctx0, ctx1} {
		m, err := ctx.LoadModule([]byte("// fake"), driver.ModuleOptions{})
		require.NoError(t, err)
		mods = append(mods, m)
		fns[ctx], err = m.Function("fake_copy")
		require.NoError(t, err)
	}
	fn := func(ctx *driver.Context) (*driver.Function, error) { return fns[ctx], nil }

	const chunk = 1 << 10
	w := make([]float32, chunk)
	kernels.FillPattern(w, 5)
	through, resident := fakeCopySteps(fn, w)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
	delta := func(calls ...string) func() map[string]int {
		start := map[string]int{}
		for _, c := range calls {
			start[c] = f.Calls(c)
		}
		return func() map[string]int {
			d := map[string]int{}
			for _, c := range calls {
				d[c] = f.Calls(c) - start[c]
			}
			return d
		}
	}
	calls := []string{"cuLaunchKernel", "cuMemcpyHtoD_v2", "cuMemAlloc_v2", "cuMemFree_v2"}
	repeated := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = w[i%chunk]
		}
		return out
	}

	t.Run("pipeline", func(t *testing.T) {
		p, err := pipeline.New(pipeline.GPU(ctx0), cfg)
		require.NoError(t, err)
		n := 3*chunk + 5
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 1)
		d := delta(calls...)
		_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: through, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		assert.Equal(t, in, out, "the input went through the scratch buffers")
		assert.Equal(t, map[string]int{"cuLaunchKernel": 2 * 4, "cuMemcpyHtoD_v2": 0, "cuMemAlloc_v2": 3, "cuMemFree_v2": 0}, d(),
			"a launch a step a chunk; a scratch buffer a slot")
		last, ok := f.LastParam(2, 4)
		require.True(t, ok)
		assert.Equal(t, uint32(5), binary.NativeEndian.Uint32(last), "the last launch's count: the last chunk's")

		for run := range 2 {
			clear(out)
			d := delta(calls...)
			_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: resident, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
			require.NoError(t, err)
			assert.Equal(t, repeated(n), out, "run %d: the parameter went through the scratch buffers", run)
			want := map[string]int{"cuLaunchKernel": 2 * 4, "cuMemcpyHtoD_v2": 1, "cuMemAlloc_v2": 1, "cuMemFree_v2": 0}
			if run > 0 {
				want["cuMemcpyHtoD_v2"], want["cuMemAlloc_v2"] = 0, 0 // resident
			}
			assert.Equal(t, want, d(), "run %d", run)
		}

		var sout bytes.Buffer
		_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&sout}, Kernel: through})
		require.NoError(t, err)
		assert.Equal(t, driver.Bytes(in), sout.Bytes())

		d = delta(calls...)
		require.NoError(t, p.Close())
		assert.Equal(t, 2+3+1, d()["cuMemFree_v2"], "Close frees the slots' inputs and outputs, the scratch buffers and the parameter")
	})

	t.Run("group", func(t *testing.T) {
		g, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx0), pipeline.GPU(ctx1)}, cfg)
		require.NoError(t, err)
		n := 40*chunk + 7
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 2)
		// Each queued operation takes 50 µs on the fake, so that device 0
		// cannot finish every chunk before device 1 takes one: without it, a
		// loaded machine (the race run of make test) let device 0 run all 41.
		f.ExecDelay(50 * time.Microsecond)
		defer f.ExecDelay(0)
		for run := range 2 {
			d := delta(calls...)
			rep, err := g.Run(context.Background(), pipeline.Job{N: n, Kernel: resident, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
			require.NoError(t, err)
			assert.Equal(t, repeated(n), out, "run %d", run)
			assert.Positive(t, rep.Devices[1].Chunks, "device 1 ran chunks")
			uploads := 2 // one a device
			if run > 0 {
				uploads = 0
			}
			assert.Equal(t, uploads, d()["cuMemcpyHtoD_v2"], "run %d", run)
			assert.Equal(t, 2*41, d()["cuLaunchKernel"])
		}
		var sout bytes.Buffer
		rep, err := g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&sout}, Kernel: through})
		require.NoError(t, err)
		assert.Equal(t, driver.Bytes(in), sout.Bytes())
		assert.Equal(t, 41, rep.Devices[0].Chunks+rep.Devices[1].Chunks)
		sout.Reset()
		_, err = g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&sout}, Kernel: resident})
		require.NoError(t, err)
		assert.Equal(t, driver.Bytes(repeated(n)), sout.Bytes())
		require.NoError(t, g.Close())
	})

	for _, m := range mods {
		require.NoError(t, m.Close())
	}
}
