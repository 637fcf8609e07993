package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// vcsRevision, vcsTime and vcsModified are the commit that the Makefile
// stamps into the binaries it builds (make cli, make gpu-bundle) with
// -ldflags -X, in the form of the go command's vcs.revision, vcs.time and
// vcs.modified settings. The go command records those itself only when
// it builds in a git checkout's main working tree: go run, a git
// worktree and -buildvcs=false record none, and such a build said only
// "(devel)".
var vcsRevision, vcsTime, vcsModified string

// versionLine says which overlap this is, from the build information that
// the go command embeds: the module version (v1.2.3 from go install
// ...@v1.2.3, a pseudo-version or "(devel)" from a checkout), the commit
// when known (from the go command's settings, else from the Makefile's
// stamp), and the Go toolchain and platform.
func versionLine(info *debug.BuildInfo, ok bool) string {
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
	if rev == "" && vcsRevision != "" {
		rev, when, modified = vcsRevision, vcsTime, vcsModified == "true"
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

// versionCmd is overlap version (also overlap --version).
var versionCmd = &command{
	name:      "version",
	usageLine: "overlap version",
	short:     "print overlap's version (also overlap --version)",
	aliases:   []string{"--version", "-version"},
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		return func(stdout, stderr io.Writer) int { return runVersion(fs, stdout, stderr) }
	},
}

func runVersion(fs *flag.FlagSet, stdout, stderr io.Writer) int {
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "overlap version: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
	return exitOK
}
