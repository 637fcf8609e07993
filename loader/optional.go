package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
)

// ErrNoLibrary reports that an optional NVIDIA library (NVRTC, cuBLAS,
// cuBLASLt) could not be opened. Errors from [OpenOptional] that find no
// library satisfy errors.Is(err, ErrNoLibrary).
var ErrNoLibrary = errors.New("loader: optional NVIDIA library not found")

// Optional describes a library that overlap's core never needs, but that
// packages nvrtc and cublas open at run time when asked to: where to look
// for it and how to tell that what opened is the library meant.
type Optional struct {
	// Name is the library's name in messages, such as "NVRTC".
	Name string
	// EnvVar overrides the search: when it is set and not empty, its
	// value is the only path tried.
	EnvVar string
	// Linux are the file names on Linux, newest ABI first, such as
	// libnvrtc.so.13.
	Linux []string
	// Windows are the DLL names on Windows, newest first.
	Windows []string
	// Wheels are the folders, relative to a Python site-packages folder,
	// where NVIDIA's pip wheels (the ones PyTorch installs) keep the
	// library, such as nvidia/cuda_nvrtc/lib.
	Wheels []string
	// Companions are glob patterns of libraries opened first from the
	// folder of a candidate, so that the library finds its own
	// dependencies there by their names even when that folder is not on
	// the dynamic loader's path (NVRTC loads libnvrtc-builtins by name;
	// cuBLAS needs cuBLASLt). A companion that does not open is no error.
	Companions []string
	// Probe is an entry point that the library must export, such as
	// nvrtcVersion: a file that opens but lacks it is not this library.
	Probe string
}

// The optional libraries that overlap's packages open.
var (
	// NVRTC is the CUDA runtime compiler, for package nvrtc.
	NVRTC = Optional{
		Name:       "NVRTC",
		EnvVar:     "OVERLAP_NVRTC_LIBRARY",
		Linux:      []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
		Windows:    []string{"nvrtc64_130_0.dll", "nvrtc64_120_0.dll"},
		Wheels:     []string{"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"},
		Companions: []string{"libnvrtc-builtins.so.*"},
		Probe:      "nvrtcVersion",
	}
	// CUBLAS is cuBLAS, for package cublas.
	CUBLAS = Optional{
		Name:       "cuBLAS",
		EnvVar:     "OVERLAP_CUBLAS_LIBRARY",
		Linux:      []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so"},
		Windows:    []string{"cublas64_13.dll", "cublas64_12.dll"},
		Wheels:     []string{"nvidia/cu13/lib", "nvidia/cublas/lib"},
		Companions: []string{"libcublasLt.so.13", "libcublasLt.so.12"},
		Probe:      "cublasCreate_v2",
	}
	// CUBLASLt is cuBLASLt, the matrix multiplication library that cuBLAS
	// itself calls.
	CUBLASLt = Optional{
		Name:    "cuBLASLt",
		EnvVar:  "OVERLAP_CUBLASLT_LIBRARY",
		Linux:   []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
		Windows: []string{"cublasLt64_13.dll", "cublasLt64_12.dll"},
		Wheels:  []string{"nvidia/cu13/lib", "nvidia/cublas/lib"},
		Probe:   "cublasLtCreate",
	}
)

// OptionalLibrary is an opened optional library. It stays loaded for the
// life of the process.
type OptionalLibrary struct {
	lib    Optional
	path   string
	handle uintptr
}

// Path returns the path (or name) that was opened.
func (l *OptionalLibrary) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Symbol returns the address of the exported function name. A name the
// library does not export is an error that names it and the library, for
// which errors.Is(err, ErrMissingSymbol) holds; never a panic.
func (l *OptionalLibrary) Symbol(name string) (uintptr, error) {
	if l == nil || l.handle == 0 {
		return 0, &missingExport{name: name, reason: "no library is open"}
	}
	p, err := dlsym(l.handle, name)
	if err != nil || p == 0 {
		return 0, &missingExport{name: name, reason: "not exported by " + l.lib.Name + " (" + l.path + ")"}
	}
	return p, nil
}

// missingExport is an entry point that an optional library lacks.
type missingExport struct{ name, reason string }

func (e *missingExport) Error() string        { return "loader: symbol " + e.name + ": " + e.reason }
func (e *missingExport) Is(target error) bool { return target == ErrMissingSymbol }

// OptionalError is the error [OpenOptional] returns when no candidate
// opens: it names the library and lists every path tried, and
// errors.Is(err, ErrNoLibrary) holds for it.
type OptionalError struct {
	Library  Optional
	Attempts []Attempt
}

