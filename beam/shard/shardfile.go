package shard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Result is one shard's outcome: the shard DoFn's main output.
type Result struct {
	Shard  string `json:"shard"`  // the input's path
	Output string `json:"output"` // where its output is
	Rows   int64  `json:"rows"`
	// InBytes and OutBytes are the bytes read and written.
	InBytes  int64 `json:"in_bytes"`
	OutBytes int64 `json:"out_bytes"`
	// EngineMicros is the shard's time on the engine's clock (the
	// simulator's prediction with --sim); WallMicros is the wall clock's.
	EngineMicros int64 `json:"engine_us"`
	WallMicros   int64 `json:"wall_us"`
	// Bound names the stage that bounded the shard (Stats.Bound).
	Bound   string `json:"bound,omitempty"`
	Backend string `json:"backend,omitempty"`
}

// Failure is a shard that its data failed: it is not a whole number of
// rows, or it cannot be read. The shard DoFn sends it to its dead-letter
// output instead of failing the bundle, since a retry would fail again.
type Failure struct {
	Shard string `json:"shard"`
	// Offset is the byte where the shard's data went wrong (a partial
	// row's start), or -1.
	Offset int64  `json:"offset"`
	Error  string `json:"error"`
}

// OutputSuffix is appended to a shard's base name to name its output.
const OutputSuffix = ".out"

// OutputName returns the path of shard's output in dir:
// dir/<base name of shard>.out.
func OutputName(dir, shard string) string {
	return filepath.Join(dir, filepath.Base(shard)+OutputSuffix)
}

// IsDataError reports whether err is a shard's data at fault (a partial row,
// an input that cannot be read), which retrying cannot fix, rather than
// the engine, the output or a cancellation.
func IsDataError(err error) bool {
	return errors.Is(err, ErrPartialRow) || errors.Is(err, ErrBadInput)
}

// ProcessShard runs shard, a file of raw rows, through p into
// OutputName(outDir, shard). The output is written to a temporary file in
// outDir, fsynced, and renamed over the final name only when p succeeded,
// so the final name holds either nothing or a whole output; a retry or a
// duplicate attempt of the same shard renames an identical file over it.
// On failure nothing of this attempt is left in outDir.
//
// A shard whose size is not a whole number of p's rows fails before any
// work with a *RowError; one that cannot be opened or is not a regular file
// fails with an error wrapping ErrBadInput. Both satisfy IsDataError.
func ProcessShard(ctx context.Context, p Processor, shard, outDir string) (Result, error) {
	res := Result{Shard: shard, Output: OutputName(outDir, shard)}
	if p == nil || shard == "" || outDir == "" {
		return res, errors.New("shard: ProcessShard needs a processor, a shard and an output directory")
	}
	in, err := os.Open(shard)
	if err != nil {
		return res, fmt.Errorf("shard: %w: %w", ErrBadInput, err)
	}
	defer in.Close()
	info, err := in.Stat()
	if err != nil {
		return res, fmt.Errorf("shard: %w: %w", ErrBadInput, err)
	}
	if !info.Mode().IsRegular() {
		return res, fmt.Errorf("shard: %w: %s is not a regular file (%s)", ErrBadInput, shard, info.Mode().Type())
	}
	rb := int64(p.RowBytes())
	if rb <= 0 {
		return res, fmt.Errorf("shard: the processor's rows are %d bytes", rb)
	}
	if rem := info.Size() % rb; rem != 0 {
		return res, &RowError{Shard: shard, Offset: info.Size() - rem, Size: info.Size(), RowBytes: int(rb), Row: describeRow(p)}
	}

	tmp, err := os.CreateTemp(outDir, "."+filepath.Base(res.Output)+".*.tmp")
	if err != nil {
		return res, fmt.Errorf("shard: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	t0 := time.Now()
	st, err := p.Process(ctx, in, tmp)
	res.WallMicros = time.Since(t0).Microseconds()
	res.Rows, res.InBytes, res.OutBytes = st.Rows, st.InBytes, st.OutBytes
	res.EngineMicros, res.Bound, res.Backend = st.Elapsed.Microseconds(), st.Bound, st.Backend
	if err != nil {
		var re *RowError
		if errors.As(err, &re) {
			re.Shard = shard
			if re.Size < 0 {
				re.Size = info.Size()
			}
			if re.Row == "" {
				re.Row = describeRow(p)
			}
			return res, re
		}
		return res, fmt.Errorf("shard: %s: %w", shard, err)
	}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("shard: %s: %w", shard, err)
	}
	// CreateTemp makes the file private; the output is as readable as a
	// file os.Create makes under the usual umask.
	if err := tmp.Chmod(0o644); err != nil {
		return res, fmt.Errorf("shard: %s: %w", shard, err)
	}
	if err := tmp.Sync(); err != nil {
		return res, fmt.Errorf("shard: %s: syncing the output: %w", shard, err)
	}
	if err := tmp.Close(); err != nil {
		return res, fmt.Errorf("shard: %s: closing the output: %w", shard, err)
	}
	if err := os.Rename(tmp.Name(), res.Output); err != nil {
		return res, fmt.Errorf("shard: %s: %w", shard, err)
	}
	committed = true
	syncDir(outDir)
	return res, nil
}

// syncDir makes a rename in dir durable, where the system allows it: the
// rename itself is atomic either way, so a failure here (Windows cannot
// sync a directory; some file systems refuse) is not an error of the shard.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}
