package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The streaming tests (issue 13) run on the simulator with its hazard
// detector, under -race in CI. Each checks the bytes written exactly, the
// report's counts, that no hazard was found and that nothing leaked.

const streamIters = 1

// streamData returns n pattern elements as bytes, and the seed kernel's
// output for them as the simulator computes it.
func streamData(n int) (in, want []byte) {
	x := make([]float32, n)
	kernels.FillPattern(x, 0)
	y := make([]float32, n)
	kernels.SeedCPU(y, x, streamIters)
	return append([]byte(nil), driver.Bytes(x)...), append([]byte(nil), driver.Bytes(y)...)
}

// streamPipeline builds a small pipeline on a fresh simulator and checks,
// when the test ends, that it closes, leaks nothing and saw no hazard.
func streamPipeline(t *testing.T, seed uint64, chunk, ins int) (*pipeline.Pipeline, *sim.Sim) {
	t.Helper()
	dev := sim.New(seed, 20*time.Microsecond)
	cfg := pipeline.Float32Config(ins, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		assert.Empty(t, dev.Live(), "objects left after Close")
		assert.Empty(t, dev.Hazards())
	})
	return p, dev
}

// plainReader hides every method but Read, so the run reads in order.
type plainReader struct{ r io.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

// slowReader and slowWriter sleep before each call.
type slowReader struct {
	r io.Reader
	d time.Duration
}

func (s slowReader) Read(b []byte) (int, error) { time.Sleep(s.d); return s.r.Read(b) }

type slowWriter struct {
	w io.Writer
	d time.Duration
}

func (s slowWriter) Write(b []byte) (int, error) { time.Sleep(s.d); return s.w.Write(b) }

// memFile is an in-memory positional output (WriteAt, Seek, Truncate),
// whose WriteAt fails for a write that covers failAt (when >= 0).
type memFile struct {
	mu     sync.Mutex
	data   []byte
	off    int64
	failAt int64
	err    error
	delay  time.Duration
}

func newMemFile() *memFile { return &memFile{failAt: -1} }

func (m *memFile) WriteAt(b []byte, off int64) (int, error) {
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(b)
	var err error
	if m.failAt >= off && m.failAt < off+int64(len(b)) {
		n, err = int(m.failAt-off), m.err
	}
	if end := off + int64(n); end > int64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-int64(len(m.data)))...)
	}
	copy(m.data[off:], b[:n])
	return n, err
}

func (m *memFile) Write(b []byte) (int, error) {
	n, err := m.WriteAt(b, m.off)
	m.off += int64(n)
	return n, err
}

func (m *memFile) Seek(off int64, whence int) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch whence {
	case io.SeekStart:
		m.off = off
	case io.SeekCurrent:
		m.off += off
	default:
		return 0, errors.New("memFile: unsupported whence")
	}
	return m.off, nil
}

func (m *memFile) Truncate(n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n < int64(len(m.data)) {
		m.data = m.data[:n]
	}
	return nil
}

func (m *memFile) bytes() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]byte(nil), m.data...)
}

// sameBytes checks got == want, and names the first difference.
func sameBytes(t *testing.T, want, got []byte) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < min(len(want), len(got)) && want[i] == got[i] {
		i++
	}
	t.Errorf("output differs from byte %d: got %d bytes, want %d", i, len(got), len(want))
}

// readerKinds are the inputs every length is tried with.
var readerKinds = []struct {
	name string
	make func(t *testing.T, data []byte) io.Reader
}{
	{"positional bytes.Reader", func(_ *testing.T, d []byte) io.Reader { return bytes.NewReader(d) }},
	{"positional file", func(t *testing.T, d []byte) io.Reader {
		path := filepath.Join(t.TempDir(), "in")
		require.NoError(t, os.WriteFile(path, d, 0o644))
		f, err := os.Open(path)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f
	}},
	{"plain", func(_ *testing.T, d []byte) io.Reader { return plainReader{bytes.NewReader(d)} }},
	{"OneByteReader", func(_ *testing.T, d []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(d)) }},
	{"HalfReader", func(_ *testing.T, d []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(d)) }},
	{"DataErrReader", func(_ *testing.T, d []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(d)) }},
	{"slow reader", func(_ *testing.T, d []byte) io.Reader {
		return slowReader{iotest.HalfReader(bytes.NewReader(d)), 200 * time.Microsecond}
	}},
	{"pipe", func(_ *testing.T, d []byte) io.Reader {
		pr, pw := io.Pipe()
		go func() {
			for len(d) > 0 { // odd-sized writes
				n := min(len(d), 13)
				pw.Write(d[:n])
				d = d[n:]
			}
			pw.Close()
		}()
		return pr
	}},
}

