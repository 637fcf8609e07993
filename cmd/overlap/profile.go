package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
		// --out must not be --profile's file (the trial's wrote over
		// it), and is checked without being made: it was created empty
		// here, and an interrupted run left it so.
		return checkOutputFiles([]namedFile{{"out", o.out}}, []namedFile{{"profile", o.truth}})
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
	if err := calibrate.WriteProfile(w, prof); err != nil {
		return err
	}
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
	if err := calibrate.WriteValidatedHost(w, prof, scale); err != nil {
		return err
	}
	if o.out != "" {
		if err := prof.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s again, with those loops and staging rates\n", o.out)
	}
	return v.WriteTable(w, o.sim)
}
