package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline/sim"
)

// BenchmarkGPUCopyAlone asks whether what a whole job's ends cost beyond
// the simulator's terms grows with the copies there. run_ns is solved
// from a one-chunk Run of 1024 elements, so it absorbs any cost of its
// two end copies that does not depend on their size; an isolated copy
// of 1 MiB took 28 µs from its call to the wait's return where the
// profile's terms give 23.7 (bench/RESULTS.md, BenchmarkGPUDrain). Each
// round copies one size in one direction, registered Go memory, in two
// ways in turn: alone (the stream synchronised first, so the copy engine
// is idle, timed from the call to the wait's return) and back to back
// (16 copies issued, then one wait, per copy). A line gives each way's
// median, the profile's terms beside it (alone: issue, fixed, bytes over
// the rate and the wake; back to back: fixed and bytes over the rate),
// and the excess of alone over the profile. An excess that is the same
// at every size is in run_ns already; one that grows with the size is
// not. Run with -test.benchtime 1x.
func BenchmarkGPUCopyAlone(b *testing.B) {
	ctx := gputest.Context(b)
	sizes := []int{4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}
	const rounds, queued = 100, 16
	biggest := sizes[len(sizes)-1]
	dev, err := ctx.Alloc(biggest)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.Close()
	host := make([]byte, biggest)
	reg, err := ctx.RegisterHost(host, driver.RegisterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer reg.Close()
	s, err := ctx.NewStream(driver.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	copyOnce := func(toDevice bool, n int) error {
		if toDevice {
			return s.CopyToDevice(dev, 0, reg, 0, n)
		}
		return s.CopyToHost(reg, 0, dev, 0, n)
	}
	// timed returns one round's time per copy: count copies issued, then
	// one wait, after the stream was left idle.
	timed := func(toDevice bool, n, count int) (time.Duration, error) {
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
		start := time.Now()
		for range count {
			if err := copyOnce(toDevice, n); err != nil {
				return 0, err
			}
		}
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
		return time.Since(start) / time.Duration(count), nil
	}
	type cell struct {
		toDevice bool
		n        int
	}
	var cells []cell
	for _, dir := range []bool{true, false} {
		for _, n := range sizes {
			cells = append(cells, cell{dir, n})
		}
	}
	for _, c := range cells { // warm-up: the mapping, the engine
		if _, err := timed(c.toDevice, c.n, queued); err != nil {
			b.Fatal(err)
		}
	}
	alone := make([][]float64, len(cells))
	b2b := make([][]float64, len(cells))
	for range rounds {
		for i, c := range cells { // every cell in turn, so that they see the same device
			a, err := timed(c.toDevice, c.n, 1)
			if err != nil {
				b.Fatal(err)
			}
			q, err := timed(c.toDevice, c.n, queued)
			if err != nil {
				b.Fatal(err)
			}
			alone[i] = append(alone[i], float64(a))
			b2b[i] = append(b2b[i], float64(q))
		}
	}
	p := sim.BuiltinProfile()
	issue := p.IssueNs["copy_registered"]
	if issue == 0 {
		issue = p.IssueNs["copy"]
	}
	for i, c := range cells {
		dir, cost := "d2h", p.D2HRegistered
		if c.toDevice {
			dir, cost = "h2d", p.H2DRegistered
		}
		model := cost.FixedNs + float64(c.n)/cost.GBps
		ma, mq := median(alone[i]), median(b2b[i])
		termsAlone := issue + model + p.SyncNs
		b.Logf("%s %7d B: alone %7.2f µs (profile %6.2f, excess %+6.2f); back to back %7.2f µs a copy (profile %6.2f, %+6.2f)",
			dir, c.n, ma/1e3, termsAlone/1e3, (ma-termsAlone)/1e3, mq/1e3, model/1e3, (mq-model)/1e3)
		b.ReportMetric(ma-termsAlone, fmt.Sprintf("%s-%dK-alone-excess-ns", dir, c.n>>10))
	}
}
