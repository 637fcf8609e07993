package main

import (
	"flag"
	"io"
)

// The parse helpers parse a command line as its command does, through
// its flags and their checks, and return the options; stdout (nil for
// none) receives -h.

func parseRunFlags(args []string, stdout io.Writer) (*runOptions, error) {
	fs := newFlags("run")
	o, check := runFlags(fs)
	return o, parseAndCheck(runCmd, fs, args, stdout, check)
}

func parseTuneFlags(args []string, stdout io.Writer) (*runOptions, error) {
	fs := newFlags("tune")
	o, check := tuneFlags(fs)
	return o, parseAndCheck(tuneCmd, fs, args, stdout, check)
}

func parseStreamFlags(args []string, stdout io.Writer) (*streamOptions, error) {
	fs := newFlags("stream")
	o := &streamOptions{}
	check := streamFlags(fs, o)
	return o, parseAndCheck(streamCmd, fs, args, stdout, func() error { return check(orDiscard(stdout)) })
}

// parseBenchFlags parses overlap bench's arguments, and those of its
// subcommands given in the old spelling (--small-jobs, --devices).
func parseBenchFlags(args []string, stdout io.Writer) (*benchOptions, error) {
	c := benchCmd
	for _, mv := range benchCmd.moved {
		if rest, ok := mv.match(args); ok {
			c, args = mv.to, rest
			break
		}
	}
	fs := newFlags(c.path())
	setup := map[*command]func(*flag.FlagSet) (*benchOptions, func() error){benchCmd: benchFlags, smallJobsCmd: smallJobsFlags, scalingCmd: scalingFlags}[c]
	o, check := setup(fs)
	return o, parseAndCheck(c, fs, args, stdout, check)
}

func parseAndCheck(c *command, fs *flag.FlagSet, args []string, stdout io.Writer, check func() error) error {
	if err := c.parse(fs, args, orDiscard(stdout)); err != nil {
		return err
	}
	return check()
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
