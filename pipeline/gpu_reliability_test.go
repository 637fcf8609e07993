package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
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

// TestGPUOutOfMemoryMidSetup asks for more device memory than the card
// has, so that New fails part-way through its allocations.
func TestGPUOutOfMemoryMidSetup(t *testing.T) {
	ctx := gputest.Context(t)
	free0, _, err := ctx.MemoryInfo()
	require.NoError(t, err)
	// Twelve buffers (6 slots, in and out), each a fifth of free memory.
	chunk := int(free0 / 5 / 4)
	_, setupErr := pipeline.New(pipeline.GPU(ctx), pipeline.Config{ChunkElems: chunk, Slots: 6, ComputeStreams: 4, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostPinned})
	require.Error(t, setupErr)
	assert.ErrorIs(t, setupErr, driver.ErrOutOfMemory)
	var se *pipeline.StageError
	require.ErrorAs(t, setupErr, &se)
	assert.Equal(t, pipeline.StageSetup, se.Stage)
	free1, _, err := ctx.MemoryInfo()
	require.NoError(t, err)
	t.Logf("RELIABILITY: out of memory mid-setup: %v; free before %d MiB, after %d MiB; open objects %d", setupErr, free0>>20, free1>>20, ctx.OpenObjects())
	assert.InDelta(t, float64(free0), float64(free1), 64<<20)
	assert.Equal(t, 0, ctx.OpenObjects())
}

// TestGPUCancellation cancels 200 runs at random points.
func TestGPUCancellation(t *testing.T) {
	ctx := gputest.Context(t)
	mods := gpuKernels(t, ctx)
	objs0 := ctx.OpenObjects() // the kernels' modules
	free0, _, _ := ctx.MemoryInfo()
	before := runtime.NumGoroutine()
	const n = 16 << 20
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	r := rand.New(rand.NewPCG(5, 5))
	canceled := 0
	var longest time.Duration
	for i := 0; i < 200; i++ {
		mode := []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered}[i%2]
		p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Config{ChunkElems: 1 << 20, Inputs: []int{4}, Outputs: []int{4}, Host: mode})
		require.NoError(t, err)
		c, cancel := context.WithCancel(context.Background())
		var mu sync.Mutex
		var at time.Time
		time.AfterFunc(time.Duration(r.IntN(4000))*time.Microsecond, func() { mu.Lock(); at = time.Now(); mu.Unlock(); cancel() })
		_, err = p.Run(c, pipeline.Job{N: n, Kernel: seedKernel(mods, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			mu.Lock()
			longest = max(longest, time.Since(at))
			mu.Unlock()
			canceled++
		}
		cancel()
		if i%20 == 0 { // usable after a cancellation, and exact
			_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(mods, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
			require.NoError(t, err)
			require.NoError(t, verifySeed(in, out, 100))
		}
		require.NoError(t, p.Close())
	}
	settle(before)
	free1, _, _ := ctx.MemoryInfo()
	t.Logf("RELIABILITY: H200 cancellations tried 200, cancelled mid-run %d, longest from cancel to return %v, device memory delta %d MiB, open objects %+d, goroutines %+d",
		canceled, longest, (int64(free0)-int64(free1))>>20, ctx.OpenObjects()-objs0, runtime.NumGoroutine()-before)
	assert.Greater(t, canceled, 0)
	assert.InDelta(t, float64(free0), float64(free1), 8<<20)
	assert.Equal(t, objs0, ctx.OpenObjects(), "only the kernels' modules are open")
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2)
}

// TestGPULeaks runs 10,000 jobs on one pipeline and 1,000 open/run/close
// cycles.
func TestGPULeaks(t *testing.T) {
	ctx := gputest.Context(t)
	mods := gpuKernels(t, ctx)
	const n = 64 << 10
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 9)
	job := pipeline.Job{N: n, Kernel: seedKernel(mods, 10), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	cfg := pipeline.Config{ChunkElems: 16 << 10, Inputs: []int{4}, Outputs: []int{4}}
	free0, _, _ := ctx.MemoryInfo()
	objs0 := ctx.OpenObjects()
	before := runtime.NumGoroutine()
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	objsOpen := ctx.OpenObjects()
	for i := 0; i < 10000; i++ {
		if _, err := p.Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}
	}
	require.NoError(t, verifySeed(in, out, 10))
	assert.Equal(t, objsOpen, ctx.OpenObjects()-2, "two registrations, nothing else, after 10,000 runs")
	require.NoError(t, p.Close())
	for i := 0; i < 1000; i++ {
		p, err := pipeline.New(pipeline.GPU(ctx), cfg)
		require.NoError(t, err)
		if _, err := p.Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		require.NoError(t, p.Close())
	}
	require.NoError(t, verifySeed(in, out, 10))
	settle(before)
	free1, _, _ := ctx.MemoryInfo()
	t.Logf("RELIABILITY: H200 leaks after 10000 runs and 1000 open/run/close cycles: device memory delta %d KiB, open objects %+d, goroutines %+d",
		(int64(free0)-int64(free1))>>10, ctx.OpenObjects()-objs0, runtime.NumGoroutine()-before)
	assert.InDelta(t, float64(free0), float64(free1), 4<<20)
	assert.Equal(t, objs0, ctx.OpenObjects())
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2)
}

