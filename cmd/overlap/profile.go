package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/pipeline/sim/calibrate"
)

// profileOptions are overlap profile's flags.
type profileOptions struct {
	out      string
	validate bool
	sim      bool
	truth    string // --profile: with --sim, the profile the simulated "GPU" runs on
	device   int
	elems    int // validation job size for the seed kernel
	repeat   int
}

// profileCmd is overlap profile.
var profileCmd = &command{
	name:      "profile",
	usageLine: "overlap profile [--out FILE] [--validate] [--sim [--profile FILE]] [--device N] [--elems N] [--repeat N]",
	short:     "measure the GPU's device profile for the simulator (--out FILE); --validate compares measured and predicted times over 26 configurations",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := profileFlags(fs)
		return benchBody("profile", check, func(ctx context.Context, stdout, stderr io.Writer) error {
			return profileCommand(ctx, o, stdout, stderr)
		})
	},
}

// profileFlags registers overlap profile's flags on fs; check checks them
// once parsed.
func profileFlags(fs *flag.FlagSet) (*profileOptions, func() error) {
	o := &profileOptions{elems: 128 << 20, repeat: 3}
	var m machine
	fs.StringVar(&o.out, "out", "", "write the measured profile (JSON) to this file")
	fs.BoolVar(&o.validate, "validate", false, "then run a set of configurations and compare each with the simulator's prediction from the fresh profile")
	m.addMachineFlags(fs, flagSim|flagDevice|flagProfile, map[string]string{
		"sim":     "measure the simulator instead of a GPU (a self-test of the command)",
		"profile": "with --sim: the profile the measured simulator runs on (default: built-in)"})
	fs.Var(sizeFlag{v: &o.elems}, "elems", "--validate's seed job size (128M); chunk sizes scale with it, saxpy runs a quarter of it, and the staged runs that time staging run half of it")
	fs.IntVar(&o.repeat, "repeat", 3, "--validate: rounds, each timing every configuration once after an untimed run; each takes its median round")
	return o, func() error {
		if err := m.check(fs, false, false); err != nil {
			return err
		}
		o.sim, o.truth, o.device = m.sim, m.profile, m.device
		switch {
		case fs.NArg() > 0:
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		case o.elems < 1<<16 || int64(o.elems) > maxElems:
			return fmt.Errorf("--elems %d: want 64K to %d", o.elems, int64(maxElems))
		case o.repeat < 1 || o.repeat > 100:
			return fmt.Errorf("--repeat %d: want 1 to 100", o.repeat)
		}
		if o.out != "" {
			f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("--out: %v", err)
			}
			f.Close()
		}
		return nil
	}
}

// profileCommand measures a profile on the GPU, or on the simulator
// standing in for one, prints it, writes it to --out, and with
// --validate validates the simulator against it; progress goes to
// stderr on a terminal.
func profileCommand(ctx context.Context, o *profileOptions, w, stderr io.Writer) error {
	start := time.Now()
	e, err := openEnv(&runOptions{machine: machine{sim: o.sim, profile: o.truth, device: o.device}, kernel: "seed"})
	if err != nil {
		return err
	}
	defer e.close()
	label := ""
	if o.sim {
		label = " [simulated: measuring the simulator]"
	}
	fmt.Fprintf(w, "overlap profile: measuring %s%s\n", e.backend.Name(), label)
	prog := newProgress(stderr, false)
	defer prog.done()
	dev := calibrate.Device{Backend: e.backend, Context: e.ctx, Modules: e.mods}
	co := calibrate.Options{Elems: o.elems, Rounds: o.repeat, By: "`overlap profile`",
		Progress: func(what string) { prog.say("overlap profile: %s…", what) }}
	prof, err := calibrate.Measure(ctx, dev, co)
	if err != nil {
		return err
	}
	prog.done()
	printProfile(w, prof)
	if o.out != "" {
		if err := prof.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s\n", o.out)
	}
	if o.validate {
		if err := validateProfile(ctx, o, e, dev, co, prof, w, prog); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "took %.1f s of wall time\n", time.Since(start).Seconds())
	return nil
}

