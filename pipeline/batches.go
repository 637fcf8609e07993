package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"unsafe"

	"github.com/purecuda/overlap/driver"
)

// StreamRunner is what Batches runs on: a *Pipeline or a *Group.
type StreamRunner interface {
	Config() Config
	RunStream(ctx context.Context, job StreamJob) (*StreamReport, error)
}

// usableRunner refuses a nil StreamRunner, a typed nil one, and a
// Pipeline or Group not made by New or NewGroup.
func usableRunner(p StreamRunner, method string) error {
	switch r := p.(type) {
	case nil:
		return fmt.Errorf("pipeline: %s: nil StreamRunner", method)
	case *Pipeline:
		return r.usable(method)
	case *Group:
		return r.usable(method)
	}
	if nilPointer(p) {
		return fmt.Errorf("pipeline: %s: nil %T", method, p)
	}
	return nil
}

// BatchOptions are BatchesWith's choices; the zero value is Batches'.
type BatchOptions struct {
	// Progress, when set, is the run's StreamJob.Progress: the bytes and
	// elements (rows) read from the batches and written to the results,
	// at most about every 100 ms and once at the end.
	Progress func(Progress)
}

// Batches runs k over a sequence of batches of one input, for a data
// loader that produces batches as it goes, and yields each batch's output,
// in order, as soon as it is written back:
//
//	for out, err := range pipeline.Batches[float32, float32](ctx, p, k, loader) {
//		if err != nil { ... }
//		use(out) // len(out) == len of the matching input batch
//	}
//
// The batches are not concatenated: they flow through the pinned slots as
// one stream (RunStream), each copied once into a slot, and chunks may
// span batches. A batch is read before the next one is requested, so the
// loader may reuse its memory once its yield returns. Each output batch is
// a new slice that the caller owns. p, a Pipeline or a Group, must be
// built for one input and one output whose elements are values of In and
// Out, or rows of them: with Config{Inputs: {4 * 784}, Outputs: {4 * 10}},
// Batches[float32, float32] takes batches of rows of 784 values and
// yields rows of 10, a batch of 64 rows (50176 values) giving 640. A
// batch that is not a whole number of rows ends the sequence with an
// error naming it.
//
// A loader that sends batches on a channel ch is a sequence too:
//
//	func(yield func([]float32) bool) {
//		for b := range ch {
//			if !yield(b) {
//				return
//			}
//		}
//	}
//
// The sequence ends after the last batch's output, or with one error: a
// device failure, ctx's error, or a nil p, k or batches (then the only
// pair); the loader's panic is not caught. A nil ctx means
// context.Background, as for Run. Stopping the range early cancels the
// run, drains it, and stops the loader. Memory stays bounded by the
// slots and by one output batch being filled, plus one waiting for the
// caller.
func Batches[In, Out driver.Element](ctx context.Context, p StreamRunner, k *Kernel, batches iter.Seq[[]In]) iter.Seq2[[]Out, error] {
	return BatchesWith[In, Out](ctx, p, k, batches, BatchOptions{})
}

// BatchesWith is [Batches] with options.
func BatchesWith[In, Out driver.Element](ctx context.Context, p StreamRunner, k *Kernel, batches iter.Seq[[]In], opts BatchOptions) iter.Seq2[[]Out, error] {
	return func(yield func([]Out, error) bool) {
		err := usableRunner(p, "Batches")
		switch {
		case err != nil:
		case k == nil:
			err = errors.New("pipeline: Batches: nil *Kernel")
		case batches == nil:
			err = errors.New("pipeline: Batches: nil batches")
		}
		if err != nil {
			yield(nil, err)
			return
		}
		if ctx == nil {
			ctx = context.Background()
		}
		cfg := p.Config()
		inSize, outSize := int(unsafe.Sizeof(*new(In))), int(unsafe.Sizeof(*new(Out)))
		if len(cfg.Inputs) != 1 || len(cfg.Outputs) != 1 || cfg.Inputs[0]%inSize != 0 || cfg.Outputs[0]%outSize != 0 {
			yield(nil, fmt.Errorf("pipeline: Batches needs a pipeline of one input of %d-byte values or rows of them and one output of %d-byte values or rows of them; this one has inputs %v and outputs %v",
				inSize, outSize, cfg.Inputs, cfg.Outputs))
			return
		}
		runCtx, cancel := context.WithCancel(ctx)
		next, stopPull := iter.Pull(batches)
		q := &lenQueue{}
		results := make(chan []Out, 1)
		consumerGone := make(chan struct{})
		var goneOnce sync.Once
		leave := func() { goneOnce.Do(func() { close(consumerGone) }) }
		// However the caller leaves (a break, a panic in its loop), the
		// run is cancelled and its writer never waits for it again.
		defer leave()
		defer cancel()
		br := &batchReader[In]{next: next, q: q, width: cfg.Inputs[0] / inSize}
		bw := &batchWriter[Out]{q: q, results: results, gone: consumerGone, width: cfg.Outputs[0] / outSize}
		var runErr error
		go func() {
			defer close(results)
			_, err := p.RunStream(runCtx, StreamJob{Inputs: []io.Reader{br}, Outputs: []io.Writer{bw}, Kernel: k,
				InputNames: []string{"batches"}, OutputNames: []string{"results"}, Progress: opts.Progress})
			stopPull() // no Read is running once RunStream has returned
			if err == nil {
				err = bw.finish() // batches of no elements at the end
			}
			runErr = err
		}()
		for out := range results {
			if !yield(out, nil) {
				leave()
				cancel()
				for range results {
				}
				return
			}
		}
		if runErr != nil {
			yield(nil, runErr)
		}
	}
}

