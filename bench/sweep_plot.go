package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The sweep's files: its rows as CSV and a plot of them as SVG.

// WriteSweepCSV writes rows to w as CSV, a header line first, each row
// marked simulated or not. A row without the C++ reference leaves its
// two columns empty (0.0000 read as a measured time).
func WriteSweepCSV(w io.Writer, rows []SweepRow, simulated bool) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"iters", "host", "chunk_elems", "slots", "ms", "gb_per_s", "bound_ms", "efficiency", "cpp_ms", "go_over_cpp", "simulated"})
	for _, r := range rows {
		cpp, ratio := "", ""
		if r.CppMs > 0 {
			cpp, ratio = fmt.Sprintf("%.4f", r.CppMs), fmt.Sprintf("%.4f", r.Ratio)
		}
		cw.Write([]string{strconv.Itoa(r.Iters), r.Host, strconv.Itoa(r.Chunk), strconv.Itoa(r.Slots),
			fmt.Sprintf("%.4f", r.Ms), fmt.Sprintf("%.3f", r.GBps), fmt.Sprintf("%.4f", r.BoundMs),
			fmt.Sprintf("%.4f", r.Efficiency), cpp, ratio, strconv.FormatBool(simulated)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return &Error{Op: "WriteSweepCSV", Err: err}
	}
	return nil
}

// SweepSVG plots time against chunk size (log scale), one line per slot
// count, for the first iteration count and host mode, with the stage bound
// dashed, marked [simulated] when simulated; a plot of no rows is an
// empty picture.
func SweepSVG(rows []SweepRow, simulated bool) string {
	if len(rows) == 0 {
		return `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>`
	}
	first := rows[0]
	bySlots := map[int][]SweepRow{}
	var maxMs, minC, maxC float64 = 0, math.Inf(1), 0
	for _, r := range rows {
		if r.Iters != first.Iters || r.Host != first.Host {
			continue
		}
		bySlots[r.Slots] = append(bySlots[r.Slots], r)
		maxMs = max(maxMs, r.Ms, r.BoundMs)
		minC, maxC = math.Min(minC, float64(r.Chunk)), math.Max(maxC, float64(r.Chunk))
	}
	const l, t, wd, ht = 70, 40, 600, 300
	x := func(c int) float64 {
		if maxC == minC {
			return l + wd/2
		}
		return l + (math.Log2(float64(c))-math.Log2(minC))/(math.Log2(maxC)-math.Log2(minC))*wd
	}
	y := func(v float64) float64 { return t + ht - v/(maxMs*1.1)*ht }
	var b strings.Builder
	title := fmt.Sprintf("seed, %d iterations, host %s: time against chunk size", first.Iters, first.Host)
	if simulated {
		title += " [simulated]"
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", l+wd+150, t+ht+50)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="20" font-size="14">%s</text>`+"\n", l, title)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", l, t+ht, l+wd, t+ht, l, t, l, t+ht)
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b"}
	var slots []int
	for s := range bySlots {
		slots = append(slots, s)
	}
	sort.Ints(slots)
	for i, s := range slots {
		rs := bySlots[s]
		sort.Slice(rs, func(a, c int) bool { return rs[a].Chunk < rs[c].Chunk })
		var pts, bound []string
		for _, r := range rs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.Chunk), y(r.Ms)))
			bound = append(bound, fmt.Sprintf("%.1f,%.1f", x(r.Chunk), y(r.BoundMs)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>chunk %d, %d slots: %.2f ms</title></circle>`+"\n", x(r.Chunk), y(r.Ms), colors[i%len(colors)], r.Chunk, s, r.Ms)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colors[i%len(colors)])
		if i == 0 {
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="black" stroke-dasharray="5,4"/>`+"\n", strings.Join(bound, " "))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%d slots</text>`+"\n", l+wd+15, t+20+18*i, colors[i%len(colors)], s)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">- - stage bound</text>`+"\n", l+wd+15, t+20+18*len(slots))
	for _, r := range bySlots[slots[0]] {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(r.Chunk), t+ht+18, Elems(r.Chunk))
	}
	for i := 0; i <= 4; i++ {
		v := maxMs * 1.1 * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.1f ms</text>`+"\n", l-6, y(v)+4, v)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
