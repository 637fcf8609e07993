package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// streamGroup is a group of simulated devices (slow[d]: half speed) on
// one host with jitter, in small chunks, checked for hazards when the
// test ends (and for leaks by simGroup).
func streamGroup(t *testing.T, seed uint64, cfg pipeline.Config, slow ...bool) (*pipeline.Group, []*sim.Sim) {
	t.Helper()
	g, sims := simGroup(t, sim.HostOptions{Seed: seed, Jitter: 20 * time.Microsecond}, cfg, slow...)
	t.Cleanup(func() {
		for d, dev := range sims {
			assert.Empty(t, dev.Hazards(), "device %d", d)
		}
	})
	return g, sims
}

// TestGroupRunStream streams every interesting length through a group of
// two simulated devices, one half as fast, from each kind of reader to
// each kind of writer, and checks every byte written, the report's counts
// and that both devices ran chunks of a long stream.
func TestGroupRunStream(t *testing.T) {
	const chunk = 16
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
	g, _ := streamGroup(t, 1, cfg, false, true)
	k := seedKernel(nil, streamIters)
	for _, n := range []int{0, 1, chunk, 2*chunk + 1, 40*chunk + 7} {
		in, want := streamData(n)
		for _, rk := range readerKinds {
			for _, wk := range writerKinds[:3] {
				w, got := wk.make(t)
				rep, err := g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{rk.make(t, in)}, Outputs: []io.Writer{w}, Kernel: k, Readers: 3, PieceBytes: 4096})
				require.NoError(t, err, "%s to %s, n=%d", rk.name, wk.name, n)
				sameBytes(t, want, got())
				assert.Equal(t, int64(n), rep.N)
				assert.Equal(t, []int64{int64(4 * n)}, rep.OutputBytes)
				require.Len(t, rep.Devices, 2)
				assert.Equal(t, rep.Chunks, rep.Devices[0].Chunks+rep.Devices[1].Chunks)
				if n > 20*chunk {
					assert.Positive(t, rep.Devices[0].Chunks, "%s to %s: device 0 ran chunks", rk.name, wk.name)
					assert.Positive(t, rep.Devices[1].Chunks, "%s to %s: device 1 ran chunks", rk.name, wk.name)
				}
			}
		}
	}
}

// TestGroupStepsAndRows runs the two-step kernel, with its resident
// parameters and scratch buffers, over two simulated devices through
// Group.Run, Group.RunStream and Batches on the group, and checks every
// row; each device holds a copy of the parameters of its own, uploaded by
// the first run only, and the group's reports note the steps that the
// profile has no cost for.
func TestGroupStepsAndRows(t *testing.T) {
	const chunk = 16
	g, sims := streamGroup(t, 2, rowsConfig(chunk), false, false)
	k := rowsKernel("rows", rowW, rowB)
	n := 30*chunk + 5
	in, want := rowsData(n, rowW, rowB)

	out := make([]float32, n)
	rep, err := g.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(in, rowWidth)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	assert.Equal(t, want, out)
	assert.Positive(t, rep.Upload)
	assert.Positive(t, rep.Devices[0].Chunks)
	assert.Positive(t, rep.Devices[1].Chunks)
	notes := rep.Notes
	require.Len(t, notes, 2, "one note a step, not one a device")
	live := []int{sims[0].Live()["device"], sims[1].Live()["device"]}
	// Each device: one buffer for its slots' inputs and one for their
	// outputs, the two parameters, a scratch buffer a slot.
	assert.Equal(t, []int{2 + 2 + 3, 2 + 2 + 3}, live)

	var buf bytes.Buffer
	var log progressLog
	srep, err := g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(driver.Bytes(in))}, Outputs: []io.Writer{&buf}, Kernel: k, Progress: log.record})
	require.NoError(t, err)
	sameBytes(t, driver.Bytes(want), buf.Bytes())
	assert.Zero(t, srep.Upload, "the parameters are resident on both devices")
	assert.Equal(t, notes, srep.Notes)
	assert.Equal(t, pipeline.Progress{BytesRead: int64(4 * rowWidth * n), BytesWritten: int64(4 * n), ElemsRead: int64(n), ElemsWritten: int64(n)}, log.last(t))
	assert.Positive(t, srep.Devices[0].Chunks)
	assert.Positive(t, srep.Devices[1].Chunks)

	i, off := 0, 0
	lens := []int{7, 40, 0, 100, 3}
	for out, err := range pipeline.Batches[float32, float32](context.Background(), g, k, func(yield func([]float32) bool) {
		at := 0
		for _, l := range lens {
			if !yield(in[at*rowWidth : (at+l)*rowWidth]) {
				return
			}
			at += l
		}
	}) {
		require.NoError(t, err)
		assert.Equal(t, want[off:off+lens[i]], out, "batch %d", i)
		off += lens[i]
		i++
	}
	assert.Equal(t, len(lens), i)
	assert.Equal(t, live, []int{sims[0].Live()["device"], sims[1].Live()["device"]}, "nothing more allocated")
}

