//go:build linux

package fakecuda

import (
	"embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/loader"
)

// sources is the fake's C source: libcuda.c, the files of API families
// that it includes (one per family, such as memset.c), and zexports.h,
// the entry points package driver binds (generated from
// driver/prototypes.go). libcuda.c is the one translation unit.
//
//go:embed src/*.c src/*.h
var sources embed.FS

// childEnv marks the child process that runs a test against the fake.
const childEnv = "OVERLAP_FAKECUDA_CHILD"

// ErrNoCompiler reports that no C compiler was found to build the fake.
var ErrNoCompiler = errors.New("fakecuda: no C compiler found (set CC, or install cc, gcc or clang)")

// compiler returns the C compiler to use.
func compiler() (string, error) {
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		if p, err := exec.LookPath(cc[0]); err == nil {
			return p, nil
		}
	}
	for _, name := range []string{"cc", "gcc", "clang"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoCompiler
}

// Build compiles the fake driver into dir and returns the path of the
// library, named libcuda.so.1. Its error wraps ErrNoCompiler when there is
// no C compiler.
func Build(dir string) (string, error) {
	cc, err := compiler()
	if err != nil {
		return "", err
	}
	files, err := sources.ReadDir("src")
	if err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	for _, f := range files {
		b, err := sources.ReadFile("src/" + f.Name())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f.Name()), b, 0o644)
		}
		if err != nil {
			return "", fmt.Errorf("fakecuda: %w", err)
		}
	}
	src := filepath.Join(dir, "libcuda.c")
	out := filepath.Join(dir, "libcuda.so.1")
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", out, src, "-lpthread")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fakecuda: %s failed: %v\n%s", cc, err, msg)
	}
	return out, nil
}

// Run runs the calling test against the fake driver. In the test process
// it builds the fake, runs the test again in a child process whose driver
// library is the fake, reports the child's outcome as the test's own and
// returns nil: the caller then returns. In the child it returns the fake's
// controls. Without a C compiler it skips the test, saying so in one line.
//
//	func TestOnFake(t *testing.T) {
//		f := fakecuda.Run(t)
//		if f == nil {
//			return
//		}
//		... // the driver is the fake here
//	}
func Run(t *testing.T) *Fake {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		f, err := open(os.Getenv(loader.EnvVar))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	lib, err := Build(t.TempDir())
	if errors.Is(err, ErrNoCompiler) {
		t.Skip("skipping: no C compiler to build the fake CUDA driver (set CC)")
	}
	if err != nil {
		t.Fatal(err)
	}
	pattern := "^" + t.Name() + "$"
	if f := flag.Lookup("test.run"); f != nil {
		if _, sub, ok := strings.Cut(f.Value.String(), "/"); ok {
			pattern += "/" + sub
		}
	}
	args := []string{"-test.run", pattern, "-test.v", "-test.count=1"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", loader.EnvVar+"="+lib, "FAKE_CUDA_DEVICES=2")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	var passed, failed []string
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "--- PASS: "); ok && strings.Contains(name, "/") {
			passed = append(passed, name)
		}
		if name, ok := strings.CutPrefix(line, "--- FAIL: "); ok {
			failed = append(failed, name)
		}
	}
	if err != nil || len(failed) > 0 {
		t.Fatalf("against the fake driver (%s): %v; failed: %s\n%s", lib, err, strings.Join(failed, ", "), out)
	}
	t.Logf("against the fake driver: %d subtests passed in %v", len(passed), time.Since(start).Round(time.Millisecond))
	return nil
}

// Benchmark returns the fake's controls when the benchmark runs against the
// fake driver, and otherwise skips it, saying how to run it. Benchmarks
// cannot use [Run]'s child process (the parent would time the child), so
// the whole `go test -bench` run goes under the fake instead: `make
// bench-fake` builds the fake and runs the package's BenchmarkFake*
// benchmarks with the environment that Run gives its child
// (OVERLAP_FAKECUDA_CHILD=1 and the driver library pointed at the fake).
func Benchmark(b *testing.B) *Fake {
	b.Helper()
	if os.Getenv(childEnv) == "" {
		b.Skip("skipping: runs against the fake CUDA driver; use make bench-fake")
	}
	f, err := open(os.Getenv(loader.EnvVar))
	if err != nil {
		b.Fatal(err)
	}
	return f
}

