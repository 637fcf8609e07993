package calibrate

import (
	"errors"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/purecuda/overlap/internal/textout"
	"github.com/purecuda/overlap/pipeline/sim"
)

// The text formats of a profile and a validation, as overlap profile
// prints them.

// textWriter is textout.Writer.
type textWriter = textout.Writer

// WriteTable writes v as a table, a row a configuration with its
// measured and predicted times and the prediction's error, then its
// median and worst error; simulated marks the measurements as a
// simulator's. It returns w's first error.
func (v *Validation) WriteTable(w io.Writer, simulated bool) error {
	if v == nil {
		return errors.New("calibrate: Validation.WriteTable: no validation")
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t := &textWriter{W: w}
	t.Printf("\n| %-5s | %-10s | %6s | %5s | %7s | %11s | %11s | %7s |\n", "KERNEL", "HOST", "CHUNK", "SLOTS", "STREAMS", "MEASURED", "PREDICTED", "ERROR")
	t.Printf("|")
	for _, n := range []int{7, 12, 8, 7, 9, 13, 13, 9} {
		t.Printf("%s|", strings.Repeat("-", n))
	}
	t.Printf("\n")
	for _, r := range v.Rows {
		c := r.Config
		t.Printf("| %-6s | %-10s | %6s | %5d | %7d | %8.3f ms | %8.3f ms | %+6.1f%% |\n",
			c.Kernel, c.Host, elemsText(c.Chunk), c.Slots, c.Streams, ms(r.Measured), ms(r.Predicted), 100*r.Err)
	}
	t.Printf("\nmedian |error| %.1f%%, worst %.1f%% (%s); every element of every configuration verified%s\n",
		100*v.Median, 100*math.Abs(v.Worst.Err), v.Worst.Config, simLabel(simulated))
	return t.Err
}

// simLabel marks a simulator's figures.
func simLabel(simulated bool) string {
	if simulated {
		return " [simulated]"
	}
	return ""
}

// WriteProfile writes p's figures as lines of text: the copies, the
// kernels, the host's calls and issue loops, the device's waits, and
// the staging copies (with WriteStagingInRun's line where p has those
// rates). It returns w's first error.
func WriteProfile(w io.Writer, p *sim.Profile) error {
	if p == nil {
		return errors.New("calibrate: WriteProfile: no profile")
	}
	t := &textWriter{W: w}
	t.Printf("copies: H2D %.2f us + %.1f GB/s, D2H %.2f us + %.1f GB/s, both at once %.1f GB/s; pageable %.1f / %.1f GB/s\n",
		p.H2D.FixedNs/1e3, p.H2D.GBps, p.D2H.FixedNs/1e3, p.D2H.GBps, p.BothGBps, p.PageableH2DGBps, p.PageableD2HGBps)
	if p.H2DRegistered.GBps > 0 {
		t.Printf("copies of registered memory: H2D %.2f us + %.1f GB/s, D2H %.2f us + %.1f GB/s\n",
			p.H2DRegistered.FixedNs/1e3, p.H2DRegistered.GBps, p.D2HRegistered.FixedNs/1e3, p.D2HRegistered.GBps)
	}
	var names []string
	for n := range p.Kernels {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := p.Kernels[n]
		if k.NsPerFlop > 0 {
			t.Printf("kernel %s: %.2f us + %.4g ns/FLOP (%.1f TFLOP/s)\n", n, k.FixedNs/1e3, k.NsPerFlop, 1e-3/k.NsPerFlop)
			continue
		}
		t.Printf("kernel %s: %.2f us + %.5f ns/elem + %.6f ns/elem/iteration\n", n, k.FixedNs/1e3, k.NsPerElem, k.NsPerElemPerIter)
	}
	us := func(name string) float64 { return p.IssueNs[name] / 1e3 }
	t.Printf("host: issue copy %.2f us, launch %.2f us, record %.2f us, wait %.2f us; sync %.2f us; run %.2f us; register %.1f ms/GiB\n",
		us("copy"), us("launch"), us("record"), us("wait"), p.SyncNs/1e3, p.RunNs/1e3, p.RegisterMsPerGiB)
	t.Printf("host: a copy from registered memory %.2f us; one chunk's 10 calls in a steady loop %.2f us\n", us("copy_registered"), p.IssueSequenceNs/1e3)
	t.Printf("host, on a stream with work queued: copy %.2f us, launch %.2f us, record %.2f us, wait %.2f us; a wait for a pending event %.2f us\n",
		us("copy_busy"), us("launch_busy"), us("record_busy"), us("wait_busy"), us("wait_pending"))
	if len(p.IssueLoops) > 0 {
		t.Printf("host: the engine's issue loop per chunk (measured / from the calls above):")
		for _, l := range p.IssueLoops {
			t.Printf(" %d slots %d streams %d input(s) %.2f / %.2f us;", l.Slots, l.Streams, max(l.Inputs, 1), l.Ns/1e3, l.PredictedNs/1e3)
		}
		t.Printf(" scale %.3f\n", p.IssueScale)
	}
	t.Printf("device: a wait for another stream's event holds the stream %.2f us; a dependency between streams %.2f us; kernels on other streams overlap all but %.0f%% of a kernel's fixed cost; a copy started while the other direction copies costs %.2f us more\n",
		p.WaitNs/1e3, p.DepNs/1e3, 100*p.KernelFixedSerial, p.BothFixedNs/1e3)
	t.Printf("staging copies (alone / two at once in total):")
	for _, r := range p.Staging {
		t.Printf(" %s %.1f/%.1f GB/s;", bytesText(int64(r.Bytes)), r.GBps, r.PairGBps)
	}
	switch {
	case len(p.StagingDMABySize) > 0:
		t.Printf(" two at once keep, while the device copies H2D / D2H / both ways:")
		for _, r := range p.StagingDMABySize {
			t.Printf(" %s %.0f/%.0f/%.0f%%;", bytesText(int64(r.Bytes)), 100*r.H2D, 100*r.D2H, 100*r.Both)
		}
	case p.StagingDMA > 0:
		t.Printf(" while the device copies both ways, %.0f%% of that rate", 100*p.StagingDMA)
	}
	t.Printf("\n")
	if t.Err != nil {
		return t.Err
	}
	return WriteStagingInRun(w, p, "")
}

// WriteStagingInRun writes p's staging rates in a staged run as one
// line, with which after "in a staged run" (such as ", the median of
// the rounds'"), and each size's issue lag where any is set; it writes
// nothing where p has no rates. It returns w's first error.
func WriteStagingInRun(w io.Writer, p *sim.Profile, which string) error {
	if p == nil {
		return errors.New("calibrate: WriteStagingInRun: no profile")
	}
	if len(p.StagingInRun) == 0 {
		return nil
	}
	t := &textWriter{W: w}
	lags := ""
	for _, r := range p.StagingInRun {
		if r.IssueLagNs > 0 {
			lags = "; the issuer's lag after a handoff"
		}
	}
	t.Printf("staging copies in a staged run%s (in / out, each; alone faster by%s):", which, lags)
	for _, r := range p.StagingInRun {
		t.Printf(" %s %.1f/%.1f GB/s x%.2f", bytesText(int64(r.Bytes)), r.InGBps, r.OutGBps, p.StagingAloneBoost(r.Bytes))
		if lags != "" {
			t.Printf(" +%.0f us", r.IssueLagNs/1e3)
		}
		t.Printf(";")
	}
	t.Printf(" and %.2f us a chunk besides the copies\n", p.StagingChunkNs/1e3)
	return t.Err
}

// WriteValidatedHost writes the host figures that [Validate] set on p:
// its issue loops and their scale, beside scaleBefore, the scale that p
// had before, then its staging rates in a staged run
// (WriteStagingInRun). It returns w's first error.
func WriteValidatedHost(w io.Writer, p *sim.Profile, scaleBefore float64) error {
	if p == nil {
		return errors.New("calibrate: WriteValidatedHost: no profile")
	}
	t := &textWriter{W: w}
	t.Printf("host: the engine's issue loop per chunk, the median of the rounds':")
	for _, l := range p.IssueLoops {
		t.Printf(" %d slots %d streams %d input(s) %.2f us;", l.Slots, l.Streams, max(l.Inputs, 1), l.Ns/1e3)
	}
	t.Printf(" scale %.3f (the profile above: %.3f)\n", p.IssueScale, scaleBefore)
	if t.Err != nil {
		return t.Err
	}
	return WriteStagingInRun(w, p, ", the median of the rounds'")
}
