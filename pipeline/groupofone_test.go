package pipeline_test

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// goroutineID is the calling goroutine's number, from its stack header.
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	return string(bytes.Fields(b)[1])
}

// TestGroupOfOneIssuesOnCaller guards Group.Run's issuing goroutine: a
// group of one device issues from the caller's goroutine, as a Pipeline
// does (a goroutine started and joined per run cost the README's job
// 14 µs on the H200, BenchmarkGPUGroupOfOne), and a group of two from a
// goroutine per device. The kernel's argument builder runs on the
// issuing goroutine; the runs are right.
func TestGroupOfOneIssuesOnCaller(t *testing.T) {
	for _, devices := range []int{1, 2} {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems = 4096
		slow := make([]bool, devices)
		g, _ := simGroup(t, sim.HostOptions{}, cfg, slow...)
		const n = 8 * 4096
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 2)
		seed := seedKernel(nil, 5)
		k := *seed
		var mu sync.Mutex
		issuers := map[string]bool{}
		k.Args = func(a *driver.Args, c pipeline.Chunk) {
			mu.Lock()
			issuers[goroutineID()] = true
			mu.Unlock()
			if seed.Args != nil {
				seed.Args(a, c)
			}
		}
		_, err := g.Run(context.Background(), pipeline.Job{N: n, Kernel: &k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		require.NoError(t, verifySeed(in, out, 5))
		if devices == 1 {
			assert.Equal(t, map[string]bool{goroutineID(): true}, issuers, "one device issues from the caller's goroutine")
		} else {
			assert.Len(t, issuers, 2, "a goroutine per device")
			assert.False(t, issuers[goroutineID()], "not the caller's")
		}
	}
}

// TestGroupRunErrorWrappingAContextError guards Group.Run's choice of the
// run's error: a device's failure whose error wraps a context error (here
// a launch that fails with context.DeadlineExceeded while the caller's
// context is live) is the run's error, for a group of one as for a
// Pipeline, and for a group of two; Group.Run used to take it for a
// device stopping and return a report over wrong output.
func TestGroupRunErrorWrappingAContextError(t *testing.T) {
	for _, devices := range []int{1, 2} {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems = 4096
		g, sims := simGroup(t, sim.HostOptions{}, cfg, make([]bool, devices)...)
		const n = 8 * 4096
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 2)
		job := pipeline.Job{N: n, Kernel: seedKernel(nil, 5), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
		sims[devices-1].FailAt("launch", 2, context.DeadlineExceeded)
		rep, err := g.Run(context.Background(), job)
		require.Error(t, err, "%d device(s)", devices)
		assert.Nil(t, rep)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var de *pipeline.DeviceError
		require.ErrorAs(t, err, &de, "%d device(s)", devices)
		assert.Equal(t, devices-1, de.Device)
	}
}
