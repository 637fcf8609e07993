package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline/sim"
)

// drainWay is one way of issuing a chunk's last copy out after its
// kernel, as BenchmarkGPUDrain times it.
type drainWay struct {
	name string
	// hop puts the copy on another stream, behind an event the kernel's
	// stream recorded (the events schedule); otherwise it follows the
	// kernel on the kernel's stream (the in-stream schedule, a job of one
	// chunk).
	hop bool
	// alone synchronises the kernel first and times the copy by itself,
	// from the host's call to its return from the wait: the copy's cost,
	// which the simulator calls D2HRegistered.
	alone bool
}

// BenchmarkGPUDrain times what follows the README job's last kernel: a
// 256K-element chunk's 1 MiB copy out into registered Go memory, and the
// host's wait for it. The README job's runs returned 33.5-38 µs after
// their last kernel ended, where the simulator says 20.7 µs
// (bench/RESULTS.md, "Seven whole jobs inside"), and this is the step
// that BenchmarkGPUWholeJobInside cannot split: here each round launches
// the stamped seed kernel (seedStampSource) over one chunk, then the copy
// one of three ways (drainWay), then waits, and reads the clocks' offset
// (clockOffset) before the next round. A way's drain is the host's return
// from the wait less the kernel's last block's end, on the host's clock;
// the benchmark reports each way's median, and the simulator's terms for
// the same steps beside them (the copy's cost, the hop's DepNs and
// WaitNs, the wake's SyncNs). Run with -test.benchtime 1x.
func BenchmarkGPUDrain(b *testing.B) {
	ctx := gputest.Context(b)
	seed, clk := stampKernels(b, ctx)
	const n, iters, rounds = 256 << 10, 100, 200
	ways := []drainWay{{name: "same stream"}, {name: "event hop", hop: true}, {name: "copy alone", alone: true}}
	din, err := ctx.Alloc(4 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer din.Close()
	dout, err := ctx.Alloc(4 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer dout.Close()
	stamps, err := ctx.Alloc(16 * rounds * len(ways))
	if err != nil {
		b.Fatal(err)
	}
	defer stamps.Close()
	init := make([]byte, stamps.Len())
	for i := 0; i < len(init); i += 16 {
		binary.LittleEndian.PutUint64(init[i:], math.MaxUint64)
		binary.LittleEndian.PutUint64(init[i+8:], 0)
	}
	if err := stamps.CopyFromHost(0, init); err != nil {
		b.Fatal(err)
	}
	host := make([]byte, 4*n)
	reg, err := ctx.RegisterHost(host, driver.RegisterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	var streams [2]*driver.Stream
	for i := range streams {
		if streams[i], err = ctx.NewStream(driver.StreamOptions{}); err != nil {
			b.Fatal(err)
		}
		defer streams[i].Close()
	}
	ev, err := ctx.NewEvent(driver.EventOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer ev.Close()
	args := driver.NewArgs()
	launch := func(slot int) error {
		args.Reset()
		args.Pointer(dout.Ptr()).Pointer(din.Ptr()).Uint32(n).Int32(iters).Pointer(stamps.Ptr() + driver.DevicePtr(16*slot))
		return seed.Function.Launch(streams[0], driver.GridFor(n, 256), args)
	}
	// round issues one round of way w and returns the host's clock (Unix
	// ns) when the wait returned, and for the copy alone when it began.
	round := func(w drainWay, slot int) (began, end int64, err error) {
		if err := launch(slot); err != nil {
			return 0, 0, err
		}
		s := streams[0]
		switch {
		case w.alone:
			if err := s.Synchronize(); err != nil {
				return 0, 0, err
			}
			began = time.Now().UnixNano()
		case w.hop:
			if err := ev.Record(s); err != nil {
				return 0, 0, err
			}
			s = streams[1]
			if err := s.WaitEvent(ev); err != nil {
				return 0, 0, err
			}
		}
		if err := s.CopyToHost(reg, 0, dout, 0, 4*n); err != nil {
			return 0, 0, err
		}
		if err := s.Synchronize(); err != nil {
			return 0, 0, err
		}
		return began, time.Now().UnixNano(), nil
	}
	for i := range 20 { // warm-up: the module, the mapping, the clocks
		if _, _, err := round(ways[i%len(ways)], 0); err != nil {
			b.Fatal(err)
		}
	}
	type sample struct {
		began, end int64
		off        offset
	}
	samples := make([][]sample, len(ways))
	for r := range rounds {
		for w, way := range ways { // the ways in turn, so that they see the same device
			began, end, err := round(way, w*rounds+r)
			if err != nil {
				b.Fatal(err)
			}
			samples[w] = append(samples[w], sample{began: began, end: end, off: clockOffset(b, ctx, clk.Function, 5)})
		}
	}
	got := make([]byte, stamps.Len())
	if err := stamps.CopyToHost(got, 0); err != nil {
		b.Fatal(err)
	}
	p := sim.BuiltinProfile()
	cost := p.D2HRegistered
	if cost.GBps == 0 {
		cost = p.D2H
	}
	copyNs := cost.FixedNs + 4*n/cost.GBps
	b.Logf("the simulator's built-in profile: the copy %.1f µs (fixed %.1f, %.1f GB/s), DepNs %.1f, WaitNs %.1f, SyncNs %.1f µs",
		copyNs/1e3, cost.FixedNs/1e3, cost.GBps, p.DepNs/1e3, p.WaitNs/1e3, p.SyncNs/1e3)
	for w, way := range ways {
		var drains []float64
		for r, s := range samples[w] {
			kernelEnd := int64(binary.LittleEndian.Uint64(got[16*(w*rounds+r)+8:]))
			mid := (s.off.lo + s.off.hi) / 2
			from := kernelEnd - mid // the kernel's end on the host's clock
			if way.alone {
				from = s.began
			}
			drains = append(drains, float64(s.end-from))
		}
		slices.Sort(drains)
		q := func(f float64) float64 { return drains[int(f*float64(len(drains)-1))] / 1e3 }
		b.Logf("%-12s drain µs: p10 %.1f  p50 %.1f  p90 %.1f  (%d rounds; clock bound ±%.1f µs at the median round)",
			way.name, q(0.1), q(0.5), q(0.9), len(drains), float64(samples[w][len(drains)/2].off.hi-samples[w][len(drains)/2].off.lo)/2e3)
		b.ReportMetric(q(0.5)*1e3, fmt.Sprintf("%s-p50-ns", slug(way.name)))
	}
	b.ReportMetric(copyNs, "sim-copy-ns")
}

// slug is s with its spaces as dashes, for a metric's unit.
func slug(s string) string {
	out := []byte(s)
	for i, c := range out {
		if c == ' ' {
			out[i] = '-'
		}
	}
	return string(out)
}
