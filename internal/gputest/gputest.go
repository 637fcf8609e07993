// Package gputest gives tests a CUDA context on the first GPU, and skips
// them only when no NVIDIA driver is present; and helpers that the GPU
// and fake-driver tests of several packages share, such as [Fake], a
// test's session on the fake driver.
//
// # Concurrency
//
// Call its functions from the test's goroutine: they take a testing.TB
// and may stop the test (Skip, FailNow). The contexts they return may be
// used from any goroutine, as every driver object may.
//
// # Memory
//
// Every context it opens is closed when its test ends (t.Cleanup); a
// test closes what it makes on them, or the context's Close does.
package gputest

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// Context returns a context on GPU 0 that is closed when the test ends. It
// skips the test when no NVIDIA driver is present, and says so; any other
// failure to reach the GPU fails the test.
func Context(t testing.TB) *driver.Context {
	t.Helper()
	return ContextWith(t, driver.ContextOptions{})
}

// ContextWith is Context with options, such as a wait mode.
func ContextWith(t testing.TB, opts driver.ContextOptions) *driver.Context {
	t.Helper()
	if err := driver.Load(); err != nil {
		if errors.Is(err, loader.ErrNoDriver) {
			t.Skip(SkipLine(err))
		}
		t.Fatalf("NVIDIA driver present but unusable: %v", err)
	}
	dev, err := driver.DeviceAt(0)
	if err != nil {
		t.Fatalf("GPU 0: %v", err)
	}
	ctx, err := driver.NewContextWith(dev, opts)
	if err != nil {
		t.Fatalf("GPU 0: %v", err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Errorf("closing the context: %v", err)
		}
	})
	return ctx
}

// Contexts returns a context on every GPU, closed when the test ends,
// and skips as Context does.
func Contexts(t testing.TB) []*driver.Context {
	t.Helper()
	ctxs := []*driver.Context{Context(t)}
	n, err := driver.DeviceCount()
	if err != nil {
		t.Fatalf("counting GPUs: %v", err)
	}
	for d := 1; d < n; d++ {
		dev, err := driver.DeviceAt(d)
		if err != nil {
			t.Fatalf("GPU %d: %v", d, err)
		}
		ctx, err := driver.NewContext(dev)
		if err != nil {
			t.Fatalf("GPU %d: %v", d, err)
		}
		t.Cleanup(func() {
			if err := ctx.Close(); err != nil {
				t.Errorf("closing GPU %d's context: %v", d, err)
			}
		})
		ctxs = append(ctxs, ctx)
	}
	return ctxs
}

// SkipLine is the one line a GPU test skips with when no driver is present.
func SkipLine(err error) string {
	var oe *loader.OpenError
	if errors.As(err, &oe) {
		return "skipping: " + oe.Brief()
	}
	return "skipping: no NVIDIA driver present: " + err.Error()
}

// freshEnv names the test that a child process of Fresh runs.
const freshEnv = "OVERLAP_GPUTEST_FRESH"

// Fresh runs the calling top-level test alone in a new process of the test
// binary, where no CUDA context is active yet, as tests of a primary
// context's creation flags (wait modes) need. In the parent it skips when
// no driver is present (as Context does), runs the child, fails with its
// output when it fails, and returns false: the caller returns. In the
// child it returns true and the test goes on.
func Fresh(t *testing.T) bool {
	t.Helper()
	if os.Getenv(freshEnv) == t.Name() {
		return true
	}
	if err := driver.Load(); err != nil {
		if errors.Is(err, loader.ErrNoDriver) {
			t.Skip(SkipLine(err))
		}
		t.Fatalf("NVIDIA driver present but unusable: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), freshEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a fresh process: %v\n%s", t.Name(), err, out)
	}
	t.Logf("%s in a fresh process:\n%s", t.Name(), out)
	return false
}

// WhileCollecting runs fn while another goroutine collects garbage
// continuously, so that a cleanup runs as soon as its object dies and
// every driver call in fn meets a collection in progress.
func WhileCollecting(fn func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
				time.Sleep(200 * time.Microsecond)
			}
		}
	}()
	fn()
	close(stop)
	wg.Wait()
}
