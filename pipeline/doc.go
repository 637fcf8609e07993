// Package pipeline is overlap's engine: it splits a job over N elements into
// chunks and runs each chunk's host-to-device copy, kernel and
// device-to-host copy as a software pipeline on separate CUDA streams, so
// that copies in both directions overlap the kernels of other chunks and
// the whole job takes about as long as its slowest stage.
//
// It sits on package driver through a narrow [Backend] interface; [GPU]
// adapts a driver.Context. Package pipeline/sim is the other backend, a
// simulator of the GPU on the CPU with a hazard detector and a virtual
// clock, in a package of its own as net/http/httptest sits beside
// net/http: it needs only this package's exported interfaces, and this
// package imports none of it. What a backend can do beyond Backend it
// says through optional interfaces, as an http.ResponseWriter may be an
// http.Flusher: [HostTracker] (it follows each host goroutine on a clock
// of its own, and the engine tells it about the goroutines of a run and
// their handoffs), [HostSharer] (its devices share a host of its own
// making, which a [Group] checks), [MemoryReporter], [KernelNoter] and
// [HostAccessor].
// It does not import package ptx: a job's [Kernel] says how to launch it,
// how to resolve its function on each context and how to compute it on
// the CPU, and package ptx/kernels builds one for each of overlap's
// kernels.
//
// # Ordering
//
// Chunk c uses buffer slot c mod Slots. On [ScheduleEvents] every
// dependency is an event and a stream wait: a kernel waits for its H2D
// copy and the D2H copy waits for its kernel (read after write); the H2D
// copy into a slot waits for the kernel that last read that slot, and the
// kernel waits for the D2H copy that last read its output slot (write
// after read). The host waits only before it refills a pinned staging
// slot, and once at the end. Each buffer's slots are one device
// allocation, each slot 256-byte aligned, so the copies of small chunks in
// neighbouring slots are one copy (Config.CopyChunks), and such a group's
// copy in waits for the copy out of the group a ring back, which followed
// its kernels. On [ScheduleInStream] each
// chunk's copies and kernel go in order on one compute stream with slots
// of its own, and stream order is all the ordering: three calls a chunk
// instead of ten, for small whole jobs, whose time is their driver calls
// (Config.Schedule). A job of one chunk with nothing staged or timed goes
// on one stream too. No run replays a CUDA graph, since replaying a captured small
// job costs more than issuing its three calls (BenchmarkGraph in package
// driver; bench/RESULTS.md, "Graphs against stream issue, on the current
// binding"), so graphs are package driver's, for callers who build their
// own (driver.Graph).
//
// # Models
//
// A [Kernel] with Steps is several launches a chunk, in order on the
// chunk's compute stream, each with its own function, arguments and launch
// shape: a model's layers over a batch of rows ([Rows] wraps a slice of
// rows, and a Config's element size is then a row's bytes). Its Params
// (the weights) stay resident on each device: uploaded once, before the
// first run that uses the kernel, after a check that they fit in the
// device's free memory, and shared by every chunk. Its Scratch buffers
// (the activations between layers) are per slot, so that chunks in flight
// on several streams never share one. On the simulator each step runs its
// CPU stand-in, the hazard detector sees each step's Reads and Writes on
// the real buffers, every device address among its arguments is checked
// against them, and its time comes from its profile's entry of the step's
// name (Report.Notes says which names the profile lacks).
//
// # Host memory
//
// Data in pinned memory ([Pinned], a *driver.HostBuffer) is copied in
// place. Go slices are either staged through pinned slots by parallel
// goroutines, as pipeline stages of their own, or page-locked in place and
// the registration cached for later runs ([HostMode]). HostAuto picks.
//
// # Several GPUs
//
// A [Group] runs one job over several devices of a host: each device has
// a pipeline of its own and an issuing goroutine (a group of one device
// issues from the caller's, as a Pipeline does), and all of them take
// chunks from one shared queue as their slots free up, so a slower or
// busier device runs fewer chunks and the result is the one a single
// device gives. Go memory is registered once, portable, for every device;
// pinned buffers that a job brings must be portable
// (driver.HostAllocOptions.Portable). [Group.StageTimes] measures the
// group's bound with every device running each stage at once, including
// the copies in both directions at once, which a host link shared by the
// GPUs limits (bench/RESULTS.md, "One job over two H200s").
// [Group.Warm] keeps the devices busy with a job's copies and kernels,
// writing none of its outputs, so that a timed run right after starts on
// GPUs at their working clocks: an idle GPU runs its SMs at a fraction of
// them (bench/RESULTS.md, "The README's job: a cold GPU, not the model").
//
// # Streaming
//
// [Pipeline.RunStream] takes its inputs as io.Readers and writes its
// outputs to io.Writers, chunk by chunk, until the inputs end: N need not
// be known, and host memory stays bounded by the pinned slots whatever the
// length. Files are read with pread by several goroutines straight into
// the slots and written from them with pwrite ([StreamJob] says which
// streams qualify); pipes and sockets are read and written in order.
// Files opened with O_DIRECT ([OpenDirect], [CreateDirect]) move between
// the disk and the slots past the page cache, and StreamJob.Preallocate
// allocates an output's blocks before the first write.
// [Batches] feeds a loader's []T batches (values, or rows of them)
// through the same path and yields each batch's result in order, on a
// pipeline or a group. [Group.RunStream] streams over every device of a
// group: one set of readers and writers, a ring of all the devices' slots,
// and each device taking the next chunk read. StreamJob.Progress reports
// how far a run has got. A bad input ends the stream before the
// chunk it is in; a failed write or a cancellation stops the run; in every
// case each output holds an exact prefix of the correct output
// (StreamReport.OutputBytes), and the error is a *StreamError naming the
// stream, the byte offset and the cause. A job whose output is one of its
// inputs, however the file is reached, is refused before anything is read
// ([SameFile]).
//
// # Concurrency
//
// A Pipeline runs one job at a time; concurrent Runs queue. Many pipelines
// may share one driver.Context and run concurrently. Run binds its
// goroutine to an OS thread while it issues; on Linux the GPU backend
// also pins that thread, for the run, to the CPUs local to the GPU (sysfs
// local_cpulist of its PCI bus id) when they are fewer than the thread may
// use, and restores it after; elsewhere no thread is pinned. A backend
// made by [GPUWith] with DirectCalls issues the copies and launch of a
// run of one chunk without the Go scheduler's system-call transition (see
// driver.BindOptions): faster, but a call that blocks in the driver holds
// up the garbage collector's stop-the-world; runs of several chunks and
// every wait keep the safe path. A Group runs one job at a time too, each
// device's issuing on a goroutine of its own, but for a group of one
// device, which issues from the caller's goroutine. A streaming run adds reader
// and writer goroutines for its run only; it returns after every Read and
// Write it started has returned.
//
// A panic in the caller's code that a run calls while it issues (a
// kernel's or a step's Args) reaches the
// caller's goroutine, from Run, StageTimes and RunStream of a Pipeline
// and of a Group, once the run's goroutines have stopped and what it had
// queued has drained: a caller may recover it and run again. A group's
// other devices stop taking chunks. So does a panic in a streaming run's
// Read or Write, which its workers call: the run stops and tears down as
// a failed one does, and the panic goes on from RunStream. A CPU
// stand-in that panics on the simulator faults its device instead (see
// package pipeline/sim): the run fails, and the pipeline closes.
//
// On a [HostTracker] backend every goroutine of a run (the caller of Run,
// the staging goroutines, a group's issuing goroutines, a streaming run's
// readers, writers and workers) is announced to the backend when it
// starts and ends, and every wait of one for another is announced with
// the handoff that ends it, through one type of the engine's (a handoff:
// a counter advanced and waited for, a flag, a start and a join, a stop).
// The engine stores the backend's clocks and hands them back but never
// reads or merges them itself, so that a backend's notion of time stays
// its own. Package pipeline/sim's documentation says what that means for
// a simulated run: in short, a goroutine the engine did not announce, and
// a wait the simulator cannot see, hold its virtual clock back.
//
// # Memory
//
// A Pipeline allocates its streams, events, device slots and staging slots
// once and frees them on Close. Its runs allocate no device memory but for
// a kernel's resident parameters, on its first run, and scratch buffers,
// on the first run that needs them larger (both kept until Close; the
// parameters of at most 4 kernels). The slots are sized by the chunk, not
// the job, so package driver's
// stream-ordered pools (driver.MemPool, Stream.AllocAsync) are for
// callers' own allocations ([Synchronous], the whole-array baseline,
// allocates its device arrays per call). A streaming run uses the staging
// slots (Slots × chunk bytes per input and per output) and nothing that grows
// with the stream. Registered Go memory stays page-locked, and
// reachable, until it is evicted (Config.MaxRegistered), unregistered
// (Pipeline.Unregister) or the pipeline is closed. A Group holds one
// pipeline's slots per device and one registration cache for all of them,
// and each device its own copy of a kernel's parameters.
// A run reuses the pipeline's own bookkeeping: on a GPU, a job of one
// chunk on pinned memory, untimed, allocates only the Report that Run
// returns, and nothing through RunInto, so a loop of small jobs leaves
// the collector idle (on a host where the issuing thread is pinned to the
// GPU's CPUs, reading the thread's CPUs back allocates).
package pipeline