// TestGPUSixteenPipelines runs 16 goroutines on one context, each with its
// own pipeline, chunk size and kernel.
func TestGPUSixteenPipelines(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			n := 1<<20 + g*12345
			a, b, out := make([]float32, n), make([]float32, n), make([]float32, n)
			kernels.FillPattern(a, g)
			kernels.FillPattern(b, 3*g)
			cfg := pipeline.Float32Config(2, 1)
			var k *pipeline.Kernel
			var check func() error
			switch g % 3 {
			case 0:
				cfg = pipeline.Float32Config(1, 1)
				k, check = seedKernel(ks, 20), func() error { return verifySeed(a, out, 20) }
			case 1:
				k, check = saxpyKernel(ks, 1.5), func() error { return verifySaxpy(a, b, out, 1.5) }
			default:
				k, check = lerpKernel(ks, 0.5, 2), func() error { return verifyLerp(a, b, out, 0.5, 2) }
			}
			cfg.ChunkElems = (32 << 10) << (g % 5)
			cfg.Host = pipeline.HostMode(2 + g%2)
			p, err := pipeline.New(pipeline.GPU(ctx), cfg)
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			job := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(a)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			if len(cfg.Inputs) == 2 {
				job.Inputs = append(job.Inputs, pipeline.Slice(b))
			}
			for r := 0; r < 3; r++ {
				clear(out)
				if _, err := p.Run(context.Background(), job); err != nil {
					errs <- fmt.Errorf("pipeline %d: %w", g, err)
					return
				}
				if err := check(); err != nil {
					errs <- fmt.Errorf("pipeline %d run %d: %w", g, r, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("RELIABILITY: 16 pipelines on one H200 context, 3 runs each, every element exact")
}

// TestGPUFaultingKernel runs a kernel that writes out of bounds in a child
// process (the fault ruins the process's context) and checks that the
// error says the context is unusable and that later calls fail, not hang.
func TestGPUFaultingKernel(t *testing.T) {
	if os.Getenv("OVERLAP_TEST_CHILD") == "fault" {
		faultingChild()
		return
	}
	gputest.Context(t) // skips without a driver
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, os.Args[0], "-test.run", "^TestGPUFaultingKernel$", "-test.v")
	cmd.Env = append(os.Environ(), "OVERLAP_TEST_CHILD=fault")
	out, err := cmd.CombinedOutput()
	require.NoError(t, c.Err(), "the child hung:\n%s", out)
	require.NoError(t, err, string(out))
	text := string(out)
	t.Logf("child:\n%s", text)
	assert.Contains(t, text, "RUN ERROR: pipeline: drain: ")
	assert.Contains(t, text, "CUDA_ERROR_ILLEGAL_ADDRESS")
	assert.Contains(t, text, "the CUDA context is now unusable")
	assert.Contains(t, text, "IS ILLEGAL ADDRESS: true")
	assert.Contains(t, text, "SECOND RUN: pipeline: closed after a failure")
	assert.Contains(t, text, "LATER ALLOC: cuda: cuMemAlloc_v2: CUDA_ERROR_")
	assert.Contains(t, text, "CHILD DONE")
}

func faultingChild() {
	fail := func(format string, args ...any) {
		fmt.Printf("CHILD FAILED: "+format+"\n", args...)
		os.Exit(3)
	}
	dev, err := driver.DeviceAt(0)
	if err != nil {
		fail("%v", err)
	}
	ctx, err := driver.NewContext(dev)
	if err != nil {
		fail("%v", err)
	}
	src, err := os.ReadFile("testdata/fault.ptx")
	if err != nil {
		fail("%v", err)
	}
	prog, err := ptx.Load(ctx, "fault.ptx", src, "fault", driver.ModuleOptions{})
	if err != nil {
		fail("%v", err)
	}
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Config{ChunkElems: 1 << 16, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostStaged})
	if err != nil {
		fail("%v", err)
	}
	in, out := make([]float32, 1<<20), make([]float32, 1<<20)
	job := pipeline.Job{N: len(in), Kernel: kernels.Elementwise("fault", pipeline.FunctionOn(ctx, prog.Function)), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	_, err = p.Run(context.Background(), job)
	fmt.Printf("RUN ERROR: %v\n", err)
	fmt.Printf("IS ILLEGAL ADDRESS: %v\n", errors.Is(err, driver.ErrIllegalAddress))
	_, err = p.Run(context.Background(), job)
	fmt.Printf("SECOND RUN: %v\n", err)
	_, err = ctx.Alloc(1 << 20)
	fmt.Printf("LATER ALLOC: %v\n", err)
	fmt.Printf("CLOSE: %v\n", strings.SplitN(fmt.Sprint(ctx.Close()), "\n", 2)[0])
	fmt.Println("CHILD DONE")
	os.Exit(0)
}
