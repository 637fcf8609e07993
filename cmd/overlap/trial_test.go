package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/procfs"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file guard what a new user's trial of the CLI found
// (the trial, below): each names its finding.

// childArgsEnv holds, as JSON, the command line that this test binary runs
// as the overlap command when it is started as a child process.
const childArgsEnv = "OVERLAP_CLI_TEST_ARGS"

// childGraceEnv sets a child's drainGrace (time.ParseDuration).
const childGraceEnv = "OVERLAP_CLI_TEST_DRAIN_GRACE"

// childTempEnv names a folder that a child registers for removal by the
// grace exit (atGraceExit), as a command registers its temporary ones.
const childTempEnv = "OVERLAP_CLI_TEST_GRACE_TEMP"

func TestMain(m *testing.M) {
	if a := os.Getenv(childArgsEnv); a != "" {
		// A child waits for the work in flight as long as it takes, as
		// before drainGrace (the simulator's chunks drain slowly under the
		// race detector), unless a test sets its grace.
		drainGrace = time.Hour
		if g := os.Getenv(childGraceEnv); g != "" {
			var err error
			if drainGrace, err = time.ParseDuration(g); err != nil {
				fmt.Fprintln(os.Stderr, "bad", childGraceEnv, err)
				os.Exit(3)
			}
		}
		if dir := os.Getenv(childTempEnv); dir != "" {
			atGraceExit(func() { os.RemoveAll(dir) })
		}
		var args []string
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			fmt.Fprintln(os.Stderr, "bad", childArgsEnv, err)
			os.Exit(3)
		}
		os.Exit(run(args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// cliChild returns the overlap command line args as a child process: this
// test binary, run as main, with env added to the environment.
func cliChild(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	a, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), childArgsEnv+"="+string(a)), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// runWithin runs the CLI in this process and fails the test if it has not
// returned within limit: on the unfixed code these commands ran for
// minutes or more.
func runWithin(t *testing.T, limit time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := runCLI(args...)
		done <- result{c, o, e}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(limit):
		t.Fatalf("overlap %s: still running after %v (refused before any work, it returns at once)", strings.Join(args, " "), limit)
		return
	}
}

// TestOutputThatIsAnInputIsRefused: in the trial, `overlap run --in
// same.f32 --out ./same.f32` left the 4 MiB input at 0 bytes and exited 0;
// so did the input spelled by absolute path, through a symbolic link or
// through a hard link. Only the identical string was refused. Every
// spelling is refused now, before anything is opened for writing, and the
// input is left as it was.
func TestOutputThatIsAnInputIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	x := make([]float32, 1<<20) // 4 MiB
	kernels.FillPattern(x, 0)
	want := driver.Bytes(x)
	require.NoError(t, os.WriteFile("same.f32", want, 0o644))
	require.NoError(t, os.WriteFile("other.f32", want, 0o644))
	require.NoError(t, os.Mkdir("sub", 0o755))
	require.NoError(t, os.Symlink("same.f32", "link.f32"))
	require.NoError(t, os.Link("same.f32", "hard.f32"))
	require.NoError(t, os.Symlink(".", "here"))
	abs := filepath.Join(dir, "same.f32")
	intact := func(t *testing.T) {
		t.Helper()
		got, err := os.ReadFile(abs)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "the input is left as it was (%d bytes)", len(got))
		if !bytes.Equal(want, got) {
			require.NoError(t, os.WriteFile(abs, want, 0o644)) // for the next case
		}
	}
	for _, out := range []string{
		"same.f32",                          // the identical string, refused before too
		"./same.f32",                        // the trial's
		abs,                                 // an absolute path
		"link.f32",                          // a symbolic link to it
		"hard.f32",                          // a hard link to it
		"sub/../same.f32",                   // through a directory and back
		"here/same.f32",                     // through a linked directory
		filepath.Join(dir, "here/link.f32"), // both
	} {
		t.Run(out, func(t *testing.T) {
			code, stdout, errOut := runWithin(t, time.Minute, "stream", "--sim", "--in", "same.f32", "--out", out, "--iters", "1", "--chunk", "256K")
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Equal(t, "overlap stream: --out "+out+" is the input same.f32 (the same file): writing it would destroy the input as it is read\n", errOut)
			intact(t)
		})
	}
	t.Run("second input", func(t *testing.T) {
		code, _, errOut := runWithin(t, time.Minute, "stream", "--sim", "--kernel", "saxpy", "--in", "other.f32,"+abs, "--out", "./hard.f32", "--chunk", "256K")
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap stream: --out ./hard.f32 is the input "+abs+" (the same file): writing it would destroy the input as it is read\n", errOut)
		intact(t)
	})
	t.Run("stdin", func(t *testing.T) {
		f, err := os.Open(abs)
		require.NoError(t, err)
		defer f.Close()
		stdin = f
		defer func() { stdin = os.Stdin }()
		code, _, errOut := runWithin(t, time.Minute, "stream", "--sim", "--in", "-", "--out", "link.f32", "--iters", "1", "--chunk", "256K")
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap stream: --out link.f32 is the input - (the same file): writing it would destroy the input as it is read\n", errOut)
		intact(t)
	})
	t.Run("stdout", func(t *testing.T) {
		f, err := os.OpenFile(abs, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		defer f.Close()
		var errOut bytes.Buffer
		code := run([]string{"stream", "--sim", "--in", "./same.f32", "--out", "-", "--iters", "1", "--chunk", "256K"}, f, &errOut)
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap stream: --out - is the input ./same.f32 (the same file): writing it would destroy the input as it is read\n", errOut.String())
		intact(t)
	})
	t.Run("trace over --ptx", func(t *testing.T) {
		ptxCopy := filepath.Join(dir, "k.ptx")
		src, err := os.ReadFile(filepath.Join(testdataDir(t), "double.ptx"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(ptxCopy, src, 0o644))
		code, _, errOut := runWithin(t, time.Minute, "run", "--gpu", "--ptx", ptxCopy, "--entry", "double_it", "--trace", "./k.ptx")
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap run: --trace ./k.ptx is the input "+ptxCopy+" (the same file): it would be overwritten\n", errOut)
		got, _ := os.ReadFile(ptxCopy)
		assert.Equal(t, src, got)
	})
}

// TestRunawayWorkIsRefused: in the trial `--iters 2000000000` was
// accepted and then ran silently for over a minute, and so did a
// streaming `--chunk 3`. What cannot finish in reasonable time is refused
// in one line, with exit 2, saying why.
func TestRunawayWorkIsRefused(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.f32")
	require.NoError(t, os.WriteFile(in, make([]byte, 4<<20), 0o644))
	out := filepath.Join(dir, "out.f32")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--sim", "--iters", "2000000000"},
			"overlap run: --iters 2000000000 over 4194304 elements is 8.4e15 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower --iters or --elems"},
		{[]string{"run", "--gpu", "--iters", "2000000000"},
			"overlap run: --iters 2000000000 over 134217728 elements is 2.7e17 kernel iterations per pass; a run takes at most 1e14 per pass (about 100 s on an NVIDIA H200): lower --iters or --elems"},
		{[]string{"tune", "--sim", "--iters", "2000000000"},
			"overlap tune: --iters 2000000000 over 4194304 elements is 8.4e15 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower --iters or --elems"},
		{[]string{"bench", "--sim", "--iters", "100,2000000000"},
			"overlap bench: --iters 2000000000 over 4194304 elements is 8.4e15 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower --iters or --elems"},
		{[]string{"run", "--sim", "--elems", "1G", "--chunk", "3"},
			"overlap run: --chunk 3 cuts --elems 1073741824 into 357913942 chunks; the simulator takes at most 1048576 (about 0.1 ms of CPU each): use a larger --chunk"},
		{[]string{"run", "--gpu", "--chunk", "3"},
			"overlap run: --chunk 3 cuts --elems 134217728 into 44739243 chunks; a run takes at most 4194304 (several driver calls each): use a larger --chunk"},
		{[]string{"stream", "--sim", "--in", in, "--out", out, "--chunk", "3"},
			"overlap stream: --chunk 3: a streaming run's chunks are at least 1024 elements (4 KiB): each costs a read, a write and several driver calls"},
		{[]string{"stream", "--sim", "--in", in, "--out", out, "--iters", "2000000000"},
			"overlap stream: --iters 2000000000 over the 1048576 elements of " + in + " is 2.1e15 kernel iterations per pass; the simulator computes each one on the CPU and takes at most 2e11 per pass: lower --iters"},
		{[]string{"stream", "--in", "-", "--out", out, "--iters", "2000000000", "--chunk", "1M"},
			"overlap stream: --iters 2000000000 over one chunk of 1048576 elements is 2.1e15 kernel iterations per pass; a run takes at most 1e14 per pass (about 100 s on an NVIDIA H200): lower --iters or --chunk"},
		{[]string{"run", "--gpu", "--warm", "1h"},
			"overlap run: --warm 1h0m0s: at most 1m0s (overlap run warms up before each of its --repeat+2 timed parts)"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			start := time.Now()
			code, stdout, errOut := runWithin(t, 20*time.Second, c.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Equal(t, c.want+"\n", errOut)
			assert.Less(t, time.Since(start), 2*time.Second)
		})
	}
	_, err := os.Stat(out)
	assert.True(t, errors.Is(err, os.ErrNotExist), "no output file is left: %v", err)
}

