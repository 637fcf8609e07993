package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// The registry holds one Processor per resolved Spec in this process, shared
// by every DoFn instance (and so every bundle) that asks for the same Spec.
var reg = struct {
	mu      sync.Mutex
	entries map[string]*entry
	closing int // entries removed whose Close has not returned
}{entries: map[string]*entry{}}

// entry is one shared Processor and its users.
type entry struct {
	spec  Spec          // resolved
	ready chan struct{} // closed once proc or err is set
	proc  Processor
	err   error
	refs  int // leases not released, plus Uses in progress
}

// Lease is one user's share of a registered Processor. A Lease from
// Acquire must be released; the Processor closes when the last lease is
// released and no Use is in progress. A Lease is safe for concurrent use.
type Lease struct {
	e        *entry
	mu       sync.Mutex
	released bool
}

// Acquire returns a lease on the Processor for spec in this process,
// opening it (one engine per device of spec) if no lease holds it. Callers
// that ask for the same Spec at once share one opening; if it fails, each
// gets its error and nothing stays open.
func Acquire(spec Spec) (*Lease, error) {
	name := spec.Processor
	if name == "" {
		name = "kernel"
	}
	f, err := factory(name)
	if err != nil {
		return nil, err
	}
	r, err := spec.resolve()
	if err != nil {
		return nil, err
	}
	key := r.key()
	reg.mu.Lock()
	e := reg.entries[key]
	if e != nil {
		e.refs++
		reg.mu.Unlock()
		<-e.ready
		if e.err != nil {
			return nil, e.err // the opener removed the entry; refs no longer count
		}
		return &Lease{e: e}, nil
	}
	e = &entry{spec: r, ready: make(chan struct{}), refs: 1}
	reg.entries[key] = e
	reg.mu.Unlock()

	e.proc, e.err = open(f, r)
	if e.err != nil {
		reg.mu.Lock()
		if reg.entries[key] == e {
			delete(reg.entries, key)
		}
		reg.mu.Unlock()
		close(e.ready)
		return nil, e.err
	}
	close(e.ready)
	return &Lease{e: e}, nil
}

// open opens spec's processor on each of its devices; several are pooled.
func open(f Factory, spec Spec) (Processor, error) {
	var procs []Processor
	fail := func(err error) (Processor, error) {
		for _, p := range procs {
			err = errors.Join(err, p.Close())
		}
		return nil, err
	}
	for _, d := range spec.Devices {
		p, err := f(spec, d)
		if err != nil {
			return fail(fmt.Errorf("shard: opening processor %q on device %d: %w", spec.Processor, d, err))
		}
		if p == nil {
			return fail(fmt.Errorf("shard: processor %q on device %d: the factory returned nil", spec.Processor, d))
		}
		procs = append(procs, p)
		if rb := p.RowBytes(); rb <= 0 || rb != procs[0].RowBytes() {
			return fail(fmt.Errorf("shard: processor %q on device %d: %d-byte rows (want a positive size, the same on every device)", spec.Processor, d, rb))
		}
	}
	if len(procs) == 0 {
		return nil, errors.New("shard: no device to open a processor on")
	}
	if len(procs) == 1 {
		return procs[0], nil
	}
	return &pool{procs: procs, busy: make([]int, len(procs))}, nil
}

// Spec returns the lease's Spec as this process resolved it: its processor,
// kernel, iterations and devices filled in.
func (l *Lease) Spec() Spec { return l.e.spec }

// Released reports whether Release has been called.
func (l *Lease) Released() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.released
}

// Use runs fn with the shared Processor, holding it open until fn returns
// even if the lease is released meanwhile (a worker's context ending, say).
// After Release it returns ErrReleased without calling fn.
func (l *Lease) Use(fn func(Processor) error) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return ErrReleased
	}
	reg.mu.Lock()
	l.e.refs++
	reg.mu.Unlock()
	l.mu.Unlock()
	var err error
	defer func() {
		if cerr := unref(l.e); cerr != nil && err == nil {
			err = cerr
		}
	}()
	err = fn(l.e.proc)
	return err
}

// Release gives the lease back. The last one out closes the Processor and
// returns its Close error. Calling it twice is safe.
func (l *Lease) Release() error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	return unref(l.e)
}

// unref drops one reference to e and closes its Processor on the last.
func unref(e *entry) error {
	reg.mu.Lock()
	e.refs--
	if e.refs > 0 {
		reg.mu.Unlock()
		return nil
	}
	key := e.spec.key()
	if reg.entries[key] == e {
		delete(reg.entries, key)
	}
	reg.closing++
	reg.mu.Unlock()
	err := e.proc.Close()
	reg.mu.Lock()
	reg.closing--
	reg.mu.Unlock()
	return err
}

// Refs reports how many leases and Uses in progress hold spec's Processor
// in this process (0 when it is not open).
func Refs(spec Spec) int {
	r, err := spec.resolve()
	if err != nil {
		return 0
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if e := reg.entries[r.key()]; e != nil {
		return e.refs
	}
	return 0
}

// Open reports how many Processors are open in this process, counting
// those whose Close is still running.
func Open() int {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	return len(reg.entries) + reg.closing
}

// WaitClosed waits until no Processor is open in this process, or ctx
// ends. On runners that keep DoFns until their worker stops (prism, whose
// in-process worker stops as beam.Run returns), the last leases are
// released just after the run: a command calls it before it exits, to
// close its engines and to check that none is leaked.
func WaitClosed(ctx context.Context) error {
	for {
		n := Open()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shard: %d processor(s) still open: %w", n, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// pool spreads shards over one Processor per device: each shard goes to
// the device with the fewest shards in progress (the lowest index among
// equals).
type pool struct {
	procs []Processor
	mu    sync.Mutex
	busy  []int
}

func (p *pool) RowBytes() int { return p.procs[0].RowBytes() }

func (p *pool) DescribeRow() string { return describeRow(p.procs[0]) }

func (p *pool) Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	p.mu.Lock()
	best := 0
	for i, b := range p.busy {
		if b < p.busy[best] {
			best = i
		}
	}
	p.busy[best]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.busy[best]--
		p.mu.Unlock()
	}()
	return p.procs[best].Process(ctx, in, out)
}

func (p *pool) Close() error {
	var err error
	for _, q := range p.procs {
		err = errors.Join(err, q.Close())
	}
	return err
}
