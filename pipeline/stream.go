package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"
)

// StreamJob is a streaming run's work: each input is read from a reader
// and each output written to a writer, chunk by chunk, until the inputs
// end. The number of elements is not known in advance; the inputs must
// end together, and the last chunk may be partial. Inputs and Outputs
// match the pipeline's Config: input j holds elements of Config.Inputs[j]
// bytes, raw and back to back.
//
// How each stream is read or written:
//
//   - An input that is an io.ReaderAt and an io.Seeker (an *os.File on a
//     regular file, a *bytes.Reader) is read with positional reads
//     (pread) by Readers goroutines, straight into the pinned slots,
//     starting at its current offset; afterwards its offset is moved past
//     what the run consumed.
//   - Any other input (a pipe, a socket, stdin) is read in order, by one
//     goroutine, straight into the pinned slots, ahead of the H2D copy.
//   - An output that is a regular *os.File (or anything with WriteAt,
//     Seek and Truncate) is written with positional writes by Writers
//     goroutines, from the pinned slots, starting at its current offset.
//     If the run fails it is truncated to the part written in full.
//   - Any other output is written in order by one goroutine, from the
//     pinned slots.
//
// An output file opened with O_DIRECT ([CreateDirect]) is written straight
// from the pinned slots: each chunk's output bytes and the output's
// starting offset must be multiples of [DirectAlign]; the last piece of a
// run, when its length is not, is written with O_DIRECT cleared for that
// one write, so that the file ends exactly where the output does.
type StreamJob struct {
	Inputs  []io.Reader
	Outputs []io.Writer
	Kernel  *Kernel
	// InputNames and OutputNames label the streams in errors (file
	// names, say); a missing name reads "input 0", "output 1".
	InputNames, OutputNames []string
	// Readers is the number of goroutines that read positional inputs;
	// 0 means GOMAXPROCS.
	Readers int
	// Writers is the number of goroutines that write positional outputs;
	// 0 means 1. Buffered writes to one file take the file's lock in the
	// kernel (Linux's inode lock), so more writers mostly contend: on the
	// H200 host (ext4), 8 GiB written from the slots went at 3.6, 3.4,
	// 3.3 and 3.3 GB/s with 1, 2, 4 and 8 writers.
	Writers int
	// PieceBytes is the most one positional read or write moves; 0 means
	// 1 MiB. It is rounded up to a multiple of 4096, so that reads of a
	// file opened with O_DIRECT ([OpenDirect]) stay aligned.
	PieceBytes int
	// Preallocate, when set, holds for each output the bytes it will take
	// from its current offset, as far as the caller knows (from the
	// inputs' sizes, say). A regular *os.File output gets them allocated
	// before the first write ([Preallocate]: fallocate on Linux), so that
	// the writes neither extend the file nor allocate as they go; the time
	// it takes is part of Elapsed. It is best effort: 0, another kind of
	// output, another system or a file system that cannot allocate nothing.
	// Whatever was allocated, the output ends where the run's writes end
	// (or where the file ended before, if further). The report's
	// Preallocated says what was allocated.
	Preallocate []int64
	// Progress, when set, is called from the run's goroutines as data is
	// read and written, at most about every 100 ms and once at the end;
	// calls do not overlap. It must return quickly.
	Progress func(Progress)
}

// StreamError is a failure of one input or output of a streaming run: a
// read or write error, a trailing partial element, or inputs of different
// lengths. Offset counts bytes from where the run started on that stream.
type StreamError struct {
	Stream string // "input 0", or the name given in StreamJob
	Offset int64
	Err    error
}

func (e *StreamError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("pipeline: %s at byte %d: %v", e.Stream, e.Offset, e.Err)
}

