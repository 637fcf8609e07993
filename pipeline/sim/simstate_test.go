package sim_test

import (
	"context"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimDependencyLatency guards issue 11's dep_ns: a stream waiting for
// another stream's event goes on DepNs after the work before the event
// ends, and a wait for an event of its own stream costs nothing more.
func TestSimDependencyLatency(t *testing.T) {
	for _, dep := range []time.Duration{0, 4 * time.Microsecond, 9 * time.Microsecond} {
		prof := sim.BuiltinProfile()
		prof.DepNs, prof.WaitNs = float64(dep), 0
		sdev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(prof)
		a, err := sdev.NewStream()
		require.NoError(t, err)
		b, err := sdev.NewStream()
		require.NoError(t, err)
		ev, err := sdev.NewEvent(false)
		require.NoError(t, err)
		var marks [3]pipeline.Event
		for i := range marks {
			marks[i], err = sdev.NewEvent(true)
			require.NoError(t, err)
		}
		dev, err := sdev.AllocDevice(1 << 20)
		require.NoError(t, err)
		host, err := sdev.AllocPinned(1 << 20)
		require.NoError(t, err)
		iss, err := sdev.Issuer()
		require.NoError(t, err)
		require.NoError(t, iss.CopyToDevice(a, dev, 0, host, 0, 1<<20))
		require.NoError(t, iss.Record(ev, a))
		require.NoError(t, iss.Record(marks[0], a))
		require.NoError(t, iss.Wait(b, ev))
		require.NoError(t, iss.Record(marks[1], b))
		require.NoError(t, iss.Wait(a, ev))
		require.NoError(t, iss.Record(marks[2], a))
		iss.Release()
		require.NoError(t, b.Synchronize())
		require.NoError(t, a.Synchronize())
		other, err := marks[0].Elapsed(marks[1])
		require.NoError(t, err)
		same, err := marks[0].Elapsed(marks[2])
		require.NoError(t, err)
		assert.Equal(t, dep, other, "another stream's wait")
		assert.Equal(t, time.Duration(0), same, "the same stream's wait")
	}
}

// TestSimRegisteredCopies guards issue 11's copies of registered memory:
// the simulator prices them by the profile's h2d_registered and
// d2h_registered when it has them, and as pinned copies when not.
func TestSimRegisteredCopies(t *testing.T) {
	const n = 1 << 20
	stages := func(prof *sim.Profile) pipeline.StageTimes {
		sdev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(prof)
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Host = n/4, pipeline.HostRegistered
		p, err := pipeline.New(sdev, cfg)
		require.NoError(t, err)
		defer p.Close()
		job := pipeline.Job{N: n, Kernel: seedKernel(nil, 0), Inputs: []pipeline.Buffer{{Data: make([]byte, 4*n)}}, Outputs: []pipeline.Buffer{{Data: make([]byte, 4*n)}}}
		st, err := p.StageTimes(context.Background(), job)
		require.NoError(t, err)
		return st
	}
	// The base is a profile without registered copy costs (the built-in
	// one has them since 13:43 UTC), so that its registered copies run as
	// pinned ones.
	prof := sim.BuiltinProfile()
	prof.H2D = sim.CopyCost{GBps: 50}
	prof.D2H = sim.CopyCost{GBps: 50}
	prof.H2DRegistered, prof.D2HRegistered = sim.CopyCost{}, sim.CopyCost{}
	base := stages(prof)
	prof.H2DRegistered = sim.CopyCost{GBps: 25}
	prof.D2HRegistered = sim.CopyCost{FixedNs: 5000, GBps: 50}
	slow := stages(prof)
	// 4 MiB in 4 chunks: at 50 GB/s 83.9 µs, at 25 GB/s 167.8 µs; a fixed
	// cost of 5 µs per chunk adds 20 µs.
	assert.InDelta(t, float64(base.H2D)+83886, float64(slow.H2D), 50, "h2d: %v then %v", base.H2D, slow.H2D)
	assert.InDelta(t, float64(base.D2H)+4*5000, float64(slow.D2H), 50, "d2h: %v then %v", base.D2H, slow.D2H)
}