// TestErrorsBeforeWork: in the trial `--in <directory>` failed only after
// a 3.75 s warm-up, with exit 1, leaving an empty output file; without a
// GPU, `--ptx FILE --entry wrong` said "no NVIDIA driver found" and never
// checked the entry; `--verify --out -` verified nothing and exited 0.
// Each is refused now before any work, with exit 2, and leaves no output.
func TestErrorsBeforeWork(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.f32")
	require.NoError(t, os.WriteFile(in, make([]byte, 4096), 0o644))
	odd := filepath.Join(dir, "odd.f32")
	require.NoError(t, os.WriteFile(odd, make([]byte, 4098), 0o644))
	long := filepath.Join(dir, "long.f32")
	require.NoError(t, os.WriteFile(long, make([]byte, 8192), 0o644))
	sub := filepath.Join(dir, "sub")
	require.NoError(t, os.Mkdir(sub, 0o755))
	out := filepath.Join(dir, "out.f32")
	double := filepath.Join(testdataDir(t), "double.ptx")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"stream", "--sim", "--in", sub, "--out", out},
			"overlap stream: --in " + sub + ": is a directory"},
		{[]string{"stream", "--sim", "--in", filepath.Join(dir, "missing"), "--out", out},
			"overlap stream: --in " + filepath.Join(dir, "missing") + ": no such file"},
		{[]string{"stream", "--sim", "--in", odd, "--out", out},
			"overlap stream: --in " + odd + ": 4098 bytes is not a whole number of float32 elements (4 bytes each)"},
		{[]string{"stream", "--sim", "--kernel", "saxpy", "--in", in + "," + long, "--out", out},
			"overlap stream: --in: " + in + " holds 1024 elements and " + long + " 2048; the inputs must be as long"},
		{[]string{"stream", "--sim", "--in", in, "--out", "-", "--verify"},
			"overlap stream: --verify reads the output back from its file: it cannot read stdout (--out -)"},
		{[]string{"stream", "--sim", "--in", "-", "--out", out, "--verify"},
			"overlap stream: --verify reads the inputs back from their files: it cannot read stdin (--in -)"},
		{[]string{"stream", "--sim", "--in", "-", "--out", out, "--bound"},
			"overlap stream: --bound reads the inputs alone: it needs files, not stdin (--in -)"},
		{[]string{"run", "--gpu", "--ptx", double, "--entry", "wrong"},
			"overlap run: --ptx " + double + " has no entry \"wrong\"; its entries are: double_it"},
		{[]string{"run", "--ptx", double, "--entry", "wrong"},
			"overlap run: --ptx " + double + " has no entry \"wrong\"; its entries are: double_it"},
		{[]string{"tune", "--ptx", double, "--entry", "wrong"},
			"overlap tune: --ptx " + double + " has no entry \"wrong\"; its entries are: double_it"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			start := time.Now()
			code, stdout, errOut := runWithin(t, 20*time.Second, c.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Equal(t, c.want+"\n", errOut)
			assert.Less(t, time.Since(start), 2*time.Second)
			_, err := os.Stat(out)
			assert.True(t, errors.Is(err, os.ErrNotExist), "no output file is left: %v", err)
		})
	}
	if os.DevNull == "/dev/null" {
		code, _, errOut := runWithin(t, 20*time.Second, "stream", "--sim", "--in", in, "--out", os.DevNull, "--verify")
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap stream: --verify reads the output back from its file: /dev/null is not a regular file\n", errOut)
	}
}

