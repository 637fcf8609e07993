package textout

import (
	"errors"
	"strings"
	"testing"
)

type failAfter struct {
	n   int
	got strings.Builder
}

var errFull = errors.New("full")

func (f *failAfter) Write(b []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	return f.got.Write(b)
}

// TestWriterKeepsTheFirstError: writes stop at the first failure, whose
// error stays.
func TestWriterKeepsTheFirstError(t *testing.T) {
	f := &failAfter{n: 2}
	w := &Writer{W: f}
	for i := range 4 {
		w.Printf("line %d\n", i)
	}
	if got := f.got.String(); got != "line 0\nline 1\n" {
		t.Errorf("wrote %q", got)
	}
	if !errors.Is(w.Err, errFull) {
		t.Errorf("Err = %v, want %v", w.Err, errFull)
	}
}
