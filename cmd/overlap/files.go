package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// A command checks the files it will write against those it reads before
// it opens any of them for writing: creating an output truncates it, and
// an output that is an input, under whatever name, would destroy the input
// as it is read (the trial: --in same.f32 --out ./same.f32 left the input
// empty).

// namedFile is a path that a flag names; an empty path is no file.
type namedFile struct{ flag, path string }

// sameFile reports whether paths a and b name one file. Where both exist
// it asks os.SameFile, which sees through every spelling: relative or
// absolute, symbolic links, hard links. Where one does not exist yet, it
// compares where it would be created: its directory with links resolved,
// and its name, following a symbolic link that points to nothing yet.
func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	switch {
	case errA == nil && errB == nil:
		return os.SameFile(sa, sb)
	case errA == nil || errB == nil:
		return false // one exists and the other does not
	}
	ra, okA := wouldCreate(a)
	rb, okB := wouldCreate(b)
	return okA && okB && ra == rb
}

// wouldCreate is the absolute path, directory links resolved, of the file
// that creating path would make: path itself, or the target of the
// symbolic link at path (which points to nothing yet).
func wouldCreate(path string) (string, bool) {
	for range 40 { // as many links as Linux follows
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", false
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	return filepath.Join(dir, filepath.Base(path)), true
}

// checkOutputs refuses an output that is one of the inputs, or that
// another output names too.
func checkOutputs(outs, ins []namedFile) error {
	for i, o := range outs {
		if o.path == "" {
			continue
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
	return nil
}

// sameAsOpen reports whether path is the file that f (stdin or stdout) has
// open: false for a pipe or a terminal, which are no path's file.
func sameAsOpen(path string, f any) bool {
	file, ok := f.(*os.File)
	if !ok || file == nil {
		return false
	}
	fst, err := file.Stat()
	if err != nil || !fst.Mode().IsRegular() {
		return false
	}
	pst, err := os.Stat(path)
	return err == nil && os.SameFile(fst, pst)
}