// TestSignals: in the trial SIGTERM was not handled (exit 143, no
// message, a partial file), and SIGINT exited 1 saying "context
// canceled". Both now stop the run as SIGINT did, leave an exact prefix
// of the correct output and say so, naming the signal: exit 130 and
// "interrupted" for SIGINT, 143 and "terminated" for SIGTERM.
func TestSignals(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("skipping: no SIGTERM on windows")
	}
	if testing.Short() {
		t.Skip("skipping in -short: runs the simulator in child processes")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.f32")
	const n = 16 << 20
	const iters = 100
	require.Equal(t, exitOK, runCLIcode("gen", "--size", strconv.Itoa(4*n), "--out", in))
	for _, c := range []struct {
		sig  syscall.Signal
		code int
		word string
	}{{syscall.SIGINT, 130, "interrupted (SIGINT)"}, {syscall.SIGTERM, 143, "terminated (SIGTERM)"}} {
		t.Run("stream "+c.sig.String(), func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strconv.Itoa(int(c.sig)))
			cmd, stdout, stderr := cliChild(t, nil, "stream", "--sim", "--in", in, "--out", out, "--chunk", "64K", "--iters", strconv.Itoa(iters))
			require.NoError(t, cmd.Start())
			deadline := time.Now().Add(2 * time.Minute)
			for {
				if st, err := os.Stat(out); err == nil && st.Size() > 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("the child wrote nothing in 2 minutes")
				}
				time.Sleep(10 * time.Millisecond)
			}
			require.NoError(t, cmd.Process.Signal(c.sig))
			err := cmd.Wait()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "exit: %v; stderr %q", err, stderr.String())
			assert.Equal(t, c.code, ee.ExitCode(), "stderr %q", stderr.String())
			assert.Empty(t, stdout.String())
			m := regexp.MustCompile(`^overlap stream: ` + regexp.QuoteMeta(c.word) + `; ` + regexp.QuoteMeta(out) +
				` holds the first (\d+) bytes of the correct output \((\d+) elements\)\n$`).FindStringSubmatch(stderr.String())
			require.NotNil(t, m, "stderr %q", stderr.String())
			size, _ := strconv.Atoi(m[1])
			elems, _ := strconv.Atoi(m[2])
			assert.Equal(t, size, 4*elems)
			assert.Less(t, elems, n, "stopped before the end")
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			require.Len(t, got, size)
			assert.True(t, bytes.Equal(seedFile(elems, 0, iters), got), "an exact prefix of the correct output")
		})
	}
	t.Run("in memory SIGINT", func(t *testing.T) {
		cmd, stdout, stderr := cliChild(t, nil, "run", "--sim", "--elems", "16M", "--no-baseline")
		require.NoError(t, cmd.Start())
		time.Sleep(time.Second)
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		err := cmd.Wait()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "exit: %v; stderr %q", err, stderr.String())
		assert.Equal(t, 130, ee.ExitCode())
		assert.Equal(t, "overlap run: interrupted (SIGINT)\n", stderr.String())
		assert.NotContains(t, stdout.String(), "MODE")
	})
	// gen had no signal handling: Ctrl-C ended it with no line, and left
	// the part it had written. It stops, says so, and removes the part.
	t.Run("gen", func(t *testing.T) {
		dir := t.TempDir()
		if free, ok := procfs.FreeSpace(dir); ok && free < 2<<30 {
			t.Skipf("skipping: %d bytes free for a 1 GiB file", free)
		}
		out := filepath.Join(dir, "big.f32")
		cmd, _, stderr := cliChild(t, nil, "gen", "--size", "1G", "--out", out)
		require.NoError(t, cmd.Start())
		// The file is made after the signals are taken: once it has
		// bytes, a signal is gen's to handle, however slow the start.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			if st, err := os.Stat(out); err == nil && st.Size() > 0 {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("gen wrote nothing in 20 s")
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
		err := cmd.Wait()
		if err == nil {
			t.Skip("gen wrote 1 GiB before the signal")
		}
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "exit: %v; stderr %q", err, stderr.String())
		assert.Equal(t, 130, ee.ExitCode())
		assert.Equal(t, "overlap gen: interrupted (SIGINT)\n", stderr.String())
		assert.NoFileExists(t, out, "the part written is removed")
	})
	// SIGTERM during the simulator's synchronous baseline over 128M
	// elements took 144 s to end the process: the simulator computes a
	// launch's kernel on the CPU, and that cannot be interrupted. Here a
	// launch takes half an hour on two cores; past its grace the process exits, and says
	// why. It removes the temporary folders registered for it first (the
	// reference programs' build left theirs).
	t.Run("work that does not stop", func(t *testing.T) {
		temp := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(temp, "built"), []byte("x"), 0o644))
		cmd, _, stderr := cliChild(t, []string{childGraceEnv + "=1s", childTempEnv + "=" + temp}, "run", "--sim", "--elems", "1M", "--iters", "190000", "--repeat", "1")
		require.NoError(t, cmd.Start())
		time.Sleep(time.Second)
		start := time.Now()
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("still running 30 s after SIGTERM")
		}
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "exit: %v; stderr %q", err, stderr.String())
		assert.Equal(t, 143, ee.ExitCode(), "stderr %q", stderr.String())
		assert.GreaterOrEqual(t, time.Since(start), time.Second, "the grace is given")
		assert.Equal(t, "overlap run: terminated (SIGTERM); still busy 1 s after the signal, so overlap exits without waiting for the work in flight\n", stderr.String())
		assert.NoDirExists(t, temp, "the grace exit removes the temporary folders registered for it")
	})
}

