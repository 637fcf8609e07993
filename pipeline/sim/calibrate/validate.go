package calibrate

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// Config is one configuration that [Validate] measures and predicts: a
// job of N elements of Kernel ("seed" at 100 iterations, or "saxpy") from
// Host memory, in chunks of Chunk elements, with Slots slots and Streams
// compute streams.
type Config struct {
	Kernel                   string
	Host                     pipeline.HostMode
	Chunk, Slots, Streams, N int
}

// String writes c as one aligned line: "seed  pinned      64K chunks 2
// slots 1 streams".
func (c Config) String() string {
	return fmt.Sprintf("%-5s %-10s %5s chunks %d slots %d streams", c.Kernel, c.Host, elemsText(c.Chunk), c.Slots, c.Streams)
}

// Configs are Validate's 26 configurations for a seed job of n elements:
// chunk sizes from n/2048 (64K at 128M) to n/4, 2 to 6 slots, 1 to 4
// compute streams, every host mode, and saxpy at a quarter of n.
func Configs(n int) []Config {
	seed := func(host pipeline.HostMode, chunk, slots, streams int) Config {
		return Config{"seed", host, max(1, n/(128<<20/chunk)), slots, streams, n}
	}
	sx := n / 4
	saxpy := func(host pipeline.HostMode, chunk, slots, streams int) Config {
		return Config{"saxpy", host, max(1, sx/(32<<20/chunk)), slots, streams, sx}
	}
	const K, M = 1 << 10, 1 << 20
	P, R, S := pipeline.HostPinned, pipeline.HostRegistered, pipeline.HostStaged
	return []Config{
		seed(P, 64*K, 2, 1), seed(P, 64*K, 6, 4), seed(P, 256*K, 2, 1), seed(P, 256*K, 4, 4),
		seed(P, 1*M, 3, 1), seed(P, 1*M, 6, 4), seed(P, 4*M, 2, 1), seed(P, 4*M, 4, 2),
		seed(P, 16*M, 2, 1), seed(P, 32*M, 2, 1), seed(P, 32*M, 6, 4),
		seed(R, 64*K, 6, 4), seed(R, 1*M, 2, 2), seed(R, 1*M, 6, 4), seed(R, 4*M, 3, 3), seed(R, 32*M, 2, 1),
		seed(S, 64*K, 6, 4), seed(S, 1*M, 4, 2), seed(S, 1*M, 6, 4), seed(S, 4*M, 2, 1), seed(S, 16*M, 3, 2),
		saxpy(P, 64*K, 6, 4), saxpy(P, 1*M, 6, 4), saxpy(P, 16*M, 2, 1), saxpy(R, 1*M, 3, 1), saxpy(S, 1*M, 4, 2),
	}
}

// Row is one configuration's result: its median time over the rounds on
// the device, and the simulator's prediction of it from the profile.
type Row struct {
	Config              Config
	Measured, Predicted time.Duration
	// Err is the prediction's relative error, (Predicted - Measured) /
	// Measured: positive where the simulator is slower.
	Err float64
}

// Validation is what [Validate] found.
type Validation struct {
	// Rows are Configs(Options.Elems)' results, in that order.
	Rows []Row
	// Median is the median of the rows' |Err|.
	Median float64
	// Worst is the row of the largest |Err| (the first of them).
	Worst Row
}

// Validate runs each of Configs(o.Elems) on d in o.Rounds rounds, each
// timing every configuration once after an untimed run of its own,
// verifies every element of each one's last output, and predicts each on
// a timing-only simulator of prof.
//
// Each round times prof's host figures again too (its issue loops and,
// if it has them, its staging rates in a staged run): the host's speed
// drifts within a process, and each figure and each configuration take
// their medians over the same rounds. Validate sets prof's host figures
// to those medians before it predicts, so that prof, which must come
// from [Measure] with the same o.Elems, is the better for being written
// again afterwards.
func Validate(ctx context.Context, d Device, prof *sim.Profile, o Options) (*Validation, error) {
	o, err := o.withDefaults("Validate")
	if err != nil {
		return nil, err
	}
	if prof == nil {
		return nil, errNoProfile
	}
	ks, closeKernels, err := d.open("Validate")
	if err != nil {
		return nil, err
	}
	defer closeKernels()
	v, err := validate(ctx, d, ks, prof, o)
	if err != nil {
		return nil, fmt.Errorf("calibrate: Validate: %w", err)
	}
	return v, nil
}

