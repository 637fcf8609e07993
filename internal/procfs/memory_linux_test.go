package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRoomUnder: a cgroup's room is its limit less its usage, and "max"
// (v2) or v1's page-rounded largest int64 mean no limit.
func TestRoomUnder(t *testing.T) {
	room, ok := roomUnder("1073741824", "268435456")
	assert.True(t, ok)
	assert.Equal(t, int64(768<<20), room)
	room, ok = roomUnder("1000", "2000")
	assert.True(t, ok, "over the limit: no room")
	assert.Zero(t, room)
	for _, lim := range []string{"max", "9223372036854771712", "", "junk"} {
		_, ok = roomUnder(lim, "1")
		assert.False(t, ok, lim)
	}
	_, ok = roomUnder("1000", "")
	assert.False(t, ok, "usage unreadable")
}

// TestAvailableMemory: Linux says how much memory is available, and it
// is some.
func TestAvailableMemory(t *testing.T) {
	avail, ok := AvailableMemory()
	assert.True(t, ok)
	assert.Positive(t, avail)
}

// TestFreeSpace: the file system of a temporary folder has some room, and
// a path that does not exist has no answer.
func TestFreeSpace(t *testing.T) {
	free, ok := FreeSpace(t.TempDir())
	if !ok {
		t.Fatal("no free space for a temporary folder")
	}
	if free <= 0 {
		t.Fatalf("free space %d", free)
	}
	if _, ok := FreeSpace("/no/such/folder/for/overlap"); ok {
		t.Fatal("free space for a path that does not exist")
	}
}
