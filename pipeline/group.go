package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// Group runs one job over several devices of a host: each device has a
// pipeline of its own (streams, events, device slots and staging slots,
// and an issuing goroutine, but for a group of one device, which issues
// from the caller's), and every device takes its next chunk from
// one shared queue, so that a slower or busier device runs fewer chunks
// and the job ends when its last chunk does. Outputs land at each chunk's
// offset, so the result is the one a single device computes.
//
// Go memory is registered once for the whole group, through the first
// device, and every device copies from that registration: the GPU backend
// registers and allocates pinned memory portable, usable by every context.
// Pinned buffers that a job brings must be allocated portable too
// (driver.HostAllocOptions.Portable); memory pinned for one context only
// fails the first copy of another device with ErrWrongContext, naming the
// device and chunk.
//
// A failure on one device stops the job: the other devices stop taking
// chunks, everything in flight drains, and Run returns a *DeviceError
// naming the device and, inside it, the stage and the chunk where the
// failure is tied to one (a failed call); a kernel's fault is
// asynchronous and surfaces when the device drains, with no chunk. The
// group stays usable, unless draining a device failed (its context is
// broken), in which case the group closes itself, as a Pipeline does.
// CUDA treats a kernel's illegal address as fatal to the whole process:
// every GPU's context fails from then on.
type Group struct {
	pipes []*Pipeline

	mu     sync.Mutex // held by Run, StageTimes and Close
	closed bool
	broken error
}

// DeviceError is a failure on one device of a group.
type DeviceError struct {
	Device int    // the device's index in the group
	Name   string // its backend's name
	Err    error
}

func (e *DeviceError) Error() string {
	if e == nil {
		return "<nil>"
	}
	msg := strings.TrimPrefix(fmt.Sprint(e.Err), "pipeline: ")
	return fmt.Sprintf("pipeline: device %d (%s): %s", e.Device, e.Name, msg)
}

func (e *DeviceError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// DeviceReport is one device's part of a group's run.
type DeviceReport struct {
	Device  int
	Backend string
	// Chunks is how many chunks the device took from the queue.
	Chunks int
	// Busy is the time from the start of the run until the device's last
	// chunk was done.
	Busy time.Duration
}

// NewGroup builds one pipeline per backend, all with cfg. The backends
// must be distinct devices of one host: GPU backends of distinct contexts,
// or [HostSharer]s of one host (simulated devices of one simulated host).
// On error nothing is left allocated.
func NewGroup(backends []Backend, cfg Config) (*Group, error) {
	if len(backends) == 0 {
		return nil, errors.New("pipeline: a group needs at least one device")
	}
	var host any
	for i, b := range backends {
		hs, shared := b.(HostSharer)
		if b == nil || shared && hs.SharedHost() == nil {
			return nil, fmt.Errorf("pipeline: device %d of the group is a nil Backend", i)
		}
		for j := 0; j < i; j++ {
			if sameDevice(backends[j], b) {
				return nil, fmt.Errorf("pipeline: devices %d and %d of the group are the same device", j, i)
			}
		}
		switch {
		case shared && i == 0:
			host = hs.SharedHost()
		case shared != (host != nil) || (shared && hs.SharedHost() != host):
			return nil, errors.New("pipeline: a group's devices must all be GPUs, or all devices of one shared host (HostSharer), such as one simulated host")
		}
	}
	if cfg.Slots == 0 && len(backends) > 1 {
		// Several devices copy each chunk on their own (copiesFor): the
		// default's more slots for small chunks' coalesced copies would
		// only hold more memory on every device.
		cfg.Slots = cmp.Or(cfg.ComputeStreams, DefaultComputeStreams) + 2
	}
	g := &Group{}
	for _, b := range backends {
		p, err := New(b, cfg)
		if err != nil {
			g.release()
			return nil, err
		}
		g.pipes = append(g.pipes, p)
	}
	return g, nil
}

// sameDevice reports two backends that drive the same device.
func sameDevice(a, b Backend) bool {
	if a == b {
		return true
	}
	ga, ok1 := a.(*gpuBackend)
	gb, ok2 := b.(*gpuBackend)
	return ok1 && ok2 && ga.ctx == gb.ctx
}

// usable refuses a nil Group, or one that NewGroup did not make, for the
// method named.
func (g *Group) usable(method string) error {
	switch {
	case g == nil:
		return fmt.Errorf("pipeline: %s: nil *Group", method)
	case len(g.pipes) == 0:
		return fmt.Errorf("pipeline: %s: the Group was not made by NewGroup", method)
	}
	return nil
}

// Devices is how many devices the group has; 0 for a nil Group.
func (g *Group) Devices() int {
	if g == nil {
		return 0
	}
	return len(g.pipes)
}

// Backend returns device d's backend; nil when there is no device d.
func (g *Group) Backend(d int) Backend {
	if d < 0 || d >= g.Devices() {
		return nil
	}
	return g.pipes[d].b
}

// Config returns the configuration in force, defaults filled in; the
// zero Config for a nil Group.
func (g *Group) Config() Config {
	if g.usable("") != nil {
		return Config{}
	}
	return g.pipes[0].cfg
}

// Close frees every device's pipeline and the group's registrations. It is
// safe to call twice.
func (g *Group) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.release()
}