func validate(ctx context.Context, d Device, ks kernelSet, prof *sim.Profile, o Options) (*Validation, error) {
	cfgs := Configs(o.Elems)
	// The profile's host figures, which each round times again
	// (hostSamples, below), checked before any memory is allocated.
	samples, err := newHostSamples(prof)
	if err != nil {
		return nil, err
	}
	// One workload per kernel, host mode and size, reused across chunkings.
	type wkey struct {
		kernel string
		host   pipeline.HostMode
		n      int
	}
	loads := map[wkey]*workload{}
	defer func() {
		for _, wl := range loads {
			wl.close()
		}
	}()
	wls := make([]*workload, len(cfgs))
	for i, c := range cfgs {
		k := wkey{c.Kernel, c.Host, c.N}
		if loads[k] == nil {
			wl, err := newWorkload(d.Backend, ks, c)
			if err != nil {
				return nil, err
			}
			loads[k] = wl
		}
		wls[i] = loads[k]
	}
	// The configurations are measured in rounds, each timing every one of
	// them once, and each takes the median of its rounds. The host's speed
	// on the H200 host drifts within a process: two rows of the same
	// host-bound work measured 20.3 and 29.9 ms in one validation when
	// each was the best of runs back to back
	// (pipeline/testdata/h200-run4-validation.md). In rounds, a slow spell
	// costs every row one run, not one row all. Each round times the
	// profile's host figures again too (hostSamples), which take their
	// medians over the same rounds: a best of many short timings is faster
	// than a best of a few long ones, so the best on both sides is not the
	// same speed, and the median is.
	times := make([][]time.Duration, len(cfgs))
	var stageIn, stageOut []float32
	if len(prof.StagingInRun) > 0 {
		stageIn, stageOut = stagingMemory(o.Elems / 2)
	}
	for round := 0; round < o.Rounds; round++ {
		last := round == o.Rounds-1
		o.say("round %d of %d: the host's figures", round+1, o.Rounds)
		if err := samples.round(ctx, d.Backend, ks, stagingKernel(d, ks), prof, stageIn, stageOut); err != nil {
			return nil, fmt.Errorf("timing the host again: %w", err)
		}
		for i, c := range cfgs {
			o.say("round %d of %d: %s", round+1, o.Rounds, c)
			wl := wls[i]
			if last {
				clear(wl.out)
			}
			took, err := timedRun(ctx, d.Backend, wl, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			times[i] = append(times[i], took)
			if last && wl.verify != nil {
				// This run wrote the output last: every element checked.
				if err := wl.verify(); err != nil {
					return nil, fmt.Errorf("%s: %w", c, err)
				}
			}
		}
	}
	samples.apply(prof)
	v := &Validation{}
	for i, c := range cfgs {
		o.say("predicting %s", c)
		predicted, err := predict(ctx, prof, c)
		if err != nil {
			return nil, fmt.Errorf("predicting %s: %w", c, err)
		}
		r := Row{Config: c, Measured: median(times[i]), Predicted: predicted}
		r.Err = float64(r.Predicted-r.Measured) / float64(r.Measured)
		v.Rows = append(v.Rows, r)
	}
	errs := make([]float64, len(v.Rows))
	v.Worst = v.Rows[0]
	for i, r := range v.Rows {
		errs[i] = math.Abs(r.Err)
		if errs[i] > math.Abs(v.Worst.Err) {
			v.Worst = r
		}
	}
	v.Median = median(errs)
	return v, nil
}

// workload is one configuration's job and its memory: inputs with the
// standard pattern, an output, and (on a real run) a check of every
// element of the output against the kernel's CPU reference.
type workload struct {
	cfg     pipeline.Config
	job     pipeline.Job
	out     []float32
	verify  func() error
	closers []func() error
}

func (w *workload) close() {
	for _, c := range w.closers {
		c()
	}
}

// floats returns n float32s for w of c's host mode: pinned memory from b
// for HostPinned, else Go memory.
func (w *workload) floats(b pipeline.Backend, c Config) ([]float32, pipeline.Buffer, error) {
	if c.Host != pipeline.HostPinned {
		s := make([]float32, c.N)
		return s, pipeline.Slice(s), nil
	}
	h, err := b.AllocPinned(c.N * 4)
	if err != nil {
		return nil, pipeline.Buffer{}, err
	}
	w.closers = append(w.closers, h.Close)
	return driver.View[float32](h.Bytes())[:c.N], pipeline.Pinned(h), nil
}

// validationKernel is c's kernel row and scalars: the seed at 100
// iterations, or saxpy at its default factor.
func validationKernel(c Config) (*kernels.Kernel, []float64) {
	if c.Kernel == "saxpy" {
		return kernels.Saxpy, kernels.Saxpy.Defaults()
	}
	return kernels.Seed, []float64{100}
}

// newWorkload makes c's job on b, its inputs filled with the standard
// pattern and its output touched, so that page faults are not timed as
// copies.
func newWorkload(b pipeline.Backend, ks kernelSet, c Config) (*workload, error) {
	k, scalars := validationKernel(c)
	w := &workload{cfg: pipeline.Float32Config(k.Inputs, k.Outputs)}
	w.job = pipeline.Job{N: c.N, Kernel: ks.kernel(k, scalars...)}
	var ins [][]float32
	for i := 0; i < k.Inputs+1; i++ {
		s, buf, err := w.floats(b, c)
		if err != nil {
			w.close()
			return nil, err
		}
		if i < k.Inputs {
			kernels.FillPattern(s, i*7919)
			ins = append(ins, s)
			w.job.Inputs = append(w.job.Inputs, buf)
			continue
		}
		clear(s)
		w.out = s
		w.job.Outputs = []pipeline.Buffer{buf}
	}
	w.verify = func() error { return k.Verify(ins, w.out, scalars...) }
	return w, nil
}

// timedRun runs c on b on a pipeline of its own: once untimed (which
// registers a registered job's memory and allocates a staged one's
// slots, as a caller's first run does), then once timed.
func timedRun(ctx context.Context, b pipeline.Backend, wl *workload, c Config) (time.Duration, error) {
	cfg := wl.cfg
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = c.Chunk, c.Slots, c.Streams, c.Host
	p, err := pipeline.New(b, cfg)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if _, err := p.Run(ctx, wl.job); err != nil {
		return 0, err
	}
	rep, err := p.Run(ctx, wl.job)
	if err != nil {
		return 0, err
	}
	return rep.Elapsed, nil
}

// predict runs c on a timing-only simulator of prof, as timedRun does:
// the simulator's clock does not drift, so one round is all of them.
func predict(ctx context.Context, prof *sim.Profile, c Config) (time.Duration, error) {
	sim := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(prof)
	k, scalars := validationKernel(c)
	wl := &workload{cfg: pipeline.Float32Config(k.Inputs, k.Outputs), job: pipeline.Job{N: c.N, Kernel: kernelSet{}.kernel(k, scalars...)}}
	defer wl.close()
	for i := 0; i < k.Inputs+1; i++ {
		var buf pipeline.Buffer
		if c.Host == pipeline.HostPinned {
			h, err := sim.AllocPinned(c.N * 4)
			if err != nil {
				return 0, err
			}
			wl.closers = append(wl.closers, h.Close)
			buf = pipeline.Pinned(h)
		} else {
			buf = pipeline.Buffer{Data: make([]byte, c.N*4)}
		}
		if i < k.Inputs {
			wl.job.Inputs = append(wl.job.Inputs, buf)
		} else {
			wl.job.Outputs = []pipeline.Buffer{buf}
		}
	}
	return timedRun(ctx, sim, wl, c)
}