// Error lists each path tried with its failure, one per line after the
// first.
func (e *OptionalError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "loader: %s not found; tried %d path(s):", e.Library.Name, len(e.Attempts))
	for _, a := range e.Attempts {
		fmt.Fprintf(&b, "\n\t%s: %s", a.Path, a.reason())
	}
	if e.Library.EnvVar != "" {
		fmt.Fprintf(&b, "\nset %s to the library's path", e.Library.EnvVar)
	}
	return b.String()
}

// Brief says the same in one line: the names looked for, how many paths
// were tried, and the reason for each path that exists but did not load.
func (e *OptionalError) Brief() string {
	var odd []string
	missing := 0
	for _, a := range e.Attempts {
		if a.missing() {
			missing++
			continue
		}
		odd = append(odd, a.Path+": "+a.reason())
	}
	names := e.Library.Linux
	if runtime.GOOS == "windows" {
		names = e.Library.Windows
	}
	s := fmt.Sprintf("%s (%s) not found (tried %d path(s)", e.Library.Name, strings.Join(names, ", "), len(e.Attempts))
	switch {
	case missing < len(e.Attempts):
		s += "; " + strings.Join(odd, "; ")
	case e.Library.EnvVar != "" && len(e.Attempts) == 1 && os.Getenv(e.Library.EnvVar) == e.Attempts[0].Path:
		// The variable names nothing: say so, rather than to set it.
		return s + "; " + e.Library.EnvVar + " names " + e.Attempts[0].Path + ", which does not exist)"
	case len(e.Attempts) <= 3:
		// A few paths, as the environment variable names one: say which.
		var paths []string
		for _, a := range e.Attempts {
			paths = append(paths, a.Path)
		}
		s += "; none exists: " + strings.Join(paths, ", ")
	default:
		s += "; none exists"
	}
	if e.Library.EnvVar != "" {
		s += "; set " + e.Library.EnvVar + " to its path"
	}
	return s + ")"
}

// Is reports whether target is ErrNoLibrary.
func (e *OptionalError) Is(target error) bool { return target == ErrNoLibrary }

// OpenOptional finds and opens lib: the path in lib.EnvVar when set, else
// the first of [Optional.Candidates] for this platform that opens and
// exports lib.Probe. The error is an *OptionalError listing every
// attempt, or wraps [ErrUnsupported].
func OpenOptional(lib Optional) (*OptionalLibrary, error) {
	if !platformSupported {
		return nil, fmt.Errorf("%w: %s/%s (overlap loads %s on linux and windows)", ErrUnsupported, runtime.GOOS, runtime.GOARCH, lib.Name)
	}
	return lib.OpenFirst(lib.Candidates(runtime.GOOS, runtime.GOARCH, os.Getenv, filepath.Glob))
}

