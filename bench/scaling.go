package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The multi-device scaling table: the seed job over the first 1 to k
// devices, for each size and host mode, with each group's stage bound
// measured beside it.

// ScalingRow is one line of the scaling table: a job size and host mode
// on the first Devices devices.
type ScalingRow struct {
	Elems int `json:"elems"`
	// ChunkElems is the chunk the row ran in (ScalingOptions.ChunkFor).
	ChunkElems int     `json:"chunk_elems"`
	Host       string  `json:"host"`
	Devices    int     `json:"devices"`
	Ms         float64 `json:"ms"`
	GBps       float64 `json:"gb_per_s"`
	BoundMs    float64 `json:"bound_ms"`
	Slowest    string  `json:"slowest"`
	// Efficiency is the group's stage bound over its time.
	Efficiency float64 `json:"efficiency"`
	// Speedup is the one-device time of the same size and host mode over
	// this one.
	Speedup float64 `json:"speedup,omitempty"`
	// Chunks are the chunks each device took in the best run.
	Chunks []int   `json:"chunks"`
	CppMs  float64 `json:"cpp_ms,omitempty"`
	Ratio  float64 `json:"go_over_cpp,omitempty"`
}

// ScalingHosts are the host modes of the scaling table: pinned buffers,
// Go slices registered in place, and plain Go slices in auto mode (staged
// the first run, registered from the second). Each call returns a fresh
// slice.
func ScalingHosts() []pipeline.HostMode {
	return []pipeline.HostMode{pipeline.HostPinned, pipeline.HostRegistered, pipeline.HostAuto}
}

