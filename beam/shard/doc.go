// Package shard runs overlap's engine as a step of an Apache Beam pipeline,
// to scale a batch job past one host: the input is a set of shard files of
// raw rows, each shard one element (its path), each streamed through a
// Processor on a GPU of whichever worker takes it, each output written to
// a file named after its shard.
//
// It sits above packages pipeline, ptx/kernels and model, in a module of
// its own (github.com/purecuda/overlap/beam), so that overlap's own module
// does not depend on Beam.
//
// A [Processor] is the computation: it reads a shard's rows from an
// io.Reader and writes the result's rows to an io.Writer. Two are built
// in, each run by Pipeline.RunStream on a GPU, or on the simulator with
// [Spec].Sim: [Kernel] (registered as "kernel"), an embedded element-wise
// kernel (seed, axpb) whose row is one float32; and [MLP] (registered as
// "mlp"), a PyTorch-trained multilayer perceptron of package model read
// from the safetensors file [Spec].Model, whose row is the model's input
// (In float32) and whose output row is Out float32. Other processors are
// registered by name ([Register]) and chosen by [Spec].Processor; the DoFn
// does not change.
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
// a shard's processing holds nothing that grows with the shard. Each engine
// also measures its device stages once, over 2·Slots chunks of pinned
// memory (fewer where they would pass 512 MiB) that it frees at once: the
// kernel processor on its first shard, the mlp processor as it opens.
//
// The mlp processors of one Spec (one per device) share one model, loaded
// once in the process while any of them is open: its float32 weights on
// the host, and, from the first Verify, a float64 copy. Each device holds
// its own copy of the weights, uploaded as its processor opens and kept
// until it closes, beside the pipeline's scratch buffers for the
// activations between layers (per slot, at most two buffers of chunk rows
// of the widest hidden layer, as float32).
package shard