// writerKinds are the outputs; got returns what was written.
var writerKinds = []struct {
	name string
	make func(t *testing.T) (io.Writer, func() []byte)
}{
	{"buffer", func(*testing.T) (io.Writer, func() []byte) {
		var b bytes.Buffer
		return &b, b.Bytes
	}},
	{"positional memFile", func(*testing.T) (io.Writer, func() []byte) {
		m := newMemFile()
		return m, m.bytes
	}},
	{"positional file", func(t *testing.T) (io.Writer, func() []byte) {
		path := filepath.Join(t.TempDir(), "out")
		f, err := os.Create(path)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return f, func() []byte {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			return b
		}
	}},
	{"slow writer", func(*testing.T) (io.Writer, func() []byte) {
		var b bytes.Buffer
		return slowWriter{&b, 300 * time.Microsecond}, b.Bytes
	}},
}

// TestStreamEveryLength pushes streams of every interesting length through
// every kind of reader and writer, and checks every byte written. Issue 13.
func TestStreamEveryLength(t *testing.T) {
	const chunk = 64
	lengths := []int{0, 1, chunk - 1, chunk, chunk + 1, 3 * chunk, 7*chunk + 5}
	seed := uint64(1)
	for _, rk := range readerKinds {
		for _, wk := range writerKinds {
			for _, n := range lengths {
				t.Run(fmt.Sprintf("%s/%s/%d", rk.name, wk.name, n), func(t *testing.T) {
					seed++
					p, _ := streamPipeline(t, seed, chunk, 1)
					in, want := streamData(n)
					w, got := wk.make(t)
					rep, err := p.RunStream(context.Background(), pipeline.StreamJob{
						Inputs: []io.Reader{rk.make(t, in)}, Outputs: []io.Writer{w},
						Kernel: seedKernel(nil, streamIters), Readers: 3, Writers: 2, PieceBytes: 1,
					})
					require.NoError(t, err)
					sameBytes(t, want, got())
					assert.Equal(t, int64(n), rep.N)
					assert.Equal(t, (n+chunk-1)/chunk, rep.Chunks)
					assert.Equal(t, []int64{int64(4 * n)}, rep.InputBytes)
					assert.Equal(t, []int64{int64(4 * n)}, rep.OutputBytes)
				})
			}
		}
	}
}

// TestStreamPositionalOffsets checks that a positional input is read from
// its current offset and left past what was read, and that a positional
// output is written from its offset and left after what was written.
func TestStreamPositionalOffsets(t *testing.T) {
	p, _ := streamPipeline(t, 5, 16, 1)
	in, want := streamData(100)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in"), append([]byte("HEAD"), in...), 0o644))
	f, err := os.Open(filepath.Join(dir, "in"))
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(4, io.SeekStart)
	require.NoError(t, err)
	out, err := os.Create(filepath.Join(dir, "out"))
	require.NoError(t, err)
	defer out.Close()
	_, err = out.Write([]byte("HEADER"))
	require.NoError(t, err)
	_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{f}, Outputs: []io.Writer{out}, Kernel: seedKernel(nil, streamIters)})
	require.NoError(t, err)
	pos, _ := f.Seek(0, io.SeekCurrent)
	assert.Equal(t, int64(4+400), pos, "input offset after the run")
	_, err = out.Write([]byte("TAIL"))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(dir, "out"))
	require.NoError(t, err)
	assert.Equal(t, append(append([]byte("HEADER"), want...), "TAIL"...), got)
}

