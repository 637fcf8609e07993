package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
)

// CUDA graphs: work captured once from a stream ([Stream.Capture]) and
// replayed with one call per launch ([GraphExec.Launch]), which costs the
// host far less than issuing each operation again.

// ErrGraphUpdate is CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: the graph given to
// [GraphExec.Update] differs from the instantiated one in more than
// parameters (its topology, node types or kernels).
const ErrGraphUpdate Result = 910

const captureModeThreadLocal = 1 // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL

// graphUse is an object that a captured operation uses: host memory that
// copies read or write, or a device buffer.
type graphUse struct {
	res  *resource
	keep any // the owner, kept reachable as long as the graph is
	host bool
	node uintptr // the node of a built graph that uses it; 0 in a capture
}

// dedupe returns uses with each resource once, for locking at a launch.
func dedupe(uses []graphUse) []graphUse {
	out := make([]graphUse, 0, len(uses))
	for _, u := range uses {
		dup := false
		for _, v := range out {
			if v.res == u.res {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, u)
		}
	}
	return out
}

// capture collects what the operations captured on a stream use.
type capture struct {
	mu   sync.Mutex
	uses []graphUse
}

func (c *capture) add(r *resource, keep any, host bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, u := range c.uses {
		if u.res == r {
			return
		}
	}
	c.uses = append(c.uses, graphUse{res: r, keep: keep, host: host})
}

func (c *capture) list() []graphUse {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]graphUse(nil), c.uses...)
}

// capturing reports whether a graph capture is in progress on s.
func (s *Stream) capturing() bool { return s.capt.Load() != nil }

// Graph is a CUDA graph, made by [Stream.Capture] or built node by node
// from [Context.NewGraph]. The caller owns it and must Close it; a
// [GraphExec] instantiated from it stays valid after.
type Graph struct {
	owned
	// mu serialises the calls that change or read the graph's nodes: the
	// driver's graph objects are not thread-safe.
	mu    sync.Mutex
	uses  []graphUse // guarded by mu
	nodes []uintptr  // guarded by mu: a built graph's nodes, in the order added
}

// Capture records the work that fn queues on s into a graph instead of
// running it (cuStreamBeginCapture_v2 in thread-local mode, then
// cuStreamEndCapture). fn runs on the calling goroutine, locked to its OS
// thread with s's context current, and gets a [Bound] for the issue calls;
// calling s's own methods works too. Thread-local mode means that only this
// thread is barred from the calls that capture forbids (synchronising,
// allocating with cuMemAlloc, ...): other goroutines go on as usual.
//
// Copies, memsets and kernel launches queued on s are captured; kernel
// arguments are copied at capture, as at a launch. The host memory and
// device buffers that captured copies and memsets use are recorded, kept
// reachable with the graph and every GraphExec made from it, and checked
// open at each launch. Device addresses passed as kernel arguments are
// not tracked: keep those buffers open while a GraphExec may run.
//
// When fn returns an error, or panics, the capture is ended and its graph
// discarded, and the error (or panic) goes on to the caller. A capture that
// the driver invalidated (a forbidden call inside fn, for instance) is
// reported as the driver's error. The stream must not be used for anything
// but the capture while it lasts.
//
// The capture always ends on the thread that began it, before that thread
// is unlocked, even when fn releases its Bound. s's Close, and its
// Context's, wait for a capture in progress to end and its graph to be
// adopted (or, when the context is closing, destroyed: Capture then
// returns ErrClosed), and so does the Close of every other Context of the
// device, so fn must not close s or any such Context itself: the driver
// refuses to wait for a capturing stream, or for its context, and
// invalidates the capture. For the same reason Capture first waits for
// the copies queued on s that still use host memory, so that a Close of
// that memory never needs to wait for s mid-capture; captured copies run
// nothing, and hold no memory in use until a launch of the graph.
func (s *Stream) Capture(fn func(b *Bound) error) (*Graph, error) {
	const op = "Stream.Capture"
	if s == nil || s.res == nil {
		return nil, argError(op, "nil *Stream")
	}
	if fn == nil {
		return nil, argError(op, "nil function")
	}
	c := &capture{}
	if !s.capt.CompareAndSwap(nil, c) {
		return nil, argError(op, "the stream is already capturing")
	}
	defer s.capt.Store(nil) // runs last, after the capture ended
	r := s.res
	k := r.core
	gate, err := k.beginCapture(op)
	if err != nil {
		return nil, err
	}
	defer gate.exit() // after the graph is adopted or destroyed
	r.capture.RLock() // release waits for the capture (see resource.capture)
	defer r.capture.RUnlock()
	// The capture's own lock of the thread, below fn's Bound: the capture
	// ends on the thread that began it whatever fn does with the Bound.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bd, err := s.ctx.Bind()
	if err != nil {
		return nil, err
	}
	defer bd.Release()
	if err := sameContext(op, bd.via().k, k); err != nil {
		return nil, err
	}
	h, err := s.beginCapture(op)
	defer r.capturing.Store(false)
	if err != nil {
		return nil, err
	}
	ended := false
	defer func() {
		if !ended { // fn panicked or ended its goroutine: drop the graph
			_, _ = s.endCapture(op, k, h, c, errCaptureAborted)
		}
	}()
	fnErr := fn(bd)
	ended = true
	return s.endCapture(op, k, h, c, fnErr)
}

