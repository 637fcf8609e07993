package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTimelineFiles: each file holds what its writer writes, an empty
// path writes nothing, and a file that cannot be created names the call.
func TestTimelineFiles(t *testing.T) {
	spans := []pipeline.Span{{Stage: pipeline.StageH2D, Lane: "H2D", End: time.Millisecond}}
	dir := t.TempDir()
	for _, c := range []struct {
		write func(string, []pipeline.Span, string) error
		to    func(*bytes.Buffer) error
		op    string
	}{
		{WriteTraceFile, func(b *bytes.Buffer) error { return WriteTrace(b, spans, "job") }, "WriteTraceFile"},
		{WriteTimelineSVGFile, func(b *bytes.Buffer) error { return WriteTimelineSVG(b, spans, "job") }, "WriteTimelineSVGFile"},
	} {
		path := filepath.Join(dir, c.op)
		require.NoError(t, c.write(path, spans, "job"))
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		var want bytes.Buffer
		require.NoError(t, c.to(&want))
		assert.Equal(t, want.String(), string(got), c.op)
		assert.NoError(t, c.write("", spans, "job"), "no file")
		err = c.write(filepath.Join(dir, "none", "x"), spans, "job")
		assert.ErrorContains(t, err, "bench: "+c.op+": open ")
	}
}
