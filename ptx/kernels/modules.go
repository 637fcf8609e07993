package kernels

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
)

// Modules loads embedded kernels onto contexts as they are first needed,
// one module per kernel and context, so that one job can launch the same
// kernel on several GPUs. The zero value is ready to use; Close unloads
// everything it loaded. It is safe for concurrent use.
type Modules struct {
	mu     sync.Mutex
	progs  map[moduleKey]*loaded
	closed bool
	// last is the entry that a lookup found last, read without the lock:
	// a pipeline looks its kernel up twice in each job, once to check it
	// and once to launch it, and many small jobs run the same kernel on
	// the same context, where a lookup under the lock was a cost of every
	// job. Close clears it before unloading.
	last atomic.Pointer[loaded]
}

type moduleKey struct {
	ctx  *driver.Context
	name string
}

// loaded is one kernel's module on one context.
type loaded struct {
	key moduleKey
	p   *ptx.Program
}

// Function returns k's function on ctx, loading (JIT-compiling) its PTX on
// the first call for that context.
func (m *Modules) Function(ctx *driver.Context, k *Kernel) (*driver.Function, error) {
	p, err := m.Program(ctx, k)
	if err != nil {
		return nil, err
	}
	return p.Function, nil
}

// Program returns k loaded on ctx, loading it on the first call for that
// context. The Program stays owned by m.
func (m *Modules) Program(ctx *driver.Context, k *Kernel) (*ptx.Program, error) {
	if ctx == nil {
		return nil, fmt.Errorf("ptx: kernel %s: nil context", k.Name)
	}
	if l := m.last.Load(); l != nil && l.key.ctx == ctx && l.key.name == k.Name {
		return l.p, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("ptx: kernel %s: %w", k.Name, driver.ErrClosed)
	}
	key := moduleKey{ctx, k.Name}
	l, ok := m.progs[key]
	if !ok {
		p, err := k.Load(ctx)
		if err != nil {
			return nil, err
		}
		if m.progs == nil {
			m.progs = map[moduleKey]*loaded{}
		}
		l = &loaded{key: key, p: p}
		m.progs[key] = l
	}
	m.last.Store(l)
	return l.p, nil
}

// Close unloads every module m loaded. Later calls to Function fail with
// driver.ErrClosed; a second Close returns nil.
func (m *Modules) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.last.Store(nil)
	var errs []error
	for key, l := range m.progs {
		errs = append(errs, l.p.Close())
		delete(m.progs, key)
	}
	return errors.Join(errs...)
}
