package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLine: the module version, the commit from the go command's settings
// or else from the stamp, and the toolchain and platform.
func TestLine(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	stamped := Stamp{Revision: "9f53def0123456789", Time: "2026-12-01T09:00:00Z", Modified: "false"}
	recorded := &debug.BuildInfo{GoVersion: "go1.25.1", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "8c1682f0123456789abcdef"}, {Key: "vcs.time", Value: "2026-11-30T07:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name  string
		info  *debug.BuildInfo
		ok    bool
		stamp Stamp
		want  string
	}{
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.25.1", Main: debug.Module{Version: "v1.2.3"}}, true, Stamp{},
			"overlap v1.2.3, go1.25.1 " + platform},
		{"the go command's record", recorded, true, Stamp{},
			"overlap (devel) commit 8c1682f01234 2026-11-30T07:00:00Z (modified), go1.25.1 " + platform},
		{"the go command's record before the stamp", recorded, true, stamped,
			"overlap (devel) commit 8c1682f01234 2026-11-30T07:00:00Z (modified), go1.25.1 " + platform},
		{"the stamp", &debug.BuildInfo{GoVersion: "go1.25.1", Main: debug.Module{Version: "(devel)"}}, true, stamped,
			"overlap (devel) commit 9f53def01234 2026-12-01T09:00:00Z, go1.25.1 " + platform},
		{"no version at all", &debug.BuildInfo{GoVersion: "go1.25.1"}, true, Stamp{},
			"overlap (devel: no commit recorded; make cli records it), go1.25.1 " + platform},
		{"no build information", nil, false, stamped,
			"overlap (unknown version: no build information) " + runtime.Version() + " " + platform},
	} {
		assert.Equal(t, c.want, Line(c.info, c.ok, c.stamp), c.name)
	}
}
