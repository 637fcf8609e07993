package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The build's findings of the new user's trial (the trial): make test
// without a working C compiler, FreeBSD, and overlap version.

// testdataDir is cmd/overlap/testdata, wherever the test has moved to.
func testdataDir(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	require.True(t, ok)
	return filepath.Join(filepath.Dir(file), "testdata")
}

// repoRoot is the repository's root directory.
func repoRoot(t *testing.T) string {
	return filepath.Join(testdataDir(t), "..", "..", "..")
}

// TestMakeRaceWithoutACompiler: in the trial `make test CC=false` failed
// instead of skipping the race run: the Makefile asked `command -v`, which
// finds /bin/false. It now compiles a trivial C program to decide.
func TestMakeRaceWithoutACompiler(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("skipping: no make")
	}
	cmd := exec.Command("make", "-n", "race", "directcalls", "CC=false")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "make race: SKIPPED: the race detector needs cgo, and CC=false cannot compile a C program")
	assert.Contains(t, string(out), "make directcalls: race run SKIPPED")
	assert.NotContains(t, string(out), "test -race", "no race run is attempted")
}

// TestFreeBSDBuild: in the trial GOOS=freebsd failed with an error from
// inside purego. The loader, which cannot load a CUDA driver there (NVIDIA
// ships none for FreeBSD), builds without purego; the whole module builds
// with the flag that purego documents for CGO_ENABLED=0 (make cross).
func TestFreeBSDBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short: cross-compiles")
	}
	env := append(os.Environ(), "GOOS=freebsd", "GOARCH=amd64", "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	cmd := exec.Command("go", "list", "-deps", "./loader")
	cmd.Dir, cmd.Env = repoRoot(t), env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.NotContains(t, string(out), "purego", "the loader needs no purego where it cannot load a driver")
	cmd = exec.Command("go", "build", "-o", os.DevNull, "./loader")
	cmd.Dir, cmd.Env = repoRoot(t), env
	out, err = cmd.CombinedOutput()
	assert.NoError(t, err, "%s", out)
	cmd = exec.Command("go", "build", "-gcflags="+freeBSDGCFlags, "-o", os.DevNull, "./cmd/overlap")
	cmd.Dir, cmd.Env = repoRoot(t), env
	out, err = cmd.CombinedOutput()
	assert.NoError(t, err, "%s", out)
	mk, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	require.NoError(t, err)
	assert.Contains(t, string(mk), freeBSDGCFlags, "make cross builds for FreeBSD with the same flag")
}

// freeBSDGCFlags is what purego asks of a CGO_ENABLED=0 build for FreeBSD.
const freeBSDGCFlags = "github.com/ebitengine/purego/internal/fakecgo=-std"

// TestVersionNamesTheCommit: in the trial `overlap version` printed
// "(devel)": go run, a git worktree and -buildvcs=false record no
// version control information. A binary from make cli or make gpu-bundle
// carries the commit that the Makefile stamps.
func TestVersionNamesTheCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short: builds the command")
	}
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("skipping: no " + tool)
		}
	}
	root := repoRoot(t)
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skip("skipping: not a git checkout")
	}
	bin := filepath.Join(t.TempDir(), "overlap")
	cmd := exec.Command("make", "-s", "cli", "BIN="+bin)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false") // as this machine's go env has it
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	v, err := exec.Command(bin, "version").Output()
	require.NoError(t, err)
	assert.Regexp(t, `^overlap \S+ commit `+string(head[:12])+` \d{4}-\d\d-\d\dT\S+( \(modified\))?, go1\.\S+ \w+/\w+\n$`, string(v))
}
