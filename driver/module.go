package driver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"
)

// ModuleOptions are the JIT options for [Context.LoadModule]. The zero
// value uses the driver's defaults and captures up to 16 KiB of each log.
type ModuleOptions struct {
	// OptimizationLevel is the JIT optimisation level, 1 to 4. 0 leaves the
	// driver's default (4).
	OptimizationLevel int
	// LogSize is the size of each of the info and error log buffers in
	// bytes. 0 means 16 KiB.
	LogSize int
	// Verbose asks the JIT for a verbose info log.
	Verbose bool
}

// CUjit_option values used here.
const (
	jitInfoLogBuffer      = 3
	jitInfoLogBufferSize  = 4
	jitErrorLogBuffer     = 5
	jitErrorLogBufferSize = 6
	jitOptimizationLevel  = 7
	jitTargetFromContext  = 8
	jitLogVerbose         = 12
)

// ImageKind says what a module image holds.
type ImageKind int

// The image kinds [Context.LoadModule] accepts.
const (
	ImagePTX ImageKind = iota
	ImageCubin
	ImageFatbin
)

func (k ImageKind) String() string {
	if k < ImagePTX || k > ImageFatbin {
		return fmt.Sprintf("ImageKind(%d)", int(k))
	}
	return [...]string{"PTX", "cubin", "fatbin"}[k]
}

// DetectImage tells a cubin (ELF) or fatbin from PTX text by its magic bytes.
func DetectImage(image []byte) ImageKind {
	switch {
	case bytes.HasPrefix(image, []byte("\x7fELF")):
		return ImageCubin
	case len(image) >= 4 && binary.LittleEndian.Uint32(image) == 0xBA55ED50:
		return ImageFatbin
	}
	return ImagePTX
}

// preparePTX checks PTX text and returns it NUL-terminated, copying it.
// The driver reads PTX up to the first NUL, so text with a NUL inside (other
// than trailing ones) is rejected rather than silently cut.
func preparePTX(image []byte) ([]byte, error) {
	text := bytes.TrimRight(image, "\x00")
	if len(bytes.TrimSpace(text)) == 0 {
		return nil, argError("Context.LoadModule", "empty PTX image")
	}
	if i := bytes.IndexByte(text, 0); i >= 0 {
		return nil, argError("Context.LoadModule", "PTX image has a NUL byte at offset %d: not PTX text", i)
	}
	out := make([]byte, len(text)+1)
	copy(out, text)
	return out, nil
}

// Module is code loaded onto a context (cuModuleLoadDataEx). The caller owns
// it and must Close it; its Functions are unusable after that.
type Module struct {
	owned
	infoLog string
	lib     *Library // a library's module on a context (library.go): the library's to unload
}

// LoadModule loads a PTX, cubin or fatbin image (cuModuleLoadDataEx). PTX
// need not be NUL-terminated: LoadModule terminates a copy itself. When the
// JIT fails, the returned *Error carries the JIT's error log in Detail.
func (c *Context) LoadModule(image []byte, opts ModuleOptions) (*Module, error) {
	if len(image) == 0 {
		return nil, argError("Context.LoadModule", "empty image")
	}
	img := image
	if DetectImage(image) == ImagePTX {
		var err error
		if img, err = preparePTX(image); err != nil {
			return nil, err
		}
	} else {
		img = append([]byte(nil), image...)
	}
	logSize := opts.LogSize
	if logSize <= 0 {
		logSize = 16 << 10
	}
	infoLog := make([]byte, logSize)
	errLog := make([]byte, logSize)
	// Option values are integers or addresses in void* slots. They are kept
	// as uintptr, never unsafe.Pointer: an integer such as 1 in a pointer
	// slot is an invalid pointer that the runtime finds when it copies the
	// stack, and crashes on (make stackmove). The log buffers are pinned
	// for the call.
	keys := make([]int32, 0, 8)
	vals := make([]uintptr, 0, 8)
	keys = append(keys, jitInfoLogBuffer, jitInfoLogBufferSize, jitErrorLogBuffer, jitErrorLogBufferSize, jitTargetFromContext)
	vals = append(vals, uintptr(unsafe.Pointer(&infoLog[0])), uintptr(logSize), uintptr(unsafe.Pointer(&errLog[0])), uintptr(logSize), 0)
	if opts.OptimizationLevel > 0 {
		keys = append(keys, jitOptimizationLevel)
		vals = append(vals, uintptr(min(opts.OptimizationLevel, 4)))
	}
	if opts.Verbose {
		keys = append(keys, jitLogVerbose)
		vals = append(vals, 1)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&infoLog[0])
	pin.Pin(&errLog[0])
	pin.Pin(&keys[0])
	pin.Pin(&vals[0])
	pin.Pin(&img[0])

	k, err := c.begin("Context.LoadModule")
	if err != nil {
		return nil, err
	}
	defer k.end()
	var h uintptr
	err = cuModuleLoadDataEx(&h, &img[0], uint32(len(keys)), &keys[0], &vals[0])
	runtime.KeepAlive(img)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(vals)
	runtime.KeepAlive(infoLog)
	runtime.KeepAlive(errLog)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = strings.TrimSpace(cTrim(errLog))
		}
		return nil, err
	}
	r, err := k.adopt("Context.LoadModule", kindModule, h, nil)
	if err != nil {
		return nil, err
	}
	m := &Module{infoLog: strings.TrimSpace(cTrim(infoLog))}
	own(m, &m.owned, c, r, true)
	return m, nil
}

