package bench

import (
	"context"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// copiesAtOnce times the copies of a job of rows rows in chunks of chunk
// rows in both directions at once, as a group of devices measures its
// Copies stage: every chunk's host-to-device copy of inRow bytes a row
// from in on one stream, and its device-to-host copy of outRow bytes a
// row into out on another, issued in turns, through two device slots per
// direction; the host issues them all and waits once. It returns the
// faster of two passes. What the copies write into out is garbage: the
// caller runs the job again before reading it.
func copiesAtOnce(ctx context.Context, b pipeline.Backend, in, out pipeline.HostMemory, inRow, outRow, chunk, rows int) (time.Duration, error) {
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	var din, dout [2]pipeline.DeviceMem
	for s := range din {
		var err error
		if din[s], err = b.AllocDevice(chunk * inRow); err != nil {
			return 0, err
		}
		closers = append(closers, din[s].Close)
		if dout[s], err = b.AllocDevice(chunk * outRow); err != nil {
			return 0, err
		}
		closers = append(closers, dout[s].Close)
	}
	var sts [2]pipeline.Stream
	for i := range sts {
		var err error
		if sts[i], err = b.NewStream(); err != nil {
			return 0, err
		}
		closers = append(closers, sts[i].Close)
	}
	h2d, d2h := sts[0], sts[1]
	iss, err := b.Issuer()
	if err != nil {
		return 0, err
	}
	defer iss.Release()
	best := time.Duration(0)
	for pass := 0; pass < 2; pass++ {
		t0 := pipeline.Now(b)
		for c, off := 0, 0; off < rows; c, off = c+1, off+chunk {
			if err := ctx.Err(); err != nil {
				h2d.Synchronize()
				d2h.Synchronize()
				return 0, err
			}
			n := min(chunk, rows-off)
			if err := iss.CopyToDevice(h2d, din[c%2], 0, in, off*inRow, n*inRow); err != nil {
				return 0, err
			}
			if err := iss.CopyToHost(d2h, out, off*outRow, dout[c%2], 0, n*outRow); err != nil {
				return 0, err
			}
		}
		for _, s := range sts {
			if err := s.Synchronize(); err != nil {
				return 0, err
			}
		}
		if d := pipeline.Now(b) - t0; pass == 0 || d < best {
			best = d
		}
	}
	return best, nil
}
