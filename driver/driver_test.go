package driver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/purecuda/overlap/loader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Compile-time shapes.
func _() {
	var _ HostMemory = (*HostBuffer)(nil)
	var _ HostMemory = (*HostRegistration)(nil)
	var _ error = Result(0)
	var _ error = (*Error)(nil)
	var _ [8]byte = [unsafe.Sizeof(DevicePtr(0))]byte{}
	var _ [4]byte = [unsafe.Sizeof(Result(0))]byte{}
	var _ [8]byte = [unsafe.Sizeof(uintptr(0))]byte{} // 64-bit only: CUdeviceptr and size_t are 8 bytes
}

func TestErrorFormat(t *testing.T) {
	err := error(&Error{Op: "cuMemAlloc_v2", Code: ErrOutOfMemory})
	assert.Equal(t, "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory", err.Error())
	assert.True(t, errors.Is(err, ErrOutOfMemory))
	assert.False(t, errors.Is(err, ErrInvalidValue))
	wrapped := fmt.Errorf("pipeline: chunk 3: %w", err)
	assert.True(t, errors.Is(wrapped, ErrOutOfMemory))
	var e *Error
	require.True(t, errors.As(wrapped, &e))
	assert.Equal(t, "cuMemAlloc_v2", e.Op)

	withLog := &Error{Op: "cuModuleLoadDataEx", Code: ErrInvalidPTX, Detail: "ptxas fatal"}
	assert.Equal(t, "cuda: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed: ptxas fatal", withLog.Error())
}

func TestStickyErrorsSaySo(t *testing.T) {
	err := &Error{Op: "cuStreamSynchronize", Code: ErrIllegalAddress}
	assert.True(t, ErrIllegalAddress.Sticky())
	assert.False(t, ErrOutOfMemory.Sticky())
	assert.Equal(t, "cuda: cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered; the CUDA context is now unusable and every later call on it fails: restart the process", err.Error())
}

func TestResultNames(t *testing.T) {
	cases := map[Result]string{
		ErrInvalidValue: "CUDA_ERROR_INVALID_VALUE", ErrOutOfMemory: "CUDA_ERROR_OUT_OF_MEMORY",
		ErrNotReady: "CUDA_ERROR_NOT_READY", ErrInvalidContext: "CUDA_ERROR_INVALID_CONTEXT",
		ErrNoDevice: "CUDA_ERROR_NO_DEVICE", ErrInvalidPTX: "CUDA_ERROR_INVALID_PTX",
		ErrUnsupportedPTXVersion: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", ErrNotFound: "CUDA_ERROR_NOT_FOUND",
		Result(999): "CUDA_ERROR_UNKNOWN",
	}
	for r, name := range cases {
		assert.Equal(t, name, r.Name())
	}
	assert.Equal(t, "CUDA_ERROR_12345", Result(12345).Name())
	assert.Equal(t, "CUDA_ERROR_NOT_READY (600): device not ready", ErrNotReady.Error())
}

func TestSymbolTable(t *testing.T) {
	seen := map[string]bool{}
	for id, s := range symbols {
		require.NotEmpty(t, s.Name, "row %d has no name", id)
		assert.True(t, strings.HasPrefix(s.Export, s.Name), "%s: export %s must extend the name", s.Name, s.Export)
		assert.GreaterOrEqual(t, s.Version, 2000, s.Name)
		assert.LessOrEqual(t, s.Version, loader.MinDriverVersion+1000, "%s binds an ABI newer than needed", s.Name)
		// At most 15, purego.SyscallN's limit on every platform; a hot or
		// direct call's 11 (the scratch's block) mkdriver checks.
		assert.True(t, s.Args >= 0 && s.Args <= 15, s.Name)
		assert.False(t, seen[s.Name], "%s listed twice", s.Name)
		seen[s.Name] = true
	}
	// The calls that a Bound with BindOptions.DirectCalls makes directly,
	// as its documentation names them: none of them waits for the device.
	var direct []string
	for _, s := range symbols {
		if s.Direct {
			direct = append(direct, s.Name)
		}
	}
	assert.Equal(t, []string{"cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuStreamWaitEvent", "cuEventRecord",
		"cuLaunchKernel", "cuGraphLaunch"}, direct)
	// The versioned exports that cuda.h maps plain names to.
	for name, export := range map[string]string{
		"cuMemAlloc": "cuMemAlloc_v2", "cuMemFree": "cuMemFree_v2", "cuMemGetInfo": "cuMemGetInfo_v2",
		"cuMemcpyHtoDAsync": "cuMemcpyHtoDAsync_v2", "cuMemcpyDtoHAsync": "cuMemcpyDtoHAsync_v2",
		"cuStreamDestroy": "cuStreamDestroy_v2", "cuEventDestroy": "cuEventDestroy_v2",
		"cuMemHostRegister": "cuMemHostRegister_v2", "cuDevicePrimaryCtxRelease": "cuDevicePrimaryCtxRelease_v2",
		"cuDeviceTotalMem": "cuDeviceTotalMem_v2", "cuEventElapsedTime": "cuEventElapsedTime_v2",
	} {
		found := false
		for _, s := range symbols {
			if s.Name == name {
				found = true
				assert.Equal(t, export, s.Export)
			}
		}
		assert.True(t, found, name)
	}
}