func (e *StreamError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// ErrPartialElement is the cause in a StreamError when an input ends in
// the middle of an element.
var ErrPartialElement = errors.New("the stream ends inside an element")

// ErrLengthMismatch is the cause in a StreamError when the inputs do not
// hold the same number of elements.
var ErrLengthMismatch = errors.New("inputs differ in length")

// StreamReport describes a streaming run, finished or failed.
type StreamReport struct {
	Backend    string
	ChunkElems int
	// Chunks and N are the chunks and elements read in full (every
	// input) and issued to the device.
	Chunks int
	N      int64
	// InputBytes is each input's bytes in the chunks read in full; a
	// sequential reader may have been read further before a failure.
	InputBytes []int64
	// OutputBytes is what each output holds from this run. After a
	// failure it is an exact prefix of the correct output, and the only
	// bytes the run left there.
	OutputBytes []int64
	// Elapsed runs from the first read to the last write. Like Read and
	// Write it is on the backend's clock: the wall clock, or the
	// simulator's virtual clock.
	Elapsed time.Duration
	// Read and Write are the time during which at least one read (write)
	// was in progress; bytes over them are the rates the host side reached
	// while it worked. On the simulator a read or write takes the virtual
	// time of a staging copy of its bytes (HostAccessor).
	Read, Write time.Duration
	// Readers and Writers are the goroutines that did positional reads
	// and writes (0 when every stream was sequential).
	Readers, Writers int
	// Preallocated is the bytes allocated up front for each output
	// (StreamJob.Preallocate), 0 where nothing was.
	Preallocated []int64
	// Devices says how many chunks each device of a group ran
	// (Group.RunStream); Busy is not measured for a streaming run.
	Devices []DeviceReport
	// Upload and Notes are as in Report: the time spent uploading the
	// kernel's parameters before the run (not part of Elapsed), and what
	// the simulator has to say about the kernel's costs.
	Upload time.Duration
	Notes  []string
}

// streamIn and streamOut are one input's or output's state in a run.
type streamIn struct {
	name  string
	elem  int
	r     io.Reader
	ra    io.ReaderAt // non-nil: positional
	base  int64
	eof   bool // sequential: EOF seen
	jobs  *jobQueue
	bytes int64 // consumed, set at the end
}

type writeTruncater interface {
	io.WriterAt
	io.Seeker
	Truncate(size int64) error
}

type streamOut struct {
	name string
	elem int
	w    io.Writer
	wa   writeTruncater // non-nil: positional
	base int64
	jobs *jobQueue
	// file is a positional *os.File output; direct says it was opened
	// with O_DIRECT. prealloc is the bytes allocated up front, and
	// sizeBefore the file's size before.
	file       *os.File
	direct     bool
	prealloc   int64
	sizeBefore int64
	// committed is the length of the prefix written in full; done holds
	// positional pieces that finished beyond it, by start.
	committed int64
	done      map[int64]int64
}

// ioJob is one read or write: a piece of one stream in one chunk.
type ioJob struct {
	c, stream int
	mem       HostMemory
	lo, hi    int   // bytes within the slot
	at        int64 // bytes within the stream, from the run's start
	write     bool
	tail      bool      // a write: the last piece of a partial chunk, the run's last
	tok       HostClock // tracking backend: the clock that queued it
}

// chunkIO tracks one chunk's outstanding reads or writes.
type chunkIO struct {
	c         int
	remaining int
	got       []int     // reads: bytes of each input
	err       error     // reads: the first failure
	tok       HostClock // tracking backend: ordered after every finished piece
}

// ioBusy measures the time during which at least one operation ran, on
// the backend's clock (the wall clock, or the simulator's virtual clock of
// the goroutines doing the operations).
type ioBusy struct {
	mu     sync.Mutex
	clock  func() time.Duration
	active int
	since  time.Duration
	busy   time.Duration
}

func (a *ioBusy) begin() {
	t := a.clock()
	a.mu.Lock()
	if a.active == 0 {
		a.since = t
	}
	a.active++
	a.mu.Unlock()
}

func (a *ioBusy) end() {
	t := a.clock()
	a.mu.Lock()
	a.active--
	if a.active == 0 && t > a.since {
		a.busy += t - a.since
	}
	a.mu.Unlock()
}

// streamRun is one streaming run's shared state. mu guards everything
// below it; cond signals every change.
//
// The host side (the readers, the writers and their workers) moves each
// chunk c through host slot c mod ring of pinned memory; the device side
// is one issuing loop per device, each taking the next chunk read and
// running it in a device slot of its own. A Pipeline's run has one device
// and a ring of its Slots, its staging slots, so that chunk c is in slot
// c mod Slots on both sides. A group's has a device per pipeline and a
// ring of all their staging slots (portable pinned memory, which every
// device copies from and to).
type streamRun struct {
	p      *Pipeline   // the first device's pipeline: the Config, the clock
	devs   []*Pipeline // every device's
	ring   int         // host slots: len(devs)·Slots
	devErr func(d int, err error) error
	ctx    context.Context // the run's, set by execute
	job    StreamJob
	ins    []*streamIn
	outs   []*streamOut
	piece  int
	rec    HostAccessor
	reads  *jobQueue // positional reads
	writes *jobQueue // positional writes
	queues []*jobQueue

	readAct, writeAct ioBusy

	handoff         // mu guards everything below; cond signals every change
	err       error // the first failure; stops the run
	readErr   error // ends the input; the chunks before it are finished
	total     int   // chunks in the stream; -1 until known
	staged    int   // chunks read in full, in order
	taken     int   // chunks taken by a device, in order
	d2hIssued int   // chunks whose D2H copies are queued
	issuing   int   // devices still issuing
	issueDone bool  // every device has stopped issuing
	written   int   // chunks written in full to every output, in order
	// Per host slot: the elements of the chunk read into it (inN) and
	// copied out into it (outN), and its reads and writes.
	inN, outN        []int
	reading, writing []*chunkIO
	// Per host slot: the last chunk whose H2D copy read it (h2dAt) and
	// whose D2H copy wrote it (d2hAt), -1 before any, with the events that
	// the devices recorded after those copies (h2dEv, d2hEv) and the
	// device of each.
	h2dAt, d2hAt []int
	h2dEv, d2hEv []slotEvent
	devChunks    []int   // chunks each device ran
	elems        int64   // elements issued
	elemsRead    int64   // elements read in full
	elemsWritten int64   // elements written in full
	chunkIn      []int   // per input: bytes in a full chunk
	chunkOut     []int   // per output: bytes in a full chunk
	readBytes    []int64 // per input: bytes consumed in finalized chunks

	// On a HostTracker (stream_sync.go): the clocks of the flags.
	endTok       HostClock // total became known
	issueDoneTok HostClock
}

// slotEvent is an event a device recorded after a copy of a host slot:
// the host waits for it before it uses the slot again.
type slotEvent struct {
	ev  Event
	dev int
	tok HostClock // tracking backend: the issuer's clock at the record
}

func (r *streamRun) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.stopLocked()
	r.mu.Unlock()
}

func streamName(names []string, kind string, i int) string {
	if i < len(names) && names[i] != "" {
		return names[i]
	}
	return fmt.Sprintf("%s %d", kind, i)
}

// positionalIn reports whether r can be read with ReadAt from its
// current offset.
func positionalIn(r io.Reader) (io.ReaderAt, int64, bool) {
	ra, ok := r.(io.ReaderAt)
	sk, ok2 := r.(io.Seeker)
	if !ok || !ok2 {
		return nil, 0, false
	}
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return nil, 0, false
		}
	}
	base, err := sk.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, false
	}
	return ra, base, true
}

