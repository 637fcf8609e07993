package pipeline_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rowsPTX holds two element-wise kernels over n values in rows of width:
// rows_scale(out, in, w, width, n): out[i] = in[i] · w[i mod width], and
// rows_shift(out, in, b, width, n): out[i] = in[i] + b[i mod width].
var rowsPTX = `
.version 7.0
.target sm_52
.address_size 64
` + rowsEntryPTX("scale", "w", "mul") + rowsEntryPTX("shift", "b", "add")

// rowsEntryPTX is the PTX of the entry rows_<name>(out, in, <param>,
// width, n): out[i] = in[i] <op> param[i mod width], op a PTX f32
// instruction such as mul or add.
func rowsEntryPTX(name, param, op string) string {
	return strings.NewReplacer("NAME", name, "PARAM", param, "OP", op).Replace(`
.visible .entry rows_NAME(
	.param .u64 rows_NAME_out,
	.param .u64 rows_NAME_in,
	.param .u64 rows_NAME_PARAM,
	.param .u32 rows_NAME_width,
	.param .u32 rows_NAME_n
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<8>;
	.reg .f32 %f<4>;
	.reg .b64 %rd<11>;

	ld.param.u64 %rd1, [rows_NAME_out];
	ld.param.u64 %rd2, [rows_NAME_in];
	ld.param.u64 %rd3, [rows_NAME_PARAM];
	ld.param.u32 %r1, [rows_NAME_width];
	ld.param.u32 %r2, [rows_NAME_n];
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r6, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r6, %r2;
	@%p1 bra $L_NAME_done;
	rem.u32 %r7, %r6, %r1;
	cvta.to.global.u64 %rd4, %rd1;
	cvta.to.global.u64 %rd5, %rd2;
	cvta.to.global.u64 %rd6, %rd3;
	mul.wide.u32 %rd7, %r6, 4;
	mul.wide.u32 %rd8, %r7, 4;
	add.s64 %rd9, %rd5, %rd7;
	ld.global.f32 %f1, [%rd9];
	add.s64 %rd10, %rd6, %rd8;
	ld.global.f32 %f2, [%rd10];
	OP.rn.f32 %f3, %f1, %f2;
	add.s64 %rd9, %rd4, %rd7;
	st.global.f32 [%rd9], %f3;
$L_NAME_done:
	ret;
}
`)
}

// gpuRowWidth is the values in a row of the GPU's two-step kernel.
const gpuRowWidth = 4

// gpuRowsFunctions loads rowsPTX on each context as it is first asked
// for, and unloads it when the test ends.
func gpuRowsFunctions(t *testing.T) func(name string) func(*driver.Context) (*driver.Function, error) {
	var mu sync.Mutex
	mods := map[*driver.Context]*driver.Module{}
	t.Cleanup(func() {
		for _, m := range mods {
			assert.NoError(t, m.Close())
		}
	})
	return func(name string) func(*driver.Context) (*driver.Function, error) {
		return func(ctx *driver.Context) (*driver.Function, error) {
			mu.Lock()
			defer mu.Unlock()
			m, ok := mods[ctx]
			if !ok {
				var err error
				if m, err = ctx.LoadModule([]byte(rowsPTX), driver.ModuleOptions{}); err != nil {
					return nil, err
				}
				mods[ctx] = m
			}
			return m.Function(name)
		}
	}
}

