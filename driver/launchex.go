package driver

import (
	"runtime"
	"sync"
	"unsafe"
)

// launchConfig is cuda.h's CUlaunchConfig (CUDA 11.6 and newer), 56 bytes
// on a 64-bit host: the grid, block and shared memory sizes, the stream,
// and a pointer to numAttrs CUlaunchAttributes, held as an address (it
// points into the same pinned exSlab). TestLaunchLayouts checks it.
type launchConfig struct {
	gridDimX, gridDimY, gridDimZ    uint32
	blockDimX, blockDimY, blockDimZ uint32
	sharedMemBytes                  uint32
	hStream                         uintptr
	attrs                           uintptr
	numAttrs                        uint32
}

// launchAttribute is cuda.h's CUlaunchAttribute, 72 bytes: a
// CUlaunchAttributeID, padding to 8 bytes, and the 64-byte
// CUlaunchAttributeValue union, 8-byte aligned.
type launchAttribute struct {
	id  uint32
	_   uint32
	val [8]uint64
}

// CUlaunchAttributeID values used here.
const (
	launchAttrCooperative      = 2
	launchAttrClusterDimension = 4
	launchAttrPriority         = 8
)

// maxLaunchAttrs is how many attributes LaunchAttributes can set at once.
const maxLaunchAttrs = 3

// LaunchAttributes are the extended launch options of [Function.LaunchEx]
// (cuLaunchKernelEx's CUlaunchAttributes). The zero value sets none: the
// launch is then a plain [Function.Launch] made through cuLaunchKernelEx.
type LaunchAttributes struct {
	// Cluster is the size of a thread block cluster in blocks
	// (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, compute capability 9.0 and
	// newer). A zero X sets no cluster; zero Y or Z count as 1. Each grid
	// dimension must be a multiple of the cluster's.
	Cluster Dim3
	// Cooperative asks for a cooperative launch
	// (CU_LAUNCH_ATTRIBUTE_COOPERATIVE): every block of the grid resident
	// at once, so that the grid can synchronise as a whole. A grid larger
	// than the device can hold fails with CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
	Cooperative bool
	// Priority is the launch's priority (CU_LAUNCH_ATTRIBUTE_PRIORITY)
	// when SetPriority is true, in place of its stream's; lower numbers
	// are higher priorities, as in [StreamOptions].
	Priority    int
	SetPriority bool
}

// fill writes a's attributes into attrs and returns how many it wrote,
// after checking them against the grid.
func (a *LaunchAttributes) fill(op string, grid [3]uintptr, attrs *[maxLaunchAttrs]launchAttribute) (uint32, error) {
	n := uint32(0)
	if a == nil {
		return 0, nil
	}
	if a.Cluster != (Dim3{}) {
		x, y, z, ok := a.Cluster.norm()
		if !ok {
			return 0, argError(op, "cluster %+v: sizes must be positive", a.Cluster)
		}
		if grid[0]%x != 0 || grid[1]%y != 0 || grid[2]%z != 0 {
			return 0, argError(op, "grid %dx%dx%d is not a multiple of cluster %dx%dx%d", grid[0], grid[1], grid[2], x, y, z)
		}
		attrs[n] = launchAttribute{id: launchAttrClusterDimension}
		dim := (*[3]uint32)(unsafe.Pointer(&attrs[n].val))
		dim[0], dim[1], dim[2] = uint32(x), uint32(y), uint32(z)
		n++
	}
	if a.Cooperative {
		attrs[n] = launchAttribute{id: launchAttrCooperative}
		*(*int32)(unsafe.Pointer(&attrs[n].val)) = 1
		n++
	}
	if a.SetPriority {
		if int64(a.Priority) != int64(int32(a.Priority)) {
			return 0, argError(op, "priority %d does not fit an int", a.Priority)
		}
		attrs[n] = launchAttribute{id: launchAttrPriority}
		*(*int32)(unsafe.Pointer(&attrs[n].val)) = int32(a.Priority)
		n++
	}
	return n, nil
}

// exSlab is the memory cuLaunchKernelEx and the cluster occupancy calls
// read: the config and its attributes, pinned once when made and never
// unpinned, so that config.attrs may hold its address as an integer.
type exSlab struct {
	cfg   launchConfig
	attrs [maxLaunchAttrs]launchAttribute
}

var exSlabs struct {
	mu   sync.Mutex
	free []*exSlab
	pins runtime.Pinner // reachable forever
}

func getExSlab() *exSlab {
	exSlabs.mu.Lock()
	defer exSlabs.mu.Unlock()
	if n := len(exSlabs.free); n > 0 {
		s := exSlabs.free[n-1]
		exSlabs.free = exSlabs.free[:n-1]
		return s
	}
	s := new(exSlab)
	exSlabs.pins.Pin(s)
	return s
}

