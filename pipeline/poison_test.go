package pipeline_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// lazySim is a kernel that writes nothing: on the simulator, a launch
// that was skipped. It asks for one scratch word per element, so that
// PoisonSlots has scratch buffers to fill.
func lazySim() *pipeline.Kernel {
	return &pipeline.Kernel{Name: "lazy", CPU: func(pipeline.HostChunk) {}, Scratch: []int{4}}
}

// checkPoisonSlots runs seed over a job whose chunks each have a slot of
// their own, then lazy (a kernel that writes nothing) twice: before
// PoisonSlots it copies out seed's results, which a check would pass;
// after it, NaN of PoisonWord's bits in every element. Every slot
// buffer holds PoisonWord in every word after it, and a seed run after
// that is right again.
func checkPoisonSlots(t *testing.T, b pipeline.Backend, seed, lazy *pipeline.Kernel, schedule pipeline.Schedule, host pipeline.HostMode) {
	const chunk, slots, iters = 4096, 4, 100
	n := chunk*slots - 5 // the last chunk short
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Schedule = chunk, slots, 2, host, schedule
	p, err := pipeline.New(b, cfg)
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 7)
	job := func(k *pipeline.Kernel) pipeline.Job {
		return pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	}
	sentinel := math.Float32frombits(0x7fc0beef)
	fill := func() {
		for i := range out {
			out[i] = sentinel
		}
	}
	_, err = p.Run(context.Background(), job(seed))
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, iters))

	fill()
	_, err = p.Run(context.Background(), job(lazy))
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, iters), "a launch that writes nothing copies out the last run's results: what PoisonSlots is for")

	require.NoError(t, p.PoisonSlots())
	for i, d := range pipeline.SlotBuffers(p) {
		got := make([]byte, d.Len())
		require.NoError(t, b.CopyToHostSync(got, d, 0))
		for j := 0; j+4 <= len(got); j += 4 {
			if w := binary.LittleEndian.Uint32(got[j:]); w != pipeline.PoisonWord {
				t.Fatalf("slot buffer %d of %d, byte %d: %#x, want PoisonWord", i, len(pipeline.SlotBuffers(p)), j, w)
			}
		}
	}
	assert.Len(t, pipeline.SlotBuffers(p), 2+slots, "an input, an output, and the lazy kernel's scratch in each slot")
	staging := pipeline.StagingSlots(p)
	if host == pipeline.HostStaged {
		assert.Len(t, staging, 2*slots, "an input and an output staging slot in each slot")
	}
	for i, m := range staging {
		got := m.Bytes()
		for j := 0; j+4 <= len(got); j += 4 {
			if w := binary.LittleEndian.Uint32(got[j:]); w != pipeline.PoisonWord {
				t.Fatalf("staging slot %d, byte %d: %#x, want PoisonWord", i, j, w)
			}
		}
	}

	fill()
	_, err = p.Run(context.Background(), job(lazy))
	require.NoError(t, err)
	for i, v := range out {
		if math.Float32bits(v) != pipeline.PoisonWord {
			t.Fatalf("out[%d] = %#x after PoisonSlots and a launch that writes nothing, want PoisonWord", i, math.Float32bits(v))
		}
	}
	fill()
	_, err = p.Run(context.Background(), job(seed))
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, iters), "a real run after PoisonSlots")
}

// TestPoisonSlots guards Pipeline.PoisonSlots on the simulator, with the
// hazard detector watching the fill against the runs around it, and the
// refusals: a closed pipeline, a nil one.
func TestPoisonSlots(t *testing.T) {
	for _, c := range []struct {
		schedule pipeline.Schedule
		host     pipeline.HostMode
	}{{pipeline.ScheduleEvents, pipeline.HostRegistered}, {pipeline.ScheduleInStream, pipeline.HostRegistered}, {pipeline.ScheduleEvents, pipeline.HostStaged}} {
		t.Run(c.schedule.String()+"/"+c.host.String(), func(t *testing.T) {
			dev := sim.New(3, 0)
			checkPoisonSlots(t, dev, seedKernel(nil, 100), lazySim(), c.schedule, c.host)
			assert.Empty(t, dev.Hazards(), "the fills are ordered before the runs after them, on every stream")
			assert.Equal(t, 6, dev.Count("fill"), "one fill a buffer: the input's and the output's (all slots in one each), and the 4 slots' scratch")
		})
	}
	dev := sim.New(3, 0)

	p, err := pipeline.New(dev, pipeline.Float32Config(1, 1))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	assert.ErrorIs(t, p.PoisonSlots(), pipeline.ErrClosed)
	var nilP *pipeline.Pipeline
	assert.EqualError(t, nilP.PoisonSlots(), "pipeline: PoisonSlots: nil *Pipeline")
}

