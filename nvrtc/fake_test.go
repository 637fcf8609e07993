package nvrtc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeNVRTC is the fake library (testdata/fakenvrtc.c) opened in this
// process: its bound entry points and its controls.
type fakeNVRTC struct {
	lib  *lib
	path string
	syms map[string]uintptr
}

// buildFake compiles testdata/fakenvrtc.c into a new folder and returns
// the library's path; it skips the test without a C compiler.
func buildFake(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the fake NVRTC is an ELF shared library; runs on linux")
	}
	cc := ""
	if f := strings.Fields(os.Getenv("CC")); len(f) > 0 {
		cc, _ = exec.LookPath(f[0])
	}
	for _, n := range []string{"cc", "gcc", "clang"} {
		if cc == "" {
			cc, _ = exec.LookPath(n)
		}
	}
	if cc == "" {
		t.Skip("skipping: no C compiler to build the fake NVRTC (set CC)")
	}
	src, err := filepath.Abs(filepath.Join("testdata", "fakenvrtc.c"))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "libnvrtc.so.12")
	if msg, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("building the fake NVRTC: %v\n%s", err, msg)
	}
	return out
}

// openFake builds a fresh fake (its own state) and binds it.
func openFake(t *testing.T) *fakeNVRTC {
	t.Helper()
	path := buildFake(t)
	l, err := loader.NVRTC.OpenFirst([]string{path})
	require.NoError(t, err)
	b, err := bind(l)
	require.NoError(t, err)
	f := &fakeNVRTC{lib: b, path: path, syms: map[string]uintptr{}}
	for _, n := range []string{"fake_live", "fake_bad_destroys", "fake_fail"} {
		p, err := l.Symbol(n)
		require.NoError(t, err)
		f.syms[n] = p
	}
	return f
}

func (f *fakeNVRTC) live() int { r, _, _ := purego.SyscallN(f.syms["fake_live"]); return int(int32(r)) }
func (f *fakeNVRTC) badDestroys() int {
	r, _, _ := purego.SyscallN(f.syms["fake_bad_destroys"])
	return int(int32(r))
}
func (f *fakeNVRTC) fail(name string, code int) {
	b := append([]byte(name), 0)
	purego.SyscallN(f.syms["fake_fail"], uintptr(unsafe.Pointer(&b[0])), uintptr(code))
	runtime.KeepAlive(b)
}

// noLeak checks that every program was destroyed, through its own handle.
func (f *fakeNVRTC) noLeak(t *testing.T) {
	t.Helper()
	assert.Equal(t, 0, f.live(), "programs created and not destroyed")
	assert.Equal(t, 0, f.badDestroys(), "nvrtcDestroyProgram given a handle that is not live")
}

const fakeSource = `extern "C" __global__ void double_it(float *out, const float *in, unsigned n) {}
//ptx .visible .entry double_it(
//ptx 	.param .u64 out,
//ptx 	.param .u64 in,
//ptx 	.param .u32 n
//ptx )
//ptx {
//ptx 	ret;
//ptx }
`

const fakePTXBody = `.visible .entry double_it(
	.param .u64 out,
	.param .u64 in,
	.param .u32 n
)
{
	ret;
}
`

