// Package shard runs overlap's engine as a step of an Apache Beam pipeline,
// to scale a batch job past one host: the input is a set of shard files of
// raw rows, each shard one element (its path), each streamed through a
// Processor on a GPU of whichever worker takes it, each output written to
// a file named after its shard.
//
// It sits above packages pipeline and ptx/kernels, in a module of its own
// (github.com/purecuda/overlap/beam), so that overlap's own module does not
// depend on Beam.
//
// A [Processor] is the computation: it reads a shard's rows from an
// io.Reader and writes the result's rows to an io.Writer. [Kernel] is the
// one built in (registered as "kernel"): an embedded element-wise kernel
// (seed, axpb) run by Pipeline.RunStream on a GPU, or on the simulator with
// [Spec].Sim. Other processors, a model's layer stack say, are registered by
// name ([Register]) and chosen by [Spec].Processor; the DoFn does not change.
//
// [ShardFn] is the DoFn. A shard that is not a whole number of rows, or that
// cannot be read, goes to its second output as a [Failure] (a dead letter),
// naming the shard and the byte offset where its data went wrong, and the
// other shards go on; any other failure fails the bundle for the runner to
// retry. [ProcessShard] writes each output to a temporary file beside its
// final name, fsyncs it and renames it into place, so that a failed, retried
// or duplicated attempt never leaves a torn or doubled output under the
// final name. [Build] assembles the whole run: match a glob, reshuffle,
// process, write the dead letter.
//
// # Concurrency
//
// A Beam worker process runs several bundles at once, each with DoFn
// instances of its own. The registry shares one Processor per distinct Spec
// across all of them: [Acquire] opens it for the first user (one engine per
// GPU of the Spec, pooled so that each shard goes to the GPU with the fewest
// shards in progress) and the last [Lease.Release] closes it. Shards given to
// one engine at once run one after another on its pipeline. A Processor's
// Process must be safe for concurrent use.
//
// # Memory
//
// Each engine holds its pipeline's device and pinned slots (Slots × chunk
// bytes for the input and as much for the output) for as long as it is open;
// a shard's processing holds nothing that grows with the shard. The first
// shard on an engine also measures its device stages once, over 2·Slots
// chunks of pinned memory that it frees at once.
package shard
