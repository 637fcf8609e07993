// Package textout writes formatted text and keeps the first error, for
// the writers of overlap's text tables (packages bench and calibrate),
// which return it once at the end as io.Writer users expect.
package textout

import (
	"fmt"
	"io"
)

// Writer formats text to W; after the first failed write it writes
// nothing more and Err holds that failure.
type Writer struct {
	W   io.Writer
	Err error
}

// Printf writes format with args to W unless a write failed before.
func (t *Writer) Printf(format string, args ...any) {
	if t.Err == nil {
		_, t.Err = fmt.Fprintf(t.W, format, args...)
	}
}
