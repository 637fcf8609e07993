package driver

import (
	"fmt"
	"unsafe"
)

// Graphs built node by node, and per-node updates of an instantiated graph.
//
// The reference file of this project lacks the two parameter structs these
// calls take; their layouts come from cudarc's bindgen output of cuda.h
// (github.com/coreylowman/cudarc, src/driver/sys/mod.rs, for cuda-12080 to
// cuda-13000): CUDA_KERNEL_NODE_PARAMS_v2_st (which CUDA_KERNEL_NODE_PARAMS
// names from CUDA 12.0 on) and CUDA_MEMCPY3D_st. Tests check the sizes and
// offsets.

// kernelNodeParams is CUDA_KERNEL_NODE_PARAMS_v2 on 64-bit hosts.
type kernelNodeParams struct {
	fn                  uint64 // CUfunction
	gridX, gridY, gridZ uint32
	blockX, blockY      uint32
	blockZ              uint32
	sharedMem           uint32
	_                   uint32
	kernelParams        uint64 // void **: the pinned slab's pointer array
	extra               uint64 // void **, unused
	kern                uint64 // CUkernel, unused (fn is set)
	ctx                 uint64 // CUcontext; 0: the current one
}

// memcpy3D is CUDA_MEMCPY3D on 64-bit hosts; a one-dimensional copy uses
// the byte offsets, the memory types, the addresses and WidthInBytes, with
// every height and depth 1.
type memcpy3D struct {
	srcXInBytes, srcY, srcZ, srcLOD uint64
	srcMemoryType                   uint32 // CUmemorytype
	_                               uint32
	srcHost, srcDevice, srcArray    uint64
	reserved0                       uint64
	srcPitch, srcHeight             uint64
	dstXInBytes, dstY, dstZ, dstLOD uint64
	dstMemoryType                   uint32
	_                               uint32
	dstHost, dstDevice, dstArray    uint64
	reserved1                       uint64
	dstPitch, dstHeight             uint64
	widthInBytes, height, depth     uint64
}

const (
	memoryTypeHost   = 1 // CU_MEMORYTYPE_HOST
	memoryTypeDevice = 2 // CU_MEMORYTYPE_DEVICE
)

// GraphNode is a node of a [Graph] built with its Add methods: a kernel or
// a copy. Pass it as a dependency of later nodes, and to the GraphExec Set
// methods to change its parameters in an executable graph instantiated, or
// last updated ([GraphExec.Update]), from its graph. It is valid while its
// graph is open.
type GraphNode struct {
	g      *Graph
	h      uintptr // CUgraphNode
	idx    int     // its position in g.nodes
	kernel *Function
	copyTo int // 1: to the device, 2: to the host, 0: a kernel
}

// NewGraph creates an empty graph (cuGraphCreate), to build with
// [Graph.AddKernel], [Graph.AddCopyToDevice] and [Graph.AddCopyToHost]. The
// caller owns it and must Close it.
func (c *Context) NewGraph() (*Graph, error) {
	const op = "Context.NewGraph"
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	var h uintptr
	if err := cuGraphCreate(&h, 0); err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindGraph, h, nil)
	if err != nil {
		return nil, err
	}
	g := &Graph{}
	own(g, &g.owned, c, r, true)
	return g, nil
}

// build runs add, which calls the driver to add a node with deps, with g
// locked, its context current and the n dependency handles in an array.
func (g *Graph) build(op string, deps []GraphNode, add func(gh uintptr, deps *uintptr, n int) (uintptr, error)) (GraphNode, error) {
	if g == nil {
		return GraphNode{}, argError(op, "nil *Graph")
	}
	gh, err := g.use(op)
	if err != nil {
		return GraphNode{}, err
	}
	defer g.done()
	hs := make([]uintptr, len(deps)+1) // never empty: &hs[0] is valid
	for i, d := range deps {
		if d.g != g || d.h == 0 {
			return GraphNode{}, argError(op, "dependency %d is not a node of this graph", i)
		}
		hs[i] = d.h
	}
	if err := g.res.core.enter(op); err != nil {
		return GraphNode{}, err
	}
	defer leave()
	g.mu.Lock()
	defer g.mu.Unlock()
	h, err := add(gh, &hs[0], len(deps))
	if err != nil {
		return GraphNode{}, err
	}
	g.nodes = append(g.nodes, h)
	return GraphNode{g: g, h: h, idx: len(g.nodes) - 1}, nil
}