// lenQueue passes each batch's length in rows from the reader to the
// writer.
type lenQueue struct {
	mu   sync.Mutex
	lens []int
}

func (q *lenQueue) push(n int) {
	q.mu.Lock()
	q.lens = append(q.lens, n)
	q.mu.Unlock()
}

func (q *lenQueue) pop() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.lens) == 0 {
		return 0, false
	}
	n := q.lens[0]
	q.lens = q.lens[1:]
	return n, true
}

// batchReader reads the batches of a pulled sequence as one stream.
type batchReader[In driver.Element] struct {
	next  func() ([]In, bool)
	q     *lenQueue
	width int // values per row
	index int // batches read
	cur   []byte
	done  bool
}

func (b *batchReader[In]) Read(p []byte) (int, error) {
	for len(b.cur) == 0 {
		if b.done {
			return 0, io.EOF
		}
		batch, ok := b.next()
		if !ok {
			b.done = true
			return 0, io.EOF
		}
		if len(batch)%b.width != 0 {
			b.done = true
			return 0, fmt.Errorf("batch %d holds %d values, not a whole number of rows of %d", b.index, len(batch), b.width)
		}
		b.index++
		b.q.push(len(batch) / b.width)
		b.cur = driver.Bytes(batch)
	}
	n := len(p)
	if n > len(b.cur) {
		n = len(b.cur)
	}
	parallelCopy(p[:n], b.cur[:n])
	b.cur = b.cur[n:]
	return n, nil
}

// errConsumerGone stops a run whose caller stopped ranging over results.
var errConsumerGone = errors.New("pipeline: the caller stopped reading results")

// batchWriter cuts the output stream back into batches.
type batchWriter[Out driver.Element] struct {
	q       *lenQueue
	width   int // values per row
	results chan<- []Out
	gone    <-chan struct{}
	cur     []Out
	filled  int // bytes of cur written
	open    bool
}

// flush sends every complete batch at the head of the queue.
func (w *batchWriter[Out]) flush() error {
	for {
		if !w.open {
			n, ok := w.q.pop()
			if !ok {
				return nil
			}
			w.cur, w.filled, w.open = make([]Out, n*w.width), 0, true
		}
		if w.filled < len(driver.Bytes(w.cur)) {
			return nil
		}
		select {
		case w.results <- w.cur:
		case <-w.gone:
			return errConsumerGone
		}
		w.cur, w.open = nil, false
	}
}

func (w *batchWriter[Out]) Write(p []byte) (int, error) {
	written := 0
	for {
		if err := w.flush(); err != nil {
			return written, err
		}
		if len(p) == 0 {
			return written, nil
		}
		if !w.open {
			return written, errors.New("pipeline: more output than input batches")
		}
		n := copy(driver.Bytes(w.cur)[w.filled:], p)
		w.filled += n
		written += n
		p = p[n:]
	}
}

// finish sends the batches still queued, which can only be empty ones,
// once the run has written everything.
func (w *batchWriter[Out]) finish() error {
	if err := w.flush(); err != nil {
		return err
	}
	if w.open {
		return fmt.Errorf("pipeline: a batch of %d output values got %d bytes of output", len(w.cur), w.filled)
	}
	return nil
}
