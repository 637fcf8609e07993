package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/purecuda/overlap/driver"
)

// BuildReferenceFor builds the reference programs ([BuildReference]) for
// dev's architecture ([ReferenceArch]) in a new temporary folder; remove
// deletes the folder and what was built in it. A caller that must be able
// to remove the folder while the build runs (a process that exits on a
// signal) makes the folder itself and calls BuildReference.
func BuildReferenceFor(ctx context.Context, dev driver.Device) (ref *Reference, remove func(), err error) {
	arch, err := ReferenceArch(dev)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "overlap-reference-")
	if err != nil {
		return nil, nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if ref, err = BuildReference(ctx, dir, arch); err != nil {
		remove()
		return nil, nil, err
	}
	return ref, remove, nil
}

// ReferenceArch is the nvcc architecture the reference programs are built
// for on dev: sm_XY from its compute capability.
func ReferenceArch(dev driver.Device) (string, error) {
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("sm_%d%d", major, minor), nil
}

// command is exec.CommandContext with a WaitDelay: once ctx ends and the
// program is killed, its output is waited for at most that long, so that
// a child of its own that keeps the pipe open (nvcc's compilers, a
// Python's workers) cannot hold up a cancelled benchmark's return.
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 2 * time.Second
	return cmd
}