func TestFakeCompile(t *testing.T) {
	f := openFake(t)
	assert.Equal(t, 12, f.lib.major)
	assert.Equal(t, 8, f.lib.minor)
	cases := []struct {
		name    string
		source  string
		opts    Options
		ptx     string
		cubin   string
		log     string
		arch    string
		errText string
		errIs   error
	}{
		{
			name: "defaults: compute_80, PTX only", source: fakeSource,
			ptx: ".version 8.0\n.target sm_80\n.address_size 64\n" + fakePTXBody,
			log: "option --gpu-architecture=compute_80", arch: "compute_80",
		},
		{
			name: "a real architecture gives a CUBIN too", source: fakeSource, opts: Options{Arch: "sm_90"},
			ptx:   ".version 8.0\n.target sm_90\n.address_size 64\n" + fakePTXBody,
			cubin: "FAKECUBIN sm_90", log: "option --gpu-architecture=sm_90", arch: "sm_90",
		},
		{
			name: "options in order, then the flags", source: fakeSource,
			opts: Options{Arch: "compute_90", DefaultDevice: true, Flags: []string{"-use_fast_math", "-DN=4"}},
			ptx:  ".version 8.0\n.target sm_90\n.address_size 64\n" + fakePTXBody,
			log:  "option --gpu-architecture=compute_90\noption -default-device\noption -use_fast_math\noption -DN=4", arch: "compute_90",
		},
		{
			name: "headers by name", source: fakeSource,
			opts: Options{Headers: []Header{{"a.h", "#define A 1"}, {"dir/b.h", ""}}},
			ptx:  ".version 8.0\n.target sm_80\n.address_size 64\n" + fakePTXBody,
			log:  "header a.h=#define A 1\nheader dir/b.h=\noption --gpu-architecture=compute_80", arch: "compute_80",
		},
		{
			name: "a compile error carries the log", source: "#error no\n",
			errText: "nvrtc: kernel.cu: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6):\noption --gpu-architecture=compute_80\nkernel.cu(1): error: fake error",
			errIs:   ErrCompilation,
		},
		{name: "empty source", source: " \n", errText: "nvrtc: invalid argument: kernel.cu: empty source", errIs: ErrInvalidArgument},
		{name: "NUL in the source", source: "a\x00b", errText: "nvrtc: invalid argument: the source contains a NUL byte", errIs: ErrInvalidArgument},
		{name: "NUL in a flag", source: fakeSource, opts: Options{Flags: []string{"-D\x00"}}, errText: "nvrtc: invalid argument: option -D\x00 contains a NUL byte", errIs: ErrInvalidArgument},
		{name: "a header without a name", source: fakeSource, opts: Options{Headers: []Header{{"", "x"}}}, errText: "nvrtc: invalid argument: header 0 has no name", errIs: ErrInvalidArgument},
		{
			name: "a bad architecture", source: fakeSource, opts: Options{Arch: "90"},
			errText: `nvrtc: invalid argument: Arch "90": want compute_XY (PTX) or sm_XY (CUBIN), such as compute_90`, errIs: ErrInvalidArgument,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := f.lib.compileSource(tc.source, "", tc.opts)
			f.noLeak(t)
			if tc.errText != "" {
				require.Error(t, err)
				assert.Nil(t, res)
				assert.Equal(t, tc.errText, err.Error())
				assert.True(t, errors.Is(err, tc.errIs), "errors.Is(%v, %v)", err, tc.errIs)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.ptx, string(res.PTX))
			if tc.cubin == "" {
				assert.Nil(t, res.CUBIN)
				assert.Equal(t, tc.ptx, string(res.Image()))
			} else {
				assert.Equal(t, tc.cubin, string(res.CUBIN))
				assert.Equal(t, tc.cubin, string(res.Image()))
			}
			assert.Equal(t, tc.log, res.Log)
			assert.Equal(t, tc.arch, res.Arch)
		})
	}
}

// TestFakeFailures makes each entry point fail in turn: the error names
// it and its code, and the program is destroyed on every path.
func TestFakeFailures(t *testing.T) {
	f := openFake(t)
	cases := []struct {
		fn   string
		code int
		arch string
		want string
	}{
		{"nvrtcCreateProgram", 1, "", "nvrtc: x.cu: nvrtcCreateProgram: NVRTC_ERROR_OUT_OF_MEMORY (1)"},
		{"nvrtcCompileProgram", 5, "", "nvrtc: x.cu: nvrtcCompileProgram: NVRTC_ERROR_INVALID_OPTION (5)"},
		{"nvrtcGetProgramLogSize", 11, "", "nvrtc: x.cu: nvrtcGetProgramLogSize: NVRTC_ERROR_INTERNAL_ERROR (11)"},
		{"nvrtcGetProgramLog", 11, "", "nvrtc: x.cu: nvrtcGetProgramLog: NVRTC_ERROR_INTERNAL_ERROR (11)"},
		{"nvrtcGetPTXSize", 4, "", "nvrtc: x.cu: nvrtcGetPTXSize: NVRTC_ERROR_INVALID_PROGRAM (4)"},
		{"nvrtcGetPTX", 99, "", "nvrtc: x.cu: nvrtcGetPTX: unknown nvrtcResult (99)"},
		{"nvrtcGetCUBINSize", 3, "sm_90", "nvrtc: x.cu: nvrtcGetCUBINSize: NVRTC_ERROR_INVALID_INPUT (3)"},
		{"nvrtcGetCUBIN", 3, "sm_90", "nvrtc: x.cu: nvrtcGetCUBIN: NVRTC_ERROR_INVALID_INPUT (3)"},
		{"nvrtcDestroyProgram", 11, "", "nvrtc: x.cu: nvrtcDestroyProgram: NVRTC_ERROR_INTERNAL_ERROR (11)"},
	}
	for _, tc := range cases {
		t.Run(tc.fn, func(t *testing.T) {
			f.fail(tc.fn, tc.code)
			defer f.fail("", 0)
			_, err := f.lib.compileSource(fakeSource, "x.cu", Options{Arch: tc.arch})
			f.noLeak(t)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			var e *Error
			require.True(t, errors.As(err, &e))
			assert.Equal(t, tc.fn, e.Op)
			assert.False(t, errors.Is(err, ErrCompilation))
		})
	}
	// A real architecture's CUBIN stands without PTX.
	f.fail("nvrtcGetPTXSize", 4)
	res, err := f.lib.compileSource(fakeSource, "x.cu", Options{Arch: "sm_90"})
	f.fail("", 0)
	require.NoError(t, err)
	assert.Nil(t, res.PTX)
	assert.Equal(t, "FAKECUBIN sm_90", string(res.Image()))
	f.noLeak(t)
}

