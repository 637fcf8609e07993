// Package buildinfo says which build of overlap is running: the module
// version, the commit and the toolchain, from what the go command embeds
// in a binary and what the Makefile stamps into it.
//
// # Concurrency
//
// Line is pure: call it from any goroutine.
//
// # Memory
//
// Nothing is retained between calls.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamp is the commit that the Makefile stamps into the binaries it
// builds with -ldflags -X, in the form of the go command's vcs.revision,
// vcs.time and vcs.modified settings ("true" when modified). The go
// command records those itself only when it builds in a git checkout's
// main working tree: go run, a git worktree and -buildvcs=false record
// none.
type Stamp struct{ Revision, Time, Modified string }

// Line says which overlap this is, from the build information that the
// go command embeds (debug.ReadBuildInfo's info and ok): the module version (v1.2.3 from go install
// ...@v1.2.3, a pseudo-version or "(devel)" from a checkout), the commit
// when known (from the go command's settings, else from stamp), and the Go toolchain and platform.
func Line(info *debug.BuildInfo, ok bool, stamp Stamp) string {
	if !ok || info == nil {
		return fmt.Sprintf("overlap (unknown version: no build information) %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	line := "overlap " + v
	var rev, when string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" && stamp.Revision != "" {
		rev, when, modified = stamp.Revision, stamp.Time, stamp.Modified == "true"
	}
	switch {
	case rev == "" && v == "(devel)":
		line = "overlap (devel: no commit recorded; make cli records it)"
	case rev != "":
		line += " commit " + rev[:min(12, len(rev))]
		if when != "" {
			line += " " + when
		}
		if modified {
			line += " (modified)"
		}
	}
	goVersion := info.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return fmt.Sprintf("%s, %s %s/%s", line, goVersion, runtime.GOOS, runtime.GOARCH)
}
