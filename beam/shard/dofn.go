package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/fileio"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem/local" // fileio matches local paths
	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/textio"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	beam.RegisterType(reflect.TypeOf((*Result)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Failure)(nil)).Elem())
	register.DoFn4x1[context.Context, string, func(Result), func(Failure), error](&ShardFn{})
	register.Emitter1[Result]()
	register.Emitter1[Failure]()
	register.Function1x1[fileio.FileMetadata, string](metadataPath)
	register.Function1x2[Result, string, error](resultLine)
	register.Function1x2[Failure, string, error](failureLine)
}

// Namespace is the Beam metrics namespace of the shard DoFn's metrics.
const Namespace = "overlap"

// The shard DoFn's metrics. Counters: shards (done), failed_shards (sent to
// the dead letter), rows, bytes (read), bytes_out (written), and
// bound_<stage> (one per shard, for the stage that bounded it: bound_read,
// bound_h2d, bound_compute, bound_d2h, bound_write). Distributions, in
// microseconds: shard_us on the engine's clock (virtual with --sim) and
// shard_wall_us on the wall clock. A Beam distribution holds integers, so
// the shard's seconds are kept in microseconds.
var (
	metShards   = beam.NewCounter(Namespace, "shards")
	metFailed   = beam.NewCounter(Namespace, "failed_shards")
	metRows     = beam.NewCounter(Namespace, "rows")
	metBytes    = beam.NewCounter(Namespace, "bytes")
	metBytesOut = beam.NewCounter(Namespace, "bytes_out")
	metEngine   = beam.NewDistribution(Namespace, "shard_us")
	metWall     = beam.NewDistribution(Namespace, "shard_wall_us")

	boundMu  sync.Mutex
	metBound = map[string]beam.Counter{}
)

// BoundCounter is the name of the counter of shards bounded by stage.
func BoundCounter(stage string) string { return "bound_" + stage }

func boundCounter(stage string) beam.Counter {
	boundMu.Lock()
	defer boundMu.Unlock()
	c, ok := metBound[stage]
	if !ok {
		c = beam.NewCounter(Namespace, BoundCounter(stage))
		metBound[stage] = c
	}
	return c
}

// ShardFn is the Beam DoFn that processes shards: each element is one
// shard's path, each output a Result, each shard its data failed a Failure
// on the second (dead-letter) output. Any other failure (the engine, the
// output, a cancellation) fails the bundle, which the runner retries; no
// attempt leaves a partial output under the final name (ProcessShard).
//
// Setup takes a lease on the Processor for Spec from the process-wide
// registry, opening its engines (one per GPU) if no other DoFn instance of
// the process holds them, and Teardown gives it back: the engines close
// when the last instance leaves. Beam's Go harness on portable runners
// (prism, Dataflow, Flink) does not call Teardown: as of v2.77.0 it caches
// each bundle's plan for reuse and never takes one down. So a lease is also
// given back when the context Setup was called with ends, which is when
// its worker stops; a shard in progress keeps the engines open until it
// returns.
type ShardFn struct {
	Spec   Spec   `json:"spec"`
	OutDir string `json:"out_dir"`

	lease *Lease
	stop  func() bool
}

// Setup creates the output directory and takes a lease on the Processor.
func (f *ShardFn) Setup(ctx context.Context) error {
	if f.OutDir == "" {
		return errors.New("shard: ShardFn needs an output directory")
	}
	if err := os.MkdirAll(f.OutDir, 0o755); err != nil {
		return fmt.Errorf("shard: %w", err)
	}
	return f.acquire(ctx)
}

// acquire takes a lease that is given back when ctx ends, if Teardown has
// not given it back first.
func (f *ShardFn) acquire(ctx context.Context) error {
	l, err := Acquire(f.Spec)
	if err != nil {
		return err
	}
	f.lease = l
	f.stop = context.AfterFunc(ctx, func() {
		if err := l.Release(); err != nil {
			log.Warnf(context.Background(), "shard: closing the processor: %v", err)
		}
	})
	return nil
}

