package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRunBadFlags(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.ptx")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--elems", "0"}, `overlap run: --elems "0": must be positive`},
		{[]string{"--elems", "-5"}, `overlap run: --elems "-5": must be positive`},
		{[]string{"--elems", "lots"}, `overlap run: --elems "lots" is not a size (use a number, optionally with K, M or G)`},
		{[]string{"--elems", "5G"}, "overlap run: --elems 5368709120: at most 4294967295"},
		{[]string{"--chunk", "0"}, `overlap run: --chunk "0": must be positive`},
		{[]string{"--elems", "1M", "--chunk", "2M"}, "overlap run: --chunk 2097152 is larger than --elems 1048576"},
		{[]string{"--slots", "1"}, "overlap run: --slots 1: at least 2 are needed to overlap anything"},
		{[]string{"--slots", "2", "--compute-streams", "3"}, "overlap run: --slots 2: fewer than --compute-streams 3"},
		{[]string{"--compute-streams", "0"}, "overlap run: --compute-streams 0: want 1 to 64"},
		{[]string{"--iters", "-1"}, "overlap run: --iters -1: must not be negative"},
		{[]string{"--repeat", "0"}, "overlap run: --repeat 0: want 1 to 1000"},
		{[]string{"--kernel", "fft"}, `overlap run: --kernel "fft": unknown (have axpb, lerp, saxpy, seed)`},
		{[]string{"--kernel", "empty"}, "overlap run: --kernel empty has no inputs or outputs to pipeline; pick axpb, lerp, saxpy or seed"},
		{[]string{"--host", "magic"}, `overlap run: --host "magic": want pinned, staged, registered or auto`},
		{[]string{"--device", "-1"}, "overlap run: --device -1: must not be negative"},
		{[]string{"--devices", "0,0"}, `overlap run: --devices "0,0": GPU 0 is listed twice`},
		{[]string{"--devices", "one"}, `overlap run: --devices "one" is not a GPU index (want all, or indexes such as 0,1)`},
		{[]string{"--devices", "0,-1"}, `overlap run: --devices "0,-1": "-1" is not a GPU index (want all, or indexes such as 0,1)`},
		{[]string{"--device", "1", "--devices", "0"}, "overlap run: --device and --devices both choose GPUs; give one"},
		{[]string{"--ptx", missing}, "overlap run: --ptx needs --entry NAME"},
		{[]string{"--ptx", missing, "--entry", "k"}, "overlap run: --ptx " + missing + ": no such file"},
		{[]string{"--entry", "k"}, "overlap run: --entry needs --ptx FILE or --cu FILE"},
		{[]string{"--cu", missing}, "overlap run: --cu needs --entry NAME"},
		{[]string{"--cu", missing, "--entry", "k"}, "overlap run: --cu " + missing + ": no such file"},
		{[]string{"--cu", ".", "--entry", "k"}, "overlap run: --cu .: is a directory"},
		{[]string{"--cu", missing, "--ptx", missing, "--entry", "k"}, "overlap run: --ptx and --cu both name a kernel; give one"},
		{[]string{"--sim", "--cu", missing, "--entry", "k"}, "overlap run: --cu cannot run on --sim: a CUDA C file needs NVRTC and a GPU, and the simulator has no CPU version of your kernel"},
		{[]string{"--cu", missing, "--entry", "k", "--kernel", "lerp"}, "overlap run: --kernel and --cu both name a kernel; give one"},
		{[]string{"--cu", "../../nvrtc/testdata/scale.cu", "--entry", "scale", "--iters", "5"}, "overlap run: --iters is the seed kernel's; your --cu kernel takes no scalars"},
		{[]string{"--bogus"}, "overlap run: --bogus: no such flag (overlap run -h lists its flags)"},
		{[]string{"extra"}, `overlap run: unexpected argument "extra"`},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"run"}, tc.args...)...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, out)
			assert.Equal(t, tc.want+"\n", errOut, "one line, exactly")
		})
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "64K": 64 << 10, "128M": 128 << 20, "1g": 1 << 30, "1000": 1000} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "K", "1.5M", "-1", "0", "99999999999999G", "1T"} {
		_, err := parseSize(bad)
		assert.Error(t, err, bad)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1", "64K", "128M", "1G", "-1", "", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err == nil && (n <= 0 || n > 1<<40) {
			t.Fatalf("parseSize(%q) = %d without error", s, n)
		}
	})
}