func TestArch(t *testing.T) {
	for _, a := range []string{"compute_80", "sm_90", "sm_90a", "compute_100f", "sm_120"} {
		got, err := Options{Arch: a}.arch()
		require.NoError(t, err, a)
		assert.Equal(t, a, got)
	}
	for _, a := range []string{"90", "sm90", "compute_9", "sm_90 -G", "lto_90"} {
		_, err := Options{Arch: a}.arch()
		assert.True(t, errors.Is(err, ErrInvalidArgument), a)
	}
	got, err := Options{}.arch()
	require.NoError(t, err)
	assert.Equal(t, DefaultArch, got)
}

// childEnv marks the child process of inChild.
const childEnv = "OVERLAP_NVRTC_TEST_CHILD"

// inChild runs the calling test again in a new process of the test
// binary with env set, where NVRTC has not been opened yet, and reports
// its outcome: true in the child (go on), false in the parent (return).
func inChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name()), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s in a child process: %v\n%s", t.Name(), err, out)
	}
	return false
}

// TestAbsentLibrary: without NVRTC, every call says what was looked for
// and where.
func TestAbsentLibrary(t *testing.T) {
	missing := "/nonexistent/overlap-test/libnvrtc.so.13"
	if !inChild(t, loader.NVRTC.EnvVar+"="+missing) {
		return
	}
	err := Load()
	require.Error(t, err)
	assert.True(t, errors.Is(err, loader.ErrNoLibrary), "errors.Is(err, loader.ErrNoLibrary): %v", err)
	if runtime.GOOS == "linux" {
		assert.Equal(t, "loader: NVRTC not found; tried 1 path(s):\n\t"+missing+
			": cannot open shared object file: No such file or directory\nset OVERLAP_NVRTC_LIBRARY to the library's path", err.Error())
	}
	_, err2 := Compile(fakeSource, "k.cu", Options{})
	assert.Equal(t, err, err2)
	_, _, err3 := Version()
	assert.Equal(t, err, err3)
	assert.Equal(t, "", LibraryPath())
	_, err4 := CompileKernelFile(filepath.Join("testdata", "scale.cu"), "scale", Options{})
	assert.Equal(t, err, err4)
}

// TestFakePublic goes through the package's own loading, to the fake
// named by the override.
func TestFakePublic(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		if !inChild(t, loader.NVRTC.EnvVar+"="+buildFake(t)) {
			return
		}
	}
	require.NoError(t, Load())
	assert.Equal(t, os.Getenv(loader.NVRTC.EnvVar), LibraryPath())
	major, minor, err := Version()
	require.NoError(t, err)
	assert.Equal(t, [2]int{12, 8}, [2]int{major, minor})
	res, err := Compile(fakeSource, "double.cu", Options{Arch: "compute_75"})
	require.NoError(t, err)
	assert.Equal(t, ".version 8.0\n.target sm_75\n.address_size 64\n"+fakePTXBody, string(res.PTX))

	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		return p
	}
	good := write("double.cu", fakeSource)
	res, err = CompileKernelFile(good, "double_it", Options{})
	require.NoError(t, err)
	file, err := ptx.Parse(res.PTX)
	require.NoError(t, err)
	e, ok := file.Entry("double_it")
	require.True(t, ok)
	assert.Len(t, e.Params, 3)

	mangled := write("mangled.cu", "//ptx .visible .entry _Z5scalePfPKfj(\n//ptx .param .u64 a\n//ptx )\n//ptx {\n//ptx ret;\n//ptx }\n")
	none := write("none.cu", "__device__ float f(float x) { return x; }\n")
	cases := []struct {
		path, entry, want string
		is                error
	}{
		{good, "wrong", "ptx: no such entry: " + good + " has no kernel \"wrong\"; its kernels are: double_it", ptx.ErrNoEntry},
		{mangled, "scale", "ptx: no such entry: " + mangled + ": kernel \"scale\" is compiled as the C++ name _Z5scalePfPKfj: declare it extern \"C\"", ptx.ErrNoEntry},
		{none, "f", "ptx: no such entry: " + none + " defines no __global__ kernel, so \"f\" cannot be launched", ptx.ErrNoEntry},
		{write("bad.cu", "#error x\n"), "k", "nvrtc: bad.cu: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6):\noption --gpu-architecture=compute_80\nbad.cu(1): error: fake error", ErrCompilation},
		{good, "", "nvrtc: invalid argument: no kernel entry name to look for in " + good, ErrInvalidArgument},
		{filepath.Join(dir, "absent.cu"), "k", "nvrtc: stat " + filepath.Join(dir, "absent.cu") + ": no such file or directory", os.ErrNotExist},
	}
	for _, tc := range cases {
		_, err := CompileKernelFile(tc.path, tc.entry, Options{})
		require.Error(t, err, tc.path)
		assert.Equal(t, tc.want, err.Error())
		assert.True(t, errors.Is(err, tc.is), "errors.Is(%v, %v)", err, tc.is)
	}
}
