//go:build !race

package calibrate_test

import (
	"context"
	"fmt"
	"math"

	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/pipeline/sim/calibrate"
)

// Measuring a simulated device, which runs on the built-in profile, and
// validating the simulator against what was measured: on a GPU, the
// Device has the GPU's backend and context instead (pipeline.GPU(ctx),
// ctx). The simulator computes every element on the CPU, so the job is
// small, and one round is enough: its clock does not drift.
func Example() {
	truth := sim.BuiltinProfile()
	d := calibrate.Device{Backend: sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(truth)}
	o := calibrate.Options{Elems: 64 << 10, Rounds: 1}
	ctx := context.Background()
	prof, err := calibrate.Measure(ctx, d, o)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("measured:", prof.Device)
	fmt.Println("the profile passes Check:", prof.Check() == nil)
	fmt.Printf("H2D copies within 1%% of the truth: %v\n", math.Abs(prof.H2D.GBps/truth.H2D.GBps-1) < 0.01)
	v, err := calibrate.Validate(ctx, d, prof, o)
	if err != nil {
		fmt.Println(err)
		return
	}
	within := 0
	for _, r := range v.Rows {
		if math.Abs(r.Err) < 0.10 {
			within++
		}
	}
	fmt.Printf("%d configurations validated, %d predicted within 10%%\n", len(v.Rows), within)
	// Output:
	// measured: simulator of NVIDIA H200
	// the profile passes Check: true
	// H2D copies within 1% of the truth: true
	// 26 configurations validated, 26 predicted within 10%
}
