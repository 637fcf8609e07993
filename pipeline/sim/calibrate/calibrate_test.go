package calibrate

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
)

// TestBadArguments: a Device without a Backend, a nil profile and options
// out of range are errors that name the call, never a panic, and come
// before anything is measured.
func TestBadArguments(t *testing.T) {
	sdev := Device{Backend: sim.New(1, 0)}
	prof := sim.BuiltinProfile()
	ctx := context.Background()
	measure := func(d Device, o Options) error { _, err := Measure(ctx, d, o); return err }
	validate := func(d Device, p *sim.Profile, o Options) error { _, err := Validate(ctx, d, p, o); return err }
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"Measure without a backend", measure(Device{}, Options{}), "calibrate: Measure: the Device has no Backend"},
		{"Measure of a small job", measure(sdev, Options{Elems: 1000}), "calibrate: Measure: Elems 1000: want 64K or more"},
		{"Validate without a backend", validate(Device{}, prof, Options{}), "calibrate: Validate: the Device has no Backend"},
		{"Validate of no profile", validate(sdev, nil, Options{}), "calibrate: Validate: no profile"},
		{"Validate of negative rounds", validate(sdev, prof, Options{Rounds: -1}), "calibrate: Validate: Rounds -1: must not be negative"},
		{"Validate of a profile without issue loops", validate(sdev, &sim.Profile{}, Options{Elems: 1 << 16}), "calibrate: Validate: the profile has 0 issue loops, not 3"},
	} {
		assert.EqualError(t, c.err, c.want, c.name)
	}
}

// TestOptionsDefaults: the zero Options are the command's defaults.
func TestOptionsDefaults(t *testing.T) {
	o, err := Options{}.withDefaults("Measure")
	assert.NoError(t, err)
	assert.Equal(t, Options{Elems: 128 << 20, Rounds: 3, By: "calibrate.Measure"}, o)
	o, err = Options{Elems: 1 << 16, Rounds: 1, By: "me"}.withDefaults("Measure")
	assert.NoError(t, err)
	assert.Equal(t, Options{Elems: 1 << 16, Rounds: 1, By: "me"}, o)
}
