package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/purecuda/overlap/pipeline/sim"
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
		"\nwrote " + out + "\n\nvalidation: 26 configurations, each the median of 1 rounds (a round times every configuration once, each after an untimed run of its own), measured on simulator [simulated]; predicted by the simulator from the profile above\nhost: the engine's issue loop per chunk, the median of the rounds': 2 slots 1 streams 1 input(s) ",
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
	assert.Contains(t, got.Notes["issue_loops"], "replaced by its one round's timing", "written again after the validation")
}

func TestProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--profile", "x.json"}, "overlap profile: --profile needs --sim: a GPU measures its own times\n"},
		{[]string{"--elems", "1K"}, "overlap profile: --elems 1024: want 64K to 4294967295\n"},
		{[]string{"--repeat", "0"}, "overlap profile: --repeat 0: want 1 to 100\n"},
		{[]string{"--out", "/nonexistent/dir/p.json"}, "overlap profile: --out /nonexistent/dir/p.json: no such directory /nonexistent/dir\n"},
		{[]string{"extra"}, "overlap profile: unexpected argument \"extra\"\n"},
	} {
		code, _, stderr := runCLI(append([]string{"profile"}, tc.args...)...)
		assert.Equal(t, exitUsage, code, tc.args)
		assert.Equal(t, tc.want, stderr, tc.args)
	}
	// --out naming --profile's file is refused: the trial's run wrote the
	// measured profile over it.
	dir := t.TempDir()
	truth := filepath.Join(dir, "p.json")
	require.NoError(t, sim.BuiltinProfile().Write(truth))
	before, err := os.ReadFile(truth)
	require.NoError(t, err)
	code, _, stderr := runCLI("profile", "--sim", "--profile", truth, "--out", truth)
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap profile: --out "+truth+" is the input "+truth+" (the same file): it would be overwritten\n", stderr)
	after, err := os.ReadFile(truth)
	require.NoError(t, err)
	assert.Equal(t, before, after)

	code, _, stderr = runCLI("run", "--profile", "p.json")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: --profile needs --sim: a GPU measures its own times\n", stderr)
	code, _, stderr = runCLI("run", "--sim", "--profile", "/nonexistent.json", "--elems", "1K")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: --profile /nonexistent.json: no such file\n", stderr)
}
