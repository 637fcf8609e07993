package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// command is one overlap command, as cmd/go's base.Command is: its name,
// its usage line, the line that overlap help shows, its long help, the
// flags it owns and what it runs. The dispatch, each command's -h and
// overlap help are all made from the list of commands (main.go).
//
// Every command answers -h the same way: the usage line, the long help,
// then its flags with their defaults, on stdout, and exit 0. A mistake is
// one line on stderr and exit 2.
type command struct {
	// name is the word that selects the command: "run", or a
	// subcommand's "small-jobs".
	name string
	// usageLine is the first line of -h: "overlap run [flags]".
	usageLine string
	// short is overlap help's description of the command.
	short string
	// long is -h's help under the usage line; empty for none.
	long string
	// flags registers the command's flags on fs, into fresh options, and
	// returns what runs once they are parsed: it checks them and does the
	// work, and returns the exit code. It is nil for a group of
	// subcommands (overlap ptx).
	flags func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int
	// subs are the subcommands: overlap bench small-jobs.
	subs []*command
	// related are commands whose flags a user may give this one by
	// mistake (overlap run's and overlap stream's); a command's parent,
	// siblings and subcommands are related too.
	related []*command
	// moved are spellings of an earlier release that now name another
	// command: overlap run --in FILE is overlap stream --in FILE.
	moved []moved
	// aliases are other words that select a top-level command (--version).
	aliases []string
	parent  *command
}

// moved is a flag that chose a mode of a command in an earlier release
// and now names a command of its own; the old spelling still works, for
// one release, with a note on stderr that names the new one.
type moved struct {
	flag string
	to   *command
	// drop removes the flag (a bool that only chose the mode); otherwise
	// the new command takes it too (overlap stream --in).
	drop bool
}

// path is the command as typed after overlap: "bench small-jobs".
func (c *command) path() string {
	if c.parent != nil {
		return c.parent.path() + " " + c.name
	}
	return c.name
}

// link sets each subcommand's parent, all the way down.
func link(cs []*command, parent *command) {
	for _, c := range cs {
		c.parent = parent
		link(c.subs, c)
	}
}

// lookup finds the command that word selects among cs.
func lookup(cs []*command, word string) *command {
	for _, c := range cs {
		if c.name == word || slices.Contains(c.aliases, word) {
			return c
		}
	}
	return nil
}

// run runs the command on its arguments (after its name) and returns the
// exit code.
func (c *command) run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub := lookup(c.subs, args[0]); sub != nil {
			return sub.run(args[1:], stdout, stderr)
		}
	}
	for _, mv := range c.moved {
		rest, ok := mv.match(args)
		if args = rest; ok {
			fmt.Fprintf(stderr, "overlap: 'overlap %s --%s' is now 'overlap %s' (the old spelling works until the next release)\n", c.path(), mv.flag, mv.to.path())
			return mv.to.run(rest, stdout, stderr)
		}
	}
	if c.flags == nil {
		if wantsHelp(args) {
			c.help(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "overlap %s: usage: %s\n", c.path(), c.usage())
		return exitUsage
	}
	fs := newFlags(c.path())
	body := c.flags(fs)
	if err := c.parse(fs, args, stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "overlap %s: %v\n", c.path(), err)
		return exitUsage
	}
	return body(stdout, stderr)
}

// match reports whether args give the moved flag (before any "--"), and
// returns the arguments for the new command; rest is args without a
// dropped flag set false (--small-jobs=false chose this command).
func (mv moved) match(args []string) (rest []string, ok bool) {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != mv.flag {
			continue
		}
		if !mv.drop {
			return args, true
		}
		rest = slices.Concat(args[:i], args[i+1:])
		on, err := strconv.ParseBool(value)
		if hasValue && err == nil && !on {
			return mv.match(rest)
		}
		return rest, true
	}
	return args, false
}

// wantsHelp reports whether args ask for help anywhere before "--", even
// where a flag's value would be: overlap stream --in -h asks for help,
// not for a file named -h.
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// parse parses args into fs. On -h it prints the command's help to stdout
// and returns flag.ErrHelp; a flag that a related command defines is
// refused with the command that takes it.
func (c *command) parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	if wantsHelp(args) {
		args = []string{"-h"}
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.help(stdout)
	case err != nil:
		err = c.plainParseError(err)
	}
	return err
}

// newFlags returns a command's flag set, silent: errors are reported by
// the caller in one line, and -h by parse.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// plainParseError puts the flag package's errors in the docs' terms: a
// flag that a related command defines names that command, any other
// unknown flag says where the command's flags are listed, a value that
// a flag refuses reads `--chunk "0": must be positive` (the package's
// `invalid value "0" for flag -chunk: "0": must be positive`, or `...:
// parse error` for a number it could not read), and a flag without its
// value says so. Any other error is returned as it is.
func (c *command) plainParseError(err error) error {
	const undefined = "flag provided but not defined: -"
	msg := err.Error()
	if plain, ok := c.plainValueError(msg); ok {
		return errors.New(plain)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Errorf("--%s needs a value", strings.TrimLeft(name, "-"))
	}
	if !strings.HasPrefix(msg, undefined) {
		return err
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, undefined), "-")
	kin := slices.Concat(c.related, c.subs)
	if c.parent != nil {
		kin = append(append(kin, c.parent), c.parent.subs...)
	}
	for _, k := range kin {
		if k == c || k.flags == nil {
			continue
		}
		fs := newFlags(k.path())
		k.flags(fs)
		if fs.Lookup(name) != nil {
			return fmt.Errorf("--%s is a flag of overlap %s, not of overlap %s (overlap %s -h lists its flags)", name, k.path(), c.path(), c.path())
		}
	}
	return fmt.Errorf("--%s: no such flag (overlap %s -h lists its flags)", name, c.path())
}

