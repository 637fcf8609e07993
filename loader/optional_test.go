package loader

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGlob answers glob patterns from a table, as filepath.Glob would on
// a machine with those folders.
func fakeGlob(m map[string][]string) func(string) ([]string, error) {
	return func(p string) ([]string, error) { return m[p], nil }
}

func TestOptionalCandidates(t *testing.T) {
	lib := Optional{
		Name: "NVRTC", EnvVar: "OVERLAP_NVRTC_LIBRARY",
		Linux:   []string{"libnvrtc.so.13", "libnvrtc.so.12"},
		Windows: []string{"nvrtc64_130_0.dll"},
		Wheels:  []string{"nvidia/cuda_nvrtc/lib"},
	}
	cases := []struct {
		name   string
		goos   string
		env    map[string]string
		globs  map[string][]string
		want   []string
		prefix bool // want is only the start of the list
	}{
		{
			name: "override wins alone", goos: "linux",
			env:  map[string]string{"OVERLAP_NVRTC_LIBRARY": "/opt/x/libnvrtc.so", "CUDA_PATH": "/c"},
			want: []string{"/opt/x/libnvrtc.so"},
		},
		{
			name: "linux: loader path, toolkits newest first, wheels", goos: "linux",
			env: map[string]string{"CUDA_PATH": "/opt/cuda/", "CUDA_HOME": "/opt/cuda", "VIRTUAL_ENV": "/venv"},
			globs: map[string][]string{
				"/usr/local/cuda-*":        {"/usr/local/cuda-12.4", "/usr/local/cuda-12.10", "/usr/local/cuda-13.0"},
				"/venv/lib/python3*":       {"/venv/lib/python3.10", "/venv/lib/python3.12"},
				"/usr/local/lib/python3*":  nil,
				"/usr/lib/python3":         {"/usr/lib/python3"},
				"/nonexistent/lib/python3": nil,
			},
			want: []string{
				"libnvrtc.so.13", "libnvrtc.so.12",
				"/opt/cuda/lib64/libnvrtc.so.13", "/opt/cuda/lib64/libnvrtc.so.12",
				"/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
				"/usr/local/cuda-13.0/lib64/libnvrtc.so.13", "/usr/local/cuda-13.0/lib64/libnvrtc.so.12",
				"/usr/local/cuda-12.10/lib64/libnvrtc.so.13", "/usr/local/cuda-12.10/lib64/libnvrtc.so.12",
				"/usr/local/cuda-12.4/lib64/libnvrtc.so.13", "/usr/local/cuda-12.4/lib64/libnvrtc.so.12",
				"/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.13",
				"/venv/lib/python3.12/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
				"/venv/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.13",
				"/venv/lib/python3.10/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
				"/usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.13",
				"/usr/lib/python3/dist-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
			},
		},
		{
			name: "windows: full paths only", goos: "windows",
			env: map[string]string{"CUDA_PATH": `C:\CUDA\v13.0`, "ProgramFiles": `C:\Program Files`},
			globs: map[string][]string{
				`C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v*`: {`C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.8`},
			},
			want: []string{
				`C:\CUDA\v13.0\bin\x64\nvrtc64_130_0.dll`, `C:\CUDA\v13.0\bin\nvrtc64_130_0.dll`,
				`C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.8\bin\x64\nvrtc64_130_0.dll`,
				`C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v12.8\bin\nvrtc64_130_0.dll`,
			},
		},
		{name: "darwin has none", goos: "darwin", env: map[string]string{}, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, lib.Candidates(tc.goos, "amd64", env(tc.env), fakeGlob(tc.globs)))
		})
	}
}

func TestNewestFirst(t *testing.T) {
	assert.Equal(t, []string{"/a/cuda-13.0", "/a/cuda-12.10", "/a/cuda-12.4", "/a/cuda-12", "/a/cuda-x"},
		newestFirst([]string{"/a/cuda-12.4", "/a/cuda-x", "/a/cuda-12", "/a/cuda-13.0", "/a/cuda-12.10"}))
}

