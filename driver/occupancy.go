package driver

import "math"

// OccupancyFlags are the flags of the occupancy calculations
// (CUoccupancy_flags).
type OccupancyFlags uint32

// The occupancy flags.
const (
	// OccupancyDefault is the driver's default calculation.
	OccupancyDefault OccupancyFlags = 0
	// OccupancyDisableCachingOverride assumes that global caching is
	// enabled and cannot be turned off by the function
	// (CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE).
	OccupancyDisableCachingOverride OccupancyFlags = 1
)

// onFunction runs fn with f's module read-held and its context current.
func (f *Function) onFunction(op string, fn func(h uintptr) error) error {
	if f == nil || f.mod == nil {
		return argError(op, "nil *Function")
	}
	if _, err := f.mod.use(op); err != nil {
		return err
	}
	defer f.mod.done()
	if err := f.mod.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	return fn(f.handle)
}

func checkOccupancyFlags(op string, flags OccupancyFlags) error {
	if flags&^OccupancyDisableCachingOverride != 0 {
		return argError(op, "unknown occupancy flags %#x", uint32(flags))
	}
	return nil
}

func checkInt32(op, what string, v int) error {
	if v < 0 || v > math.MaxInt32 {
		return argError(op, "%s %d: must be in [0, 2^31)", what, v)
	}
	return nil
}

// MaxActiveBlocksPerSM returns how many blocks of blockSize threads, each
// with dynamicSMem bytes of dynamic shared memory, can be resident on one
// multiprocessor at once (cuOccupancyMaxActiveBlocksPerMultiprocessor, or
// its WithFlags form for flags other than OccupancyDefault).
func (f *Function) MaxActiveBlocksPerSM(blockSize, dynamicSMem int, flags OccupancyFlags) (int, error) {
	const op = "Function.MaxActiveBlocksPerSM"
	if blockSize <= 0 || blockSize > math.MaxInt32 {
		return 0, argError(op, "block size %d: must be positive", blockSize)
	}
	if err := checkInt32(op, "dynamic shared memory", dynamicSMem); err != nil {
		return 0, err
	}
	if err := checkOccupancyFlags(op, flags); err != nil {
		return 0, err
	}
	out := new(int32)
	err := f.onFunction(op, func(h uintptr) error {
		if flags == OccupancyDefault {
			return cuOccupancyMaxActiveBlocksPerMultiprocessor(out, h, int32(blockSize), uintptr(dynamicSMem))
		}
		return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(out, h, int32(blockSize), uintptr(dynamicSMem), uint32(flags))
	})
	return int(*out), err
}

// MaxPotentialBlockSize returns the block size that reaches the highest
// occupancy for a kernel with dynamicSMem bytes of dynamic shared memory
// per block, whatever the block size, and the smallest grid that fills
// the device at that size (cuOccupancyMaxPotentialBlockSize, or its
// WithFlags form). blockSizeLimit caps the block size; 0 means none.
func (f *Function) MaxPotentialBlockSize(dynamicSMem, blockSizeLimit int, flags OccupancyFlags) (minGrid, blockSize int, err error) {
	const op = "Function.MaxPotentialBlockSize"
	if err := checkInt32(op, "dynamic shared memory", dynamicSMem); err != nil {
		return 0, 0, err
	}
	if err := checkInt32(op, "block size limit", blockSizeLimit); err != nil {
		return 0, 0, err
	}
	if err := checkOccupancyFlags(op, flags); err != nil {
		return 0, 0, err
	}
	out := new([2]int32)
	err = f.onFunction(op, func(h uintptr) error {
		// No callback: the dynamic shared memory is the same at every
		// block size.
		if flags == OccupancyDefault {
			return cuOccupancyMaxPotentialBlockSize(&out[0], &out[1], h, 0, uintptr(dynamicSMem), int32(blockSizeLimit))
		}
		return cuOccupancyMaxPotentialBlockSizeWithFlags(&out[0], &out[1], h, 0, uintptr(dynamicSMem), int32(blockSizeLimit), uint32(flags))
	})
	return int(out[0]), int(out[1]), err
}

// AvailableDynamicSMem returns the most dynamic shared memory, in bytes,
// that each block can have while numBlocks blocks of blockSize threads are
// resident on one multiprocessor (cuOccupancyAvailableDynamicSMemPerBlock).
func (f *Function) AvailableDynamicSMem(numBlocks, blockSize int) (int, error) {
	const op = "Function.AvailableDynamicSMem"
	if numBlocks <= 0 || numBlocks > math.MaxInt32 {
		return 0, argError(op, "block count %d: must be positive", numBlocks)
	}
	if blockSize <= 0 || blockSize > math.MaxInt32 {
		return 0, argError(op, "block size %d: must be positive", blockSize)
	}
	out := new(uintptr)
	err := f.onFunction(op, func(h uintptr) error {
		return cuOccupancyAvailableDynamicSMemPerBlock(out, h, int32(numBlocks), int32(blockSize))
	})
	return int(*out), err
}

// MaxPotentialClusterSize returns the largest cluster size, in blocks,
// that a launch of cfg can use (cuOccupancyMaxPotentialClusterSize);
// attrs.Cluster is ignored, its other attributes count.
func (f *Function) MaxPotentialClusterSize(cfg LaunchConfig, attrs LaunchAttributes) (int, error) {
	attrs.Cluster = Dim3{}
	return f.clusterQuery("Function.MaxPotentialClusterSize", cfg, &attrs, false)
}

// MaxActiveClusters returns how many clusters of attrs.Cluster blocks of
// cfg can be resident on the device at once (cuOccupancyMaxActiveClusters).
// attrs.Cluster must be set.
func (f *Function) MaxActiveClusters(cfg LaunchConfig, attrs LaunchAttributes) (int, error) {
	const op = "Function.MaxActiveClusters"
	if attrs.Cluster == (Dim3{}) {
		return 0, argError(op, "no cluster size in the attributes")
	}
	return f.clusterQuery(op, cfg, &attrs, true)
}

func (f *Function) clusterQuery(op string, cfg LaunchConfig, attrs *LaunchAttributes, active bool) (int, error) {
	dims, err := launchDims(op, cfg)
	if err != nil {
		return 0, err
	}
	ex := getExSlab()
	defer putExSlab(ex)
	if err := ex.config(op, &dims, 0, attrs); err != nil {
		return 0, err
	}
	out := new(int32)
	err = f.onFunction(op, func(h uintptr) error {
		if active {
			return cuOccupancyMaxActiveClusters(out, h, &ex.cfg)
		}
		return cuOccupancyMaxPotentialClusterSize(out, h, &ex.cfg)
	})
	return int(*out), err
}
