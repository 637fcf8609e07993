package ptx

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotPTX marks a path that cannot be a PTX module: a directory, or a
// file larger than MaxFileSize.
var ErrNotPTX = errors.New("ptx: not a PTX file")

// fileError is a message about a file that wraps the reason's sentinel.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

// ReadFile reads a PTX file, at most MaxFileSize bytes of it, whatever the
// file says its size is (/dev/zero says 0 and never ends). A path that
// does not exist is an error that wraps os.ErrNotExist, and a directory
// or a larger file one that wraps ErrNotPTX; each names the path.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &fileError{"ptx: " + path + ": no such file", os.ErrNotExist}
		}
		return nil, fmt.Errorf("ptx: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, &fileError{"ptx: " + path + ": is a directory", ErrNotPTX}
	}
	src, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named once
		}
		return nil, fmt.Errorf("ptx: reading %s: %w", path, err)
	}
	if len(src) > MaxFileSize {
		return nil, &fileError{fmt.Sprintf("ptx: %s: larger than %d MiB: not a PTX module", path, MaxFileSize>>20), ErrNotPTX}
	}
	return src, nil
}

// Description is a parsed PTX file as overlap ptx describe --json writes
// it: the header, and each entry's parameters with their offsets in the
// parameter buffer (Layout).
type Description struct {
	Version     string             `json:"version"`
	Targets     []string           `json:"targets"`
	AddressSize int                `json:"address_size"`
	Entries     []EntryDescription `json:"entries"`
	Funcs       []string           `json:"funcs"`
}

// EntryDescription is one entry of a [Description].
type EntryDescription struct {
	Name   string             `json:"name"`
	Line   int                `json:"line"`
	Params []ParamDescription `json:"params"`
}

// ParamDescription is one parameter of an [EntryDescription].
type ParamDescription struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Size   int    `json:"size"`
	Align  int    `json:"align"`
	Offset int    `json:"offset"`
}

// Describe describes f; its lists are empty, never nil, so that they
// encode as [] rather than null. A nil f is an empty description.
func Describe(f *File) Description {
	d := Description{Targets: []string{}, Entries: []EntryDescription{}, Funcs: []string{}}
	if f == nil {
		return d
	}
	d.Version, d.AddressSize = f.Version.String(), f.AddressSize
	d.Targets = append(d.Targets, f.Targets...)
	d.Funcs = append(d.Funcs, f.Funcs...)
	for _, e := range f.Entries {
		en := EntryDescription{Name: e.Name, Line: e.Line, Params: []ParamDescription{}}
		for i, l := range Layout(e.Params) {
			p := e.Params[i]
			en.Params = append(en.Params, ParamDescription{p.Name, p.Type, p.Size, p.Align, l.Offset})
		}
		d.Entries = append(d.Entries, en)
	}
	return d
}
