package bench

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// A run's timeline, drawn from the spans of its report: a Chrome trace
// or an SVG picture.

// lanes orders the lanes of a timeline: staging, copies, compute streams.
func lanes(spans []pipeline.Span) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range spans {
		if !seen[s.Lane] {
			seen[s.Lane] = true
			out = append(out, s.Lane)
		}
	}
	rank := func(l string) int {
		switch {
		case l == "stage-in":
			return 0
		case l == "H2D":
			return 1
		case strings.HasPrefix(l, "compute"):
			return 2
		case l == "D2H":
			return 3
		}
		return 4
	}
	sort.SliceStable(out, func(i, j int) bool {
		if rank(out[i]) != rank(out[j]) {
			return rank(out[i]) < rank(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// traceEvent is one event of the Chrome trace-event format.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteTrace writes a run's spans (a pipeline.Report's, timed with
// Config.Timing) as Chrome trace-event JSON, title the process's name:
// one thread per lane, one complete ("X") event per stage and chunk, in
// microseconds.
func WriteTrace(w io.Writer, spans []pipeline.Span, title string) error {
	ls := lanes(spans)
	tid := map[string]int{}
	events := []traceEvent{{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": title}}}
	for i, l := range ls {
		tid[l] = i + 1
		events = append(events, traceEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: i + 1, Args: map[string]any{"name": l}})
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, s := range spans {
		events = append(events, traceEvent{
			Name: fmt.Sprintf("%s chunk %d", s.Stage, s.Chunk), Cat: s.Stage.String(), Ph: "X",
			Ts: us(s.Start), Dur: max(us(s.End-s.Start), 0.001), Pid: 1, Tid: tid[s.Lane],
			Args: map[string]any{"chunk": s.Chunk},
		})
	}
	enc := json.NewEncoder(w)
	return enc.Encode(map[string]any{"traceEvents": events, "displayTimeUnit": "ms"})
}

var stageColors = map[pipeline.Stage]string{
	pipeline.StageIn:      "#9e9e9e",
	pipeline.StageH2D:     "#1f77b4",
	pipeline.StageCompute: "#2ca02c",
	pipeline.StageD2H:     "#ff7f0e",
	pipeline.StageOut:     "#7f7f7f",
}

// WriteTimelineSVG draws a run's spans as an SVG timeline titled title:
// one lane per stream, a rectangle per stage and chunk.
func WriteTimelineSVG(w io.Writer, spans []pipeline.Span, title string) error {
	ls := lanes(spans)
	var end time.Duration
	for _, s := range spans {
		end = max(end, s.End)
	}
	if end <= 0 {
		end = time.Millisecond
	}
	const left, top, laneH, width = 110, 50, 34, 1000
	height := top + laneH*len(ls) + 60
	x := func(d time.Duration) float64 { return left + float64(d)/float64(end)*width }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", left+width+20, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="14">%s</text>`+"\n", left, html.EscapeString(title))
	lane := map[string]int{}
	for i, l := range ls {
		lane[l] = i
		y := top + i*laneH
		fmt.Fprintf(&b, `<g class="lane" data-lane="%s"><text x="8" y="%d">%s</text><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/></g>`+"\n",
			html.EscapeString(l), y+laneH/2+4, html.EscapeString(l), left, y+laneH, left+width, y+laneH)
	}
	for _, s := range spans {
		y := top + lane[s.Lane]*laneH + 4
		w := max(x(s.End)-x(s.Start), 0.5)
		fmt.Fprintf(&b, `<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="white" stroke-width="0.3"><title>%s chunk %d: %.3f–%.3f ms</title></rect>`+"\n",
			x(s.Start), y, w, laneH-8, stageColors[s.Stage], s.Stage, s.Chunk, ms(s.Start), ms(s.End))
	}
	axisY := top + laneH*len(ls) + 20
	// Enough decimals that the ten ticks differ: a run of 0.3 ms read
	// "0.0 ms 0.0 ms 0.1 ms…" at one.
	decimals := 1
	for step := ms(end) / 10; decimals < 4 && step > 0 && step < math.Pow(10, float64(-decimals)); {
		decimals++
	}
	for i := 0; i <= 10; i++ {
		t := end * time.Duration(i) / 10
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.*f ms</text>`+"\n", x(t), axisY, decimals, ms(t))
	}
	lx := left
	for _, st := range []pipeline.Stage{pipeline.StageIn, pipeline.StageH2D, pipeline.StageCompute, pipeline.StageD2H, pipeline.StageOut} {
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, axisY+14, stageColors[st], lx+16, axisY+24, st)
		lx += 110
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