// captureGate is a device's: the captures in progress on its primary
// context, which every Context of the device shares, and the Closes
// waiting to synchronise that context, a wait that the driver refuses
// while a stream of it is capturing (invalidating the capture).
type captureGate struct {
	mu      sync.Mutex
	changed sync.Cond // on mu: active or holding dropped to 0
	active  int       // captures in progress
	holding int       // Closes waiting for them or using the lull
}

var captureGates sync.Map // device ordinal → *captureGate

func gateOf(dev Device) *captureGate {
	if g, ok := captureGates.Load(dev.ordinal); ok {
		return g.(*captureGate)
	}
	g := &captureGate{}
	g.changed.L = &g.mu
	actual, _ := captureGates.LoadOrStore(dev.ordinal, g)
	return actual.(*captureGate)
}

// hold waits until no capture is in progress and keeps new ones from
// beginning until letGo.
func (g *captureGate) hold() {
	g.mu.Lock()
	g.holding++
	for g.active > 0 {
		g.changed.Wait()
	}
	g.mu.Unlock()
}

func (g *captureGate) letGo() {
	g.mu.Lock()
	if g.holding--; g.holding == 0 {
		g.changed.Broadcast()
	}
	g.mu.Unlock()
}

// enter counts a capture in. It waits while a Close holds the gate with
// no capture in progress; while others are in progress, the Close waits
// for them anyway, and a capture that its function begins must not wait
// for a Close that waits for the capture around it.
func (g *captureGate) enter() {
	g.mu.Lock()
	for g.holding > 0 && g.active == 0 {
		g.changed.Wait()
	}
	g.active++
	g.mu.Unlock()
}

func (g *captureGate) exit() {
	g.mu.Lock()
	if g.active--; g.active == 0 {
		g.changed.Broadcast()
	}
	g.mu.Unlock()
}

// beginCapture counts a capture in progress on k's device, unless k is
// closing. On success the caller must call the gate's exit once the
// capture's graph is adopted or destroyed.
func (k *ctxCore) beginCapture(op string) (*captureGate, error) {
	k.mu.Lock()
	closing := k.closing
	k.mu.Unlock()
	if closing {
		return nil, closedError(op)
	}
	g := gateOf(k.dev)
	g.enter()
	return g, nil
}

