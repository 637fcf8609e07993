package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gpuGroup returns a group over every GPU, with the embedded kernels
// loaded on each context.
func gpuGroup(t *testing.T, cfg pipeline.Config) (*pipeline.Group, []*driver.Context, *kernels.Modules) {
	ctxs := gputest.Contexts(t)
	mods := new(kernels.Modules)
	var backends []pipeline.Backend
	for _, ctx := range ctxs {
		backends = append(backends, pipeline.GPU(ctx))
	}
	g, err := pipeline.NewGroup(backends, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, g.Close())
		require.NoError(t, mods.Close())
	})
	return g, ctxs, mods
}

// TestGPUGroupEveryElement guards issue 12 on the GPUs of the host: one
// job over every GPU, in every host mode, at sizes that leave partial
// chunks, gives exactly what the CPU reference gives, and every GPU takes
// a share of a job with enough chunks.
func TestGPUGroupEveryElement(t *testing.T) {
	const chunk = 1 << 20
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = chunk
	g, ctxs, mods := gpuGroup(t, cfg)
	k := seedKernel(mods, 100)
	t.Logf("%d GPU(s)", len(ctxs))
	for _, mode := range []pipeline.HostMode{pipeline.HostPinned, pipeline.HostStaged, pipeline.HostRegistered, pipeline.HostAuto} {
		for _, n := range []int{1, chunk + 1, 3*chunk + 17, 64<<20 + 5} {
			in, out := make([]float32, n), make([]float32, n)
			kernels.FillPattern(in, n)
			job := pipeline.Job{N: n, Kernel: k, Host: mode, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			var hout *driver.HostBuffer
			if mode == pipeline.HostPinned {
				hin, err := ctxs[0].AllocHost(4*n, driver.HostAllocOptions{Portable: true})
				require.NoError(t, err)
				defer hin.Close()
				copy(hin.Float32s(), in)
				hout, err = ctxs[0].AllocHost(4*n, driver.HostAllocOptions{Portable: true})
				require.NoError(t, err)
				defer hout.Close()
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Pinned(hin)}, []pipeline.Buffer{pipeline.Pinned(hout)}
			}
			rep, err := g.Run(context.Background(), job)
			require.NoError(t, err, "%s n=%d", mode, n)
			if hout != nil {
				out = hout.Float32s()[:n]
			}
			require.NoError(t, verifySeed(in, out, 100), "%s n=%d", mode, n)
			chunks := 0
			for _, d := range rep.Devices {
				chunks += d.Chunks
				if rep.Chunks >= 8*len(ctxs) {
					assert.Positive(t, d.Chunks, "%s n=%d: device %d took no chunk", mode, n, d.Device)
				}
			}
			assert.Equal(t, rep.Chunks, chunks, "%s n=%d", mode, n)
			if n > chunk*8 {
				parts := []string{}
				for _, d := range rep.Devices {
					parts = append(parts, fmt.Sprintf("GPU %d %d chunks busy %v", d.Device, d.Chunks, d.Busy))
				}
				t.Logf("%s n=%d: %v (%s)", rep.Mode, n, rep.Elapsed, strings.Join(parts, ", "))
			}
		}
	}
}

// TestGPUGroupCancel guards issue 12: cancelling a group's run stops every
// GPU, returns the context's error, and the group runs the next job.
func TestGPUGroupCancel(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 1 << 18
	g, _, mods := gpuGroup(t, cfg)
	n := 256 << 20
	in, out := make([]float32, n), make([]float32, n)
	job := pipeline.Job{N: n, Kernel: seedKernel(mods, 2000), Host: pipeline.HostRegistered, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := g.Run(ctx, job)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var de *pipeline.DeviceError
	assert.False(t, errors.As(err, &de), "a cancellation is nobody's fault: %v", err)
	t.Logf("cancelled after %v", time.Since(start))
	small := pipeline.Job{N: 1 << 20, Kernel: seedKernel(mods, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in[:1<<20])}, Outputs: []pipeline.Buffer{pipeline.Slice(out[:1<<20])}}
	kernels.FillPattern(in[:1<<20], 5)
	_, err = g.Run(context.Background(), small)
	require.NoError(t, err)
	require.NoError(t, verifySeed(in[:1<<20], out[:1<<20], 100))
}

// noopPTX has fault.ptx's shape, (out, in, n), and does nothing.
const noopPTX = `.version 7.0
.target sm_75
.address_size 64
.visible .entry noop(.param .u64 out, .param .u64 in, .param .u32 n)
{
	ret;
}
`

