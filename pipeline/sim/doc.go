// Package sim is a simulator of the GPU for package pipeline: a
// [pipeline.Backend] that runs on the CPU, for tests and for machines
// without a GPU. It sits beside pipeline as net/http/httptest sits beside
// net/http: it needs only pipeline's exported interfaces, and pipeline
// imports none of it.
//
// A simulated device ([Sim], made by [New] or [Host.NewDevice]) moves
// real bytes and runs each kernel's CPU stand-in (pipeline.Kernel.CPU,
// or each step's), so that a run's outputs are the ones a GPU gives. It
// detects hazards ([Hazard]): unordered accesses to the same bytes,
// between streams, between the host and the device, and between host
// goroutines. And it keeps a virtual clock, driven by a device [Profile]
// (the built-in [BuiltinProfile] was measured on an H200; `overlap
// profile` measures one on any GPU), so that its reports, spans and stage
// times predict what the profiled GPU would do, whatever the speed of the
// machine that runs the simulation. How close those predictions come is
// measured in bench/RESULTS.md, in the sections on the simulator's
// predictions.
//
// Besides Backend, a Sim implements pipeline's optional interfaces:
// pipeline.HostTracker (the engine tells it about its goroutines and
// their handoffs, so that each has a virtual clock and the hazard
// detector sees their order), pipeline.HostSharer (a group's devices
// must share one [Host]), pipeline.MemoryReporter (its profile's device
// memory, less what is allocated), pipeline.KernelNoter (which kernels
// its profile has no cost for) and pipeline.HostAccessor (a streaming
// run's reads into pinned slots and writes out of them are host accesses
// that the detector sees).
//
// A CPU stand-in that panics is the simulator's faulting kernel: the
// launch completes in simulated time, and the device keeps the fault,
// which names the launch and the panic's value, and returns it from every
// operation after it, as a GPU's context fails every call after a kernel
// faults. A pipeline's run on it fails with the fault, and the pipeline
// closes itself.
//
// The package's files follow its parts: the host (host.go) and the
// device (device.go), hazards (hazard.go), memory and copies
// (memory.go), streams (stream.go), events (event.go), the issuer
// (issuer.go), the engine's host goroutines (tracker.go), the virtual
// clock (clock.go) and profiles (profile.go).
//
// # Concurrency
//
// A Sim is safe for concurrent use, as a GPU is: every object it hands out
// belongs to its [Host], whose one lock guards the simulation, and an
// Issuer belongs to the goroutine that took it, until Release. The bytes
// move under a lock of their own, so that a wrong schedule is reported as
// a hazard rather than racing in Go.
//
// The simulator tells host goroutines apart by their goroutine ids and
// gives each a clock. The simulation may process an event at a virtual
// time only when no goroutine that can still issue work (one that holds
// an Issuer, runs a pipeline's run, or was started with [Host.Go]) is
// behind that time and running: such a goroutine holds the simulation
// back until it blocks in the simulator or ends. So a goroutine that waits
// for something the simulator cannot see while it holds an Issuer stalls
// every other goroutine's waits on the same host. The engine's own
// goroutines, and their waits for each other, are announced through
// pipeline.HostTracker, so that a streaming run's times are virtual; a
// reader or writer that blocks (a slow pipe) holds the simulation back in
// wall time but takes no virtual time. Goroutines started with a plain go
// statement start at whatever virtual time the simulation has reached
// when they first call it; to drive several devices of one host at once,
// use Host.Go or [Host.GoTogether].
//
// # Memory
//
// Device memory is Go memory: AllocDevice allocates a slice, addressed
// at a fake device address of its own so that a kernel's arguments can be
// checked against the buffers it was given, and counted against the
// profile's device memory (Profile.DeviceMemoryBytes), so that an
// allocation beyond it fails with driver.ErrOutOfMemory as a GPU's would.
// Pinned memory is a Go slice of its own; Register uses the Go memory in
// place and refuses memory that another registration on the device holds,
// as the driver does (pipeline.ErrRegistered). Everything is freed by its
// Close, and [Sim.Live] counts what is still open, for leak tests. The
// hazard detector keeps the accesses of recent operations and drops
// those that every actor and stream is ordered after, and those that a
// later access of the same actor, bytes and kind supersedes, so that its
// memory follows the work in flight rather than the work done; a new
// access is checked against those that can overlap it, found by binary
// search, so that a run's cost grows with its chunks, not their square. A Host with [HostOptions].TimingOnly moves no bytes and
// computes nothing: only the clock runs, for predictions of jobs too large
// to compute on the CPU.
package sim