// validateProfile validates the simulator against prof on dev, prints the
// table, and writes prof to --out again with the host figures that the
// validation timed; co says its progress through prog.
func validateProfile(ctx context.Context, o *profileOptions, e *env, dev calibrate.Device, co calibrate.Options, prof *sim.Profile, w io.Writer, prog *progress) error {
	n := len(calibrate.Configs(o.elems))
	what := "measured on " + e.backend.Name()
	if o.sim {
		what += " [simulated]"
	}
	fmt.Fprintf(w, "\nvalidation: %d configurations, each the median of %d rounds (a round times every configuration once, each after an untimed run of its own), %s; predicted by the simulator from the profile above\n", n, o.repeat, what)
	// The validation's largest job, the seed's, refused before it is
	// allocated where the host lacks the memory.
	if err := checkHostMemory(int64(o.elems)*4*2, fmt.Sprintf("--elems %d: the job's %d input and output arrays", o.elems, 2)); err != nil {
		return err
	}
	scale := prof.IssueScale
	v, err := calibrate.Validate(ctx, dev, prof, co)
	if err != nil {
		return err
	}
	prog.done()
	fmt.Fprint(w, "host: the engine's issue loop per chunk, the median of the profile's and the rounds':")
	for _, l := range prof.IssueLoops {
		fmt.Fprintf(w, " %d slots %d streams %d input(s) %.2f us;", l.Slots, l.Streams, max(l.Inputs, 1), l.Ns/1e3)
	}
	fmt.Fprintf(w, " scale %.3f (the profile above: %.3f)\n", prof.IssueScale, scale)
	printStagingInRun(w, prof, ", the median of the profile's and the rounds'")
	if o.out != "" {
		if err := prof.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s again, with those loops and staging rates\n", o.out)
	}
	printValidation(w, v, o.sim)
	return nil
}

// printValidation prints v's table and its summary.
func printValidation(w io.Writer, v *calibrate.Validation, sim bool) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %-5s | %-10s | %6s | %5s | %7s | %11s | %11s | %7s |\n", "KERNEL", "HOST", "CHUNK", "SLOTS", "STREAMS", "MEASURED", "PREDICTED", "ERROR")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 7), strings.Repeat("-", 12), strings.Repeat("-", 8), strings.Repeat("-", 7), strings.Repeat("-", 9), strings.Repeat("-", 13), strings.Repeat("-", 13), strings.Repeat("-", 9))
	for _, r := range v.Rows {
		c := r.Config
		fmt.Fprintf(w, "| %-6s | %-10s | %6s | %5d | %7d | %8.3f ms | %8.3f ms | %+6.1f%% |\n",
			c.Kernel, c.Host, humanElems(c.Chunk), c.Slots, c.Streams, ms(r.Measured), ms(r.Predicted), 100*r.Err)
	}
	label := ""
	if sim {
		label = " [simulated]"
	}
	fmt.Fprintf(w, "\nmedian |error| %.1f%%, worst %.1f%% (%s); every element of every configuration verified%s\n", 100*v.Median, 100*math.Abs(v.Worst.Err), v.Worst.Config, label)
}