// TestGroupRunStreamDeviceFault: a fault on one device stops the stream
// with a *DeviceError naming it; the output holds an exact prefix, and
// the group streams the next job.
func TestGroupRunStreamDeviceFault(t *testing.T) {
	const chunk = 16
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
	g, sims := streamGroup(t, 3, cfg, false, false)
	boom := errors.New("injected fault")
	sims[1].FailAt("launch", 3, boom)
	in, want := streamData(60 * chunk)
	var out bytes.Buffer
	rep, err := g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{&out}, Kernel: seedKernel(nil, streamIters)})
	require.ErrorIs(t, err, boom)
	var de *pipeline.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Device)
	var se *pipeline.StageError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, pipeline.StageCompute, se.Stage)
	require.NotNil(t, rep)
	assert.Equal(t, int64(out.Len()), rep.OutputBytes[0])
	sameBytes(t, want[:out.Len()], out.Bytes())
	assert.Less(t, out.Len(), len(want))

	out.Reset()
	_, err = g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{&out}, Kernel: seedKernel(nil, streamIters)})
	require.NoError(t, err, "the group streams the next job")
	sameBytes(t, want, out.Bytes())
}

// TestGroupRunStreamCancel: cancelling a group's stream stops every device
// and returns the context's error, with an exact prefix written.
func TestGroupRunStreamCancel(t *testing.T) {
	const chunk = 16
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
	g, _ := streamGroup(t, 4, cfg, false, false)
	in, want := streamData(400 * chunk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	cr := &countingReader{r: plainReader{bytes.NewReader(in)}, d: 200 * time.Microsecond}
	go func() {
		for cr.count() < 20 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	rep, err := g.RunStream(ctx, pipeline.StreamJob{Inputs: []io.Reader{cr}, Outputs: []io.Writer{&out}, Kernel: seedKernel(nil, streamIters)})
	require.ErrorIs(t, err, context.Canceled)
	var de *pipeline.DeviceError
	assert.False(t, errors.As(err, &de), "a cancellation is nobody's fault: %v", err)
	sameBytes(t, want[:out.Len()], out.Bytes())
	assert.Equal(t, int64(out.Len()), rep.OutputBytes[0])
}

// TestGroupRunStreamValidation: a group's stream job is checked as a
// pipeline's, and a closed group refuses it.
func TestGroupRunStreamValidation(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 16
	g, _ := streamGroup(t, 5, cfg, false, false)
	_, err := g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(nil)}, Outputs: []io.Writer{io.Discard}})
	assert.EqualError(t, err, "pipeline: stream job has no Kernel")
	require.NoError(t, g.Close())
	_, err = g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(nil)}, Outputs: []io.Writer{io.Discard}, Kernel: seedKernel(nil, 1)})
	assert.ErrorIs(t, err, pipeline.ErrClosed)
}

// TestGroupStreamHazards drops the write-after-read waits in a group's
// stream: the detector must report the hazards between the devices'
// copies and the host's reads and writes of the shared ring of slots.
func TestGroupStreamHazards(t *testing.T) {
	host := sim.NewHost(sim.HostOptions{Seed: 6, Jitter: 50 * time.Microsecond})
	sims := []*sim.Sim{host.NewDevice(sim.BuiltinProfile()), host.NewDevice(sim.BuiltinProfile())}
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = 8, 2, 1
	g, err := pipeline.NewGroup([]pipeline.Backend{sims[0], sims[1]}, cfg)
	require.NoError(t, err)
	for d := range 2 {
		pipeline.SetSkipWAR(pipeline.GroupPipeline(g, d), true)
	}
	in, _ := streamData(8 * 60)
	_, err = g.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)},
		Outputs: []io.Writer{slowWriter{io.Discard, 100 * time.Microsecond}}, Kernel: seedKernel(nil, streamIters)})
	require.NoError(t, err)
	require.NoError(t, g.Close())
	hz := append(sims[0].Hazards(), sims[1].Hazards()...)
	assert.NotEmpty(t, hz, fmt.Sprint("hazards: ", len(hz)))
}