// TestRunSimEndToEnd runs the whole command on the simulator and checks the
// table, the JSON, the trace and the SVG.
func TestRunSimEndToEnd(t *testing.T) {
	dir := t.TempDir()
	trace, svg := filepath.Join(dir, "t.json"), filepath.Join(dir, "t.svg")
	code, out, errOut := runCLI("run", "--sim", "--elems", "40000", "--chunk", "5000", "--slots", "3",
		"--compute-streams", "2", "--iters", "3", "--repeat", "2", "--host", "staged", "--trace", trace, "--svg", svg)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "[simulated")
	assert.Contains(t, out, "synchronous")
	assert.Contains(t, out, "pipeline (staged)")
	assert.Contains(t, out, "every element of all 3 runs matched the CPU reference")

	// Trace: Chrome trace-event JSON with one slice per stage and chunk.
	var tr struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Ts   *float64       `json:"ts"`
			Dur  *float64       `json:"dur"`
			Tid  *int           `json:"tid"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	b, err := os.ReadFile(trace)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &tr))
	slices := map[string]int{}
	threads := 0
	for _, e := range tr.TraceEvents {
		require.NotNil(t, e.Ts, "every event has ts")
		require.NotNil(t, e.Tid, "every event has tid")
		switch e.Ph {
		case "X":
			require.NotNil(t, e.Dur)
			assert.GreaterOrEqual(t, *e.Dur, 0.0)
			slices[strings.Fields(e.Name)[0]]++
		case "M":
			if e.Name == "thread_name" {
				threads++
			}
		}
	}
	for _, st := range []string{"stage-in", "H2D", "compute", "D2H", "stage-out"} {
		assert.Equal(t, 8, slices[st], "one %s slice per chunk", st)
	}
	assert.Equal(t, 6, threads, "stage-in, H2D, compute 0, compute 1, D2H, stage-out")
	assert.Contains(t, string(b), "[simulated]")

	// SVG: well-formed XML with one lane per stream.
	f, err := os.Open(svg)
	require.NoError(t, err)
	defer f.Close()
	dec := xml.NewDecoder(f)
	lanes := map[string]bool{}
	rects := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == "data-lane" {
					lanes[a.Value] = true
				}
			}
			if se.Name.Local == "rect" {
				rects++
			}
		}
	}
	assert.Equal(t, map[string]bool{"stage-in": true, "H2D": true, "compute 0": true, "compute 1": true, "D2H": true, "stage-out": true}, lanes)
	assert.GreaterOrEqual(t, rects, 40)

	code, out, errOut = runCLI("run", "--sim", "--elems", "3000", "--chunk", "1000", "--json", "--kernel", "lerp", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	var res result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.Simulated)
	assert.Equal(t, "lerp", res.Kernel)
	assert.Len(t, res.Rows, 2)

	code, out, errOut = runCLI("run", "--sim", "--elems", "3000", "--iters", "1", "--quiet", "--chunk", "auto")
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, out)
}

// TestRunWithoutDriver: asked for a GPU (--gpu), a machine without a
// driver says so in one line and exits 1; TestNoDriverRunsTheSimulator
// covers a run that asks for no machine.
func TestRunWithoutDriver(t *testing.T) {
	if driverPresent() {
		t.Skip("a driver is present; this test covers machines without one")
	}
	code, out, errOut := runCLI("run", "--gpu", "--elems", "1M")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errOut, "overlap: no NVIDIA driver found (tried "), errOut)
	assert.True(t, strings.HasSuffix(errOut, "; use --sim to run on the CPU simulator\n"), errOut)
	assert.Equal(t, 1, strings.Count(errOut, "\n"))
}

func TestBenchBadFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--chunks", "1M,zero"}, `overlap bench: --chunks: "zero" is not a size (use a number, optionally with K, M or G)`},
		{[]string{"--elems", "1M", "--chunks", "2M"}, "overlap bench: --chunks 2097152 is larger than --elems 1048576"},
		{[]string{"--slots", "1"}, "overlap bench: --slots 1: want 2 to 1024"},
		{[]string{"--iters", "-3"}, `overlap bench: --iters: "-3" is not a count`},
		{[]string{"--host", "auto"}, `overlap bench: --host "auto": want pinned, staged or registered`},
		{[]string{"--repeat", "0"}, "overlap bench: --repeat 0: want 1 to 1000"},
		{[]string{"--sim", "--reference"}, "overlap bench: --reference needs a GPU, not --sim"},
		{[]string{"--elems", "1M,2M"}, "overlap bench: --elems takes one size, or a list with overlap bench scaling"},
		{[]string{"scaling", "--devices", "1", "--device", "0"}, "overlap bench scaling: --device is a flag of overlap bench, not of overlap bench scaling (overlap bench scaling -h lists its flags)"},
		{[]string{"scaling", "--sim"}, "overlap bench scaling: --sim --devices needs a list, such as 0,1 for two simulated H200s"},
		{[]string{"scaling", "--sim", "--devices", "all"}, "overlap bench scaling: --sim --devices needs a list, such as 0,1 for two simulated H200s"},
		{[]string{"scaling", "--sim", "--devices", "0,1", "--chunks", "1M,2M"}, "overlap bench scaling: --chunks: give one value: the table scales one configuration"},
		{[]string{"scaling", "--sim", "--devices", "0,1", "--csv", "x.csv"}, "overlap bench scaling: --csv is a flag of overlap bench, not of overlap bench scaling (overlap bench scaling -h lists its flags)"},
		{[]string{"scaling", "--sim", "--devices", "16"}, "overlap bench scaling: --devices 16: the simulator has at most 16 devices, 0 to 15 (--devices 0,1 simulates two)"},
	}
	for _, tc := range cases {
		code, out, errOut := runCLI(append([]string{"bench"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Empty(t, out)
		assert.Equal(t, tc.want+"\n", errOut)
	}
}

func TestBenchSim(t *testing.T) {
	dir := t.TempDir()
	csvPath, svgPath := filepath.Join(dir, "b.csv"), filepath.Join(dir, "b.svg")
	args := []string{"bench", "--sim", "--elems", "8000", "--chunks", "1000,4000", "--slots", "2,3",
		"--iters", "1", "--host", "pinned,staged", "--repeat", "1"}
	code, out, errOut := runCLI(append(args, "--csv", csvPath, "--svg", svgPath)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "[simulated]")
	assert.Contains(t, out, "best: chunk ")
	b, err := os.ReadFile(csvPath)
	require.NoError(t, err)
	assert.Equal(t, 9, strings.Count(string(b), "\n"), "header and 8 rows")
	var js struct {
		Simulated bool             `json:"simulated"`
		Results   []bench.SweepRow `json:"results"`
	}
	// --json is a switch, as for overlap run: JSON on stdout, no table.
	code, out, errOut = runCLI(append(args, "--json")...)
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	assert.True(t, js.Simulated)
	assert.Len(t, js.Results, 8)
	f, err := os.Open(svgPath)
	require.NoError(t, err)
	defer f.Close()
	dec := xml.NewDecoder(f)
	lines := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			lines++
		}
	}
	assert.Equal(t, 3, lines, "one line per slot count and the bound")
}

// FuzzRunFlags feeds arbitrary flag values to overlap run's parser: it must
// return options or an error, never panic.
func FuzzRunFlags(f *testing.F) {
	f.Add("--elems", "128M", "--chunk", "auto")
	f.Add("--slots", "1", "--compute-streams", "0")
	f.Add("--host", "staged", "--kernel", "lerp")
	f.Add("--ptx", "x.ptx", "--entry", "")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		o, err := parseRunFlags([]string{a, b, c, d}, io.Discard)
		if err == nil {
			if o.elems <= 0 || (!o.chunkAuto && (o.chunk <= 0 || o.chunk > o.elems)) || o.computeStreams < 1 || o.repeat < 1 {
				t.Fatalf("accepted bad options: %+v", o)
			}
		}
	})
}

func TestTuneSim(t *testing.T) {
	code, out, errOut := runCLI("tune", "--sim", "--elems", "300K", "--iters", "1", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "per-chunk stage costs")
	assert.Contains(t, out, "<- chosen")
	assert.Regexp(t, `\nmeasured [0-9.]+ ms \(best of 1; every element of the first run verified\), predicted [0-9.]+ ms \([0-9.]+% (below|above) the measurement\) \[simulated\]\n`, out)
	// tune accepts only the flags it uses (issue 10: it took and ignored
	// run's output and chunk flags).
	for _, flag := range []string{"--slots=3", "--chunk=1M", "--compute-streams=2", "--json", "--trace=t.json", "--svg=t.svg", "--quiet", "--no-baseline"} {
		code, out, errOut = runCLI("tune", flag)
		assert.Equal(t, exitUsage, code, flag)
		assert.Empty(t, out)
		name, _, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
		assert.Equal(t, "overlap tune: --"+name+": no such flag (overlap tune -h lists its flags)\n", errOut)
	}
}

func TestPTXDescribe(t *testing.T) {
	code, out, errOut := runCLI("ptx", "describe", "testdata/double.ptx")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, `testdata/double.ptx: PTX ISA 7.0, target [sm_75], 64-bit addresses