// TestStreamTwoInputs runs saxpy with one positional and one sequential
// input of the same length.
func TestStreamTwoInputs(t *testing.T) {
	p, _ := streamPipeline(t, 7, 32, 2)
	const n = 32*5 + 9
	x, y := make([]float32, n), make([]float32, n)
	kernels.FillPattern(x, 1)
	kernels.FillPattern(y, 99)
	var out bytes.Buffer
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{
		Inputs:  []io.Reader{bytes.NewReader(driver.Bytes(x)), iotest.HalfReader(bytes.NewReader(driver.Bytes(y)))},
		Outputs: []io.Writer{&out}, Kernel: saxpyKernel(nil, 2.5),
	})
	require.NoError(t, err)
	assert.Equal(t, int64(n), rep.N)
	require.NoError(t, verifySaxpy(x, y, driver.View[float32](out.Bytes()), 2.5))
	assert.Equal(t, 4*n, out.Len())
}

// errAfter returns data, then err once after bytes have been read.
type errAfter struct {
	r     io.Reader
	left  int
	cause error
}

func (e *errAfter) Read(b []byte) (int, error) {
	if e.left <= 0 {
		return 0, e.cause
	}
	if len(b) > e.left {
		b = b[:e.left]
	}
	n, err := e.r.Read(b)
	e.left -= n
	return n, err
}

// errAtReader is a positional input whose ReadAt fails at one offset.
type errAtReader struct {
	*bytes.Reader
	at    int64
	cause error
}

func (e errAtReader) ReadAt(b []byte, off int64) (int, error) {
	if e.at >= off && e.at < off+int64(len(b)) {
		n, _ := e.Reader.ReadAt(b[:e.at-off], off)
		return n, e.cause
	}
	return e.Reader.ReadAt(b, off)
}

var errDisk = errors.New("disk on fire")

// TestStreamBadInput covers every bad input: a trailing partial element,
// inputs of different lengths, and reader errors (iotest's TimeoutReader
// and ErrReader, a failure after some bytes, a positional read failure).
// Each must stop the run with the stream, the byte offset and the cause,
// and leave an exact prefix of the correct output. Issue 13.
func TestStreamBadInput(t *testing.T) {
	const chunk = 16
	const n = 5*chunk + 3 // elements of good data
	in, want := streamData(n)
	_, want2 := streamData(n)
	cases := []struct {
		name   string
		inputs func() []io.Reader
		// the error: stream, offset, cause and exact text
		stream string
		offset int64
		cause  error
		text   string
		held   int64 // output bytes: the chunks before the bad one
	}{
		{
			name:   "trailing partial element, positional",
			inputs: func() []io.Reader { return []io.Reader{bytes.NewReader(append(in, 1, 2, 3))} },
			stream: "in.f32", offset: 4 * n, cause: pipeline.ErrPartialElement,
			text: "pipeline: in.f32 at byte 332: the stream ends inside an element: 3 trailing bytes of a 4-byte element",
			held: 320,
		},
		{
			name:   "trailing partial element, one byte at a time",
			inputs: func() []io.Reader { return []io.Reader{iotest.OneByteReader(bytes.NewReader(append(in, 9)))} },
			stream: "in.f32", offset: 4 * n, cause: pipeline.ErrPartialElement,
			text: "pipeline: in.f32 at byte 332: the stream ends inside an element: 1 trailing byte of a 4-byte element",
			held: 320,
		},
		{
			name:   "partial element at a chunk boundary",
			inputs: func() []io.Reader { return []io.Reader{plainReader{bytes.NewReader(append(in[:4*4*chunk], 7, 7))}} },
			stream: "in.f32", offset: 4 * 4 * chunk, cause: pipeline.ErrPartialElement,
			text: "pipeline: in.f32 at byte 256: the stream ends inside an element: 2 trailing bytes of a 4-byte element",
			held: 256,
		},
		{
			name:   "TimeoutReader",
			inputs: func() []io.Reader { return []io.Reader{iotest.TimeoutReader(plainReader{bytes.NewReader(in)})} },
			// ReadFull's first Read gets a whole chunk; the second times out.
			stream: "in.f32", offset: 4 * chunk, cause: iotest.ErrTimeout,
			text: "pipeline: in.f32 at byte 64: timeout",
			held: 64,
		},
		{
			name:   "ErrReader",
			inputs: func() []io.Reader { return []io.Reader{iotest.ErrReader(errDisk)} },
			stream: "in.f32", offset: 0, cause: errDisk,
			text: "pipeline: in.f32 at byte 0: disk on fire",
			held: 0,
		},
		{
			name:   "error after 150 bytes",
			inputs: func() []io.Reader { return []io.Reader{&errAfter{r: bytes.NewReader(in), left: 150, cause: errDisk}} },
			stream: "in.f32", offset: 150, cause: errDisk,
			text: "pipeline: in.f32 at byte 150: disk on fire",
			held: 128,
		},
		{
			name:   "positional read error",
			inputs: func() []io.Reader { return []io.Reader{errAtReader{bytes.NewReader(in), 203, errDisk}} },
			stream: "in.f32", offset: 203, cause: errDisk,
			text: "pipeline: in.f32 at byte 203: disk on fire",
			held: 192,
		},
		{
			name: "second input shorter",
			inputs: func() []io.Reader {
				return []io.Reader{bytes.NewReader(in), plainReader{bytes.NewReader(in[:4*(n-5)])}}
			},
			stream: "second.f32", offset: 4 * (n - 5), cause: pipeline.ErrLengthMismatch,
			text: "pipeline: second.f32 at byte 312: inputs differ in length: second.f32 ends after 78 elements, in.f32 has more",
			held: 256,
		},
		{
			name: "second input ends at a chunk boundary, first goes on",
			inputs: func() []io.Reader {
				return []io.Reader{bytes.NewReader(in), bytes.NewReader(in[:4*3*chunk])}
			},
			stream: "second.f32", offset: 4 * 3 * chunk, cause: pipeline.ErrLengthMismatch,
			text: "pipeline: second.f32 at byte 192: inputs differ in length: second.f32 ends after 48 elements, in.f32 has more",
			held: 192,
		},
	}
	for i, tc := range cases {
		for _, wk := range writerKinds[:2] {
			t.Run(tc.name+"/"+wk.name, func(t *testing.T) {
				ins := tc.inputs()
				p, _ := streamPipeline(t, uint64(100+i), chunk, len(ins))
				w, got := wk.make(t)
				k := seedKernel(nil, streamIters)
				ref := want
				if len(ins) == 2 {
					k, ref = saxpyKernel(nil, 0.5), saxpyBytes(in, in, 0.5)
				}
				_ = want2
				rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: ins, Outputs: []io.Writer{w}, Kernel: k,
					InputNames: []string{"in.f32", "second.f32"}, Readers: 2, PieceBytes: 1})
				require.Error(t, err)
				var se *pipeline.StreamError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, tc.stream, se.Stream)
				assert.Equal(t, tc.offset, se.Offset)
				assert.ErrorIs(t, err, tc.cause)
				assert.EqualError(t, err, tc.text)
				require.NotNil(t, rep)
				out := got()
				assert.Equal(t, rep.OutputBytes[0], int64(len(out)), "report counts what the output holds")
				assert.Equal(t, tc.held, int64(len(out)), "the chunks before the bad one are written")
				sameBytes(t, ref[:len(out)], out)
			})
		}
	}
}