func printProfile(w io.Writer, p *sim.Profile) {
	fmt.Fprintf(w, "copies: H2D %.2f us + %.1f GB/s, D2H %.2f us + %.1f GB/s, both at once %.1f GB/s; pageable %.1f / %.1f GB/s\n",
		p.H2D.FixedNs/1e3, p.H2D.GBps, p.D2H.FixedNs/1e3, p.D2H.GBps, p.BothGBps, p.PageableH2DGBps, p.PageableD2HGBps)
	if p.H2DRegistered.GBps > 0 {
		fmt.Fprintf(w, "copies of registered memory: H2D %.2f us + %.1f GB/s, D2H %.2f us + %.1f GB/s\n",
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
			fmt.Fprintf(w, "kernel %s: %.2f us + %.4g ns/FLOP (%.1f TFLOP/s)\n", n, k.FixedNs/1e3, k.NsPerFlop, 1e-3/k.NsPerFlop)
			continue
		}
		fmt.Fprintf(w, "kernel %s: %.2f us + %.5f ns/elem + %.6f ns/elem/iteration\n", n, k.FixedNs/1e3, k.NsPerElem, k.NsPerElemPerIter)
	}
	fmt.Fprintf(w, "host: issue copy %.2f us, launch %.2f us, record %.2f us, wait %.2f us; sync %.2f us; run %.2f us; register %.1f ms/GiB\n",
		p.IssueNs["copy"]/1e3, p.IssueNs["launch"]/1e3, p.IssueNs["record"]/1e3, p.IssueNs["wait"]/1e3, p.SyncNs/1e3, p.RunNs/1e3, p.RegisterMsPerGiB)
	fmt.Fprintf(w, "host: a copy from registered memory %.2f us; one chunk's 10 calls in a steady loop %.2f us\n", p.IssueNs["copy_registered"]/1e3, p.IssueSequenceNs/1e3)
	fmt.Fprintf(w, "host, on a stream with work queued: copy %.2f us, launch %.2f us, record %.2f us, wait %.2f us; a wait for a pending event %.2f us\n",
		p.IssueNs["copy_busy"]/1e3, p.IssueNs["launch_busy"]/1e3, p.IssueNs["record_busy"]/1e3, p.IssueNs["wait_busy"]/1e3, p.IssueNs["wait_pending"]/1e3)
	if len(p.IssueLoops) > 0 {
		fmt.Fprint(w, "host: the engine's issue loop per chunk (measured / from the calls above):")
		for _, l := range p.IssueLoops {
			fmt.Fprintf(w, " %d slots %d streams %d input(s) %.2f / %.2f us;", l.Slots, l.Streams, max(l.Inputs, 1), l.Ns/1e3, l.PredictedNs/1e3)
		}
		fmt.Fprintf(w, " scale %.3f\n", p.IssueScale)
	}
	fmt.Fprintf(w, "device: a wait for another stream's event holds the stream %.2f us; a dependency between streams %.2f us; kernels on other streams overlap all but %.0f%% of a kernel's fixed cost; a copy started while the other direction copies costs %.2f us more\n", p.WaitNs/1e3, p.DepNs/1e3, 100*p.KernelFixedSerial, p.BothFixedNs/1e3)
	fmt.Fprint(w, "staging copies (alone / two at once in total):")
	for _, r := range p.Staging {
		fmt.Fprintf(w, " %s %.1f/%.1f GB/s;", humanBytes(int64(r.Bytes)), r.GBps, r.PairGBps)
	}
	switch {
	case len(p.StagingDMABySize) > 0:
		fmt.Fprint(w, " two at once keep, while the device copies H2D / D2H / both ways:")
		for _, r := range p.StagingDMABySize {
			fmt.Fprintf(w, " %s %.0f/%.0f/%.0f%%;", humanBytes(int64(r.Bytes)), 100*r.H2D, 100*r.D2H, 100*r.Both)
		}
	case p.StagingDMA > 0:
		fmt.Fprintf(w, " while the device copies both ways, %.0f%% of that rate", 100*p.StagingDMA)
	}
	fmt.Fprintln(w)
	printStagingInRun(w, p, "")
}

// printStagingInRun prints p's in-run staging rates, if it has them.
func printStagingInRun(w io.Writer, p *sim.Profile, which string) {
	if len(p.StagingInRun) == 0 {
		return
	}
	fmt.Fprintf(w, "staging copies in a staged run%s (in / out, each; alone faster by):", which)
	for _, r := range p.StagingInRun {
		fmt.Fprintf(w, " %s %.1f/%.1f GB/s x%.2f;", humanBytes(int64(r.Bytes)), r.InGBps, r.OutGBps, p.StagingAloneBoost(r.Bytes))
	}
	fmt.Fprintf(w, " and %.2f us a chunk besides the copies\n", p.StagingChunkNs/1e3)
}