entry double_it (line 6), 3 parameter(s):
  out                      .u64   size 8    align 8   offset 0
  in                       .u64   size 8    align 8   offset 8
  n                        .u32   size 4    align 4   offset 16
`, out)
	code, out, errOut = runCLI("ptx", "describe", "--json", "../../ptx/kernels/seed.ptx")
	require.Equal(t, exitOK, code, errOut)
	var js struct {
		Version string `json:"version"`
		Entries []struct {
			Name   string `json:"name"`
			Params []struct {
				Offset int `json:"offset"`
			} `json:"params"`
		} `json:"entries"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	assert.Equal(t, "7.0", js.Version)
	require.Len(t, js.Entries, 1)
	assert.Equal(t, "seed", js.Entries[0].Name)
	assert.Len(t, js.Entries[0].Params, 4)
	assert.Equal(t, 20, js.Entries[0].Params[3].Offset)

	bad := filepath.Join(t.TempDir(), "bad.ptx")
	require.NoError(t, os.WriteFile(bad, []byte("\x00\x01garbage"), 0o644))
	code, _, errOut = runCLI("ptx", "describe", bad)
	assert.Equal(t, exitFail, code)
	assert.Equal(t, "overlap ptx: "+bad+": ptx: line 1: NUL byte at offset 0: binary data, not PTX text\n", errOut)
	code, _, errOut = runCLI("ptx", "describe", "nope.ptx")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap ptx: nope.ptx: no such file\n", errOut)
	code, _, errOut = runCLI("ptx", "explain", "x")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap ptx: usage: overlap ptx describe [--json] FILE\n", errOut)
	code, _, errOut = runCLI("ptx", "describe", "a.ptx", "b.ptx")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap ptx: unexpected argument \"b.ptx\": describe reads one FILE\n", errOut)
}

