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

// The configuration sweep of overlap bench: the seed job on one device
// for every iteration count, host mode, chunk size and slot count, each
// configuration's stage bound measured beside its best run.

// SweepRow is one configuration's result.
type SweepRow struct {
	Iters      int     `json:"iters"`
	Host       string  `json:"host"`
	Chunk      int     `json:"chunk_elems"`
	Slots      int     `json:"slots"`
	Ms         float64 `json:"ms"`
	GBps       float64 `json:"gb_per_s"`
	BoundMs    float64 `json:"bound_ms"`
	Efficiency float64 `json:"efficiency"`
	// CppMs is the CUDA C++ reference's best time for the same
	// iterations, chunk and slots, on pinned rows of one compute stream
	// when a Reference ran, and Ratio this row's time over it.
	CppMs float64 `json:"cpp_ms,omitempty"`
	Ratio float64 `json:"go_over_cpp,omitempty"`
}

// SweepOptions say what [Sweep] runs: every combination of Iters, Hosts,
// Chunks and Slots, in that order of nesting. The zero value runs
// nothing (no Iters); [CheckSweep] says what Sweep refuses.
type SweepOptions struct {
	// Elems is the job's elements.
	Elems int
	// Iters are the seed kernel's iteration counts.
	Iters []int
	// Hosts are the host modes (nil: pinned).
	Hosts []pipeline.HostMode
	// Chunks are the chunk sizes in elements (nil: Elems, one chunk).
	Chunks []int
	// Slots are the slot counts (nil: 2).
	Slots []int
	// ComputeStreams is the kernels' streams, at most each row's slots
	// (0: 1, the C++ reference's design).
	ComputeStreams int
	// Repeat is the runs of each configuration, the fastest kept (0: 1).
	Repeat int
	// Modules holds the seed kernel loaded on the backend's GPU; nil on
	// the simulator.
	Modules *kernels.Modules
	// Reference, when not nil, runs the CUDA C++ reference pipeline for
	// each iteration count and slot count over the chunks first, beside
	// the pinned rows of one compute stream.
	Reference *Reference
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

func (o SweepOptions) withDefaults() SweepOptions {
	if o.Hosts == nil {
		o.Hosts = []pipeline.HostMode{pipeline.HostPinned}
	}
	if o.Chunks == nil {
		o.Chunks = []int{o.Elems}
	}
	if o.Slots == nil {
		o.Slots = []int{2}
	}
	o.ComputeStreams = max(1, o.ComputeStreams)
	o.Repeat = max(1, o.Repeat)
	return o
}

// Sweep measures the seed job on b for each configuration that o lists:
// its stage bound, then the best of o.Repeat runs, every element of the
// last verified. The rows come in o's order.
func Sweep(ctx context.Context, b pipeline.Backend, o SweepOptions) ([]SweepRow, error) {
	o = o.withDefaults()
	if b == nil {
		return nil, &Error{Op: "Sweep", Err: errors.New("nil backend")}
	}
	if err := CheckSweep(o, isSim(b)); err != nil {
		return nil, &Error{Op: "Sweep", Err: err}
	}
	cpp := map[[3]int]float64{}
	if o.Reference != nil {
		for _, it := range o.Iters {
			for _, s := range o.Slots {
				say(o.Progress, "C++ reference: iters %d, %d slots…", it, s)
				res, err := o.Reference.RunPipeline(ctx, o.Elems, it, s, o.Repeat, o.Chunks)
				if err != nil {
					return nil, &Error{Op: "Sweep", Err: err}
				}
				for _, r := range res {
					if r.Mismatches != 0 {
						return nil, &Error{Op: "Sweep", Err: fmt.Errorf("the C++ reference gave %d wrong elements", r.Mismatches)}
					}
					cpp[[3]int{it, r.Chunk, r.Slots}] = r.BestMs
				}
			}
		}
	}
	var rows []SweepRow
	for _, it := range o.Iters {
		kernel, err := kernels.Seed.Pipeline(o.Modules, float64(it))
		if err != nil {
			return nil, &Error{Op: "Sweep", Err: err}
		}
		for _, host := range o.Hosts {
			w, err := newSeedData(b, kernel, o.Elems, host == pipeline.HostPinned)
			if err != nil {
				return nil, &Error{Op: "Sweep", Err: err}
			}
			// The seed job moves a float32 in and one out per element.
			bytes := 8 * int64(o.Elems)
			for _, chunk := range o.Chunks {
				for _, slots := range o.Slots {
					say(o.Progress, "iters %d, %s, chunk %d, %d slots…", it, host, chunk, slots)
					cfg := pipeline.Float32Config(1, 1)
					cfg.ChunkElems, cfg.Slots, cfg.Host = chunk, slots, host
					cfg.ComputeStreams = min(o.ComputeStreams, slots)
					row, err := sweepOne(ctx, b, cfg, w, it, o.Repeat)
					if err != nil {
						w.close()
						return nil, &Error{Op: "Sweep", Err: fmt.Errorf("iters %d, %s, chunk %d, %d slots: %w", it, host, chunk, slots, err)}
					}
					row.Iters, row.Host, row.Chunk, row.Slots = it, host.String(), chunk, slots
					row.GBps = gbps(bytes, time.Duration(row.Ms*float64(time.Millisecond)))
					if c, ok := cpp[[3]int{it, chunk, slots}]; ok && host == pipeline.HostPinned && cfg.ComputeStreams == 1 {
						row.CppMs, row.Ratio = c, row.Ms/c
					}
					rows = append(rows, row)
				}
			}
			w.close()
			debug.FreeOSMemory() // the next mode's arrays come from the OS afresh
		}
	}
	return rows, nil
}

// sweepOne measures one configuration: the stage bound, then the best of
// repeat runs, verifying every element of the last.
func sweepOne(ctx context.Context, b pipeline.Backend, cfg pipeline.Config, w *seedData, iters, repeat int) (SweepRow, error) {
	p, err := pipeline.New(b, cfg)
	if err != nil {
		return SweepRow{}, err
	}
	defer p.Close()
	st, err := p.StageTimes(ctx, w.job)
	if err != nil {
		return SweepRow{}, err
	}
	best := time.Duration(math.MaxInt64)
	for r := 0; r < repeat; r++ {
		clear(w.out)
		rep, err := p.Run(ctx, w.job)
		if err != nil {
			return SweepRow{}, err
		}
		best = min(best, rep.Elapsed)
	}
	if err := kernels.Seed.Verify([][]float32{w.in}, w.out, float64(iters)); err != nil {
		return SweepRow{}, err
	}
	return SweepRow{Ms: ms(best), BoundMs: ms(st.Bound()), Efficiency: float64(st.Bound()) / float64(best)}, nil
}
