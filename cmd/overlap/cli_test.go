package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelp: every command answers -h with one usage line and its flags
// with their defaults, each default once, on stdout, and exits 0. Issue 10:
// "ptx describe -h" said "no such file", "devices -h" printed a bare
// "Usage of devices:", and "run -h" showed defaults twice.
func TestHelp(t *testing.T) {
	cases := []struct {
		args  []string
		usage string
		flags []string // flags that must be listed, in order
	}{
		{[]string{"run", "-h"}, "usage: overlap run [flags]", []string{"-chunk", "-compute-streams", "-cu", "-device", "-devices", "-elems", "-entry", "-gpu", "-host", "-iters", "-json", "-kernel", "-no-baseline", "-profile", "-ptx", "-quiet", "-repeat", "-schedule", "-sim", "-slots", "-svg", "-trace", "-wait", "-warm"}},
		{[]string{"bench", "--help"}, "usage: overlap bench [flags]", []string{"-chunks", "-compute-streams", "-csv", "-device", "-elems", "-host", "-iters", "-json", "-reference", "-repeat", "-sim", "-slots", "-svg"}},
		{[]string{"bench", "small-jobs", "-h"}, "usage: overlap bench small-jobs [flags]", []string{"-device", "-direct-calls", "-elems", "-iters", "-jobs", "-json", "-reference", "-repeat", "-seconds", "-sim", "-wait", "-workers"}},
		{[]string{"bench", "scaling", "-h"}, "usage: overlap bench scaling [--devices all|0,1,...] [flags]", []string{"-chunks", "-compute-streams", "-devices", "-elems", "-iters", "-json", "-reference", "-repeat", "-sim", "-slots"}},
		{[]string{"stream", "-h"}, "usage: overlap stream --in FILE[,FILE] --out FILE [flags]", []string{"-bound", "-chunk", "-compute-streams", "-device", "-direct", "-direct-out", "-in", "-iters", "-json", "-kernel", "-out", "-piece", "-preallocate", "-quiet", "-readers", "-sim", "-slots", "-verify", "-writers"}},
		{[]string{"profile", "-h"}, "usage: overlap profile [--out FILE] [--validate] [--sim [--profile FILE]] [--device N] [--elems N] [--repeat N]", []string{"-device", "-elems", "-out", "-profile", "-repeat", "-sim", "-validate"}},
		{[]string{"help", "bench", "small-jobs"}, "usage: overlap bench small-jobs [flags]", []string{"-device", "-direct-calls", "-elems", "-iters", "-jobs", "-json", "-reference", "-repeat", "-seconds", "-sim", "-wait", "-workers"}},
		{[]string{"help", "ptx"}, "usage: overlap ptx describe [--json] FILE", nil},
		{[]string{"tune", "-h"}, "usage: overlap tune [flags]", []string{"-cu", "-device", "-elems", "-entry", "-host", "-iters", "-kernel", "-ptx", "-repeat", "-sim", "-warm"}},
		{[]string{"devices", "-h"}, "usage: overlap devices", nil},
		{[]string{"ptx", "describe", "-h"}, "usage: overlap ptx describe [--json] FILE", []string{"-json"}},
		{[]string{"ptx", "-h"}, "usage: overlap ptx describe [--json] FILE", nil},
		{[]string{"version", "-h"}, "usage: overlap version", nil},
	}
	flagLine := regexp.MustCompile(`(?m)^  (-[a-z-]+)`)
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(tc.args...)
			assert.Equal(t, exitOK, code)
			assert.Empty(t, errOut)
			lines := strings.Split(out, "\n")
			assert.Equal(t, tc.usage, lines[0])
			var got []string
			for _, m := range flagLine.FindAllStringSubmatch(out, -1) {
				got = append(got, m[1])
			}
			assert.Equal(t, tc.flags, got)
			for _, l := range lines {
				assert.LessOrEqual(t, strings.Count(l, "default"), 1, "a default shown twice: %q", l)
			}
		})
	}
	_, out, _ := runCLI("run", "-h")
	assert.Contains(t, out, "(default 128M)", "sizes as the flags take them")
	assert.Contains(t, out, "(default 100)")
	assert.Contains(t, out, `(default "seed")`)
	assert.NotContains(t, out, "(100)")
}