// beginCapture begins capturing on s, with s's context current, and
// returns its handle. It first waits for the copies queued on s that
// still use host memory, with s write-locked so that no wait for s on
// behalf of that memory runs meanwhile: once the capture has begun, the
// driver refuses such a wait, and there is nothing left for one to wait
// for (resource.synchronizeLocked).
func (s *Stream) beginCapture(op string) (uintptr, error) {
	r := s.res
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.handle.Load()
	if h == 0 {
		return 0, closedError(op)
	}
	sc := getScratch()
	defer putScratch(sc)
	if r.uses.pending() {
		mark := r.uses.mark()
		if err := cuStreamSynchronize(sc, h); err != nil {
			return 0, err
		}
		r.uses.complete(mark)
	}
	r.capturing.Store(true)
	return h, cuStreamBeginCapture(sc, h, captureModeThreadLocal)
}

// errCaptureAborted stands for fn's error when fn did not return.
var errCaptureAborted = errors.New("cuda: Stream.Capture: the capture function did not return")

// endCapture ends the capture on s, whose handle is h, on the calling
// thread (the one that began it), and adopts its graph, or destroys it when
// fnErr or the end failed. It holds k's lifetime lock from the end of the
// capture to the adoption, so that the graph is never untracked while the
// context could be released. It ends the capture even when k cannot be made
// current, so that the thread never goes back to the scheduler in capture
// mode.
func (s *Stream) endCapture(op string, k *ctxCore, h uintptr, c *capture, fnErr error) (*Graph, error) {
	// k outlives the capture: its Close releases s first, which waits for
	// the capture (resource.capture).
	if err := k.alive(op); err != nil {
		return nil, err
	}
	defer k.life.RUnlock()
	if k.enter(op) == nil {
		defer leave()
	}
	var g uintptr
	s.res.mu.RLock()
	err := cuStreamEndCapture(h, &g)
	s.res.mu.RUnlock()
	if fnErr != nil || err != nil {
		if g != 0 {
			_ = cuGraphDestroy(g)
		}
		if fnErr != nil {
			return nil, fnErr
		}
		return nil, err
	}
	r, err := k.adopt(op, kindGraph, g, nil)
	if err != nil {
		return nil, err
	}
	graph := &Graph{uses: c.list()}
	own(graph, &graph.owned, s.ctx, r, true)
	return graph, nil
}

// Capturing reports whether s is capturing a graph, as the driver sees it
// (cuStreamIsCapturing): true from the start of [Stream.Capture]'s function
// to its end, unless the driver invalidated the capture.
func (s *Stream) Capturing() (bool, error) {
	const op = "Stream.Capturing"
	h, err := s.lock(op)
	if err != nil {
		return false, err
	}
	defer s.done()
	if err := s.res.core.enter(op); err != nil {
		return false, err
	}
	defer leave()
	var st int32
	if err := cuStreamIsCapturing(h, &st); err != nil {
		return false, err
	}
	return st == 1, nil // CU_STREAM_CAPTURE_STATUS_ACTIVE
}

// Instantiate makes an executable graph of g (cuGraphInstantiateWithFlags,
// no flags). The caller owns it and must Close it.
func (g *Graph) Instantiate() (*GraphExec, error) {
	const op = "Graph.Instantiate"
	if g == nil {
		return nil, argError(op, "nil *Graph")
	}
	gh, err := g.use(op)
	if err != nil {
		return nil, err
	}
	defer g.done()
	k := g.res.core
	if err := k.alive(op); err != nil {
		return nil, err
	}
	defer k.life.RUnlock()
	if err := k.enter(op); err != nil {
		return nil, err
	}
	defer leave()
	g.mu.Lock()
	defer g.mu.Unlock()
	var h uintptr
	if err := cuGraphInstantiateWithFlags(&h, gh, 0); err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindGraphExec, h, nil)
	if err != nil {
		return nil, err
	}
	if err := r.setOrigin(op, g.res); err != nil {
		return nil, err
	}
	e := &GraphExec{from: g.res, nodes: append([]uintptr(nil), g.nodes...)}
	e.setUses(g.uses)
	own(e, &e.owned, g.ctx, r, true)
	return e, nil
}

// setOrigin records g as the graph that r, a graph exec just made, was
// instantiated from: g's Close then leaves g's handle for r's to destroy,
// since the driver names r's nodes by g's.
func (r *resource) setOrigin(op string, g *resource) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handle.Load() == 0 { // released meanwhile by its context's Close
		return closedError(op)
	}
	r.core.mu.Lock()
	r.origin = g
	g.execs++
	r.core.mu.Unlock()
	return nil
}

