package pipeline

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
)

// SameFile reports whether a and b are one file or one object, the check
// RunStream makes before it reads or writes anything: a streaming run
// whose output is one of its inputs would overwrite the input as it reads
// it. Each of a and b may be
//
//   - an *os.File, which is compared by what it is open on (os.SameFile
//     on Stat), so that one file reached through two opens, a relative
//     and an absolute path, a symlink or a hard link is caught;
//   - a string, a path, which is compared the same way (os.Stat, following
//     symlinks). A path that does not exist yet is never an existing file;
//     two that do not exist are compared by where creating them would put
//     the file (the directory with its links resolved, and the name,
//     following a symlink that points to nothing yet), so that a caller
//     can check its outputs against each other and its inputs before it
//     creates them;
//   - any other value, which is the same as the other only when both are
//     the same pointer (one *bytes.Buffer as input and output, say).
//
// Pipes, sockets and terminals are never the same file, whichever ends
// are given: reading one while writing it destroys nothing, and a
// terminal on standard input and output is the ordinary case. The error
// is a Stat that failed (other than for a path that does not exist).
func SameFile(a, b any) (bool, error) {
	same, err := sameFile(a, b)
	if err != nil {
		return false, fmt.Errorf("pipeline: SameFile: %w", err)
	}
	return same, nil
}

func sameFile(a, b any) (bool, error) {
	if a == nil || b == nil {
		return false, nil
	}
	if samePointer(a, b) {
		return true, nil
	}
	sa, err := statOf(a)
	if sa == nil || err != nil {
		return err == nil && bothNew(a, b), err
	}
	sb, err := statOf(b)
	if sb == nil || err != nil {
		return false, err
	}
	unshared := fs.ModeNamedPipe | fs.ModeSocket | fs.ModeCharDevice
	if sa.Mode()&unshared != 0 || sb.Mode()&unshared != 0 {
		return false, nil
	}
	return os.SameFile(sa, sb), nil
}

// samePointer reports two pointers (or maps or channels) of one type to
// the same thing. Other values are never compared: == on an interface
// holding an uncomparable value panics.
func samePointer(a, b any) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() {
		return false
	}
	switch va.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.UnsafePointer:
		return !va.IsNil() && va.Pointer() == vb.Pointer()
	}
	return false
}

// nilPointer reports a nil pointer in an interface (a nil *bytes.Reader
// as an io.Reader), which == nil does not.
func nilPointer(x any) bool {
	v := reflect.ValueOf(x)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// bothNew reports whether a and b are paths that do not exist yet and
// that creating would make one file.
func bothNew(a, b any) bool {
	pa, okA := a.(string)
	pb, okB := b.(string)
	if !okA || !okB {
		return false
	}
	if _, err := os.Stat(pb); !errors.Is(err, fs.ErrNotExist) {
		return false // b exists (or cannot be told)
	}
	ra, okA := wouldCreate(pa)
	rb, okB := wouldCreate(pb)
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

// statOf stats x when it is an *os.File or a path; nil when it is
// neither, or a path that does not exist.
func statOf(x any) (os.FileInfo, error) {
	switch v := x.(type) {
	case *os.File:
		if v == nil {
			return nil, nil
		}
		return v.Stat()
	case string:
		st, err := os.Stat(v)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return st, err
	}
	return nil, nil
}

// checkDistinct refuses a stream job in which an output is an input, or
// two outputs are one, as SameFile tells them.
func checkDistinct(job StreamJob) error {
	check := func(a, b any, an, bn string) error {
		same, err := sameFile(a, b)
		switch {
		case err != nil:
			return fmt.Errorf("pipeline: stream job: %s and %s: %w", an, bn, err)
		case same:
			return fmt.Errorf("pipeline: stream job: %s and %s are the same file: the run would overwrite one with the other", an, bn)
		}
		return nil
	}
	for j, out := range job.Outputs {
		on := streamName(job.OutputNames, "output", j)
		for i, in := range job.Inputs {
			if err := check(in, out, streamName(job.InputNames, "input", i), on); err != nil {
				return err
			}
		}
		for i := range j {
			if err := check(job.Outputs[i], out, streamName(job.OutputNames, "output", i), on); err != nil {
				return err
			}
		}
	}
	return nil
}