func TestArgsLayout(t *testing.T) {
	a := NewArgs().Int32(7).Pointer(0x1000).Float32(1.5).Float64(2.5).Raw(make([]byte, 12), 4).Uint32(3).Uint64(9)
	require.NoError(t, a.Err())
	assert.Equal(t, []ParamInfo{{0, 4}, {8, 8}, {16, 4}, {24, 8}, {32, 12}, {44, 4}, {48, 8}}, a.Layout())
	slab := a.bytes()
	assert.Equal(t, byte(7), slab[0])
	assert.Equal(t, byte(0x10), slab[9])
	a.Reset()
	assert.Equal(t, 0, a.Len())

	over := NewArgs()
	for i := 0; i < maxArgs+1; i++ {
		over.Int32(1)
	}
	assert.ErrorIs(t, over.Err(), ErrArguments)
	assert.EqualError(t, over.Err(), "cuda: Args.Int32: kernel arguments do not match parameters: more than 64 arguments")

	big := NewArgs().Raw(make([]byte, 4000), 8).Raw(make([]byte, 200), 8)
	assert.ErrorIs(t, big.Err(), ErrArguments)

	bad := NewArgs().Raw(make([]byte, 4), 3)
	assert.ErrorIs(t, bad.Err(), ErrInvalidArgument)
	assert.ErrorIs(t, NewArgs().Buffer(nil, 0).Err(), ErrInvalidArgument)
}

func TestCheckArgsAgainstParams(t *testing.T) {
	f := &Function{name: "k"}
	require.NoError(t, f.SetParams([]ParamInfo{{0, 8}, {8, 4}}))
	assert.NoError(t, f.checkArgs(NewArgs().Pointer(1).Int32(2)))
	assert.EqualError(t, f.checkArgs(NewArgs().Pointer(1)), "cuda: Function.Launch: kernel arguments do not match parameters: kernel k takes 2 argument(s), got 1")
	assert.EqualError(t, f.checkArgs(NewArgs().Pointer(1).Int64(2)), "cuda: Function.Launch: kernel arguments do not match parameters: kernel k: argument 1 is 8 bytes, it expects 4")
	unknown := &Function{name: "u"}
	assert.NoError(t, unknown.checkArgs(NewArgs().Int32(1)), "without a layout the driver decides")
	require.NoError(t, unknown.SetParams([]ParamInfo{{0, 4}}))
	assert.ErrorIs(t, unknown.checkArgs(NewArgs().Int64(1)), ErrArguments)
	assert.ErrorIs(t, f.SetParams([]ParamInfo{{0, 8}}), ErrArguments)
}

func TestCheckSpan(t *testing.T) {
	cases := []struct {
		off, n, size int
		ok           bool
	}{
		{0, 10, 10, true}, {5, 5, 10, true}, {10, 0, 10, true},
		{0, 11, 10, false}, {6, 5, 10, false}, {-1, 1, 10, false}, {0, -1, 10, false}, {11, 0, 10, false},
		{1, int(^uint(0) >> 1), 10, false},
	}
	for _, c := range cases {
		err := checkSpan("Copy", "source", c.off, c.n, c.size)
		if c.ok {
			assert.NoError(t, err, "%+v", c)
		} else {
			assert.ErrorIs(t, err, ErrLength, "%+v", c)
		}
	}
	assert.EqualError(t, checkSpan("Stream.CopyToDevice", "destination", 6, 5, 10),
		"cuda: Stream.CopyToDevice: length mismatch: destination span [6, 6+5) does not fit in 10 bytes")
}

func TestImageDetectionAndPTXPreparation(t *testing.T) {
	assert.Equal(t, ImageCubin, DetectImage([]byte("\x7fELF\x02\x01")))
	assert.Equal(t, ImageFatbin, DetectImage([]byte{0x50, 0xed, 0x55, 0xba, 1, 0}))
	assert.Equal(t, ImagePTX, DetectImage([]byte(".version 7.0")))

	out, err := preparePTX([]byte(".version 7.0\n"))
	require.NoError(t, err)
	assert.Equal(t, ".version 7.0\n\x00", string(out))
	out, err = preparePTX([]byte(".version 7.0\x00\x00"))
	require.NoError(t, err)
	assert.Equal(t, ".version 7.0\x00", string(out))

	for name, in := range map[string][]byte{"empty": {}, "blank": []byte(" \n\t"), "only NULs": {0, 0}} {
		_, err := preparePTX(in)
		assert.ErrorIs(t, err, ErrInvalidArgument, name)
	}
	_, err = preparePTX([]byte(".version\x007.0"))
	assert.EqualError(t, err, "cuda: Context.LoadModule: invalid argument: PTX image has a NUL byte at offset 8: not PTX text")
}