// TestScalingHelpShowsItsDefaults: bench scaling's help shows the
// configuration it runs unset, and no list it refuses;
// the trial's showed the sweep's (default "2,3") and then refused it
// with "give one value".
func TestScalingHelpShowsItsDefaults(t *testing.T) {
	code, out, _ := runCLI("bench", "scaling", "-h")
	assert.Equal(t, exitOK, code)
	assert.NotContains(t, out, `(default "2,3")`)
	assert.NotContains(t, out, `(default "1M,4M,16M,32M")`)
	assert.Contains(t, out, "one slot count (unset: the compute streams + 2 on every device count, the pipeline's default for several devices)")
	assert.Contains(t, out, "one chunk size for every row (unset: for each size, the chunk overlap run takes for it)")
	assert.Contains(t, out, fmt.Sprintf("streams for kernels (unset: the pipeline's default, %d)", pipeline.DefaultComputeStreams))
}

// TestHelpIsTheCommandList: overlap help lists every command, and a
// subcommand, from the list that dispatches them; overlap help CMD is
// CMD -h, and an unknown one is a usage error.
func TestHelpIsTheCommandList(t *testing.T) {
	code, out, errOut := runCLI("help")
	require.Equal(t, exitOK, code, errOut)
	for _, c := range append(append([]*command(nil), commands...), smallJobsCmd, scalingCmd, ptxDescribeCmd) {
		if c.flags != nil || c == helpCmd {
			first, _, _ := strings.Cut(c.usage(), "\n")
			assert.Contains(t, out, "\n  "+first, c.path())
		}
	}
	for _, args := range [][]string{{"run"}, {"stream"}, {"bench"}, {"bench", "scaling"}, {"infer"}, {"version"}} {
		_, help, _ := runCLI(append([]string{"help"}, args...)...)
		_, dashH, _ := runCLI(append(args, "-h")...)
		assert.Equal(t, dashH, help, args)
	}
	for _, args := range [][]string{{"nosuch"}, {"bench", "nosuch"}, {"ptx", "explain"}} {
		code, out, errOut := runCLI(append([]string{"help"}, args...)...)
		assert.Equal(t, exitUsage, code)
		assert.Empty(t, out)
		assert.Equal(t, "overlap help: unknown command \""+strings.Join(args, " ")+"\" (try 'overlap help')\n", errOut)
	}
	code, _, errOut = runCLI("bench", "small-jobs", "--bogus")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap bench small-jobs: --bogus: no such flag (overlap bench small-jobs -h lists its flags)\n", errOut)
}

// TestRenamedCommands: the modes that flags chose are commands now, and
// the old spellings still work, for one release, with a note on stderr
// that names the new one: overlap run --in is overlap stream, overlap
// bench --small-jobs is overlap bench small-jobs, overlap bench --devices
// is overlap bench scaling.
func TestRenamedCommands(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.f32")
	require.Equal(t, exitOK, runCLIcode("gen", "--size", "16K", "--out", in))
	for _, tc := range []struct {
		old, new []string
		note     string
	}{
		{[]string{"run", "--sim", "--in", in, "--out", filepath.Join(dir, "old.f32"), "--chunk", "1K", "--iters", "1", "--json"},
			[]string{"stream", "--sim", "--in", in, "--out", filepath.Join(dir, "new.f32"), "--chunk", "1K", "--iters", "1", "--json"},
			"overlap: 'overlap run --in' is now 'overlap stream' (the old spelling works until the next release)\n"},
		{[]string{"bench", "--sim", "--small-jobs", "--elems", "4K", "--workers", "1", "--jobs", "1", "--json"},
			[]string{"bench", "small-jobs", "--sim", "--elems", "4K", "--workers", "1", "--jobs", "1", "--json"},
			"overlap: 'overlap bench --small-jobs' is now 'overlap bench small-jobs' (the old spelling works until the next release)\n"},
		{[]string{"bench", "--sim", "--devices", "0,1", "--elems", "64K", "--iters", "1", "--repeat", "1", "--json"},
			[]string{"bench", "scaling", "--sim", "--devices", "0,1", "--elems", "64K", "--iters", "1", "--repeat", "1", "--json"},
			"overlap: 'overlap bench --devices' is now 'overlap bench scaling' (the old spelling works until the next release)\n"},
	} {
		t.Run(strings.Join(tc.new[:2], " "), func(t *testing.T) {
			code, oldOut, oldErr := runCLI(tc.old...)
			require.Equal(t, exitOK, code, oldErr)
			assert.Equal(t, tc.note, oldErr)
			code, newOut, newErr := runCLI(tc.new...)
			require.Equal(t, exitOK, code, newErr)
			assert.Empty(t, newErr)
			var a, b map[string]any
			require.NoError(t, json.Unmarshal([]byte(oldOut), &a))
			require.NoError(t, json.Unmarshal([]byte(newOut), &b))
			for _, m := range []map[string]any{a, b} {
				delete(m, "output")         // the stream's file names differ
				delete(m, "peak_rss_bytes") // and the process has grown
				delete(m, "ms")
				delete(m, "stages")
				delete(m, "results") // wall-clock times
			}
			assert.Equal(t, a, b)
		})
	}
	// A flag that is the old mode's and not the new command's is refused
	// after the note, naming the command that takes it.
	code, out, errOut := runCLI("bench", "--small-jobs", "--chunks", "1M")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "overlap: 'overlap bench --small-jobs' is now 'overlap bench small-jobs' (the old spelling works until the next release)\n"+
		"overlap bench small-jobs: --chunks is a flag of overlap bench, not of overlap bench small-jobs (overlap bench small-jobs -h lists its flags)\n", errOut)
	// --small-jobs=false chose the sweep, and still does.
	code, _, errOut = runCLI("bench", "--small-jobs=false", "--sim", "--elems", "64K", "--chunks", "16K", "--slots", "2", "--iters", "1", "--repeat", "1")
	assert.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	// After "--", nothing is a flag.
	code, _, errOut = runCLI("run", "--", "--in", "x")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: unexpected argument \"--in\"\n", errOut)
}

