package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweepOnSim sweeps 2 chunk sizes × 2 slot counts × 2 host modes on
// the simulator: the rows come in the options' order, each verified and
// within its stage bound's reach, the progress lines name each, and the
// CSV and SVG hold every row; the zero value and bad options run nothing.
func TestSweepOnSim(t *testing.T) {
	b := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
	var msgs []string
	rows, err := Sweep(context.Background(), b, SweepOptions{Elems: 64 << 10, Iters: []int{10},
		Hosts: []pipeline.HostMode{pipeline.HostPinned, pipeline.HostStaged}, Chunks: []int{16 << 10, 32 << 10}, Slots: []int{2, 3},
		Progress: func(m string) { msgs = append(msgs, m) }})
	require.NoError(t, err)
	require.Len(t, rows, 8)
	i := 0
	for _, host := range []string{"pinned", "staged"} {
		for _, chunk := range []int{16 << 10, 32 << 10} {
			for _, slots := range []int{2, 3} {
				r := rows[i]
				i++
				assert.Equal(t, SweepRow{Iters: 10, Host: host, Chunk: chunk, Slots: slots}, SweepRow{Iters: r.Iters, Host: r.Host, Chunk: r.Chunk, Slots: r.Slots})
				assert.Positive(t, r.Ms)
				assert.Positive(t, r.GBps)
				assert.Positive(t, r.BoundMs)
				assert.Positive(t, r.Efficiency)
				assert.Zero(t, r.CppMs)
			}
		}
	}
	require.Len(t, msgs, 8)
	assert.Equal(t, "iters 10, pinned, chunk 16384, 2 slots…", msgs[0])
	assert.Equal(t, "iters 10, staged, chunk 32768, 3 slots…", msgs[7])

	var csv bytes.Buffer
	require.NoError(t, WriteSweepCSV(&csv, rows, true))
	lines := strings.Split(strings.TrimSpace(csv.String()), "\n")
	require.Len(t, lines, 9)
	assert.Equal(t, "iters,host,chunk_elems,slots,ms,gb_per_s,bound_ms,efficiency,cpp_ms,go_over_cpp,simulated", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "10,pinned,16384,2,"), lines[1])
	assert.True(t, strings.HasSuffix(lines[1], ",,,true"), "no C++ reference: its columns empty: %s", lines[1])

	svg := SweepSVG(rows, true)
	assert.Contains(t, svg, "seed, 10 iterations, host pinned: time against chunk size [simulated]")
	assert.Equal(t, 4, strings.Count(svg, "<circle "), "the first host mode's 4 points")
	assert.Contains(t, svg, ">2 slots</text>")
	assert.Contains(t, svg, ">3 slots</text>")
	assert.Contains(t, svg, ">16K</text>")
	assert.Equal(t, `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>`, SweepSVG(nil, false))

	rows, err = Sweep(context.Background(), b, SweepOptions{})
	assert.NoError(t, err)
	assert.Empty(t, rows, "the zero value runs nothing")
	_, err = Sweep(context.Background(), nil, SweepOptions{Iters: []int{1}})
	assert.EqualError(t, err, "bench: Sweep: nil backend")
	_, err = Sweep(context.Background(), b, SweepOptions{Elems: -1, Iters: []int{1}})
	assert.EqualError(t, err, "bench: Sweep: Elems -1: must not be negative")
	_, err = Sweep(context.Background(), b, SweepOptions{Elems: 1024, Iters: []int{1}, Slots: []int{1}})
	assert.EqualError(t, err, "bench: Sweep: Slots 1: want 2 to 1024")
}
