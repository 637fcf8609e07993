package calibrate

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// Device is what [Measure] and [Validate] run on: a GPU, or a simulator
// standing in for one.
type Device struct {
	// Backend runs the work: pipeline.GPU(Context), or a simulated device.
	Backend pipeline.Backend
	// Context is the GPU's context that Backend drives; nil for a
	// simulator. With it, Measure reads the device's name and memory
	// and times the GEMM kernels at the GPU's shapes.
	Context *driver.Context
	// Modules loads the embedded kernels on Context. nil for a
	// simulator; nil with a Context, Measure and Validate load them into
	// modules of their own, which they close before they return.
	Modules *kernels.Modules
}

// simulated reports whether d is a simulator: a Device without a GPU
// context.
func (d Device) simulated() bool { return d.Context == nil }

// DefaultElems is Options.Elems when it is 0: the validation's seed job
// on a GPU.
const DefaultElems = 128 << 20

// DefaultRounds is Options.Rounds when it is 0.
const DefaultRounds = 3

// Options tune [Measure] and [Validate]; the zero value measures and
// validates as `overlap profile --validate` does on a GPU.
type Options struct {
	// Elems is the validation's seed job size, 64K or more (0:
	// DefaultElems). Chunk sizes scale with it, saxpy runs a quarter of
	// it, and the staged runs in which Measure times staging run half of
	// it, so Measure and Validate of one profile take the same Elems.
	Elems int
	// Rounds is how many rounds Validate times, each timing every
	// configuration once after an untimed run; each configuration takes
	// its median round (0: DefaultRounds).
	Rounds int
	// By names who measures, for the profile's Source ("measured by By
	// on ..."); "" is "calibrate.Measure".
	By string
	// Progress, when not nil, is told what is about to be measured, in a
	// few words, as each part starts. It is called on the goroutine that
	// called Measure or Validate.
	Progress func(what string)
}

// withDefaults returns o with its zero values replaced, or an error that
// names call for values out of range.
func (o Options) withDefaults(call string) (Options, error) {
	if o.Elems == 0 {
		o.Elems = DefaultElems
	}
	if o.Rounds == 0 {
		o.Rounds = DefaultRounds
	}
	switch {
	case o.Elems < 1<<16:
		return o, fmt.Errorf("calibrate: %s: Elems %d: want 64K or more", call, o.Elems)
	case o.Rounds < 0:
		return o, fmt.Errorf("calibrate: %s: Rounds %d: must not be negative", call, o.Rounds)
	}
	if o.By == "" {
		o.By = "calibrate.Measure"
	}
	return o, nil
}

// say tells o.Progress what starts now.
func (o Options) say(format string, args ...any) {
	if o.Progress != nil {
		o.Progress(fmt.Sprintf(format, args...))
	}
}

// open checks d for call and returns its kernel set, with a function that
// closes the modules it loaded for the set.
func (d Device) open(call string) (kernelSet, func(), error) {
	if d.Backend == nil {
		return kernelSet{}, nil, fmt.Errorf("calibrate: %s: the Device has no Backend", call)
	}
	if d.simulated() || d.Modules != nil {
		return kernelSet{mods: d.Modules}, func() {}, nil
	}
	mods := new(kernels.Modules)
	return kernelSet{mods: mods}, func() { mods.Close() }, nil
}

// kernelSet makes pipeline kernels from the kernel table, loaded on the
// GPU's context as first launched (mods is nil on the simulator).
type kernelSet struct{ mods *kernels.Modules }

// kernel returns row k as a pipeline kernel with the given scalars; the
// rows and scalars used here are fixed and valid.
func (ks kernelSet) kernel(k *kernels.Kernel, scalars ...float64) *pipeline.Kernel {
	pk, err := k.Pipeline(ks.mods, scalars...)
	if err != nil {
		panic(err)
	}
	return pk
}

// stagingKernel is the kernel of measureStagingInRun's staged runs, over
// half the validation's seed job: the validation's, on a GPU; on the
// simulator, which computes every element on the CPU, one that loops no
// more.
func stagingKernel(d Device, ks kernelSet) *pipeline.Kernel {
	if d.simulated() {
		return ks.kernel(kernels.Seed, 0)
	}
	return ks.kernel(kernels.Seed, 100)
}

// Measure measures a device profile on d: copies, kernels, the host's
// calls in each state, the device's costs of waits and dependencies, the
// engine's issue loop, staging copies alone and in staged runs of
// o.Elems/2 elements, the GEMM kernels and the device's memory. Each
// figure is timed through the pipeline's own interface, most against the
// simulator's prediction from the figures before it. The profile passes
// [sim.Profile.Check]; its Device names the GPU, or "simulator of"
// the profile that a simulated d runs on.
//
// On a simulator Measure uses smaller chunks, since the simulator
// computes every element on the CPU; its costs are linear, so nothing
// is lost. It takes tens of seconds on either.
func Measure(ctx context.Context, d Device, o Options) (*sim.Profile, error) {
	o, err := o.withDefaults("Measure")
	if err != nil {
		return nil, err
	}
	ks, closeKernels, err := d.open("Measure")
	if err != nil {
		return nil, err
	}
	defer closeKernels()
	prof, err := measure(ctx, d, ks, o)
	if err != nil {
		return nil, fmt.Errorf("calibrate: Measure: %w", err)
	}
	return prof, nil
}

func measure(ctx context.Context, d Device, ks kernelSet, o Options) (*sim.Profile, error) {
	small, large := 64<<10, 2<<20
	if d.simulated() {
		small, large = 32<<10, 128<<10
	}
	prof, err := measureProfile(ctx, d.Backend, ks, small, large, o)
	if err != nil {
		return nil, err
	}
	o.say("staging copies in staged runs")
	if err := measureStagingInRun(ctx, d.Backend, stagingKernel(d, ks), prof, o.Elems/2); err != nil {
		return nil, err
	}
	o.say("the GEMM kernels")
	if err := measureModelCosts(d, prof); err != nil {
		return nil, fmt.Errorf("measuring the GEMM kernels: %w", err)
	}
	if err := prof.Check(); err != nil {
		return nil, fmt.Errorf("the measured profile is unusable: %w", err)
	}
	if d.Context != nil {
		prof.Device, _ = d.Context.Device().Name()
	} else {
		prof.Device = "simulator of " + simulatedProfile(d.Backend).Device
	}
	prof.Source = fmt.Sprintf("measured by %s on %s, %s UTC, %d host threads", o.By, prof.Device, time.Now().UTC().Format("2006-01-02 15:04"), runtime.GOMAXPROCS(0))
	if d.Context != nil {
		v, _ := driver.DriverVersion()
		prof.Source += fmt.Sprintf(", driver CUDA %d.%d", v/1000, v%1000/10)
	}
	return prof, nil
}

// simulatedProfile is the profile that a simulated backend runs on (a
// Backend with a Profile method, as pipeline's simulator has), or an
// empty one when b says none.
func simulatedProfile(b pipeline.Backend) *sim.Profile {
	if s, ok := b.(interface{ Profile() *sim.Profile }); ok {
		if p := s.Profile(); p != nil {
			return p
		}
	}
	return &sim.Profile{}
}

// errNoProfile is Validate's error for a nil profile.
var errNoProfile = errors.New("calibrate: Validate: no profile")