func TestNilAndClosedObjects(t *testing.T) {
	var s *Stream
	var e *Event
	var b *DeviceBuffer
	var h *HostBuffer
	var c *Context
	assert.ErrorIs(t, s.Synchronize(), ErrInvalidArgument)
	assert.ErrorIs(t, e.Record(s), ErrInvalidArgument)
	assert.ErrorIs(t, b.Memset(0), ErrInvalidArgument)
	assert.ErrorIs(t, s.CopyToDevice(b, 0, h, 0, 1), ErrInvalidArgument)
	assert.ErrorIs(t, s.CopyToDevice(b, 0, nil, 0, 1), ErrInvalidArgument)
	assert.ErrorIs(t, s.CopyToHost(nil, 0, b, 0, 1), ErrInvalidArgument)
	_, err := c.Alloc(1)
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.NoError(t, s.Close())
	assert.NoError(t, c.Close())
	assert.Nil(t, h.Bytes())

	closedCtx := &Context{core: &ctxCore{objects: map[*resource]struct{}{}, closed: make(chan struct{})}}
	for _, n := range []int{0, -1} {
		_, err := closedCtx.Alloc(n)
		assert.ErrorIs(t, err, ErrInvalidArgument, "size %d", n)
		_, err = closedCtx.AllocHost(n, HostAllocOptions{})
		assert.ErrorIs(t, err, ErrInvalidArgument, "size %d", n)
	}
	_, err = closedCtx.Alloc(16)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = closedCtx.RegisterHost(nil, RegisterOptions{})
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = closedCtx.NewStream(StreamOptions{})
	assert.ErrorIs(t, err, ErrClosed)

	dead := &Stream{owned: owned{ctx: closedCtx, res: &resource{core: closedCtx.core}}}
	assert.ErrorIs(t, dead.Synchronize(), ErrClosed)
	assert.EqualError(t, dead.Synchronize(), "cuda: Stream.Synchronize: use of closed object")
	assert.NoError(t, dead.Close())
	assert.NoError(t, dead.Close())

	_, err = Device{}.Name()
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = NewContext(Device{})
	assert.ErrorIs(t, err, ErrInvalidArgument)
}

func TestGridFor(t *testing.T) {
	assert.Equal(t, LaunchConfig{Grid: Dim3{X: 4}, Block: Dim3{X: 256}}, GridFor(1000, 256))
	assert.Equal(t, LaunchConfig{Grid: Dim3{X: 1}, Block: Dim3{X: 256}}, GridFor(0, 0))
	_, _, _, ok := Dim3{X: 0}.norm()
	assert.False(t, ok)
}

func TestByteViews(t *testing.T) {
	f := []float32{1, 2, 3}
	b := Bytes(f)
	assert.Len(t, b, 12)
	assert.Equal(t, f, View[float32](b))
	assert.Nil(t, Bytes([]float32{}))
	assert.Nil(t, View[float64](make([]byte, 7)))
}

// TestNoDriver runs a copy of the test binary with the override pointing at
// nothing, since the library is loaded once per process.
func TestNoDriver(t *testing.T) {
	if os.Getenv("OVERLAP_TEST_CHILD") == "nodriver" {
		err := Load()
		if !errors.Is(err, loader.ErrNoDriver) {
			fmt.Printf("WRONG: %v\n", err)
			os.Exit(3)
		}
		_, err = DeviceCount()
		fmt.Printf("ERR: %v\n", err)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestNoDriver$")
	cmd.Env = append(os.Environ(), "OVERLAP_TEST_CHILD=nodriver", loader.EnvVar+"=/nonexistent/libcuda.so.1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "ERR: loader: no NVIDIA driver found; tried 1 path(s):\n\t/nonexistent/libcuda.so.1: ")
}

// Issue 14: launch slabs come from lock-free slots and, when every slot is
// taken, from an overflow list; a slab is never handed to two launches at
// once, and a returned one is taken again.
func TestSlabsExclusive(t *testing.T) {
	held := map[*argSlab]bool{}
	for range 2*slabSlots + 3 {
		s := getSlab()
		require.False(t, held[s], "a slab handed out twice")
		held[s] = true
	}
	overflow := 0
	for s := range held {
		if !s.slot {
			overflow++
		}
		putSlab(s)
	}
	assert.GreaterOrEqual(t, overflow, slabSlots+3, "slabs beyond the slots come from the overflow list")
	s := getSlab()
	assert.True(t, held[s], "a returned slab is reused")
	putSlab(s)

	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				s := getSlab()
				v := uint64(g)<<32 | uint64(i)
				s.vals[0] = v
				runtime.Gosched()
				if s.vals[0] != v {
					t.Errorf("goroutine %d: its slab was written by another launch", g)
					return
				}
				putSlab(s)
			}
		}()
	}
	wg.Wait()
}

// Issue 14: ccall_linux_amd64.s reads a scratch at fixed offsets: fn at 0,
// the eleven arguments from 8, the result at 96.
func TestScratchLayout(t *testing.T) {
	var s scratch
	assert.Equal(t, uintptr(0), unsafe.Offsetof(s.fn))
	assert.Equal(t, uintptr(8), unsafe.Offsetof(s.args))
	assert.Equal(t, 11, len(s.args))
	assert.Equal(t, uintptr(96), unsafe.Offsetof(s.r))
}