// Kind is a kind of driver object the fake counts.
type Kind int

// The kinds, as the fake numbers them. AllObjects counts every kind but
// contexts.
const (
	AllObjects Kind = iota
	Contexts
	Streams
	Events
	Modules
	Functions
	DeviceMemory
	HostMemory
	Registrations
	MemPools
	Graphs
	GraphExecs
	Libraries
	Kernels // never counted: a kernel lives as long as its library
	Linkers
)

// Fake is the test-side control of the fake driver loaded in this process.
type Fake struct {
	syms map[string]uintptr
}

var controls = []string{"fake_reset", "fake_fail", "fake_delay", "fake_exec_delay", "fake_calls",
	"fake_violations", "fake_last_violation", "fake_live", "fake_primary_refs", "fake_current_device",
	"fake_host_live", "fake_pending", "fake_set_params", "fake_last_param", "fake_noop", "fake_last_launch",
	"fake_capturing_threads", "fake_last_launch_ex", "fake_host_calls"}

var (
	openOnce sync.Once
	opened   *Fake
	openErr  error
)

func open(path string) (*Fake, error) {
	openOnce.Do(func() {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			openErr = fmt.Errorf("fakecuda: %w", err)
			return
		}
		f := &Fake{syms: map[string]uintptr{}}
		for _, name := range controls {
			p, err := purego.Dlsym(h, name)
			if err != nil {
				openErr = fmt.Errorf("fakecuda: %s: %w", name, err)
				return
			}
			f.syms[name] = p
		}
		opened = f
	})
	return opened, openErr
}

// call calls a control. Go memory passed to it is converted to uintptr in
// the call's own arguments, which this directive makes escape to the heap,
// so that a stack move cannot leave C writing to a stale address.
//
//go:uintptrescapes
func (f *Fake) call(name string, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(f.syms[name], args...)
	return r
}

// cstr returns s NUL-terminated; the caller keeps it alive over the call.
func cstr(s string) []byte { return append([]byte(s), 0) }

// callStr calls a control whose first argument is a C string; extra
// arguments that the control does not take are ignored by the C ABI.
func (f *Fake) callStr(name, s string, a1, a2 uintptr) uintptr {
	b := cstr(s)
	r := f.call(name, uintptr(unsafe.Pointer(&b[0])), a1, a2)
	runtime.KeepAlive(b)
	return r
}

// Reset waits for queued work, then clears violations, failures, delays and
// parameter layouts.
func (f *Fake) Reset() { f.call("fake_reset") }

// Fail makes the nth call of the entry point export (such as
// "cuMemAlloc_v2") from now on return code; nth 0 means every call, and
// code 0 clears it.
func (f *Fake) Fail(export string, nth, code int) {
	f.callStr("fake_fail", export, uintptr(nth), uintptr(code))
}

// Delay makes every call of export sleep for d first. Three names delay a
// call after its work instead, just before it returns:
// "cuCtxSynchronize.return" and "cuEventSynchronize.return" (after the
// wait) and "cuEventQuery.return" (after the answer).
func (f *Fake) Delay(export string, d time.Duration) {
	f.callStr("fake_delay", export, uintptr(d.Microseconds()), 0)
}

// Noop turns the fake's no-op mode on or off: cuLaunchKernel, the
// asynchronous host copies, cuEventRecord and cuStreamWaitEvent then return
// success at once and do nothing, and cuCtxGetCurrent only reads the
// thread's context, so that a benchmark measures the binding's own cost
// per call. Reset turns it off.
func (f *Fake) Noop(on bool) {
	var v uintptr
	if on {
		v = 1
	}
	f.call("fake_noop", v)
}

// ExecDelay makes every queued stream operation take d on the device.
func (f *Fake) ExecDelay(d time.Duration) { f.call("fake_exec_delay", uintptr(d.Microseconds())) }

// Calls returns how often export has been called.
func (f *Fake) Calls(export string) int { return int(f.callStr("fake_calls", export, 0, 0)) }