// TestPoisonSlotsAfterARunThatDidNotStage: a staged run after PoisonSlots
// leaves its chunks in the staging slots, and a registered run after it
// does not touch them; PoisonSlots after the registered run still fills
// them, since a staged run after it would otherwise find the first run's
// chunks there. It filled only the slots of a last run that staged,
// before.
func TestPoisonSlotsAfterARunThatDidNotStage(t *testing.T) {
	const chunk, slots = 1024, 3
	dev := sim.New(5, 0)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = chunk, slots, 2, pipeline.HostStaged
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	defer p.Close()
	n := slots * chunk
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 2)
	job := pipeline.Job{N: n, Kernel: seedKernel(nil, 3), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	for range 2 { // a fill between, after which the next run must count
		require.NoError(t, p.PoisonSlots())
		rep, err := p.Run(context.Background(), job)
		require.NoError(t, err)
		require.Equal(t, pipeline.HostStaged, rep.Mode)
	}
	job.Host = pipeline.HostRegistered
	rep, err := p.Run(context.Background(), job)
	require.NoError(t, err)
	require.Equal(t, pipeline.HostRegistered, rep.Mode, "the second run does not stage")
	require.NoError(t, p.Unregister(driver.Bytes(in)))
	require.NoError(t, p.Unregister(driver.Bytes(out)))

	require.NoError(t, p.PoisonSlots())
	staging := pipeline.StagingSlots(p)
	require.Len(t, staging, 2*slots)
	for i, m := range staging {
		got := m.Bytes()
		for j := 0; j+4 <= len(got); j += 4 {
			if w := binary.LittleEndian.Uint32(got[j:]); w != pipeline.PoisonWord {
				t.Fatalf("staging slot %d, byte %d: %#x after a staged run and a registered one, want PoisonWord", i, j, w)
			}
		}
	}
	assert.Empty(t, dev.Hazards())
}

// TestGroupPoisonSlots guards Group.PoisonSlots: every device's slots
// are filled, hazard-free, and a device's failure is named.
func TestGroupPoisonSlots(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = 1024, 3, 2
	g, sims := simGroup(t, sim.HostOptions{}, cfg, false, false)
	n := 6 * 1024
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 1)
	_, err := g.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(nil, 5), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	require.NoError(t, g.PoisonSlots())
	for d, s := range sims {
		for _, m := range pipeline.SlotBuffers(pipeline.GroupPipeline(g, d)) {
			got := make([]float32, m.Len()/4)
			require.NoError(t, s.CopyToHostSync(driver.Bytes(got), m, 0))
			for j, v := range got {
				require.Equal(t, pipeline.PoisonWord, math.Float32bits(v), "device %d, word %d", d, j)
			}
		}
		assert.Empty(t, s.Hazards(), "device %d", d)
	}
	boom := errors.New("boom")
	sims[1].FailAt("fill", sims[1].Count("fill")+1, boom)
	err = g.PoisonSlots()
	require.ErrorIs(t, err, boom)
	var de *pipeline.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Device)
	require.NoError(t, g.Close())
	assert.ErrorIs(t, g.PoisonSlots(), pipeline.ErrClosed)
}

// TestPoisonSlotsOrdersTheNextRun guards the wait at the end of
// PoisonSlots, which alone orders its fills (on the H2D stream) before
// the next run's copies in the in-stream schedule (on the compute
// streams): a run right after it, with nothing between them, is
// hazard-free and right, also after a fill that failed partway.
func TestPoisonSlotsOrdersTheNextRun(t *testing.T) {
	for _, failAt := range []int{0, 2} {
		dev := sim.New(5, 0)
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule, cfg.Host = 4096, 6, 3, pipeline.ScheduleInStream, pipeline.HostRegistered
		p, err := pipeline.New(dev, cfg)
		require.NoError(t, err)
		n := 6 * 4096
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 3)
		job := pipeline.Job{N: n, Kernel: seedKernel(nil, 7), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
		_, err = p.Run(context.Background(), job)
		require.NoError(t, err)
		boom := errors.New("boom")
		if failAt > 0 {
			dev.FailAt("fill", dev.Count("fill")+failAt, boom)
			require.ErrorIs(t, p.PoisonSlots(), boom)
		} else {
			require.NoError(t, p.PoisonSlots())
		}
		rep, err := p.Run(context.Background(), job)
		require.NoError(t, err)
		assert.Equal(t, pipeline.ScheduleInStream, rep.Schedule)
		require.NoError(t, verifySeed(in, out, 7))
		assert.Empty(t, dev.Hazards(), "a failed fill at %d", failAt)
		require.NoError(t, p.Close())
	}
}

// noFillSim is the simulator behind an issuer that is not a
// DeviceFiller: a backend of someone else's making.
type noFillSim struct{ *sim.Sim }

func (b noFillSim) Issuer() (pipeline.Issuer, error) {
	iss, err := b.Sim.Issuer()
	return struct{ pipeline.Issuer }{iss}, err
}

// TestPoisonSlotsByCopies guards PoisonSlots on a backend whose issuer
// cannot fill: blocking copies of PoisonWord fill every slot, no fill is
// issued, and a lazy launch after it copies out NaN.
func TestPoisonSlotsByCopies(t *testing.T) {
	dev := sim.New(4, 0)
	checkPoisonSlots(t, noFillSim{dev}, seedKernel(nil, 100), lazySim(), pipeline.ScheduleAuto, pipeline.HostRegistered)
	assert.Zero(t, dev.Count("fill"))
	assert.Empty(t, dev.Hazards())
}
