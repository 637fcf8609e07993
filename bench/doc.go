// Package bench holds overlap's benchmarks and its CUDA C++ reference
// programs, and runs those programs for side-by-side comparisons.
//
// The measurements behind overlap's commands are functions here that a
// Go program can call: [SmallJobs] (jobs/s and latency percentiles of
// small jobs from goroutines started together behind a barrier, with one
// shared deadline), [Scaling] (the seed job over 1 to k devices),
// [Stream] (a file through a kernel with bounded memory, and its bound),
// [InferInMemory] and [InferStream] (a model over rows in memory against
// the synchronous baseline, or streamed), [InferReference] (the PyTorch
// twin, reference/mlp_torch.py, then ours over its rows, every value
// compared) and its parts [RunTorchTwin] and [CompareWithFile], [Run]
// (a job's synchronous baseline, its pipelined runs and their stage
// bound, as overlap run measures them), [Sweep] (overlap bench's
// configurations, with [WriteSweepCSV] and [SweepSVG]) and [Tune] (a
// cost model fitted to probes, and its best candidate measured);
// [WriteTrace] and [WriteTimelineSVG] draw a run's spans. The machine
// that the commands run on is [OpenMachine]'s [Machine] (GPU contexts or
// simulated devices, with a kernel loaded on each), and a job's host data
// its [Machine.NewWorkload]; [ChooseChunk] picks a job's chunk size from
// probes or a [TuneCache], and [CheckHostMemory] refuses arrays that the
// host has no memory for. Each
// takes an options struct whose zero fields take defaults, and an
// optional Progress callback; each returns its figures and never prints.
// Their errors are a *[Error] that names the function. They run on any
// pipeline.Backend, the simulator's (*sim.Sim) included, whose
// goroutines they fork together on its host so that its virtual clock
// gives every run the same times.
//
// Each benchmark checks its options before it runs, and the checks are
// functions of their own ([CheckStream], [CheckSweep], [CheckScaling],
// [CheckSmallJobs], and [CheckWork] and [CheckChunks] for the size of a
// pass), so that a command can refuse its flags before it opens a GPU.
// Their errors are *[OptionError]s, which name the options by their
// fields, or by the names a caller gives them ([OptionError.Text]).
//
// The tables that overlap prints are writers here too, a format of each
// result beside its JSON: [RunSummary.WriteTable], [WriteSweepTable],
// [WriteScalingTable], [SmallJobsResult.WriteTable],
// [StreamResult.WriteTable], [TuneResult.WriteTable] and
// [WriteDevicesTable] (of [DescribeDevices]). A command prints its own
// notes, such as those that name its flags, around them.
//
// The Go benchmarks (go test -bench) cover the pipeline on the lecture's
// workload in every host mode; package driver's own benchmarks cover call
// cost, launch cost and bandwidth. The reference programs in reference/
// are hand-written, hazard-correct CUDA C++: pipeline.cu (pinned memory,
// three streams, events), launch.cu (launch cost and bandwidth), multi.cu
// and smalljobs.cu; dlopen.c measures launch and copies, and dljobs.c a
// small job, in plain C with the driver loaded by dlopen, as purego loads
// it (both built by hand with cc; dlload.h is what they share), and
// cloops.c holds their loops for a Go process to call too.
// [BuildReference] compiles them with nvcc where it exists; `overlap bench
// --reference` runs them on the same configurations as the Go pipeline and
// reports the ratio. bench/RESULTS.md records the figures.
//
// # Concurrency
//
// The functions here are safe to call from any goroutine; the
// measurements start goroutines of their own and are done with them when
// they return. Two measurements on one GPU at once time each other.
//
// # Memory
//
// A measurement allocates what it times and frees it before it returns.
// A [Machine] holds its contexts and modules, and a [Workload] its pinned
// host memory, until Close.
package bench
