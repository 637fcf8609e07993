package procfs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRoomUnder: a cgroup's room is its limit less its usage, the
// inactive page cache counting as room, and "max" (v2) or v1's
// page-rounded largest int64 mean no limit.
func TestRoomUnder(t *testing.T) {
	room, ok := roomUnder("1073741824", "268435456", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(768<<20), room)
	room, ok = roomUnder("1000", "2000", 0)
	assert.True(t, ok, "over the limit: no room")
	assert.Zero(t, room)
	// A 2 GiB cgroup after writing 1.9 GB: nearly all of it page cache.
	room, ok = roomUnder("2147483648", "2100000000", 1900000000)
	assert.True(t, ok)
	assert.Equal(t, int64(2147483648-200000000), room, "the inactive page cache counts as room")
	room, _ = roomUnder("1000", "500", 900)
	assert.Equal(t, int64(1000), room, "more inactive cache than usage (files read at different times) frees no more than the usage")
	for _, lim := range []string{"max", "9223372036854771712", "", "junk"} {
		_, ok = roomUnder(lim, "1", 0)
		assert.False(t, ok, lim)
	}
	_, ok = roomUnder("1000", "", 0)
	assert.False(t, ok, "usage unreadable")
}

// TestStatValue: a key's value in a cgroup's memory.stat, and 0 for an
// absent key, a prefix of one, or junk.
func TestStatValue(t *testing.T) {
	stat := "anon 4096\nfile 8192\nactive_file 1024\ninactive_file 7168\ntotal_inactive_file 99\n"
	assert.Equal(t, int64(7168), statValue(stat, "inactive_file"))
	assert.Equal(t, int64(99), statValue(stat, "total_inactive_file"))
	assert.Zero(t, statValue(stat, "inactive"))
	assert.Zero(t, statValue("inactive_file junk", "inactive_file"))
	assert.Zero(t, statValue("", "inactive_file"))
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
