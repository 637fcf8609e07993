package loader

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// EnvVar names the environment variable that overrides the driver library's
// path. When it is set and not empty, it is the only path tried.
const EnvVar = "OVERLAP_CUDA_LIBRARY"

// MinDriverVersion is the oldest driver API version overlap supports, in
// cuDriverGetVersion's encoding (1000*major + 10*minor): CUDA 12.0, which is
// Linux driver 525.60.13 or Windows driver 527.41 and newer.
const MinDriverVersion = 12000

var (
	// ErrNoDriver reports that no NVIDIA driver library could be opened.
	// Errors from [Open] that find no library satisfy errors.Is(err, ErrNoDriver).
	ErrNoDriver = errors.New("loader: no NVIDIA driver found")
	// ErrUnsupported reports an operating system on which overlap cannot load
	// the CUDA driver.
	ErrUnsupported = errors.New("loader: operating system not supported")
	// ErrMissingSymbol reports a driver entry point that the opened library
	// does not provide. Errors from [Library.Resolve] wrap it as a *SymbolError.
	ErrMissingSymbol = errors.New("loader: missing driver symbol")
	// ErrDriverTooOld reports a driver older than [MinDriverVersion].
	ErrDriverTooOld = errors.New("loader: NVIDIA driver too old")
)

// Attempt records one path that [Open] tried and why it failed.
type Attempt struct {
	Path string
	Err  error
}

// OpenError is the error [Open] returns when no candidate opens. It lists
// every path tried, and errors.Is(err, ErrNoDriver) holds for it.
type OpenError struct {
	Attempts []Attempt
}

// Error lists each path tried with its failure, one per line after the
// first, without repeating the path that the system's message may start
// with.
func (e *OpenError) Error() string {
	var b strings.Builder
	b.WriteString("loader: no NVIDIA driver found; tried ")
	fmt.Fprintf(&b, "%d path(s):", len(e.Attempts))
	for _, a := range e.Attempts {
		fmt.Fprintf(&b, "\n\t%s: %s", a.Path, a.reason())
	}
	return b.String()
}

// Brief says the same in one line: how many paths were tried, and the
// reason for each path that exists but is not a usable driver library,
// which is what a user needs to act on.
func (e *OpenError) Brief() string {
	var odd []string
	missing := 0
	for _, a := range e.Attempts {
		if a.missing() {
			missing++
			continue
		}
		odd = append(odd, a.Path+": "+a.reason())
	}
	s := fmt.Sprintf("no NVIDIA driver found (tried %d path(s)", len(e.Attempts))
	if missing == len(e.Attempts) {
		if v := os.Getenv(EnvVar); v != "" && len(e.Attempts) == 1 && e.Attempts[0].Path == v {
			// The variable is set, and names nothing: say so, rather than
			// to set it.
			return s + "; " + EnvVar + " names " + v + ", which does not exist)"
		}
		return s + "; none exists; set " + EnvVar + " to the driver library's path)"
	}
	return s + "; " + strings.Join(odd, "; ") + ")"
}

// reason is the attempt's error text without a leading copy of the path.
func (a Attempt) reason() string {
	if a.Err == nil {
		return "unknown error"
	}
	return strings.TrimPrefix(a.Err.Error(), a.Path+": ")
}

// missing reports whether the attempt failed because no file was there.
func (a Attempt) missing() bool {
	r := a.reason()
	return strings.Contains(r, "No such file") || strings.Contains(r, "cannot open shared object file") ||
		strings.Contains(r, "could not be found") || a.Path == "(none)"
}

// Is reports whether target is ErrNoDriver.
func (e *OpenError) Is(target error) bool { return target == ErrNoDriver }

// Library is an opened driver library.
type Library struct {
	path   string
	handle uintptr
	// getProcAddress is cuGetProcAddress_v2, or 0 on drivers that lack it.
	getProcAddress uintptr
	version        int
	versionErr     error
}

// Path returns the path (or name) that was opened.
func (l *Library) Path() string { return l.path }

// Open finds and opens the NVIDIA driver library. It honours [EnvVar], then
// tries [Candidates] for this platform, in order. The returned error is an
// *OpenError listing every attempt, or wraps [ErrUnsupported].
func Open() (*Library, error) {
	if !platformSupported {
		return nil, fmt.Errorf("%w: %s/%s (overlap loads the CUDA driver on linux and windows)", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
	}
	return OpenFirst(Candidates(runtime.GOOS, runtime.GOARCH, os.Getenv))
}

// OpenFirst opens the first of paths that loads as a CUDA driver library: a
// library that opens and exports cuInit. It reports every failed attempt.
func OpenFirst(paths []string) (*Library, error) {
	if !platformSupported {
		return nil, fmt.Errorf("%w: %s/%s", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
	}
	oe := &OpenError{}
	for _, p := range paths {
		lib, err := openPath(p)
		if err == nil {
			return lib, nil
		}
		oe.Attempts = append(oe.Attempts, Attempt{Path: p, Err: err})
	}
	if len(oe.Attempts) == 0 {
		oe.Attempts = append(oe.Attempts, Attempt{Path: "(none)", Err: errors.New("no candidate paths")})
	}
	return nil, oe
}

// openPath opens one path and checks that it looks like the CUDA driver.
func openPath(path string) (*Library, error) {
	h, err := dlopen(path)
	if err != nil {
		return nil, err
	}
	if _, err := dlsym(h, "cuInit"); err != nil {
		dlclose(h)
		return nil, errors.New("opened, but it does not export cuInit: not a CUDA driver library")
	}
	lib := &Library{path: path, handle: h}
	if p, err := dlsym(h, "cuGetProcAddress_v2"); err == nil {
		lib.getProcAddress = p
	}
	lib.version, lib.versionErr = readVersion(h)
	return lib, nil
}

// Candidates returns the library paths that [Open] tries on goos/goarch, in
// order, with getenv supplying the environment. It is exported so that the
// search order is documented by code and testable anywhere.
func Candidates(goos, goarch string, getenv func(string) string) []string {
	if p := getenv(EnvVar); p != "" {
		return []string{p}
	}
	switch goos {
	case "windows":
		out := []string{"nvcuda.dll"}
		if root := getenv("SystemRoot"); root != "" {
			out = append(out, root+`\System32\nvcuda.dll`)
		}
		return out
	case "linux":
		out := []string{"libcuda.so.1", "libcuda.so"}
		var dirs []string
		for _, d := range strings.Split(getenv("LD_LIBRARY_PATH"), ":") {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
		multiarch := "x86_64-linux-gnu"
		if goarch == "arm64" {
			multiarch = "aarch64-linux-gnu"
		}
		dirs = append(dirs,
			"/usr/lib/"+multiarch,
			"/usr/lib64",
			"/usr/local/nvidia/lib64",
			"/usr/lib/wsl/lib",
		)
		if goarch == "arm64" {
			// Jetson and other Tegra systems keep the driver here.
			dirs = append(dirs, "/usr/lib/aarch64-linux-gnu/nvidia")
		}
		seen := map[string]bool{}
		for _, d := range dirs {
			d = strings.TrimRight(d, "/")
			if seen[d] {
				continue
			}
			seen[d] = true
			out = append(out, d+"/libcuda.so.1", d+"/libcuda.so")
		}
		return out
	default:
		return nil
	}
}