// gpuRowsKernel is two element-wise steps through a scratch buffer, each
// reading a resident parameter: scale (scratch = in · w) and shift
// (out = scratch + b), per value of rows of gpuRowWidth. Each step has its
// CPU stand-in too, so that the simulator checks the kernel's arguments
// and buffers (TestGPURowsKernelOnSim).
func gpuRowsKernel(fn func(name string) func(*driver.Context) (*driver.Function, error), w, b []float32) *pipeline.Kernel {
	launch := func(c pipeline.Chunk) driver.LaunchConfig { return driver.GridFor(gpuRowWidth*c.N, 256) }
	step := func(name, fnName string, dst, src, param pipeline.Ref, op func(x, p float32) float32) pipeline.Step {
		return pipeline.Step{
			Name: name, Function: fn(fnName), Launch: launch,
			Reads: []pipeline.Ref{src, param}, Writes: []pipeline.Ref{dst},
			CPU: func(c pipeline.HostChunk) {
				view := func(r pipeline.Ref) []float32 {
					switch r.Kind {
					case pipeline.RefInput:
						return driver.View[float32](c.Inputs[r.Index])
					case pipeline.RefOutput:
						return driver.View[float32](c.Outputs[r.Index])
					case pipeline.RefParam:
						return driver.View[float32](c.Params[r.Index])
					}
					return driver.View[float32](c.Scratch[r.Index])
				}
				d, x, p := view(dst), view(src), view(param)
				for i := range gpuRowWidth * c.N {
					d[i] = op(x[i], p[i%gpuRowWidth])
				}
			},
			Args: func(a *driver.Args, c pipeline.Chunk) {
				ptr := func(r pipeline.Ref) driver.DevicePtr {
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
				a.Pointer(ptr(dst)).Pointer(ptr(src)).Pointer(ptr(param)).Uint32(gpuRowWidth).Uint32(uint32(gpuRowWidth * c.N))
			},
		}
	}
	return &pipeline.Kernel{
		Name:    "rows",
		Params:  []pipeline.Param{{Name: "w", Data: driver.Bytes(w)}, {Name: "b", Data: driver.Bytes(b)}},
		Scratch: []int{4 * gpuRowWidth},
		Steps: []pipeline.Step{
			step("scale", "rows_scale", pipeline.Ref{pipeline.RefScratch, 0}, pipeline.Ref{pipeline.RefInput, 0}, pipeline.Ref{pipeline.RefParam, 0}, func(x, w float32) float32 { return x * w }),
			step("shift", "rows_shift", pipeline.Ref{pipeline.RefOutput, 0}, pipeline.Ref{pipeline.RefScratch, 0}, pipeline.Ref{pipeline.RefParam, 1}, func(x, b float32) float32 { return x + b }),
		},
	}
}

// gpuRowsWant is what gpuRowsKernel makes of in, each operation rounded
// to float32 as the GPU rounds it.
func gpuRowsWant(in, w, b []float32) []float32 {
	out := make([]float32, len(in))
	for i, x := range in {
		s := float32(x * w[i%gpuRowWidth])
		out[i] = float32(s + b[i%gpuRowWidth])
	}
	return out
}

func gpuRowsConfig(chunk int) pipeline.Config {
	return pipeline.Config{ChunkElems: chunk, Inputs: []int{4 * gpuRowWidth}, Outputs: []int{4 * gpuRowWidth}}
}

// TestGPUSteps runs a kernel of two steps, from PTX written by hand,
// through a pipeline's Run and RunStream on GPU 0, in rows, at lengths
// around the chunk, and checks every value; the parameters are uploaded
// by the first run only.
func TestGPUSteps(t *testing.T) {
	ctx := gputest.Context(t)
	fn := gpuRowsFunctions(t)
	w, b := []float32{1.5, -2, 0.25, 3}, []float32{10, -1, 0.5, 7}
	k := gpuRowsKernel(fn, w, b)
	const chunk = 1 << 16
	cfg := gpuRowsConfig(chunk)
	cfg.Slots, cfg.ComputeStreams = 3, 2
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close()) }()
	first := true
	for _, mode := range []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered} {
		for _, n := range []int{1, chunk + 1, 3*chunk + 17} {
			in := make([]float32, gpuRowWidth*n)
			kernels.FillPattern(in, n)
			out := make([]float32, len(in))
			rep, err := p.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Host: mode, Inputs: []pipeline.Buffer{pipeline.Rows(in, gpuRowWidth)}, Outputs: []pipeline.Buffer{pipeline.Rows(out, gpuRowWidth)}})
			require.NoError(t, err, "%s n=%d", mode, n)
			require.Equal(t, gpuRowsWant(in, w, b), out, "%s n=%d", mode, n)
			if first {
				assert.Positive(t, rep.Upload, "the first run uploads the parameters")
				first = false
			} else {
				assert.Zero(t, rep.Upload, "%s n=%d: the parameters stay resident", mode, n)
			}
		}
	}
	n := 5*chunk + 3
	in := make([]float32, gpuRowWidth*n)
	kernels.FillPattern(in, 1)
	var out bytes.Buffer
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&out}, Kernel: k})
	require.NoError(t, err)
	assert.Equal(t, int64(n), rep.N)
	require.Equal(t, driver.Bytes(gpuRowsWant(in, w, b)), out.Bytes())
}

// TestGPUGroupSteps runs the two-step kernel over every GPU of the host
// through Group.Run and Group.RunStream: each device uploads a copy of
// the parameters of its own, and every value is checked.
func TestGPUGroupSteps(t *testing.T) {
	const chunk = 1 << 16
	g, ctxs, _ := gpuGroup(t, gpuRowsConfig(chunk))
	fn := gpuRowsFunctions(t)
	w, b := []float32{0.5, 4, -3, 1}, []float32{-2, 0.125, 9, 1}
	k := gpuRowsKernel(fn, w, b)
	t.Logf("%d GPU(s)", len(ctxs))
	n := 16*chunk*len(ctxs) + 5
	in := make([]float32, gpuRowWidth*n)
	kernels.FillPattern(in, 3)
	want := gpuRowsWant(in, w, b)
	for run := range 2 {
		out := make([]float32, len(in))
		rep, err := g.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, gpuRowWidth)}, Outputs: []pipeline.Buffer{pipeline.Rows(out, gpuRowWidth)}})
		require.NoError(t, err, "run %d", run)
		require.Equal(t, want, out, "run %d", run)
		for _, d := range rep.Devices {
			assert.Positive(t, d.Chunks, "run %d: device %d took no chunk", run, d.Device)
		}
		if run == 0 {
			assert.Positive(t, rep.Upload)
		} else {
			assert.Zero(t, rep.Upload)
		}
	}
	var out bytes.Buffer
	rep, err := g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&out}, Kernel: k})
	require.NoError(t, err)
	require.Equal(t, driver.Bytes(want), out.Bytes())
	chunks := 0
	for _, d := range rep.Devices {
		chunks += d.Chunks
	}
	assert.Equal(t, rep.Chunks, chunks)
}
