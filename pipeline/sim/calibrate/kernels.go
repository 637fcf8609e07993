package calibrate

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// kernelStreams is how many streams measureKernelSerial spreads kernels
// over: the most that Validate uses.
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
func measureKernelSerial(b pipeline.Backend, ks kernelSet, p *sim.Profile, n int) error {
	const count = 200
	measured, err := kernelsOnStreams(b, ks, n, count)
	if err != nil {
		return fmt.Errorf("timing kernels on %d streams: %w", kernelStreams, err)
	}
	var at [2]time.Duration
	for i := range at {
		q := p.Clone()
		q.KernelFixedSerial = float64(i)
		if at[i], err = kernelsOnStreams(sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q), ks, n, count); err != nil {
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

// The GEMM entries' costs (Profile.Kernels "gemm_f32" and "gemm_tf32"),
// which a model's layers are charged: FixedNs per launch, and NsPerFlop
// per FLOP of whole 128-wide output tiles (model.StepFlops), fitted to
// launches timed on the device at several shapes.

// gemmShape is one GEMM launch: M rows, K inputs, N outputs.
type gemmShape struct{ M, K, N int }

// gemmShapes are the launches measureGemm times on a GPU: one small
// enough that its fixed cost shows, and the layers of the MLPs that
// bench/reference/infer_vs_torch.sh runs, at the chunk sizes it tries.
var gemmShapes = []gemmShape{{128, 256, 128}, {16384, 768, 256}, {65536, 768, 256}, {65536, 256, 16}, {16384, 768, 3072}, {65536, 768, 3072}, {65536, 3072, 768}}

// gemmSimShapes are the launches on the simulator, which computes each
// on the CPU.
var gemmSimShapes = []gemmShape{{128, 16, 128}, {1024, 64, 256}, {2048, 128, 16}}

// gemmCounts are the launch counts whose difference gives one launch's
// time, as the copies' and the seed kernel's are measured.
var gemmCounts = [2]int{4, 16}

// gemmLaunches times count launches of k on c back to back on one stream
// behind a blocker, on the device.
func gemmLaunches(b pipeline.Backend, k *pipeline.Kernel, c pipeline.Chunk, count int) (time.Duration, error) {
	r, err := newHeldRig(b)
	if err != nil {
		return 0, err
	}
	defer r.close()
	st, err := b.NewStream()
	if err != nil {
		return 0, err
	}
	r.closers = append(r.closers, st.Close)
	var marks [2]pipeline.Event
	for i := range marks {
		if marks[i], err = b.NewEvent(true); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, marks[i].Close)
	}
	return r.bl.timeHeld([]pipeline.Stream{st}, st, marks, func() error {
		for range count {
			if err := r.iss.Launch(st, k, c); err != nil {
				return err
			}
		}
		return nil
	})
}

// timeGemm returns one launch's device time of the GEMM entry of prec
// at shape s: (the time of gemmCounts[1] launches − of gemmCounts[0]) /
// their difference, each the best of stageReps.
func timeGemm(b pipeline.Backend, g *kernels.GemmModules, prec model.Precision, s gemmShape) (time.Duration, error) {
	m, err := model.Random([]int{s.K, s.N}, model.ReLU, 1)
	if err != nil {
		return 0, err
	}
	k, err := m.Kernel(model.KernelOptions{Precision: prec, Gemm: g})
	if err != nil {
		return 0, err
	}
	if err := b.Prepare(k); err != nil {
		return 0, err
	}
	var mems []pipeline.DeviceMem
	defer func() {
		for _, d := range mems {
			d.Close()
		}
	}()
	alloc := func(n int, data []byte) (pipeline.DeviceMem, error) {
		d, err := b.AllocDevice(n)
		if err != nil {
			return nil, err
		}
		mems = append(mems, d)
		if data == nil {
			data = make([]byte, min(n, 64<<20)) // zeros, not whatever the memory held
		}
		for off := 0; off < n; off += len(data) {
			if err := b.CopyToDeviceSync(d, off, data[:min(len(data), n-off)]); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	x, err := alloc(s.M*s.K*4, nil)
	if err != nil {
		return 0, err
	}
	y, err := alloc(s.M*s.N*4, nil)
	if err != nil {
		return 0, err
	}
	var params []driver.DevicePtr
	for _, pr := range k.Params {
		d, err := alloc(len(pr.Data), pr.Data)
		if err != nil {
			return 0, err
		}
		params = append(params, d.Ptr())
	}
	c := pipeline.Chunk{N: s.M, Inputs: []driver.DevicePtr{x.Ptr()}, InBytes: []int{x.Len()}, Outputs: []driver.DevicePtr{y.Ptr()}, OutBytes: []int{y.Len()}, Params: params}
	var t [2]time.Duration
	for i, count := range gemmCounts {
		for rep := 0; rep < stageReps; rep++ {
			d, err := gemmLaunches(b, k, c, count)
			if err != nil {
				return 0, err
			}
			if rep == 0 || d < t[i] {
				t[i] = d
			}
		}
	}
	return max(0, (t[1]-t[0])/time.Duration(gemmCounts[1]-gemmCounts[0])), nil
}

// fitGemm fits t = fixed + flops·nsPerFlop to the points by least squares
// of the relative error, so that the small launches, which show the fixed
// cost, count as much as the large ones, which show the rate.
func fitGemm(flops, ns []float64) (fixed, nsPerFlop float64) {
	var sw, sx, sy, sxx, sxy float64
	for i := range flops {
		w := 1 / (ns[i] * ns[i])
		sw += w
		sx += w * flops[i]
		sy += w * ns[i]
		sxx += w * flops[i] * flops[i]
		sxy += w * flops[i] * ns[i]
	}
	det := sw*sxx - sx*sx
	if det == 0 {
		return 0, 0
	}
	nsPerFlop = (sw*sxy - sx*sy) / det
	fixed = (sy - nsPerFlop*sx) / sw
	if fixed < 0 { // the rate alone, through the origin
		fixed, nsPerFlop = 0, sxy/sxx
	}
	return fixed, max(0, nsPerFlop)
}

// measureGemm measures Profile.Kernels' GEMM entries on b at shapes:
// each entry's launches timed alone (timeGemm), then fitted (fitGemm).
// g loads the GEMM module on a GPU's context; the simulator needs none.
func measureGemm(b pipeline.Backend, g *kernels.GemmModules, p *sim.Profile, shapes []gemmShape) error {
	for _, prec := range []model.Precision{model.FP32, model.TF32} {
		name := kernels.GemmF32
		if prec == model.TF32 {
			name = kernels.GemmTF32
		}
		var flops, ns []float64
		var parts []string
		for _, s := range shapes {
			d, err := timeGemm(b, g, prec, s)
			if err != nil {
				return fmt.Errorf("timing %s at %d×%d→%d: %w", name, s.M, s.K, s.N, err)
			}
			flops = append(flops, float64(s.M)*model.StepFlops(s.K, s.N))
			ns = append(ns, max(1, float64(d)))
			parts = append(parts, fmt.Sprintf("%d×%d→%d %v (%.1f TFLOP/s)", s.M, s.K, s.N, d, 2*float64(s.M)*float64(s.K)*float64(s.N)/max(1, float64(d))/1e3))
		}
		fixed, per := fitGemm(flops, ns)
		if per <= 0 {
			return fmt.Errorf("timing %s: its launches did not take longer with more arithmetic (%s)", name, strings.Join(parts, ", "))
		}
		p.Kernels[name] = sim.KernelCost{FixedNs: fixed, NsPerFlop: per}
		var worst float64
		for i := range flops {
			worst = max(worst, math.Abs(fixed+per*flops[i]-ns[i])/ns[i])
		}
		p.Notes[name] = fmt.Sprintf("launches alone on one stream, per launch as for copies (%d launches less %d, each the best of %d), at M×K→N: %s; fitted fixed_ns + ns_per_flop per FLOP of whole 128-wide output tiles (model.StepFlops), least squares of the relative error: %.0f ns + %.4g TFLOP/s, within %.1f%% of every shape",
			gemmCounts[1], gemmCounts[0], stageReps, strings.Join(parts, ", "), fixed, 1e-3/per, 100*worst)
	}
	return nil
}

// measureModelCosts measures what a model's inference needs of the
// profile beyond the table's kernels: the GEMM entries' costs, and the
// device's memory (which the simulator refuses weights beyond). Without
// gemm.ptx in the build, the GEMM entries are left out, and a note says
// so.
func measureModelCosts(d Device, p *sim.Profile) error {
	if d.Context == nil {
		p.DeviceMemoryBytes = simulatedProfile(d.Backend).DeviceMemoryBytes
		return measureGemm(d.Backend, nil, p, gemmSimShapes)
	}
	total, err := d.Context.Device().TotalMemory()
	if err != nil {
		return err
	}
	p.DeviceMemoryBytes = int64(total)
	p.Notes["device_memory"] = "the device's memory as the driver reports it (cuDeviceTotalMem)"
	if kernels.GemmPTX() == nil {
		p.Notes["gemm"] = "not measured: this build has no gemm.ptx (make ptx generates it)"
		return nil
	}
	g := new(kernels.GemmModules)
	defer g.Close()
	if _, err := g.Functions(d.Context); err != nil {
		return err
	}
	return measureGemm(d.Backend, g, p, gemmShapes)
}