// positionalOut reports whether w can be written with WriteAt from its
// current offset (and truncated after a failure).
func positionalOut(w io.Writer) (writeTruncater, int64, bool) {
	wt, ok := w.(writeTruncater)
	if !ok {
		return nil, 0, false
	}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			return nil, 0, false
		}
	}
	base, err := wt.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, 0, false
	}
	// An *os.File opened with O_APPEND refuses WriteAt, even of nothing.
	if _, err := wt.WriteAt(nil, base); err != nil {
		return nil, 0, false
	}
	return wt, base, true
}

// RunStream runs job: it reads every input to its end, chunk by chunk,
// through the pinned slots, and writes each chunk's outputs in order. Host
// memory stays bounded by the slots, whatever the streams' length.
//
// It returns a report even on failure. A read or write error, a trailing
// partial element or inputs of different lengths stop the run with a
// *StreamError naming the stream, the byte offset and the cause; a device
// failure is a *StageError as in Run. When ctx ends, reading stops, work
// in flight drains, and ctx.Err() is returned. In every case each output
// holds exactly Report.OutputBytes[j] bytes from this run, an exact prefix
// of the correct output. RunStream returns only once every Read and Write
// it started has returned: a reader blocked forever blocks it too (close
// the reader to unblock it). Config.Timing does not apply: the report has
// the host side's read and write times instead. A job in which an
// output is one of the inputs, or two outputs are one, is refused before
// anything is read or written ([SameFile] says which are the same).
func (p *Pipeline) RunStream(ctx context.Context, job StreamJob) (*StreamReport, error) {
	if err := p.usable("RunStream"); err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if err := p.validateStream(job); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, p.closedErr()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The slots are allocated once per pipeline (in New unless the host
	// mode is pinned or registered), and not counted in Elapsed.
	if err := p.allocStaging(); err != nil {
		return nil, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	start := p.runBegin()
	defer p.runEnd()
	// The kernel's parameters and scratch buffers, before anything is
	// read; an upload is not part of Elapsed (StreamReport.Upload).
	readyFrom := readyClock(p, job.Kernel)
	upload, err := p.ready(job.Kernel)
	if err != nil {
		return nil, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	// The readying is not part of the run's time, and only that: the
	// run's own fixed cost, which a simulator charges as the run begins,
	// stays in.
	start += readyTook(p, job.Kernel, readyFrom)
	r := newStreamRun([]*Pipeline{p}, job)
	err = r.execute(ctx)
	rep := r.report(start)
	rep.Upload, rep.Notes = upload, notesOf(p.b, job.Kernel)
	return rep, err
}

// report is the run's report, for a run that started at start.
func (r *streamRun) report(start time.Duration) *StreamReport {
	p := r.p
	rep := &StreamReport{Backend: p.b.Name(), ChunkElems: p.cfg.ChunkElems}
	rep.Elapsed = p.now() - start
	rep.Chunks, rep.N = r.d2hIssued, r.elems
	rep.Read, rep.Write = r.readAct.busy, r.writeAct.busy
	if r.reads != nil {
		rep.Readers = r.job.Readers
	}
	if r.writes != nil {
		rep.Writers = r.job.Writers
	}
	for _, in := range r.ins {
		rep.InputBytes = append(rep.InputBytes, in.bytes)
	}
	for _, out := range r.outs {
		rep.OutputBytes = append(rep.OutputBytes, out.committed)
		rep.Preallocated = append(rep.Preallocated, out.prealloc)
	}
	if r.devErr != nil { // a group's
		for d, q := range r.devs {
			rep.Devices = append(rep.Devices, DeviceReport{Device: d, Backend: q.b.Name(), Chunks: r.devChunks[d]})
		}
	}
	return rep
}

func (p *Pipeline) validateStream(job StreamJob) error {
	switch {
	case job.Kernel == nil:
		return errors.New("pipeline: stream job has no Kernel")
	case len(job.Inputs) == 0:
		return errors.New("pipeline: a stream job needs at least one input: its end ends the run")
	case len(job.Inputs) != len(p.cfg.Inputs):
		return fmt.Errorf("pipeline: stream job has %d inputs, the pipeline was built for %d", len(job.Inputs), len(p.cfg.Inputs))
	case len(job.Outputs) != len(p.cfg.Outputs):
		return fmt.Errorf("pipeline: stream job has %d outputs, the pipeline was built for %d", len(job.Outputs), len(p.cfg.Outputs))
	case job.Readers < 0 || job.Writers < 0 || job.PieceBytes < 0:
		return errors.New("pipeline: stream job: Readers, Writers and PieceBytes must not be negative")
	case len(job.Preallocate) > len(job.Outputs):
		return fmt.Errorf("pipeline: stream job: Preallocate has %d sizes for %d outputs", len(job.Preallocate), len(job.Outputs))
	}
	for i, size := range job.Preallocate {
		if size < 0 {
			return fmt.Errorf("pipeline: stream job: Preallocate[%d] is negative (%d)", i, size)
		}
	}
	for i, in := range job.Inputs {
		if in == nil || nilPointer(in) {
			return fmt.Errorf("pipeline: stream job: %s is nil", streamName(job.InputNames, "input", i))
		}
	}
	for i, out := range job.Outputs {
		if out == nil || nilPointer(out) {
			return fmt.Errorf("pipeline: stream job: %s is nil", streamName(job.OutputNames, "output", i))
		}
	}
	if err := checkDistinct(job); err != nil {
		return err
	}
	if err := checkKernel(job.Kernel, len(p.cfg.Inputs), len(p.cfg.Outputs), p.cfg.ChunkElems); err != nil {
		return err
	}
	return p.b.Prepare(job.Kernel)
}

// newStreamRun is the state of a run of job over devs, pipelines of one
// Config, whose staging slots are the host slots.
func newStreamRun(devs []*Pipeline, job StreamJob) *streamRun {
	p := devs[0]
	R := len(devs) * p.cfg.Slots
	if job.Readers == 0 {
		job.Readers = runtime.GOMAXPROCS(0)
	}
	if job.Writers == 0 {
		job.Writers = 1
	}
	if job.PieceBytes == 0 {
		job.PieceBytes = 1 << 20
	}
	r := &streamRun{p: p, devs: devs, ring: R, job: job, total: -1,
		piece: (job.PieceBytes + 4095) &^ 4095,
		inN:   make([]int, R), outN: make([]int, R),
		reading: make([]*chunkIO, R), writing: make([]*chunkIO, R),
		h2dAt: make([]int, R), d2hAt: make([]int, R),
		h2dEv: make([]slotEvent, R), d2hEv: make([]slotEvent, R),
		devChunks: make([]int, len(devs))}
	for h := range R {
		r.h2dAt[h], r.d2hAt[h] = -1, -1
	}
	r.init(p.b, R)
	r.rec, _ = p.b.(HostAccessor)
	r.readAct.clock, r.writeAct.clock = p.now, p.now
	for j, in := range job.Inputs {
		s := &streamIn{name: streamName(job.InputNames, "input", j), elem: p.cfg.Inputs[j], r: in}
		s.ra, s.base, _ = positionalIn(in)
		r.ins = append(r.ins, s)
		r.chunkIn = append(r.chunkIn, s.elem*p.cfg.ChunkElems)
		r.readBytes = append(r.readBytes, 0)
	}
	for j, out := range job.Outputs {
		s := &streamOut{name: streamName(job.OutputNames, "output", j), elem: p.cfg.Outputs[j], w: out, done: map[int64]int64{}}
		s.wa, s.base, _ = positionalOut(out)
		if f, ok := out.(*os.File); ok && s.wa != nil {
			s.file, s.direct = f, isDirect(f)
		}
		r.outs = append(r.outs, s)
		r.chunkOut = append(r.chunkOut, s.elem*p.cfg.ChunkElems)
	}
	return r
}

// execute starts the readers and writers, issues on the calling goroutine
// (a group's devices on goroutines of their own), and tears everything
// down in order: coordinators, then workers, then the device drain, then
// the files' offsets, then the last progress report.
func (r *streamRun) execute(ctx context.Context) error {
	r.preallocate()
	r.ctx = ctx
	stopWatch := context.AfterFunc(ctx, func() { r.fail(ctx.Err()) })
	defer stopWatch()
	// A panic in the caller's code (a Read or Write, a kernel's Args)
	// stops the run, which then tears down as a failed one does, and goes
	// on on the calling goroutine once everything is drained; on a
	// goroutine of the run's it would end the program.
	var caught firstPanic
	defer caught.rethrow()
	stopOnPanic := func() { r.fail(errPanicked) }

	newQueue := func() *jobQueue {
		q := &jobQueue{cond: sync.NewCond(&r.mu)}
		r.queues = append(r.queues, q)
		return q
	}
	// The queues exist before any goroutine that uses them starts.
	for _, in := range r.ins {
		switch {
		case in.ra == nil:
			in.jobs = newQueue()
		case r.reads == nil:
			r.reads = newQueue()
			fallthrough
		default:
			in.jobs = r.reads
		}
	}
	for _, out := range r.outs {
		switch {
		case out.wa == nil:
			out.jobs = newQueue()
		case r.writes == nil:
			r.writes = newQueue()
			fallthrough
		default:
			out.jobs = r.writes
		}
	}
	for i, q := range r.queues {
		n := 1
		switch q {
		case r.reads:
			n = r.job.Readers
		case r.writes:
			n = r.job.Writers
		}
		for w := 0; w < n; w++ {
			r.spawn(fmt.Sprintf("stream worker %d.%d", i, w), func() {
				caught.guard(func() { r.worker(q) }, stopOnPanic)
			})
		}
	}
	r.spawn("stream reads", r.readLoop)
	r.spawn("stream writes", r.writeLoop)
	stopProgress := r.startProgress()

	issue := func(d int) {
		if err := r.issue(d); err != nil {
			r.fail(r.deviceErr(d, err))
		}
	}
	if len(r.devs) == 1 {
		// A pipeline issues on the calling goroutine. Should the caller's
		// code end it with runtime.Goexit, which nothing can recover, the
		// run stops and tears down on the way out as a failed one does.
		issued := false
		defer func() {
			if !issued {
				r.fail(errPanicked)
				r.mu.Lock()
				_ = r.finish(ctx, stopProgress) // nobody is left to see the error
			}
		}()
		func() {
			defer caught.catch(nil, stopOnPanic)
			issue(0)
		}()
		issued = true
		r.mu.Lock()
		r.issueDone = true
		r.markLocked(&r.issueDoneTok)
		r.signal()
	} else {
		r.mu.Lock()
		r.issuing = len(r.devs)
		r.mu.Unlock()
		for d := range r.devs {
			r.spawn(fmt.Sprintf("device %d's issuing goroutine", d), func() {
				// A panic or a Goexit in issue stops the run (guard), which
				// ends the caller's wait below whether or not this counts
				// out.
				caught.guard(func() { issue(d) }, stopOnPanic)
				r.mu.Lock()
				r.issuing--
				if r.tracked() {
					r.issueDoneTok = r.merge(r.issueDoneTok, r.stamp())
				}
				r.issueDone = r.issuing == 0
				r.signal()
				r.mu.Unlock()
			})
		}
		r.mu.Lock()
		r.waitLocked(r.cond, func() bool { return r.issueDone }, func() HostClock { return r.issueDoneTok })
	}
	return r.finish(ctx, stopProgress)
}

// finish is the end of execute once the issue is over, r.mu held (it
// releases it): it waits for what was copied out to be written, stops the
// run, joins its goroutines, drains each device, closing one whose drain
// failed, sets the files' offsets and truncates what a failed run wrote
// beyond its prefix, then stops the progress reports.
func (r *streamRun) finish(ctx context.Context, stopProgress func()) error {
	// Every chunk copied out must be written, unless the run stopped.
	r.waitLocked(r.cond, func() bool { return r.written >= r.d2hIssued }, func() HostClock { return r.tokAt(&r.written, r.d2hIssued-1) })
	r.stopLocked()
	r.mu.Unlock()
	// Coordinators return and workers leave what is queued once the run
	// stops; a read or write in progress finishes first.
	r.joinAll()

	// Drain: the host waits for each device once, at the end.
	drainErrs := make([]error, len(r.devs))
	var drainErr error
	for d, q := range r.devs {
		if drainErrs[d] = q.drain(); drainErrs[d] != nil && drainErr == nil {
			drainErr = r.deviceErr(d, drainErrs[d])
		}
	}
	defer stopProgress()

	r.mu.Lock()
	runErr := r.err
	if runErr == nil {
		runErr = r.readErr
	}
	r.mu.Unlock()
	for j, in := range r.ins {
		in.bytes = r.readBytes[j]
		if in.ra != nil {
			if _, err := in.r.(io.Seeker).Seek(in.base+in.bytes, io.SeekStart); err != nil && runErr == nil {
				runErr = &StreamError{Stream: in.name, Offset: in.bytes, Err: err}
			}
		}
	}
	for _, out := range r.outs {
		if out.wa == nil {
			continue
		}
		if runErr != nil || drainErr != nil {
			// Positional writes may have landed beyond the prefix.
			if err := out.wa.Truncate(out.base + out.committed); err != nil {
				runErr = errors.Join(runErr, &StreamError{Stream: out.name, Offset: out.committed, Err: fmt.Errorf("truncating to the part written in full: %w", err)})
			}
		} else if end := max(out.sizeBefore, out.base+out.committed); out.prealloc > 0 && end < out.base+out.prealloc {
			// The output ended before what was allocated for it.
			if err := out.wa.Truncate(end); err != nil {
				runErr = &StreamError{Stream: out.name, Offset: out.committed, Err: fmt.Errorf("truncating what was preallocated beyond the end: %w", err)}
			}
		}
		if _, err := out.wa.Seek(out.base+out.committed, io.SeekStart); err != nil && runErr == nil {
			runErr = &StreamError{Stream: out.name, Offset: out.committed, Err: err}
		}
	}
	if drainErr != nil {
		for d, q := range r.devs {
			if drainErrs[d] != nil {
				q.broken = drainErrs[d]
				q.closed = true
				q.release()
			}
		}
		for d, err := range drainErrs {
			if err != nil {
				return r.deviceErr(d, &StageError{Chunk: -1, Stage: StageDrain, Err: fmt.Errorf("%w; the pipeline closed itself", err)})
			}
		}
	}
	if runErr != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(runErr, ctxErr) {
			return ctxErr
		}
		return runErr
	}
	return nil
}

// preallocate allocates what the job asks for each regular file output,
// before anything is written. A failure (other than the file system's
// not supporting it) fails the run.
func (r *streamRun) preallocate() {
	for j, out := range r.outs {
		if j >= len(r.job.Preallocate) || r.job.Preallocate[j] <= 0 || out.file == nil {
			continue
		}
		size := r.job.Preallocate[j]
		st, err := out.file.Stat()
		if err == nil {
			var ok bool
			if ok, err = Preallocate(out.file, out.base, size); ok {
				out.prealloc, out.sizeBefore = size, st.Size()
			}
		}
		if err != nil {
			r.fail(&StreamError{Stream: out.name, Offset: 0, Err: fmt.Errorf("preallocating %d bytes: %w", size, err)})
			return
		}
	}
}

// deviceErr is err of device d: in a group's run, a *DeviceError.
func (r *streamRun) deviceErr(d int, err error) error {
	if r.devErr == nil {
		return err
	}
	return r.devErr(d, err)
}

// hostIn and hostOut are host slot h's pinned memory for input or output
// j: a staging slot of one of the devices.
func (r *streamRun) hostIn(h, j int) PinnedMem {
	S := r.p.cfg.Slots
	return r.devs[h/S].sin[h%S][j]
}

func (r *streamRun) hostOut(h, j int) PinnedMem {
	S := r.p.cfg.Slots
	return r.devs[h/S].sout[h%S][j]
}

// readLoop hands out each chunk's reads once its host slot is free: the
// H2D copy that last read the slot has completed. It runs ahead of the
// devices by up to ring chunks, and stops once the end is known.
func (r *streamRun) readLoop() {
	p, R := r.p, r.ring
	for c := 0; ; c++ {
		s := c % R
		if c >= R {
			// The H2D of chunk c-R must be queued before its event means it.
			// (A later chunk only where a test drops the waits.)
			if !r.waitUntil(func() bool { return r.h2dAt[s] >= c-R || r.total >= 0 }, func() HostClock {
				if r.h2dAt[s] >= c-R {
					return r.h2dEv[s].tok
				}
				return r.endTok
			}) {
				return
			}
			r.mu.Lock()
			ended := r.total >= 0
			ev := r.h2dEv[s]
			r.mu.Unlock()
			if ended {
				return
			}
			// The device may have recorded the event again since, for a
			// later chunk on the same stream: waiting for that is waiting
			// for this too.
			if !p.skipWAR {
				if err := ev.ev.Synchronize(); err != nil {
					r.fail(r.deviceErr(ev.dev, &StageError{Chunk: c, Stage: StageIn, Err: err}))
					return
				}
			}
		}
		if err := r.ctx.Err(); err != nil {
			// The watch that stops the run runs on a goroutine of its
			// own, which on a busy host may start late: no chunk is read
			// once cancel has returned.
			r.fail(err)
			return
		}
		r.mu.Lock()
		if r.stop || r.total >= 0 {
			r.mu.Unlock()
			return
		}
		ch := &chunkIO{c: c, got: make([]int, len(r.ins))}
		var jobs []ioJob
		for j, in := range r.ins {
			cb := r.chunkIn[j]
			mem := r.hostIn(s, j)
			if in.ra == nil {
				jobs = append(jobs, ioJob{c: c, stream: j, mem: mem, lo: 0, hi: cb, at: int64(c) * int64(cb)})
				continue
			}
			for lo := 0; lo < cb; lo += r.piece {
				jobs = append(jobs, ioJob{c: c, stream: j, mem: mem, lo: lo, hi: min(lo+r.piece, cb), at: int64(c)*int64(cb) + int64(lo)})
			}
			ch.got[j] = cb // lowered by the first short piece
		}
		ch.remaining = len(jobs)
		r.reading[s] = ch
		r.mu.Unlock()
		r.pushAll(jobs, func(jb ioJob) *jobQueue { return r.ins[jb.stream].jobs })
	}
}

// writeLoop hands out each chunk's writes once its D2H copy has completed.
func (r *streamRun) writeLoop() {
	R := r.ring
	for c := 0; ; c++ {
		s := c % R
		// The ring entry of chunk c-R must be finished; the D2H's own wait
		// already implies it, unless a test drops that wait.
		// (A later chunk than c is there only where a test drops the waits.)
		if !r.waitUntil(func() bool { return (r.d2hAt[s] >= c || r.issueDone) && r.written > c-R }, func() HostClock {
			t := r.issueDoneTok
			if r.d2hAt[s] >= c {
				t = r.d2hEv[s].tok
			}
			return r.merge(t, r.tokAt(&r.written, c-R))
		}) {
			return
		}
		r.mu.Lock()
		issued := r.d2hAt[s] >= c
		n := r.outN[s]
		ev := r.d2hEv[s]
		r.mu.Unlock()
		if !issued {
			return
		}
		if err := ev.ev.Synchronize(); err != nil {
			r.fail(r.deviceErr(ev.dev, &StageError{Chunk: c, Stage: StageOut, Err: err}))
			return
		}
		ch := &chunkIO{c: c}
		var jobs []ioJob
		for j, out := range r.outs {
			bytes := n * out.elem
			at := int64(c) * int64(r.chunkOut[j])
			mem := r.hostOut(s, j)
			if out.wa == nil {
				jobs = append(jobs, ioJob{c: c, stream: j, mem: mem, lo: 0, hi: bytes, at: at, write: true})
				continue
			}
			for lo := 0; lo < bytes; lo += r.piece {
				hi := min(lo+r.piece, bytes)
				jobs = append(jobs, ioJob{c: c, stream: j, mem: mem, lo: lo, hi: hi, at: at + int64(lo), write: true,
					tail: hi == bytes && n < r.p.cfg.ChunkElems})
			}
		}
		r.mu.Lock()
		if r.stop {
			r.mu.Unlock()
			return
		}
		ch.remaining = len(jobs)
		r.writing[s] = ch
		r.mu.Unlock()
		r.pushAll(jobs, func(jb ioJob) *jobQueue { return r.outs[jb.stream].jobs })
	}
}

// pushAll queues jobs, each on its stream's queue, in order.
func (r *streamRun) pushAll(jobs []ioJob, queue func(ioJob) *jobQueue) {
	for len(jobs) > 0 {
		q, n := queue(jobs[0]), 1
		for n < len(jobs) && queue(jobs[n]) == q {
			n++
		}
		r.push(q, jobs[:n])
		jobs = jobs[n:]
	}
}

// worker does reads or writes from q until the run stops; what is still
// queued then is left undone.
func (r *streamRun) worker(q *jobQueue) {
	for {
		jb, ok := r.pop(q)
		if !ok {
			return
		}
		var n int
		var err error
		if jb.write {
			n, err = r.doWrite(jb)
		} else {
			n, err = r.doRead(jb)
		}
		if jb.write {
			r.wrote(jb, n, err)
		} else {
			r.read(jb, n, err)
		}
	}
}

func (r *streamRun) doRead(jb ioJob) (int, error) {
	in := r.ins[jb.stream]
	if in.ra == nil && in.eof {
		return 0, io.EOF
	}
	// On the simulator the busy time includes HostAccess's copy.
	r.readAct.begin()
	defer r.readAct.end()
	read := func(buf []byte) (int, error) {
		if in.ra != nil {
			return in.ra.ReadAt(buf, in.base+jb.at)
		}
		n, err := io.ReadFull(in.r, buf)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			in.eof, err = true, io.EOF
		}
		return n, err
	}
	if r.rec != nil {
		return r.rec.HostAccess(jb.mem, jb.lo, jb.hi-jb.lo, true, fmt.Sprintf("host read of %s (chunk %d)", in.name, jb.c), read)
	}
	return read(jb.mem.Bytes()[jb.lo:jb.hi])
}

func (r *streamRun) doWrite(jb ioJob) (int, error) {
	out := r.outs[jb.stream]
	r.writeAct.begin()
	defer r.writeAct.end()
	write := func(buf []byte) (int, error) {
		if out.direct {
			return directWrite(out, jb, buf)
		}
		if out.wa != nil {
			return out.wa.WriteAt(buf, out.base+jb.at)
		}
		n, err := out.w.Write(buf)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
		return n, err
	}
	if r.rec != nil {
		return r.rec.HostAccess(jb.mem, jb.lo, jb.hi-jb.lo, false, fmt.Sprintf("host write of %s (chunk %d)", out.name, jb.c), write)
	}
	return write(jb.mem.Bytes()[jb.lo:jb.hi])
}

// directWrite writes a piece to an output opened with O_DIRECT: at an
// aligned offset, an aligned length goes straight from the slot, and the
// run's last piece whatever its length; anything else is refused, before
// any byte of it is written.
func directWrite(out *streamOut, jb ioJob, buf []byte) (int, error) {
	off := out.base + jb.at
	switch {
	case off%DirectAlign == 0 && len(buf)%DirectAlign == 0:
		return out.file.WriteAt(buf, off)
	case off%DirectAlign == 0 && jb.tail:
		return writeUnaligned(out.file, buf, off)
	}
	return 0, fmt.Errorf("a write of %d bytes at file offset %d to a file opened with O_DIRECT: it needs the offset and each chunk's output bytes (ChunkElems × element size) to be multiples of %d bytes", len(buf), off, DirectAlign)
}

// read records a finished read and finalizes, in order, every chunk whose
// reads are all done.
func (r *streamRun) read(jb ioJob, n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := r.ins[jb.stream]
	ch := r.reading[jb.c%r.ring]
	switch {
	case err != nil && err != io.EOF:
		if in.ra != nil {
			err = directHint(err)
		}
		if ch.err == nil {
			ch.err = &StreamError{Stream: in.name, Offset: jb.at + int64(n), Err: err}
		}
		if in.ra == nil {
			in.eof = true // a sequential input is not read again
		}
	case in.ra == nil:
		ch.got[jb.stream] = n
	case n < jb.hi-jb.lo:
		ch.got[jb.stream] = min(ch.got[jb.stream], jb.lo+n)
	}
	ch.remaining--
	r.doneLocked(ch)
	for !r.stop && r.total < 0 {
		c := r.staged
		ch := r.reading[c%r.ring]
		if ch == nil || ch.c != c || ch.remaining > 0 {
			return
		}
		r.finalize(ch)
	}
}

// endInput ends the stream before chunk c because of err: the chunks
// before it are processed and written, then the run returns err.
// r.mu held.
func (r *streamRun) endInput(ch *chunkIO, err error) {
	r.readErr = err
	r.total = ch.c
	r.markLocked(&r.endTok, ch.tok)
	r.signal()
}

// finalize checks a chunk whose reads are done and hands it to the
// issuer. r.mu held.
func (r *streamRun) finalize(ch *chunkIO) {
	if ch.err != nil {
		r.endInput(ch, ch.err)
		return
	}
	elems := -1
	for j, in := range r.ins {
		got := ch.got[j]
		at := int64(ch.c) * int64(r.chunkIn[j])
		if rem := got % in.elem; rem != 0 {
			r.endInput(ch, &StreamError{Stream: in.name, Offset: at + int64(got-rem),
				Err: fmt.Errorf("%w: %s of a %d-byte element", ErrPartialElement, trailingBytes(rem), in.elem)})
			return
		}
		n := got / in.elem
		if elems >= 0 && n != elems {
			short, long, sn := 0, j, elems
			if n < elems {
				short, long, sn = j, 0, n
			}
			shortAt := int64(ch.c)*int64(r.chunkIn[short]) + int64(ch.got[short])
			r.endInput(ch, &StreamError{Stream: r.ins[short].name, Offset: shortAt,
				Err: fmt.Errorf("%w: %s ends after %d elements, %s has more", ErrLengthMismatch,
					r.ins[short].name, int64(ch.c)*int64(r.p.cfg.ChunkElems)+int64(sn), r.ins[long].name)})
			return
		}
		elems = n
	}
	for j, in := range r.ins {
		r.readBytes[j] += int64(elems * in.elem)
	}
	if elems > 0 {
		r.inN[ch.c%r.ring] = elems
		r.elemsRead += int64(elems)
		r.advanceLocked(&r.staged, ch.c+1, ch.tok)
	}
	switch {
	case elems == 0:
		r.total = ch.c
		r.markLocked(&r.endTok, ch.tok)
	case elems < r.p.cfg.ChunkElems:
		r.total = ch.c + 1
		r.markLocked(&r.endTok, ch.tok)
	}
	r.signal()
}

func (r *streamRun) failLocked(err error) {
	if r.err == nil {
		r.err = err
	}
	r.stopLocked()
}

// wrote records a finished write and advances the written count, in
// order, over every chunk whose writes are all done.
func (r *streamRun) wrote(jb ioJob, n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.outs[jb.stream]
	if n > 0 {
		out.done[jb.at] = jb.at + int64(n)
		for end, ok := out.done[out.committed]; ok; end, ok = out.done[out.committed] {
			delete(out.done, out.committed)
			out.committed = end
		}
	}
	if err != nil {
		if out.direct {
			err = directHint(err)
		}
		r.failLocked(&StreamError{Stream: out.name, Offset: jb.at + int64(n), Err: err})
		return
	}
	ch := r.writing[jb.c%r.ring]
	ch.remaining--
	r.doneLocked(ch)
	for {
		c := r.written
		ch := r.writing[c%r.ring]
		if ch == nil || ch.c != c || ch.remaining > 0 {
			break
		}
		// No D2H copies into the slot again before it is written.
		r.elemsWritten += int64(r.outN[c%r.ring])
		r.advanceLocked(&r.written, c+1, ch.tok)
	}
	r.signal()
}

// issue is device d's schedule, as Run's (see issue in run.go), fed by
// the readers: the device takes the next chunk read, in its i-th device
// slot, and its D2H waits until the writers have emptied the host slot
// and written the chunk that last used the device slot. In a group's run a
// device takes a chunk only when it has room for it, as in Group.Run.
func (r *streamRun) issue(d int) error {
	q, S, R := r.devs[d], r.p.cfg.Slots, r.ring
	iss, err := q.b.Issuer()
	if err != nil {
		return &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	defer iss.Release()
	chunk := Chunk{}
	last := make([]int, S) // the chunk each device slot held last
	for i := 0; ; i++ {
		s, k := i%S, i%len(q.comp)
		if len(r.devs) > 1 {
			if err := r.roomFor(q, last, i); err != nil {
				return err
			}
		}
		r.mu.Lock()
		ok := r.waitLocked(r.cond, func() bool { return r.staged > r.taken || (r.total >= 0 && r.taken >= r.total) }, func() HostClock {
			if r.staged > r.taken {
				return r.tokAt(&r.staged, r.taken)
			}
			return r.endTok
		})
		if !ok || r.staged <= r.taken {
			r.mu.Unlock()
			return nil // stopped, or the end
		}
		c := r.taken
		r.taken++
		h := c % R
		n := r.inN[h]
		r.mu.Unlock()
		prev := -1
		if i >= S {
			prev = last[s]
		}
		last[s] = c
		off := c * q.cfg.ChunkElems
		fail := func(st Stage, err error) error { return &StageError{Chunk: c, Stage: st, Err: err} }

		// H2D
		if i >= S && !q.skipWAR {
			if err := iss.Wait(q.h2d, q.compDone[s]); err != nil {
				return fail(StageH2D, err)
			}
		}
		for j := range r.ins {
			if err := iss.CopyToDevice(q.h2d, q.din[s][j].all, q.din[s][j].off, r.hostIn(h, j), 0, n*q.cfg.Inputs[j]); err != nil {
				return fail(StageH2D, err)
			}
		}
		if err := iss.Record(q.h2dDone[s], q.h2d); err != nil {
			return fail(StageH2D, err)
		}
		r.mu.Lock()
		r.h2dAt[h], r.h2dEv[h] = c, slotEvent{ev: q.h2dDone[s], dev: d}
		r.markLocked(&r.h2dEv[h].tok)
		r.signal()
		r.mu.Unlock()

		// compute
		cs := q.comp[k]
		if err := iss.Wait(cs, q.h2dDone[s]); err != nil {
			return fail(StageCompute, err)
		}
		if i >= S && !q.skipWAR {
			if err := iss.Wait(cs, q.d2hDone[s]); err != nil {
				return fail(StageCompute, err)
			}
		}
		q.fillChunk(&chunk, c, s, off, n)
		if err := iss.Launch(cs, r.job.Kernel, chunk); err != nil {
			return fail(StageCompute, err)
		}
		if err := iss.Record(q.compDone[s], cs); err != nil {
			return fail(StageCompute, err)
		}

		// D2H, once the writers are done with the host slot's last chunk
		// and with the device slot's (whose D2H event is recorded again).
		if need := max(c-R, prev); need >= 0 && !q.skipWAR && !r.waitUntil(func() bool { return r.written > need }, func() HostClock { return r.tokAt(&r.written, need) }) {
			return nil
		}
		if err := iss.Wait(q.d2h, q.compDone[s]); err != nil {
			return fail(StageD2H, err)
		}
		for j := range r.outs {
			if err := iss.CopyToHost(q.d2h, r.hostOut(h, j), 0, q.dout[s][j].all, q.dout[s][j].off, n*q.cfg.Outputs[j]); err != nil {
				return fail(StageD2H, err)
			}
		}
		if err := iss.Record(q.d2hDone[s], q.d2h); err != nil {
			return fail(StageD2H, err)
		}
		r.mu.Lock()
		r.outN[h] = n
		r.elems += int64(n)
		r.d2hAt[h], r.d2hEv[h] = c, slotEvent{ev: q.d2hDone[s], dev: d}
		r.markLocked(&r.d2hEv[h].tok)
		r.d2hIssued++
		r.devChunks[d]++
		r.signal()
		r.mu.Unlock()
	}
}

// roomFor waits until device q has room to take its i-th chunk (see
// Pipeline.roomFor); last holds the chunk of each of its slots.
func (r *streamRun) roomFor(q *Pipeline, last []int, i int) error {
	S := q.cfg.Slots
	if i >= 2 {
		if err := q.h2dDone[(i-2)%S].Synchronize(); err != nil {
			return &StageError{Chunk: last[(i-2)%S], Stage: StageH2D, Err: err}
		}
	}
	if i >= S {
		if err := q.d2hDone[i%S].Synchronize(); err != nil {
			return &StageError{Chunk: last[i%S], Stage: StageD2H, Err: err}
		}
	}
	return nil
}

// progressEvery is how often a streaming run reports its progress.
const progressEvery = 100 * time.Millisecond

// startProgress starts the goroutine that calls the job's Progress every
// progressEvery while the counts move, and returns what stops it and makes
// the last call. Without a Progress it starts nothing.
func (r *streamRun) startProgress() (stop func()) {
	if r.job.Progress == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		var last Progress
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if pr := r.progress(); pr != last {
					r.job.Progress(pr)
					last = pr
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		r.job.Progress(r.progress())
	}
}

// progress is how far the run has got.
func (r *streamRun) progress() Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	pr := Progress{ElemsRead: r.elemsRead, ElemsWritten: r.elemsWritten}
	for _, b := range r.readBytes {
		pr.BytesRead += b
	}
	for _, out := range r.outs {
		pr.BytesWritten += out.committed
	}
	return pr
}

// trailingBytes says how many bytes of an element a stream ended with.
func trailingBytes(n int) string {
	if n == 1 {
		return "1 trailing byte"
	}
	return fmt.Sprintf("%d trailing bytes", n)
}
