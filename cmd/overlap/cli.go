package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Every command answers -h the same way: one usage line, then its flags
// with their defaults, on stdout, and exit 0. A mistake is one line on
// stderr and exit 2.

// newFlags returns a command's flag set, silent: errors are reported by
// the caller in one line, and -h by parseFlags.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args. On -h it prints the usage line and the flags to
// stdout and returns flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, usage string, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printHelp(stdout, usage, fs)
	}
	return err
}

// otherModeFlag turns the flag package's "flag provided but not defined"
// for a flag that the command's other mode defines (overlap run with and
// without --in) into why it does not apply here; any other error is
// returned as it is.
func otherModeFlag(err error, other *flag.FlagSet, why string) error {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, undefined) {
		return err
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
	if other.Lookup(name) == nil {
		return err
	}
	return fmt.Errorf("--%s %s", name, why)
}

// printHelp prints "usage: ..." and, when the command has flags, each flag
// with its default.
func printHelp(w io.Writer, usage string, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n", usage)
	has := false
	fs.VisitAll(func(*flag.Flag) { has = true })
	if has {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// isSet reports whether the flag called name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// checkWritable makes sure that path can be written, when the flags are
// parsed rather than after a long run: it opens the file for writing, and
// removes it again if it did not exist.
func checkWritable(flagName, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return fmt.Errorf("--%s %s: is a directory", flagName, path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("--%s %s: cannot be written: %v", flagName, path, unwrapPath(err))
		}
		return f.Close()
	}
	if dir := filepath.Dir(path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("--%s %s: no such directory %s", flagName, path, dir)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("--%s %s: cannot be written: %v", flagName, path, unwrapPath(err))
	}
	f.Close()
	return os.Remove(path)
}

// unwrapPath drops the *os.PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// formatSize renders an element count as the flags take it: 128M, 64K, 1000.
func formatSize(n int) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return fmt.Sprint(n)
}

// oneOf joins names as "a, b or c".
func oneOf(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}