// OpenFirst opens the first of paths that loads as lib, and reports every
// failed attempt.
func (lib Optional) OpenFirst(paths []string) (*OptionalLibrary, error) {
	if !platformSupported {
		return nil, fmt.Errorf("%w: %s/%s", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
	}
	oe := &OptionalError{Library: lib}
	for _, p := range paths {
		l, err := lib.openPath(p)
		if err == nil {
			return l, nil
		}
		oe.Attempts = append(oe.Attempts, Attempt{Path: p, Err: err})
	}
	if len(oe.Attempts) == 0 {
		oe.Attempts = append(oe.Attempts, Attempt{Path: "(none)", Err: errors.New("no candidate paths")})
	}
	return nil, oe
}

// openPath opens the companions beside path, then path, and checks that
// it exports the probe.
func (lib Optional) openPath(path string) (*OptionalLibrary, error) {
	if dir := filepath.Dir(path); strings.ContainsAny(path, `/\`) {
		for _, pat := range lib.Companions {
			matches, _ := filepath.Glob(filepath.Join(dir, pat))
			for _, m := range matches {
				// Kept open for the life of the process, as the library
				// that needs it is.
				if _, err := dlopen(m); err == nil {
					break
				}
			}
		}
	}
	h, err := dlopen(path)
	if err != nil {
		return nil, err
	}
	if lib.Probe != "" {
		if _, err := dlsym(h, lib.Probe); err != nil {
			dlclose(h)
			return nil, fmt.Errorf("opened, but it does not export %s: not %s", lib.Probe, lib.Name)
		}
	}
	return &OptionalLibrary{lib: lib, path: path, handle: h}, nil
}

// Candidates returns the paths that [OpenOptional] tries for lib on
// goos/goarch, in order, with getenv supplying the environment and glob
// the file system's matches (filepath.Glob). Without the override, on
// Linux: each name for the dynamic loader's own search (LD_LIBRARY_PATH,
// the ld.so cache), then $CUDA_PATH/lib64, $CUDA_HOME/lib64,
// /usr/local/cuda/lib64, /usr/local/cuda-*/lib64 (the newest version
// first), then the pip wheels' folders under the site-packages of
// $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local and the system's Pythons. On
// Windows, only full paths (a bare DLL name would be looked up in the
// program's folder first): %CUDA_PATH%\bin\x64 and \bin, then each
// toolkit under %ProgramFiles%\NVIDIA GPU Computing Toolkit\CUDA, the
// newest first.
func (lib Optional) Candidates(goos, goarch string, getenv func(string) string, glob func(string) ([]string, error)) []string {
	if lib.EnvVar != "" {
		if p := getenv(lib.EnvVar); p != "" {
			return []string{p}
		}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	switch goos {
	case "linux":
		for _, n := range lib.Linux {
			add(n)
		}
		var dirs []string
		for _, v := range []string{"CUDA_PATH", "CUDA_HOME"} {
			if r := strings.TrimRight(getenv(v), "/"); r != "" {
				dirs = append(dirs, r+"/lib64")
			}
		}
		dirs = append(dirs, "/usr/local/cuda/lib64")
		for _, r := range newestFirst(globAll(glob, "/usr/local/cuda-*")) {
			dirs = append(dirs, r+"/lib64")
		}
		for _, sp := range sitePackages(getenv, glob) {
			for _, w := range lib.Wheels {
				dirs = append(dirs, sp+"/"+w)
			}
		}
		for _, d := range dirs {
			for _, n := range lib.Linux {
				add(d + "/" + n)
			}
		}
	case "windows":
		var dirs []string
		if r := strings.TrimRight(getenv("CUDA_PATH"), `\/`); r != "" {
			dirs = append(dirs, r+`\bin\x64`, r+`\bin`)
		}
		if pf := strings.TrimRight(getenv("ProgramFiles"), `\/`); pf != "" {
			for _, r := range newestFirst(globAll(glob, pf+`\NVIDIA GPU Computing Toolkit\CUDA\v*`)) {
				dirs = append(dirs, r+`\bin\x64`, r+`\bin`)
			}
		}
		for _, d := range dirs {
			for _, n := range lib.Windows {
				add(d + `\` + n)
			}
		}
	}
	return out
}

// globAll is glob's matches, none on an error.
func globAll(glob func(string) ([]string, error), pattern string) []string {
	if glob == nil {
		return nil
	}
	m, err := glob(pattern)
	if err != nil {
		return nil
	}
	return m
}

// sitePackages lists the Python site-packages folders that exist where
// pip wheels may be: a virtual environment's, a conda environment's, the
// user's and the system's, the newest Python first in each.
func sitePackages(getenv func(string) string, glob func(string) ([]string, error)) []string {
	type root struct{ pythons, sub string }
	var roots []root
	for _, v := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if r := strings.TrimRight(getenv(v), "/"); r != "" {
			roots = append(roots, root{r + "/lib/python3*", "site-packages"})
		}
	}
	if h := strings.TrimRight(getenv("HOME"), "/"); h != "" {
		roots = append(roots, root{h + "/.local/lib/python3*", "site-packages"})
	}
	roots = append(roots,
		root{"/usr/local/lib/python3*", "dist-packages"},
		root{"/usr/local/lib/python3*", "site-packages"},
		root{"/usr/lib/python3", "dist-packages"},
		root{"/usr/lib/python3*", "site-packages"},
	)
	var out []string
	for _, r := range roots {
		for _, py := range newestFirst(globAll(glob, r.pythons)) {
			out = append(out, py+"/"+r.sub)
		}
	}
	return out
}

// newestFirst sorts paths that end in a version (cuda-12.4, v13.0,
// python3.12) by that version, the newest first; ties and paths without
// a version keep their order after the versioned ones.
func newestFirst(paths []string) []string {
	out := append([]string(nil), paths...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := versionOf(out[i]), versionOf(out[j])
		for k := 0; k < len(a) && k < len(b); k++ {
			if a[k] != b[k] {
				return a[k] > b[k]
			}
		}
		return len(a) > len(b)
	})
	return out
}

// versionOf reads the dotted number at the end of a path's last element:
// [12 4] for /usr/local/cuda-12.4.
func versionOf(p string) []int {
	base := p[strings.LastIndexAny(p, `/\`)+1:]
	i := len(base)
	for i > 0 && (base[i-1] == '.' || base[i-1] >= '0' && base[i-1] <= '9') {
		i--
	}
	var v []int
	for _, f := range strings.Split(strings.Trim(base[i:], "."), ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}
