package hostcpu

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAndFormatCPUList(t *testing.T) {
	cases := []struct {
		in   string
		want []int
		out  string
	}{
		{"0-3,8-11\n", []int{0, 1, 2, 3, 8, 9, 10, 11}, "0-3,8-11"},
		{"5", []int{5}, "5"},
		{"0,2,4-5,4", []int{0, 2, 4, 5}, "0,2,4-5"},
	}
	for _, c := range cases {
		got, err := ParseCPUList(c.in)
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
		assert.Equal(t, c.out, FormatCPUList(got))
	}
	for _, bad := range []string{"", "a", "3-1", "-1", "1-", "0-70000"} {
		_, err := ParseCPUList(bad)
		assert.Error(t, err, bad)
	}
}

func TestOfReadsSysfs(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "0000:19:00.0")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dev, "numa_node"), []byte("1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dev, "local_cpulist"), []byte("16-31\n"), 0o644))
	for _, id := range []string{"0000:19:00.0", "00000000:19:00.0", "0000:19:00.0 "} {
		l, err := ofRoot(root, id)
		require.NoError(t, err, id)
		assert.Equal(t, 1, l.NUMANode)
		assert.Len(t, l.CPUs, 16)
		assert.Equal(t, 16, l.CPUs[0])
	}
	_, err := ofRoot(root, "0000:1a:00.0")
	assert.ErrorContains(t, err, "hostcpu: PCI device 0000:1a:00.0")
	for _, bad := range []string{"19:00.0", "../../etc:x:0.0", "1230000:19:00.0"} {
		_, err := ofRoot(root, bad)
		assert.Error(t, err, bad)
	}
}

func TestPinThread(t *testing.T) {
	if runtime.GOOS != "linux" {
		assert.ErrorIs(t, PinThread([]int{0}), ErrUnsupported)
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := ThreadCPUs()
	require.NoError(t, err)
	require.NotEmpty(t, before)
	defer func() { require.NoError(t, PinThread(before)) }()
	require.NoError(t, PinThread(before[:1]))
	now, err := ThreadCPUs()
	require.NoError(t, err)
	assert.Equal(t, before[:1], now)
	assert.Error(t, PinThread(nil))
}
