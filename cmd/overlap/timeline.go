package main

import (
	"fmt"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
)

// writeTimeline writes the --trace and --svg files for a run.
func writeTimeline(o *runOptions, rep *pipeline.Report, res *result) error {
	title := fmt.Sprintf("overlap: %s on %s, %d elements, chunk %d", res.Kernel, res.Backend, res.Elems, rep.ChunkElems)
	if res.Simulated {
		title += " [simulated]"
	}
	if err := bench.WriteTraceFile(o.trace, rep.Spans, title); err != nil {
		return fmt.Errorf("--trace: %w", benchError(err))
	}
	if err := bench.WriteTimelineSVGFile(o.svg, rep.Spans, title); err != nil {
		return fmt.Errorf("--svg: %w", benchError(err))
	}
	return nil
}
