package main

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scaleCU is nvrtc's test kernel: out[i] = 3*in[i] + 1.
const scaleCU = "../../nvrtc/testdata/scale.cu"

// TestGPURunCU runs overlap run --cu on GPU 0: NVRTC compiles scale.cu
// for the GPU, and the run times it as it times a --ptx kernel. overlap
// run has no CPU reference for a user's kernel (its report says "not
// verified"), so the test then builds the same job through openEnv and
// newWorkload, as run does, runs it through a pipeline, and checks every
// one of the 1M outputs against scale.cu's formula, 3*x+1.
func TestGPURunCU(t *testing.T) {
	gputest.Context(t)
	if err := nvrtc.Load(); errors.Is(err, loader.ErrNoLibrary) {
		t.Skip("skipping: no NVRTC library (set OVERLAP_NVRTC_LIBRARY): " + err.Error())
	}
	args := []string{"--cu", scaleCU, "--entry", "scale", "--elems", "1M"}
	code, out, errOut := runCLI(append([]string{"run", "--json", "--repeat", "2"}, args...)...)
	require.Equal(t, exitOK, code, errOut)
	var res result
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.False(t, res.Simulated)
	assert.Equal(t, "scale", res.Kernel)
	assert.Equal(t, 1<<20, res.Elems)
	assert.Equal(t, "not verified: no CPU reference for a user's kernel", res.Verified)
	require.NotEmpty(t, res.Rows)
	for _, r := range res.Rows {
		assert.Positive(t, r.Ms, r.Mode)
	}

	o, err := parseRunFlags(args, nil)
	require.NoError(t, err)
	e, err := openEnv(o)
	require.NoError(t, err)
	defer e.close()
	require.Equal(t, 1, e.userIns, "scale takes one input")
	w, err := newWorkload(o, e)
	require.NoError(t, err)
	defer w.Close()
	cfg := w.Config
	cfg.ChunkElems = 256 << 10 // four chunks
	p, err := pipeline.NewGroup(e.backends, cfg)
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Run(context.Background(), w.Job)
	require.NoError(t, err)
	in, got := w.Inputs[0], w.Outputs[0]
	require.Len(t, got, 1<<20)
	bad := 0
	for i := range got {
		if want := 3*in[i] + 1; got[i] != want {
			if bad < 5 {
				t.Errorf("element %d: got %v, want 3*%v+1 = %v", i, got[i], in[i], want)
			}
			bad++
		}
	}
	assert.Zero(t, bad, "elements that are not 3*x+1")
}
