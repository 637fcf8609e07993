package driver

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// Library is code loaded once for every context of the process
// (cuLibraryLoadData, CUDA 12.0 and newer): context-independent loading.
// Its kernels ([Library.Kernel]) give a [Function] on any [Context]
// ([Kernel.Function]); the driver loads the code onto each context when
// it is first asked for there (or at once, without lazy loading). The
// caller owns a Library and must Close it (cuLibraryUnload), which first
// waits for the calls that use its Functions and makes them unusable.
type Library struct {
	mu      sync.RWMutex // read-held by calls that use the handle, written by Close
	handle  uintptr      // guarded by mu; 0 once unloaded
	jit     *libraryJIT
	modsMu  sync.Mutex
	mods    map[*ctxCore]*Module // the library's module on each context asked for
	cleanup runtime.Cleanup
}

// libraryJIT holds what cuLibraryLoadData was given for the JIT: the
// option arrays and the log buffers they point to, pinned until the
// library is unloaded. With lazy loading (CUDA_MODULE_LOADING=LAZY, the
// default since CUDA 12.2) the driver may compile for a context long after
// the load, and its logs must not point at memory Go has moved or reused.
type libraryJIT struct {
	keys            []int32
	vals            []uintptr
	infoLog, errLog []byte
	pin             runtime.Pinner
}

// Kernel is a kernel of a [Library], on no context in particular
// (CUkernel). It lives as long as its library and needs no Close.
type Kernel struct {
	lib    *Library
	handle uintptr
	name   string
}

// LoadLibrary loads a PTX, cubin or fatbin image, of a kind [CheckImage]
// tells, for every context (cuLibraryLoadData), with the JIT options of
// [Context.LoadModule] for PTX. No context need be open. When the JIT
// fails, the returned *Error carries its error log in Detail.
func LoadLibrary(image []byte, opts ModuleOptions) (*Library, error) {
	const op = "LoadLibrary"
	kind, err := checkImage(op, image)
	if err != nil {
		return nil, err
	}
	img := append([]byte(nil), image...)
	if kind == ImagePTX {
		if img, err = preparePTX(image); err != nil {
			return nil, err
		}
	}
	logSize := opts.LogSize
	if logSize <= 0 {
		logSize = 16 << 10
	}
	j := &libraryJIT{infoLog: make([]byte, logSize), errLog: make([]byte, logSize)}
	j.keys = []int32{jitInfoLogBuffer, jitInfoLogBufferSize, jitErrorLogBuffer, jitErrorLogBufferSize}
	j.vals = []uintptr{uintptr(unsafe.Pointer(&j.infoLog[0])), uintptr(logSize), uintptr(unsafe.Pointer(&j.errLog[0])), uintptr(logSize)}
	if opts.OptimizationLevel > 0 {
		j.keys = append(j.keys, jitOptimizationLevel)
		j.vals = append(j.vals, uintptr(min(opts.OptimizationLevel, 4)))
	}
	if opts.Verbose {
		j.keys = append(j.keys, jitLogVerbose)
		j.vals = append(j.vals, 1)
	}
	j.pin.Pin(&j.infoLog[0])
	j.pin.Pin(&j.errLog[0])
	j.pin.Pin(&j.keys[0])
	j.pin.Pin(&j.vals[0])
	var h uintptr
	err = cuLibraryLoadData(&h, &img[0], &j.keys[0], &j.vals[0], uint32(len(j.keys)), nil, nil, 0)
	runtime.KeepAlive(img)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = strings.TrimSpace(cTrim(j.errLog))
		}
		j.pin.Unpin()
		return nil, err
	}
	l := &Library{handle: h, jit: j, mods: map[*ctxCore]*Module{}}
	l.cleanup = runtime.AddCleanup(l, unloadLibrary, libraryHandle{h, j})
	return l, nil
}

type libraryHandle struct {
	h   uintptr
	jit *libraryJIT
}

// unloadLibrary is the safety net for a Library dropped without Close:
// nothing uses it then, since its Kernels and Functions keep it reachable.
func unloadLibrary(lh libraryHandle) {
	if cuLibraryUnload(lh.h) == nil {
		lh.jit.pin.Unpin()
	} else {
		keepPinned(&lh.jit.pin)
	}
}

// use read-locks l for a call and returns its live handle; the caller
// must call l.mu.RUnlock afterwards.
func (l *Library) use(op string) (uintptr, error) {
	if l == nil {
		return 0, argError(op, "nil *Library")
	}
	l.mu.RLock()
	if l.handle == 0 {
		l.mu.RUnlock()
		if l.mods == nil {
			return 0, argError(op, "zero Library (use LoadLibrary)")
		}
		return 0, closedError(op)
	}
	return l.handle, nil
}

