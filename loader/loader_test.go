package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestCandidatesOrder(t *testing.T) {
	cases := []struct {
		name         string
		goos, goarch string
		env          map[string]string
		want         []string
	}{
		{
			name: "override wins alone", goos: "linux", goarch: "amd64",
			env:  map[string]string{EnvVar: "/opt/x/libcuda.so.1", "LD_LIBRARY_PATH": "/a"},
			want: []string{"/opt/x/libcuda.so.1"},
		},
		{
			name: "linux amd64 with loader path", goos: "linux", goarch: "amd64",
			env: map[string]string{"LD_LIBRARY_PATH": "/a:/b/::/usr/lib64"},
			want: []string{
				"libcuda.so.1", "libcuda.so",
				"/a/libcuda.so.1", "/a/libcuda.so",
				"/b/libcuda.so.1", "/b/libcuda.so",
				"/usr/lib64/libcuda.so.1", "/usr/lib64/libcuda.so",
				"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so",
				"/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so",
				"/usr/lib/wsl/lib/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so",
			},
		},
		{
			name: "linux arm64", goos: "linux", goarch: "arm64",
			env: map[string]string{},
			want: []string{
				"libcuda.so.1", "libcuda.so",
				"/usr/lib/aarch64-linux-gnu/libcuda.so.1", "/usr/lib/aarch64-linux-gnu/libcuda.so",
				"/usr/lib64/libcuda.so.1", "/usr/lib64/libcuda.so",
				"/usr/local/nvidia/lib64/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so",
				"/usr/lib/wsl/lib/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so",
				"/usr/lib/aarch64-linux-gnu/nvidia/libcuda.so.1", "/usr/lib/aarch64-linux-gnu/nvidia/libcuda.so",
			},
		},
		{
			name: "windows", goos: "windows", goarch: "amd64",
			env:  map[string]string{"SystemRoot": `C:\Windows`},
			want: []string{"nvcuda.dll", `C:\Windows\System32\nvcuda.dll`},
		},
		{name: "darwin has none", goos: "darwin", goarch: "arm64", env: map[string]string{}, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Candidates(tc.goos, tc.goarch, env(tc.env)))
		})
	}
}

func TestOpenFirstListsEveryAttempt(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fake library files are ELF-specific; this test runs on linux")
	}
	dir := t.TempDir()
	junk := filepath.Join(dir, "libcuda.so.1")
	require.NoError(t, os.WriteFile(junk, []byte("this is not a shared library"), 0o644))
	missing := filepath.Join(dir, "nope", "libcuda.so.1")

	lib, err := OpenFirst([]string{missing, junk})
	require.Error(t, err)
	assert.Nil(t, lib)
	assert.True(t, errors.Is(err, ErrNoDriver), "errors.Is(err, ErrNoDriver) must hold: %v", err)

	var oe *OpenError
	require.True(t, errors.As(err, &oe))
	require.Len(t, oe.Attempts, 2)
	assert.Equal(t, missing, oe.Attempts[0].Path)
	assert.Equal(t, junk, oe.Attempts[1].Path)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "loader: no NVIDIA driver found; tried 2 path(s):\n\t"+missing+": "), msg)
	assert.Contains(t, msg, "\n\t"+junk+": ")
}

// TestOpenErrorNamesItsCause: dlerror's message belongs to the thread
// that called dlopen, so the goroutine must not move between the two
// calls. Many goroutines open a missing library at once, with others
// keeping the scheduler busy; every error must still say why (an empty
// reason came up once in CI before dlopen locked its thread).
func TestOpenErrorNamesItsCause(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("dlopen's messages are glibc's; this test runs on linux")
	}
	missing := filepath.Join(t.TempDir(), "nope", "libcuda.so.1")
	stop := make(chan struct{})
	var busy sync.WaitGroup
	for range 4 {
		busy.Add(1)
		go func() {
			defer busy.Done()
			for {
				select {
				case <-stop:
					return
				default:
					runtime.Gosched()
				}
			}
		}()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var empty []string
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 300 {
				_, err := openPath(missing)
				if err == nil || !strings.Contains(err.Error(), "No such file or directory") {
					mu.Lock()
					empty = append(empty, fmt.Sprintf("%v", err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	busy.Wait()
	assert.Empty(t, empty, "opens of a missing library whose error does not say why")
}

func TestOpenFirstRejectsNonCUDALibrary(t *testing.T) {
	libc := findLibc(t)
	_, err := OpenFirst([]string{libc})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoDriver))
	assert.Contains(t, err.Error(), libc+": opened, but it does not export cuInit: not a CUDA driver library")
}

func TestOpenFirstEmpty(t *testing.T) {
	if !platformSupported {
		t.Skip("platform unsupported")
	}
	_, err := OpenFirst(nil)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoDriver))
	assert.Contains(t, err.Error(), "no candidate paths")
}

func TestOpenWithOverrideToJunk(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fake library files are ELF-specific; this test runs on linux")
	}
	junk := filepath.Join(t.TempDir(), "fake.so")
	require.NoError(t, os.WriteFile(junk, []byte{0x7f, 'E', 'L', 'F', 0, 1, 2}, 0o644))
	t.Setenv(EnvVar, junk)
	_, err := Open()
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrNoDriver))
	var oe *OpenError
	require.True(t, errors.As(err, &oe))
	require.Len(t, oe.Attempts, 1, "the override must be the only candidate")
	assert.Equal(t, junk, oe.Attempts[0].Path)
}

