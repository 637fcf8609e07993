package driver

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestErrorText guards the rule of doc.go's Errors section, with the text
// users read: an error says "cuda: " and the operation once, the
// sentinels say neither, and errors.Is finds the sentinel through every
// wrapper. The errors were "cuda: Stream.Synchronize: cuda: invalid
// argument: nil *Stream", "cuda: Alloc: cuda: invalid argument: ..." and
// "cuda: closing stream: cuda: cuStreamDestroy_v2: ..." before.
func TestErrorText(t *testing.T) {
	var (
		nilStream *Stream
		nilCtx    *Context
		nilBuf    *DeviceBuffer
		nilFn     *Function
		nilBound  *Bound
		nilEvent  *Event
		nilExec   *GraphExec
	)
	over := NewArgs()
	for range maxArgs + 1 {
		over.Float32(1)
	}
	f := &Function{name: "k"}
	f.params.Store(&[]ParamInfo{{0, 8}, {8, 4}})
	oom := &Error{Op: "cuMemAlloc_v2", Code: ErrOutOfMemory}
	destroy := &Error{Op: "cuStreamDestroy_v2", Code: ErrInvalidHandle}
	sync := &Error{Op: "cuStreamSynchronize", Code: ErrInvalidHandle}
	_, parseErr := ParseWait("busy")
	_, allocErr := nilCtx.Alloc(16)
	_, zeroAlloc := nilCtx.Alloc(0)
	_, zeroName := Device{}.Name()
	_, zeroSMs := Device{}.Multiprocessors()
	_, fnErr := (*Module)(nil).Function("k")
	_, elapsedErr := nilEvent.Elapsed(nil)
	_, ctxWithErr := NewContextWith(Device{}, ContextOptions{})
	cases := []struct {
		name string
		err  error
		is   error
		want string
	}{
		{"sentinel ErrInvalidArgument", ErrInvalidArgument, ErrInvalidArgument, "invalid argument"},
		{"sentinel ErrClosed", ErrClosed, ErrClosed, "use of closed object"},
		{"sentinel ErrLength", ErrLength, ErrLength, "length mismatch"},
		{"sentinel ErrArguments", ErrArguments, ErrArguments, "kernel arguments do not match parameters"},
		{"sentinel ErrWrongContext", ErrWrongContext, ErrWrongContext, "objects of different contexts"},
		{"sentinel ErrWaitMode", ErrWaitMode, ErrWaitMode, "primary context already active with another wait mode"},
		{"sentinel Result", ErrOutOfMemory, ErrOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"driver call", oom, ErrOutOfMemory, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"argError", argError("Stream.Memset", "size %d", 3), ErrInvalidArgument, "cuda: Stream.Memset: invalid argument: size 3"},
		{"closedError", closedError("Event.Record"), ErrClosed, "cuda: Event.Record: use of closed object"},
		{"lengthError", lengthError("Stream.CopyToHost", "source", 6, 5, 10), ErrLength,
			"cuda: Stream.CopyToHost: length mismatch: source span [6, 6+5) does not fit in 10 bytes"},
		{"sameContext", sameContext("Stream.WaitEvent", &ctxCore{dev: Device{ordinal: 1}}, &ctxCore{}), ErrWrongContext,
			"cuda: Stream.WaitEvent: objects of different contexts: an object of GPU 1's context used with one of GPU 0's"},
		{"nil receiver", nilStream.Synchronize(), ErrInvalidArgument, "cuda: Stream.Synchronize: invalid argument: nil *Stream"},
		{"nil Context", allocErr, ErrInvalidArgument, "cuda: Context.Alloc: invalid argument: nil *Context"},
		{"size 0", zeroAlloc, ErrInvalidArgument, "cuda: Context.Alloc: invalid argument: size 0: must be positive"},
		{"nil DeviceBuffer", nilBuf.Memset32(1), ErrInvalidArgument, "cuda: DeviceBuffer.Memset32: invalid argument: nil destination *DeviceBuffer"},
		{"zero Device", zeroName, ErrInvalidArgument, "cuda: Device.Name: invalid argument: zero Device; use DeviceAt"},
		{"zero Device, derived", zeroSMs, ErrInvalidArgument, "cuda: Device.Multiprocessors: invalid argument: zero Device; use DeviceAt"},
		{"nil Module", fnErr, ErrInvalidArgument, "cuda: Module.Function: invalid argument: nil *Module"},
		{"nil Event", elapsedErr, ErrInvalidArgument, "cuda: Event.Elapsed: invalid argument: nil *Event"},
		{"Function.Launch", nilFn.Launch(nil, GridFor(1, 1), NewArgs()), ErrInvalidArgument, "cuda: Function.Launch: invalid argument: nil *Function"},
		{"Bound.Launch", nilBound.Launch(nil, nil, GridFor(1, 1), NewArgs()), ErrInvalidArgument, "cuda: Bound.Launch: invalid argument: nil *Function"},
		{"Bound.CopyToDevice", nilBound.CopyToDevice(nil, nil, 0, nil, 0, 1), ErrInvalidArgument, "cuda: Bound.CopyToDevice: invalid argument: nil source HostMemory"},
		{"Bound.Synchronize", nilBound.Synchronize(nil), ErrInvalidArgument, "cuda: Bound.Synchronize: invalid argument: nil *Stream"},
		{"Bound.Record", nilBound.Record(nil, nil), ErrInvalidArgument, "cuda: Bound.Record: invalid argument: nil *Event"},
		{"Bound.WaitEvent", nilBound.WaitEvent(nil, nil), ErrInvalidArgument, "cuda: Bound.WaitEvent: invalid argument: nil *Event"},
		{"Bound.LaunchGraph", nilBound.LaunchGraph(nilExec, nil), ErrInvalidArgument, "cuda: Bound.LaunchGraph: invalid argument: nil *GraphExec"},
		{"Args", over.Err(), ErrArguments, "cuda: Args.Float32: kernel arguments do not match parameters: more than 64 arguments"},
		{"Args.Raw", NewArgs().Raw([]byte{1, 2, 3}, 3).Err(), ErrInvalidArgument, "cuda: Args.Raw: invalid argument: size 3, align 3"},
		{"checkArgs", f.checkArgs(NewArgs().Pointer(1)), ErrArguments,
			"cuda: Function.Launch: kernel arguments do not match parameters: kernel k takes 2 argument(s), got 1"},
		{"SetParams", f.SetParams([]ParamInfo{{0, 8}}), ErrArguments,
			"cuda: Function.SetParams: kernel arguments do not match parameters: kernel has 2 parameters, got 1"},
		{"ParseWait", parseErr, nil, `cuda: ParseWait: unknown wait mode "busy": want spin, yield, block, auto or default`},
		{"NewContextWith", ctxWithErr, ErrInvalidArgument, "cuda: NewContextWith: invalid argument: zero Device; use DeviceAt"},
		{"waitModeError", waitModeError("NewContextWith", Device{ordinal: 1, valid: true}, WaitBlock, 0x1), ErrWaitMode,
			"cuda: NewContextWith: primary context already active with another wait mode: GPU 1's primary context is active with wait mode spin, not block; close every Context on it first, or ask for spin"},
		{"wrapOp of a driver call", wrapOp("Stream.Close", destroy), ErrInvalidHandle,
			"cuda: Stream.Close: cuStreamDestroy_v2: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle"},
		{"wrapOp of joined errors", wrapOp("Stream.Close", errors.Join(sync, destroy)), ErrInvalidHandle,
			"cuda: Stream.Close: cuStreamSynchronize: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle; " +
				"cuStreamDestroy_v2: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle"},
		{"wrapOp of its own op", wrapOp("Stream.Close", closedError("Stream.Close")), ErrClosed, "cuda: Stream.Close: use of closed object"},
		{"wrapOp of another op", wrapOp("HostBuffer.Close", closedError("Stream.Close")), ErrClosed, "cuda: HostBuffer.Close: Stream.Close: use of closed object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !assert.Error(t, c.err) {
				return
			}
			assert.EqualError(t, c.err, c.want)
			assert.LessOrEqual(t, strings.Count(c.err.Error(), "cuda:"), 1, "cuda: said more than once")
			if c.is != nil {
				assert.ErrorIs(t, c.err, c.is)
			}
		})
	}
	assert.NoError(t, wrapOp("Stream.Close", nil))
	assert.ErrorAs(t, wrapOp("Stream.Close", destroy), new(*Error))
}

