package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
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
	assert.Equal(t, "overlap: missing command: run, bench, tune, ptx, devices, version or help (try 'overlap help')\n", errOut)
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
