package kernels

import (
	"errors"
	"fmt"
	"sync"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
)

// Modules loads embedded kernels onto contexts as they are first needed,
// one module per kernel and context, so that one job can launch the same
// kernel on several GPUs. The zero value is ready to use; Close unloads
// everything it loaded. It is safe for concurrent use.
type Modules struct {
	mu     sync.Mutex
	progs  map[moduleKey]*ptx.Program
	closed bool
}

type moduleKey struct {
	ctx  *driver.Context
	name string
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
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, fmt.Errorf("ptx: kernel %s: %w", k.Name, driver.ErrClosed)
	}
	key := moduleKey{ctx, k.Name}
	if p, ok := m.progs[key]; ok {
		return p, nil
	}
	p, err := k.Load(ctx)
	if err != nil {
		return nil, err
	}
	if m.progs == nil {
		m.progs = map[moduleKey]*ptx.Program{}
	}
	m.progs[key] = p
	return p, nil
}

// Close unloads every module m loaded. Later calls to Function fail with
// driver.ErrClosed; a second Close returns nil.
func (m *Modules) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	var errs []error
	for key, p := range m.progs {
		errs = append(errs, p.Close())
		delete(m.progs, key)
	}
	return errors.Join(errs...)
}