// keepForExecs reports whether r, when a graph whose handle is h, must
// outlive its Close for the execs instantiated from it, and if so keeps h
// for the last of them to destroy (dropOrigin).
func (r *resource) keepForExecs(h uintptr) bool {
	if r.kind != kindGraph {
		return false
	}
	r.core.mu.Lock()
	defer r.core.mu.Unlock()
	if r.execs == 0 {
		return false
	}
	r.kept = h
	return true
}

// dropOrigin is part of the release of r, a graph exec, with its context
// current: the last exec of a closed graph destroys it (cuGraphDestroy).
func (r *resource) dropOrigin() error {
	g := r.origin
	if g == nil {
		return nil
	}
	r.origin = nil
	r.core.mu.Lock()
	g.execs--
	var h uintptr
	if g.execs == 0 {
		h, g.kept = g.kept, 0
	}
	r.core.mu.Unlock()
	if h == 0 {
		return nil
	}
	return cuGraphDestroy(h)
}

// Close destroys the graph (cuGraphDestroy). Executable graphs made from it
// are not affected: the driver names their nodes by this graph's, so while
// any is open the graph is destroyed only when the last of them closes.
// Using the graph after Close returns ErrClosed. A second Close returns
// nil.
func (g *Graph) Close() error {
	if g == nil {
		return nil
	}
	return g.close()
}

// GraphExec is an executable graph, made by [Graph.Instantiate]. The caller
// owns it and must Close it. It keeps the memory that its copies use
// reachable; Launch checks that memory is still open.
//
// Launch and Update may be called from any goroutine; launches of one
// GraphExec are serialised on the host, and an Update waits for launches
// in progress on the host (not on the device: the driver orders a launch
// after every earlier launch of the same GraphExec).
type GraphExec struct {
	owned
	launchMu sync.Mutex // the driver's graph objects are not thread-safe
	// The fields below are guarded by res.mu: read-held to read them,
	// write-held to change them.
	from *resource  // the graph instantiated or last updated from: its nodes are e's
	all  []graphUse // what each node uses
	uses []graphUse // all, each resource once: what a launch locks
	// nodes are the graph instantiated from's nodes, in the order added
	// (none for a captured graph), set once: the handles that name e's
	// nodes to the driver, also after an update from another graph.
	nodes []uintptr
}

// setUses makes uses (a copy) what e's nodes use.
func (e *GraphExec) setUses(uses []graphUse) {
	e.all = append([]graphUse(nil), uses...)
	e.uses = dedupe(e.all)
}

// Launch queues the graph on s (cuGraphLaunch). Every host buffer,
// registration and device buffer that the graph's copies and memsets use
// must still be open, or Launch returns ErrClosed and queues nothing; the
// host memory is then kept alive until the host sees the launch complete,
// as for a copy queued on s. s must belong to the graph's context.
func (e *GraphExec) Launch(s *Stream) error { return e.launch(via{}, s) }

// LaunchGraph is [GraphExec.Launch] without the context check.
func (b *Bound) LaunchGraph(e *GraphExec, s *Stream) error {
	return e.launchFor("Bound.LaunchGraph", b.via(), s)
}

// launch is GraphExec.Launch through bound.
func (e *GraphExec) launch(bound via, s *Stream) error {
	return e.launchFor("GraphExec.Launch", bound, s)
}