// InfoLog returns the JIT's info log so far (the driver may compile for a
// context after the load); "" for a nil, zero or closed Library.
func (l *Library) InfoLog() string {
	if _, err := l.use("Library.InfoLog"); err != nil {
		return ""
	}
	defer l.mu.RUnlock()
	return strings.TrimSpace(cTrim(l.jit.infoLog))
}

// jitError adds the JIT's error log to a driver error, when it has one:
// a lazily loaded library compiles for a context when first asked for it.
func (l *Library) jitError(err error) error {
	if e, ok := err.(*Error); ok && e.Detail == "" {
		e.Detail = strings.TrimSpace(cTrim(l.jit.errLog))
	}
	return err
}

// Kernel looks up the kernel named name (cuLibraryGetKernel). A name that
// does not exist gives an error for which errors.Is(err, ErrNotFound)
// holds.
func (l *Library) Kernel(name string) (*Kernel, error) {
	const op = "Library.Kernel"
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return nil, argError(op, "invalid entry name %q", name)
	}
	h, err := l.use(op)
	if err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	cname := append([]byte(name), 0)
	var kh uintptr
	err = cuLibraryGetKernel(&kh, h, &cname[0])
	runtime.KeepAlive(cname)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = fmt.Sprintf("no kernel named %q", name)
		}
		return nil, err
	}
	return &Kernel{lib: l, handle: kh, name: name}, nil
}

// Module returns the library's module on c (cuLibraryGetModule), loading
// it there if the driver has not yet. It is the library's: its Close does
// nothing, and it is unusable once the library or c is closed.
func (l *Library) Module(c *Context) (*Module, error) {
	const op = "Library.Module"
	h, err := l.use(op)
	if err != nil {
		return nil, err
	}
	defer l.mu.RUnlock()
	return l.moduleOn(op, h, c)
}

// moduleOn returns l's module on c, with l read-held.
func (l *Library) moduleOn(op string, h uintptr, c *Context) (*Module, error) {
	if c == nil || c.core == nil {
		return nil, argError(op, "nil *Context")
	}
	l.modsMu.Lock()
	defer l.modsMu.Unlock()
	if m := l.mods[c.core]; m != nil {
		if m.liveHandle() != 0 {
			return m, nil
		}
		delete(l.mods, c.core) // closed with its context
	}
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	var mh uintptr
	if err := cuLibraryGetModule(&mh, h); err != nil {
		return nil, l.jitError(err)
	}
	r, err := k.adopt(op, kindLibModule, mh, nil)
	if err != nil {
		return nil, err
	}
	m := &Module{lib: l}
	own(m, &m.owned, c, r, false)
	l.mods[c.core] = m
	return m, nil
}

// Close unloads the library (cuLibraryUnload), after the calls in flight
// that use it (launches of its Functions among them) have returned; its
// Kernels, modules and Functions are unusable afterwards. A second Close
// returns nil.
func (l *Library) Close() error {
	const op = "Library.Close"
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.handle
	if h == 0 {
		return nil
	}
	l.cleanup.Stop()
	l.modsMu.Lock()
	var first error
	for k, m := range l.mods {
		if err := m.res.release(); err != nil && first == nil {
			first = err
		}
		delete(l.mods, k)
	}
	l.modsMu.Unlock()
	l.handle = 0
	if err := cuLibraryUnload(h); err != nil {
		if first == nil {
			first = err
		}
		// The driver may still hold the logs: keep them pinned.
		keepPinned(&l.jit.pin)
		return wrapOp(op, first)
	}
	l.jit.pin.Unpin()
	return wrapOp(op, first)
}

// Name returns the kernel's name; "" for a nil Kernel.
func (k *Kernel) Name() string {
	if k == nil {
		return ""
	}
	return k.name
}

// Function returns the kernel as a [Function] on c (cuKernelGetFunction),
// loading the library onto c if the driver has not yet. The Function
// launches on c's streams as any other, lives as long as the library and c
// are open, and needs no Close. Its parameter layout is read as
// [Module.Function] reads it.
func (k *Kernel) Function(c *Context) (*Function, error) {
	const op = "Kernel.Function"
	if k == nil || k.lib == nil {
		return nil, argError(op, "nil *Kernel")
	}
	h, err := k.lib.use(op)
	if err != nil {
		return nil, err
	}
	defer k.lib.mu.RUnlock()
	m, err := k.lib.moduleOn(op, h, c)
	if err != nil {
		return nil, err
	}
	if _, err := m.use(op); err != nil {
		return nil, err
	}
	defer m.done()
	if err := m.res.core.enter(op); err != nil {
		return nil, err
	}
	defer leave()
	var fh uintptr
	if err := cuKernelGetFunction(&fh, k.handle); err != nil {
		return nil, k.lib.jitError(err)
	}
	f := &Function{mod: m, handle: fh, name: k.name}
	if params, ok := readParams(fh); ok {
		f.params.Store(&params)
	}
	return f, nil
}
