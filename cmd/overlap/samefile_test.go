package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSameFile: paths name one file by os.SameFile where they exist, and
// by their directory (links resolved) and name where they do not yet.
func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.Symlink(".", filepath.Join(dir, "here")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), nil, 0o644))
	require.NoError(t, os.Symlink("new", filepath.Join(dir, "dangling")))
	p := func(s string) string { return filepath.Join(dir, s) }
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{p("a"), p("here/a"), true},
		{p("a"), p("sub/../a"), true},
		{p("new"), p("here/new"), true},        // neither exists yet
		{p("new"), p("sub/../here/new"), true}, // neither exists yet
		{p("new"), p("dangling"), true},        // a link to where it would be
		{p("new"), p("sub/new"), false},
		{p("a"), p("new"), false},
	} {
		assert.Equal(t, c.same, sameFile(c.a, c.b), "%s and %s", c.a, c.b)
	}
}
