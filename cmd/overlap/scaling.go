package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// scalingRow is one line of overlap bench --devices: a job size and host
// mode on the first k devices.
type scalingRow struct {
	Elems   int     `json:"elems"`
	Host    string  `json:"host"`
	Devices int     `json:"devices"`
	Ms      float64 `json:"ms"`
	GBps    float64 `json:"gb_per_s"`
	BoundMs float64 `json:"bound_ms"`
	Slowest string  `json:"slowest"`
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

// scalingHosts are the host modes of the scaling table: pinned buffers,
// Go slices registered in place, and plain Go slices in auto mode (staged
// the first run, registered from the second).
var scalingHosts = []pipeline.HostMode{pipeline.HostPinned, pipeline.HostRegistered, pipeline.HostAuto}

// runScaling measures the seed job over 1 to k devices for each size and
// host mode, with each group's stage bound measured beside it, and with
// --reference the CUDA C++ multi-GPU reference (static split, a host
// thread per GPU) on the same devices.
func runScaling(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) error {
	if o.csvPath != "" || o.svgPath != "" {
		return usageError{fmt.Errorf("--csv and --svg plot the sweep; with --devices use --json")}
	}
	ro := &runOptions{elems: o.elems, kernel: "seed", host: pipeline.HostPinned,
		machine: machine{sim: o.sim, devices: o.devices, allDevices: o.allDevices}}
	e, err := openEnv(ro)
	if err != nil {
		return err
	}
	defer e.close()
	prog := newProgress(stderr, o.jsonOut)
	defer prog.done()
	k := len(e.backends)
	// One configuration for every row: the pipeline's defaults unless the
	// flags name one.
	iters, chunk, slots, streams := 100, pipeline.DefaultChunkElems, 0, pipeline.DefaultComputeStreams
	for _, f := range []struct {
		name string
		list []int
		v    *int
	}{{"iters", o.iters, &iters}, {"chunks", o.chunks, &chunk}, {"slots", o.slot, &slots}} {
		if !o.set[f.name] {
			continue
		}
		if len(f.list) != 1 {
			return usageError{fmt.Errorf("--%s: give one value with --devices", f.name)}
		}
		*f.v = f.list[0]
	}
	if o.set["compute-streams"] {
		streams = o.computeStreams
	}
	if slots == 0 {
		slots = streams + 2
	}
	if slots < streams {
		return usageError{fmt.Errorf("--slots %d: fewer than the %d compute streams", slots, streams)}
	}

	// The C++ reference drives GPUs 0 to k-1: it stands beside the Go
	// figures only when those are the devices.
	cpp := map[[2]int]float64{}
	if o.reference {
		for i, d := range e.ordinals {
			if d != i {
				return usageError{fmt.Errorf("--reference runs on GPUs 0 to k-1; --devices must list them in order")}
			}
		}
		prog.say("building the CUDA C++ reference…")
		ref, remove, err := buildReference(ctx, e.ctx.Device())
		if err != nil {
			return err
		}
		defer remove()
		for _, n := range o.sizes {
			for dev := 1; dev <= k; dev++ {
				prog.say("C++ reference: %s elements on %d GPU(s)…", humanElems(n), dev)
				m, err := ref.RunMulti(ctx, n, iters, slots, o.repeat, chunk, streams, dev)
				if err != nil {
					return err
				}
				if m.Mismatches != 0 {
					return fmt.Errorf("the C++ multi-GPU reference gave %d wrong elements", m.Mismatches)
				}
				cpp[[2]int{n, dev}] = m.BestMs
			}
		}
	}

	var rows []scalingRow
	for _, n := range o.sizes {
		for _, host := range scalingHosts {
			ro.elems, ro.iters, ro.host = n, iters, host
			w, err := newWorkload(ro, e)
			if err != nil {
				return err
			}
			var one float64
			for dev := 1; dev <= k; dev++ {
				prog.say("%s elements, %s, %d device(s)…", humanElems(n), host, dev)
				cfg := w.cfg
				cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = min(chunk, n), slots, streams, host
				row, err := scaleOne(ctx, e.backends[:dev], cfg, w, o.repeat)
				if err != nil {
					w.close()
					return fmt.Errorf("%s elements, %s, %d device(s): %w", humanElems(n), host, dev, err)
				}
				row.Elems, row.Devices = n, dev
				if row.Host == "" {
					row.Host = host.String()
				}
				row.GBps = gbps(jobBytes(w.cfg, n), time.Duration(row.Ms*float64(time.Millisecond)))
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
			returnMemory()
		}
	}
	prog.done()
	if o.jsonOut {
		writeJSON(stdout, map[string]any{"simulated": o.sim, "backend": e.deviceNames(), "devices": e.ordinals,
			"iters": iters, "chunk_elems": chunk, "slots": slots, "compute_streams": streams, "results": rows})
		return nil
	}
	printScaling(stdout, rows, e, o, iters, chunk, slots, streams)
	return nil
}

// scaleOne measures one group: its stage bound, then the best of repeat
// runs, verifying every element of the last.
func scaleOne(ctx context.Context, backends []pipeline.Backend, cfg pipeline.Config, w *workload, repeat int) (scalingRow, error) {
	g, err := pipeline.NewGroup(backends, cfg)
	if err != nil {
		return scalingRow{}, err
	}
	defer g.Close()
	best := time.Duration(math.MaxInt64)
	var bestRep *pipeline.Report
	for r := 0; r < repeat; r++ {
		clear(w.outputs[0])
		rep, err := g.Run(ctx, w.job)
		if err != nil {
			return scalingRow{}, err
		}
		if rep.Elapsed < best {
			best, bestRep = rep.Elapsed, rep
		}
	}
	if err := w.verify(w.outputs[0]); err != nil {
		return scalingRow{}, err
	}
	// The stages alone in the mode the runs settled in (auto mode
	// registers from the second run).
	stJob := w.job
	stJob.Host = bestRep.Mode
	st, err := g.StageTimes(ctx, stJob)
	if err != nil {
		return scalingRow{}, fmt.Errorf("stage timing: %w", err)
	}
	row := scalingRow{Ms: ms(best), BoundMs: ms(st.Bound()), Slowest: st.Slowest().String(),
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

func printScaling(w io.Writer, rows []scalingRow, e *env, o *benchOptions, iters, chunk, slots, streams int) {
	label := ""
	if o.sim {
		label = fmt.Sprintf(" [simulated: H200 profile, the %d devices sharing a %d GB/s host link]", len(e.backends), simLinkGBps)
		if !o.set["elems"] {
			fmt.Fprintln(w, simSmallerNote(simDefaultElems))
		}
	}
	fmt.Fprintf(w, "overlap bench --devices: seed kernel (%d iterations) on %s, GPUs %v; chunk %d, %d slots, %d compute streams%s\n\n",
		iters, e.deviceNames(), e.ordinals, chunk, slots, streams, label)
	fmt.Fprintf(w, "%6s %-19s %4s %10s %8s %10s %-12s %6s %8s %-13s %10s %7s\n",
		"ELEMS", "HOST", "GPUS", "TIME", "GB/s", "BOUND", "SLOWEST", "EFF", "SPEEDUP", "CHUNKS", "C++", "GO/C++")
	for _, r := range rows {
		cpp, ratio := "-", "-"
		if r.CppMs > 0 {
			cpp, ratio = fmt.Sprintf("%.2f ms", r.CppMs), fmt.Sprintf("%.3f", r.Ratio)
		}
		chunks := ""
		for i, c := range r.Chunks {
			if i > 0 {
				chunks += "/"
			}
			chunks += fmt.Sprint(c)
		}
		fmt.Fprintf(w, "%6s %-19s %4d %7.2f ms %8.1f %7.2f ms %-12s %5.1f%% %7.2fx %-13s %10s %7s\n",
			humanElems(r.Elems), r.Host, r.Devices, r.Ms, r.GBps, r.BoundMs, r.Slowest, 100*r.Efficiency, r.Speedup, chunks, cpp, ratio)
	}
	for _, r := range rows {
		if r.Efficiency > 1 {
			fmt.Fprintf(w, "note: %s, %s, %d GPU(s) beat its bound by %.1f%%: the %s stage ran faster inside the pipeline than alone (the best of two timings, each issued from the host in one burst); the bound is then not a limit\n",
				humanElems(r.Elems), r.Host, r.Devices, 100*(r.Efficiency-1), r.Slowest)
		}
	}
	fmt.Fprintf(w, "\nBOUND: each stage alone, every device running it at once over its share (H2D+D2H: both directions at once); EFF = BOUND / TIME; every element of each configuration's last run verified%s\n", label)
}