// launchFor is the launch that op (GraphExec.Launch, Bound.LaunchGraph)
// makes.
func (e *GraphExec) launchFor(op string, bound via, s *Stream) error {
	if e == nil {
		return argError(op, "nil *GraphExec")
	}
	eh, err := e.use(op)
	if err != nil {
		return err
	}
	defer e.done()
	// Memory first, then the stream, as every call locks.
	for i, u := range e.uses {
		if _, err := u.res.acquire(op); err != nil {
			for _, v := range e.uses[:i] {
				v.res.mu.RUnlock()
			}
			return fmt.Errorf("%w: a %s that the graph uses was closed", closedError(op), u.res.kind)
		}
	}
	defer func() {
		for _, u := range e.uses {
			u.res.mu.RUnlock()
		}
	}()
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	if err := sameContext(op, e.res.core, s.res.core); err != nil {
		return err
	}
	e.launchMu.Lock()
	var sc *scratch
	if sc, err = s.issuing(op, bound); err == nil {
		err = cuGraphLaunch(sc, bound.direct, eh, h)
		bound.issued(sc)
	}
	e.launchMu.Unlock()
	if err != nil {
		return err
	}
	c := s.capt.Load()
	for _, u := range e.uses {
		if c != nil { // a captured launch runs nothing now
			c.add(u.res, u.keep, u.host)
		} else if u.host {
			s.res.uses.add(u.res, u.keep)
		}
	}
	return nil
}

// graphExecUpdateResultInfo is CUgraphExecUpdateResultInfo, which the
// reference file of this project lacks; layout from cudarc's bindgen
// output of cuda.h (github.com/coreylowman/cudarc, src/driver/sys/mod.rs,
// CUgraphExecUpdateResultInfo_st): an enum, then two CUgraphNode handles.
type graphExecUpdateResultInfo struct {
	result        int32 // CUgraphExecUpdateResult
	_             int32
	errorNode     uint64 // CUgraphNode handles, 8 bytes on 64-bit hosts
	errorFromNode uint64
}

// CUgraphExecUpdateResult values, from the same source.
var updateResults = [...]string{
	0: "success",
	1: "error",
	2: "topology changed",
	3: "node type changed",
	4: "kernel function changed",
	5: "parameters changed in an unsupported way",
	6: "not supported",
	7: "unsupported kernel function change",
	8: "attributes changed",
}

// Update makes e run g's parameters from its next launch on, without
// instantiating again (cuGraphExecUpdate_v2): g must have e's topology,
// with the same kinds of nodes and the same kernels; kernel arguments,
// launch shapes and copy addresses may differ. Typically g is a new
// capture of the same issue code with other buffers. A g that differs more
// is ErrGraphUpdate, and e stays as it was. From then on e keeps g's
// memory, not its old graph's, reachable, and the nodes of g identify e's
// nodes for the Set methods ([GraphExec.SetKernel] and the like): each
// stands for the node added at the same position to the graph e was
// instantiated from (the driver pairs them so, and names e's nodes by
// that graph's, which e therefore keeps until it closes). Nodes of the
// graph e was instantiated or updated from before are refused, as are
// nodes added to g after the update, so that one set of nodes at a time
// names e's; to use them again, Update from their graph.
func (e *GraphExec) Update(g *Graph) error {
	const op = "GraphExec.Update"
	if e == nil || e.res == nil {
		return argError(op, "nil *GraphExec")
	}
	if g == nil || g.res == nil {
		return argError(op, "nil *Graph")
	}
	// Write-lock e: no launch runs meanwhile, and Launch reads e.uses.
	e.res.mu.Lock()
	defer e.res.mu.Unlock()
	eh := e.res.handle.Load()
	if eh == 0 {
		return closedError(op)
	}
	gh, err := g.use(op)
	if err != nil {
		return err
	}
	defer g.done()
	k := e.res.core
	if err := sameContext(op, k, g.res.core); err != nil {
		return err
	}
	if err := k.enter(op); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	info := new(graphExecUpdateResultInfo)
	err = cuGraphExecUpdate(eh, gh, info)
	leave()
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) && info.result > 0 && int(info.result) < len(updateResults) {
			ce.Detail = updateResults[info.result]
		}
		return err
	}
	e.setUses(g.uses)
	e.from = g.res
	return nil
}

// Close destroys the executable graph (cuGraphExecDestroy); launches
// already queued still complete. A second Close returns nil.
func (e *GraphExec) Close() error {
	if e == nil {
		return nil
	}
	return e.close()
}
