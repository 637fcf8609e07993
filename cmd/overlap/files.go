package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/purecuda/overlap/pipeline"
)

// A command checks the files it will write against those it reads before
// it opens any of them for writing: creating an output truncates it, and
// an output that is an input, under whatever name, would destroy the input
// as it is read (the trial: --in same.f32 --out ./same.f32 left the input
// empty).

// namedFile is a path that a flag names; an empty path is no file.
type namedFile struct{ flag, path string }

// sameFile reports whether paths a and b name one file, existing or to be
// created (pipeline.SameFile); a path that cannot be told is no match.
func sameFile(a, b string) bool {
	same, err := pipeline.SameFile(a, b)
	return err == nil && same
}

// statInput is the file that a flag names for reading, refused when it
// is missing, cannot be looked at or is a directory.
func statInput(flag, path string) (os.FileInfo, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("--%s %s: no such file", flag, path)
	case err != nil:
		return nil, fmt.Errorf("--%s %s: %v", flag, path, unwrapPath(err))
	case st.IsDir():
		return nil, fmt.Errorf("--%s %s: is a directory", flag, path)
	}
	return st, nil
}

// checkOutputFiles refuses an output that is one of the inputs, or that
// another output names too, then any output that cannot be written. None
// of these outputs goes to stdout, which carries the report: "-" (which
// means stdout elsewhere) is refused, not made a file of that name.
func checkOutputFiles(outs, ins []namedFile) error {
	for i, o := range outs {
		if o.path == "" {
			continue
		}
		if o.path == "-" {
			return fmt.Errorf("--%s -: give a file name (this output does not go to stdout, which carries the report; ./- names a file called -)", o.flag)
		}
		for _, in := range ins {
			if in.path != "" && sameFile(o.path, in.path) {
				return fmt.Errorf("--%s %s is the input %s (the same file): it would be overwritten", o.flag, o.path, in.path)
			}
		}
		for _, other := range outs[:i] {
			if other.path != "" && sameFile(o.path, other.path) {
				return fmt.Errorf("--%s %s and --%s %s are the same file: give each its own", other.flag, other.path, o.flag, o.path)
			}
		}
	}
	for _, f := range outs {
		if err := checkWritable(f.flag, f.path); err != nil {
			return err
		}
	}
	return nil
}