func (g *Group) release() error {
	var errs []error
	for _, p := range g.pipes {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

func (g *Group) closedErr() error {
	if g.broken != nil {
		return fmt.Errorf("%w after a failure: %v", ErrClosed, g.broken)
	}
	return ErrClosed
}

// Unregister drops the group's registration of b, if any.
func (g *Group) Unregister(b []byte) error {
	if err := g.usable("Unregister"); err != nil {
		return err
	}
	return g.pipes[0].Unregister(b)
}

// Registered reports how many bytes of Go memory the group keeps
// registered; 0 for a nil Group.
func (g *Group) Registered() int64 {
	if g.usable("") != nil {
		return 0
	}
	return g.pipes[0].Registered()
}

// chunkQueue hands a job's chunks out in order to the devices of a group.
type chunkQueue struct {
	next atomic.Int64
	n    int64
}

// take returns the next chunk, or -1 when none is left.
func (q *chunkQueue) take() int {
	c := q.next.Add(1) - 1
	if c >= q.n {
		return -1
	}
	return int(c)
}

// begin validates job on every device, resolves it once (registering Go
// memory through the first device, for all) and readies each device's
// staging slots. It returns one plan per device, each a copy of the
// resolved plan. g.mu held.
func (g *Group) begin(job Job) ([]*plan, error) {
	lead := g.pipes[0]
	pl, err := lead.resolve(job)
	if err != nil {
		return nil, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	plans := make([]*plan, len(g.pipes))
	for d, p := range g.pipes {
		if pl.staging {
			if err := p.allocStaging(); err != nil {
				return nil, g.deviceErr(d, &StageError{Chunk: -1, Stage: StageSetup, Err: err})
			}
		}
		cp := *pl
		cp.report = &Report{Backend: p.b.Name(), Mode: pl.mode, N: job.N, ChunkElems: p.cfg.ChunkElems, Chunks: pl.chunks}
		if d == 0 {
			cp.report.Register = pl.report.Register // the group's one registration
		}
		plans[d] = &cp
	}
	return plans, nil
}

// ready readies k on every device (Pipeline.ready), each uploading a
// copy of its parameters of its own, all at once, and returns the longest
// upload. g.mu held.
func (g *Group) ready(k *Kernel) (time.Duration, error) {
	upload := false
	for _, p := range g.pipes {
		if _, ok := p.params[weak.Make(k)]; len(k.Params) > 0 && !ok {
			upload = true
		}
	}
	took := make([]time.Duration, len(g.pipes))
	errs := make([]error, len(g.pipes))
	each := func(d int) { took[d], errs[d] = g.pipes[d].ready(k) }
	if upload {
		g.eachDevice(each, nil)
	} else {
		for d := range g.pipes {
			each(d)
		}
	}
	for d, err := range errs {
		if err != nil {
			return 0, g.deviceErr(d, &StageError{Chunk: -1, Stage: StageSetup, Err: err})
		}
	}
	return slices.Max(took), nil
}

// notes is what the devices have to say about k (Report.Notes), each note
// once.
func (g *Group) notes(k *Kernel) []string {
	var out []string
	for _, p := range g.pipes {
		for _, n := range notesOf(p.b, k) {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

func (g *Group) deviceErr(d int, err error) error {
	return &DeviceError{Device: d, Name: g.pipes[d].b.Name(), Err: err}
}

// validate checks job against every device: each must be able to run the
// kernel (the GPU backend loads it on each context).
func (g *Group) validate(job Job) error {
	for d, p := range g.pipes {
		if err := p.validate(job); err != nil {
			if d == 0 {
				return err
			}
			return g.deviceErr(d, err)
		}
	}
	return nil
}

// eachDevice runs fn for every device at once, each on a goroutine of its
// own (a host goroutine of its own on a HostTracker), and returns when
// all have. A group of one device runs fn on the caller's goroutine, as a
// Pipeline runs: a goroutine started and joined in every run cost the
// README's job 13.6-15.4 µs at the median on the H200, against 2.1-3.3
// µs now, over the same job through a Pipeline (bench/RESULTS.md, "Seven
// whole jobs inside, and a group of one on the caller's goroutine").
//
// A panic in fn (the caller's code that a run calls, such as a kernel's
// Args) calls stop, where it is not nil, so that the other devices stop
// taking chunks, and goes on on the caller's goroutine once every device
// has returned, where the caller can recover it; on a goroutine of its own
// it would end the program.
func (g *Group) eachDevice(fn func(d int), stop func()) {
	if len(g.pipes) == 1 {
		fn(0)
		return
	}
	rs := &handoff{}
	rs.init(g.pipes[0].b, 0)
	var caught firstPanic
	for d := range g.pipes {
		rs.spawn(fmt.Sprintf("device %d's issuing goroutine", d), func() {
			caught.guard(func() { fn(d) }, stop)
		})
	}
	rs.join()
	caught.rethrow()
}

// firstPanic keeps the first panic of several goroutines, for the
// goroutine that joins them to go on with, where its caller can recover
// it: on a goroutine of their own it would end the program. A goroutine
// that the caller's code ended with runtime.Goexit (a test's t.FailNow in
// a kernel's Args) counts as one: the joining goroutine then ends the
// same way, as it would have had the code run on it.
type firstPanic struct {
	mu sync.Mutex
	v  []any // the first panic's value (nil for a Goexit), once there is one
}

// guard runs fn, as the whole of a goroutine of the run's, and keeps
// its panic or its Goexit (catch).
func (f *firstPanic) guard(fn func(), then func()) {
	returned := false
	defer f.catch(&returned, then)
	fn()
	returned = true
}

// catch is deferred by a goroutine: it recovers the goroutine's panic,
// keeps it if it is the first, and calls then (where not nil), so that
// the others stop. returned, where not nil, is set by the goroutine once
// its work returned; still false with nothing to recover, the goroutine
// is ending through runtime.Goexit, which is kept too. The caller's own
// goroutine passes nil: its Goexit goes on by itself, and is not for
// rethrow to repeat.
func (f *firstPanic) catch(returned *bool, then func()) {
	v := recover()
	if v == nil && (returned == nil || *returned) {
		return
	}
	f.mu.Lock()
	if f.v == nil {
		f.v = []any{v}
	}
	f.mu.Unlock()
	if then != nil {
		then()
	}
}

// rethrow panics with the first panic kept, or ends the goroutine with
// runtime.Goexit where that came first; call it once every goroutine has
// ended.
func (f *firstPanic) rethrow() {
	f.mu.Lock()
	v := f.v
	f.mu.Unlock()
	switch {
	case v == nil:
	case v[0] == nil:
		runtime.Goexit()
	default:
		panic(v[0])
	}
}

// Run processes job over every device of the group and returns when every
// output is in place. Each device issues from a goroutine of its own (a
// group of one device from the caller's, as a Pipeline does),
// bound to an OS thread (on Linux pinned to the CPUs local to its GPU),
// and takes chunks from the shared queue as its slots free up. When ctx
// ends, every device stops taking chunks, work in flight drains, and Run
// returns ctx.Err(). The report's Devices says what each device did.
func (g *Group) Run(ctx context.Context, job Job) (*Report, error) {
	if err := g.usable("Run"); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := g.validate(job); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, g.closedErr()
	}
	lead := g.pipes[0]
	start := lead.runBegin()
	defer lead.runEnd()
	if job.N == 0 {
		return &Report{Backend: g.name(), Mode: job.Host, ChunkElems: lead.cfg.ChunkElems, Elapsed: lead.now() - start}, ctx.Err()
	}
	// Each device's copy of the kernel's parameters, and its scratch
	// buffers, before anything runs; not part of the run's time.
	readyFrom := readyClock(lead, job.Kernel)
	upload, err := g.ready(job.Kernel)
	if err != nil {
		return nil, err
	}
	// The readying is not part of the run's time, and only that: the
	// run's own fixed cost, which a simulator charges as the run begins,
	// stays in.
	start += readyTook(lead, job.Kernel, readyFrom)
	defer func() {
		if err := lead.evict(); err != nil && g.broken == nil {
			g.broken = err
		}
	}()
	plans, err := g.begin(job)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	queue := &chunkQueue{n: int64(plans[0].chunks)}
	// The devices stop together: a failure on one cancels runCtx for the
	// others. One device runs under ctx itself, as a Pipeline does, so
	// that a run that cannot be cancelled does not watch for it.
	runCtx, stop := ctx, func() {}
	if len(g.pipes) > 1 {
		runCtx, stop = context.WithCancel(ctx)
	}
	defer stop()
	errs := make([]error, len(g.pipes))
	// Also on the way out of a panic, which settling may have closed a
	// device's pipeline on (settleOnPanic); a no-op after the call below.
	defer g.closeBroken(errs)
	busy := make([]time.Duration, len(g.pipes))
	// failed is the first device whose run failed other than by the
	// caller's ctx ending; the others stop for it, and their errors (the
	// cancellation of runCtx) are not the run's. An error that merely
	// wraps a context error (a backend's, a kernel's) is a failure like
	// any other: it is the run's error, not a stop.
	var failedMu sync.Mutex
	failed := -1
	g.eachDevice(func(d int) {
		p, pl := g.pipes[d], plans[d]
		if len(g.pipes) > 1 {
			pl.queue = queue // one device runs its chunks in order, as a Pipeline
			pl.stopGroup = stop
		}
		if errs[d] = p.execute(runCtx, pl); errs[d] != nil {
			failedMu.Lock()
			if failed < 0 && !(ctx.Err() != nil && errors.Is(errs[d], ctx.Err())) {
				failed = d
			}
			failedMu.Unlock()
			stop() // the other devices stop taking chunks
		}
		busy[d] = p.now() - start
	}, stop)

	rep := &Report{Backend: g.name(), Mode: plans[0].mode, N: job.N, ChunkElems: lead.cfg.ChunkElems, Chunks: plans[0].chunks, Register: plans[0].report.Register,
		Schedule: plans[0].report.Schedule, Upload: upload, Notes: g.notes(job.Kernel)}
	// The first failure, not the others stopping for it.
	var first error
	if failed >= 0 {
		first = g.deviceErr(failed, errs[failed])
	}
	g.closeBroken(errs)
	if err := ctx.Err(); err != nil && first == nil {
		return nil, err
	}
	if first != nil {
		return nil, first
	}
	rep.Elapsed = lead.now() - start
	for d, pl := range plans {
		rep.Devices = append(rep.Devices, DeviceReport{Device: d, Backend: g.pipes[d].b.Name(), Chunks: pl.issued, Busy: busy[d]})
		if len(g.pipes) == 1 {
			rep.Spans = pl.report.Spans // as a Pipeline reports them
			if lead.cfg.Timing {
				rep.Origin = pl.origin - start
			}
			break
		}
		// Each device's spans are against its own origin event; they are
		// put on the run's clock, from its start.
		for _, sp := range pl.report.Spans {
			sp.Lane = fmt.Sprintf("device %d %s", d, sp.Lane)
			sp.Start += pl.origin - start
			sp.End += pl.origin - start
			rep.Spans = append(rep.Spans, sp)
		}
	}
	return rep, nil
}

// RunStream runs a streaming job over every device of the group, as
// Pipeline.RunStream runs it on one: one set of readers reads the inputs
// to their end, chunk by chunk, into the staging slots of all the devices
// (a ring of Devices × Slots chunks), every device takes the next chunk
// read as its slots free up, from an issuing goroutine of its own, and one
// set of writers writes each chunk's outputs in order. Host memory stays
// bounded by the devices' slots. Errors and the outputs' state after one
// are as in Pipeline.RunStream, but that a device's failure is a
// *DeviceError naming the device; the group closes itself if draining a
// device failed. The report's Devices says how many chunks each device
// ran.
func (g *Group) RunStream(ctx context.Context, job StreamJob) (*StreamReport, error) {
	if err := g.usable("RunStream"); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	for d, p := range g.pipes {
		if err := p.validateStream(job); err != nil {
			if d == 0 {
				return nil, err
			}
			return nil, g.deviceErr(d, err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, g.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for d, p := range g.pipes {
		if err := p.allocStaging(); err != nil {
			return nil, g.deviceErr(d, &StageError{Chunk: -1, Stage: StageSetup, Err: err})
		}
	}
	lead := g.pipes[0]
	start := lead.runBegin()
	defer lead.runEnd()
	readyFrom := readyClock(lead, job.Kernel)
	upload, err := g.ready(job.Kernel)
	if err != nil {
		return nil, err
	}
	// The readying is not part of the run's time, and only that: the
	// run's own fixed cost, which a simulator charges as the run begins,
	// stays in.
	start += readyTook(lead, job.Kernel, readyFrom)
	r := newStreamRun(g.pipes, job)
	r.devErr = g.deviceErr
	defer g.closeBroken(nil) // also on the way out of a panic (streamRun.execute)
	err = r.execute(ctx)
	rep := r.report(start)
	rep.Backend, rep.Upload, rep.Notes = g.name(), upload, g.notes(job.Kernel)
	g.closeBroken(nil)
	return rep, err
}

// closeBroken closes the group once a device's pipeline has closed itself
// (its drain failed: the device's context is broken), keeping that
// device's error (errs[d] where set, else the pipeline's own) to say why.
// g.mu held.
func (g *Group) closeBroken(errs []error) {
	for d, p := range g.pipes {
		if p.closed && g.broken == nil {
			g.broken = p.broken
			if d < len(errs) && errs[d] != nil {
				g.broken = errs[d]
			}
		}
	}
	if g.broken != nil && !g.closed {
		g.closed = true
		g.release()
	}
}

// name is the group's backends, "NVIDIA H200 ×2" for two alike.
func (g *Group) name() string {
	backends := make([]Backend, len(g.pipes))
	for d, p := range g.pipes {
		backends[d] = p.b
	}
	return Names(backends)
}

// Names names a set of backends, each name once in order, with a count
// where several share it: "NVIDIA H200 ×2".
func Names(backends []Backend) string {
	count := map[string]int{}
	var order []string
	for _, b := range backends {
		name := "nil Backend"
		if b != nil {
			name = b.Name()
		}
		if count[name] == 0 {
			order = append(order, name)
		}
		count[name]++
	}
	for i, n := range order {
		if count[n] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", n, count[n])
		}
	}
	return strings.Join(order, " + ")
}

// GroupStageTimes are a group's stage times: each stage alone, run by
// every device at once over its share of the job.
type GroupStageTimes struct {
	// StageTimes holds each stage's time for the whole group: the longest
	// of the devices' times for it, as they ran it at once. Its Copies is
	// the copies in both directions at once, every device copying, which
	// bounds the group when the host link cannot feed every copy engine;
	// its Staging is the host's copies into and out of the staging slots
	// at once, which share the host's memory bandwidth.
	StageTimes
	// Devices are each device's stage times over its shares.
	Devices []StageTimes
	// Shares are the chunks of each device's share of each stage.
	Shares map[Stage][]int
}

// exclusive is what StageTimes and Warm do before they time stages of
// job: it checks job, takes the group's lock, begins a tracked run on the
// simulator, and resolves the job's plans on every device. On success the
// caller must call release, which evicts what the job registered, ends
// the tracked run and lets the lock go, in that order.
func (g *Group) exclusive(method string, job Job) (plans []*plan, release func(), err error) {
	if err := g.usable(method); err != nil {
		return nil, nil, err
	}
	if err := g.validate(job); err != nil {
		return nil, nil, err
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, nil, g.closedErr()
	}
	lead := g.pipes[0]
	lead.runBegin()
	release = func() {
		lead.evict()
		lead.runEnd()
		g.mu.Unlock()
	}
	if _, err := g.ready(job.Kernel); err != nil {
		release()
		return nil, nil, err
	}
	if plans, err = g.begin(job); err != nil {
		release()
		return nil, nil, err
	}
	return plans, release, nil
}

// StageTimes measures the group's stage bound for job. A group of one
// device measures what Pipeline.StageTimes does. Each stage runs
// alone, as Pipeline.StageTimes runs it, with every device running it at
// once over its share of the chunks, so that a link or host that the
// devices share slows each stage as it slows the run. Shares start even;
// while the devices' times for a stage differ by more than 3%, the stage
// is measured again (up to four times more) with shares in proportion to
// each device's speed at it in the last measurement, so that the bound is
// what the best split of each stage could reach: no run can beat it,
// whatever chunks each device takes. (A speed measured while other
// devices shared a link, and then alone, is too high; the next split
// corrects it.)
func (g *Group) StageTimes(ctx context.Context, job Job) (GroupStageTimes, error) {
	gst := GroupStageTimes{Shares: map[Stage][]int{}}
	if ctx == nil {
		ctx = context.Background()
	}
	plans, release, err := g.exclusive("StageTimes", job)
	if err != nil {
		return gst, err
	}
	defer release()
	k := len(g.pipes)
	gst.Devices = make([]StageTimes, k)
	chunks := plans[0].chunks
	if chunks == 0 {
		return gst, nil
	}
	if k == 1 {
		// One device runs as a Pipeline does, copies coalesced alike;
		// several take chunks from a queue one at a time.
		plans[0].copies = g.pipes[0].copiesFor(plans[0], g.pipes[0].scheduleFor(plans[0], plans[0].staging))
	}
	even := make([]int, k)
	for d := range even {
		even[d] = chunks*(d+1)/k - chunks*d/k
	}
	for _, stage := range plans[0].stages(k > 1) {
		shares := even
		for pass := 0; ; pass++ {
			times, err := g.bestTimes(ctx, plans, stage, shares)
			if err != nil {
				return gst, err
			}
			slowest, fastest := time.Duration(0), time.Duration(math.MaxInt64)
			speed := make([]float64, k)
			total := 0.0
			for d, t := range times {
				slowest, fastest = max(slowest, t), min(fastest, t)
				if t > 0 {
					speed[d] = float64(shares[d]) / float64(t)
				}
				total += speed[d]
			}
			if pass == 4 || fastest <= 0 || float64(slowest) <= 1.03*float64(fastest) || total == 0 {
				*gst.at(stage) = slowest
				for d, t := range times {
					*gst.Devices[d].at(stage) = t
				}
				gst.Shares[stage] = shares
				break
			}
			shares = make([]int, k)
			left := chunks
			for d := range shares {
				shares[d] = min(left, int(math.Round(float64(chunks)*speed[d]/total)))
				left -= shares[d]
			}
			shares[k-1] += left
		}
	}
	return gst, nil
}

// bestTimes times stage st twice on several devices, as timeStage does,
// and keeps the faster: devices that share a host link vary more from one
// measurement to the next than one device does (on two H200s, the copies
// in both directions at once by 5%), and a run's time is the best of
// several too. One device is timed once, as Pipeline.StageTimes does, and
// so is the simulator, whose times repeat exactly.
func (g *Group) bestTimes(ctx context.Context, plans []*plan, st Stage, shares []int) ([]time.Duration, error) {
	best, err := g.timeStage(ctx, plans, st, shares)
	if err != nil || len(g.pipes) == 1 || trackerOf(g.pipes[0].b) != nil {
		return best, err
	}
	again, err := g.timeStage(ctx, plans, st, shares)
	if err != nil {
		return nil, err
	}
	if slices.Max(again) < slices.Max(best) {
		best = again
	}
	return best, nil
}

// timeStage times stage st with every device running it at once over
// shares[d] chunks, and returns each device's time. The host's staging
// copies in both directions (StageStaging) run on two goroutines per
// device, as in a run.
func (g *Group) timeStage(ctx context.Context, plans []*plan, st Stage, shares []int) ([]time.Duration, error) {
	k := len(g.pipes)
	first := make([]int, k)
	for d := 1; d < k; d++ {
		first[d] = first[d-1] + shares[d-1]
	}
	parts := []Stage{st}
	if st == StageStaging {
		parts = []Stage{StageIn, StageOut}
	}
	times := make([]time.Duration, k*len(parts))
	errs := make([]error, k*len(parts))
	rs := &handoff{}
	rs.init(g.pipes[0].b, 0)
	var caught firstPanic // a kernel's Args, on the caller's goroutine after the join
	for d := range g.pipes {
		for j, part := range parts {
			w := d*len(parts) + j
			rs.spawn(fmt.Sprintf("device %d's %s goroutine", d, part), func() {
				caught.guard(func() {
					p := g.pipes[d]
					iss, done, err := p.stageIssuer()
					if err != nil {
						errs[w] = err
						return
					}
					defer done()
					times[w], errs[w] = p.timeStage(ctx, plans[d], iss, part, first[d], first[d]+shares[d])
				}, nil)
			})
		}
	}
	rs.join()
	caught.rethrow()
	out := make([]time.Duration, k)
	for w, err := range errs {
		if err != nil {
			return nil, g.deviceErr(w/len(parts), err)
		}
		out[w/len(parts)] = max(out[w/len(parts)], times[w])
	}
	return out, nil
}
