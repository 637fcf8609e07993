// Package calibrate measures a device profile ([sim.Profile]) on a
// GPU, and validates the simulator against it: [Measure] times copies,
// kernels, the host's driver calls in each state, the device's costs of
// waits and dependencies between streams, the engine's own issue loop,
// staging copies alone and in staged runs, and the GEMM kernels, all
// through the pipeline's [pipeline.Backend] interface; [Validate] runs
// 26 configurations of the engine ([Configs]) on the device, verifies
// every element, and compares each time with the simulator's prediction
// from the profile. `overlap profile` is this package's command.
//
// It sits above package pipeline and its simulator, as the simulator's
// measuring instrument: many figures are fitted by predicting the same
// work on a timing-only simulator of the figures measured so far. A
// [Device] with a GPU context measures that GPU; one without is a
// simulated device, which Measure then measures at smaller chunks (a
// self-test: measuring the simulator gives back the profile it runs on).
//
// Both return data and print nothing: an optional Options.Progress
// callback is told what each part measures as it starts.
// [WriteProfile], [WriteValidatedHost] and [Validation.WriteTable]
// write their results as the text that overlap profile prints.
//
// # Concurrency
//
// Measure and Validate use the device alone for as long as they run (they
// time it), and start goroutines of their own only to stage copies in
// both directions at once, through one helper that makes them host
// actors of the virtual clock on a simulated device. Options.Progress is
// called on the caller's goroutine. A Device may be measured by one call
// at a time.
//
// # Memory
//
// Measure allocates its own buffers through the Device's Backend: on a
// GPU, up to 384 MiB of pinned memory for its stage timings, 128 MiB of
// Go memory staged through as much pinned memory, and Options.Elems/2
// float32s each way for its staged runs. Validate holds one job's memory
// for each kernel and host mode at once, 33 bytes per element of
// Options.Elems (4.1 GiB at the default 128M), pinned for the pinned
// configurations, and the staged runs' 4 bytes per element more. Both
// free all of it before they return.
package calibrate