// InfoLog returns the JIT's info log from loading; "" for a nil Module.
func (m *Module) InfoLog() string {
	if m == nil {
		return ""
	}
	return m.infoLog
}

// Close unloads the module (cuModuleUnload). A second Close returns nil.
// A [Library]'s module is the library's: Close does nothing to it.
func (m *Module) Close() error {
	if m == nil || m.lib != nil {
		return nil
	}
	return m.close()
}

// ParamInfo is one kernel parameter's place in the parameter buffer.
type ParamInfo struct {
	Offset int
	Size   int
}

// Function is a kernel entry point in a [Module]. It lives as long as its
// module and needs no Close.
type Function struct {
	mod    *Module
	handle uintptr
	name   string
	// params is the parameter layout, nil while unknown; SetParams may set
	// it while launches read it.
	params atomic.Pointer[[]ParamInfo]
}

// Function looks up the kernel named name (cuModuleGetFunction) and reads
// its parameter layout with cuFuncGetParamInfo where the driver has it
// (CUDA 12.4 and newer). A name that does not exist gives an error for which
// errors.Is(err, ErrNotFound) holds.
func (m *Module) Function(name string) (*Function, error) {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return nil, argError("Module.Function", "invalid entry name %q", name)
	}
	if m == nil {
		return nil, argError("Module.Function", "nil *Module")
	}
	mh, err := m.use("Module.Function")
	if err != nil {
		return nil, err
	}
	defer m.done()
	k := m.res.core
	if err := k.enter("Module.Function"); err != nil {
		return nil, err
	}
	defer leave()
	cname := append([]byte(name), 0)
	var h uintptr
	err = cuModuleGetFunction(&h, mh, &cname[0])
	runtime.KeepAlive(cname)
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = fmt.Sprintf("no kernel named %q", name)
		}
		return nil, err
	}
	f := &Function{mod: m, handle: h, name: name}
	if params, ok := readParams(h); ok {
		f.params.Store(&params)
	}
	return f, nil
}

// readParams asks cuFuncGetParamInfo for each parameter until the driver
// answers CUDA_ERROR_INVALID_VALUE (past the last one). It reports false
// when the driver lacks the function. The caller has the context current.
func readParams(fh uintptr) ([]ParamInfo, bool) {
	if _, err := proc(symFuncGetParamInfo); err != nil {
		return nil, false
	}
	out := new([2]uint64)
	var params []ParamInfo
	for i := 0; i < maxArgs+1; i++ {
		err := cuFuncGetParamInfo(fh, uintptr(i), &out[0], &out[1])
		if err != nil {
			if e, ok := err.(*Error); ok && e.Code == ErrInvalidValue {
				return params, true
			}
			return nil, false
		}
		params = append(params, ParamInfo{Offset: int(out[0]), Size: int(out[1])})
	}
	return params, true
}

// Name returns the entry name; "" for a nil Function.
func (f *Function) Name() string {
	if f == nil {
		return ""
	}
	return f.name
}

// Params returns the parameter layout and whether it is known. It is known
// when the driver has cuFuncGetParamInfo or after [Function.SetParams];
// never for a nil Function.
func (f *Function) Params() ([]ParamInfo, bool) {
	if f == nil {
		return nil, false
	}
	p := f.params.Load()
	if p == nil {
		return nil, false
	}
	return append([]ParamInfo(nil), (*p)...), true
}

// SetParams supplies the parameter layout (from the PTX, say) on drivers
// that cannot report it. It fails if a layout is already known and differs.
// It may be called while the function is being launched.
func (f *Function) SetParams(params []ParamInfo) error {
	if f == nil {
		return argError("Function.SetParams", "nil *Function")
	}
	own := append([]ParamInfo{}, params...)
	for {
		cur := f.params.Load()
		if cur != nil {
			known := *cur
			if len(params) != len(known) {
				return argumentsError("Function.SetParams", "kernel has %d parameters, got %d", len(known), len(params))
			}
			for i := range params {
				if params[i].Size != known[i].Size {
					return argumentsError("Function.SetParams", "parameter %d is %d bytes, got %d", i, known[i].Size, params[i].Size)
				}
			}
			return nil
		}
		if f.params.CompareAndSwap(nil, &own) {
			return nil
		}
	}
}

// FunctionAttribute is a CUfunction_attribute id.
type FunctionAttribute int32

// Function attributes.
const (
	FuncMaxThreadsPerBlock FunctionAttribute = 0
	FuncSharedSizeBytes    FunctionAttribute = 1
	FuncConstSizeBytes     FunctionAttribute = 2
	FuncLocalSizeBytes     FunctionAttribute = 3
	FuncNumRegs            FunctionAttribute = 4
	FuncPTXVersion         FunctionAttribute = 5
	FuncBinaryVersion      FunctionAttribute = 6
)

// Attribute returns a function attribute (cuFuncGetAttribute).
func (f *Function) Attribute(a FunctionAttribute) (int, error) {
	if f == nil || f.mod == nil {
		return 0, argError("Function.Attribute", "nil *Function")
	}
	if _, err := f.mod.use("Function.Attribute"); err != nil {
		return 0, err
	}
	defer f.mod.done()
	if err := f.mod.res.core.enter("Function.Attribute"); err != nil {
		return 0, err
	}
	defer leave()
	var v int32
	if err := cuFuncGetAttribute(&v, a, f.handle); err != nil {
		return 0, err
	}
	return int(v), nil
}
