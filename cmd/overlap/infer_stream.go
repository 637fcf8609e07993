package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// The streaming run of overlap infer (bench.InferStream says what it
// measures), and its report.

// executeInferStream runs overlap infer --in on the machine that the
// flags choose (bench.InferStream).
func executeInferStream(ctx context.Context, o *inferOptions, m *model.Model, stdout, stderr io.Writer) (*bench.InferStreamResult, error) {
	if o.in != "-" {
		st, err := os.Stat(o.in)
		if err != nil {
			return nil, usageError{fmt.Errorf("--in: %v", err)}
		}
		if st.Mode().IsRegular() {
			if _, err = m.CheckInputBytes(st.Size()); err != nil {
				return nil, usageError{fmt.Errorf("--in %s: %s", o.in, strings.TrimPrefix(err.Error(), "model: "))}
			}
		}
	}
	chunk := 0
	if len(o.chunks) == 1 {
		chunk = o.chunks[0]
	}
	if _, err := m.Config(chunk); err != nil {
		return nil, usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	opts := bench.InferStreamOptions{Input: o.in, Output: o.out, Stdin: stdin, Stdout: stdout, ChunkRows: chunk, Precision: o.precision,
		Bound: o.bound, Verify: o.verify, Ordinals: e.ordinals}
	if prog.on {
		opts.Progress = prog.line
	}
	res, err := bench.InferStream(ctx, e.backends, k, m, opts)
	var po *bench.PartialOutput
	switch err = benchError(err); {
	case err == nil:
		res.Verified = flagWords(res.Verified)
		return res, nil
	case errors.Is(err, bench.ErrNoRows):
		return nil, usageError{fmt.Errorf("--in %s: %v", o.in, err)}
	case errors.As(err, &po):
		return nil, fmt.Errorf("%w (%s holds the first %d bytes of the correct output, %d rows)", po.Err, o.out, po.Bytes, po.Bytes/int64(4*m.Out()))
	}
	return nil, streamError(err)
}

func printInferStream(w io.Writer, r *bench.InferStreamResult) {
	label := ""
	if r.Simulated {
		label = " [simulated: CPU simulator, not a GPU; rates are not GPU rates]"
	}
	fmt.Fprintf(w, "overlap infer: MLP %s in %s on %s, streaming %s → %s%s\n",
		modelLine(r.Model, r.From, len(r.Widths)-1), r.Precision, r.Backend, r.Input, r.Output, label)
	fmt.Fprintf(w, "%d rows (%s in, %s out); chunk %d rows, %d slots\n\n", r.Rows, humanBytes(r.InBytes), humanBytes(r.OutBytes), r.ChunkRows, r.Slots)
	fmt.Fprintf(w, "%-8s %12s %12s %10s\n", "", "TIME", "ROWS/s", "GB/s")
	fmt.Fprintf(w, "%-8s %9.2f ms %12s %10.1f  (input and output bytes over the whole run)\n", "stream", r.Ms, humanRate(r.RowsPerSec), r.GBps)
	rate := func(bytes int64, msv float64) float64 {
		if msv <= 0 {
			return 0
		}
		return float64(bytes) / (msv / 1e3) / 1e9
	}
	fmt.Fprintf(w, "%-8s %9.2f ms %12s %10.1f  (while reading the input)\n", "read", r.ReadMs, "", rate(r.InBytes, r.ReadMs))
	fmt.Fprintf(w, "%-8s %9.2f ms %12s %10.1f  (while writing the output)\n\n", "write", r.WriteMs, "", rate(r.OutBytes, r.WriteMs))
	if len(r.Devices) > 0 {
		fmt.Fprintf(w, "%-8s %-28s %7s\n", "DEVICE", "NAME", "CHUNKS")
		for _, d := range r.Devices {
			fmt.Fprintf(w, "%-8d %-28s %7d\n", d.Device, d.Name, d.Chunks)
		}
		fmt.Fprintln(w)
	}
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + humanBytes(r.PeakRSS) + " after the stream"
	}
	fmt.Fprintf(w, "%s; pinned slots %s (after an untimed warm-up over 2·slots chunks of zeros a device)\n", rss, humanBytes(r.PinnedBytes))
	if b := r.Bound; b != nil {
		write := fmt.Sprintf("write the output %.2f ms", b.WriteMs)
		if !b.WriteMeasured {
			write = "the write not measured: the output is not a regular file"
		}
		fmt.Fprintf(w, "bound, measured in this run (slowest alone): %.2f ms, %s (read the input into pinned memory %.2f ms, in-memory pinned pipeline %.2f ms, %s)\n",
			b.BoundMs, b.Slowest, b.ReadMs, b.PipelineMs, write)
		if s := r.BoundStages; s != nil {
			fmt.Fprintf(w, "the in-memory pipeline's stages alone: %s (bound %.2f ms, %s)\n", stageLine(*s), s.BoundMs, s.Slowest)
		}
		fmt.Fprintf(w, "efficiency = bound / streaming time: %.1f%%\n", 100*b.Efficiency)
		if b.Efficiency > 1 {
			fmt.Fprintf(w, "above 100%%: the %s stage alone took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor\n", b.Slowest)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "%s%s\n", r.Verified, label)
}
