package loader

import (
	"errors"
	"fmt"
	"unsafe"
)

// Symbol describes one driver entry point: the name that cuGetProcAddress
// takes, the CUDA version whose ABI the caller expects, and the name the
// library exports for that version (used when the driver lacks
// cuGetProcAddress_v2).
type Symbol struct {
	// Name is the plain API name, such as "cuMemAlloc".
	Name string
	// Version is the CUDA version (1000*major + 10*minor) whose signature
	// the caller binds, such as 3020 for cuMemAlloc_v2.
	Version int
	// Export is the versioned export name, such as "cuMemAlloc_v2".
	Export string
}

// SymbolError reports a driver entry point that could not be resolved.
// errors.Is(err, ErrMissingSymbol) holds for it.
type SymbolError struct {
	Symbol        Symbol
	DriverVersion int // 0 when unknown
	Reason        string
}

// Error names the symbol, the CUDA version asked for and the driver's version.
func (e *SymbolError) Error() string {
	return fmt.Sprintf("loader: driver symbol %s (CUDA %s ABI, export %s) not available from driver %s: %s",
		e.Symbol.Name, FormatVersion(e.Symbol.Version), e.Symbol.Export, FormatVersion(e.DriverVersion), e.Reason)
}

// Is reports whether target is ErrMissingSymbol.
func (e *SymbolError) Is(target error) bool { return target == ErrMissingSymbol }

// FormatVersion renders a CUDA version number such as 12040 as "12.4", and 0
// as "(unknown version)".
func FormatVersion(v int) string {
	if v <= 0 {
		return "(unknown version)"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// Driver query results of cuGetProcAddress_v2 (CUdriverProcAddressQueryResult).
const (
	procSuccess            = 0
	procSymbolNotFound     = 1
	procVersionInsufficent = 2
	procFlagLegacyStream   = 1 // CU_GET_PROC_ADDRESS_LEGACY_STREAM
)

// Resolve returns the entry point of s. It asks cuGetProcAddress_v2 for
// s.Name at s.Version when the driver has it, and otherwise looks up
// s.Export. A symbol the driver lacks gives a *SymbolError; Resolve never
// panics.
func (l *Library) Resolve(s Symbol) (uintptr, error) {
	if l == nil || l.handle == 0 {
		return 0, &SymbolError{Symbol: s, Reason: "no library is open"}
	}
	if l.getProcAddress != 0 && s.Name != "" {
		name := cString(s.Name)
		var fn uintptr
		var status int32
		r := call(l.getProcAddress,
			uintptr(unsafe.Pointer(&name[0])),
			uintptr(unsafe.Pointer(&fn)),
			uintptr(s.Version),
			procFlagLegacyStream,
			uintptr(unsafe.Pointer(&status)))
		if int32(r) == 0 && status == procSuccess && fn != 0 {
			return fn, nil
		}
		if int32(r) == 0 && status == procVersionInsufficent {
			return 0, &SymbolError{Symbol: s, DriverVersion: l.version,
				Reason: "the driver has this function only in a newer version than the one bound"}
		}
		// Fall through to the export table: some entry points are
		// exported but not listed by cuGetProcAddress.
	}
	if s.Export == "" {
		return 0, &SymbolError{Symbol: s, DriverVersion: l.version, Reason: "no export name to look up"}
	}
	p, err := dlsym(l.handle, s.Export)
	if err != nil || p == 0 {
		return 0, &SymbolError{Symbol: s, DriverVersion: l.version, Reason: "not exported by " + l.path}
	}
	return p, nil
}

// DriverVersion returns the driver's CUDA version as cuDriverGetVersion
// reports it (1000*major + 10*minor).
func (l *Library) DriverVersion() (int, error) {
	if l == nil {
		return 0, errors.New("loader: no library is open")
	}
	return l.version, l.versionErr
}

// CheckVersion returns an error wrapping [ErrDriverTooOld] when the driver
// is older than min, in plain words a user can act on.
func (l *Library) CheckVersion(min int) error {
	v, err := l.DriverVersion()
	if err != nil {
		return err
	}
	if v < min {
		return fmt.Errorf("%w: %s supports CUDA %s, but overlap needs CUDA %s or newer; update the NVIDIA driver",
			ErrDriverTooOld, l.path, FormatVersion(v), FormatVersion(min))
	}
	return nil
}

// readVersion calls cuDriverGetVersion, which every driver exports under its
// plain name.
func readVersion(h uintptr) (int, error) {
	p, err := dlsym(h, "cuDriverGetVersion")
	if err != nil {
		return 0, fmt.Errorf("loader: cuDriverGetVersion not exported: %v", err)
	}
	var v int32
	r := call(p, uintptr(unsafe.Pointer(&v)))
	if int32(r) != 0 {
		return 0, fmt.Errorf("loader: cuDriverGetVersion failed with CUresult %d", int32(r))
	}
	return int(v), nil
}

// cString returns s as a NUL-terminated byte slice.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
