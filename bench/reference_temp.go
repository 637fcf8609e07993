package bench

import (
	"context"
	"fmt"
	"os"

	"github.com/purecuda/overlap/driver"
)

// BuildReferenceFor builds the reference programs ([BuildReference]) for
// dev's architecture, sm_XY from its compute capability, in a new
// temporary folder; remove deletes the folder and what was built in it.
func BuildReferenceFor(ctx context.Context, dev driver.Device) (ref *Reference, remove func(), err error) {
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "overlap-reference-")
	if err != nil {
		return nil, nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if ref, err = BuildReference(ctx, dir, fmt.Sprintf("sm_%d%d", major, minor)); err != nil {
		remove()
		return nil, nil, err
	}
	return ref, remove, nil
}
