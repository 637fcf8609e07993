package calibrate

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestValidationTable: the validation's table and summary, as overlap
// profile --validate prints them.
func TestValidationTable(t *testing.T) {
	worst := Row{Config: Config{Kernel: "saxpy", Host: pipeline.HostStaged, Chunk: 256 << 10, Slots: 4, Streams: 2, N: 1 << 20},
		Measured: 1500 * time.Microsecond, Predicted: 1350 * time.Microsecond, Err: -0.1}
	v := &Validation{Rows: []Row{
		{Config: Config{Kernel: "seed", Host: pipeline.HostPinned, Chunk: 512, Slots: 2, Streams: 1, N: 1 << 20},
			Measured: 26259 * time.Microsecond, Predicted: 26270 * time.Microsecond, Err: 0.0004},
		worst,
	}, Median: 0.0502, Worst: worst}
	var b bytes.Buffer
	require.NoError(t, v.WriteTable(&b, false))
	assert.Equal(t, `
| KERNEL | HOST       |  CHUNK | SLOTS | STREAMS |    MEASURED |   PREDICTED |   ERROR |
|-------|------------|--------|-------|---------|-------------|-------------|---------|
| seed   | pinned     |    512 |     2 |       1 |   26.259 ms |   26.270 ms |   +0.0% |
| saxpy  | staged     |   256K |     4 |       2 |    1.500 ms |    1.350 ms |  -10.0% |

median |error| 5.0%, worst 10.0% (saxpy staged      256K chunks 4 slots 2 streams); every element of every configuration verified
`, b.String())
	b.Reset()
	require.NoError(t, v.WriteTable(&b, true))
	assert.Contains(t, b.String(), "verified [simulated]\n")
	assert.EqualError(t, (*Validation)(nil).WriteTable(&b, false), "calibrate: Validation.WriteTable: no validation")
}

// TestProfileText: a profile's lines, and the host figures after a
// validation, as overlap profile printed them before they moved here
// (the golden files under testdata/tables).
func TestProfileText(t *testing.T) {
	more := sim.BuiltinProfile()
	more.StagingInRun = []sim.StagingInRun{{Bytes: 1 << 20, InGBps: 10, OutGBps: 12}, {Bytes: 64 << 20, InGBps: 20, OutGBps: 22}}
	more.StagingChunkNs = 3400
	lagged := more.Clone()
	lagged.StagingInRun[1].IssueLagNs = 151.4e3
	more.IssueLoops = []sim.IssueLoop{{Slots: 2, Streams: 1, Inputs: 0, Ns: 12000, PredictedNs: 11000}, {Slots: 6, Streams: 4, Inputs: 2, Ns: 15500, PredictedNs: 14000}}
	more.IssueScale = 1.0832
	for _, tc := range []struct {
		golden string
		write  func(w *bytes.Buffer) error
	}{
		{"profile_builtin", func(w *bytes.Buffer) error { return WriteProfile(w, sim.BuiltinProfile()) }},
		{"profile_more", func(w *bytes.Buffer) error { return WriteProfile(w, more) }},
		{"validated_host", func(w *bytes.Buffer) error { return WriteValidatedHost(w, more, 0.9876) }},
		{"staging_lagged", func(w *bytes.Buffer) error { return WriteStagingInRun(w, lagged, "") }},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", "tables", tc.golden+".txt"))
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, tc.write(&b))
			assert.Equal(t, string(want), b.String())
		})
	}
	var b bytes.Buffer
	require.NoError(t, WriteStagingInRun(&b, sim.BuiltinProfile(), ""))
	if len(sim.BuiltinProfile().StagingInRun) == 0 {
		assert.Zero(t, b.Len(), "no rates, no line")
	}
	fail := failingWriter{}
	assert.EqualError(t, WriteProfile(fail, more), "disk full")
	assert.EqualError(t, WriteValidatedHost(fail, more, 1), "disk full")
	assert.EqualError(t, WriteStagingInRun(fail, more, ""), "disk full")
	assert.EqualError(t, WriteProfile(&b, nil), "calibrate: WriteProfile: no profile")
	assert.EqualError(t, WriteValidatedHost(&b, nil, 1), "calibrate: WriteValidatedHost: no profile")
	assert.EqualError(t, WriteStagingInRun(&b, nil, ""), "calibrate: WriteStagingInRun: no profile")
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
