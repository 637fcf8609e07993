package driver

import (
	"errors"
	"fmt"
)

// Wait is how a host thread waits for the GPU in a context's synchronising
// calls (Stream.Synchronize, Event.Synchronize, Context.Synchronize): the
// scheduling flags (CU_CTX_SCHED_*) of the device's primary context.
//
// Spinning answers fastest and burns a CPU core for as long as the wait
// lasts; yielding spins but lets other threads run; blocking sleeps on an
// OS primitive until the GPU signals, which costs a wake-up (microseconds)
// but no CPU time. The driver's own default (CU_CTX_SCHED_AUTO) spins when
// the process has fewer active CUDA contexts than the machine has CPUs,
// and yields otherwise.
type Wait int

const (
	// WaitDefault leaves the primary context's scheduling flags as they
	// are: the driver's default (CU_CTX_SCHED_AUTO) unless code in the
	// process has set others.
	WaitDefault Wait = iota
	// WaitSpin spins on the CPU (CU_CTX_SCHED_SPIN).
	WaitSpin
	// WaitYield spins, yielding the CPU between polls (CU_CTX_SCHED_YIELD).
	WaitYield
	// WaitBlock sleeps until the GPU is done (CU_CTX_SCHED_BLOCKING_SYNC).
	WaitBlock
	// WaitAuto is the driver's heuristic (CU_CTX_SCHED_AUTO) asked for
	// explicitly, replacing flags that other code may have set.
	WaitAuto
)

// CU_CTX_SCHED_* values.
const (
	ctxSchedAuto     = 0x0
	ctxSchedSpin     = 0x1
	ctxSchedYield    = 0x2
	ctxSchedBlocking = 0x4
	ctxSchedMask     = 0x7
)

var waitNames = [...]string{WaitDefault: "default", WaitSpin: "spin", WaitYield: "yield", WaitBlock: "block", WaitAuto: "auto"}

var waitFlags = [...]uint32{WaitSpin: ctxSchedSpin, WaitYield: ctxSchedYield, WaitBlock: ctxSchedBlocking, WaitAuto: ctxSchedAuto}

func (w Wait) valid() bool { return w >= WaitDefault && w <= WaitAuto }

// String returns the mode's name: "default", "spin", "yield", "block" or
// "auto".
func (w Wait) String() string {
	if w.valid() {
		return waitNames[w]
	}
	return fmt.Sprintf("Wait(%d)", int(w))
}

// ParseWait reads a mode's name as [Wait.String] writes it.
func ParseWait(s string) (Wait, error) {
	for w, name := range waitNames {
		if s == name {
			return Wait(w), nil
		}
	}
	return 0, fmt.Errorf("cuda: ParseWait: unknown wait mode %q: want spin, yield, block, auto or default", s)
}

// waitOf returns the mode that scheduling flags ask for.
func waitOf(flags uint32) Wait {
	switch flags & ctxSchedMask {
	case ctxSchedSpin:
		return WaitSpin
	case ctxSchedYield:
		return WaitYield
	case ctxSchedBlocking:
		return WaitBlock
	}
	return WaitAuto
}

// ErrWaitMode reports a primary context that is already active with other
// scheduling flags than a new Context asks for: the driver applies them
// only when the context is created.
var ErrWaitMode = errors.New("primary context already active with another wait mode")

// ContextOptions configure [NewContextWith]. The zero value is what
// [NewContext] does: the primary context as it is.
type ContextOptions struct {
	// Wait is how host threads wait for the GPU in synchronising calls.
	// Anything but WaitDefault is applied when the primary context is not
	// yet active (cuDevicePrimaryCtxSetFlags_v2); when it is active with
	// other flags, NewContextWith fails with ErrWaitMode.
	Wait Wait
}

// NewContextWith is [NewContext] with options. When opts.Wait asks for a
// mode, it sets the primary context's scheduling flags before retaining it
// (keeping its other flags), and checks afterwards that the retained
// context has them.
func NewContextWith(dev Device, opts ContextOptions) (*Context, error) {
	const op = "NewContextWith"
	if !opts.Wait.valid() {
		return nil, argError(op, "unknown wait mode %d", int(opts.Wait))
	}
	if err := dev.check(op); err != nil {
		return nil, err
	}
	if opts.Wait == WaitDefault {
		return NewContext(dev)
	}
	want := waitFlags[opts.Wait]
	flags, active, err := primaryState(dev)
	if err != nil {
		return nil, err
	}
	if active && flags&ctxSchedMask != want {
		return nil, waitModeError(op, dev, opts.Wait, flags)
	}
	if !active && flags&ctxSchedMask != want {
		if err := cuDevicePrimaryCtxSetFlags(dev.cu(), flags&^ctxSchedMask|want); err != nil {
			return nil, err
		}
	}
	c, err := NewContext(dev)
	if err != nil {
		return nil, err
	}
	// Another goroutine may have activated the context in between, with
	// other flags.
	if flags, _, err = primaryState(dev); err == nil && flags&ctxSchedMask != want {
		err = waitModeError(op, dev, opts.Wait, flags)
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func waitModeError(op string, dev Device, want Wait, flags uint32) error {
	return fmt.Errorf("cuda: %s: %w: GPU %d's primary context is active with wait mode %s, not %s; close every Context on it first, or ask for %s",
		op, ErrWaitMode, dev.ordinal, waitOf(flags), want, waitOf(flags))
}

// primaryState returns dev's primary context flags and whether it is
// active (cuDevicePrimaryCtxGetState).
func primaryState(dev Device) (flags uint32, active bool, err error) {
	st := new(struct {
		flags  uint32
		active int32
	})
	err = cuDevicePrimaryCtxGetState(dev.cu(), &st.flags, &st.active)
	return st.flags, st.active != 0, err
}

// Wait returns how host threads wait for the GPU on c: its primary
// context's scheduling flags (cuDevicePrimaryCtxGetState). A context made
// with WaitDefault reports the mode the driver was left with, WaitAuto for
// the driver's own default.
func (c *Context) Wait() (Wait, error) {
	if c == nil || c.core == nil {
		return 0, argError("Context.Wait", "nil *Context")
	}
	k := c.core
	if err := k.alive("Context.Wait"); err != nil {
		return 0, err
	}
	defer k.life.RUnlock()
	flags, _, err := primaryState(k.dev)
	if err != nil {
		return 0, err
	}
	return waitOf(flags), nil
}