func saxpyBytes(x, y []byte, a float32) []byte {
	xs, ys := driver.View[float32](x), driver.View[float32](y)
	out := make([]float32, len(xs))
	for i := range out {
		out[i] = a*xs[i] + ys[i]
	}
	return driver.Bytes(out)
}

// failWriter accepts limit bytes, the last write partly, then fails.
type failWriter struct {
	buf   bytes.Buffer
	limit int
}

func (f *failWriter) Write(b []byte) (int, error) {
	room := f.limit - f.buf.Len()
	if len(b) <= room {
		return f.buf.Write(b)
	}
	f.buf.Write(b[:max(room, 0)])
	return max(room, 0), errDisk
}

// TestStreamWriterFailure fails the output partway, sequential and
// positional, and checks the error (stream, offset, cause) and that the
// output holds an exact prefix of the correct output and nothing more:
// a positional output is truncated past its last piece written in full,
// even though later pieces landed. Issue 13.
func TestStreamWriterFailure(t *testing.T) {
	const chunk = 16
	const n = 9 * chunk
	in, want := streamData(n)
	cases := []struct {
		name   string
		out    func() (io.Writer, func() []byte)
		offset int64
		held   int64
	}{
		{"sequential, fails inside chunk 2", func() (io.Writer, func() []byte) {
			f := &failWriter{limit: 150}
			return f, f.buf.Bytes
		}, 150, 150},
		{"sequential, fails at a chunk boundary", func() (io.Writer, func() []byte) {
			f := &failWriter{limit: 128}
			return f, f.buf.Bytes
		}, 128, 128},
		{"positional, fails at byte 300 with later pieces written", func() (io.Writer, func() []byte) {
			m := newMemFile()
			m.failAt, m.err, m.delay = 300, errDisk, 100*time.Microsecond
			return m, m.bytes
		}, 300, 300},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := streamPipeline(t, uint64(200+i), chunk, 1)
			w, got := tc.out()
			rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{w},
				OutputNames: []string{"out.f32"}, Kernel: seedKernel(nil, streamIters), Writers: 4, PieceBytes: 1})
			var se *pipeline.StreamError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "out.f32", se.Stream)
			assert.Equal(t, tc.offset, se.Offset)
			assert.ErrorIs(t, err, errDisk)
			out := got()
			assert.Equal(t, tc.held, int64(len(out)))
			assert.Equal(t, tc.held, rep.OutputBytes[0])
			sameBytes(t, want[:len(out)], out)
		})
	}
}

