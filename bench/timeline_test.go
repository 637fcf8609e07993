package bench

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTimeline draws three spans: the lanes come stage-in, H2D, compute
// streams, D2H whatever the spans' order, the trace has a named thread
// per lane and an event per span in microseconds, and the SVG a lane
// per stream, a rectangle per span and the title escaped.
func TestTimeline(t *testing.T) {
	spans := []pipeline.Span{
		{Stage: pipeline.StageD2H, Lane: "D2H", Chunk: 0, Start: 3 * time.Millisecond, End: 4 * time.Millisecond},
		{Stage: pipeline.StageCompute, Lane: "compute 1", Chunk: 0, Start: 2 * time.Millisecond, End: 3 * time.Millisecond},
		{Stage: pipeline.StageH2D, Lane: "H2D", Chunk: 0, Start: 0, End: 2 * time.Millisecond},
	}
	assert.Equal(t, []string{"H2D", "compute 1", "D2H"}, lanes(spans))

	var tr bytes.Buffer
	require.NoError(t, WriteTrace(&tr, spans, "job <1>"))
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(tr.Bytes(), &doc))
	require.Len(t, doc.TraceEvents, 1+3+3)
	assert.Equal(t, "job <1>", doc.TraceEvents[0].Args["name"])
	assert.Equal(t, "H2D", doc.TraceEvents[1].Args["name"])
	last := doc.TraceEvents[6]
	assert.Equal(t, "X", last.Ph)
	assert.Equal(t, 0.0, last.Ts)
	assert.Equal(t, 2000.0, last.Dur)
	assert.Equal(t, 1, last.Tid, "the H2D lane")

	var svg bytes.Buffer
	require.NoError(t, WriteTimelineSVG(&svg, spans, "job <1>"))
	s := svg.String()
	assert.Contains(t, s, "job &lt;1&gt;")
	assert.Equal(t, 3, strings.Count(s, `class="lane"`))
	assert.Equal(t, 3, strings.Count(s, "<title>"))
	assert.Contains(t, s, ">4.0 ms</text>", "the axis ends at the last span")

	// A short run's ticks differ from one another (the trial's read
	// "0.0 ms 0.0 ms 0.0 ms"): 0.3 ms in tenths of 0.03 ms.
	short := []pipeline.Span{{Lane: "H2D", Stage: pipeline.StageH2D, Start: 0, End: 300 * time.Microsecond}}
	svg.Reset()
	require.NoError(t, WriteTimelineSVG(&svg, short, "short"))
	ticks := regexp.MustCompile(`>([0-9.]+) ms</text>`).FindAllStringSubmatch(svg.String(), -1)
	require.Len(t, ticks, 11)
	seen := map[string]bool{}
	for _, m := range ticks {
		assert.False(t, seen[m[1]], "tick %s ms twice", m[1])
		seen[m[1]] = true
	}
	assert.Equal(t, "0.03", ticks[1][1])
}