// kernelParams fills p for f, cfg and args, with the argument values in a
// pinned slab that the caller returns with putSlab after the driver call
// (which copies them).
func kernelParams(op string, f *Function, cfg LaunchConfig, args *Args, p *kernelNodeParams) (*argSlab, error) {
	if args == nil {
		return nil, argError(op, "nil *Args (use NewArgs() for a kernel without parameters)")
	}
	gx, gy, gz, ok := cfg.Grid.norm()
	if !ok {
		return nil, argError(op, "grid %+v: sizes must be positive", cfg.Grid)
	}
	bx, by, bz, ok := cfg.Block.norm()
	if !ok {
		return nil, argError(op, "block %+v: sizes must be positive", cfg.Block)
	}
	if cfg.SharedMem < 0 {
		return nil, argError(op, "shared memory %d: must not be negative", cfg.SharedMem)
	}
	if err := f.checkArgsFor(op, args); err != nil {
		return nil, err
	}
	slab := getSlab()
	copy(slab.vals[:(args.used+7)/8], args.vals[:])
	base := unsafe.Pointer(&slab.vals[0])
	for i := 0; i < args.n; i++ {
		slab.ptrs[i] = unsafe.Add(base, args.offs[i])
	}
	*p = kernelNodeParams{
		fn:    uint64(f.handle),
		gridX: uint32(gx), gridY: uint32(gy), gridZ: uint32(gz),
		blockX: uint32(bx), blockY: uint32(by), blockZ: uint32(bz),
		sharedMem:    uint32(cfg.SharedMem),
		kernelParams: uint64(uintptr(unsafe.Pointer(&slab.ptrs[0]))),
	}
	return slab, nil
}

// AddKernel adds a launch of f with cfg and args (cuGraphAddKernelNode_v2),
// after deps. The argument values are copied now, as at a launch, and
// checked against the kernel's parameters where known. f must belong to
// the graph's context.
func (g *Graph) AddKernel(f *Function, cfg LaunchConfig, args *Args, deps ...GraphNode) (GraphNode, error) {
	const op = "Graph.AddKernel"
	if f == nil || f.mod == nil {
		return GraphNode{}, argError(op, "nil *Function")
	}
	if _, err := f.mod.use(op); err != nil {
		return GraphNode{}, err
	}
	defer f.mod.done()
	if g != nil && g.res != nil {
		if err := sameContext(op, f.mod.res.core, g.res.core); err != nil {
			return GraphNode{}, err
		}
	}
	p := new(kernelNodeParams)
	slab, err := kernelParams(op, f, cfg, args, p)
	if err != nil {
		return GraphNode{}, err
	}
	defer putSlab(slab)
	n, err := g.build(op, deps, func(gh uintptr, dh *uintptr, nd int) (uintptr, error) {
		var h uintptr
		err := cuGraphAddKernelNode(&h, gh, dh, uintptr(nd), p)
		return h, err
	})
	if err != nil {
		return GraphNode{}, err
	}
	n.kernel = f
	return n, nil
}

