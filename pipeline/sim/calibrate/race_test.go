//go:build race

package calibrate

// raceEnabled: this test binary has the race detector, under which the
// simulator's CPU work runs many times slower.
const raceEnabled = true
