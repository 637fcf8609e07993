package driver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Result is a CUresult: the status code every driver function returns.
// A non-zero Result is an error; it compares with errors.Is against the
// sentinels below through [*Error].
type Result int32

// Sentinel results for errors.Is. Every error returned by a driver call is a
// *Error that unwraps to its Result.
const (
	ErrInvalidValue          Result = 1
	ErrOutOfMemory           Result = 2
	ErrNotInitialized        Result = 3
	ErrNoDevice              Result = 100
	ErrInvalidDevice         Result = 101
	ErrInvalidImage          Result = 200
	ErrInvalidContext        Result = 201
	ErrNoBinaryForGPU        Result = 209
	ErrInvalidPTX            Result = 218
	ErrUnsupportedPTXVersion Result = 222
	ErrInvalidHandle         Result = 400
	ErrNotFound              Result = 500
	ErrNotReady              Result = 600
	ErrIllegalAddress        Result = 700
	ErrLaunchOutOfResources  Result = 701
	ErrLaunchFailed          Result = 719
	ErrHostMemoryRegistered  Result = 712
	ErrNotSupported          Result = 801
)

// Errors of the binding itself, reported before any driver call. Like
// package os's sentinels, their text carries no package word: the error
// that wraps one says "cuda: " and the call once, as in "cuda:
// Stream.Synchronize: invalid argument: nil *Stream", and errors.Is
// matches the sentinel through it.
var (
	// ErrClosed reports use of an object after its Close.
	ErrClosed = errors.New("use of closed object")
	// ErrInvalidArgument reports an argument rejected before it reaches the
	// driver: a nil object, a zero or negative size, an out-of-range offset.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrLength reports a copy whose length does not fit both buffers.
	ErrLength = errors.New("length mismatch")
	// ErrArguments reports kernel arguments that do not match the kernel's
	// parameters.
	ErrArguments = errors.New("kernel arguments do not match parameters")
	// ErrWrongContext reports objects of two different contexts used
	// together (a stream of one GPU and a buffer of another, say), or an
	// object of another context used through a [Bound].
	ErrWrongContext = errors.New("objects of different contexts")
)

// Name returns the CUresult's name, such as "CUDA_ERROR_OUT_OF_MEMORY".
func (r Result) Name() string {
	if s, ok := driverString(symGetErrorName, cuGetErrorName, r); ok {
		return s
	}
	if s, ok := resultNames[r]; ok {
		return s
	}
	return "CUDA_ERROR_" + strconv.Itoa(int(r))
}

// Text returns the driver's description of the CUresult.
func (r Result) Text() string {
	if s, ok := driverString(symGetErrorString, cuGetErrorString, r); ok {
		return s
	}
	if s, ok := resultTexts[r]; ok {
		return s
	}
	return "unrecognized error code"
}

// Error formats the result as "NAME (code): text", such as
// "CUDA_ERROR_NOT_READY (600): device not ready". A Result is a sentinel
// and carries no package word: a failed call returns an [*Error], which
// names the call.
func (r Result) Error() string {
	return fmt.Sprintf("%s (%d): %s", r.Name(), int32(r), r.Text())
}

// Error is a failed driver call: the entry point that failed and its result.
// Its text reads "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of
// memory". errors.Is(err, ErrOutOfMemory) and the like hold through Unwrap.
type Error struct {
	// Op is the exported name of the driver function that failed.
	Op string
	// Code is the CUresult it returned.
	Code Result
	// Detail, when not empty, is appended to the message (a JIT log, say).
	Detail string
}

func (e *Error) Error() string {
	if e == nil {
		return "cuda: <nil *Error>"
	}
	s := fmt.Sprintf("cuda: %s: %s (%d): %s", e.Op, e.Code.Name(), int32(e.Code), e.Code.Text())
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Code.Sticky() {
		s += "; the CUDA context is now unusable and every later call on it fails: restart the process"
	}
	return s
}

// Sticky reports whether r is one of the errors after which the CUDA
// context is unusable: a kernel faulted, and every later call on the
// context returns the same error.
func (r Result) Sticky() bool {
	switch r {
	case ErrIllegalAddress, 710, 714, 715, 716, 717, 718, ErrLaunchFailed:
		return true
	}
	return false
}

// Unwrap returns the Result, so that errors.Is matches the sentinels; nil
// for a nil *Error.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Code
}

func newError(id symID, r Result) error {
	return &Error{Op: symbols[id].Export, Code: r}
}

// driverStrings caches cuGetErrorName/cuGetErrorString answers.
var driverStrings sync.Map // key: [2]int32{sym, code}

// driverString asks the driver to name r, through get, the wrapper of the
// entry point id. It answers false when the driver is not loaded or does
// not know r.
func driverString(id symID, get func(entry uintptr, code Result, pStr *uintptr) Result, r Result) (string, bool) {
	key := [2]int32{int32(id), int32(r)}
	if v, ok := driverStrings.Load(key); ok {
		return v.(string), true
	}
	if !libraryReady() {
		return "", false
	}
	p, err := proc(id)
	if err != nil {
		return "", false
	}
	var cs uintptr
	if rc := get(p, r, &cs); rc != 0 || cs == 0 {
		return "", false
	}
	s := goString(cs)
	driverStrings.Store(key, s)
	return s, true
}

// goString copies the NUL-terminated C string at p.
func goString(p uintptr) string {
	if p == 0 {
		return ""
	}
	base := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(base, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(base), n))
}

// The errors of the binding itself all read "cuda: Op: sentinel: detail":
// the package word and the operation once, then the sentinel's text, which
// has neither. Op is what the caller called, Type.Method for a method
// ("Stream.Synchronize", "Context.Alloc") or the function's name for a
// package-level function ("NewContext"). A failed driver call is an *Error,
// whose Op is the driver function's export name instead ("cuMemAlloc_v2").

// argError builds an error for an argument rejected before any driver call.
func argError(op, format string, args ...any) error {
	return fmt.Errorf("cuda: %s: %w: %s", op, ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// closedError reports op on a closed object.
func closedError(op string) error {
	return fmt.Errorf("cuda: %s: %w", op, ErrClosed)
}

// lengthError reports a copy span that does not fit its buffer.
func lengthError(op, role string, off, n, size int) error {
	return fmt.Errorf("cuda: %s: %w: %s span [%d, %d+%d) does not fit in %d bytes", op, ErrLength, role, off, off, n, size)
}

// argumentsError reports kernel arguments that do not match the kernel's
// parameters (ErrArguments).
func argumentsError(op, format string, args ...any) error {
	return fmt.Errorf("cuda: %s: %w: %s", op, ErrArguments, fmt.Sprintf(format, args...))
}

// opError is an error of this package's, err, met while doing op: it reads
// "cuda: Op: " and err's text without its own "cuda: " (on each line of a
// joined error), so that the package word is said once. errors.Is and
// errors.As see err through Unwrap.
type opError struct {
	op  string
	err error
}

// wrapOp returns err as met while doing op; nil for a nil err, and err
// itself when it already names op.
func wrapOp(op string, err error) error {
	if err == nil {
		return nil
	}
	if strings.HasPrefix(err.Error(), "cuda: "+op+":") {
		return err
	}
	return &opError{op: op, err: err}
}

func (e *opError) Error() string {
	lines := strings.Split(e.err.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "cuda: ")
	}
	return "cuda: " + e.op + ": " + strings.Join(lines, "; ")
}

func (e *opError) Unwrap() error { return e.err }