// fakeLibrary opens libc as if it were a driver, to exercise symbol
// resolution without a GPU.
func fakeLibrary(t *testing.T) *Library {
	libc := findLibc(t)
	h, err := dlopen(libc)
	require.NoError(t, err)
	return &Library{path: libc, handle: h, version: 12040}
}

func TestResolveMissingSymbol(t *testing.T) {
	lib := fakeLibrary(t)
	_, err := lib.Resolve(Symbol{Name: "cuFuncGetParamInfo", Version: 12040, Export: "cuFuncGetParamInfo"})
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrMissingSymbol))
	var se *SymbolError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, "cuFuncGetParamInfo", se.Symbol.Name)
	assert.Equal(t, "loader: driver symbol cuFuncGetParamInfo (CUDA 12.4 ABI, export cuFuncGetParamInfo) not available from driver 12.4: not exported by "+lib.path, err.Error())
}

func TestResolveFallsBackToExport(t *testing.T) {
	lib := fakeLibrary(t)
	p, err := lib.Resolve(Symbol{Name: "getpid", Version: 2000, Export: "getpid"})
	require.NoError(t, err)
	assert.NotZero(t, p)
}

func TestResolveWithoutLibrary(t *testing.T) {
	var lib *Library
	_, err := lib.Resolve(Symbol{Name: "cuInit", Export: "cuInit"})
	assert.True(t, errors.Is(err, ErrMissingSymbol))
	assert.Contains(t, err.Error(), "no library is open")
}

func TestCheckVersion(t *testing.T) {
	lib := &Library{path: "/x/libcuda.so.1", version: 11080}
	err := lib.CheckVersion(MinDriverVersion)
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrDriverTooOld))
	assert.Equal(t, "loader: NVIDIA driver too old: /x/libcuda.so.1 supports CUDA 11.8, but overlap needs CUDA 12.0 or newer; update the NVIDIA driver", err.Error())
	lib.version = 13000
	assert.NoError(t, lib.CheckVersion(MinDriverVersion))
}

func TestFormatVersion(t *testing.T) {
	assert.Equal(t, "13.0", FormatVersion(13000))
	assert.Equal(t, "12.4", FormatVersion(12040))
	assert.Equal(t, "(unknown version)", FormatVersion(0))
}

func findLibc(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs a linux libc to stand in for a library")
	}
	for _, p := range []string{"libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6"} {
		if h, err := dlopen(p); err == nil {
			dlclose(h)
			return p
		}
	}
	t.Fatal("no libc.so.6 to stand in for a library")
	return ""
}

// TestWindowsLoadFlags guards issue 9: nvcuda.dll is loaded from System32
// alone, never from the program's or the current directory.
func TestWindowsLoadFlags(t *testing.T) {
	cases := []struct {
		path string
		want uint32
	}{
		{"nvcuda.dll", loadLibrarySearchSystem32},
		{`C:\Windows\System32\nvcuda.dll`, loadWithAlteredSearchPath},
		{`D:\drivers\nvcuda.dll`, loadWithAlteredSearchPath},
		{"./nvcuda.dll", loadWithAlteredSearchPath},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, windowsLoadFlags(c.path), c.path)
	}
}

// TestOpenErrorTexts guards issue 10: the full error has one line per path
// without repeating it, and Brief keeps the reason of a library that exists
// but is not a driver, in one line.
func TestOpenErrorTexts(t *testing.T) {
	e := &OpenError{Attempts: []Attempt{
		{Path: "libcuda.so.1", Err: errors.New("libcuda.so.1: cannot open shared object file: No such file or directory")},
		{Path: "/opt/other.so", Err: errors.New("opened, but it does not export cuInit: not a CUDA driver library")},
	}}
	assert.Equal(t, "loader: no NVIDIA driver found; tried 2 path(s):\n"+
		"\tlibcuda.so.1: cannot open shared object file: No such file or directory\n"+
		"\t/opt/other.so: opened, but it does not export cuInit: not a CUDA driver library", e.Error())
	assert.Equal(t, "no NVIDIA driver found (tried 2 path(s); /opt/other.so: opened, but it does not export cuInit: not a CUDA driver library)", e.Brief())
	none := &OpenError{Attempts: e.Attempts[:1]}
	assert.Equal(t, "no NVIDIA driver found (tried 1 path(s); none exists; set OVERLAP_CUDA_LIBRARY to the driver library's path)", none.Brief())
	assert.NotContains(t, none.Brief(), "\n")
	// Set, and naming nothing: it says so, rather than to set it.
	t.Setenv(EnvVar, "/nonexistent/libcuda.so.1")
	named := &OpenError{Attempts: []Attempt{{Path: "/nonexistent/libcuda.so.1", Err: errors.New("/nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory")}}}
	assert.Equal(t, "no NVIDIA driver found (tried 1 path(s); OVERLAP_CUDA_LIBRARY names /nonexistent/libcuda.so.1, which does not exist)", named.Brief())
	assert.Equal(t, "no NVIDIA driver found (tried 1 path(s); none exists; set OVERLAP_CUDA_LIBRARY to the driver library's path)", none.Brief(), "another path than the variable's")
}
