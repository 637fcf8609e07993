package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/pipeline/sim/calibrate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProfileSimEndToEnd guards issue 11: the command the lead runs on the
// GPU (overlap profile --validate --out FILE) runs end to end on the
// simulator: it prints the profile and the validation's 26 rows, writes
// the profile, and writes it again with the figures that the validation
// timed. calibrate's TestMeasureValidateSim checks the numbers.
func TestProfileSimEndToEnd(t *testing.T) {
	if raceEnabled {
		t.Skip("computes millions of elements on the CPU; the run without the race detector covers it")
	}
	dir := t.TempDir()
	truth, out := filepath.Join(dir, "truth.json"), filepath.Join(dir, "profile.json")
	require.NoError(t, sim.BuiltinProfile().Write(truth))
	code, stdout, stderr := runCLI("profile", "--sim", "--profile", truth, "--validate", "--out", out, "--elems", "64K", "--repeat", "1")
	require.Equal(t, exitOK, code, stderr)
	assert.Empty(t, stderr, "progress only on a terminal")
	t.Log(stdout)
	assert.True(t, strings.HasPrefix(stdout, "overlap profile: measuring simulator [simulated: measuring the simulator]\ncopies: H2D "), stdout)
	for _, line := range []string{
		"\nhost: the engine's issue loop per chunk (measured / from the calls above): 2 slots 1 streams 1 input(s) ",
		"\nstaging copies in a staged run (in / out, each; alone faster by): ",
		"\nwrote " + out + "\n\nvalidation: 26 configurations, each the median of 1 rounds (a round times every configuration once, each after an untimed run of its own), measured on simulator [simulated]; predicted by the simulator from the profile above\nhost: the engine's issue loop per chunk, the median of the profile's and the rounds': 2 slots 1 streams 1 input(s) ",
		"\nwrote " + out + " again, with those loops and staging rates\n\n| KERNEL | HOST       |  CHUNK | SLOTS | STREAMS |    MEASURED |   PREDICTED |   ERROR |\n",
	} {
		assert.Contains(t, stdout, line)
	}
	rows := regexp.MustCompile(`(?m)^\| (seed|saxpy) +\| (pinned|registered|staged) +\| +[0-9]+K? \| +[0-9] \| +[0-9] \| +[0-9.]+ ms \| +[0-9.]+ ms \| +[-+][0-9.]+% \|$`).FindAllString(stdout, -1)
	assert.Len(t, rows, 26, stdout)
	assert.Regexp(t, `\n\nmedian \|error\| [0-9.]+%, worst [0-9.]+% \((seed |saxpy) .* chunks [0-9] slots [0-9] streams\); every element of every configuration verified \[simulated\]\ntook [0-9.]+ s of wall time\n$`, stdout)
	got, err := sim.ReadProfile(out)
	require.NoError(t, err)
	assert.Contains(t, got.Source, "measured by `overlap profile` on simulator of ")
	assert.Contains(t, got.Notes["issue_loops"], "the median of that and 1 rounds' timings", "written again after the validation")
}

// TestPrintValidation: the validation's table and summary, as the
// command prints them.
func TestPrintValidation(t *testing.T) {
	worst := calibrate.Row{Config: calibrate.Config{Kernel: "saxpy", Host: pipeline.HostStaged, Chunk: 256 << 10, Slots: 4, Streams: 2, N: 1 << 20},
		Measured: 1500 * time.Microsecond, Predicted: 1350 * time.Microsecond, Err: -0.1}
	v := &calibrate.Validation{Rows: []calibrate.Row{
		{Config: calibrate.Config{Kernel: "seed", Host: pipeline.HostPinned, Chunk: 512, Slots: 2, Streams: 1, N: 1 << 20},
			Measured: 26259 * time.Microsecond, Predicted: 26270 * time.Microsecond, Err: 0.0004},
		worst,
	}, Median: 0.0502, Worst: worst}
	var b bytes.Buffer
	printValidation(&b, v, false)
	assert.Equal(t, `
| KERNEL | HOST       |  CHUNK | SLOTS | STREAMS |    MEASURED |   PREDICTED |   ERROR |
|-------|------------|--------|-------|---------|-------------|-------------|---------|
| seed   | pinned     |    512 |     2 |       1 |   26.259 ms |   26.270 ms |   +0.0% |
| saxpy  | staged     |   256K |     4 |       2 |    1.500 ms |    1.350 ms |  -10.0% |

median |error| 5.0%, worst 10.0% (saxpy staged      256K chunks 4 slots 2 streams); every element of every configuration verified
`, b.String())
	b.Reset()
	printValidation(&b, v, true)
	assert.True(t, strings.HasSuffix(b.String(), "verified [simulated]\n"), b.String())
}

func TestProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "x.json"}, "overlap profile: --profile needs --sim: a GPU measures its own times\n"},
		{[]string{"--elems", "1K"}, "overlap profile: --elems 1024: want 64K to 4294967295\n"},
		{[]string{"--repeat", "0"}, "overlap profile: --repeat 0: want 1 to 100\n"},
		{[]string{"--out", "/nonexistent/dir/p.json"}, "overlap profile: --out: open /nonexistent/dir/p.json: no such file or directory\n"},
		{[]string{"extra"}, "overlap profile: unexpected argument \"extra\"\n"},
	} {
		code, _, stderr := runCLI(append([]string{"profile"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Equal(t, tc.want, stderr, tc.args)
	}
	code, _, stderr := runCLI("run", "--profile", "p.json")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: --profile needs --sim: a GPU measures its own times\n", stderr)
	code, _, stderr = runCLI("run", "--sim", "--profile", "/nonexistent.json", "--elems", "1K")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: --profile /nonexistent.json: no such file\n", stderr)
}