func putExSlab(s *exSlab) {
	exSlabs.mu.Lock()
	exSlabs.free = append(exSlabs.free, s)
	exSlabs.mu.Unlock()
}

// config fills s.cfg for a launch of dims with attrs on the stream h.
func (s *exSlab) config(op string, dims *[7]uintptr, h uintptr, a *LaunchAttributes) error {
	n, err := a.fill(op, [3]uintptr{dims[0], dims[1], dims[2]}, &s.attrs)
	if err != nil {
		return err
	}
	s.cfg = launchConfig{
		gridDimX: uint32(dims[0]), gridDimY: uint32(dims[1]), gridDimZ: uint32(dims[2]),
		blockDimX: uint32(dims[3]), blockDimY: uint32(dims[4]), blockDimZ: uint32(dims[5]),
		sharedMemBytes: uint32(dims[6]), hStream: h, numAttrs: n,
	}
	if n > 0 {
		s.cfg.attrs = uintptr(unsafe.Pointer(&s.attrs[0]))
	}
	return nil
}

// launchDims checks cfg and returns cuLaunchKernel's seven sizes.
func launchDims(op string, cfg LaunchConfig) (dims [7]uintptr, err error) {
	var ok bool
	if dims[0], dims[1], dims[2], ok = cfg.Grid.norm(); !ok {
		return dims, argError(op, "grid %+v: sizes must be positive", cfg.Grid)
	}
	if dims[3], dims[4], dims[5], ok = cfg.Block.norm(); !ok {
		return dims, argError(op, "block %+v: sizes must be positive", cfg.Block)
	}
	if cfg.SharedMem < 0 || int64(cfg.SharedMem) > 1<<32-1 {
		return dims, argError(op, "shared memory %d: must be in [0, 2^32)", cfg.SharedMem)
	}
	dims[6] = uintptr(cfg.SharedMem)
	return dims, nil
}

// LaunchEx queues the kernel on s with extended attributes
// (cuLaunchKernelEx): thread block clusters, a cooperative grid, a
// priority of its own. The arguments are checked as [Function.Launch]
// checks them, and the attributes before the driver sees them.
func (f *Function) LaunchEx(s *Stream, cfg LaunchConfig, attrs LaunchAttributes, args *Args) error {
	return f.launchWith("Function.LaunchEx", s, cfg, &attrs, args)
}

// LaunchCooperative queues the kernel on s as a cooperative grid
// (cuLaunchCooperativeKernel): every block resident at once, so that the
// kernel may synchronise the whole grid. The grid must fit on the device
// at once: [Function.MaxActiveBlocksPerSM] times the device's
// multiprocessor count bounds it; larger fails with
// CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE.
func (f *Function) LaunchCooperative(s *Stream, cfg LaunchConfig, args *Args) error {
	return f.launchWith("Function.LaunchCooperative", s, cfg, nil, args)
}

// launchWith is LaunchEx (attrs non-nil) and LaunchCooperative (attrs
// nil): Function.launch's checks and locks, then the call.
func (f *Function) launchWith(op string, s *Stream, cfg LaunchConfig, attrs *LaunchAttributes, args *Args) error {
	if f == nil || f.mod == nil {
		return argError(op, "nil *Function")
	}
	if args == nil {
		return argError(op, "nil *Args (use NewArgs() for a kernel without parameters)")
	}
	dims, err := launchDims(op, cfg)
	if err != nil {
		return err
	}
	if attrs != nil {
		var probe [maxLaunchAttrs]launchAttribute
		if _, err := attrs.fill(op, [3]uintptr{dims[0], dims[1], dims[2]}, &probe); err != nil {
			return err
		}
	}
	if _, err := f.mod.use(op); err != nil {
		return err
	}
	defer f.mod.done()
	if err := f.checkArgsFor(op, args); err != nil {
		return err
	}
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	k := s.res.core
	if err := sameContext(op, f.mod.res.core, k); err != nil {
		return err
	}
	slab := getSlab()
	defer putSlab(slab)
	copy(slab.vals[:(args.used+7)/8], args.vals[:])
	base := unsafe.Pointer(&slab.vals[0])
	for i := 0; i < args.n; i++ {
		slab.ptrs[i] = unsafe.Add(base, args.offs[i])
	}
	sc := &slab.call
	if attrs == nil {
		if err := k.enterWith(op, sc); err != nil {
			return err
		}
		err = cuLaunchCooperativeKernel(sc, f.handle, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], h, &slab.ptrs[0])
		leave()
		return err
	}
	ex := getExSlab()
	defer putExSlab(ex)
	if err := ex.config(op, &dims, h, attrs); err != nil {
		return err
	}
	if err := k.enterWith(op, sc); err != nil {
		return err
	}
	err = cuLaunchKernelEx(sc, &ex.cfg, f.handle, &slab.ptrs[0], nil)
	leave()
	return err
}