// TestMachineFlagsCheckedOnce: each command that takes a machine flag
// refuses its misuse in the same words, from machine.check.
func TestMachineFlagsCheckedOnce(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{{"run", nil}, {"stream", []string{"--in", "x", "--out", "y"}}, {"tune", nil}, {"bench", nil}, {"bench small-jobs", nil}, {"profile", nil}} {
		args := append(strings.Fields(c.name), c.args...)
		code, _, errOut := runCLI(append(args, "--device", "-1")...)
		assert.Equal(t, exitUsage, code, c.name)
		assert.Equal(t, "overlap "+c.name+": --device -1: must not be negative\n", errOut)
		code, _, errOut = runCLI(append(args, "--sim", "--device", "1")...)
		assert.Equal(t, exitUsage, code, c.name)
		assert.Equal(t, "overlap "+c.name+": --device cannot be used with --sim: the simulator is one CPU device\n", errOut)
	}
	for _, c := range [][]string{{"run"}, {"infer", "--model", "m", "--rows", "1"}, {"profile"}} {
		code, _, errOut := runCLI(append(c, "--profile", "p.json")...)
		assert.Equal(t, exitUsage, code, c)
		assert.Equal(t, "overlap "+c[0]+": --profile needs --sim: a GPU measures its own times\n", errOut, c)
	}
}

// TestFlagsThatFailedLate: each is refused when the flags are parsed, in
// one line, with exit 2, before any run. Issue 10.
func TestFlagsThatFailedLate(t *testing.T) {
	dir := t.TempDir()
	readOnly := filepath.Join(dir, "ro")
	require.NoError(t, os.Mkdir(readOnly, 0o555))
	existing := filepath.Join(dir, "keep.svg")
	require.NoError(t, os.WriteFile(existing, []byte("keep"), 0o644))
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--sim", "--trace", filepath.Join(dir, "no", "such", "t.json")},
			"overlap run: --trace " + filepath.Join(dir, "no", "such", "t.json") + ": no such directory " + filepath.Join(dir, "no", "such")},
		{[]string{"run", "--sim", "--svg", dir}, "overlap run: --svg " + dir + ": is a directory"},
		// The trial's --trace - wrote a file called -.
		{[]string{"run", "--sim", "--trace", "-"}, "overlap run: --trace -: give a file name (this output does not go to stdout, which carries the report; ./- names a file called -)"},
		{[]string{"bench", "--sim", "--svg", "-"}, "overlap bench: --svg -: give a file name (this output does not go to stdout, which carries the report; ./- names a file called -)"},
		{[]string{"run", "--sim", "--elems", "1G", "--chunk", "1K", "--svg", existing},
			"overlap run: --trace and --svg time every chunk, at most 65536; --elems 1073741824 in chunks of 1024 makes 1048576: use a larger --chunk"},
		{[]string{"run", "--sim", "--device", "7"}, "overlap run: --device cannot be used with --sim: the simulator is one CPU device"},
		{[]string{"tune", "--sim", "--device", "1"}, "overlap tune: --device cannot be used with --sim: the simulator is one CPU device"},
		{[]string{"tune", "--sim", "--warm", "1ms"}, "overlap tune: --warm needs a GPU: the simulator's profile describes a warm device"},
		{[]string{"tune", "--warm", "2m"}, "overlap tune: --warm 2m0s: at most 1m0s (overlap run warms up before each of its --repeat+2 timed parts)"},
		{[]string{"bench", "--sim", "--device", "7"}, "overlap bench: --device cannot be used with --sim: the simulator is one CPU device"},
		{[]string{"bench", "--sim", "--csv", dir}, "overlap bench: --csv " + dir + ": is a directory"},
		{[]string{"run", "--kernel", "saxpy", "--iters", "5"}, "overlap run: --iters is the seed kernel's; saxpy takes no iterations"},
		{[]string{"run", "--ptx", "k.ptx", "--entry", "k", "--kernel", "lerp"}, "overlap run: --kernel and --ptx both name a kernel; give one"},
		{[]string{"tune", "--cu", "k.cu", "--entry", "k", "--kernel", "lerp"}, "overlap tune: --kernel and --cu both name a kernel; give one"},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		cases = append(cases, struct {
			args []string
			want string
		}{[]string{"run", "--sim", "--trace", filepath.Join(readOnly, "t.json")},
			"overlap run: --trace " + filepath.Join(readOnly, "t.json") + ": cannot be written: permission denied"})
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runCLI(tc.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, out)
			assert.Equal(t, tc.want+"\n", errOut)
			assert.Less(t, time.Since(start), 2*time.Second, "refused before any work")
		})
	}
	b, err := os.ReadFile(existing)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b), "checking a path does not truncate it")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 2, "checking a path leaves nothing behind")
}

