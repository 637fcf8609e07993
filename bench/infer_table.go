package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The text tables of a model's runs, as overlap infer prints them: a
// format of each result, as the CSV and SVG of a sweep are. Each writer
// builds its table whole and writes it to w in one call.

// String lists the stages' times alone, as overlap's tables do: "H2D
// 1.20 ms, compute 3.40 ms, D2H 0.60 ms", with the staging copies and
// the copies in both directions at once where they were measured.
func (s Stages) String() string {
	stages := fmt.Sprintf("H2D %.2f ms, compute %.2f ms, D2H %.2f ms", s.H2DMs, s.ComputeMs, s.D2HMs)
	if s.StageInMs > 0 || s.StageOutMs > 0 {
		stages = fmt.Sprintf("stage-in %.2f ms, %s, stage-out %.2f ms", s.StageInMs, stages, s.StageOutMs)
	}
	if s.CopiesMs > 0 {
		stages += fmt.Sprintf(", H2D+D2H at once %.2f ms", s.CopiesMs)
	}
	if s.StagingMs > 0 {
		stages += fmt.Sprintf(", stage-in+out at once %.2f ms", s.StagingMs)
	}
	return stages
}

// RowRate writes rows per second as overlap's tables do: 1.25G/s,
// 12.30M/s, 4.5K/s or 999/s.
func RowRate(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG/s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fK/s", v/1e3)
	}
	return fmt.Sprintf("%.0f/s", v)
}

// modelLine describes the model and where its activation came from
// (model.Model.ActivationFrom): the file, the default, or the options,
// named by optionName as [OptionError.Text] names a field.
func modelLine(s, from string, layers int, optionName func(string) string) string {
	if layers < 2 {
		return s
	}
	switch from {
	case "file":
		return s + " (activation from the file)"
	case "default":
		return s + " (the file names no activation: relu by default)"
	}
	name := "Activation"
	if optionName != nil && optionName(name) != "" {
		name = optionName(name)
	}
	return s + " (activation from " + name + ")"
}

// tableError is a writer's refusal of a result that it cannot show.
func tableError(op, what string) error {
	return &Error{Op: op, Err: errors.New(what)}
}

// WriteTable writes r as overlap infer --rows prints it: the model and
// the machine, each chunk size's median and fastest run, the synchronous
// baseline against the pipeline at its fastest chunk size, and the stage
// bound. A model of several layers names where its activation came from;
// optionName names the Activation option as the caller calls it, as
// [OptionError.Text] does (nil keeps "Activation"). A nil r is a *[Error];
// so is a failed write.
func (r *InferResult) WriteTable(w io.Writer, optionName func(field string) string) error {
	if r == nil {
		return tableError("InferResult.WriteTable", "nil result")
	}
	var b bytes.Buffer
	label := ""
	if r.Simulated {
		label = fmt.Sprintf(" [simulated on the CPU: times predicted for %s]", r.Profile)
		if r.TimingOnly {
			label = fmt.Sprintf(" [simulated, timing only: times predicted for %s]", r.Profile)
		}
	}
	fmt.Fprintf(&b, "overlap infer: MLP %s in %s on %s, %d rows (%s in, %s out, weights %s)%s\n",
		modelLine(r.Model, r.From, len(r.Widths)-1, optionName), r.Precision, r.Backend, r.Rows, Bytes(r.InBytes), Bytes(r.OutBytes), Bytes(r.ParamBytes), label)
	reg := ""
	if r.RegisterMs > 0 {
		reg = fmt.Sprintf(" in %.1f ms", r.RegisterMs)
	}
	fmt.Fprintf(&b, "input %s; host memory %s%s; %d slots\n\n", r.Input, r.HostMode, reg, r.Slots)
	fmt.Fprintf(&b, "%-10s %11s %11s %12s %8s\n", "CHUNK", "MEDIAN", "MIN", "ROWS/s", "GB/s")
	for _, c := range r.Chunks {
		mark := ""
		if c.ChunkRows == r.ChunkRows && len(r.Chunks) > 1 {
			mark = "  ← fastest"
		}
		fmt.Fprintf(&b, "%-10d %8.2f ms %8.2f ms %12s %8.1f%s\n", c.ChunkRows, c.Ms, c.MinMs, RowRate(c.RowsPerSec), c.GBps, mark)
	}
	fmt.Fprintf(&b, "\n%-24s %11s %12s %8s %8s %11s\n", "MODE", "TIME", "ROWS/s", "GB/s", "SPEEDUP", "EFFICIENCY")
	for _, row := range r.Modes {
		sp, eff := "-", "-"
		if row.Speedup > 0 {
			sp = fmt.Sprintf("%.2fx", row.Speedup)
		}
		if row.Efficiency > 0 {
			eff = fmt.Sprintf("%.1f%%", 100*row.Efficiency)
		}
		mode := row.Mode
		if row.ChunkRows > 0 {
			mode = fmt.Sprintf("%s (chunk %d)", row.Mode, row.ChunkRows)
		}
		fmt.Fprintf(&b, "%-24s %8.2f ms %12s %8.1f %8s %11s\n", mode, row.Ms, RowRate(row.RowsPerSec), row.GBps, sp, eff)
	}
	s := r.Stages
	fmt.Fprintf(&b, "\nstage bound (slowest stage alone, %s): %.2f ms (%s)\n", s.Slowest, s.BoundMs, s)
	fmt.Fprintf(&b, "efficiency = stage bound / the pipeline's median time; %s%s\n", r.Verified, label)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if r.WarmUpMs > 0 {
		fmt.Fprintf(&b, "each chunk size, and the stages, ran right after %.0f ms of untimed work on the GPU, which an idle GPU needs to raise its clocks, and each chunk size after an untimed run\n", r.WarmUpMs)
	}
	return writeTable("InferResult.WriteTable", w, &b)
}

