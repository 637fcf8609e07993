package driver

import (
	"sync"

	"github.com/ebitengine/purego"
)

// Host functions share one C callback, made once: purego can make only a
// few thousand callbacks in a process and never frees one. Each queued
// function takes a slot of a table, whose index (plus one) is the
// callback's userData; the slot is freed when the function runs, or at
// once when the driver refuses it, so that any number of host functions
// can be queued over a process's life.
var hostFuncs struct {
	mu   sync.Mutex
	fns  []func()
	free []uint32
	live int
}

var hostTrampoline = sync.OnceValue(func() uintptr { return purego.NewCallback(runHostFunc) })

// runHostFunc is the callback: it runs on a driver thread.
func runHostFunc(id uintptr) uintptr {
	if fn := takeHostFunc(id); fn != nil {
		fn()
	}
	return 0
}

func addHostFunc(fn func()) uintptr {
	hostFuncs.mu.Lock()
	defer hostFuncs.mu.Unlock()
	hostFuncs.live++
	if n := len(hostFuncs.free); n > 0 {
		i := hostFuncs.free[n-1]
		hostFuncs.free = hostFuncs.free[:n-1]
		hostFuncs.fns[i] = fn
		return uintptr(i) + 1
	}
	hostFuncs.fns = append(hostFuncs.fns, fn)
	return uintptr(len(hostFuncs.fns))
}

// takeHostFunc frees slot id and returns its function; nil for a slot
// that holds none (never when the driver calls each function once).
func takeHostFunc(id uintptr) func() {
	hostFuncs.mu.Lock()
	defer hostFuncs.mu.Unlock()
	i := id - 1
	if id == 0 || i >= uintptr(len(hostFuncs.fns)) || hostFuncs.fns[i] == nil {
		return nil
	}
	fn := hostFuncs.fns[i]
	hostFuncs.fns[i] = nil
	hostFuncs.free = append(hostFuncs.free, uint32(i))
	hostFuncs.live--
	return fn
}

// hostFuncsQueued returns how many host functions are queued and not yet
// run: the table's live slots.
func hostFuncsQueued() int {
	hostFuncs.mu.Lock()
	defer hostFuncs.mu.Unlock()
	return hostFuncs.live
}

// LaunchHostFunc queues fn on s (cuLaunchHostFunc): fn runs on a driver
// thread once the work queued on s before it is done, and the work queued
// after it waits for fn to return. fn must not call the CUDA driver
// (directly or through this package: the driver forbids it and may
// deadlock), should return quickly, and must not panic (a panic there ends
// the program, as in any goroutine). Host functions cannot be queued on a
// capturing stream: a graph would run one at each launch, and this
// binding runs each once.
func (s *Stream) LaunchHostFunc(fn func()) error {
	const op = "Stream.LaunchHostFunc"
	if fn == nil {
		return argError(op, "nil func")
	}
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	if s.res.capturing.Load() {
		return argError(op, "the stream is capturing: a graph would run the function at every launch")
	}
	tramp := hostTrampoline()
	id := addHostFunc(fn)
	sc, err := s.issuing(op, via{})
	if err != nil {
		takeHostFunc(id)
		return err
	}
	err = cuLaunchHostFunc(sc, h, tramp, id)
	via{}.issued(sc)
	if err != nil {
		takeHostFunc(id)
	}
	return err
}