// TestPTXDescribeBoundedRead: describing /dev/zero (size 0, endless) is
// refused after reading ptx.MaxFileSize bytes. Issue 10: it read until
// memory ran out.
func TestPTXDescribeBoundedRead(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, out, errOut := runCLI("ptx", "describe", "/dev/zero")
	runtime.ReadMemStats(&after)
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, out)
	assert.Equal(t, "overlap ptx: /dev/zero: larger than 64 MiB: not a PTX module\n", errOut)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(512<<20), "bounded read")
}

// TestPTXDescribeJSONLists: lists are [] in JSON, never null. Issue 10.
func TestPTXDescribeJSONLists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none.ptx")
	require.NoError(t, os.WriteFile(path, []byte(".version 7.0\n.target sm_75\n"), 0o644))
	code, out, errOut := runCLI("ptx", "describe", path, "--json")
	require.Equal(t, exitOK, code, errOut)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	assert.Equal(t, "[]", string(raw["funcs"]))
	assert.Equal(t, "[]", string(raw["entries"]))
	assert.Equal(t, `["sm_75"]`, strings.Join(strings.Fields(string(raw["targets"])), ""))
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errOut := runCLI(args...)
		assert.Equal(t, exitOK, code)
		assert.Empty(t, errOut)
		assert.Regexp(t, `^overlap \S+.*, go1\.\S+ \w+/\w+\n$`, out, args)
	}
	code, _, errOut := runCLI("version", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap version: unexpected argument \"extra\"\n", errOut)

	platform := runtime.GOOS + "/" + runtime.GOARCH
	cases := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.25.1", Main: debug.Module{Path: "github.com/purecuda/overlap", Version: "v1.2.3"}},
			"overlap v1.2.3, go1.25.1 " + platform},
		{"checkout with VCS stamp", &debug.BuildInfo{GoVersion: "go1.25.1", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "8c1682f0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-30T07:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			"overlap (devel) commit 8c1682f01234 2026-11-30T07:00:00Z (modified), go1.25.1 " + platform},
		{"no version at all", &debug.BuildInfo{GoVersion: "go1.25.1"}, "overlap (devel: no commit recorded; make cli records it), go1.25.1 " + platform},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, versionLine(c.info, true), c.name)
	}
	// The Makefile's stamp (make cli, make gpu-bundle) where the go
	// command recorded no commit (the trial: go run, a git worktree and
	// -buildvcs=false printed "(devel)"); the go command's own wins.
	defer func(r, w, m string) { vcsRevision, vcsTime, vcsModified = r, w, m }(vcsRevision, vcsTime, vcsModified)
	vcsRevision, vcsTime, vcsModified = "9f53def0123456789", "2026-12-01T09:00:00Z", "false"
	assert.Equal(t, "overlap (devel) commit 9f53def01234 2026-12-01T09:00:00Z, go1.25.1 "+platform,
		versionLine(&debug.BuildInfo{GoVersion: "go1.25.1", Main: debug.Module{Version: "(devel)"}}, true))
	assert.Equal(t, cases[1].want, versionLine(cases[1].info, true), "the go command's record first")
	assert.Equal(t, "overlap (unknown version: no build information) "+runtime.Version()+" "+platform, versionLine(nil, false))
}

