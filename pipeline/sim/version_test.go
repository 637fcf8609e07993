package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestProfileVersion: a profile file without a version (every file written
// before Profile.Version existed, such as testdata/h200-provisional.json)
// is read as the first format and upgraded; a newer version is refused;
// Write writes the version, and what it writes reads back the same.
func TestProfileVersion(t *testing.T) {
	old, err := os.ReadFile("testdata/h200-provisional.json")
	require.NoError(t, err)
	require.NotContains(t, string(old), `"version"`, "the old-format file")
	p, err := sim.ReadProfile("testdata/h200-provisional.json")
	require.NoError(t, err)
	assert.Equal(t, sim.ProfileVersion, p.Version)
	assert.Equal(t, 1, sim.ProfileVersion)
	assert.Equal(t, sim.ProfileVersion, sim.BuiltinProfile().Version, "the built-in profile, an old-format file")

	path := filepath.Join(t.TempDir(), "p.json")
	q := p.Clone()
	q.Version = 0
	require.NoError(t, q.Write(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"version": 1,`)
	back, err := sim.ReadProfile(path)
	require.NoError(t, err)
	assert.Equal(t, p, back)

	for _, v := range []string{"2", "-1"} {
		_, err := sim.ParseProfile([]byte(strings.Replace(string(old), "{", `{"version": `+v+`,`, 1)))
		assert.EqualError(t, err, "pipeline: profile: version "+v+", but this simulator reads versions up to 1")
	}
}