// TestRunSimDefaultJob guards issue 11: --sim without --elems runs a
// smaller job and says so on its first line, and names its profile.
func TestRunSimDefaultJob(t *testing.T) {
	o, err := parseRunFlags([]string{"--sim"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, simDefaultElems, o.elems)
	assert.True(t, o.simSmaller)
	o, err = parseRunFlags([]string{"--sim", "--elems", "128M"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 128<<20, o.elems)
	assert.False(t, o.simSmaller)
	code, out, errOut := runCLI("run", "--sim", "--elems", "64K", "--chunk", "16K", "--iters", "1", "--repeat", "1", "--no-baseline")
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, strings.HasPrefix(out, "overlap run: seed (1 iterations) on simulator, 65536 float32 elements"), out)
	assert.Contains(t, out, "[simulated on the CPU: times predicted for NVIDIA H200 (built-in profile)]")
}

// TestRunSimDevices guards issue 12: overlap run --sim --devices 0,1,2
// runs one job over three simulated H200s sharing a host link, verifies
// every element, and reports each device's chunks, which add up to the
// job's, with the group's bound (the copies in both directions at once).
func TestRunSimDevices(t *testing.T) {
	code, out, errOut := runCLI("run", "--sim", "--devices", "0,1,2", "--elems", "12M", "--chunk", "1M", "--iters", "2", "--no-baseline", "--repeat", "2", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, "3 devices (simulator ×3)", res.Backend)
	require.Len(t, res.Devices, 3)
	total := 0
	for i, d := range res.Devices {
		assert.Equal(t, i, d.Device)
		assert.Positive(t, d.Chunks, "device %d took chunks", i)
		assert.Positive(t, d.BusyMs)
		total += d.Chunks
	}
	assert.Equal(t, 12, total, "12 chunks of 1M, each run once")
	assert.Positive(t, res.Stages.CopiesMs, "a group measures the copies in both directions at once")
	assert.Contains(t, res.Verified, "every element of all 2 runs matched")

	code, out, errOut = runCLI("run", "--sim", "--devices", "0,1", "--elems", "4M", "--iters", "2", "--no-baseline", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?m)^DEVICE\s+NAME\s+CHUNKS\s+BUSY\s+SHARE\s+BOUND SHARE$`, out)
	assert.Regexp(t, `(?m)^1\s+simulator\s+\d+\s+[0-9.]+ ms\s+[0-9.]+%\s+[0-9.]+%$`, out)
}

// TestBenchSimDevices guards issue 12: overlap bench --devices prints a
// scaling table from 1 to k devices for each size and host mode, with the
// group's bound and the speedup over one device.
func TestBenchSimDevices(t *testing.T) {
	code, out, errOut := runCLI("bench", "--sim", "--devices", "0,1", "--elems", "4M", "--iters", "2", "--repeat", "3", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res struct {
		Devices []int              `json:"devices"`
		Results []bench.ScalingRow `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, []int{0, 1}, res.Devices)
	require.Len(t, res.Results, 6, "pinned, registered and auto on 1 and 2 devices")
	for _, r := range res.Results {
		assert.Equal(t, 4<<20, r.Elems)
		assert.Len(t, r.Chunks, r.Devices)
		assert.Positive(t, r.BoundMs)
		assert.LessOrEqual(t, r.Efficiency, 1.01, "%+v", r)
		if r.Devices == 2 {
			assert.Greater(t, r.Speedup, 1.2, "two devices beat one: %+v", r)
		}
	}
	assert.Equal(t, "auto→registered", res.Results[4].Host, "plain Go slices are registered from the second run")
}