// plainValueError rewrites the flag package's error for a value that a
// flag refused, and reports whether msg was one.
func (c *command) plainValueError(msg string) (string, bool) {
	var value, name string
	if _, err := fmt.Sscanf(msg, "invalid boolean value %q for -%s", &value, &name); err == nil && strings.HasSuffix(msg, ": parse error") {
		return fmt.Sprintf("--%s=%s: want true or false", strings.TrimSuffix(name, ":"), value), true
	}
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		return "", false
	}
	quoted, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	rest, ok = strings.CutPrefix(rest[len(quoted):], " for flag -")
	if !ok {
		return "", false
	}
	name, why, ok := strings.Cut(rest, ": ")
	if !ok {
		return "", false
	}
	// The reason often names the value again: `"0": must be positive`,
	// `"lots" is not a size`.
	if rest, ok := strings.CutPrefix(why, quoted+" "); ok {
		return fmt.Sprintf("--%s %s %s", name, quoted, rest), true
	}
	why = strings.TrimPrefix(why, quoted+": ")
	if why == "parse error" {
		why = fmt.Sprintf("not a value it takes (overlap %s -h says what it takes)", c.path())
	}
	return fmt.Sprintf("--%s %s: %s", name, quoted, why), true
}

// usage is the usage line, or for a group its subcommands' joined.
func (c *command) usage() string {
	if c.flags != nil || len(c.subs) == 0 {
		return c.usageLine
	}
	var lines []string
	for _, s := range c.subs {
		lines = append(lines, s.usage())
	}
	return strings.Join(lines, "\n       ")
}

// help prints the command's help, as -h does: "usage: ...", the long
// help, each flag with its default, and the subcommands.
func (c *command) help(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n", c.usage())
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", c.long)
	}
	fs, has := newFlags(c.path()), false
	if c.flags != nil {
		c.flags(fs)
		fs.VisitAll(func(*flag.Flag) { has = true })
	}
	if has {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if len(c.subs) > 0 && c.flags != nil {
		fmt.Fprintln(w, "\ncommands:")
		listCommands(w, c.subs)
	}
}

// listCommands prints each command's usage line and short description,
// and its subcommands', as overlap help lists them.
func listCommands(w io.Writer, cs []*command) {
	const col = 23 // where the descriptions start
	for _, c := range cs {
		// A command's first form (overlap infer has two); a group's
		// subcommands stand for it.
		left, _, _ := strings.Cut("  "+c.usage(), "\n")
		if c.flags == nil && len(c.subs) > 0 {
			listCommands(w, c.subs)
			continue
		}
		lines := wrap(c.short, 80-col)
		if len(left) < col-1 {
			fmt.Fprintf(w, "%-*s%s\n", col, left, lines[0])
			lines = lines[1:]
		} else {
			fmt.Fprintln(w, left)
		}
		for _, l := range lines {
			fmt.Fprintf(w, "%*s%s\n", col, "", l)
		}
		listCommands(w, c.subs)
	}
}

// wrap breaks s into lines of at most width characters, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}

// isSet reports whether the flag called name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// refusal is one check of a command's parsed flags: when bad, the flags
// are refused with err.
type refusal struct {
	bad bool
	err string
}

// refuse is the first of rs that is bad, in order, as an error; nil when
// none is. Every condition is evaluated, so each must be cheap and change
// nothing.
func refuse(rs []refusal) error {
	for _, r := range rs {
		if r.bad {
			return errors.New(r.err)
		}
	}
	return nil
}

// firstSet is the first of the flags called names that was given on the
// command line, or "" when none was.
func firstSet(fs *flag.FlagSet, names ...string) string {
	for _, n := range names {
		if isSet(fs, n) {
			return n
		}
	}
	return ""
}

// checkWritable makes sure that path can be written, when the flags are
// parsed rather than after a long run: it opens the file for writing, and
// removes it again if it did not exist.
func checkWritable(flagName, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	exists, mode := err == nil, os.O_WRONLY
	if exists && st.IsDir() {
		return fmt.Errorf("--%s %s: is a directory", flagName, path)
	} else if !exists {
		if dir := filepath.Dir(path); dir != "" {
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				return fmt.Errorf("--%s %s: no such directory %s", flagName, path, dir)
			}
		}
		mode |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, mode, 0o644)
	if err != nil {
		return fmt.Errorf("--%s %s: cannot be written: %v", flagName, path, unwrapPath(err))
	}
	if err = f.Close(); !exists {
		err = os.Remove(path)
	}
	return err
}

// unwrapPath drops an error's repetition of what it names: an
// *exec.Error's of the command ("exec: "python3": executable file not
// found in $PATH"), else an *os.PathError's of the path.
func unwrapPath(err error) error {
	var ee *exec.Error
	var pe *os.PathError
	switch {
	case errors.As(err, &ee):
		return ee.Err
	case errors.As(err, &pe):
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