// writeTable writes a table built in b to w, a failure a *[Error] of op.
func writeTable(op string, w io.Writer, b *bytes.Buffer) error {
	if _, err := b.WriteTo(w); err != nil {
		return &Error{Op: op, Err: err}
	}
	return nil
}

// WriteTable writes r as overlap infer --reference prints it: one table
// of PyTorch's variants and ours (the baseline, each chunk size, each
// stage alone) with rates, then how each side's fastest compares with its
// bound and with the other, and every value of our output against
// PyTorch's. A nil r, a result without both sides or without our modes,
// and a failed write are a *[Error].
func (r *InferReferenceResult) WriteTable(w io.Writer) error {
	const op = "InferReferenceResult.WriteTable"
	switch {
	case r == nil:
		return tableError(op, "nil result")
	case r.PyTorch == nil || r.Ours == nil || len(r.Ours.Modes) == 0:
		return tableError(op, "the result lacks PyTorch's side or ours")
	}
	var b bytes.Buffer
	t, o := r.PyTorch, r.Ours
	label := ""
	if o.Simulated {
		label = fmt.Sprintf(" [ours simulated on the CPU: times predicted for %s; PyTorch's on the CPU, a smoke test]", o.Profile)
	}
	fmt.Fprintf(&b, "overlap infer --reference: MLP %s in %s, %d rows (%s in, %s out), the same model file and input rows on both sides%s\n",
		o.Model, o.Precision, o.Rows, Bytes(o.InBytes), Bytes(o.OutBytes), label)
	cuda := t.CUDA
	if cuda == "" {
		cuda = "none"
	}
	fmt.Fprintf(&b, "PyTorch %s (CUDA %s, allow_tf32=%v) on %s, pinned host tensors; ours on %s, host memory %s; the median of %d passes each\n\n",
		t.Torch, cuda, t.AllowTF32, t.Device, o.Backend, o.HostMode, t.Passes)
	flops := o.FLOPsPerRow * float64(o.Rows)
	fmt.Fprintf(&b, "%-8s %-48s %7s %11s %11s %10s  %s\n", "SIDE", "VARIANT", "CHUNK", "MEDIAN", "MIN", "ROWS/s", "NOTE")
	line := func(side, name string, chunk int, med, mn float64, note string) {
		c, minMs, rate := "-", "-", "-"
		if chunk > 0 {
			c = strconv.Itoa(chunk)
		}
		if mn > 0 {
			minMs = fmt.Sprintf("%.2f ms", mn)
		}
		if med > 0 {
			rate = RowRate(float64(o.Rows) / (med / 1e3))
		}
		fmt.Fprintf(&b, "%-8s %-48s %7s %8.2f ms %11s %10s  %s\n", side, name, c, med, minMs, rate, note)
	}
	stageNote := func(key string, msv float64) string {
		if msv <= 0 {
			return ""
		}
		s := msv / 1e3
		switch key {
		case "h2d_alone":
			return fmt.Sprintf("%.1f GB/s", float64(o.InBytes)/s/1e9)
		case "d2h_alone":
			return fmt.Sprintf("%.1f GB/s", float64(o.OutBytes)/s/1e9)
		case "h2d_d2h_at_once":
			return fmt.Sprintf("%.1f GB/s in all", float64(o.InBytes+o.OutBytes)/s/1e9)
		case "compute_alone":
			return fmt.Sprintf("%.1f TFLOP/s", flops/s/1e12)
		}
		return ""
	}
	for _, v := range t.Variants {
		note := stageNote(v.Key, v.MedianMs)
		if note == "" && t.BoundMs > 0 {
			note = fmt.Sprintf("%.1f%% of its bound", 100*t.BoundMs/v.MedianMs)
		}
		if v.Key == t.Best.Key && v.ChunkRows == t.Best.ChunkRows {
			note += "  ← PyTorch's fastest"
		}
		line("pytorch", v.Name, v.ChunkRows, v.MedianMs, v.MinMs, note)
	}
	for _, m := range o.Modes {
		if m.Mode == "synchronous" {
			line("ours", "synchronous (pageable, whole arrays, one stream)", 0, m.Ms, 0, fmt.Sprintf("%.1f%% of our bound", 100*o.Stages.BoundMs/m.Ms))
		}
	}
	for _, c := range o.Chunks {
		note := ""
		if o.Stages.BoundMs > 0 && c.Ms > 0 {
			note = fmt.Sprintf("%.1f%% of our bound", 100*o.Stages.BoundMs/c.Ms)
		}
		if c.ChunkRows == o.ChunkRows {
			note += "  ← our fastest"
		}
		line("ours", fmt.Sprintf("pipeline (%d slots)", o.Slots), c.ChunkRows, c.Ms, c.MinMs, note)
	}
	s := o.Stages
	host := "" // the host mode's first word: "registered" of "registered in place"
	if f := strings.Fields(o.HostMode); len(f) > 0 {
		host = f[0]
	}
	for _, st := range []struct {
		key, name string
		ms        float64
	}{{"h2d_alone", "H2D alone (" + host + ")", s.H2DMs}, {"compute_alone", "compute alone (input resident)", s.ComputeMs},
		{"d2h_alone", "D2H alone", s.D2HMs}, {"h2d_d2h_at_once", "H2D + D2H at once (2 streams)", s.CopiesMs}} {
		if st.ms > 0 {
			line("ours", st.name, o.ChunkRows, st.ms, 0, stageNote(st.key, st.ms))
		}
	}
	oursMs := o.Modes[len(o.Modes)-1].Ms
	fmt.Fprintf(&b, "\nPyTorch's fastest: %s, chunk %d: %.2f ms; its bound (slowest stage alone, H2D + D2H at once included) %.2f ms: %.1f%% of it\n",
		t.Best.Name, t.Best.ChunkRows, t.Best.MedianMs, t.BoundMs, 100*r.PyTorchOfBound)
	fmt.Fprintf(&b, "ours fastest: chunk %d: %.2f ms; our bound (slowest stage alone, %s) %.2f ms: %.1f%% of it\n",
		o.ChunkRows, oursMs, s.Slowest, s.BoundMs, 100*r.OursOfBound)
	fmt.Fprintf(&b, "speed, ours / PyTorch's fastest: %.3f× (%.2f ms / %.2f ms, medians)\n", r.SpeedVsPyTorch, t.Best.MedianMs, oursMs)
	c := r.Comparison
	fmt.Fprintf(&b, "ours vs PyTorch's output (%s), value by value: %d values, max |ours − PyTorch| %.3g, max |ours − PyTorch| / tolerance %.3g, %d outside the tolerance\n",
		c.Against, c.Values, c.MaxAbs, c.MaxRatio, c.Outside)
	fmt.Fprintf(&b, "tolerance: %s\nours: %s\n", c.Tolerance, o.Verified)
	if !t.OutputsEqual {
		fmt.Fprintf(&b, "note: PyTorch's own variants' outputs differ by up to %.3g\n", t.MaxDiff)
	}
	for _, n := range o.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	if r.Dir != "" {
		fmt.Fprintf(&b, "the twin's files are in %s\n", r.Dir)
	}
	return writeTable(op, w, &b)
}

