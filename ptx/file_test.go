package ptx

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadFile: a PTX file reads whole; a missing path, a directory and
// an endless file are refused in words that name the path, with the
// sentinel to tell them by.
func TestReadFile(t *testing.T) {
	src, err := ReadFile("testdata/handwritten.ptx")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/handwritten.ptx")
	require.NoError(t, err)
	assert.Equal(t, want, src)

	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.ptx")
	cases := []struct {
		path, want string
		is         error
	}{
		{missing, "ptx: " + missing + ": no such file", os.ErrNotExist},
		{dir, "ptx: " + dir + ": is a directory", ErrNotPTX},
	}
	if runtime.GOOS == "linux" {
		cases = append(cases, struct {
			path, want string
			is         error
		}{"/dev/zero", "ptx: /dev/zero: larger than 64 MiB: not a PTX module", ErrNotPTX})
	}
	for _, c := range cases {
		_, err := ReadFile(c.path)
		assert.EqualError(t, err, c.want)
		assert.True(t, errors.Is(err, c.is), "%s: %v", c.path, err)
	}
}

// TestDescribe: the header, each entry with its parameters' offsets, and
// lists that are empty rather than nil.
func TestDescribe(t *testing.T) {
	f, err := Parse(readFile(t, "testdata/handwritten.ptx"))
	require.NoError(t, err)
	d := Describe(f)
	assert.Equal(t, "7.8", d.Version)
	assert.Equal(t, []string{"sm_80", "debug"}, d.Targets)
	assert.Equal(t, 64, d.AddressSize)
	assert.Equal(t, []string{"helper_decl", "twice"}, d.Funcs)
	require.Len(t, d.Entries, 2)
	assert.Equal(t, EntryDescription{Name: "mixed", Line: 22, Params: []ParamDescription{
		{"out", ".u64", 8, 8, 0}, {"config", ".b8", 24, 8, 8}, {"alpha", ".f64", 8, 8, 32}, {"small", ".u16", 2, 2, 40},
	}}, d.Entries[0])
	assert.Equal(t, []ParamDescription{}, d.Entries[1].Params)

	f, err = Parse([]byte(".version 7.0\n.target sm_75\n"))
	require.NoError(t, err)
	d = Describe(f)
	assert.Equal(t, []EntryDescription{}, d.Entries)
	assert.Equal(t, []string{}, d.Funcs)
	assert.Equal(t, Description{Targets: []string{}, Entries: []EntryDescription{}, Funcs: []string{}}, Describe(nil))
}
