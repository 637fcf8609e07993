package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// stopSignals are the signals that stop a command cleanly: SIGINT
// (Ctrl-C) and SIGTERM (kill, a container's stop). A second one, once
// the first has been taken, ends the process at once, as without
// handling.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// signalError is a command stopped by a signal: the work in flight
// drained, and err is what the command returned then.
type signalError struct {
	sig os.Signal
	err error
}

func (e *signalError) Error() string { return signalWord(e.sig) }
func (e *signalError) Unwrap() error { return e.err }

// signalWord says what happened in the words a shell uses.
func signalWord(sig os.Signal) string {
	if sig == syscall.SIGTERM {
		return "terminated (SIGTERM)"
	}
	return "interrupted (SIGINT)"
}

// exitCode is 128 + the signal's number, as a shell reports a process
// that a signal ended: 130 for SIGINT, 143 for SIGTERM.
func (e *signalError) exitCode() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 128 + 2
}

// drainGrace is how long a command has, once a stop signal has arrived,
// to drain the work in flight and return. Past it the process exits, with
// the signal's exit code and one line that says so: a step that cannot be
// interrupted (the simulator computes a launch's kernel on the CPU, which
// for the synchronous baseline over 128M elements took 144 s on two
// cores; a kernel of the user's own that never ends) must not keep a
// stopped command alive. A container's stop allows 10 s before SIGKILL.
var drainGrace = 5 * time.Second

// signalContext returns a context that ends when one of stopSignals
// arrives, with the signal as its cause (see stoppedBy). Should cmd not
// have called stop within drainGrace of the signal, the process exits
// (see drainGrace), saying so on stderr. stop releases the signals and
// that deadline; call it as soon as the command's work has returned,
// before reporting, and again as often as convenient.
func signalContext(cmd string, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, stopSignals...)
	done := make(chan struct{})
	var mu sync.Mutex // held while exiting, and by stop: the one or the other
	stopped := false
	graceFor := drainGrace // read here, once: a test sets it around its call
	go func() {
		var sig os.Signal
		select {
		case sig = <-ch:
			signal.Reset(stopSignals...) // the next one ends the process
			cancel(&signalError{sig: sig})
		case <-done:
			return
		}
		grace := time.NewTimer(graceFor)
		defer grace.Stop()
		select {
		case <-grace.C:
			mu.Lock()
			if stopped {
				mu.Unlock()
				return
			}
			se := &signalError{sig: sig}
			fmt.Fprintf(stderr, "%s; still busy %g s after the signal, so overlap exits without waiting for the work in flight\n", signalLine(cmd, se), graceFor.Seconds())
			runGraceCleanups()
			os.Exit(se.exitCode())
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			mu.Lock()
			stopped = true
			mu.Unlock()
			signal.Stop(ch)
			close(done)
			cancel(nil)
		})
	}
}

// graceCleanups are what the grace exit (signalContext) runs before the
// process exits without returning: the removal of each temporary folder
// a command made, which its deferred calls would have run.
var graceCleanups struct {
	sync.Mutex
	next int
	fns  map[int]func()
}

// atGraceExit registers fn to run should the grace exit end the process,
// and returns the command's own call of it: it unregisters fn and runs
// it, once, however often it is called.
func atGraceExit(fn func()) (run func()) {
	graceCleanups.Lock()
	if graceCleanups.fns == nil {
		graceCleanups.fns = map[int]func(){}
	}
	key := graceCleanups.next
	graceCleanups.next++
	graceCleanups.fns[key] = fn
	graceCleanups.Unlock()
	return func() {
		graceCleanups.Lock()
		f, ok := graceCleanups.fns[key]
		delete(graceCleanups.fns, key)
		graceCleanups.Unlock()
		if ok {
			f()
		}
	}
}

// runGraceCleanups runs what atGraceExit registered and the commands have
// not run themselves, for at most graceCleanupLimit: the process is
// exiting because it is stuck, and a removal that hangs too (a folder on
// a dead network mount) must not keep it alive. It keeps the lock, so
// that no cleanup is registered or run by its command after it.
func runGraceCleanups() {
	graceCleanups.Lock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for key, f := range graceCleanups.fns {
			delete(graceCleanups.fns, key)
			f()
		}
	}()
	select {
	case <-done:
	case <-time.After(graceCleanupLimit):
	}
}

// graceCleanupLimit bounds runGraceCleanups.
const graceCleanupLimit = 2 * time.Second

// stoppedBy returns err as a *signalError when ctx ended on a signal, and
// err as it is otherwise: a command that a signal stopped says so, not
// "context canceled". So it does when its work returned no error after
// the signal (a step that does not look at ctx, such as checking every
// element of the results, finished the work): a command asked to stop
// exits as stopped, not with 0 (the trial's bench small-jobs, SIGTERM at
// 3 s).
func stoppedBy(ctx context.Context, err error) error {
	var se *signalError
	if errors.As(err, &se) || !errors.As(context.Cause(ctx), &se) {
		return err
	}
	return &signalError{sig: se.sig, err: err}
}

// partialOutput is a streaming run's failure with what its output file
// holds: an exact prefix of the correct output, bytes long, or all of it
// (complete) when what failed came after the run.
type partialOutput struct {
	err      error
	name     string
	bytes    int64
	complete bool
}

func (e *partialOutput) Error() string {
	if e.complete {
		return e.err.Error()
	}
	return fmt.Sprintf("%v (%s holds the first %d bytes of the correct output, %d elements)", e.err, e.name, e.bytes, e.bytes/4)
}

func (e *partialOutput) Unwrap() error { return e.err }

// signalLine is the one line for a command that a signal stopped: what
// happened and, for a streaming run, what its output holds.
func signalLine(cmd string, se *signalError) string {
	line := fmt.Sprintf("overlap %s: %s", cmd, signalWord(se.sig))
	var po *partialOutput
	if !errors.As(se.err, &po) {
		return line
	}
	name, holds := po.name, "holds"
	if name == "-" {
		name, holds = "stdout", "got"
	}
	if po.complete {
		return line + fmt.Sprintf(" after the run; %s %s all %d bytes of the output (%d elements)", name, holds, po.bytes, po.bytes/4)
	}
	return line + fmt.Sprintf("; %s %s the first %d bytes of the correct output (%d elements)", name, holds, po.bytes, po.bytes/4)
}
