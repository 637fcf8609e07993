package main

import (
	"fmt"
	"io"
	"os"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
)

// writeTimeline writes the --trace and --svg files for a run.
func writeTimeline(o *runOptions, rep *pipeline.Report, res *result) error {
	title := fmt.Sprintf("overlap: %s on %s, %d elements, chunk %d", res.Kernel, res.Backend, res.Elems, rep.ChunkElems)
	if res.Simulated {
		title += " [simulated]"
	}
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write(o.trace, func(w io.Writer) error { return bench.WriteTrace(w, rep.Spans, title) }); err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	if err := write(o.svg, func(w io.Writer) error { return bench.WriteTimelineSVG(w, rep.Spans, title) }); err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	return nil
}
