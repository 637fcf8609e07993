package shard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireGPUs returns how many GPUs the process sees. It skips the test
// only when no NVIDIA driver is present; any other failure fails it.
func requireGPUs(t *testing.T) int {
	t.Helper()
	if err := driver.Load(); err != nil {
		if errors.Is(err, loader.ErrNoDriver) {
			t.Skip(gputest.SkipLine(err))
		}
		t.Fatalf("NVIDIA driver present but unusable: %v", err)
	}
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	require.Positive(t, n, "a driver but no GPU")
	return n
}

// TestGPUKernelShard streams a shard that is not a whole number of chunks
// through the seed kernel on GPU 0 and checks every element.
func TestGPUKernelShard(t *testing.T) {
	requireGPUs(t)
	kp, err := NewKernel(Spec{}, 0)
	require.NoError(t, err)
	in, out := t.TempDir(), t.TempDir()
	n := 9<<20 + 12345
	path, x := writeShard(t, in, "a.f32", n, 0)
	res, err := ProcessShard(context.Background(), kp, path, out)
	require.NoError(t, err)
	verifySeed(t, x, res.Output, 100)
	assert.Equal(t, int64(n), res.Rows)
	assert.True(t, strings.HasPrefix(res.Backend, "NVIDIA"), "backend %q", res.Backend)
	assert.Contains(t, StageNames(), res.Bound)
	t.Logf("%d rows on %s: %.2f ms on the GPU's clock, bounded by %s", n, res.Backend, float64(res.EngineMicros)/1000, res.Bound)
	assert.Equal(t, []string{"a.f32.out"}, dirNames(t, out))
	require.NoError(t, kp.Close())
}

// TestGPUPipelineOnPrism runs shards over every GPU of the host, each
// worker process (here, this one) holding one engine per GPU.
func TestGPUPipelineOnPrism(t *testing.T) {
	gpus := requireGPUs(t)
	in, out := t.TempDir(), t.TempDir()
	const rows = 4 << 20
	shards := map[string][]float32{}
	for i := range 2 * gpus {
		name := fmt.Sprintf("s%02d.f32", i)
		_, x := writeShard(t, in, name, rows, i*rows)
		shards[name] = x
	}
	_, err := runOnPrism(context.Background(), func(s beam.Scope) {
		Build(s, Options{Input: filepath.Join(in, "*.f32"), Output: out, Spec: Spec{Devices: AllDevices}})
	})
	require.NoError(t, err)
	waitClosed(t)
	for name, x := range shards {
		verifySeed(t, x, filepath.Join(out, name+".out"), 100)
	}
	done := readLines[Result](t, filepath.Join(out, DoneFile))
	require.Len(t, done, len(shards))
	for _, r := range done {
		t.Logf("%s: %.2f ms on the GPU's clock, %.2f ms wall, bounded by %s (%s)", filepath.Base(r.Shard), float64(r.EngineMicros)/1000, float64(r.WallMicros)/1000, r.Bound, r.Backend)
	}
}
