//go:build race

package main

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = true