// TestBenchSimDevicesDefaultSize guards issue 12: on the simulator the
// scaling table defaults to a job that a laptop verifies quickly, not the
// GPU's 128M; --elems still chooses.
func TestBenchSimDevicesDefaultSize(t *testing.T) {
	o, err := parseBenchFlags([]string{"--sim", "--devices", "0,1"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{simDefaultElems}, o.sizes)
	o, err = parseBenchFlags([]string{"--sim", "--devices", "0,1", "--elems", "8M,16M"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{8 << 20, 16 << 20}, o.sizes)
	o, err = parseBenchFlags([]string{"--devices", "all"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{128 << 20}, o.sizes, "on a GPU, 128M")
}

// TestBenchSweepDefaults: the sweep on --sim runs 4M elements unless
// --elems says otherwise, and the default chunk list keeps the sizes that
// fit the job (the job itself when none does); a chunk the user lists
// that is larger than the job is still refused. Before, `bench --sim`
// ran 128M elements for over an hour, and `bench --sim --elems 1M` was
// refused for a chunk the user never gave.
func TestBenchSweepDefaults(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		elems  int
		chunks []int
	}{
		{nil, 128 << 20, []int{1 << 20, 4 << 20, 16 << 20, 32 << 20}},
		{[]string{"--sim"}, 4 << 20, []int{1 << 20, 4 << 20}},
		{[]string{"--sim", "--elems", "1M"}, 1 << 20, []int{1 << 20}},
		{[]string{"--elems", "512K"}, 512 << 10, []int{512 << 10}},
		{[]string{"--sim", "--elems", "8M", "--chunks", "2M"}, 8 << 20, []int{2 << 20}},
	} {
		o, err := parseBenchFlags(tc.args, io.Discard)
		require.NoError(t, err, "%v", tc.args)
		assert.Equal(t, tc.elems, o.elems, "%v", tc.args)
		assert.Equal(t, tc.chunks, o.chunks, "%v", tc.args)
	}
	_, err := parseBenchFlags([]string{"--sim", "--elems", "1M", "--chunks", "4M"}, io.Discard)
	assert.ErrorContains(t, err, "--chunks 4194304 is larger than --elems 1048576")
	_, err = parseBenchFlags([]string{"--sim", "--chunks", "16M"}, io.Discard)
	assert.ErrorContains(t, err, "--chunks 16777216 is larger than the simulator's default --elems 4194304: give a larger --elems")
	var b strings.Builder
	o, err := parseBenchFlags([]string{"--sim"}, io.Discard)
	require.NoError(t, err)
	printBench(&b, nil, "simulator", o)
	assert.Contains(t, b.String(), "simulated: 4M elements, not the GPU default of 128M")
	o, err = parseBenchFlags([]string{"--sim", "--elems", "4M"}, io.Discard)
	require.NoError(t, err)
	b.Reset()
	printBench(&b, nil, "simulator", o)
	assert.NotContains(t, b.String(), "not the GPU default")
}

// TestTuneSimDefaultSize: overlap tune on --sim tunes 4M elements unless
// --elems says otherwise, as overlap run does (128M took minutes).
func TestTuneSimDefaultSize(t *testing.T) {
	o, err := parseTuneFlags([]string{"--sim"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, simDefaultElems, o.elems)
	assert.True(t, o.simSmaller)
	o, err = parseTuneFlags([]string{"--sim", "--elems", "128M"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 128<<20, o.elems)
	assert.False(t, o.simSmaller)
	o, err = parseTuneFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 128<<20, o.elems, "on a GPU, 128M")
}

// TestRunWarmFlag: --warm defaults to defaultWarm, takes a duration or 0,
// and the printed table says how long the warm-up was only when there was
// one.
func TestRunWarmFlag(t *testing.T) {
	o, err := parseRunFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, defaultWarm, o.warm)
	o, err = parseRunFlags([]string{"--warm", "200ms"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 200*time.Millisecond, o.warm)
	o, err = parseRunFlags([]string{"--warm", "0"}, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, o.warm)
	_, err = parseRunFlags([]string{"--sim", "--warm", "0"}, io.Discard)
	assert.NoError(t, err, "--warm 0 asks the simulator for nothing")
	_, err = parseRunFlags([]string{"--sim", "--warm", "1s"}, io.Discard)
	assert.ErrorContains(t, err, "--warm needs a GPU")
}

// TestCheckHostMemory: a job whose arrays need more host memory than the
// host has available is refused with a usage error that says how much it
// needs and has; one that fits goes ahead. Before, `overlap run --sim
// --elems 3G` on a 23 GiB machine grew to 16 GB and beyond, and under a
// memory limit died with Go's fatal error and a stack trace.
func TestCheckHostMemory(t *testing.T) {
	avail := int64(12 << 30)
	holdAvailableMemory(t, avail)
	assert.NoError(t, checkHostMemory(1<<20, "a small job"))
	assert.NoError(t, checkHostMemory(avail, "a job that just fits"))
	err := checkHostMemory(2*avail, "--elems 5: the job's 2 input and output arrays")
	var ue usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), "--elems 5: the job's 2 input and output arrays need "+humanBytes(2*avail)+" of host memory, more than the ")
	assert.Contains(t, err.Error(), "available; use a smaller --elems")
}

// holdAvailableMemory makes availableMemory say avail until t ends, so
// that a test's own figure and the check's agree however the host's moves
// (a fresh clone's make test failed TestSimBaselineChecked when other
// test processes freed memory between its read and the check's).
func holdAvailableMemory(t *testing.T, avail int64) {
	was := availableMemory
	availableMemory = func() (int64, bool) { return avail, true }
	t.Cleanup(func() { availableMemory = was })
}

// TestSimBaselineChecked: a simulated run with its synchronous baseline
// whose arrays fit but not twice over (the baseline's simulated device
// arrays are host memory too) is refused as its flags are checked, before
// anything is built. Before, `overlap run --sim --elems 1536M --iters 0`
// on an 11 GiB machine built 12 GiB of arrays over 30 s and only then gave
// its usage error. Without the baseline the same size is not refused;
// a job whose own arrays do not fit is refused without the hint to skip
// the baseline, which would not help; saxpy counts its three arrays.
func TestSimBaselineChecked(t *testing.T) {
	avail := int64(12 << 30)
	holdAvailableMemory(t, avail)
	run := func(args ...string) error {
		_, err := parseRunFlags(append([]string{"--sim", "--repeat", "1"}, args...), io.Discard)
		return err
	}
	seed := avail / 8 * 3 / 4 // seed's two arrays: three quarters of what is available
	err := run("--elems", fmt.Sprint(seed), "--iters", "0")
	var ue usageError
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), fmt.Sprintf("--elems %d: the job's 2 input and output arrays and as many simulated device arrays for the synchronous baseline (--no-baseline skips those) need ", seed))
	assert.NoError(t, run("--elems", fmt.Sprint(seed), "--iters", "0", "--no-baseline"), "without the baseline")

	saxpy := avail / 12 * 3 / 4 // three arrays: fits once, not twice
	err = run("--kernel", "saxpy", "--elems", fmt.Sprint(saxpy))
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), fmt.Sprintf("--elems %d: the job's 3 input and output arrays and as many simulated", saxpy))
	assert.NoError(t, run("--kernel", "saxpy", "--elems", fmt.Sprint(saxpy), "--no-baseline"))

	big := avail/8 + 1 // seed's arrays alone do not fit, by 8 bytes
	err = run("--elems", fmt.Sprint(big), "--iters", "0", "--no-baseline")
	require.ErrorAs(t, err, &ue)
	assert.Contains(t, err.Error(), fmt.Sprintf("--elems %d: the job's 2 input and output arrays need ", big))
	err = run("--elems", fmt.Sprint(big), "--iters", "0")
	require.ErrorAs(t, err, &ue)
	assert.NotContains(t, err.Error(), "--no-baseline", "skipping the baseline would not make it fit")
	assert.NoError(t, run("--elems", fmt.Sprint(avail/8), "--iters", "0", "--no-baseline"), "arrays that just fit")
	assert.NoError(t, run("--elems", "1M"), "a job that fits twice over")
}
