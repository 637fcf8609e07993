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