// copyParams locks dev and host for a one-dimensional copy of n bytes,
// checks them against k and fills p. On success the caller must unlock
// both (dev.done(), mem.mu.RUnlock()).
func copyParams(op string, k *ctxCore, toDevice bool, dev *DeviceBuffer, devOff int, host HostMemory, hostOff, n int, p *memcpy3D) (mem *resource, keep any, err error) {
	devRole, hostRole := "source", "destination"
	if toDevice {
		devRole, hostRole = "destination", "source"
	}
	if host == nil {
		return nil, nil, argError(op, "nil %s HostMemory", hostRole)
	}
	if n <= 0 {
		return nil, nil, argError(op, "size %d: must be positive", n)
	}
	d, err := dev.lockSpan(op, devRole, devOff, n)
	if err != nil {
		return nil, nil, err
	}
	hp, mem, keep, err := host.lockSpan(op, hostRole, hostOff, n)
	if err != nil {
		dev.done()
		return nil, nil, err
	}
	err = sameContext(op, dev.res.core, k)
	if err == nil && !mem.portable {
		err = sameContext(op, mem.core, k)
	}
	if err != nil {
		mem.mu.RUnlock()
		dev.done()
		return nil, nil, err
	}
	*p = memcpy3D{widthInBytes: uint64(n), height: 1, depth: 1,
		srcPitch: uint64(n), srcHeight: 1, dstPitch: uint64(n), dstHeight: 1}
	if toDevice {
		p.srcMemoryType, p.srcHost = memoryTypeHost, uint64(hp)
		p.dstMemoryType, p.dstDevice = memoryTypeDevice, uint64(d)
	} else {
		p.srcMemoryType, p.srcDevice = memoryTypeDevice, uint64(d)
		p.dstMemoryType, p.dstHost = memoryTypeHost, uint64(hp)
	}
	return mem, keep, nil
}

func (g *Graph) addCopy(op string, toDevice bool, dev *DeviceBuffer, devOff int, host HostMemory, hostOff, n int, deps []GraphNode) (GraphNode, error) {
	if g == nil || g.res == nil {
		return GraphNode{}, argError(op, "nil *Graph")
	}
	p := new(memcpy3D)
	k := g.res.core
	mem, keep, err := copyParams(op, k, toDevice, dev, devOff, host, hostOff, n, p)
	if err != nil {
		return GraphNode{}, err
	}
	defer mem.mu.RUnlock()
	defer dev.done()
	node, err := g.build(op, deps, func(gh uintptr, dh *uintptr, nd int) (uintptr, error) {
		var h uintptr
		err := cuGraphAddMemcpyNode(&h, gh, dh, uintptr(nd), p, k.handle.Load())
		if err == nil {
			// Under g.mu, which build holds.
			g.uses = append(g.uses,
				graphUse{res: mem, keep: keep, host: true, node: h},
				graphUse{res: dev.res, keep: dev, node: h})
		}
		return h, err
	})
	if err != nil {
		return GraphNode{}, err
	}
	node.copyTo = 2
	if toDevice {
		node.copyTo = 1
	}
	return node, nil
}

// AddCopyToDevice adds a copy of n bytes from src at srcOff to dst at
// dstOff (cuGraphAddMemcpyNode), after deps. src is kept reachable with
// the graph and its executables, and checked open at each launch.
func (g *Graph) AddCopyToDevice(dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int, deps ...GraphNode) (GraphNode, error) {
	return g.addCopy("Graph.AddCopyToDevice", true, dst, dstOff, src, srcOff, n, deps)
}

// AddCopyToHost adds a copy of n bytes from src at srcOff to dst at dstOff
// (cuGraphAddMemcpyNode), after deps, like [Graph.AddCopyToDevice].
func (g *Graph) AddCopyToHost(dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int, deps ...GraphNode) (GraphNode, error) {
	return g.addCopy("Graph.AddCopyToHost", false, src, srcOff, dst, dstOff, n, deps)
}