// TestGPUGroupFaultingKernel guards issue 12: a kernel that faults on the
// last GPU only (the others run a kernel that does nothing) stops the
// whole job; the error names that GPU; the group closes itself, as a
// pipeline whose context broke does. It runs in a child process: the
// fault ruins CUDA for the whole process, every GPU's context included.
func TestGPUGroupFaultingKernel(t *testing.T) {
	if os.Getenv("OVERLAP_TEST_CHILD") == "group-fault" {
		groupFaultingChild()
		return
	}
	ctxs := gputest.Contexts(t) // skips without a driver
	last := len(ctxs) - 1
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, os.Args[0], "-test.run", "^TestGPUGroupFaultingKernel$", "-test.v")
	cmd.Env = append(os.Environ(), "OVERLAP_TEST_CHILD=group-fault")
	out, err := cmd.CombinedOutput()
	require.NoError(t, c.Err(), "the child hung:\n%s", out)
	require.NoError(t, err, string(out))
	text := string(out)
	t.Logf("child:\n%s", text)
	assert.Contains(t, text, fmt.Sprintf("RUN ERROR: pipeline: device %d (", last))
	assert.Contains(t, text, "CUDA_ERROR_ILLEGAL_ADDRESS")
	assert.Contains(t, text, fmt.Sprintf("DEVICE ERROR: true %d", last))
	assert.Contains(t, text, "SECOND RUN: pipeline: closed after a failure")
	if last > 0 {
		// CUDA documents that an illegal address "leaves the process in
		// an inconsistent state": the other GPUs' contexts fail too (seen
		// on two H200s), so the process must restart, as the error says.
		assert.Contains(t, text, "GPU 0 ALLOC: cuda: cuMemAlloc_v2: CUDA_ERROR_ILLEGAL_ADDRESS")
	}
	assert.Contains(t, text, "CHILD DONE")
}

func groupFaultingChild() {
	fail := func(format string, args ...any) {
		fmt.Printf("CHILD FAILED: "+format+"\n", args...)
		os.Exit(3)
	}
	n, err := driver.DeviceCount()
	if err != nil {
		fail("%v", err)
	}
	src, err := os.ReadFile("testdata/fault.ptx")
	if err != nil {
		fail("%v", err)
	}
	fns := map[*driver.Context]*driver.Function{}
	var ctxs []*driver.Context
	var backends []pipeline.Backend
	for d := 0; d < n; d++ {
		dev, err := driver.DeviceAt(d)
		if err != nil {
			fail("%v", err)
		}
		ctx, err := driver.NewContext(dev)
		if err != nil {
			fail("%v", err)
		}
		code, entry := []byte(noopPTX), "noop"
		if d == n-1 {
			code, entry = src, "fault"
		}
		prog, err := ptx.Load(ctx, entry+".ptx", code, entry, driver.ModuleOptions{})
		if err != nil {
			fail("%v", err)
		}
		fns[ctx] = prog.Function
		ctxs = append(ctxs, ctx)
		backends = append(backends, pipeline.GPU(ctx))
	}
	g, err := pipeline.NewGroup(backends, pipeline.Config{ChunkElems: 1 << 16, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostRegistered})
	if err != nil {
		fail("%v", err)
	}
	fn := func(ctx *driver.Context) (*driver.Function, error) { return fns[ctx], nil }
	in, out := make([]float32, 1<<22), make([]float32, 1<<22)
	job := pipeline.Job{N: len(in), Kernel: kernels.Elementwise("fault on the last GPU", fn), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	_, err = g.Run(context.Background(), job)
	fmt.Printf("RUN ERROR: %v\n", err)
	var de *pipeline.DeviceError
	fmt.Printf("DEVICE ERROR: %v %d\n", errors.As(err, &de), func() int {
		if de == nil {
			return -1
		}
		return de.Device
	}())
	_, err = g.Run(context.Background(), job)
	fmt.Printf("SECOND RUN: %v\n", err)
	if n > 1 {
		b, err := ctxs[0].Alloc(1 << 20)
		fmt.Printf("GPU 0 ALLOC: %v\n", err)
		if err == nil {
			b.Close()
		}
	}
	fmt.Println("CHILD DONE")
	os.Exit(0)
}

// TestGPUGroupWarm guards Group.Warm on the GPUs of the host: it works the
// devices for the time asked, leaves the job's outputs as they were (here
// NaNs of one bit pattern), and the run after it is right in every
// element (TestGroupWarm checks the same on the simulator).
func TestGPUGroupWarm(t *testing.T) {
	const n = 4<<20 + 3
	cfg := pipeline.Float32Config(1, 1)
	g, _, mods := gpuGroup(t, cfg)
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 11)
	const poison = 0x7fc0beef
	for i := range out {
		out[i] = math.Float32frombits(poison)
	}
	job := pipeline.Job{N: n, Kernel: seedKernel(mods, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	const d = 20 * time.Millisecond
	t0 := time.Now()
	require.NoError(t, g.Warm(context.Background(), job, d))
	assert.GreaterOrEqual(t, time.Since(t0), d)
	for i, v := range out {
		if math.Float32bits(v) != poison {
			t.Fatalf("Warm wrote output element %d (%v)", i, v)
		}
	}
	_, err := g.Run(context.Background(), job)
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, 100))
}
