package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
	"github.com/stretchr/testify/assert"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	code, _, errOut := runCLI()
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap: missing command: run, stream, infer, gen, bench, tune, profile, ptx, devices, version or help (try 'overlap help')\n", errOut)
	code, _, errOut = runCLI("frobnicate")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap: unknown command \"frobnicate\" (try 'overlap help')\n", errOut)
	code, _, errOut = runCLI("devices", "extra")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap devices: unexpected argument \"extra\"\n", errOut)
	code, out, _ := runCLI("help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "overlap devices")
}

func TestDevices(t *testing.T) {
	code, out, errOut := runCLI("devices")
	if driver.Load() != nil {
		assert.Equal(t, exitFail, code)
		assert.Empty(t, out)
		assert.True(t, strings.HasPrefix(errOut, "overlap: no NVIDIA driver found (tried libcuda.so.1, libcuda.so, ") ||
			strings.HasPrefix(errOut, "overlap: no NVIDIA driver found (tried "), errOut)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "exactly one line: %q", errOut)
		return
	}
	assert.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "driver: CUDA ")
	assert.Contains(t, out, "GPU  NAME")
	assert.Contains(t, out, "COPY ENGINES")
}

func driverPresent() bool { return driver.Load() == nil }

// TestNoDriverLineKeepsTheReason guards issue 10: a library that exists
// but is not the driver is named with its reason, in one line.
func TestNoDriverLineKeepsTheReason(t *testing.T) {
	_, err := loader.OpenFirst([]string{"/nonexistent/libcuda.so.1"})
	line := noDriverLine(err)
	assert.Equal(t, "overlap: no NVIDIA driver found (tried 1 path(s); none exists; set OVERLAP_CUDA_LIBRARY to the driver library's path)", line)
	other := &loader.OpenError{Attempts: []loader.Attempt{{Path: "/usr/lib/libm.so.6", Err: errors.New("opened, but it does not export cuInit: not a CUDA driver library")}}}
	assert.Equal(t, "overlap: no NVIDIA driver found (tried 1 path(s); /usr/lib/libm.so.6: opened, but it does not export cuInit: not a CUDA driver library)", noDriverLine(other))
	assert.NotContains(t, line, "\n")
}