// TestOptionalAbsent: no candidate opens, and the error names the
// library, the names looked for, every path tried and the override.
func TestOptionalAbsent(t *testing.T) {
	if !platformSupported {
		t.Skip("platform unsupported")
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope", "libnvrtc.so.13")
	t.Setenv(NVRTC.EnvVar, missing)
	_, err := OpenOptional(NVRTC)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoLibrary), "errors.Is(err, ErrNoLibrary): %v", err)
	assert.False(t, errors.Is(err, ErrNoDriver), "an optional library's absence is not the driver's")
	var oe *OptionalError
	require.True(t, errors.As(err, &oe))
	require.Len(t, oe.Attempts, 1, "the override is the only candidate")
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "loader: NVRTC not found; tried 1 path(s):\n\t"+missing+": "), msg)
	assert.True(t, strings.HasSuffix(msg, "\nset OVERLAP_NVRTC_LIBRARY to the library's path"), msg)
	if runtime.GOOS == "linux" {
		// The one path tried is the override's: the variable names nothing.
		assert.Equal(t, "NVRTC (libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so) not found (tried 1 path(s); OVERLAP_NVRTC_LIBRARY names "+missing+", which does not exist)", oe.Brief())
		// A few other paths are named, and the variable suggested.
		few := &OptionalError{Library: NVRTC, Attempts: []Attempt{{Path: "/a/libnvrtc.so", Err: errors.New("/a/libnvrtc.so: cannot open shared object file: No such file or directory")}}}
		assert.Equal(t, "NVRTC (libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so) not found (tried 1 path(s); none exists: /a/libnvrtc.so; set OVERLAP_NVRTC_LIBRARY to its path)", few.Brief())
	}

	// Without the override: the places tried are each named. Only those
	// under dir are opened, since a host may have a real NVRTC elsewhere.
	if runtime.GOOS != "linux" {
		return
	}
	t.Setenv(NVRTC.EnvVar, "")
	var mine []string
	for _, p := range NVRTC.Candidates("linux", runtime.GOARCH, func(k string) string {
		if k == "CUDA_PATH" {
			return filepath.Join(dir, "cuda")
		}
		return ""
	}, nil) {
		if strings.HasPrefix(p, dir) {
			mine = append(mine, p)
		}
	}
	require.Len(t, mine, len(NVRTC.Linux))
	_, err = NVRTC.OpenFirst(mine)
	require.Error(t, err)
	require.True(t, errors.As(err, &oe))
	assert.Len(t, oe.Attempts, len(mine))
	for _, p := range mine {
		assert.Contains(t, err.Error(), "\n\t"+p+": cannot open shared object file")
	}
}

// TestOptionalWrongLibrary: a library that opens but lacks the probe is
// refused, and the reason says so.
func TestOptionalWrongLibrary(t *testing.T) {
	libc := findLibc(t)
	_, err := CUBLAS.OpenFirst([]string{libc})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoLibrary))
	assert.Contains(t, err.Error(), "\n\t"+libc+": opened, but it does not export cublasCreate_v2: not cuBLAS")
	var oe *OptionalError
	require.True(t, errors.As(err, &oe))
	assert.Contains(t, oe.Brief(), libc+": opened, but it does not export cublasCreate_v2: not cuBLAS")
}

// TestOptionalOverridePresent builds a tiny library with the C compiler
// and finds it through the override, companion first: the library's
// function calls one of the companion's, which the dynamic loader can
// only resolve because the companion was opened beside it first.
func TestOptionalOverridePresent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("builds an ELF shared library; runs on linux")
	}
	cc := cCompiler(t)
	dir := t.TempDir()
	comp := filepath.Join(dir, "libfakecomp.so.1")
	main := filepath.Join(dir, "libfakeopt.so.1")
	buildSO(t, cc, comp, "int fake_companion(void) { return 41; }", "-Wl,-soname,libfakecomp.so.1")
	buildSO(t, cc, main, "int fake_companion(void);\nint fake_probe(void) { return fake_companion() + 1; }",
		"-L"+dir, "-l:libfakecomp.so.1")
	lib := Optional{Name: "Fake", EnvVar: "OVERLAP_FAKEOPT_LIBRARY", Linux: []string{"libfakeopt.so.1"},
		Companions: []string{"libfakecomp.so.*"}, Probe: "fake_probe"}
	t.Setenv(lib.EnvVar, main)
	l, err := OpenOptional(lib)
	require.NoError(t, err)
	assert.Equal(t, main, l.Path())
	p, err := l.Symbol("fake_probe")
	require.NoError(t, err)
	assert.Equal(t, uintptr(42), call(p))
	_, err = l.Symbol("fake_absent")
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrMissingSymbol))
	assert.Equal(t, "loader: symbol fake_absent: not exported by Fake ("+main+")", err.Error())
}

func cCompiler(t *testing.T) string {
	t.Helper()
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		if p, err := exec.LookPath(cc[0]); err == nil {
			return p
		}
	}
	for _, n := range []string{"cc", "gcc", "clang"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Skip("skipping: no C compiler to build a test library (set CC)")
	return ""
}

func buildSO(t *testing.T, cc, out, src string, flags ...string) {
	t.Helper()
	c := out + ".c"
	require.NoError(t, os.WriteFile(c, []byte(src+"\n"), 0o644))
	args := append([]string{"-shared", "-fPIC", "-o", out, c}, flags...)
	if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", cc, args, err, msg)
	}
}
