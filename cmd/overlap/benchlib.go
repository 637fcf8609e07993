package main

import (
	"errors"

	"github.com/purecuda/overlap/bench"
)

// The measuring commands call package bench; these are the seams.

// line is a progress callback for package bench: it shows msg as the
// status line.
func (p *progress) line(msg string) { p.say("%s", msg) }

// benchError is err as overlap printed it before the measuring moved to
// package bench: a *bench.Error's cause, without its "bench: Op: ".
func benchError(err error) error {
	var be *bench.Error
	if errors.As(err, &be) {
		return be.Err
	}
	return err
}
