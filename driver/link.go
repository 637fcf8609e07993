package driver

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// CUjitInputType values, by image kind.
var jitInputOf = [...]int32{ImagePTX: 1, ImageCubin: 0, ImageFatbin: 2}

// Linker is a JIT link in progress (cuLinkCreate_v2): PTX, cubins and
// fatbins added with [Linker.Add], linked into one cubin by
// [Linker.Complete], for the device of the context it was made on, with
// no compiler other than the driver's. The caller owns it and must Close
// it (cuLinkDestroy). Its methods may be called from any goroutine; they
// run one at a time.
type Linker struct {
	owned
	mu      sync.Mutex // orders Add and Complete
	infoLog []byte
	errLog  []byte
	inputs  int
}

// NewLinker starts a JIT link on c (cuLinkCreate_v2), with the JIT options
// of [Context.LoadModule] (an optimisation level, the size of each log,
// a verbose info log), targeting c's device.
func (c *Context) NewLinker(opts ModuleOptions) (*Linker, error) {
	const op = "Context.NewLinker"
	logSize := opts.LogSize
	if logSize <= 0 {
		logSize = 16 << 10
	}
	l := &Linker{infoLog: make([]byte, logSize), errLog: make([]byte, logSize)}
	// The driver writes the logs during Add and Complete, long after
	// cuLinkCreate returns: they stay pinned until the link is destroyed
	// (the resource's pinner). Option values are integers or addresses,
	// held as uintptr (see LoadModule).
	keys := []int32{jitInfoLogBuffer, jitInfoLogBufferSize, jitErrorLogBuffer, jitErrorLogBufferSize, jitTargetFromContext}
	vals := []uintptr{uintptr(unsafe.Pointer(&l.infoLog[0])), uintptr(logSize), uintptr(unsafe.Pointer(&l.errLog[0])), uintptr(logSize), 0}
	if opts.OptimizationLevel > 0 {
		keys = append(keys, jitOptimizationLevel)
		vals = append(vals, uintptr(min(opts.OptimizationLevel, 4)))
	}
	if opts.Verbose {
		keys = append(keys, jitLogVerbose)
		vals = append(vals, 1)
	}
	pin := new(runtime.Pinner)
	pin.Pin(&l.infoLog[0])
	pin.Pin(&l.errLog[0])
	pin.Pin(&keys[0])
	pin.Pin(&vals[0])
	k, err := c.begin(op)
	if err != nil {
		pin.Unpin()
		return nil, err
	}
	defer k.end()
	var h uintptr
	err = cuLinkCreate(uint32(len(keys)), &keys[0], &vals[0], &h)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(vals)
	if err != nil {
		pin.Unpin()
		return nil, err
	}
	r, err := k.adopt(op, kindLinker, h, pin)
	if err != nil {
		return nil, err
	}
	own(l, &l.owned, c, r, true)
	return l, nil
}

// Add adds an input to the link (cuLinkAddData_v2): PTX text (which need
// not be NUL-terminated), a cubin or a fatbin, its kind told by
// [CheckImage]. name names it in the logs ("" reads "input N"). When the
// JIT fails, the returned *Error carries its error log in Detail.
func (l *Linker) Add(data []byte, name string) error {
	const op = "Linker.Add"
	if l == nil {
		return argError(op, "nil *Linker")
	}
	kind, err := checkImage(op, data)
	if err != nil {
		return err
	}
	if strings.IndexByte(name, 0) >= 0 {
		return argError(op, "name %q has a NUL byte", name)
	}
	img := append([]byte(nil), data...)
	if kind == ImagePTX {
		if img, err = preparePTX(data); err != nil {
			return err
		}
	}
	h, err := l.use(op)
	if err != nil {
		return err
	}
	defer l.done()
	l.mu.Lock()
	defer l.mu.Unlock()
	if name == "" {
		name = fmt.Sprintf("input %d", l.inputs)
	}
	cname := append([]byte(name), 0)
	if err := l.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	clear(l.errLog)
	err = cuLinkAddData(h, jitInputOf[kind], &img[0], uintptr(len(img)), &cname[0], 0, nil, nil)
	runtime.KeepAlive(img)
	runtime.KeepAlive(cname)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = strings.TrimSpace(cTrim(l.errLog))
		}
		return err
	}
	l.inputs++
	return nil
}

// Complete links what was added into one cubin (cuLinkComplete) and
// returns a copy of it, which [Context.LoadImage] loads. The linker may
// be closed afterwards. When linking fails, the returned *Error carries
// the linker's error log in Detail.
func (l *Linker) Complete() ([]byte, error) {
	const op = "Linker.Complete"
	if l == nil {
		return nil, argError(op, "nil *Linker")
	}
	h, err := l.use(op)
	if err != nil {
		return nil, err
	}
	defer l.done()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inputs == 0 {
		return nil, argError(op, "nothing added to link")
	}
	if err := l.res.core.enter(op); err != nil {
		return nil, err
	}
	defer leave()
	out := new([2]uintptr)
	clear(l.errLog)
	if err := cuLinkComplete(h, &out[0], &out[1]); err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = strings.TrimSpace(cTrim(l.errLog))
		}
		return nil, err
	}
	if out[0] == 0 || out[1] == 0 {
		return nil, fmt.Errorf("cuda: %s: the driver returned an empty cubin", op)
	}
	// The cubin is the driver's until cuLinkDestroy: copy it out while
	// the link is held open.
	base := *(*unsafe.Pointer)(unsafe.Pointer(&out[0]))
	return append([]byte(nil), unsafe.Slice((*byte)(base), out[1])...), nil
}

// InfoLog returns the JIT's info log so far; "" for a nil Linker.
func (l *Linker) InfoLog() string {
	if l == nil || l.res == nil {
		return ""
	}
	if _, err := l.use("Linker.InfoLog"); err != nil {
		return ""
	}
	defer l.done()
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(cTrim(l.infoLog))
}

// Close destroys the link state (cuLinkDestroy), and with it the cubin
// that Complete copied. A second Close returns nil.
func (l *Linker) Close() error {
	if l == nil {
		return nil
	}
	return l.close()
}