// TestThirtyTwoBitBuild: a 32-bit build (GOARCH=386, built by make test)
// refuses the GPU in one line and still runs the simulator, by default
// when no GPU was asked for. Issue 10: it did not compile.
func TestThirtyTwoBitBuild(t *testing.T) {
	defer func(old int) { intSize = old }(intSize)
	intSize = 32
	code, out, errOut := runCLI("run", "--gpu", "--elems", "64K")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.Equal(t, "overlap run: this is a 32-bit build, and NVIDIA's driver API is 64-bit only: build for amd64 or arm64, or use --sim\n", errOut)
	code, _, errOut = runCLI("run", "--sim", "--elems", "64K", "--chunk", "16K", "--iters", "1", "--repeat", "1", "--quiet")
	assert.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	code, _, errOut = runCLI("run", "--elems", "64K", "--chunk", "16K", "--iters", "1", "--repeat", "1", "--quiet")
	assert.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "overlap run: this is a 32-bit build, and NVIDIA's driver API is 64-bit only: running on the CPU simulator instead (--gpu makes this an error)\n", errOut,
		"--quiet still says that the run was simulated")
}

// TestREADMEFlagTable: docs/CLI.md's table for overlap run lists every flag
// that run takes, and no other. Issue 10: --no-baseline was missing.
func TestREADMEFlagTable(t *testing.T) {
	readme, err := os.ReadFile("../../docs/CLI.md")
	require.NoError(t, err)
	section := regexp.MustCompile("(?s)## overlap run\n(.*?)\n\n").FindSubmatch(readme)
	require.NotNil(t, section, "docs/CLI.md has an '## overlap run' table")
	listed := map[string]bool{}
	for _, row := range strings.Split(string(section[1]), "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 3 {
			continue
		}
		for _, m := range regexp.MustCompile(`--([a-z][a-z-]*)`).FindAllStringSubmatch(cells[1], -1) {
			listed[m[1]] = true
		}
	}
	fs := newFlags("run")
	runFlags(fs)
	have := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { have[f.Name] = true })
	assert.Equal(t, have, listed)
}

// TestRefuse: the first bad refusal in order is the error, none is nil;
// firstSet names the first of the flags given, in the order asked.
func TestRefuse(t *testing.T) {
	assert.NoError(t, refuse(nil))
	assert.NoError(t, refuse([]refusal{{false, "a"}, {false, "b"}}))
	assert.EqualError(t, refuse([]refusal{{false, "a"}, {true, "b"}, {true, "c"}}), "b")
	fs := newFlags("t")
	for _, n := range []string{"a", "b", "c"} {
		fs.Bool(n, false, "")
	}
	require.NoError(t, fs.Parse([]string{"-c", "-b"}))
	assert.Equal(t, "b", firstSet(fs, "a", "b", "c"))
	assert.Equal(t, "c", firstSet(fs, "c", "b"))
	assert.Equal(t, "", firstSet(fs, "a"))
}

// TestScalingJSONChunks: bench scaling's JSON gives each row the chunk it
// ran in, and a top-level chunk_elems only where --chunks set one for
// every row (unset, each size runs in overlap run's chunk for it).
func TestScalingJSONChunks(t *testing.T) {
	var out struct {
		ChunkElems *int `json:"chunk_elems"`
		Results    []struct {
			Elems      int `json:"elems"`
			ChunkElems int `json:"chunk_elems"`
		} `json:"results"`
	}
	code, stdout, errOut := runCLI("bench", "scaling", "--sim", "--devices", "0,1", "--elems", "256K", "--iters", "1", "--repeat", "1", "--json")
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	assert.Nil(t, out.ChunkElems, "no one chunk for every row")
	require.NotEmpty(t, out.Results)
	for _, r := range out.Results {
		assert.Equal(t, pipeline.DefaultChunkFor(256<<10), r.ChunkElems)
	}
	code, stdout, errOut = runCLI("bench", "scaling", "--sim", "--devices", "0,1", "--elems", "256K", "--chunks", "64K", "--iters", "1", "--repeat", "1", "--json")
	require.Equal(t, exitOK, code, errOut)
	out.ChunkElems, out.Results = nil, nil
	require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
	require.NotNil(t, out.ChunkElems)
	assert.Equal(t, 64<<10, *out.ChunkElems)
	for _, r := range out.Results {
		assert.Equal(t, 64<<10, r.ChunkElems)
	}
}
