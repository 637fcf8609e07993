package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
)

// panickyReader reads r and panics on its read of index at while armed,
// or with goexit ends its goroutine with runtime.Goexit.
type panickyReader struct {
	r      io.Reader
	at     int
	reads  int
	armed  *atomic.Bool
	goexit bool
}

func (p *panickyReader) Read(b []byte) (int, error) {
	p.reads++
	if p.armed.Load() && p.reads == p.at {
		if p.goexit {
			runtime.Goexit()
		}
		panic("boom in Read")
	}
	return p.r.Read(b)
}

// TestStreamPanicSettles: a panic in a streaming run's Read (on a worker
// goroutine) or in its kernel's Args (on the issuing one), through a
// Pipeline and through a group of two devices, stops the run, which
// tears down as a failed one does, and then reaches the caller, who can
// recover it: no goroutine is left behind, no hazard (streamPipeline's
// and streamGroup's cleanups), and the next stream is exact. It ended
// the program from a worker or a device's goroutine, and on one device
// left the readers and writers running. A runtime.Goexit there (a test's
// t.FailNow) settles the same way and ends the caller's goroutine; it
// left the run's goroutines behind, or its join waiting forever.
func TestStreamPanicSettles(t *testing.T) {
	const chunk = 16
	in, want := streamData(40 * chunk)
	for _, goexit := range []bool{false, true} {
		for _, where := range []string{"Read", "Args"} {
			for _, devices := range []int{1, 2} {
				ending := "panic/"
				if goexit {
					ending = "goexit/"
				}
				t.Run(ending+where+"/"+string(rune('0'+devices))+" devices", func(t *testing.T) {
					var run func(pipeline.StreamJob) error
					if devices == 1 {
						p, _ := streamPipeline(t, 31, chunk, 1)
						run = func(j pipeline.StreamJob) error { _, err := p.RunStream(context.Background(), j); return err }
					} else {
						cfg := pipeline.Float32Config(1, 1)
						cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
						g, _ := streamGroup(t, 32, cfg, false, false)
						run = func(j pipeline.StreamJob) error { _, err := g.RunStream(context.Background(), j); return err }
					}
					var armed atomic.Bool
					k := *seedKernel(nil, streamIters)
					if where == "Args" {
						args := k.Args
						k.Args = func(a *driver.Args, c pipeline.Chunk) {
							if armed.Load() && c.Index == 5 {
								if goexit {
									runtime.Goexit()
								}
								panic("boom in Args")
							}
							args(a, c)
						}
					}
					job := func() (pipeline.StreamJob, *bytes.Buffer) {
						var out bytes.Buffer
						r := &panickyReader{r: plainReader{bytes.NewReader(in)}, armed: &armed, goexit: goexit}
						if where == "Read" {
							r.at = 7
						}
						return pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{&out}, Kernel: &k}, &out
					}
					before := runtime.NumGoroutine()
					armed.Store(true)
					j, _ := job()
					wantEnding := any("boom in " + where)
					if goexit {
						wantEnding = goexited
					}
					assert.Equal(t, wantEnding, endingOf(func() { _ = run(j) }))
					armed.Store(false)
					noGoroutinesLeft(t, before, "goroutines left behind")
					j, out := job()
					require.NoError(t, run(j), "the stream after the panic")
					sameBytes(t, want, out.Bytes())
				})
			}
		}
	}
}

// TestStreamGoexitTearsDownAsAPanicDoes: on one device, whose kernel's
// Args run on the caller's goroutine, a Goexit there leaves what a panic
// there leaves: the input's offset past what the run read (it stayed at
// 0), and a pipeline that closes itself when the settling drain fails
// (the next run went on with the broken device).
func TestStreamGoexitTearsDownAsAPanicDoes(t *testing.T) {
	const chunk = 16
	in, _ := streamData(40 * chunk)
	boom := errors.New("injected sync fault")
	for _, goexit := range []bool{false, true} {
		for _, drainFails := range []bool{false, true} {
			name := fmt.Sprintf("goexit=%v/drain fails=%v", goexit, drainFails)
			t.Run(name, func(t *testing.T) {
				dev := sim.New(31, 20*time.Microsecond)
				cfg := pipeline.Float32Config(1, 1)
				cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
				p, err := pipeline.New(dev, cfg)
				require.NoError(t, err)
				defer p.Close()
				var armed atomic.Bool
				k := *seedKernel(nil, streamIters)
				args := k.Args
				k.Args = func(a *driver.Args, c pipeline.Chunk) {
					if armed.Load() && c.Index == 5 {
						if drainFails {
							for i := 1; i <= 20; i++ { // the settling drain's waits
								dev.FailAt("sync", dev.Count("sync")+i, boom)
							}
						}
						if goexit {
							runtime.Goexit()
						}
						panic("boom in Args")
					}
					args(a, c)
				}
				r := bytes.NewReader(in)
				var out bytes.Buffer
				armed.Store(true)
				endingOf(func() {
					_, _ = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{r}, Outputs: []io.Writer{&out}, Kernel: &k})
				})
				armed.Store(false)
				if drainFails {
					_, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(in)}, Outputs: []io.Writer{&out}, Kernel: &k})
					require.ErrorIs(t, err, pipeline.ErrClosed, "the next run")
					assert.ErrorContains(t, err, "injected sync fault")
					return
				}
				off, err := r.Seek(0, io.SeekCurrent)
				require.NoError(t, err)
				assert.Positive(t, off, "the input's offset: past the chunks that the run read")
				assert.LessOrEqual(t, off, int64(len(in)))
				assert.Empty(t, dev.Hazards())
			})
		}
	}
}
