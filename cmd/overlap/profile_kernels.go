package main

import (
	"fmt"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// kernelStreams is how many streams measureKernelSerial spreads kernels
// over: the most that --validate uses.
const kernelStreams = 4

// kernelsOnStreams times on the device count seed kernels (100 iterations)
// of n float32s, launched round robin on kernelStreams streams, each
// stream with buffers of its own. A blocker holds the streams while the
// host issues them, so that the device, not the host, sets their pace.
func kernelsOnStreams(b pipeline.Backend, ks kernelSet, n, count int) (time.Duration, error) {
	r, err := newHeldRig(b)
	if err != nil {
		return 0, err
	}
	defer r.close()
	iss, bl := r.iss, r.bl
	var sts [kernelStreams]pipeline.Stream
	var ends [kernelStreams]pipeline.Event
	var chunks [kernelStreams]pipeline.Chunk
	for i := range sts {
		if sts[i], err = b.NewStream(); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, sts[i].Close)
		if i > 0 { // stream 0 waits for the others' ends
			if ends[i], err = b.NewEvent(false); err != nil {
				return 0, err
			}
			r.closers = append(r.closers, ends[i].Close)
		}
		var bufs [2]pipeline.DeviceMem
		for j := range bufs {
			if bufs[j], err = b.AllocDevice(n * 4); err != nil {
				return 0, err
			}
			r.closers = append(r.closers, bufs[j].Close)
		}
		chunks[i] = pipeline.Chunk{N: n, Inputs: []driver.DevicePtr{bufs[0].Ptr()}, InBytes: []int{n * 4}, Outputs: []driver.DevicePtr{bufs[1].Ptr()}, OutBytes: []int{n * 4}}
	}
	var marks [2]pipeline.Event
	for i := range marks {
		if marks[i], err = b.NewEvent(true); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, marks[i].Close)
	}
	k := ks.kernel(kernels.Seed, 100)
	return bl.timeHeld(sts[:], sts[0], marks, func() error {
		for i := 0; i < count; i++ {
			if err := iss.Launch(sts[i%kernelStreams], k, chunks[i%kernelStreams]); err != nil {
				return err
			}
		}
		for i := 1; i < kernelStreams; i++ {
			if err := iss.Record(ends[i], sts[i]); err != nil {
				return err
			}
			if err := iss.Wait(sts[0], ends[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// measureKernelSerial measures Profile.KernelFixedSerial: kernelsOnStreams
// on b, against the same on simulators of p with the whole fixed cost
// overlapping (0) and none of it (1), interpolated and held to 0..1.
//
// On the H200 the validation's rows of 64K-element chunks on four streams
// ran 15–19% slower than the simulator predicted with the fixed costs
// overlapping, at about one kernel's whole time per chunk
// (bench/RESULTS.md).
func measureKernelSerial(b pipeline.Backend, ks kernelSet, p *pipeline.Profile, n int) error {
	const count = 200
	measured, err := kernelsOnStreams(b, ks, n, count)
	if err != nil {
		return fmt.Errorf("timing kernels on %d streams: %w", kernelStreams, err)
	}
	var at [2]time.Duration
	for i := range at {
		q := p.Clone()
		q.KernelFixedSerial = float64(i)
		if at[i], err = kernelsOnStreams(pipeline.NewSimHost(pipeline.SimHostOptions{TimingOnly: true}).NewDevice(q), ks, n, count); err != nil {
			return err
		}
	}
	p.KernelFixedSerial = 0
	if at[1] > at[0] {
		p.KernelFixedSerial = min(1, max(0, float64(measured-at[0])/float64(at[1]-at[0])))
	}
	p.Notes["kernel_fixed_serial"] = fmt.Sprintf("%d seed kernels (100 iterations) of %d float32s, round robin on %d streams, took %v on the device; the rest of this profile predicts %v with the whole fixed cost overlapping other kernels and %v with none of it", count, n, kernelStreams, measured, at[0], at[1])
	return nil
}