// TestNoDriverRunsTheSimulator: in the trial `overlap run` on a machine
// without a GPU ended with "no NVIDIA driver found" and did not mention
// --sim. Without a driver, and unless a GPU was asked for, it runs on the
// simulator and says so first, in the table and in the JSON; --gpu,
// --device or --devices make a missing driver the error it was, and
// --sim's output is as it was.
func TestNoDriverRunsTheSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short: runs the simulator in child processes")
	}
	missing := filepath.Join(t.TempDir(), "no", "libcuda.so.1")
	noDriver := []string{"OVERLAP_CUDA_LIBRARY=" + missing}
	job := []string{"--elems", "64K", "--chunk", "16K", "--iters", "1", "--repeat", "1"}
	// The variable names a file that is not there: the line says so (the
	// trial's said to set it, when it was set).
	first := "overlap run: no NVIDIA driver found (tried 1 path(s); OVERLAP_CUDA_LIBRARY names " + missing + ", which does not exist): running on the CPU simulator instead (--gpu makes this an error)\n"

	cmd, stdout, stderr := cliChild(t, noDriver, append([]string{"run"}, job...)...)
	require.NoError(t, cmd.Run(), stderr.String())
	assert.True(t, strings.HasPrefix(stdout.String(), first+"overlap run: seed (1 iterations) on simulator, 65536 float32 elements"), stdout.String())
	assert.Empty(t, stderr.String())

	cmd, stdout, stderr = cliChild(t, noDriver, "run", "--iters", "1", "--repeat", "1", "--no-baseline")
	require.NoError(t, cmd.Run(), stderr.String())
	assert.True(t, strings.HasPrefix(stdout.String(), first+simSmallerNote(simDefaultElems)+"\n"), "the simulator's default job: %s", stdout.String())

	cmd, stdout, stderr = cliChild(t, noDriver, append([]string{"run", "--json"}, job...)...)
	require.NoError(t, cmd.Run(), stderr.String())
	var res struct {
		Simulated bool   `json:"simulated"`
		NoGPU     string `json:"no_gpu"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), stdout.String())
	assert.True(t, res.Simulated)
	assert.Equal(t, strings.TrimPrefix(strings.TrimSuffix(first, "\n"), "overlap run: "), res.NoGPU)

	for _, gpu := range [][]string{{"--gpu"}, {"--device", "0"}, {"--devices", "0"}, {"--devices", "all"}} {
		cmd, stdout, stderr = cliChild(t, noDriver, append(append([]string{"run"}, gpu...), job...)...)
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v: exit %v", gpu, err)
		assert.Equal(t, exitFail, ee.ExitCode(), gpu)
		assert.Empty(t, stdout.String())
		assert.Equal(t, "overlap: no NVIDIA driver found (tried 1 path(s); OVERLAP_CUDA_LIBRARY names "+missing+", which does not exist); use --sim to run on the CPU simulator\n", stderr.String(), gpu)
	}

	cmd, stdout, stderr = cliChild(t, noDriver, append([]string{"run", "--sim"}, job...)...)
	require.NoError(t, cmd.Run(), stderr.String())
	assert.True(t, strings.HasPrefix(stdout.String(), "overlap run: seed (1 iterations) on simulator"), "--sim as it was: %s", stdout.String())

	code, _, errOut := runCLI("run", "--sim", "--gpu")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap run: --sim and --gpu ask for different machines; give one\n", errOut)
}

// TestTrialSmallThings: the trial's smaller findings.
func TestTrialSmallThings(t *testing.T) {
	dir := t.TempDir()
	t.Run("streaming axpb", func(t *testing.T) {
		// It was refused with a list of kernels that left axpb out.
		in, out := filepath.Join(dir, "in.f32"), filepath.Join(dir, "axpb.f32")
		require.Equal(t, exitOK, runCLIcode("gen", "--size", "40000", "--out", in))
		code, stdout, errOut := runCLI("stream", "--sim", "--kernel", "axpb", "--in", in, "--out", out, "--chunk", "1K", "--verify")
		require.Equal(t, exitOK, code, errOut)
		assert.Contains(t, stdout, "every one of the 10000 output elements")
		x, want := make([]float32, 10000), make([]float32, 10000)
		kernels.FillPattern(x, 0)
		require.NoError(t, kernels.Axpb.CPU([][]float32{want}, [][]float32{x}))
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(driver.Bytes(want), got))
		code, _, errOut = runCLI("stream", "--sim", "--kernel", "fft", "--in", in, "--out", out)
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, `overlap stream: --kernel "fft": unknown (have axpb, lerp, saxpy, seed)`+"\n", errOut)
	})
	t.Run("sim devices 1000", func(t *testing.T) {
		// It silently simulated one device.
		code, stdout, errOut := runWithin(t, 20*time.Second, "run", "--sim", "--devices", "1000")
		assert.Equal(t, exitUsage, code)
		assert.Empty(t, stdout)
		assert.Equal(t, "overlap run: --devices 1000: the simulator has at most 16 devices, 0 to 15 (--devices 0,1 simulates two)\n", errOut)
	})
	t.Run("sim profile directory", func(t *testing.T) {
		// It said "unexpected end of JSON input".
		code, _, errOut := runCLI("run", "--sim", "--profile", dir)
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap run: --profile "+dir+": is a directory\n", errOut)
		code, _, errOut = runCLI("run", "--sim", "--profile", filepath.Join(dir, "none.json"))
		assert.Equal(t, exitUsage, code)
		assert.Equal(t, "overlap run: --profile "+filepath.Join(dir, "none.json")+": no such file\n", errOut)
	})
}

// TestNoGPUReasons: the simulator takes over where no GPU can be used at
// all (no driver library, a system NVIDIA ships no CUDA driver for, such
// as FreeBSD, or a 32-bit build), not where a driver was found and failed:
// that is reported as the error it is.
func TestNoGPUReasons(t *testing.T) {
	defer func(f func() error) { loadDriver = f }(loadDriver)
	for _, c := range []struct {
		err  error
		want string
	}{
		{&loader.OpenError{Attempts: []loader.Attempt{{Path: "/x/libcuda.so.1", Err: errors.New("/x/libcuda.so.1: cannot open shared object file: No such file or directory")}}},
			"no NVIDIA driver found (tried 1 path(s); none exists; set OVERLAP_CUDA_LIBRARY to the driver library's path)"},
		{fmt.Errorf("%w: freebsd/amd64 (overlap loads the CUDA driver on linux and windows)", loader.ErrUnsupported),
			"loader: operating system not supported: freebsd/amd64 (overlap loads the CUDA driver on linux and windows)"},
		{fmt.Errorf("%w: libcuda.so.1 supports CUDA 11.4", loader.ErrDriverTooOld), ""},
		{nil, ""},
	} {
		loadDriver = func() error { return c.err }
		assert.Equal(t, c.want, noGPU(), "%v", c.err)
	}
}