// ScalingOptions say what [Scaling] runs. The zero value runs nothing
// (no Sizes); its other zero fields take the pipeline's defaults.
type ScalingOptions struct {
	// Sizes are the job sizes in elements.
	Sizes []int
	// Iters is the seed kernel's iterations.
	Iters int
	// ChunkElems is each chunk's elements, at most the job's (0: for each
	// size, pipeline.DefaultChunkFor, the chunk that overlap run takes for
	// a job of that size: one chunk of 1M for a 1M job would leave every
	// device but one idle); ComputeStreams the kernels' streams (0:
	// pipeline.DefaultComputeStreams) and Slots the buffer slots (0:
	// ComputeStreams+2), the same for every row, so that a size's rows
	// differ only in their device count.
	ChunkElems, Slots, ComputeStreams int
	// Repeat is the runs of each configuration, the fastest kept (0: 1).
	Repeat int
	// Modules holds the seed kernel loaded on every GPU of the backends;
	// nil on the simulator.
	Modules *kernels.Modules
	// Reference, when not nil, runs the CUDA C++ multi-GPU reference
	// (static split, a host thread per GPU) on GPUs 0 to k-1 for each
	// size, beside the pinned rows; the backends must be those GPUs.
	Reference *Reference
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// WithDefaults is o with its zero fields' defaults filled in, as
// [Scaling] runs it.
func (o ScalingOptions) WithDefaults() ScalingOptions {
	if o.ComputeStreams == 0 {
		o.ComputeStreams = pipeline.DefaultComputeStreams
	}
	if o.Slots == 0 {
		o.Slots = o.ComputeStreams + 2
	}
	o.Repeat = max(1, o.Repeat)
	return o
}

// ChunkFor is the chunk that a job of n elements runs in: ChunkElems,
// at most n, or where it is 0, pipeline.DefaultChunkFor(n).
func (o ScalingOptions) ChunkFor(n int) int {
	if o.ChunkElems == 0 {
		return pipeline.DefaultChunkFor(n)
	}
	return min(o.ChunkElems, n)
}

// Scaling measures the seed job over the first 1 to len(backends)
// devices for each size and host mode (ScalingHosts), each group's stage
// bound measured beside its best run, and every element of each
// configuration's last run verified. The rows come by size, host mode and
// device count.
func Scaling(ctx context.Context, backends []pipeline.Backend, o ScalingOptions) ([]ScalingRow, error) {
	o = o.WithDefaults()
	if len(backends) == 0 {
		return nil, &Error{Op: "Scaling", Err: errors.New("no backend")}
	}
	if err := CheckScaling(o); err != nil {
		return nil, &Error{Op: "Scaling", Err: err}
	}
	for _, b := range backends {
		if b == nil {
			return nil, &Error{Op: "Scaling", Err: errors.New("a nil backend")}
		}
	}
	k := len(backends)
	// The C++ reference drives GPUs 0 to k-1.
	cpp := map[[2]int]float64{}
	if o.Reference != nil {
		for _, n := range o.Sizes {
			for dev := 1; dev <= k; dev++ {
				say(o.Progress, "C++ reference: %s elements on %d GPU(s)…", Elems(n), dev)
				m, err := o.Reference.RunMulti(ctx, n, o.Iters, o.Slots, o.Repeat, o.ChunkFor(n), o.ComputeStreams, dev)
				if err != nil {
					return nil, &Error{Op: "Scaling", Err: err}
				}
				if m.Mismatches != 0 {
					return nil, &Error{Op: "Scaling", Err: fmt.Errorf("the C++ multi-GPU reference gave %d wrong elements", m.Mismatches)}
				}
				cpp[[2]int{n, dev}] = m.BestMs
			}
		}
	}
	kernel, err := kernels.Seed.Pipeline(o.Modules, float64(o.Iters))
	if err != nil {
		return nil, &Error{Op: "Scaling", Err: err}
	}
	var rows []ScalingRow
	for _, n := range o.Sizes {
		for _, host := range ScalingHosts() {
			w, err := newSeedData(backends[0], kernel, n, host == pipeline.HostPinned)
			if err != nil {
				return nil, &Error{Op: "Scaling", Err: err}
			}
			var one float64
			for dev := 1; dev <= k; dev++ {
				say(o.Progress, "%s elements, %s, %d device(s)…", Elems(n), host, dev)
				cfg := pipeline.Float32Config(1, 1)
				cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = o.ChunkFor(n), o.Slots, o.ComputeStreams, host
				row, err := scaleOne(ctx, backends[:dev], cfg, w, o.Iters, o.Repeat)
				if err != nil {
					w.close()
					return nil, &Error{Op: "Scaling", Err: fmt.Errorf("%s elements, %s, %d device(s): %w", Elems(n), host, dev, err)}
				}
				row.Elems, row.Devices, row.ChunkElems = n, dev, cfg.ChunkElems
				if row.Host == "" {
					row.Host = host.String()
				}
				// The seed job moves a float32 in and one out per element.
				row.GBps = gbps(8*int64(n), time.Duration(row.Ms*float64(time.Millisecond)))
				if dev == 1 {
					one = row.Ms
				}
				row.Speedup = one / row.Ms
				if c, ok := cpp[[2]int{n, dev}]; ok && host == pipeline.HostPinned {
					row.CppMs, row.Ratio = c, row.Ms/c
				}
				rows = append(rows, row)
			}
			w.close()
			debug.FreeOSMemory() // the next size's arrays come from the OS afresh
		}
	}
	return rows, nil
}

// seedData is a seed job's data: its input holding the standard pattern
// and its output, pinned or Go slices.
type seedData struct {
	in, out []float32
	job     pipeline.Job
	closers []func() error
}

func (d *seedData) close() {
	for _, c := range d.closers {
		c()
	}
}

// newSeedData allocates an n-element seed job's input and output on b,
// pinned or as Go slices.
func newSeedData(b pipeline.Backend, k *pipeline.Kernel, n int, pinned bool) (*seedData, error) {
	d := &seedData{job: pipeline.Job{N: n, Kernel: k}}
	alloc := func() ([]float32, pipeline.Buffer, error) { return allocFloats(b, n, pinned, &d.closers) }
	in, inBuf, err := alloc()
	if err != nil {
		return nil, err
	}
	out, outBuf, err := alloc()
	if err != nil {
		d.close()
		return nil, err
	}
	kernels.FillPattern(in, 0)
	clear(out) // touched once, so page faults are not timed as copies
	d.in, d.out = in, out
	d.job.Inputs, d.job.Outputs = []pipeline.Buffer{inBuf}, []pipeline.Buffer{outBuf}
	return d, nil
}

// scaleOne measures one group: its stage bound, then the best of repeat
// runs, verifying every element of the last.
func scaleOne(ctx context.Context, backends []pipeline.Backend, cfg pipeline.Config, w *seedData, iters, repeat int) (ScalingRow, error) {
	g, err := pipeline.NewGroup(backends, cfg)
	if err != nil {
		return ScalingRow{}, err
	}
	defer g.Close()
	best := time.Duration(math.MaxInt64)
	var bestRep *pipeline.Report
	for r := 0; r < repeat; r++ {
		clear(w.out)
		rep, err := g.Run(ctx, w.job)
		if err != nil {
			return ScalingRow{}, err
		}
		if rep.Elapsed < best {
			best, bestRep = rep.Elapsed, rep
		}
	}
	if err := kernels.Seed.Verify([][]float32{w.in}, w.out, float64(iters)); err != nil {
		return ScalingRow{}, err
	}
	// The stages alone in the mode the runs settled in (auto mode
	// registers from the second run).
	stJob := w.job
	stJob.Host = bestRep.Mode
	st, err := g.StageTimes(ctx, stJob)
	if err != nil {
		return ScalingRow{}, fmt.Errorf("stage timing: %w", err)
	}
	row := ScalingRow{Ms: ms(best), BoundMs: ms(st.Bound()), Slowest: st.Slowest().String(),
		Efficiency: float64(st.Bound()) / float64(best)}
	for _, d := range bestRep.Devices {
		row.Chunks = append(row.Chunks, d.Chunks)
	}
	if len(row.Chunks) == 0 {
		row.Chunks = []int{bestRep.Chunks}
	}
	if bestRep.Mode != cfg.Host {
		row.Host = fmt.Sprintf("%s→%s", cfg.Host, bestRep.Mode)
	}
	return row, nil
}
