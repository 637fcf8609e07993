package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// TestGroupWarm guards Group.Warm, which `overlap run` calls before each
// timed run: it keeps the devices busy for the time asked (here virtual
// time), it never writes the job's outputs (a run after it is verified
// on its own), it leaves auto mode's choice for the next run as it was
// (first sight: staged) and takes that choice itself (seen before:
// registered), and a run after it is right and hazard-free.
func TestGroupWarm(t *testing.T) {
	const n, chunk, iters = 64 << 10, 8 << 10, 5
	sentinel := float32(math.Float32frombits(0x7fc0beef))
	for _, host := range []pipeline.HostMode{pipeline.HostAuto, pipeline.HostRegistered, pipeline.HostStaged, pipeline.HostPinned} {
		t.Run(host.String(), func(t *testing.T) {
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Host = chunk, host
			g, sims := simGroup(t, sim.HostOptions{}, cfg, false, true)
			in, out := make([]float32, n), make([]float32, n)
			kernels.FillPattern(in, 3)
			bufs := []pipeline.Buffer{pipeline.Slice(in), pipeline.Slice(out)}
			if host == pipeline.HostPinned {
				for i := range bufs {
					h, err := sims[0].AllocPinned(4 * n)
					require.NoError(t, err)
					defer h.Close()
					bufs[i] = pipeline.Pinned(h)
				}
				copy(bufs[0].Pinned.Bytes(), driver.Bytes(in))
			}
			outData := func() []float32 {
				if host == pipeline.HostPinned {
					return driver.View[float32](bufs[1].Pinned.Bytes())
				}
				return out
			}
			for i := range outData() {
				outData()[i] = sentinel
			}
			job := pipeline.Job{N: n, Kernel: seedKernel(nil, iters), Inputs: bufs[:1], Outputs: bufs[1:]}

			const d = 3 * time.Millisecond
			t0 := pipeline.Now(sims[0])
			require.NoError(t, g.Warm(context.Background(), job, d))
			assert.GreaterOrEqual(t, pipeline.Now(sims[0])-t0, d, "warm for at least the time asked")
			for i, v := range outData() {
				if math.Float32bits(v) != math.Float32bits(sentinel) {
					t.Fatalf("Warm wrote output element %d (%v)", i, v)
				}
			}
			switch host {
			case pipeline.HostAuto:
				assert.Zero(t, g.Registered(), "Warm stages a job in auto mode")
			case pipeline.HostRegistered:
				assert.NotZero(t, g.Registered(), "Warm registers as the Config says")
			}

			rep, err := g.Run(context.Background(), job)
			require.NoError(t, err)
			if host == pipeline.HostAuto {
				assert.Equal(t, pipeline.HostStaged, rep.Mode, "auto mode's first sight of these slices, as without Warm")
			}
			for d, dev := range sims {
				assert.Empty(t, dev.Hazards(), "device %d", d)
			}
			require.NoError(t, verifySeed(in, outData(), iters))

			// Zero time still makes one pass.
			t0 = pipeline.Now(sims[0])
			require.NoError(t, g.Warm(context.Background(), job, 0))
			assert.Positive(t, pipeline.Now(sims[0])-t0)

			if host == pipeline.HostStaged {
				assert.Zero(t, g.Registered(), "Warm stages as the Config says, slices seen or not")
			}
			if host == pipeline.HostAuto {
				// Seen once, the slices are registered by the next run, and
				// so by the warm-up before it, which copies from the pages
				// that run copies from.
				assert.NotZero(t, g.Registered(), "Warm takes the mode of the next run: registered")
				rep, err = g.Run(context.Background(), job)
				require.NoError(t, err)
				assert.Equal(t, pipeline.HostRegistered, rep.Mode)
				assert.Zero(t, rep.Register, "the warm-up registered the slices")
				require.NoError(t, verifySeed(in, outData(), iters))
			}
		})
	}
}

// TestGroupWarmErrors: bad input, a cancelled context and a closed group
// each give an error that says so, not a hang.
func TestGroupWarmErrors(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 4 << 10
	g, _ := simGroup(t, sim.HostOptions{}, cfg, false)
	in, out := make([]float32, 64<<10), make([]float32, 64<<10)
	job := pipeline.Job{N: len(in), Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}

	err := g.Warm(context.Background(), job, -time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Warm for -1ms")

	bad := job
	bad.Kernel = nil
	require.Error(t, g.Warm(context.Background(), bad, time.Millisecond))

	// Slices too short for N, in auto mode, whose mode Warm looks up from
	// the slices themselves: an error, not a panic.
	short := job
	short.Outputs = []pipeline.Buffer{pipeline.Slice(out[:100])}
	require.NoError(t, runErr(g, job)) // seen: the next warm-up would register
	err = g.Warm(context.Background(), short, time.Millisecond)
	require.Error(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = g.Warm(ctx, job, time.Second)
	require.Error(t, err)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)

	require.NoError(t, g.Close())
	err = g.Warm(context.Background(), job, time.Millisecond)
	assert.True(t, errors.Is(err, pipeline.ErrClosed), fmt.Sprint(err))
}

// TestGroupWarmPinnedConfigGoSlices: a group configured for pinned memory,
// warmed with a job of Go slices (overlap infer warms the device with its
// synchronous baseline's pageable job before its pinned runs), warms as
// auto mode would take the slices, where a run of that job is refused.
func TestGroupWarmPinnedConfigGoSlices(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Host = 4<<10, pipeline.HostPinned
	g, _ := simGroup(t, sim.HostOptions{}, cfg, false)
	in, out := make([]float32, 16<<10), make([]float32, 16<<10)
	job := pipeline.Job{N: len(in), Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	require.NoError(t, g.Warm(context.Background(), job, time.Millisecond))
	_, err := g.Run(context.Background(), job)
	assert.ErrorContains(t, err, "host mode pinned needs every buffer in pinned memory")
}

// runErr runs job on r (a Group or a Pipeline) and returns its error.
func runErr(r interface {
	Run(context.Context, pipeline.Job) (*pipeline.Report, error)
}, job pipeline.Job) error {
	_, err := r.Run(context.Background(), job)
	return err
}

// TestGroupWarmSlicesRegisteredElsewhere: slices seen before, which the
// next run would register, but which another pipeline holds registered:
// the run stages them, and the warm-up, which tried to register them,
// stages them too rather than fail.
func TestGroupWarmSlicesRegisteredElsewhere(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 4 << 10
	g, sims := simGroup(t, sim.HostOptions{}, cfg, false)
	in, out := make([]float32, 16<<10), make([]float32, 16<<10)
	kernels.FillPattern(in, 1)
	job := pipeline.Job{N: len(in), Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	holder, err := pipeline.New(sims[0], cfg)
	require.NoError(t, err)
	defer holder.Close()
	held := job
	held.Host = pipeline.HostRegistered
	require.NoError(t, runErr(holder, held))

	rep, err := g.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, pipeline.HostStaged, rep.Mode, "registered elsewhere: staged")
	require.NoError(t, g.Warm(context.Background(), job, time.Millisecond))
	rep, err = g.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, pipeline.HostStaged, rep.Mode)
	require.NoError(t, verifySeed(in, out, 1))
}
