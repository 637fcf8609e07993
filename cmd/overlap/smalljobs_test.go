package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSmallJobsFlags guards issue 14: --small-jobs's defaults are the
// issue's sweep with yield on a GPU (nothing waits on the simulator),
// --wait all is the three modes, and flags of the sweep that do not apply
// are refused.
func TestSmallJobsFlags(t *testing.T) {
	o, err := parseBenchFlags([]string{"--small-jobs"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []int{4 << 10, 64 << 10, 1 << 20}, o.small.Sizes)
	assert.Equal(t, []int{1, 4, 16}, o.small.Workers)
	assert.Equal(t, 100, o.small.Iters)
	assert.Equal(t, []driver.Wait{driver.WaitYield}, o.small.Waits)
	assert.Equal(t, 0.5, o.small.Seconds)
	assert.Equal(t, 0, o.small.Jobs)
	assert.Equal(t, 3, o.small.Rounds, "a GPU's cells drift: three rounds, each cell's median")
	assert.False(t, o.small.DirectCalls, "the safe call path unless asked")
	o, err = parseBenchFlags([]string{"--small-jobs", "--direct-calls"}, nil)
	if driver.DirectCallsAvailable() {
		require.NoError(t, err)
		assert.True(t, o.small.DirectCalls)
	} else {
		assert.EqualError(t, err, "--direct-calls needs a linux/amd64 binary built with -tags overlap_directcalls (go build -tags overlap_directcalls ./cmd/overlap)")
	}

	o, err = parseBenchFlags([]string{"--small-jobs", "--wait", "all", "--elems", "1K,2K", "--workers", "2", "--iters", "7", "--seconds", "0.25"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []driver.Wait{driver.WaitSpin, driver.WaitYield, driver.WaitBlock}, o.small.Waits)
	assert.Equal(t, []int{1 << 10, 2 << 10}, o.small.Sizes)
	assert.Equal(t, []int{2}, o.small.Workers)
	assert.Equal(t, 7, o.small.Iters)
	assert.Equal(t, 0.25, o.small.Seconds)

	o, err = parseBenchFlags([]string{"--small-jobs", "--wait", "yield, spin"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []driver.Wait{driver.WaitYield, driver.WaitSpin}, o.small.Waits, "a list, in its order")

	o, err = parseBenchFlags([]string{"--small-jobs", "--sim"}, nil)
	require.NoError(t, err)
	assert.Equal(t, bench.SmallJobsSimJobs, o.small.Jobs, "the simulator runs a few jobs, not seconds")
	assert.Equal(t, []driver.Wait{driver.WaitDefault}, o.small.Waits, "nothing waits on a driver")
	assert.Equal(t, 1, o.small.Rounds, "the simulator gives every round the same")
	o, err = parseBenchFlags([]string{"--small-jobs", "--sim", "--seconds", "0.1"}, nil)
	require.NoError(t, err)
	assert.Zero(t, o.small.Jobs, "--seconds on --sim runs for that long, not for the simulator's default job count")
	assert.Equal(t, 0.1, o.small.Seconds)
	o, err = parseBenchFlags([]string{"--small-jobs", "--jobs", "0", "--seconds", "1"}, nil)
	require.NoError(t, err, "--jobs 0 means run for --seconds")
	assert.Equal(t, 1.0, o.small.Seconds)
	o, err = parseBenchFlags([]string{"--small-jobs", "--sim", "--repeat", "2"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, o.small.Rounds)

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--small-jobs", "--wait", "often"}, `--wait "often": want spin, yield, block, auto, default, a comma-separated list of them, or all`},
		{[]string{"--small-jobs", "--wait", "spin,often"}, `--wait "spin,often": "often" in the list is not a wait mode (want spin, yield, block or auto)`},
		{[]string{"--small-jobs", "--wait", "spin,"}, `--wait "spin,": "" in the list is not a wait mode (want spin, yield, block or auto)`},
		{[]string{"--small-jobs", "--wait", "spin,yield,spin"}, `--wait "spin,yield,spin": spin is listed twice`},
		{[]string{"--small-jobs", "--wait", "spin,all"}, `--wait "spin,all": all stands alone, not in a list`},
		{[]string{"--small-jobs", "--wait", "spin,default"}, `--wait "spin,default": default stands alone, not in a list: it is the primary context's mode as the driver has it, which the modes before it change`},
		{[]string{"--small-jobs", "--sim", "--wait", "block"}, "--wait needs a GPU: the simulator has no host thread waiting on a driver"},
		{[]string{"--small-jobs", "--sim", "--reference"}, "--reference needs a GPU, not --sim"},
		{[]string{"--small-jobs", "--sim", "--direct-calls"}, "--direct-calls needs a GPU, not --sim: the simulator makes no driver calls"},
		{[]string{"--direct-calls"}, "--direct-calls is a flag of overlap bench small-jobs, not of overlap bench (overlap bench -h lists its flags)"},
		{[]string{"--small-jobs", "--workers", "0"}, "--workers 0: want 1 to 256"},
		{[]string{"--small-jobs", "--workers", "two"}, `--workers: "two" is not a whole number`},
		{[]string{"--small-jobs", "--iters", "1,2"}, `--iters "1,2": one count from 0 to 2147483647`},
		{[]string{"--small-jobs", "--seconds", "0"}, "--seconds 0: want more than 0, at most 60"},
		{[]string{"--small-jobs", "--jobs", "-1"}, "--jobs -1: want 0 (run for --seconds) to 16777216"},
		{[]string{"--small-jobs", "--chunks", "1M"}, "--chunks is a flag of overlap bench, not of overlap bench small-jobs (overlap bench small-jobs -h lists its flags)"},
		{[]string{"--small-jobs", "--elems", "1G"}, "--elems 1073741824: at most 268435456 per job"},
		{[]string{"--small-jobs", "--repeat", "0"}, "--repeat 0: rounds from 1 to 100"},
		{[]string{"--small-jobs", "--sim", "--repeat", "101"}, "--repeat 101: rounds from 1 to 100"},
		{[]string{"--wait", "spin"}, "--wait is a flag of overlap bench small-jobs, not of overlap bench (overlap bench -h lists its flags)"},
		{[]string{"--jobs", "5"}, "--jobs is a flag of overlap bench small-jobs, not of overlap bench (overlap bench -h lists its flags)"},
		{[]string{"--small-jobs", "--jobs", "5", "--seconds", "1"}, "--jobs and --seconds both say how long a cell runs; give one"},
		{[]string{"--small-jobs", "--svg", "x.svg"}, "--svg is a flag of overlap bench, not of overlap bench small-jobs (overlap bench small-jobs -h lists its flags)"},
		{[]string{"--small-jobs", "--devices", "0,1"}, "--devices is a flag of overlap bench scaling, not of overlap bench small-jobs (overlap bench small-jobs -h lists its flags)"},
		{[]string{"--small-jobs", "--csv", "x.csv"}, "--csv is a flag of overlap bench, not of overlap bench small-jobs (overlap bench small-jobs -h lists its flags)"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseBenchFlags(tc.args, nil)
			assert.EqualError(t, err, tc.err)
		})
	}
}

// TestRunWaitFlag guards issue 14: overlap run takes --wait, and refuses
// it on the simulator.
func TestRunWaitFlag(t *testing.T) {
	o, err := parseRunFlags([]string{"--wait", "block"}, nil)
	require.NoError(t, err)
	assert.Equal(t, driver.WaitBlock, o.wait)
	o, err = parseRunFlags(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, driver.WaitDefault, o.wait)
	_, err = parseRunFlags([]string{"--wait", "all"}, nil)
	assert.EqualError(t, err, `--wait "all": want spin, yield, block, auto or default`)
	_, err = parseRunFlags([]string{"--sim", "--wait", "spin"}, nil)
	assert.EqualError(t, err, "--wait needs a GPU: the simulator has no host thread waiting on a driver")
}

// TestSmallJobsOnSim guards issue 14: the small-jobs benchmark runs on
// the simulator, every goroutine runs exactly its jobs, and every element
// of each goroutine's last job is verified (a wrong result fails the run).
func TestSmallJobsOnSim(t *testing.T) {
	code, out, errOut := runCLI("bench", "--small-jobs", "--sim", "--elems", "1K,4K", "--workers", "1,3", "--jobs", "2", "--iters", "5", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res struct {
		Simulated bool                 `json:"simulated"`
		Results   []bench.SmallJobsRow `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.Simulated)
	require.Len(t, res.Results, 4)
	i := 0
	for _, n := range []int{1 << 10, 4 << 10} {
		for _, k := range []int{1, 3} {
			r := res.Results[i]
			i++
			assert.Equal(t, "default", r.Wait)
			assert.Equal(t, n, r.Elems)
			assert.Equal(t, k, r.Workers)
			assert.Equal(t, 2*k, r.Jobs)
			assert.Positive(t, r.JobsPerSec)
			assert.Positive(t, r.P50us)
			assert.GreaterOrEqual(t, r.P99us, r.P50us)
			assert.Equal(t, -1.0, r.CPUusPerJob, "no CPU time on the simulator")
		}
	}

	code, out, errOut = runCLI("bench", "--small-jobs", "--sim", "--elems", "1K", "--workers", "2", "--jobs", "1")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, out)
	assert.Equal(t, strings.Fields("WAIT ELEMS GORS JOBS JOBS/s P50 P99 CPU/JOB"), strings.Fields(lines[2]))
	f := strings.Fields(lines[3])
	assert.Equal(t, []string{"default", "1K", "2", "2"}, f[:4])
	assert.Equal(t, "n/a", f[len(f)-1])
}

// TestSmallJobsRoundsOnSim: with --repeat, every cell runs that many
// rounds, each on its own context and pipelines; the row sums their jobs
// and says how many rounds its medians are of, with each round's rate.
// The simulator runs every round alike, with several goroutines too:
// they are forked together (simWorkers). Started with plain go statements
// they were not, and three goroutines of two 1K jobs moved between 44.8K
// and 89.5K jobs/s from run to run.
func TestSmallJobsRoundsOnSim(t *testing.T) {
	code, out, errOut := runCLI("bench", "--small-jobs", "--sim", "--elems", "1K", "--workers", "1,3", "--jobs", "2", "--iters", "5", "--repeat", "3", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res struct {
		Results []bench.SmallJobsRow `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Results, 2)
	for i, k := range []int{1, 3} {
		r := res.Results[i]
		assert.Equal(t, k, r.Workers)
		assert.Equal(t, 3, r.Rounds)
		assert.Equal(t, 3*2*k, r.Jobs, "every round's jobs")
		require.Len(t, r.RoundJobsPerSec, 3)
		assert.Contains(t, r.RoundJobsPerSec, r.JobsPerSec, "the median of three is one of them")
		for i, v := range r.RoundJobsPerSec {
			assert.Equal(t, r.JobsPerSec, v, "%d goroutine(s), round %d", k, i)
		}
	}
	// Forked together, four goroutines of 4K jobs overlap on the simulated
	// GPU: more than twice one goroutine's rate (3.4x with the H200
	// profile; one goroutine running ahead of the others gave 1.5-2.5x).
	code, out, errOut = runCLI("bench", "--small-jobs", "--sim", "--elems", "4K", "--workers", "1,4", "--jobs", "3", "--json")
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Results, 2)
	assert.Greater(t, res.Results[1].JobsPerSec, 2*res.Results[0].JobsPerSec, "4 goroutines against 1")
	code, out, errOut = runCLI("bench", "--small-jobs", "--sim", "--elems", "1K", "--workers", "1", "--jobs", "1", "--repeat", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "1 jobs per goroutine; each cell the median of 2 rounds")
}

// TestSmallJobsTitleSaysDirect: a table run with --direct-calls says so
// in its title by the flag's name, beside the simulator's label where
// there is one (bench.SmallJobsResult.WriteTable's words, the flags
// named by flagName).
func TestSmallJobsTitleSaysDirect(t *testing.T) {
	for _, tc := range []struct {
		direct, sim bool
		want, not   string
	}{
		{false, false, "pinned buffers; 0.5 s per cell\n", "direct calls"},
		{true, false, "; direct calls (--direct-calls)\n", "simulated"},
		{true, true, "clock]; direct calls (--direct-calls)\n", ""},
	} {
		var buf bytes.Buffer
		r := &bench.SmallJobsResult{Backend: "NVIDIA H200"}
		require.NoError(t, r.WriteTable(&buf, bench.SmallJobsOptions{Sim: tc.sim, Iters: 100, Seconds: 0.5, DirectCalls: tc.direct}, flagName))
		title, _, _ := strings.Cut(buf.String(), "\n")
		assert.Contains(t, title+"\n", tc.want, "direct %v, sim %v", tc.direct, tc.sim)
		if tc.not != "" {
			assert.NotContains(t, title, tc.not, "direct %v, sim %v", tc.direct, tc.sim)
		}
	}
}