// blockingReader serves data slowly and counts reads after cancellation.
type countingReader struct {
	r     io.Reader
	d     time.Duration
	mu    sync.Mutex
	reads int
}

func (c *countingReader) Read(b []byte) (int, error) {
	time.Sleep(c.d)
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.r.Read(b)
}

func (c *countingReader) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// TestStreamCancel cancels an endless slow stream: reading stops, the run
// drains and returns ctx's error, the output is an exact prefix, and no
// goroutine or object is left. Issue 13.
func TestStreamCancel(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, positionalOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("positional output %v", positionalOut), func(t *testing.T) {
			p, _ := streamPipeline(t, 300, 16, 1)
			const n = 4096
			in, want := streamData(n)
			r := &countingReader{r: iotest.HalfReader(bytes.NewReader(in)), d: 200 * time.Microsecond}
			var w io.Writer
			var got func() []byte
			if positionalOut {
				m := newMemFile()
				w, got = m, m.bytes
			} else {
				var b bytes.Buffer
				w, got = &b, b.Bytes
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			rep, err := p.RunStream(ctx, pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{w}, Kernel: seedKernel(nil, streamIters)})
			require.ErrorIs(t, err, context.Canceled)
			after := r.count()
			time.Sleep(10 * time.Millisecond)
			assert.Equal(t, after, r.count(), "no read after RunStream returned")
			assert.Less(t, rep.N, int64(n), "the run stopped early")
			out := got()
			assert.Equal(t, rep.OutputBytes[0], int64(len(out)))
			sameBytes(t, want[:len(out)], out)
		})
	}
	settle(before)
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines left")
}

// TestStreamManyRunsNoLeaks runs 300 streams on one pipeline, half of them
// failing, and checks objects and goroutines return to where they began.
func TestStreamManyRunsNoLeaks(t *testing.T) {
	p, dev := streamPipeline(t, 400, 8, 1)
	before := runtime.NumGoroutine()
	live := dev.Live()
	in, want := streamData(50)
	for i := 0; i < 300; i++ {
		var out bytes.Buffer
		var r io.Reader = bytes.NewReader(in)
		if i%2 == 1 {
			r = &errAfter{r: bytes.NewReader(in), left: 4 * i % 200, cause: errDisk}
		}
		_, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{&out}, Kernel: seedKernel(nil, streamIters)})
		if i%2 == 0 {
			require.NoError(t, err)
			sameBytes(t, want, out.Bytes())
		} else {
			require.ErrorIs(t, err, errDisk)
			sameBytes(t, want[:out.Len()], out.Bytes())
		}
	}
	assert.Equal(t, live, dev.Live())
	settle(before)
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2)
}

// TestStreamHazardDetectorSeesHostAccess drops the host's wait before it
// refills a slot and the wait for the writers before a D2H copy, and
// checks that the simulator reports the hazards: the streaming run's own
// reads and writes of pinned slots are visible to the detector.
func TestStreamHazardDetectorSeesHostAccess(t *testing.T) {
	dev := sim.New(9, 50*time.Microsecond)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = 8, 2, 1
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	pipeline.SetSkipWAR(p, true)
	in, _ := streamData(8 * 40)
	_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)},
		Outputs: []io.Writer{slowWriter{io.Discard, 100 * time.Microsecond}}, Kernel: seedKernel(nil, streamIters)})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	hz := dev.Hazards()
	require.NotEmpty(t, hz)
	host := false
	for _, h := range hz {
		if bytes.Contains([]byte(h.First+h.Later), []byte("host")) {
			host = true
		}
	}
	assert.True(t, host, "a hazard involves the host's own access: %v", hz)
}

