package bench

import (
	"io"
	"os"

	"github.com/purecuda/overlap/pipeline"
)

// WriteTraceFile creates path and writes spans to it as WriteTrace does;
// an empty path writes nothing. Its error is a *[Error].
func WriteTraceFile(path string, spans []pipeline.Span, title string) error {
	return writeFile("WriteTraceFile", path, func(w io.Writer) error { return WriteTrace(w, spans, title) })
}

// WriteTimelineSVGFile creates path and writes spans to it as
// WriteTimelineSVG does; an empty path writes nothing. Its error is a
// *[Error].
func WriteTimelineSVGFile(path string, spans []pipeline.Span, title string) error {
	return writeFile("WriteTimelineSVGFile", path, func(w io.Writer) error { return WriteTimelineSVG(w, spans, title) })
}

// writeFile creates path and writes it with fn, unless path is empty.
func writeFile(op, path string, fn func(io.Writer) error) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err == nil {
		err = fn(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return &Error{Op: op, Err: err}
	}
	return nil
}