// Violations returns how many violations the fake has recorded since the
// last Reset, and the last one's message.
func (f *Fake) Violations() (int, string) {
	n := int(f.call("fake_violations"))
	buf := make([]byte, 512)
	f.call("fake_last_violation", uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	runtime.KeepAlive(buf)
	msg, _, _ := strings.Cut(string(buf), "\x00")
	return n, msg
}

// Live returns how many objects of kind are alive in the fake.
func (f *Fake) Live(kind Kind) int { return int(f.call("fake_live", uintptr(kind))) }

// PrimaryRefs returns the retain count of device dev's primary context.
func (f *Fake) PrimaryRefs(dev int) int { return int(int32(f.call("fake_primary_refs", uintptr(dev)))) }

// CurrentDevice returns the device whose context is current on the calling
// thread, or -1. Lock the goroutine to its thread around what you test.
func (f *Fake) CurrentDevice() int { return int(int32(f.call("fake_current_device"))) }

// HostLive reports whether b is pinned or registered memory right now.
func (f *Fake) HostLive(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	live := f.call("fake_host_live", uintptr(unsafe.Pointer(&b[0])), uintptr(len(b))) != 0
	runtime.KeepAlive(b)
	return live
}

// CapturingThreads returns how many threads are in capture mode: they
// began a thread-local or global capture (cuStreamBeginCapture_v2) that
// they have not ended. A thread counted here when no capture is under way
// went back to its pool still capturing, and the calls that a capture
// forbids (cuMemAlloc_v2 among them) fail on it with
// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED from then on.
func (f *Fake) CapturingThreads() int { return int(f.call("fake_capturing_threads")) }

// Pending returns how many queued stream operations have not run yet.
func (f *Fake) Pending() int { return int(f.call("fake_pending")) }

// SetParams makes every function report this parameter layout (sizes in
// bytes), as drivers with cuFuncGetParamInfo do.
func (f *Fake) SetParams(sizes ...int) {
	l := make([]int64, len(sizes)+1)
	for i, s := range sizes {
		l[i] = int64(s)
	}
	f.call("fake_set_params", uintptr(len(sizes)), uintptr(unsafe.Pointer(&l[0])))
	runtime.KeepAlive(l)
}

// LastParam returns up to 16 bytes of parameter i of the last launch.
func (f *Fake) LastParam(i, n int) ([]byte, bool) {
	buf := make([]byte, 16)
	ok := f.call("fake_last_param", uintptr(i), uintptr(unsafe.Pointer(&buf[0])), uintptr(n)) != 0
	return buf[:min(n, 16)], ok
}

// LastLaunch returns the last launch's grid, block and dynamic shared
// memory size, as the fake received them, and its extra argument.
func (f *Fake) LastLaunch() (dims [7]uint32, extra uintptr) {
	extra = f.call("fake_last_launch", uintptr(unsafe.Pointer(&dims[0])))
	return dims, extra
}

// Clean fails t if the fake recorded any violation since the last Reset.
func (f *Fake) Clean(t testing.TB) {
	t.Helper()
	if n, msg := f.Violations(); n > 0 {
		t.Errorf("the fake driver recorded %d violation(s); the last: %s", n, msg)
	}
}

// LaunchEx is what the last extended or cooperative launch asked for.
type LaunchEx struct {
	Cooperative bool
	Cluster     [3]int
	Priority    int
	HasPriority bool
	Attrs       int // how many CUlaunchAttributes cuLaunchKernelEx was given
}

// LastLaunchEx returns the last cuLaunchKernelEx's or
// cuLaunchCooperativeKernel's attributes.
func (f *Fake) LastLaunchEx() LaunchEx {
	var out [7]int32
	f.call("fake_last_launch_ex", uintptr(unsafe.Pointer(&out[0])))
	return LaunchEx{Cooperative: out[0] != 0, Cluster: [3]int{int(out[1]), int(out[2]), int(out[3])},
		Priority: int(out[4]), HasPriority: out[5] != 0, Attrs: int(out[6])}
}

// HostCalls returns how many host functions (cuLaunchHostFunc) the fake
// has run since it was loaded.
func (f *Fake) HostCalls() int { return int(f.call("fake_host_calls")) }