// TestStreamValidation checks the errors for malformed jobs.
func TestStreamValidation(t *testing.T) {
	p, _ := streamPipeline(t, 1, 8, 1)
	r, w := bytes.NewReader(nil), io.Discard
	k := seedKernel(nil, 1)
	cases := []struct {
		job  pipeline.StreamJob
		text string
	}{
		{pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{w}}, "pipeline: stream job has no Kernel"},
		{pipeline.StreamJob{Outputs: []io.Writer{w}, Kernel: k}, "pipeline: a stream job needs at least one input: its end ends the run"},
		{pipeline.StreamJob{Inputs: []io.Reader{r, r}, Outputs: []io.Writer{w}, Kernel: k}, "pipeline: stream job has 2 inputs, the pipeline was built for 1"},
		{pipeline.StreamJob{Inputs: []io.Reader{r}, Kernel: k}, "pipeline: stream job has 0 outputs, the pipeline was built for 1"},
		{pipeline.StreamJob{Inputs: []io.Reader{nil}, Outputs: []io.Writer{w}, Kernel: k, InputNames: []string{"a.f32"}}, "pipeline: stream job: a.f32 is nil"},
		{pipeline.StreamJob{Inputs: []io.Reader{(*bytes.Reader)(nil)}, Outputs: []io.Writer{w}, Kernel: k}, "pipeline: stream job: input 0 is nil"},
		{pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{(*bytes.Buffer)(nil)}, Kernel: k}, "pipeline: stream job: output 0 is nil"},
		{pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{w}, Kernel: k, Readers: -1}, "pipeline: stream job: Readers, Writers and PieceBytes must not be negative"},
	}
	for _, tc := range cases {
		_, err := p.RunStream(context.Background(), tc.job)
		assert.EqualError(t, err, tc.text)
	}
	require.NoError(t, p.Close())
	_, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{w}, Kernel: k})
	assert.ErrorIs(t, err, pipeline.ErrClosed)
}

// TestStreamDirect reads a file opened with O_DIRECT, whose size is not a
// multiple of the alignment, and checks every byte written. It skips
// where O_DIRECT is unsupported: on other systems than Linux, and on file
// systems that refuse it (tmpfs).
func TestStreamDirect(t *testing.T) {
	const chunk = 2 * pipeline.DirectAlign / 4 // elements: two pages of float32
	n := 5*chunk + 123
	in, want := streamData(n)
	path := filepath.Join(t.TempDir(), "in")
	require.NoError(t, os.WriteFile(path, in, 0o644))
	f, err := pipeline.OpenDirect(path)
	if err != nil {
		t.Skipf("skipping: O_DIRECT unsupported here: %v", err)
	}
	defer f.Close()
	p, _ := streamPipeline(t, 21, chunk, 1)
	var out bytes.Buffer
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{f}, Outputs: []io.Writer{&out},
		Kernel: seedKernel(nil, streamIters), Readers: 3, PieceBytes: pipeline.DirectAlign})
	require.NoError(t, err)
	assert.Equal(t, int64(n), rep.N)
	assert.Equal(t, 3, rep.Readers, "the file was read with positional reads")
	sameBytes(t, want, out.Bytes())
}

// patternReader generates n float32 elements of the pattern on the fly.
type patternReader struct {
	n, at int // elements
	buf   []float32
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.at >= p.n {
		return 0, io.EOF
	}
	k := min(len(b)/4, p.n-p.at, 1024)
	if k == 0 {
		return 0, errors.New("patternReader: read of less than one element")
	}
	if len(p.buf) < k {
		p.buf = make([]float32, k)
	}
	kernels.FillPattern(p.buf[:k], p.at)
	p.at += k
	return copy(b, driver.Bytes(p.buf[:k])), nil
}

// heapSampler is a writer that measures the live heap after a GC at a
// few points of the stream.
type heapSampler struct {
	writes  int
	every   int
	samples []uint64
}

