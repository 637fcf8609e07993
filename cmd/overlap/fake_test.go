//go:build linux

package main

import (
	"strings"
	"testing"

	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/stretchr/testify/assert"
)

// TestCLIOnFakeDriver runs the commands that need a driver against the
// fake one (internal/fakecuda), so CI sees their output: overlap devices
// lists both fake GPUs with their PCI bus ids (in domain 00fa, which no
// real host has), and the NUMA and local-CPU columns say "-" where the
// host has no such device (issue 12).
func TestCLIOnFakeDriver(t *testing.T) {
	f := fakecuda.Run(t)
	if f == nil {
		return
	}
	t.Run("devices", func(t *testing.T) {
		code, out, errOut := runCLI("devices")
		assert.Equal(t, exitOK, code, errOut)
		assert.Contains(t, out, "driver: CUDA 13.0, library ")
		assert.Regexp(t, `GPU\s+NAME\s+CC\s+MEMORY\s+SMs\s+COPY ENGINES\s+CONCURRENT KERNELS\s+PCI BUS\s+NUMA\s+LOCAL CPUS`, out)
		assert.Regexp(t, `(?m)^0\s+Fake GPU 0\s+9\.0\s+4\.0 GiB\s+4\s+2\s+true\s+00fa:01:00\.0\s+-\s+-$`, out)
		assert.Regexp(t, `(?m)^1\s+Fake GPU 1\s+9\.0\s+4\.0 GiB\s+4\s+2\s+true\s+00fa:02:00\.0\s+-\s+-$`, out)
	})
}

// TestRunCUWithoutNVRTC runs overlap run --cu on the fake driver with
// NVRTC pointed at a file that is not there: the run fails before any
// context opens, in one line that names the --cu file and the library
// path it tried (without the override, the trial's took 38 lines, one a
// path).
func TestRunCUWithoutNVRTC(t *testing.T) {
	f := fakecuda.Run(t)
	if f == nil {
		return
	}
	t.Setenv("OVERLAP_NVRTC_LIBRARY", "/nonexistent/libnvrtc.so.13")
	code, out, errOut := runCLI("run", "--cu", "../../nvrtc/testdata/scale.cu", "--entry", "scale", "--elems", "1M")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "overlap run: --cu ../../nvrtc/testdata/scale.cu: ")
	assert.Contains(t, errOut, "/nonexistent/libnvrtc.so.13")
	assert.Contains(t, errOut, "OVERLAP_NVRTC_LIBRARY names /nonexistent/libnvrtc.so.13, which does not exist")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
}