// TestResourceCloseOps checks that every kind of resource names its
// owner's Close in errors (release), so that a new kind cannot fall back to
// a bare "Close" unnoticed.
func TestResourceCloseOps(t *testing.T) {
	for k := range resourceKind(len(destroyOf)) {
		op := k.closeOp()
		assert.True(t, strings.HasSuffix(op, ".Close") && op != ".Close", "kind %v: %q", k, op)
	}
}

// TestReleaseNamesOwner checks that a resource of each kind that the memory
// and code families added names its owner's Close when its release fails
// (here: on a released context), once, with no bare "Close".
func TestReleaseNamesOwner(t *testing.T) {
	for _, c := range []struct {
		kind resourceKind
		want string
	}{
		{kindLinker, "cuda: Linker.Close: use of closed object"},
		{kindLibModule, "cuda: Library.Close: use of closed object"},
		{kindManagedMemory, "cuda: ManagedBuffer.Close: use of closed object"},
		{kindVirtualMemory, "cuda: DeviceBuffer.Close: use of closed object"},
		{kindIPCMemory, "cuda: DeviceBuffer.Close: use of closed object"},
	} {
		k := &ctxCore{objects: map[*resource]struct{}{}}
		r := &resource{core: k, kind: c.kind}
		r.handle.Store(1)
		k.objects[r] = struct{}{}
		err := r.release()
		assert.EqualError(t, err, c.want, "kind %v", c.kind)
		assert.ErrorIs(t, err, ErrClosed)
		assert.Zero(t, r.handle.Load(), "kind %v: handle kept", c.kind)
	}
}
