package main

import (
	"context"
	"fmt"
	"io"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
)

// scalingRow is one line of overlap bench scaling (bench.ScalingRow).
type scalingRow = bench.ScalingRow

// runScaling measures the seed job over 1 to k devices for each size and
// host mode, with each group's stage bound measured beside it, and with
// --reference the CUDA C++ multi-GPU reference (static split, a host
// thread per GPU) on the same devices.
func runScaling(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) error {
	ro := &runOptions{elems: o.elems, kernel: "seed", host: pipeline.HostPinned,
		machine: machine{sim: o.sim, devices: o.devices, allDevices: o.allDevices}}
	e, err := openEnv(ro)
	if err != nil {
		return err
	}
	defer e.close()
	prog := newProgress(stderr, o.jsonOut)
	defer prog.done()
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
			return usageError{fmt.Errorf("--%s: give one value: the table scales one configuration", f.name)}
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
	opts := bench.ScalingOptions{Sizes: o.sizes, Iters: iters, ChunkElems: chunk, Slots: slots, ComputeStreams: streams, Repeat: o.repeat,
		Modules: e.mods, Progress: prog.line}
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
		opts.Reference = ref
	}
	// Each size's input and output arrays.
	for _, n := range o.sizes {
		if err := checkHostMemory(8*int64(n), fmt.Sprintf("--elems %d: the job's 2 input and output arrays", n)); err != nil {
			return err
		}
	}
	rows, err := bench.Scaling(ctx, e.backends, opts)
	if err != nil {
		return benchError(err)
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

func printScaling(w io.Writer, rows []scalingRow, e *env, o *benchOptions, iters, chunk, slots, streams int) {
	label := ""
	if o.sim {
		label = fmt.Sprintf(" [simulated: H200 profile, the %d devices sharing a %d GB/s host link]", len(e.backends), simLinkGBps)
		if !o.set["elems"] {
			fmt.Fprintln(w, simSmallerNote(simDefaultElems))
		}
	}
	fmt.Fprintf(w, "overlap bench scaling: seed kernel (%d iterations) on %s, GPUs %v; chunk %d, %d slots, %d compute streams%s\n\n",
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