// ProcessElement processes one shard.
func (f *ShardFn) ProcessElement(ctx context.Context, shard string, emit func(Result), dead func(Failure)) error {
	if f.lease == nil || f.lease.Released() {
		// The context Setup had ended and its lease with it, yet the runner
		// uses the instance again: take a lease for this context.
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f.acquire(ctx); err != nil {
			return err
		}
	}
	var res Result
	err := f.lease.Use(func(p Processor) error {
		var err error
		res, err = ProcessShard(ctx, p, shard, f.OutDir)
		return err
	})
	if err != nil {
		if !IsDataError(err) {
			return err
		}
		fail := Failure{Shard: shard, Offset: -1, Error: err.Error()}
		var re *RowError
		if errors.As(err, &re) {
			fail.Offset = re.Offset
		}
		log.Warnf(ctx, "%v (sent to the dead letter)", err)
		metFailed.Inc(ctx, 1)
		dead(fail)
		return nil
	}
	metShards.Inc(ctx, 1)
	metRows.Inc(ctx, res.Rows)
	metBytes.Inc(ctx, res.InBytes)
	metBytesOut.Inc(ctx, res.OutBytes)
	metEngine.Update(ctx, res.EngineMicros)
	metWall.Update(ctx, res.WallMicros)
	if res.Bound != "" {
		boundCounter(res.Bound).Inc(ctx, 1)
	}
	emit(res)
	return nil
}

// Teardown gives the lease back.
func (f *ShardFn) Teardown() error {
	if f.stop != nil {
		f.stop()
	}
	if f.lease == nil {
		return nil
	}
	return f.lease.Release()
}

// The files Build writes in the output directory besides the outputs, one
// JSON object a line, each written only when it has a line: DoneFile, a
// Result for each shard done; FailedFile, the dead letter, a Failure for
// each shard its data failed ({"shard":…,"offset":…,"error":…}).
//
// DoneFile is what a command should summarise a run from: the metrics
// count the same shards, but prism (v2.77.0) can drop the first report of
// a counter when two bundles report it at once, so its totals may fall
// short.
const (
	DoneFile   = "_done.jsonl"
	FailedFile = "_failed.jsonl"
)

// Options say what Build runs.
type Options struct {
	// Input is a glob of shard files, as the workers see them ('data/*.f32').
	Input string
	// Output is the directory the outputs and the dead-letter file go to.
	Output string
	Spec   Spec
}

// Build adds the sharded run to s: it matches Input (no match fails the
// run), spreads the shards over the workers (a reshuffle), runs ShardFn on
// each, and writes the results to Output/DoneFile and the failures to
// Output/FailedFile. It returns the results and the failures.
func Build(s beam.Scope, o Options) (results, failures beam.PCollection) {
	s = s.Scope("overlap.Shards")
	files := fileio.MatchFiles(s, o.Input, fileio.MatchEmptyDisallow())
	paths := beam.Reshuffle(s, beam.ParDo(s, metadataPath, files))
	results, failures = Apply(s, o.Spec, o.Output, paths)
	textio.Write(s.Scope("done"), filepath.Join(o.Output, DoneFile), beam.ParDo(s, resultLine, results))
	textio.Write(s.Scope("failed"), filepath.Join(o.Output, FailedFile), beam.ParDo(s, failureLine, failures))
	return results, failures
}

// Apply runs ShardFn over paths, a PCollection of shard paths, writing to
// outDir, and returns its results and its dead-letter failures.
func Apply(s beam.Scope, spec Spec, outDir string, paths beam.PCollection) (results, failures beam.PCollection) {
	return beam.ParDo2(s, &ShardFn{Spec: spec, OutDir: outDir}, paths)
}

func metadataPath(m fileio.FileMetadata) string { return m.Path }

func resultLine(r Result) (string, error) {
	b, err := json.Marshal(r)
	return string(b), err
}

func failureLine(f Failure) (string, error) {
	b, err := json.Marshal(f)
	return string(b), err
}
