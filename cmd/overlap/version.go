package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/purecuda/overlap/internal/buildinfo"
)

// vcsRevision, vcsTime and vcsModified are the commit that the Makefile
// stamps into the binaries it builds (make cli, make gpu-bundle) with
// -ldflags -X, in the form of the go command's vcs.revision, vcs.time and
// vcs.modified settings. The go command records those itself only when
// it builds in a git checkout's main working tree: go run, a git
// worktree and -buildvcs=false record none, and such a build said only
// "(devel)".
var vcsRevision, vcsTime, vcsModified string

// versionLine says which overlap this is (buildinfo.Line), with the
// Makefile's stamp.
func versionLine(info *debug.BuildInfo, ok bool) string {
	return buildinfo.Line(info, ok, buildinfo.Stamp{Revision: vcsRevision, Time: vcsTime, Modified: vcsModified})
}

// versionCmd is overlap version (also overlap --version).
var versionCmd = &command{
	name:      "version",
	usageLine: "overlap version",
	short:     "print overlap's version (also overlap --version)",
	aliases:   []string{"--version", "-version"},
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		noArgs := func() error {
			return refuse([]refusal{{fs.NArg() > 0, fmt.Sprintf("unexpected argument %q", fs.Arg(0))}})
		}
		return checkedRun("version", noArgs, func(stdout, stderr io.Writer) int {
			fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
			return exitOK
		})
	},
}