// setNode runs set, which calls the driver to change node n of e, named
// by node (the handle of the node at n's position in the graph e was
// instantiated from), with e write-locked (no launch meanwhile), n's graph
// locked and e's context current. prepare, when not nil, runs first with e
// locked: it locks the memory the node will use (e, then memory, then the
// graph, the order of every call) and returns how to unlock it.
func (e *GraphExec) setNode(op string, n GraphNode, prepare func() (func(), error), set func(eh, node uintptr) error) error {
	if e == nil || e.res == nil {
		return argError(op, "nil *GraphExec")
	}
	if n.g == nil || n.h == 0 {
		return argError(op, "not a node of a built graph")
	}
	e.res.mu.Lock()
	defer e.res.mu.Unlock()
	eh := e.res.handle.Load()
	if eh == 0 {
		return closedError(op)
	}
	if n.g.res != e.from {
		return argError(op, "the node is not of the graph the exec was instantiated or last updated from")
	}
	if n.idx >= len(e.nodes) {
		return argError(op, "the node was added after the exec was instantiated or updated, or the exec was instantiated from a captured graph")
	}
	node := e.nodes[n.idx]
	if prepare != nil {
		unlock, err := prepare()
		if err != nil {
			return err
		}
		defer unlock()
	}
	if _, err := n.g.use(op); err != nil {
		return fmt.Errorf("%w (the node's graph)", err)
	}
	defer n.g.done()
	if err := e.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	n.g.mu.Lock()
	defer n.g.mu.Unlock()
	return set(eh, node)
}

// SetKernel changes the launch shape and arguments of kernel node n in e
// (cuGraphExecKernelNodeSetParams_v2), from e's next launch on, without
// instantiating again. The kernel stays the node's own. It waits for
// launches of e in progress on the host.
func (e *GraphExec) SetKernel(n GraphNode, cfg LaunchConfig, args *Args) error {
	const op = "GraphExec.SetKernel"
	if n.kernel == nil {
		return argError(op, "not a kernel node")
	}
	f := n.kernel
	if _, err := f.mod.use(op); err != nil {
		return err
	}
	defer f.mod.done()
	p := new(kernelNodeParams)
	slab, err := kernelParams(op, f, cfg, args, p)
	if err != nil {
		return err
	}
	defer putSlab(slab)
	return e.setNode(op, n, nil, func(eh, node uintptr) error {
		return cuGraphExecKernelNodeSetParams(eh, node, p)
	})
}

func (e *GraphExec) setCopy(op string, n GraphNode, toDevice bool, dev *DeviceBuffer, devOff int, host HostMemory, hostOff, size int) error {
	want := 2
	if toDevice {
		want = 1
	}
	if n.copyTo != want {
		return argError(op, "not a copy node of this direction")
	}
	if e == nil || e.res == nil {
		return argError(op, "nil *GraphExec")
	}
	p := new(memcpy3D)
	k := e.res.core
	var mem *resource
	var keep any
	prepare := func() (func(), error) {
		var err error
		mem, keep, err = copyParams(op, k, toDevice, dev, devOff, host, hostOff, size, p)
		if err != nil {
			return nil, err
		}
		return func() { mem.mu.RUnlock(); dev.done() }, nil
	}
	return e.setNode(op, n, prepare, func(eh, node uintptr) error {
		if err := cuGraphExecMemcpyNodeSetParams(eh, node, p, k.handle.Load()); err != nil {
			return err
		}
		// The node now uses this memory, not what it used before (e.all
		// names each node by its handle in e.from, as n.h does).
		uses := make([]graphUse, 0, len(e.all)+2)
		for _, u := range e.all {
			if u.node != n.h {
				uses = append(uses, u)
			}
		}
		uses = append(uses, graphUse{res: mem, keep: keep, host: true, node: n.h},
			graphUse{res: dev.res, keep: dev, node: n.h})
		e.setUses(uses)
		return nil
	})
}

// SetCopyToDevice points copy node n of e at other memory
// (cuGraphExecMemcpyNodeSetParams), from e's next launch on: the same
// direction and context, any buffers and size. From then on e checks and
// keeps src and dst instead of the node's old memory.
func (e *GraphExec) SetCopyToDevice(n GraphNode, dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, size int) error {
	return e.setCopy("GraphExec.SetCopyToDevice", n, true, dst, dstOff, src, srcOff, size)
}

// SetCopyToHost is [GraphExec.SetCopyToDevice] for a copy to the host.
func (e *GraphExec) SetCopyToHost(n GraphNode, dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, size int) error {
	return e.setCopy("GraphExec.SetCopyToHost", n, false, src, srcOff, dst, dstOff, size)
}