func (h *heapSampler) Write(b []byte) (int, error) {
	h.writes++
	if h.writes%h.every == 0 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.samples = append(h.samples, ms.HeapAlloc)
	}
	return len(b), nil
}

// TestStreamMemoryBounded streams 6000 chunks and checks that the live
// heap does not grow with the stream: a structure kept per chunk (a map
// of finished pieces, a queue, a report list) would add to it. Issue 13.
func TestStreamMemoryBounded(t *testing.T) {
	dev := sim.New(31, 0)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = 16, 3, 2
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	defer p.Close()
	const chunks = 6000
	w := &heapSampler{every: 1000}
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{&patternReader{n: chunks * 16}},
		Outputs: []io.Writer{w}, Kernel: seedKernel(nil, 0)})
	require.NoError(t, err)
	require.Equal(t, int64(chunks*16), rep.N)
	require.Len(t, w.samples, 6)
	growth := int64(w.samples[5]) - int64(w.samples[0])
	t.Logf("live heap at chunk 1000: %d KiB; at chunk 6000: %d KiB", w.samples[0]>>10, w.samples[5]>>10)
	assert.Less(t, growth, int64(64<<10), "the live heap grew by %d bytes over 5000 chunks", growth)
	assert.Empty(t, dev.Hazards())
}

// TestStreamVirtualTime: on the simulator a streaming run's times are on
// the virtual clock. A writer that sleeps in wall time adds nothing to
// them, the host's reads and writes of the slots take a staging copy's
// time, and the run takes at least its H2D copies' time at the profile's
// rate. Issue 13, on issue 11's simulator.
func TestStreamVirtualTime(t *testing.T) {
	const chunk, chunks = 1024, 8
	p, dev := streamPipeline(t, 21, chunk, 1)
	in, want := streamData(chunk * chunks)
	var out bytes.Buffer
	const sleep = 5 * time.Millisecond
	start := time.Now()
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)},
		Outputs: []io.Writer{slowWriter{&out, sleep}}, Kernel: seedKernel(nil, streamIters)})
	wall := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, want, out.Bytes())
	assert.Equal(t, chunks, rep.Chunks)
	require.GreaterOrEqual(t, wall, chunks*sleep, "the writer sleeps in wall time")
	assert.Less(t, rep.Elapsed, sleep, "the sleeps take no virtual time")
	assert.Greater(t, rep.Read, time.Duration(0), "reads into the slots take virtual time")
	assert.Greater(t, rep.Write, time.Duration(0), "writes out of the slots take virtual time")
	assert.LessOrEqual(t, rep.Read, rep.Elapsed)
	assert.LessOrEqual(t, rep.Write, rep.Elapsed)
	h2d := time.Duration(float64(len(in)) / dev.Profile().H2D.GBps) // GB/s is bytes/ns
	assert.GreaterOrEqual(t, rep.Elapsed, h2d, "the H2D copies alone take this long")
	t.Logf("elapsed %v, read %v, write %v, H2D alone %v, wall %v", rep.Elapsed, rep.Read, rep.Write, h2d, wall)
}

// TestStreamSeveralPiecesPerChunk writes chunks of four pieces each to
// positional outputs, with one and with three writers: a chunk counts as
// written only once its last piece is, so no D2H copy refills a slot that
// a writer still reads (the hazard detector, in streamPipeline's
// cleanup), and every byte lands (issue 28's mutation run: counting a
// chunk written one piece early survived every other test, whose chunks
// are one piece each).
func TestStreamSeveralPiecesPerChunk(t *testing.T) {
	const chunk = 4 * 4096 / 4 // elements: four pieces of 4096 bytes
	n := 9*chunk + 1000
	in, want := streamData(n)
	for _, writers := range []int{1, 3} {
		for _, wk := range writerKinds[1:3] { // the positional ones
			t.Run(fmt.Sprintf("%d writers/%s", writers, wk.name), func(t *testing.T) {
				p, _ := streamPipeline(t, uint64(40+writers), chunk, 1)
				w, got := wk.make(t)
				rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{w},
					Kernel: seedKernel(nil, streamIters), Writers: writers, PieceBytes: 4096})
				require.NoError(t, err)
				assert.Equal(t, writers, rep.Writers)
				assert.Equal(t, []int64{int64(4 * n)}, rep.OutputBytes)
				sameBytes(t, want, got())
			})
		}
	}
}