// WriteTable writes r as overlap infer --in prints it: the stream's time
// and rates, the reading and the writing, each device's chunks, its peak
// memory, and with Bound the bound measured in the same run. optionName
// names the Activation option as [InferResult.WriteTable] does. A nil r
// and a failed write are a *[Error].
func (r *InferStreamResult) WriteTable(w io.Writer, optionName func(field string) string) error {
	if r == nil {
		return tableError("InferStreamResult.WriteTable", "nil result")
	}
	var b bytes.Buffer
	label := ""
	if r.Simulated {
		label = simulatedStream
	}
	fmt.Fprintf(&b, "overlap infer: MLP %s in %s on %s, streaming %s → %s%s\n",
		modelLine(r.Model, r.From, len(r.Widths)-1, optionName), r.Precision, r.Backend, r.Input, r.Output, label)
	fmt.Fprintf(&b, "%d rows (%s in, %s out); chunk %d rows, %d slots\n\n", r.Rows, Bytes(r.InBytes), Bytes(r.OutBytes), r.ChunkRows, r.Slots)
	fmt.Fprintf(&b, "%-8s %12s %12s %10s\n", "", "TIME", "ROWS/s", "GB/s")
	fmt.Fprintf(&b, "%-8s %9.2f ms %12s %10.1f  (input and output bytes over the whole run)\n", "stream", r.Ms, RowRate(r.RowsPerSec), r.GBps)
	rate := func(bytes int64, msv float64) float64 {
		if msv <= 0 {
			return 0
		}
		return float64(bytes) / (msv / 1e3) / 1e9
	}
	fmt.Fprintf(&b, "%-8s %9.2f ms %12s %10.1f  (while reading the input)\n", "read", r.ReadMs, "", rate(r.InBytes, r.ReadMs))
	fmt.Fprintf(&b, "%-8s %9.2f ms %12s %10.1f  (while writing the output)\n\n", "write", r.WriteMs, "", rate(r.OutBytes, r.WriteMs))
	if len(r.Devices) > 0 {
		fmt.Fprintf(&b, "%-8s %-28s %7s\n", "DEVICE", "NAME", "CHUNKS")
		for _, d := range r.Devices {
			fmt.Fprintf(&b, "%-8d %-28s %7d\n", d.Device, d.Name, d.Chunks)
		}
		fmt.Fprintln(&b)
	}
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + Bytes(r.PeakRSS) + " after the stream"
	}
	fmt.Fprintf(&b, "%s; pinned slots %s (after an untimed warm-up over 2·slots chunks of zeros a device)\n", rss, Bytes(r.PinnedBytes))
	if bd := r.Bound; bd != nil {
		write := fmt.Sprintf("write the output %.2f ms", bd.WriteMs)
		if !bd.WriteMeasured {
			write = "the write not measured: the output is not a regular file"
		}
		fmt.Fprintf(&b, "bound, measured in this run (slowest alone): %.2f ms, %s (read the input into pinned memory %.2f ms, in-memory pinned pipeline %.2f ms, %s)\n",
			bd.BoundMs, bd.Slowest, bd.ReadMs, bd.PipelineMs, write)
		if s := r.BoundStages; s != nil {
			fmt.Fprintf(&b, "the in-memory pipeline's stages alone: %s (bound %.2f ms, %s)\n", s, s.BoundMs, s.Slowest)
		}
		fmt.Fprintf(&b, "efficiency = bound / streaming time: %.1f%%\n", 100*bd.Efficiency)
		if bd.Efficiency > 1 {
			fmt.Fprintf(&b, "above 100%%: the %s stage alone took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor\n", bd.Slowest)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	fmt.Fprintf(&b, "%s%s\n", r.Verified, label)
	return writeTable("InferStreamResult.WriteTable", w, &b)
}
