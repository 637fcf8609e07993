package calibrate

import (
	"fmt"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
)

// This file measures what copies in the two directions at once cost each
// other beyond sharing the link (Profile.BothFixedNs).

// bothCopyCount is how many copies each direction makes in bothCopies.
const bothCopyCount = 256

// bothCopies times on the device count copies of bytes each way, host to
// device on one stream and device to host on another, issued in turns
// behind a blocker so that the device sets the pace. Each copy uses its
// own slot of six, as the engine's copies do.
func bothCopies(b pipeline.Backend, bytes, count int) (time.Duration, error) {
	const slots = 6
	r, err := newHeldRig(b)
	if err != nil {
		return 0, err
	}
	defer r.close()
	var sts [2]pipeline.Stream
	for i := range sts {
		if sts[i], err = b.NewStream(); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, sts[i].Close)
	}
	var marks [2]pipeline.Event
	for i := range marks {
		if marks[i], err = b.NewEvent(true); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, marks[i].Close)
	}
	joined, err := b.NewEvent(false)
	if err != nil {
		return 0, err
	}
	r.closers = append(r.closers, joined.Close)
	host, err := b.AllocPinned(2 * slots * bytes)
	if err != nil {
		return 0, err
	}
	r.closers = append(r.closers, host.Close)
	var dev [2 * slots]pipeline.DeviceMem
	for i := range dev {
		if dev[i], err = b.AllocDevice(bytes); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, dev[i].Close)
	}
	h2d, d2h := sts[0], sts[1]
	return r.bl.timeHeld(sts[:], d2h, marks, func() error {
		for i := 0; i < count; i++ {
			s := i % slots
			if err := r.iss.CopyToDevice(h2d, dev[s], 0, host, s*bytes, bytes); err != nil {
				return err
			}
			if err := r.iss.CopyToHost(d2h, host, (slots+s)*bytes, dev[slots+s], 0, bytes); err != nil {
				return err
			}
		}
		// The last mark, on the D2H stream, follows the H2D stream too.
		if err := r.iss.Record(joined, h2d); err != nil {
			return err
		}
		return r.iss.Wait(d2h, joined)
	})
}

// bothFixedTrial is the value of BothFixedNs at which measureBothFixed's
// second prediction is made.
const bothFixedTrial = 2000.0

// measureBothFixed measures Profile.BothFixedNs: bothCopies of bytes on b,
// against the simulator's prediction of them from p with BothFixedNs at 0
// and at bothFixedTrial, linear between them, then one secant step. The copies' costs alone and
// BothGBps must be measured.
func measureBothFixed(b pipeline.Backend, p *sim.Profile, bytes int) error {
	p.BothFixedNs = 0
	measured, err := bothCopies(b, bytes, bothCopyCount)
	if err != nil {
		return fmt.Errorf("timing copies both ways at once: %w", err)
	}
	predict := func(v float64) (time.Duration, error) {
		q := p.Clone()
		q.BothFixedNs = v
		d, err := bothCopies(sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q), bytes, bothCopyCount)
		if err != nil {
			return 0, fmt.Errorf("predicting copies both ways at once: %w", err)
		}
		return d, nil
	}
	var predicted [2]time.Duration
	for i, v := range []float64{0, bothFixedTrial} {
		if predicted[i], err = predict(v); err != nil {
			return err
		}
	}
	if predicted[1] <= predicted[0] {
		return fmt.Errorf("measuring both_fixed_ns: the simulator's copies both ways took %v at %v ns and %v at 0; they must grow with it", predicted[1], bothFixedTrial, predicted[0])
	}
	// The copies' time grows a little faster than linearly with the
	// value (the fixed parts of the two directions overlap each other's
	// bytes less): linear alone was a few percent off at 500 or 4000 ns.
	x, atX, err := solveFrom(measured, bothFixedTrial, predicted, predict)
	if err != nil {
		return err
	}
	p.BothFixedNs = x
	p.Notes["both_fixed"] = fmt.Sprintf("%d copies of %d bytes each way, host to device and device to host on two streams, issued in turns behind a blocker, took %v on the device; the rest of this profile predicts %v, and %v with both_fixed_ns at %.0f: linear between the two, then one secant step (%v there)", bothCopyCount, bytes, measured, predicted[0], predicted[1], bothFixedTrial, atX)
	return nil
}
