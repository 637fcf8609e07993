package main

import (
	"errors"
	"fmt"
	"strings"

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

// streamError is a streaming run's error as overlap prints it: a file
// that cannot be opened is a usage error of --in or --out, and a failure
// with output written says what the output holds (partialOutput).
func streamError(err error) error {
	err = benchError(err)
	var oe *bench.OpenError
	if errors.As(err, &oe) {
		flag := "--in"
		if oe.Output {
			flag = "--out"
		}
		return usageError{fmt.Errorf("%s: %w", flag, oe.Err)}
	}
	var po *bench.PartialOutput
	if errors.As(err, &po) {
		return &partialOutput{err: po.Err, name: po.Name, bytes: po.Bytes, complete: po.Complete}
	}
	return err
}

// flagWords says in flags what package bench's prose says in options:
// "(Verify reads …)" is "(--verify reads …)" here.
var flagWords = strings.NewReplacer("(Verify ", "(--verify ", "(TimingOnly)", "(--timing-only)").Replace

// flagError is err with a *bench.OptionError's fields named as names
// has them: their flags.
func flagError(err error, names map[string]string) error {
	var oe *bench.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	return errors.New(oe.Text(func(field string) string { return names[field] }))
}
